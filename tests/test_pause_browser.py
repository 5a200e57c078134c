"""The Jobs page's Pause / Resume / Run now buttons in a real Chromium, with a real
``cronworker`` picking up the "run now" (fixtures shared with ``test_browser``)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission

from django_advisory_cron.models import JobRun, JobState
from tests.test_browser import Shooter, browser, login, page, screenshots, server
from tests.waiting import wait_for, wait_for_workers

pytestmark = [pytest.mark.browser, pytest.mark.slow]

__all__ = ["browser", "page", "screenshots", "server"]  # fixtures, used by name


def test_pause_resume_and_run_now_from_the_jobs_page(
    page: Any,
    server: Any,
    db_url: str,
    django_user_model: Any,
    fresh_registry: None,
    spawn: Any,
    raw_connect: Any,
    monkeypatch: pytest.MonkeyPatch,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    importlib.reload(importlib.import_module("tests.jobsapp.worker_tasks"))  # register its jobs
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "worker_tasks"}))
    observer = raw_connect()
    worker = spawn("cronworker", "yearly_manual")
    user = django_user_model.objects.create_user("ops", password="s3cret-pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron",
            codename__in=["view_registeredjob", "operate_job"],
        )
    )
    shoot = Shooter(page, screenshots, capsys)
    base = server.url
    login(page, base, ("ops", "s3cret-pw"))
    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    row = page.locator("tr.job-row[data-job='yearly_manual']")
    expect(row.locator("td.state")).to_contain_text("active")

    row.locator("details.pause summary").click()  # Pause asks for its reason when pressed
    row.locator("input[name=reason]").fill("disk full")
    row.locator("input[name=until]").fill("2h")
    row.locator("button[value=pause]").click()
    expect(page.locator(".messagelist")).to_contain_text("_manual: paused by ops until")
    row = page.locator("tr.job-row[data-job='yearly_manual']")
    expect(row.locator("td.state")).to_contain_text("PAUSED")
    expect(row.locator("td.state")).to_contain_text("paused by ops until")
    expect(row.locator("td.state")).to_contain_text("disk full")
    shoot("jobs-paused")
    state = JobState.objects.get(job="yearly_manual")
    assert state.paused and state.paused_by == "ops" and state.paused_until is not None

    row.locator("button[value=resume]").click()
    expect(page.locator(".messagelist")).to_contain_text("Job yearly_manual: resumed")
    expect(row.locator("td.state")).to_contain_text("active")
    assert not JobState.objects.get(job="yearly_manual").paused

    wait_for_workers(observer, [worker])
    page.locator("tr.job-row[data-job='yearly_manual'] button[value=run]").click()
    expect(page.locator(".messagelist")).to_contain_text("_manual: run requested")
    run = wait_for(lambda: JobRun.objects.filter(job="yearly_manual").first(), timeout=10)
    assert run.manual and run.tick is None
    shoot("jobs-run-requested")

    logged = list(
        LogEntry.objects.filter(user=user).order_by("id").values_list("change_message", flat=True)
    )
    assert len(logged) == 3
    assert "paused by ops until" in logged[0] and "disk full" in logged[0]
    assert logged[1] == "yearly_manual: resumed" and "run requested" in logged[2]
