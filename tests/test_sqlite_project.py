"""A project that adds the app and develops or tests on SQLite: Django's own commands work
(the check is a warning, the migrations make the tables), and each of the app's commands
refuses in one line with exit 78, since advisory locks need PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron import exitcodes

SETTINGS = "--settings=tests.settings_sqlite"
REFUSED = (
    "database alias 'default' uses the 'sqlite' backend; advisory locks need PostgreSQL "
    "(set ADVISORY_CRON['LOCK_DATABASE'] to a PostgreSQL alias)"
)


@pytest.fixture
def sqlite_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESTS_SQLITE_PATH", str(tmp_path / "project.sqlite3"))


def test_django_commands_work_and_warn_once(sqlite_project: None, manage: Any) -> None:
    check = manage("check", SETTINGS)
    assert check.returncode == 0, check.stderr
    assert "(django_advisory_cron.W002)" in check.stderr
    migrate = manage("migrate", SETTINGS, "--verbosity", "1")
    assert migrate.returncode == 0, migrate.stderr
    assert "Applying django_advisory_cron.0015" in migrate.stdout


@pytest.mark.parametrize(
    "command",
    [
        ("cronstatus",),
        ("runlocked", "quick_scheduled"),
        ("cronworker",),
        ("cronjob", "list"),
        ("prune_jobruns",),
    ],
)
def test_the_apps_commands_refuse_in_one_line(
    sqlite_project: None, manage: Any, command: tuple[str, ...]
) -> None:
    done = manage(command[0], SETTINGS, *command[1:])
    assert (done.returncode, done.stderr) == (exitcodes.CONFIG, f"{command[0]}: {REFUSED}\n")


#: What the admin's pages read from the lock database: each says why it cannot, on SQLite.
ADMIN_PAGES = """
from html import unescape

from django.contrib.auth import get_user_model
from django.test import Client

client = Client()
client.force_login(get_user_model().objects.create_superuser("root", password="pw"))
for page in ("heldlock", "registeredjob", "jobrun", "timeline", "schedule"):
    answer = client.get(f"/admin/django_advisory_cron/{page}/", follow=True)
    said = [title for title in TITLES if f"{title}: {REFUSED}" in unescape(answer.text)]
    went = answer.redirect_chain[-1][0] if answer.redirect_chain else ""
    print(page, answer.status_code, went, said)
index = client.get("/admin/django_advisory_cron/")
print("app", index.status_code, REFUSED in unescape(index.text))
"""


def test_the_admin_pages_say_they_need_postgresql(sqlite_project: None, manage: Any) -> None:
    assert manage("migrate", SETTINGS, "--verbosity", "0").returncode == 0
    titles = ("Held locks", "Jobs", "Job runs", "Timeline")
    shown = manage(
        "shell", SETTINGS, "-c", f"REFUSED = {REFUSED!r}\nTITLES = {titles!r}\n" + ADMIN_PAGES
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    lines = shown.stdout.splitlines()
    pages = ("heldlock", "registeredjob", "jobrun", "timeline")
    for page, title in zip(pages, titles, strict=True):
        assert f"{page} 200 /admin/ [{title!r}]" in lines, shown.stdout
    assert "schedule 200  []" in lines, shown.stdout  # its rows are plain rows
    assert "app 200 True" in lines, shown.stdout
