"""A schedule's name is what its lock, ticks and history go by, so it cannot change once the
schedule exists (issue 33): a renamed schedule would start its new name's first tick beside a
run of the old one. The admin's change form (test client) shows the name read-only and keeps
it whatever is posted, and ``cronjob edit`` has no rename."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from django_advisory_cron import exitcodes
from django_advisory_cron.models import Schedule

from .test_admin_schedules import change_url, editor, errors, form, schedule_jobs  # noqa: F401


def test_the_admin_change_form_cannot_rename_a_schedule(editor: Client) -> None:  # noqa: F811
    row = Schedule.objects.create(name="nightly_mark", job="mark", args=["hello"], cron="0 3 * * *")
    page = editor.get(change_url(row)).content.decode()
    field = page.split('name="name"')[1].split(">")[0]
    assert "disabled" in field, field
    assert "to rename, add the schedule under its new name and remove this one" in page

    response = editor.post(change_url(row), form(name="renamed", cron="0 4 * * *"))
    assert response.status_code == 302, errors(response)
    row.refresh_from_db()
    assert (row.name, row.cron) == ("nightly_mark", "0 4 * * *")
    assert not Schedule.objects.filter(name="renamed").exists()


@pytest.mark.usefixtures("transactional_db")
def test_cronjob_edit_has_no_rename(manage: Any) -> None:
    Schedule.objects.create(name="nightly", command="noop", every=60)
    edited = manage("cronjob", "edit", "nightly", "--name", "renamed")
    assert edited.returncode == exitcodes.USAGE and "--name" in edited.stderr, edited.stderr
    assert list(Schedule.objects.values_list("name", flat=True)) == ["nightly"]
