"""Every command's arguments, in real ``manage.py`` subprocesses: a value out of its bounds,
not a number, not storable, is refused in one line with the usage exit code (2), never run
with nor met by a traceback (issue 33, item 9); and the shared argument types, for any text:
a value within their bounds, or their one-line refusal."""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron import exitcodes
from django_advisory_cron.core import moments
from django_advisory_cron.management import arguments
from django_advisory_cron.models import JobRun, JobState, Schedule
from django_advisory_cron.run import control
from django_advisory_cron.run.declared import aware

#: A byte that is not UTF-8, as the command line hands it to Python (and a subprocess back).
NOT_UTF8 = "\udcff"
ADD = ("cronjob", "add", "arguments.x", "--command", "check")
REFUSED = [
    ("runlocked", "-w", "nan", "quick_scheduled"),
    ("runlocked", "-w", "inf", "quick_scheduled"),
    ("runlocked", "-w=-inf", "quick_scheduled"),
    ("runlocked", "-w", "-1", "quick_scheduled"),
    ("runlocked", "-w", "1e300", "quick_scheduled"),
    ("runlocked", "-w", "", "quick_scheduled"),
    ("runlocked", "-E", "256", "quick_scheduled"),
    ("runlocked", "-E", "99999999999999999999", "quick_scheduled"),
    ("runlocked", "--tick", "9999-12-31T23:59:59-14:00", "quick_scheduled"),
    ("runlocked", "--scope", "everywhere", "quick_scheduled"),
    ("runlocked", f"quick{NOT_UTF8}"),
    ("cronworker", "--grace", "nan"),
    ("cronworker", "--grace", "1e300"),
    ("cronworker", "--max-concurrency", "0"),
    ("cronworker", "--max-concurrency", "99999999999999999999"),
    ("cronjob", "history", "quick_scheduled", "--limit", "99999999999999999999"),
    ("cronjob", "history", "quick_scheduled", "--limit", "0"),
    ("cronjob", "pause", "quick_scheduled", "--until", "99999999d"),
    ("cronjob", "pause", "quick_scheduled", "--until", "9" * 400 + "s"),
    ("cronjob", "pause", "quick_scheduled", "--until", "9999-12-31T23:59:59-14:00"),
    ("cronjob", "pause", "quick_scheduled", "--reason", f"disk{NOT_UTF8}"),
    ("cronjob", "list", "--everything"),
    ("cronjob", "--verbosity", "9", "list"),
    (*ADD, "--every", "10", "--description", f"nightly{NOT_UTF8}"),
    ("cronjob", "add", f"arguments{NOT_UTF8}", "--command", "check", "--every", "10"),
    (*ADD, "--every", "10", "--max-lateness", "inf"),
    (*ADD, "--every", "10", "--args", '["\\ud800"]'),
    (*ADD, "--every", "10", "--starts", "9999-12-31T23:59:59-14:00"),
    ("cronstatus", "--expect-workers", "99999999999999999999"),
    ("cronstatus", "--expect-workers", "-1"),
    ("prune_jobruns", "--days", "-1"),
    ("prune_jobruns", "--days", "0"),
    ("prune_jobruns", "--days", "99999999"),
    ("prune_jobruns", "--days", "99999999999999999999"),
    ("prune_jobruns", "--batch-size", "99999999999999999999"),
    ("prune_jobruns", "--job", NOT_UTF8),
]


@pytest.mark.usefixtures("transactional_db")
@pytest.mark.parametrize("command", REFUSED, ids=lambda command: " ".join(command)[:60])
def test_a_bad_argument_is_one_line_and_exit_2(
    manage: Callable[..., Any], command: tuple[str, ...]
) -> None:
    done = manage(*command)
    assert (done.returncode, done.stderr.count("\n")) == (exitcodes.USAGE, 1), done.stderr[-3000:]
    assert done.stderr.startswith(f"{command[0]}: ") and "Traceback" not in done.stderr
    # Nothing ran, nothing was written.
    assert not JobRun.objects.exists() and not JobState.objects.exists()
    assert not Schedule.objects.exists()


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
