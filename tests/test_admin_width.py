"""The Jobs, Job runs and Held locks pages fit a laptop's window: at 1024, 1366 and 1920 px, in a
real Chromium.

Realistic rows (long job names, a long error, task ids, a 10-second job with skips between its
runs, a full 50-run chart) on a live server that serves this app's CSS with the admin's. Each
page must be no wider than the window and its table no wider than its box; times show seconds;
skip rows are hidden until asked for; a run chart stays readable; the columns an operator
needs are on screen, the first run above the fold of a 1024x768 window, a job's row at most
60 px high. Screenshots go under
pytest's base temp dir (``admin-width-*.png``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from django_advisory_cron import locked_task
from django_advisory_cron.models import JobRun, RunStatus
from tests.test_browser import Shooter, browser, login, operator, page, screenshots, server

pytestmark = pytest.mark.browser

__all__ = ["browser", "operator", "page", "screenshots", "server"]  # fixtures, used by name

WIDTHS = (1024, 1366, 1920)
PING = "monitoring.ping_upstream_payment_gateway"
DIGEST = "reports.weekly_customer_activity_digest"
HOST = "web-7f9c6d8b5-x2kqp.eu-west-1.compute.internal"
ERROR = (
    "Traceback (most recent call last):\n  ...\n"
    "psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "
    '"billing_invoice_number_key" DETAIL: Key (number)=(INV-2026-000123) already exists.'
)

#: What the page measures: the document against the window, the results table against its box.
MEASURE = """() => {
    const table = document.querySelector('#result_list');
    const box = table.closest('.results');
    return {
        page: document.documentElement.scrollWidth,
        window: window.innerWidth,
        table: table.getBoundingClientRect().width,
        box: box.clientWidth,
        boxScroll: box.scrollWidth,
    };
}"""


@pytest.fixture
def runs(fresh_registry: None, db_url: str) -> None:
    """Four jobs with long names and the run history a busy day leaves. The nightly job's hour
    is two hours back, whatever the time of day, so its last tick is the failed run's and it is
    never overdue (after 02:00 a fixed "0 2 * * *" made it so, and its row taller)."""
    now = timezone.now().replace(microsecond=0)
    nightly = (now - timedelta(hours=2)).replace(minute=0, second=0)

    @locked_task(
        name="billing.reconcile_invoices_for_all_regions_nightly",
        schedule=f"0 {nightly.hour} * * *",
        max_runtime=3600,
    )
    def reconcile() -> None:
        """Matches the payment provider's settlements against open invoices."""

    @locked_task(name="monitoring.ping_upstream_payment_gateway", every=10)
    def ping() -> None:
        """Checks the gateway answers."""

    @locked_task(name="sessions.clear_expired_sessions", schedule="* * * * *")
    def clear() -> None: ...

    @locked_task(name="reports.weekly_customer_activity_digest", schedule="30 6 * * 1")
    def digest() -> None: ...

    rows = []
    for number in range(6):  # a 10-second job: six runs, each skipped by two other replicas
        tick = now - timedelta(seconds=10 * (6 - number))
        rows.append(
            JobRun(
                job="monitoring.ping_upstream_payment_gateway",
                tick=tick,
                started=tick + timedelta(milliseconds=40),
                finished=tick + timedelta(milliseconds=460),
                status=RunStatus.SUCCEEDED,
                host=HOST,
                pid=41230 + number,
                task_id=str(uuid.uuid4()),
            )
        )
        rows += [
            JobRun(
                job="monitoring.ping_upstream_payment_gateway",
                tick=tick,
                started=tick + timedelta(milliseconds=60),
                finished=tick + timedelta(milliseconds=61),
                status=RunStatus.SKIPPED_TICK,
                host=f"web-replica-{replica}.eu-west-1.compute.internal",
                pid=5000 + replica,
            )
            for replica in (2, 3)
        ]
    tick = nightly
    rows.append(
        JobRun(
            job="billing.reconcile_invoices_for_all_regions_nightly",
            tick=tick,
            started=tick + timedelta(seconds=1),
            finished=tick + timedelta(minutes=14, seconds=3),
            status=RunStatus.FAILED,
            host=HOST,
            pid=38811,
            error=ERROR,
            task_id=str(uuid.uuid4()),
        )
    )
    JobRun.objects.bulk_create(rows)


