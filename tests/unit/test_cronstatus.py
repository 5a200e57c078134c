"""A cron expression in words, as the Jobs page, ``cronstatus`` and ``cronjob list`` say it
(the commands themselves: tests/test_cronstatus.py): cron-descriptor's wording, with the
seconds field last and the two day fields read as cron reads them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron.core.schedule import Schedule
from django_advisory_cron.ops.describe import describe


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("*/5 * * * *", "Every 5 minutes"),
        ("* * * * *", "Every minute"),
        ("15 * * * *", "At 15 minutes past the hour"),
        ("30 2 * * *", "At 02:30"),
        ("0 9 * * 1", "At 09:00, only on Monday"),
        ("30 9 * * 1-5", "At 09:30, Monday through Friday"),
        ("0 0 * * 7", "At 00:00, only on Sunday"),
        ("@daily", "At 00:00"),
        ("@hourly", "Every hour"),
        # Seconds last, as croniter reads them.
        ("0 3 * * * 30", "At 03:00:30"),
        ("* * * * * */10", "Every 10 seconds"),
        # Both day fields restricted: both must match when one starts with "*", else either.
        ("0 0 */2 * 1", "At 00:00, every 2 days, and only on Monday"),
        ("0 0 1,15 * 1", "At 00:00, on day 1 and 15 of the month, or on Monday"),
        ("not a cron", "not a cron"),
    ],
)
def test_describe(expression: str, text: str) -> None:
    assert describe(expression) == text


FIELD = st.one_of(
    st.just("*"),
    st.integers(0, 59).map(str),
    st.integers(2, 15).map(lambda step: f"*/{step}"),
    st.tuples(st.integers(0, 20), st.integers(21, 59)).map(lambda r: f"{r[0]}-{r[1]}"),
)


@given(
    minute=FIELD,
    hour=st.one_of(st.just("*"), st.integers(0, 23).map(str)),
    day=st.one_of(st.just("*"), st.integers(1, 28).map(str), st.just("*/2")),
    weekday=st.one_of(st.just("*"), st.integers(0, 7).map(str), st.just("1-5")),
)
def test_whatever_the_rules_accept_reads_in_words(
    minute: str, hour: str, day: str, weekday: str
) -> None:
    expression = f"{minute} {hour} {day} * {weekday}"
    Schedule(expression)  # accepted
    said = describe(expression)
    assert said != expression and said[0].isupper() and "\n" not in said, said
