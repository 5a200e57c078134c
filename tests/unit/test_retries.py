"""Retries within a tick, as declared (the runs that retry, against real PostgreSQL:
tests/test_retries.py): the options ``@locked_task`` takes or refuses in one line, and the
back-off between attempts, for any attempt and any draw of the jitter."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron import locked_task
from django_advisory_cron.core.retries import RetryPolicy


def nothing() -> None:
    return None


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": -1}, "retries must be a whole number >= 0, not -1"),
        ({"retries": True}, "retries must be a whole number >= 0, not True"),
        ({"retries": 1.5}, "retries must be a whole number >= 0, not 1.5"),
        ({"retries": "3"}, "retries must be a whole number >= 0, not '3'"),
        ({"retries": 1, "retry_backoff": 0}, "retry_backoff must be a number of seconds > 0"),
        ({"retries": 1, "retry_backoff": math.nan}, "retry_backoff must be a number of seconds"),
        ({"retries": 1, "retry_backoff": True}, "retry_backoff must be a number of seconds > 0"),
        ({"retries": 1, "retry_backoff_max": math.inf}, "retry_backoff_max must be a number"),
        ({"retries": 1, "retry_on": ()}, "retry_on must be an exception class or a tuple"),
        ({"retries": 1, "retry_on": int}, "retry_on must be an exception class or a tuple"),
        ({"retries": 1, "retry_on": (OSError, "x")}, "retry_on must be an exception class"),
    ],
)
def test_bad_retry_options_are_refused_in_one_line(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}") as raised:
        locked_task(name="retrying", **options)(nothing)
    assert "\n" not in str(raised.value)


@pytest.mark.usefixtures("fresh_registry")
def test_the_options_make_the_jobs_policy() -> None:
    job = locked_task(
        name="retrying", retries=2, retry_backoff=3, retry_backoff_max=10, retry_on=OSError
    )(nothing)
    assert job.retry == RetryPolicy(2, 3.0, 10.0, (OSError,))
    assert locked_task(name="once", retries=0)(nothing).retry is None


def test_which_failures_are_retried() -> None:
    policy = RetryPolicy(2, retry_on=(OSError, TimeoutError))
    assert policy.retries_after(1, ConnectionError())  # an OSError
    assert policy.retries_after(2, TimeoutError())
    assert not policy.retries_after(3, OSError())  # the retries are spent
    assert not policy.retries_after(1, ValueError())
    assert not RetryPolicy(1).retries_after(1, KeyboardInterrupt())  # not an Exception


@pytest.mark.parametrize(
    ("failed", "expected"), [(1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (60, 10.0)]
)
def test_the_back_off_doubles_up_to_its_cap(failed: int, expected: float) -> None:
    policy = RetryPolicy(5, backoff=2, backoff_max=10)
    assert policy.delay(failed, draw=0.0) == expected / 2  # the jitter's least: half
    assert policy.delay(failed, draw=math.nextafter(1.0, 0.0)) == pytest.approx(expected)


@given(
    backoff=st.floats(1e-3, 1e4),
    backoff_max=st.floats(1e-3, 1e6),
    failed=st.integers(1, 10**6),  # past the 1,024th doubling a float cannot hold it
    draw=st.one_of(st.none(), st.floats(0.0, 1.0, exclude_max=True)),
)
def test_any_delay_is_within_half_and_all_of_the_capped_back_off(
    backoff: float, backoff_max: float, failed: int, draw: float | None
) -> None:
    doubled = backoff * 2.0 ** (failed - 1) if failed <= 1024 else math.inf
    capped = min(doubled, backoff_max)
    delay = RetryPolicy(1, backoff, backoff_max).delay(failed, draw)
    assert capped / 2 <= delay <= capped and math.isfinite(delay)
