"""Lateness on the Jobs page in a real Chromium at 1024, 1366 and 1920 px: a job whose last
run started later after its tick than its target (``late_after``) says LATE with the figures
in its row, a job on time beside it says nothing of the kind, and the page still fits the
window. Screenshots go under pytest's base temp dir (``jobs-late-*.png``);
``docs/img/jobs-late.png`` is the 1366 px one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_advisory_cron import locked_task
from django_advisory_cron.models import JobRun, RunStatus
from tests.test_admin_width import measure, operating
from tests.test_browser import Shooter, browser, operator, screenshots, server

pytestmark = pytest.mark.browser

__all__ = ["browser", "operator", "screenshots", "server"]  # fixtures, used by name

WIDTHS = (1024, 1366, 1920)
HOST = "web-7f9c6d8b5-x2kqp.eu-west-1.compute.internal"
LATE = "billing.settle_card_payments_hourly"
ON_TIME = "search.refresh_product_suggestions"


@pytest.fixture
def late_and_on_time(fresh_registry: None, db_url: str) -> None:
    """Two hourly jobs with a lateness target of 30 s: the last run of one started 2 min 05 s
    after its tick (a replica was busy), the other's 0.3 s after."""

    @locked_task(name=LATE, schedule="0 * * * *", late_after=30)
    def settle() -> None:
        """Settles the card payments authorised in the hour."""

    @locked_task(name=ON_TIME, schedule="0 * * * *", late_after=30)
    def suggest() -> None:
        """Rebuilds the search suggestions."""

    tick = timezone.now().replace(minute=0, second=0, microsecond=0)
    JobRun.objects.bulk_create(
        JobRun(
            job=name,
            tick=tick,
            started=tick + after,
            finished=tick + after + timedelta(seconds=4),
            status=RunStatus.SUCCEEDED,
            host=HOST,
            pid=41200 + number,
        )
        for number, (name, after) in enumerate(
            [(LATE, timedelta(minutes=2, seconds=5)), (ON_TIME, timedelta(milliseconds=300))]
        )
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_a_late_job_says_so_in_its_row_and_the_page_fits(
    width: int,
    browser: Any,
    server: Any,
    operator: tuple[str, str],
    django_user_model: Any,
    late_and_on_time: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    page = operating(browser, server, operator, django_user_model, width, height=768)
    page.goto(f"{server.url}/admin/django_advisory_cron/registeredjob/?q=.")
    late = page.locator(f"tr.job-row[data-job='{LATE}']")
    expect(late).to_contain_text("LATE")
    expect(late).to_contain_text("its last run started 2 min 05 s after its tick")
    expect(late).to_contain_text("late after 30.0 s")
    on_time = page.locator(f"tr.job-row[data-job='{ON_TIME}']")
    expect(on_time).to_be_visible()
    assert "LATE" not in on_time.inner_text()
    sizes = measure(page)
    assert sizes["page"] <= sizes["window"], sizes
    Shooter(page, screenshots, capsys)(f"jobs-late-{width}")
    page.context.close()
