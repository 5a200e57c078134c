"""System checks and the ADVISORY_CRON settings."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.usefixtures("fresh_registry")


def test_check_command_runs_the_checks(manage) -> None:
    result = manage("check")
    assert result.returncode == 0, result.stderr


def test_sub_minute_jobs_pass_the_checks_with_the_default_max_skew(
    manage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/usage.md's own ``every=5`` example checks clean: a run belongs to its nearest tick,
    so ticks closer than twice ``MAX_SKEW`` do not compete, and nothing asks to lower
    ``MAX_SKEW`` (which would change what ``runlocked`` does for every other job)."""
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "sub_minute_tasks"}))
    result = manage("check")
    assert result.returncode == 0, result.stderr
    assert "MAX_SKEW" not in result.stderr, result.stderr
    assert "W007" not in result.stderr, result.stderr
