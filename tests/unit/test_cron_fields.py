"""core/cron_fields.py finds the same wall-clock times as croniter stepping through the same
expression, read with the same day rule, from any instant, forwards and backwards; its
extensions (``L``, ``#``, ``W``) included."""

from __future__ import annotations

from datetime import datetime, timezone

from croniter import CroniterError, croniter
from hypothesis import example, given, settings
from hypothesis import strategies as st

from django_advisory_cron.core.cron_fields import fields
from django_advisory_cron.core.cron_reading import day_reading, one_value_ranges


def field(low: int, high: int) -> st.SearchStrategy[str]:
    """One cron field: ``*``, a step, a range (with a step), a list."""
    number = st.integers(low, high)
    return st.one_of(
        st.just("*"),
        st.integers(1, high - low + 1).map(lambda step: f"*/{step}"),
        st.tuples(number, number, st.sampled_from(["", "/2", "/3", "/7"])).map(
            lambda t: f"{min(t[:2])}-{max(t[:2])}{t[2]}"
        ),
        st.lists(number, min_size=1, max_size=3).map(lambda values: ",".join(map(str, values))),
        number.map(lambda value: f"*,{value}"),  # croniter: the whole field
    )


#: Day fields with croniter's extensions: the last day, the nearest weekday, the nth weekday.
day_extensions = st.sampled_from(["L", "1,L", "15,L", "15W", "1W", "31W", "30W"])
weekday_extensions = st.sampled_from(["5#2", "L5", "0#5", "sun#1", "1#1,1#3", "L0", "2#5"])
expressions = st.tuples(
    field(0, 59),
    field(0, 23),
    field(1, 31) | day_extensions,
    field(1, 12),
    field(0, 7) | weekday_extensions,
    st.just("") | field(0, 59),
).map(lambda fields: " ".join(part for part in fields if part))
instants = st.datetimes(datetime(2001, 1, 1), datetime(2090, 1, 1))


@settings(deadline=None)  # croniter may take its time over a rare day
@given(expressions, instants)
@example("0 0 */2 * 1", datetime(2026, 3, 1, 0, 0))
@example("0 0 1-31/2 * 1", datetime(2026, 3, 1, 0, 0, 0, 1))
@example("0 5-5 * 4-4 1-1/2", datetime(2026, 3, 1, 0, 0))
@example("0 2 29 2 *", datetime(2024, 2, 29, 2, 0))
@example("* * * * * */10", datetime(2026, 12, 31, 23, 59, 59, 999999))
@example("@weekly", datetime(2026, 3, 1))
@example("0 0 L * *", datetime(2024, 2, 28, 23, 59))
@example("0 0 L 2 1", datetime(2026, 3, 1))
@example("30 9 15W * *", datetime(2026, 8, 14, 12))
@example("0 0 * * L5", datetime(2026, 12, 31))
@example("0 0 * * 1#2", datetime(2026, 3, 9, 0, 0, 0, 1))
@example("0 0 13 * 2#5", datetime(2026, 3, 1))
@example("0 0 5 * *,1", datetime(2026, 1, 5))
@example("0 0 L,* * *", datetime(2026, 1, 5))
def test_the_same_times_as_croniter(expression: str, start: datetime) -> None:
    text, day_or = day_reading(one_value_ranges(expression))  # as Schedule reads it
    read = fields(text, day_or=day_or)
    try:
        walls = croniter(text, start.replace(tzinfo=timezone.utc), day_or=day_or)
    except CroniterError:  # an expression croniter refuses is no case here
        return
    for step, find in (("get_next", read.next_after), ("get_prev", read.previous_before)):
        walls.set_current(start.replace(tzinfo=timezone.utc), force=True)
        try:
            expected = [getattr(walls, step)(datetime).replace(tzinfo=None) for _ in range(3)]
        except CroniterError:  # no time within croniter's 50 years
            continue
        found, at = [], start
        for _ in range(3):
            moment = find(at)
            assert moment is not None
            found.append(moment)
            at = moment
        assert found == expected, (expression, step)
