"""The allow-lists of ``ADVISORY_CRON["SCHEDULE_COMMANDS"]`` and ``["SCHEDULE_CELERY_TASKS"]``
in the definition rules and the settings' checks (issue 33; through the admin, ``cronjob``
and real workers: tests/test_schedule_allow_list.py)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from django_advisory_cron import conf
from django_advisory_cron.conf import app_settings
from django_advisory_cron.jobs.definitions import Definition


def test_a_celery_task_is_held_to_its_own_list() -> None:
    (problem,) = Definition("x", job="proj.tasks.wipe", deliver="celery", every=60).problems()
    assert problem == (
        "Celery task proj.tasks.wipe is not a task a schedule may send; add 'proj.tasks.wipe' "
        "to ADVISORY_CRON['SCHEDULE_CELERY_TASKS'] to allow it"
    )


@pytest.mark.parametrize("value", ["shell", ["shell", 3], [""]])
def test_an_allow_list_is_a_list_of_names(value: object) -> None:
    with override_settings(ADVISORY_CRON={"SCHEDULE_COMMANDS": value}):
        (problem,) = conf.problems()
        assert (problem.key, problem.check_id) == ("SCHEDULE_COMMANDS", "E176")
        assert not app_settings.SCHEDULE_COMMANDS  # nothing is allowed meanwhile
