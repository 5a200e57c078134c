"""The per-tenant checks through ``manage.py check`` of a real django-tenants project
(tests/settings_tenants.py): each problem is its documented id, in one line; a project's own
tenant router and a second alias of the tenants' database are no problem. No database is
touched. tests/unit/test_tenants_checks.py has E082 and the router half of E081."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import MANAGE, manage_env

pytest.importorskip("django_tenants", reason="django-tenants is not installed (the test extra)")


def check(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MANAGE), "check", "--settings=tests.settings_tenants"],
        env=manage_env(os.environ["DATABASE_URL"], **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The check lines of ``done`` (each problem's first line)."""
    return [line for line in done.stderr.splitlines() if line.startswith("?: (")]


def test_a_clean_project_has_no_error() -> None:
    done = check()
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


@pytest.mark.parametrize(
    ("env", "check_id", "says"),
    [
        ("TENANTS_NOT_SHARED", "E080", "django_advisory_cron is not in SHARED_APPS"),
        ("TENANTS_LOCKS_ELSEWHERE", "E081", "the lock database 'locks' is not the tenants'"),
    ],
)
def test_each_problem_is_its_id_in_one_line(env: str, check_id: str, says: str) -> None:
    done = check(**{env: "1"})
    assert done.returncode == 1
    [line] = errors(done)
    assert line.startswith(f"?: (django_advisory_cron.{check_id}) {says}"), line


@pytest.mark.parametrize("env", ["TENANTS_OWN_ROUTER", "TENANTS_LOCKS_DIRECT"])
def test_an_own_router_or_another_alias_of_the_database_is_fine(env: str) -> None:
    done = check(**{env: "1"})
    assert done.returncode == 0, done.stderr
