"""What computing a cron schedule's next tick costs, against croniter's own ``get_next``.

Run on demand: ``python benchmarks/bench_schedule.py [--calls N] [--repeats N] [--no-year]``.
No database. For each expression, two measures, each taking turns call by call with its
baseline (medians per repeat, the median ratio printed with the goal, 0.05 ms per next tick):

- from an instant: ``Schedule.next_tick`` (the schedule parsed once, as a job keeps it; its
  zone's daylight saving rules applied) from successive instants 7 s apart, as a scheduler's
  clock moves on; the baseline is a new croniter on the same expression from the same instant
  (as a scheduler that keeps no iterator builds one);
- successive ticks: ``next_tick`` from the tick before, as the next-ticks preview, backfill
  and the timeline walk a schedule; the baseline is one croniter iterator's ``get_next``.

Then the ticks of a year of ``* * * * *`` in Europe/Berlin, walked with ``next_tick``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measure import interleaved  # noqa: E402

#: Expressions and the zones they are read in: minutely, daily, office hours, a leap day, a
#: seconds field, croniter's extensions (the last day of the month, the first Monday).
EXPRESSIONS = [
    ("* * * * *", "Europe/Berlin"),
    ("*/5 * * * *", "Europe/Berlin"),
    ("0 2 * * *", "Europe/Berlin"),
    ("*/15 9-17 * * 1-5", "America/New_York"),
    ("0 0 */2 * 1", "UTC"),
    ("0 0 29 2 *", "Australia/Lord_Howe"),
    ("* * * * * */10", "UTC"),
    ("0 0 L * *", "Europe/Berlin"),
    ("0 9 * * 1#1", "America/New_York"),
]
GOAL_MS = 0.05
START = datetime(2026, 3, 1, 12, 0, 7, tzinfo=timezone.utc)
#: An expression, its zone, our call and the baseline's.
Row = tuple[str, str, Callable[[], object], Callable[[], object]]


def compare(label: str, pairs: list[Row], calls: int, repeats: int) -> None:
    """One table: per expression, ours and the baseline, ms per call, and the ratios."""
    print(f"\n{label}")
    print(f"{'expression':18} {'zone':20} {'ours':>8} {'croniter':>9} {'ratio, per repeat':>24}")
    for expression, zone, ours, theirs in pairs:
        mine, base = [], []
        for _ in range(repeats):
            ours_ms, theirs_ms = interleaved([ours, theirs], calls)
            mine.append(ours_ms)
            base.append(theirs_ms)
        ratios = " / ".join(f"{m / b:.2f}" for m, b in zip(mine, base, strict=True))
        median = statistics.median(mine)
        print(
            f"{expression:18} {zone:20} {median:8.4f} {statistics.median(base):9.4f} "
            f"{ratios:>24}  {'met' if median <= GOAL_MS else 'NOT'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per row and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-year", action="store_true", help="skip the year of ticks")
    options = parser.parse_args()

    from croniter import croniter
    from django.conf import settings

    settings.configure(TIME_ZONE="UTC", USE_TZ=True)
    from django_advisory_cron.core.schedule import Schedule

    print(
        f"{options.calls} calls per row and repeat, {options.repeats} repeats; median ms per "
        f"call; goal: next_tick at most {GOAL_MS} ms; ratio: ours / croniter's get_next"
    )
    # Successive instants, as a scheduler's clock moves on; both start from the same ones.
    instants = [START + timedelta(seconds=7 * n) for n in range(997)]
    from_instants: list[Row] = []
    successive: list[Row] = []
    for expression, zone in EXPRESSIONS:
        schedule = Schedule(expression, zone=zone)
        mine_at, theirs_at = itertools.cycle(instants), itertools.cycle(instants)

        def ours(schedule: Schedule = schedule, at: Iterator[datetime] = mine_at) -> None:
            schedule.next_tick(next(at))

        def theirs(expression: str = expression, at: Iterator[datetime] = theirs_at) -> None:
            croniter(expression, next(at)).get_next(datetime)

        from_instants.append((expression, zone, ours, theirs))

        last = [START]
        walk = croniter(expression, START)

        # Both walks start again from START past the year 2300 (a leap day's walk goes far).
        def our_walk(schedule: Schedule = schedule, last: list[datetime] = last) -> None:
            last[0] = schedule.next_tick(last[0])
            if last[0].year > 2300:
                last[0] = START

        def their_walk(walk: croniter = walk) -> None:
            if walk.get_next(datetime).year > 2300:
                walk.set_current(START, force=True)

        successive.append((expression, zone, our_walk, their_walk))

    compare("next tick from an instant", from_instants, options.calls, options.repeats)
    compare("successive ticks (one croniter iterator)", successive, options.calls, options.repeats)

    if not options.no_year:
        schedule, tick, count = Schedule("* * * * *", zone="Europe/Berlin"), START, 0
        started = time.perf_counter()
        while tick < START + timedelta(days=365):
            tick, count = schedule.next_tick(tick), count + 1
        seconds = time.perf_counter() - started
        print(
            f"\na year of '* * * * *' in Europe/Berlin: {count:,} ticks in {seconds:.1f} s "
            f"({seconds / count * 1000:.4f} ms per tick)"
        )


if __name__ == "__main__":
    main()
