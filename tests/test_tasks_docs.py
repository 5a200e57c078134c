"""docs/tasks.md, followed literally, gives a working Tasks setup.

A fresh ``django-admin startproject`` gets the page's settings snippet for this Django appended
to its ``settings.py`` (plus the test database and one app with a job), then runs the page's
commands in real subprocesses: ``migrate``, ``check``, ``runlocked --enqueue`` and
django-tasks-db's ``db_worker``, which runs the tick.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tasks.md"

JOB = """
import os
from datetime import timedelta

from django_advisory_cron import locked_task


@locked_task(every=timedelta(minutes=1), deliver="tasks")
def write_marker():
    with open(os.environ["MARKER_FILE"], "a") as marker:
        marker.write(f"{os.getpid()}\\n")
"""


def settings_snippets() -> dict[str, str]:
    """The page's Python blocks that set ``TASKS``, by the Django version said before them."""
    page = PAGE.read_text()
    found = {}
    for match in re.finditer(r"\*\*Django ([^*]+)\*\*.*?```python\n(.*?)```", page, re.DOTALL):
        if "TASKS = {" in match.group(2):
            found[match.group(1)] = match.group(2)
    return found


def test_the_page_has_one_snippet_per_django_and_they_differ_only_by_the_backport() -> None:
    snippets = settings_snippets()
    assert set(snippets) == {"5.2", "6.0 and later"}
    backport = [line for line in snippets["5.2"].splitlines() if '"django_tasks",' in line]
    assert len(backport) == 1
    assert snippets["5.2"].replace(backport[0] + "\n", "") == snippets["6.0 and later"]


@pytest.fixture
def fresh_database(db_url: str) -> Iterator[str]:
    """An empty database on the test server, as a new project would have; dropped afterwards."""
    name = f"tasksdocs_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield urlunsplit(urlsplit(db_url)._replace(path=f"/{name}"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_following_the_page_enqueues_a_tick_that_db_worker_runs(
    fresh_database: str, tmp_path: Path
) -> None:
    version = "6.0 and later" if find_spec("django.tasks") else "5.2"
    snippet = settings_snippets()[version]
    marker = tmp_path / "marker.txt"
    env = {
        **os.environ,
        "DATABASE_URL": fresh_database,
        "MARKER_FILE": str(marker),
        "PYTHONPATH": str(ROOT),  # this checkout, as if installed
    }
    for name in ("DJANGO_SETTINGS_MODULE", "ADVISORY_CRON_JSON"):
        env.pop(name, None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    started = run(sys.executable, "-m", "django", "startproject", "mysite", ".")
    assert started.returncode == 0, started.stderr
    app = tmp_path / "demo"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "tasks.py").write_text(JOB)
    settings = tmp_path / "mysite" / "settings.py"
    settings.write_text(
        settings.read_text()
        + "\n"
        + snippet
        + "\n# The test's own lines: its PostgreSQL, and an app with one job.\n"
        + "from django_advisory_cron.testing import parse_database_url\n\n"
        + 'DATABASES = {"default": parse_database_url(os.environ["DATABASE_URL"])}\n'
        + 'INSTALLED_APPS += ["demo"]\n'
    )
    settings.write_text("import os\n" + settings.read_text())

    manage = (sys.executable, "manage.py")
    for command in (("migrate", "-v0"), ("check", "--fail-level", "WARNING")):
        done = run(*manage, *command)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    enqueued = run(*manage, "runlocked", "--enqueue", "write_marker")
    assert enqueued.returncode == 0, enqueued.stderr
    assert not marker.exists()  # queued, not run in the scheduler
    worked = run(*manage, "db_worker", "--batch", "--no-startup-delay")
    assert worked.returncode == 0, worked.stderr
    assert len(marker.read_text().splitlines()) == 1
    with psycopg.connect(fresh_database) as conn:
        rows = conn.execute(
            "SELECT job, status, task_id FROM django_advisory_cron_jobrun"
        ).fetchall()
    assert [(job, status) for job, status, _task in rows] == [("write_marker", "succeeded")]
    assert rows[0][2]
