"""The admin pages in a real Chromium, driven by Playwright, against a live server.

The browser is the system's ``chromium`` (Playwright's own browser download is not used). Where
it is missing the tests skip, except in CI (``CI`` set), where they fail. A screenshot of each
page is saved under pytest's base temp dir and its path printed, for CI artifacts.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission

import django_advisory_cron
from django_advisory_cron import locked_task

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the browser tests")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if executable is None:
        _unavailable("chromium is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed")
    # Playwright's sync API keeps an event loop in this thread for as long as it runs; the
    # tests' ORM calls (and the database flush after each test) are plain synchronous code,
    # so Django's guard against ORM calls inside a running event loop must be lifted.
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A live server that also serves the admin's static files and this app's, as
    ``collectstatic`` would gather them.

    The test settings have no ``staticfiles`` app: both apps' static directories are copied
    into one ``STATIC_ROOT``, which the server's static handler serves, so the pages look (and
    measure) as in a real deployment.
    """
    from django.test.utils import override_settings
    from pytest_django.live_server_helper import LiveServer

    root = tmp_path_factory.mktemp("static")
    for app in (Path(admin.__file__), Path(django_advisory_cron.__file__)):
        shutil.copytree(app.parent / "static", root, dirs_exist_ok=True)
    with (
        override_settings(STATIC_URL="/static/", STATIC_ROOT=str(root)),
        django_db_blocker.unblock(),
    ):
        live = LiveServer("localhost")
        yield live
        # A request thread still open (a browser's keep-alive connection) closes its database
        # connections when it ends: before the server stops sharing the in-memory sqlite
        # connection with its threads, or that close fails in the thread.
        deadline = time.monotonic() + 10
        while any(map(_serving, threading.enumerate())) and time.monotonic() < deadline:
            time.sleep(0.05)
        live.stop()


def _serving(thread: threading.Thread) -> bool:
    """A live server's thread that is handling a request."""
    return "process_request_thread" in thread.name and thread.is_alive()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "screenshots"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def operator(db_url: str, django_user_model: Any) -> tuple[str, str]:
    user = django_user_model.objects.create_user("operator", password="s3cret-pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_advisory_cron",
            codename__in=[
                "view_heldlock",
                "terminate_backend",
                "view_registeredjob",
                "view_jobrun",
            ],
        )
    )
    return "operator", "s3cret-pw"


class Shooter:
    def __init__(self, page: Any, directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.page, self.directory, self.capsys = page, directory, capsys

    def __call__(self, name: str) -> Path:
        path = self.directory / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        with self.capsys.disabled():
            print(f"\nscreenshot: {path}")
        return path


def login(page: Any, base: str, credentials: tuple[str, str]) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", credentials[0])
    page.fill("#id_password", credentials[1])
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")


def lock_count(conn: psycopg.Connection[Any], pid: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", [pid]
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_held_lock_stale_terminate_and_runs(
    page: Any,
    server: Any,
    operator: tuple[str, str],
    raw_connect: Callable[..., psycopg.Connection[Any]],
    fresh_registry: None,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    @locked_task(name="browser.report", schedule="*/10 * * * *", max_runtime=1)
    def report() -> None:
        """Builds the nightly report."""

    @locked_task(name="browser.broken")
    def broken() -> None:
        raise RuntimeError("disk full")

    report.run()
    with pytest.raises(RuntimeError):
        broken()
    holder = raw_connect(application_name="stuck-worker")
    holder.execute(f"SELECT pg_advisory_lock({report.key.sql})", report.key.params)
    pid = int(holder.info.backend_pid)
    watcher = raw_connect()
    shoot = Shooter(page, screenshots, capsys)
    base = server.url

    login(page, base, operator)
    page.goto(f"{base}/admin/django_advisory_cron/heldlock/")
    row = page.locator("#result_list tbody tr", has_text="browser.report")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(str(pid))
    expect(row).to_contain_text("stuck-worker")
    # The operator may terminate, but not read the sessions' SQL (no view_query).
    expect(page.locator("#result_list thead")).not_to_contain_text("current query")
    shoot("held-locks")

    time.sleep(1.2)  # past the job's max_runtime
    page.goto(f"{base}/admin/django_advisory_cron/heldlock/?stale=yes")
    row = page.locator("#result_list tbody tr", has_text="browser.report")
    expect(row).to_contain_text("STALE")
    shoot("held-locks-stale")

    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "terminate_backends")
    page.click("button[name=index]")
    expect(page.locator("#content")).to_contain_text("Terminating ends the whole database")
    expect(page.locator("#terminate-list")).to_contain_text(str(pid))
    expect(page.locator("#terminate-list thead")).not_to_contain_text("current query")
    shoot("terminate-confirmation")
    assert lock_count(watcher, pid) == 1
    page.click("input[value='Yes, terminate']")
    expect(page.locator(".messagelist")).to_contain_text(f"Terminated backend {pid}")
    deadline = time.monotonic() + 5
    while lock_count(watcher, pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock_count(watcher, pid) == 0
    expect(page.locator("#result_list tbody tr", has_text="browser.report")).to_have_count(0)
    shoot("held-locks-after-terminate")

    page.goto(f"{base}/admin/django_advisory_cron/jobrun/")
    expect(page.locator("#result_list")).to_contain_text("browser.report")
    expect(page.locator("#result_list")).to_contain_text("RuntimeError: disk full")
    shoot("job-runs")

    page.goto(f"{base}/admin/django_advisory_cron/registeredjob/")
    job_row = page.locator("tr.job-row[data-job='browser.broken']")
    expect(job_row.locator("td.health")).to_contain_text("FAILING")
    report_row = page.locator("tr.job-row[data-job='browser.report']")
    expect(report_row).to_contain_text("Every 10 minutes")
    shoot("jobs")

    page.goto(f"{base}/admin/django_advisory_cron/")
    expect(page.locator("#advisory-cron-health")).to_contain_text("browser.broken")
    shoot("app-index")


def test_viewer_without_terminate_permission_sees_no_action(
    page: Any,
    server: Any,
    db_url: str,
    django_user_model: Any,
    screenshots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from playwright.sync_api import expect

    user = django_user_model.objects.create_user("viewer", password="s3cret-pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_heldlock"))
    login(page, server.url, ("viewer", "s3cret-pw"))
    page.goto(f"{server.url}/admin/django_advisory_cron/heldlock/")
    expect(page.locator("h1")).to_contain_text("held lock")
    expect(page.locator("select[name=action]")).to_have_count(0)
    response = page.goto(f"{server.url}/admin/django_advisory_cron/jobrun/")
    assert response is not None and response.status == 403
    Shooter(page, screenshots, capsys)("viewer-forbidden")
