"""Every command's arguments, in real ``manage.py`` subprocesses: a value out of its bounds,
not a number, not storable, is refused in one line with the usage exit code (2), never run
with nor met by a traceback (issue 33, item 9). The shared argument types alone:
tests/unit/test_command_arguments.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import JobRun, JobState, Schedule

#: A byte that is not UTF-8, as the command line hands it to Python (and a subprocess back).
NOT_UTF8 = "\udcff"
ADD = ("cronjob", "add", "arguments.x", "--command", "check")
REFUSED = [
    ("runlocked", "-w", "nan", "quick_scheduled"),
    ("runlocked", "-w", "inf", "quick_scheduled"),
    ("runlocked", "-w=-inf", "quick_scheduled"),
    ("runlocked", "-w", "-1", "quick_scheduled"),
    ("runlocked", "-w", "1e300", "quick_scheduled"),
    ("runlocked", "-w", "", "quick_scheduled"),
    ("runlocked", "-E", "256", "quick_scheduled"),
    ("runlocked", "-E", "99999999999999999999", "quick_scheduled"),
    ("runlocked", "--tick", "9999-12-31T23:59:59-14:00", "quick_scheduled"),
    ("runlocked", "--scope", "everywhere", "quick_scheduled"),
    ("runlocked", f"quick{NOT_UTF8}"),
    ("cronworker", "--grace", "nan"),
    ("cronworker", "--grace", "1e300"),
    ("cronworker", "--max-concurrency", "0"),
    ("cronworker", "--max-concurrency", "99999999999999999999"),
    ("cronjob", "history", "quick_scheduled", "--limit", "99999999999999999999"),
    ("cronjob", "history", "quick_scheduled", "--limit", "0"),
    ("cronjob", "pause", "quick_scheduled", "--until", "99999999d"),
    ("cronjob", "pause", "quick_scheduled", "--until", "9" * 400 + "s"),
    ("cronjob", "pause", "quick_scheduled", "--until", "9999-12-31T23:59:59-14:00"),
    ("cronjob", "pause", "quick_scheduled", "--reason", f"disk{NOT_UTF8}"),
    ("cronjob", "list", "--everything"),
    ("cronjob", "--verbosity", "9", "list"),
    (*ADD, "--every", "10", "--description", f"nightly{NOT_UTF8}"),
    ("cronjob", "add", f"arguments{NOT_UTF8}", "--command", "check", "--every", "10"),
    (*ADD, "--every", "10", "--max-lateness", "inf"),
    (*ADD, "--every", "10", "--args", '["\\ud800"]'),
    (*ADD, "--every", "10", "--starts", "9999-12-31T23:59:59-14:00"),
    ("cronstatus", "--expect-workers", "99999999999999999999"),
    ("cronstatus", "--expect-workers", "-1"),
    ("prune_jobruns", "--days", "-1"),
    ("prune_jobruns", "--days", "0"),
    ("prune_jobruns", "--days", "99999999"),
    ("prune_jobruns", "--days", "99999999999999999999"),
    ("prune_jobruns", "--batch-size", "99999999999999999999"),
    ("prune_jobruns", "--job", NOT_UTF8),
]


@pytest.mark.usefixtures("transactional_db")
@pytest.mark.parametrize("command", REFUSED, ids=lambda command: " ".join(command)[:60])
def test_a_bad_argument_is_one_line_and_exit_2(
    manage: Callable[..., Any], command: tuple[str, ...]
) -> None:
    done = manage(*command)
    assert (done.returncode, done.stderr.count("\n")) == (exitcodes.USAGE, 1), done.stderr[-3000:]
    assert done.stderr.startswith(f"{command[0]}: ") and "Traceback" not in done.stderr
    # Nothing ran, nothing was written.
    assert not JobRun.objects.exists() and not JobState.objects.exists()
    assert not Schedule.objects.exists()


#: Each option that has a default, and how its help names it.
DEFAULTS = [
    ("prune_jobruns", "--days", "default: HISTORY_DAYS"),
    ("prune_jobruns", "--batch-size", "default: 1000"),
    ("runlocked", "--wait", "default: the job's wait=, 0 unless it says"),
    ("runlocked", "--scope", "default: the job's"),
    ("runlocked", "--database", "default: LOCK_DATABASE"),
    ("cronjob", "--database", "default: LOCK_DATABASE"),
    ("cronjob history", "--limit", "default: 20"),
    ("cronstatus", "--expect-workers", "default: the EXPECT_WORKERS setting, 0"),
    ("cronworker", "--grace", "default 25"),
    ("cronworker", "--max-concurrency", "default 32"),
]


def option_help(helped: str, flag: str) -> str:
    """The help of ``flag`` in a command's ``-h``, on one line."""
    options = helped.split("\noptions:\n")[1].split("\n\n")[0]
    said: list[str] = []
    for line in options.splitlines():
        if line.startswith("  -"):
            if said:
                break
            if flag in {word.rstrip(",") for word in line.split()}:
                said.append(line)
        elif said:
            said.append(line)
    return " ".join(" ".join(said).split())


@pytest.mark.parametrize(("command", "flag", "says"), DEFAULTS)
def test_each_option_with_a_default_says_it(
    manage: Any, command: str, flag: str, says: str
) -> None:
    helped = manage(*command.split(), "-h")
    assert helped.returncode == 0, helped.stderr
    assert says in option_help(helped.stdout, flag), option_help(helped.stdout, flag)


@pytest.mark.parametrize("command", ["prune_jobruns", "runlocked", "cronworker", "cronstatus"])
def test_each_command_help_has_its_exit_codes(manage: Any, command: str) -> None:
    helped = manage(command, "-h").stdout
    codes = helped.split("\nexit codes:\n")[1]
    for code in (exitcodes.USAGE, exitcodes.DATABASE_UNAVAILABLE, exitcodes.CONFIG):
        assert f"\n  {code} " in f"\n{codes}", helped
