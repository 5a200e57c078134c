"""The admin's run charts in a real Chromium: an inline SVG bar per run, coloured by status.

Reuses the browser, live server and login of ``test_browser``; the screenshot is saved under
pytest's base temp dir and its path printed.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_advisory_cron import locked_task
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops.charts import STATUS_COLOURS
from tests.test_browser import (  # noqa: F401  (fixtures)
    Shooter,
    browser,
    login,
    operator,
    page,
    screenshots,
    server,
)

pytestmark = pytest.mark.browser

PATTERN = [RunStatus.SUCCEEDED] * 5 + [RunStatus.FAILED, RunStatus.LOCK_LOST, RunStatus.INTERRUPTED]


def test_run_charts_on_the_jobs_page_and_the_run_list(
    page: Any,  # noqa: F811
    server: Any,  # noqa: F811
    operator: tuple[str, str],  # noqa: F811
    fresh_registry: None,
    screenshots: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    @locked_task(name="browser.nightly", schedule="*/10 * * * *")
    def nightly() -> None:
        """Exports the day's orders."""

    now = timezone.now()
    statuses = (PATTERN * 7)[:55]
    JobRun.objects.bulk_create(
        JobRun(
            job="browser.nightly",
            tick=now - timedelta(minutes=10 * (len(statuses) - index)),
            host=f"web-{index % 3 + 1}",
            pid=4000 + index,
            status=status,
            started=now - timedelta(minutes=10 * (len(statuses) - index)),
            finished=now
            - timedelta(minutes=10 * (len(statuses) - index), seconds=-(index % 9 + 1)),
        )
        for index, status in enumerate(statuses)
    )
    base = server.url
    login(page, base, operator)
    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    chart = page.locator("tr[data-job='browser.nightly'] svg.run-chart")
    expect(chart).to_be_visible()
    bars = chart.locator("rect")
    expect(bars).to_have_count(50)  # the last 50 of 55 runs
    # Each bar's colour is its run's status, as the browser computes it.
    fills = bars.evaluate_all("rects => rects.map(r => [r.dataset.status, r.getAttribute('fill')])")
    assert {status: fill for status, fill in fills} == {
        status.value: STATUS_COLOURS[status] for status in set(PATTERN)
    }
    box = chart.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] == 24
    # Hovering shows the bar's <title>: the newest run is on the right.
    newest = bars.last.locator("title").text_content() or ""
    assert newest.startswith("tick ") and newest.endswith("web-1 pid 4054; lock lost; 1.0 s")
    Shooter(page, screenshots, capsys)("jobs-run-charts")

    page.click("tr[data-job='browser.nightly'] th a")
    run_chart = page.locator("#run-chart svg.run-chart")
    expect(run_chart.locator("rect")).to_have_count(50)
    expect(run_chart.locator("rect[data-status='failed']")).to_have_count(7)
    Shooter(page, screenshots, capsys)("job-runs-chart")
