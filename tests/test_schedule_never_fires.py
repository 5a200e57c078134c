"""Schedules that can never fire (30 February) are reported by ``manage.py check`` and a usage
error for ``runlocked`` and ``cronworker`` (refused where declared:
tests/unit/test_schedule_never_fires.py)."""

from __future__ import annotations

from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun

SETTINGS = "--settings=tests.badjobs_never.settings"


def test_check_reports_schedules_that_never_fire(manage: Any) -> None:
    result = manage("check", SETTINGS)
    print(result.returncode, result.stderr)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "django_advisory_cron.E007" in line]
    assert len(errors) == 1, result.stderr
    assert "'thirtieth_of_february'" in errors[0] and "'0 0 30 2 *' never fires" in errors[0]
    # Rare is not never: cron ORs a day of the month with a weekday, and 29 February exists.
    assert "mondays_in_february" not in result.stderr and "leap_days" not in result.stderr
    assert "E005" not in result.stderr


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("options", [(), ("--skip-checks",)])
def test_runlocked_of_a_never_firing_job_is_a_usage_error(
    manage: Any, options: tuple[str, ...]
) -> None:
    result = manage("runlocked", SETTINGS, *options, "thirtieth_of_february")
    print(result.returncode, result.stderr)
    assert result.returncode == exitcodes.USAGE, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'thirtieth_of_february'" in lines[0] and "'0 0 30 2 *' never fires" in lines[0]
    assert "failed to find" not in lines[0] and "could not start" not in lines[0]
    assert not JobRun.objects.exists()


def test_cronworker_refuses_a_never_firing_job(manage: Any) -> None:
    result = manage("cronworker", SETTINGS, "thirtieth_of_february")
    print(result.returncode, result.stderr)
    assert result.returncode == exitcodes.USAGE, result.stderr
    assert "Traceback" not in result.stderr and "failed to find" not in result.stderr
    assert "'thirtieth_of_february'" in result.stderr and "never fires" in result.stderr
