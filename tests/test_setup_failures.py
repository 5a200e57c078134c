"""Without a usable PostgreSQL, pytest and the demo stop with one line saying what to do.

Real subprocesses: the settings start the server while they are imported, before any test
runs, so only a fresh process shows what a user sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USAGE_ERROR = 4  # pytest's exit code for a usage error
UNAVAILABLE = 69  # the demo's, as runlocked's, for no database


def run_without_server(args: list[str], **env: str) -> tuple[int, list[str]]:
    """Run ``args`` with no DATABASE_URL and ``env``; the exit code and non-blank lines."""
    environ = dict(os.environ)
    for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PG_SOURCE"):
        environ.pop(name, None)
    environ.update(env)
    result = subprocess.run(
        args, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120, check=False
    )
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return result.returncode, [line for line in output.splitlines() if line.strip()]


def test_pytest_with_a_wrong_pg_bindir_says_so_in_one_line(tmp_path: Path) -> None:
    wrong = tmp_path / "no-bin-here"
    code, lines = run_without_server(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_keys.py"],
        PG_BINDIR=str(wrong),
    )
    assert code == USAGE_ERROR
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ERROR: The tests need PostgreSQL. PG_BINDIR={wrong} is wrong")


def test_pytest_with_a_wrong_pg_source_says_so_in_one_line() -> None:
    code, lines = run_without_server(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_keys.py"],
        PG_SOURCE="docker",
    )
    assert code == USAGE_ERROR
    assert lines == [
        "ERROR: The tests need PostgreSQL. PG_SOURCE='docker' is wrong: use one of auto, "
        "system, embedded."
    ]


def test_demo_with_a_wrong_pg_bindir_exits_69_with_one_line(tmp_path: Path) -> None:
    wrong = tmp_path / "no-bin-here"
    code, lines = run_without_server(
        [sys.executable, str(ROOT / "example_project" / "demo.py")], PG_BINDIR=str(wrong)
    )
    assert code == UNAVAILABLE
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"demo: PG_BINDIR={wrong} is wrong")
