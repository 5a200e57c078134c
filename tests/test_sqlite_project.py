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
