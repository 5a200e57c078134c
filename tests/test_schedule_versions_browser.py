"""A schedule's versions page and its revert confirmation in a real Chromium against a live
server, at 1024, 1366 and 1920 px: the versions with their diff fit the window, "Revert to"
leads to a confirmation page that shows what will change, and confirming reverts (fixtures
shared with ``test_browser``). The screenshots go to the run's temp dir
(``schedule-versions-*.png``); ``docs/img/schedule-versions.png`` is the 1366 px one."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission

from django_advisory_cron.conf import app_settings
from django_advisory_cron.jobs.versions import changing
from django_advisory_cron.models import Schedule, ScheduleVersion
from tests.test_admin_width import WIDTHS
from tests.test_browser import Shooter, browser, login, screenshots, server

pytestmark = pytest.mark.browser

__all__ = ["browser", "screenshots", "server"]  # fixtures, used by name

CREDENTIALS = ("scheduler", "s3cret-pw")
NAME = "billing.reconcile_invoices_for_all_regions_nightly"


@pytest.fixture
def history(db_url: str, fresh_registry: None, django_user_model: Any) -> None:
    """A schedule changed three times, by three people, and a user who may change it."""
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))
    user = django_user_model.objects.create_user(
        CREDENTIALS[0], password=CREDENTIALS[1], is_staff=True
    )
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron",
            codename__in=["view_schedule", "change_schedule"],
        )
    )
    alias = app_settings.lock_database
    with changing(alias, "finance-admin", "reconcile after the provider's settlement file lands"):
        Schedule.objects.using(alias).create(
            name=NAME,
            job="mark",
            args=["all-regions"],
            cron="15 2 * * 1-5",
            timezone="Europe/Paris",
            description="Matches settlements against open invoices",
        )
    with changing(alias, "oncall@ops-bastion", "the settlement file comes an hour later since May"):
        Schedule.objects.using(alias).filter(name=NAME).update(cron="15 3 * * 1-5", timeout=900)
    with changing(alias, "billing-lead", "weekends too, and retry once"):
        Schedule.objects.using(alias).filter(name=NAME).update(
            cron="15 3 * * *", retries=1, kwargs={"regions": ["eu", "us", "apac"]}
        )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_versions_page_and_the_revert_confirmation(
    width: int,
    browser: Any,
    server: Any,
    history: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    shoot = Shooter(page, screenshots, capsys)
    login(page, server.url, CREDENTIALS)
    row = Schedule.objects.get(name=NAME)
    page.goto(f"{server.url}/admin/django_advisory_cron/schedule/{row.pk}/change/")
    expect(page.locator("#versions tbody tr")).to_have_count(3)
    page.locator("#versions").get_by_role("link", name="Revert to 2…").wait_for()

    page.goto(f"{server.url}/admin/django_advisory_cron/schedule/versions/{NAME}/")
    versions = page.locator("#versions tbody tr")
    expect(versions).to_have_count(3)
    expect(versions.nth(0)).to_contain_text("billing-lead")
    expect(versions.nth(0)).to_contain_text('"15 3 * * 1-5" → "15 3 * * *"')
    expect(versions.nth(2)).to_contain_text("finance-admin")
    expect(versions.nth(0).get_by_role("link")).to_have_count(0)  # the current one
    sizes = page.evaluate(
        "() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"
    )
    assert sizes["page"] <= sizes["window"], sizes
    shoot(f"schedule-versions-{width}")

    versions.nth(2).get_by_role("link", name="Revert to 1…").click()
    expect(page.locator("h1")).to_contain_text(f"Revert {NAME} to version 1?")
    changes = page.locator("#revert-changes tbody tr")
    expect(changes).to_have_count(4)  # cron, kwargs, retries, timeout
    expect(changes.nth(0)).to_contain_text("cron")
    assert Schedule.objects.get(name=NAME).cron == "15 3 * * *"  # nothing yet
    sizes = page.evaluate(
        "() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"
    )
    assert sizes["page"] <= sizes["window"], sizes
    page.fill("#id_note", "back to the weekday run while the provider is late")
    shoot(f"schedule-revert-{width}")
    page.get_by_role("button", name="Yes, revert to version 1").click()
    expect(page.locator(".messagelist")).to_contain_text(
        f"Schedule {NAME}: reverted to version 1 as version 4"
    )
    expect(page.locator("#versions tbody tr")).to_have_count(4)
    reverted = Schedule.objects.get(name=NAME)
    assert (reverted.cron, reverted.retries, reverted.timeout) == ("15 2 * * 1-5", None, None)
    latest = ScheduleVersion.objects.get(name=NAME, number=4)
    assert (latest.changed_by, latest.note) == (
        "scheduler",
        "revert to version 1: back to the weekday run while the provider is late",
    )
    context.close()
