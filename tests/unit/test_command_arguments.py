"""The shared argument types of the management commands, for any text: a value within their
bounds, or their one-line refusal (the commands themselves: tests/test_command_arguments.py)."""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron.core import moments
from django_advisory_cron.core.moments import UTC
from django_advisory_cron.jobs.declared import aware
from django_advisory_cron.management import arguments, backfill
from django_advisory_cron.ops import control

#: A byte that is not UTF-8, as the command line hands it to Python (and a subprocess back).
NOT_UTF8 = "\udcff"


def read(parse: Callable[[], Any], refused: type[Exception]) -> tuple[Any, str | None]:
    """What ``parse`` returns, or the message of its refusal (``refused``), asserted one line;
    any other exception fails the test."""
    try:
        return parse(), None
    except refused as error:
        message = str(error)
        assert message and "\n" not in message
        return None, message


#: Texts near the values the types read: numbers of every kind, and anything else.
TEXTS = st.one_of(
    st.text(),
    st.floats().map(repr),
    st.integers().map(str),
    st.from_regex(r"\A\s*-?\d{0,25}(\.\d*)?(e-?\d{1,4})?\s*\Z"),
    st.sampled_from(["nan", "inf", "-inf", "1e300", "1_0", " 7 ", "", NOT_UTF8, "\x00"]),
)
KINDS: list[Any] = [
    arguments.WAIT,
    arguments.EXIT_STATUS,
    arguments.CONCURRENCY,
    arguments.WORKERS,
    arguments.LIMIT,
    arguments.DAYS,
    arguments.BATCH,
]


@given(TEXTS)
def test_a_number_type_gives_a_value_within_its_bounds_or_one_line(text: str) -> None:
    for kind in KINDS:
        value, refusal = read(functools.partial(kind, text), argparse.ArgumentTypeError)
        if refusal is None:
            assert math.isfinite(value) and kind.least <= value <= kind.most
            assert kind(value) == value  # the same value passes again (call_command)


@given(st.one_of(st.text(), st.sampled_from([NOT_UTF8, "a\x00b", "é"])))
def test_text_is_storable_or_one_line(value: str) -> None:
    kept, refusal = read(lambda: arguments.text(value), argparse.ArgumentTypeError)
    if refusal is None:
        assert kept == value and "\x00" not in kept
        kept.encode()  # UTF-8


NOW = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)
UNTIL = st.one_of(
    st.text(),
    st.from_regex(r"\A\d{1,20}(\.\d{1,5})?(w|d|h|m|min|s)(\d{1,9}(w|d|h|m|s))?\Z"),
    st.datetimes().map(lambda moment: moment.isoformat()),
    st.builds(
        lambda moment, minutes: (
            f"{moment.isoformat()}{'+' if minutes >= 0 else '-'}"
            f"{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
        ),
        st.datetimes(),
        st.integers(-1500, 1500),
    ),
)


@given(UNTIL)
def test_until_and_a_schedule_date_are_within_the_span_or_one_line(text: str) -> None:
    until, refusal = read(lambda: control.parse_until(text, NOW), ValueError)
    if refusal is None:
        assert until > NOW and moments.within(until)
    moment, refusal = read(lambda: aware(text, "--starts"), ValueError)
    if refusal is None:
        assert moments.within(moment)


@given(UNTIL)
def test_a_backfill_moment_is_within_the_span_or_one_line(text: str) -> None:
    """``cronjob backfill --start/--end``: a duration counts back from now."""
    moment, refusal = read(lambda: control.parse_moment(text, NOW, back=True), ValueError)
    if refusal is None:
        assert moments.within(moment)
        if text.strip().endswith(("s", "m", "h", "d", "w", "min")):
            assert moment <= NOW


def test_a_backfill_moment_reads_a_duration_back_and_a_date_time_as_written() -> None:
    assert control.parse_moment("1h30m", NOW, back=True) == datetime(2026, 12, 5, 6, 30, tzinfo=UTC)
    assert control.parse_moment("2026-12-01T02:00+00:00", NOW, back=True) == datetime(
        2026, 12, 1, 2, 0, tzinfo=UTC
    )


def test_the_backfill_bar_grows_to_its_width() -> None:
    assert backfill.bar(0, 4) == "[--------------------] 0/4"
    assert backfill.bar(1, 3) == "[######--------------] 1/3"
    assert backfill.bar(12, 12) == "[####################] 12/12"
    assert backfill.bar(7, 120) == "[#-------------------]   7/120"


@pytest.mark.parametrize(
    ("kind", "value", "refusal"),
    [
        (arguments.WAIT, "nan", "must be a number of seconds from 0 to 86400, not 'nan'"),
        (arguments.WAIT, "-1", "must be a number of seconds from 0 to 86400, not '-1'"),
        (arguments.WAIT, True, "must be a number of seconds from 0 to 86400, not True"),
        (arguments.EXIT_STATUS, "256", "must be a whole number from 0 to 255, not '256'"),
        (arguments.LIMIT, "1.5", "must be a whole number from 1 to 10000, not '1.5'"),
        (arguments.DAYS, 7.0, "must be a whole number from 1 to 36500, not 7.0"),
        (arguments.BATCH, "9" * 50, f"must be a whole number from 1 to 100000, not '{'9' * 36}..."),
    ],
)
def test_a_refusal_says_the_kind_its_bounds_and_the_value_shortened(
    kind: Any, value: object, refusal: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        kind(value)
    assert str(raised.value) == refusal


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        (arguments.WAIT, "0", 0.0),
        (arguments.WAIT, "86400", 86400.0),
        (arguments.WAIT, "2.5", 2.5),
        (arguments.WAIT, 1, 1.0),
        (arguments.EXIT_STATUS, " 7 ", 7),
        (arguments.EXIT_STATUS, 255, 255),
        (arguments.WORKERS, "0", 0),
    ],
)
def test_a_value_within_the_bounds_is_read(kind: Any, value: object, expected: float) -> None:
    found = kind(value)
    assert found == expected and type(found) is type(expected)


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        (3, "must be text, not 3"),
        ("a\x00b", "must be UTF-8 text without NUL characters, not 'a\\x00b'"),
        (
            f"report-{NOT_UTF8}.csv",
            "must be UTF-8 text without NUL characters, not 'report-\\udcff.csv'",
        ),
    ],
)
def test_text_refusals_name_the_value_on_one_line(value: object, refusal: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        arguments.text(value)
    assert str(raised.value) == refusal
