"""The Timeline page in a real Chromium at 1024, 1366 and 1920 px: reached from the admin
index, no wider than the window, the time taking most of it, the rows' now lines joined into
one, a bar's title saying what ran, a click on a bar opening its run, the zoom links working,
and the same page with the browser's scripts turned off. Screenshots go under pytest's base
temp dir (``timeline-*.png``); ``docs/img/timeline.png`` is the 1366 px one."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron import locked_task
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control
from tests.test_browser import Shooter, browser, login, operator, screenshots, server

pytestmark = pytest.mark.browser

__all__ = ["browser", "operator", "screenshots", "server"]  # fixtures, used by name

WIDTHS = (1024, 1366, 1920)
HOST = "web-7f9c6d8b5-x2kqp.eu-west-1.compute.internal"
NIGHTLY = "billing.reconcile_invoices_for_all_regions_nightly"
JOBS = (
    NIGHTLY,
    "reports.hourly_sales_rollup",
    "search.reindex_changed_products",
    "mail.send_digest",
    "imports.pull_supplier_feed",
)
#: The rows of this test's jobs (the test project registers jobs of its own too).
OURS = ", ".join(f'svg.timeline-lane[data-job="{name}"]' for name in JOBS)

#: The document against the window, the rows' drawings against it, and where each row's now
#: line is.
MEASURE = """() => {
    const lanes = [...document.querySelectorAll('svg.timeline-lane')];
    return {
        page: document.documentElement.scrollWidth,
        window: window.innerWidth,
        lane: lanes[0].getBoundingClientRect().width,
        now: lanes.map(l => l.querySelector('line.now').getBoundingClientRect().x),
        rows: lanes.map(l => l.getBoundingClientRect().height),
    };
}"""


def ran(
    job: str,
    started: datetime,
    lasted: timedelta | None,
    tick: datetime | None,
    status: str = RunStatus.SUCCEEDED,
    **fields: Any,
) -> JobRun:
    """A run row of ``job`` (unsaved), still going when ``lasted`` is ``None``."""
    finished = None if lasted is None else started + lasted
    return JobRun(
        job=job,
        tick=tick,
        started=started,
        finished=finished,
        status=status,
        host=HOST,
        pid=1,
        **fields,
    )


@pytest.fixture
def history(fresh_registry: None, db_url: str) -> None:
    """A day of a few jobs: hourly runs (one failed after retries, one skipped by a second
    replica), a long nightly run, a manual run, a 5-minute job with jitter, a paused job, and a
    job running now."""
    now = database_now().replace(microsecond=0)
    hour = now.replace(minute=0, second=0)
    nightly = hour - timedelta(hours=9)
    locked_task(name=NIGHTLY, schedule=f"0 {nightly.hour} * * *")(lambda: None)
    locked_task(name="reports.hourly_sales_rollup", schedule="5 * * * *")(lambda: None)
    locked_task(name="search.reindex_changed_products", schedule="*/30 * * * *", jitter=300)(
        lambda: None
    )
    locked_task(name="mail.send_digest", schedule="0 */2 * * *")(lambda: None)
    locked_task(name="imports.pull_supplier_feed", schedule="20 * * * *")(lambda: None)
    rows = [ran(NIGHTLY, nightly + timedelta(seconds=1), timedelta(hours=1, minutes=14), nightly)]
    for back in range(1, 17):
        tick = hour - timedelta(hours=back) + timedelta(minutes=5)
        failed = back == 4
        rows.append(
            ran(
                "reports.hourly_sales_rollup",
                tick + timedelta(seconds=2),
                timedelta(minutes=7 if failed else 4),
                tick,
                status=RunStatus.FAILED if failed else RunStatus.SUCCEEDED,
                attempts=3 if failed else 1,
            )
        )
        if back % 3 == 0:
            skipped = RunStatus.SKIPPED_LOCKED
            rows.append(
                ran("reports.hourly_sales_rollup", tick, timedelta(0), tick, status=skipped)
            )
        feed = hour - timedelta(hours=back) + timedelta(minutes=20)
        rows.append(ran("imports.pull_supplier_feed", feed, timedelta(minutes=25), feed))
    manual = now - timedelta(hours=5)
    rows.append(ran("mail.send_digest", manual, timedelta(minutes=3), None, manual=True))
    rows.append(
        ran("imports.pull_supplier_feed", now - timedelta(minutes=2), None, None, status="running")
    )
    JobRun.objects.bulk_create(rows)
    control.pause("mail.send_digest", reason="mail provider migration")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_timeline_fits_and_works_in_chromium(
    width: int,
    browser: Any,
    server: Any,
    operator: tuple[str, str],
    history: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": width, "height": 768})
    context.set_default_timeout(15_000)
    page = context.new_page()
    login(page, server.url, operator)
    page.get_by_role("link", name="Timeline", exact=True).click()
    expect(page.locator(OURS)).to_have_count(5)
    # The jobs of this test alone (the test project's own have no dot in their names).
    page.goto(f"{server.url}/admin/django_advisory_cron/timeline/?q=.")
    expect(page.locator("svg.timeline-lane")).to_have_count(5)
    sizes = page.evaluate(MEASURE)
    assert sizes["page"] <= sizes["window"], sizes
    # Time takes half the window beside the admin's sidebar at 1024 px, most of it at 1920.
    assert sizes["lane"] >= (0.45 if width < 1920 else 0.65) * sizes["window"], sizes
    assert max(sizes["now"]) - min(sizes["now"]) < 1, sizes  # one line across the rows
    assert max(sizes["rows"]) <= 30, sizes
    Shooter(page, screenshots, capsys)(f"timeline-{width}")

    failed = page.locator("svg.timeline-lane rect.run.s-failed").first
    expect(failed.locator("title")).to_contain_text("reports.hourly_sales_rollup: failed")
    expect(failed.locator("title")).to_contain_text("3 attempts")
    rollup = page.locator('svg[data-job="reports.hourly_sales_rollup"]')
    expect(rollup.locator("rect.run")).to_have_count(16)
    expect(rollup.locator("circle.skip")).to_have_count(5)
    digest = page.locator('svg[data-job="mail.send_digest"]')
    expect(digest.locator("line.tick.skipped").first).to_be_attached()
    expect(
        page.locator('svg[data-job="search.reindex_changed_products"] rect.jitter').first
    ).to_be_attached()

    page.get_by_role("link", name="1 hour", exact=True).click()
    expect(page.get_by_text("1 hour", exact=True)).to_have_attribute("aria-current", "true")
    assert "span=1h" in page.url
    page.get_by_role("link", name="1 day", exact=True).click()

    # A bar opens its run's page.
    rollup.locator("rect.run.s-failed").click()
    expect(page.locator("#content")).to_contain_text("reports.hourly_sales_rollup")
    assert "/jobrun/" in page.url and page.url.endswith("/change/")
    context.close()

    # The browser's scripts turned off: the same page, the same rows and links.
    still = browser.new_context(viewport={"width": width, "height": 768}, java_script_enabled=False)
    quiet = still.new_page()
    login(quiet, server.url, operator)
    quiet.goto(f"{server.url}/admin/django_advisory_cron/timeline/?span=6h")
    expect(quiet.locator(OURS)).to_have_count(5)
    expect(quiet.locator(OURS).locator("line.now")).to_have_count(5)
    expect(quiet.get_by_text("6 hours", exact=True)).to_have_attribute("aria-current", "true")
    still.close()
