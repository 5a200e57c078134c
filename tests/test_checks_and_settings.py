"""System checks and the ADVISORY_CRON settings."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("fresh_registry")


def test_check_command_runs_the_checks(manage) -> None:
    result = manage("check")
    assert result.returncode == 0, result.stderr