@pytest.fixture
def full_chart(runs: None) -> None:
    """Fifty weekly runs of the digest job: the widest run chart, on the widest Jobs page."""
    now = timezone.now().replace(microsecond=0)
    JobRun.objects.bulk_create(
        JobRun(
            job=DIGEST,
            tick=now - timedelta(weeks=50 - number),
            started=now - timedelta(weeks=50 - number),
            finished=now - timedelta(weeks=50 - number) + timedelta(seconds=5 + number % 7),
            status=RunStatus.FAILED if number % 9 == 4 else RunStatus.SUCCEEDED,
            host=HOST,
            pid=20000 + number,
        )
        for number in range(50)
    )


def operating(
    browser: Any,
    server: Any,
    operator: tuple[str, str],
    django_user_model: Any,
    width: int,
    height: int = 900,
) -> Any:
    """A page in a window ``width`` px wide, logged in as an operator who may pause and run
    jobs (the widest Jobs page) and read the sessions' queries (the widest Held locks page)."""
    user = django_user_model.objects.get(username=operator[0])
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["operate_job", "view_query"])
    )
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(15_000)
    page = context.new_page()
    login(page, server.url, operator)
    return page


def measure(page: Any) -> dict[str, float]:
    sizes: dict[str, float] = page.evaluate(MEASURE)
    return sizes


#: The tallest a job's row may be, by window width.
ROW_HEIGHT = {1024: 110, 1366: 72, 1920: 60}


