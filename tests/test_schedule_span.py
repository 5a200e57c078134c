"""A schedule's start and end have one span, the options' table's (issue 35): ``cronjob add``
names that span for any time out of it, never a wider one it would refuse anyway."""

from __future__ import annotations

from typing import Any

import pytest

from django_advisory_cron.models import Schedule

from .test_cronjob_schedules import refused, schedule_jobs  # noqa: F401  (a fixture)

pytestmark = pytest.mark.usefixtures("transactional_db", "schedule_jobs")


@pytest.mark.parametrize(
    ("when", "shown"),
    [
        ("0001-01-01T00:00", "0001-01-01T00:00:00+00:00"),  # past what a date-time holds in UTC
        ("1960-01-01T00:00", "1960-01-01T00:00:00+00:00"),  # held, and out of the span
        ("9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59-14:00"),
    ],
)
def test_add_names_the_one_span_of_a_start(manage: Any, when: str, shown: str) -> None:
    done = manage("cronjob", "add", "x", "--command", "noop", "--every", "60", "--starts", when)
    assert refused(done) == (
        "cronjob: cannot add 'x': the start must be from 1970-01-01 to 9999-01-01 (UTC), "
        f"not {shown}"
    )
    assert not Schedule.objects.exists()
