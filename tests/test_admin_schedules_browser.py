"""The Schedules pages and the Jobs page's overrides in a real Chromium against a live server:
add a schedule, see a bad cron expression refused on its field, override a code job's schedule
from the Jobs page and reset it; and every page fits a laptop's window (fixtures shared with
``test_browser``)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission

from django_advisory_cron.models import Schedule
from tests.test_admin_width import measure
from tests.test_browser import Shooter, browser, login, page, screenshots, server

pytestmark = pytest.mark.browser

__all__ = ["browser", "page", "screenshots", "server"]  # fixtures, used by name

CREDENTIALS = ("scheduler", "s3cret-pw")
#: Everything the pages offer: editing schedules, resetting overrides, operating jobs.
PERMISSIONS = [
    "view_registeredjob",
    "operate_job",
    "view_schedule",
    "add_schedule",
    "change_schedule",
    "delete_schedule",
]
LONG = "billing.reconcile_invoices_for_all_regions_nightly_from_the_database"


@pytest.fixture
def scheduler(db_url: str, fresh_registry: None, django_user_model: Any) -> Any:
    """The jobs of ``schedule_tasks`` registered in the live server's process, and a staff
    user with every permission of the Schedules and Jobs pages."""
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))
    user = django_user_model.objects.create_user(
        CREDENTIALS[0], password=CREDENTIALS[1], is_staff=True
    )
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron", codename__in=PERMISSIONS
        )
    )
    return user


@pytest.mark.slow  # about 10 s of processes: started first, beside the other slow tests
def test_add_edit_override_and_reset_a_schedule(
    page: Any,
    server: Any,
    scheduler: Any,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    shoot = Shooter(page, screenshots, capsys)
    base = server.url
    login(page, base, CREDENTIALS)
    page.goto(f"{base}/admin/django_advisory_cron/schedule/add/")
    page.fill("#id_name", "browser_mark")
    page.select_option("#id_job", "mark")
    page.fill("#id_args", '["from the browser"]')
    page.fill("#id_kwargs", '{"note": "<b>bold</b>"}')
    page.fill("#id_cron", "0 3 * * *")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    row = page.locator("#result_list tbody tr", has_text="browser_mark")
    expect(row).to_contain_text("job mark")
    expect(row).to_contain_text('{"note": "<b>bold</b>"}')  # as typed: text, not markup
    expect(row.locator("b")).to_have_count(0)
    shoot("schedules-list")

    row.get_by_role("link", name="browser_mark").click()
    page.fill("#id_cron", "61 * * * *")
    page.click("input[name=_save]")
    error = page.locator(".form-row.field-cron .errorlist")
    expect(error).to_contain_text("bad cron expression: '61 * * * *'")
    expect(error).to_contain_text("minute 61 is out of range")
    shoot("schedules-bad-cron")
    page.fill("#id_cron", "*/10 * * * *")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    assert Schedule.objects.get(name="browser_mark").cron == "*/10 * * * *"

    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    added = page.locator("tr.job-row[data-job='browser_mark']")
    expect(added).to_contain_text("defined in the database")
    code = page.locator("tr.job-row[data-job='code_yearly']")
    expect(code).to_contain_text("defined in code")
    code.get_by_role("link", name="Override schedule").click()
    expect(page.locator("#id_override")).to_be_checked()
    # The admin's add page focuses its first field from a script loaded ``async``: wait for
    # it, or it may take the focus between a fill's focus and its key press (an empty fill
    # presses Delete), and the name loses its first letter.
    page.wait_for_load_state("load")
    page.fill("#id_args", "")
    page.fill("#id_kwargs", "")
    page.fill("#id_every", "30")
    expect(page.locator("#id_name")).to_have_value("code_yearly")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")

    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    code = page.locator("tr.job-row[data-job='code_yearly']")
    expect(code).to_contain_text("schedule overridden: every 30s (code: 0 0 1 1 *)")
    shoot("jobs-overridden")
    code.locator("details.job-facts summary").click()  # Reset to code is among its facts
    code.get_by_role("button", name="Reset to code").click()
    expect(page.locator(".messagelist")).to_contain_text(
        "Job code_yearly: reset to its schedule in code (the override said every 30s)"
    )
    code = page.locator("tr.job-row[data-job='code_yearly']")
    expect(code).not_to_contain_text("overridden")
    expect(code.get_by_role("link", name="Override schedule")).to_have_count(1)
    assert not Schedule.objects.filter(name="code_yearly").exists()

    logged = LogEntry.objects.filter(user=scheduler).order_by("id")
    assert [(entry.object_repr, entry.action_flag) for entry in logged] == [
        ("browser_mark", ADDITION),
        ("browser_mark", CHANGE),
        ("code_yearly", ADDITION),
        ("code_yearly", DELETION),
    ]


@pytest.mark.parametrize("width", [1024, 1366])
def test_schedule_pages_fit_a_laptop_window(
    width: int,
    browser: Any,
    server: Any,
    scheduler: Any,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The widest pages: long names and arguments, a problem, an override, every button."""
    Schedule.objects.create(
        name=LONG,
        job="mark",
        args=["reconcile-every-region-including-the-ones-added-last-quarter"],
        kwargs={"note": "a note long enough to wrap in its column on a laptop", "seconds": 2},
        cron="15 2 * * 1-5",
        timezone="America/Argentina/ComodRivadavia",
        description="Matches the payment provider's settlements against open invoices",
        changed_by="someone-with-a-long-user-name@example.com",
    )
    Schedule.objects.create(name="orphaned.schedule_whose_job_left_the_code", job="gone", every=90)
    Schedule.objects.create(name="code_yearly", override=True, every=30, enabled=False)
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    shoot = Shooter(page, screenshots, capsys)
    base = server.url
    login(page, base, CREDENTIALS)

    sizes = {}
    for name, url in (
        ("list", "/admin/django_advisory_cron/schedule/"),
        ("jobs", "/admin/django_advisory_cron/registeredjob/"),
    ):
        page.goto(f"{base}{url}")
        shoot(f"schedules-width-{name}-{width}")
        sizes[name] = measure(page)
    row = Schedule.objects.get(name=LONG)
    for name, url in (
        ("add", "/admin/django_advisory_cron/schedule/add/"),
        ("change", f"/admin/django_advisory_cron/schedule/{row.pk}/change/"),
    ):
        page.goto(f"{base}{url}")
        shoot(f"schedules-width-{name}-{width}")
        sizes[name] = page.evaluate(
            "() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"
        )
    with capsys.disabled():
        print(f"\nschedule pages at {width}: {sizes}")
    for name, size in sizes.items():
        assert size["page"] <= size["window"], (name, size)
        if "table" in size:
            assert size["table"] <= size["box"] and size["boxScroll"] <= size["box"], (name, size)
    page.goto(f"{base}/admin/django_advisory_cron/schedule/")
    from playwright.sync_api import expect

    expect(page.locator("#result_list")).to_contain_text("cannot run: there is no registered job")
    context.close()