@pytest.mark.parametrize("width", WIDTHS)
def test_jobs_and_runs_fit_the_window_show_seconds_and_the_first_run(
    width: int,
    browser: Any,
    server: Any,
    operator: tuple[str, str],
    django_user_model: Any,
    runs: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    page = operating(browser, server, operator, django_user_model, width, height=768)
    shoot = Shooter(page, screenshots, capsys)
    base = server.url

    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    shoot(f"admin-width-jobs-{width}")
    jobs = measure(page)
    rows = [row.bounding_box()["height"] for row in page.locator("tr.job-row").all()]
    page.goto(f"{base}/admin/django_advisory_cron/jobrun/")
    shoot(f"admin-width-runs-{width}")
    job_runs = measure(page)
    first = page.locator("#result_list tbody tr").first.bounding_box()
    with capsys.disabled():
        print(f"\njobs at {width}: {jobs}, rows {rows}\nruns at {width}: {job_runs}, first {first}")
    # In a 768 px high window the filters leave the first run in view.
    assert first is not None and first["y"] + first["height"] <= 768, first
    # A job's row is its name, one line of facts and a compact Pause: 52 px at 1920 px, 69 at
    # 1366 (a cron's description wraps), 107 at most at 1024 for the longest name beside a
    # failed run (103, 151 and 219 before, with the keys and the open pause form in each row).
    assert rows and max(rows) <= ROW_HEIGHT[width], rows

    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    ping = page.locator("tr.job-row[data-job='monitoring.ping_upstream_payment_gateway']")
    expect(ping).to_contain_text("every 10s")
    assert ping.inner_text().count("every 10s") == 1
    every_minute = page.locator("tr.job-row[data-job='sessions.clear_expired_sessions']")
    expect(every_minute).to_contain_text("Every minute (UTC)")
    nightly = page.locator(
        "tr.job-row[data-job='billing.reconcile_invoices_for_all_regions_nightly']"
    )
    expect(nightly).to_contain_text("failed, 14 min 02 s")
    expect(nightly).to_contain_text("never succeeded")
    assert jobs["page"] <= jobs["window"], jobs
    assert jobs["table"] <= jobs["box"] and jobs["boxScroll"] <= jobs["box"], jobs

    page.goto(f"{base}/admin/django_advisory_cron/jobrun/")
    table = page.locator("#result_list")
    expect(table).to_contain_text("UniqueViolation")
    assert job_runs["page"] <= job_runs["window"], job_runs
    assert job_runs["table"] <= job_runs["box"] and job_runs["boxScroll"] <= job_runs["box"]
    # Seconds apart, the six runs of the 10-second job read as six different times.
    started = table.locator("tbody td.field-started_display").all_inner_texts()
    assert len(started) == 7 and len(set(started)) == 7, started
    expect(table).to_contain_text("0.4 s")
    expect(table).to_contain_text("14 min 02 s")
    for text in (HOST, "41235", "UniqueViolation"):
        expect(table).to_contain_text(text)
    page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_full_run_chart_is_readable_and_the_jobs_page_still_fits(
    width: int,
    browser: Any,
    server: Any,
    operator: tuple[str, str],
    django_user_model: Any,
    full_chart: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    page = operating(browser, server, operator, django_user_model, width)
    page.goto(f"{server.url}/admin/django_advisory_cron/registeredjob/")
    chart = page.locator(f"tr[data-job='{DIGEST}'] svg.run-chart")
    expect(chart.locator("rect")).to_have_count(50)
    full = chart.bounding_box()
    short = page.locator(f"tr[data-job='{PING}'] svg.run-chart").bounding_box()
    jobs = measure(page)
    Shooter(page, screenshots, capsys)(f"admin-width-chart-{width}")
    with capsys.disabled():
        print(f"\nchart at {width}: {full}; six runs: {short}; jobs: {jobs}")
    assert jobs["page"] <= jobs["window"], jobs
    assert jobs["table"] <= jobs["box"] and jobs["boxScroll"] <= jobs["box"], jobs
    # Readable: 24 px high, at least 2 px per run; its bars narrow, never widen, with the page.
    assert full is not None and full["height"] == 24 and 100 <= full["width"] <= 50 * 6 - 1
    assert short is not None and short["height"] == 24 and short["width"] <= 6 * 6 - 1
    page.context.close()


def test_skips_are_hidden_until_asked_for(
    page: Any,
    server: Any,
    operator: tuple[str, str],
    runs: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    base = server.url
    login(page, base, operator)
    page.goto(f"{base}/admin/django_advisory_cron/jobrun/")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(7)
    expect(page.locator("#result_list")).not_to_contain_text("skipped")
    skips = page.locator("#changelist-filter details", has_text="skips")
    expect(skips.locator("li.selected")).to_contain_text("hidden")
    skips.get_by_role("link", name="shown").click()
    expect(rows).to_have_count(19)
    expect(page.locator("#result_list")).to_contain_text("skipped: already ran this tick")
    Shooter(page, screenshots, capsys)("admin-width-runs-with-skips")
    page.goto(f"{base}/admin/django_advisory_cron/jobrun/?status__exact=skipped_tick")
    expect(rows).to_have_count(12)  # a status asked for is shown, skip or not


#: Where each named column's header ends, against the window: an operator's column past the
#: window's right edge is off screen.
HEADERS = """() => Object.fromEntries([...document.querySelectorAll('#result_list thead th')]
    .map((th) => [th.innerText.trim().toLowerCase(), th.getBoundingClientRect().right]))"""


@pytest.mark.parametrize("width", WIDTHS)
def test_held_locks_show_who_holds_them_on_screen(
    width: int,
    browser: Any,
    server: Any,
    operator: tuple[str, str],
    django_user_model: Any,
    runs: None,
    raw_connect: Callable[..., psycopg.Connection[Any]],
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Who holds a lock (application name, client address, state, query) is on screen,
    with no sideways scrolling; the keys and the lock mode are on each lock's own page."""
    from django_advisory_cron.jobs.job import registry

    for name, application in (
        (PING, f"django-advisory-cron lock: {PING}"),
        ("billing.reconcile_invoices_for_all_regions_nightly", f"cronworker {HOST}:41230"),
    ):
        holder = raw_connect(application_name=application)
        key = registry.get(name).key
        holder.execute(f"SELECT pg_advisory_lock({key.sql})", key.params)
    page = operating(browser, server, operator, django_user_model, width)
    page.goto(f"{server.url}/admin/django_advisory_cron/heldlock/")
    Shooter(page, screenshots, capsys)(f"admin-width-held-locks-{width}")
    sizes, headers = measure(page), page.evaluate(HEADERS)
    with capsys.disabled():
        print(f"\nheld locks at {width}: {sizes}; column ends: {headers}")
    assert sizes["page"] <= sizes["window"], sizes
    assert sizes["table"] <= sizes["box"] and sizes["boxScroll"] <= sizes["box"], sizes
    for column in ("job", "pid", "application name", "client address", "state", "current query"):
        assert column in headers and headers[column] <= width, (column, headers)
    assert "key" not in headers and "mode" not in headers, headers
    page.context.close()
