"""What computing a cron schedule's next tick costs, against croniter's own ``get_next``.

Run on demand: ``python benchmarks/bench_schedule.py [--calls N] [--repeats N]``. No database.
For each expression, ``Schedule.next_tick`` (the schedule parsed once, as a job keeps it; its
zone's daylight saving rules applied) and croniter's ``get_next`` on the same expression from
the same instant (a new croniter each call, as a scheduler that keeps no iterator builds one)
take turns call by call; the medians of each repeat are divided, and the median ratio is
printed with the goal (0.05 ms per next tick).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measure import interleaved  # noqa: E402

#: Expressions and the zones they are read in: minutely, daily, weekdays, seconds.
EXPRESSIONS = [
    ("*/5 * * * *", "Europe/Berlin"),
    ("0 2 * * *", "Europe/Berlin"),
    ("30 9 * * 1-5", "America/New_York"),
    ("0 0 */2 * 1", "UTC"),
    ("* * * * * */10", "UTC"),
]
GOAL_MS = 0.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per row and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()

    from croniter import croniter
    from django.conf import settings

    settings.configure(TIME_ZONE="UTC", USE_TZ=True)
    from django_advisory_cron.core.schedule import Schedule

    start = datetime(2026, 3, 1, 12, 0, 7, tzinfo=timezone.utc)
    print(
        f"{options.calls} calls per row and repeat, {options.repeats} repeats; median ms per "
        f"call; goal: next_tick at most {GOAL_MS} ms\n"
    )
    header = f"{'expression':18} {'zone':17} {'next_tick':>9} {'croniter':>9}"
    print(f"{header} {'ratio, per repeat':>24}")
    for expression, zone in EXPRESSIONS:
        schedule = Schedule(expression, zone=zone)
        # Successive instants, as a scheduler's clock moves on; both start from the same ones.
        instants = [start + timedelta(seconds=7 * n) for n in range(997)]
        mine_at, theirs_at = itertools.cycle(instants), itertools.cycle(instants)

        def ours(schedule: Schedule = schedule, at: Iterator[datetime] = mine_at) -> None:
            schedule.next_tick(next(at))

        def theirs(expression: str = expression, at: Iterator[datetime] = theirs_at) -> None:
            croniter(expression, next(at)).get_next(datetime)

        mine, base = [], []
        for _ in range(options.repeats):
            ours_ms, theirs_ms = interleaved([ours, theirs], options.calls)
            mine.append(ours_ms)
            base.append(theirs_ms)
        ratios = " / ".join(f"{m / b:.2f}" for m, b in zip(mine, base, strict=True))
        median = statistics.median(mine)
        print(
            f"{expression:18} {zone:17} {median:9.4f} {statistics.median(base):9.4f} "
            f"{ratios:>24}  {'met' if median <= GOAL_MS else 'NOT'}"
        )
    print("\nratio: next_tick / croniter's get_next, each repeat's medians")


if __name__ == "__main__":
    main()
