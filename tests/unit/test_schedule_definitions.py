"""The one set of rules every way of typing a schedule goes through
([Definition.problems][django_advisory_cron.jobs.definitions.Definition.problems]), and the jobs
a definition makes (its migration: tests/test_schedule_definitions.py)."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest

from django_advisory_cron.jobs.definitions import Definition, overridden, to_job
from django_advisory_cron.jobs.job import registry


@pytest.fixture(autouse=True)
def schedule_jobs(fresh_registry: None) -> None:
    """``schedule_tasks``'s jobs registered for each test, and unregistered after it (an
    autouse fixture runs before those a mark asks for: it names the registry's own)."""
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))


@pytest.mark.parametrize(
    ("definition", "problem"),
    [
        (Definition("a", command="nosuch", every=5), "there is no management command 'nosuch'"),
        (Definition("a", job="nosuch", every=5), "there is no registered job 'nosuch'"),
        (
            Definition("a", job="mark", kwargs={"nolabel": 1}, every=5),
            "job 'mark' cannot be called with these arguments",
        ),
        (
            Definition("a", command="sendtestemail", args=["--bogus"], every=5),
            "manage.py sendtestemail refuses these arguments: unrecognized arguments: --bogus",
        ),
        (
            Definition("a", command="sendtestemail", kwargs={"bogus": True}, every=5),
            "manage.py sendtestemail has no option bogus",
        ),
        (
            Definition("a", command="migrate", args=["--help"], every=5),
            "manage.py migrate: these arguments ask for its help, not a run",
        ),
        (Definition("a", job="mark", args=["x"], cron="61 * * * *"), "minute 61 is out of range"),
        (Definition("a", job="mark", args=["x"], cron="0 0 30 2 *"), "never fires"),
        (
            Definition("a", job="mark", args=["x"], cron="0 * * * *", timezone="Mars/Base"),
            "'Mars/Base' is not a known time zone",
        ),
        (
            Definition("a", job="mark", args=["x"], every=5, timezone="UTC"),
            "a time zone applies to a cron expression, not to an interval",
        ),
        (
            Definition("a", job="mark", args=["x"], every=5, cron="* * * * *"),
            "either a cron expression or an interval, not both",
        ),
        (Definition("a", job="mark", args=["x"]), "needs a cron expression or an interval"),
        (Definition("a", job="mark", args=["x"], every=0), "a number of seconds from 1 to"),
        (
            Definition("mark", job="mark", args=["x"], every=5),
            "the name 'mark' is taken by a job defined in code",
        ),
        (Definition("zz", override=True, every=5), "no job 'zz' defined in code to override"),
        (
            Definition("a", job="mark", command="check", every=5),
            "either a job or a management command",
        ),
        (  # as a form or the command line may hand it over: a JSON object
            Definition.from_values({"name": "a", "job": "mark", "args": {"x": 1}, "every": 5}),
            "must be a JSON list",
        ),
        # What the schedules table cannot store (issue 33): refused, not written.
        (
            Definition("a\x00b", job="mark", args=["x"], every=5),
            "the name holds the control character U+0000",
        ),
        (
            Definition("a", job="mark", args=["\ud800"], every=5),
            "the arguments must not hold NUL or an unpaired surrogate",
        ),
        (
            Definition("a", job="mark", args=[float("nan")], every=5),
            "the arguments must not hold NaN or infinity (JSON has none)",
        ),
        (
            Definition("a", job="t" * 201, deliver="celery", every=5),
            "the job is 201 characters long; at most 200",
        ),
    ],
)
def test_each_bad_input_is_one_line(definition: Definition, problem: str) -> None:
    problems = definition.problems()
    assert any(problem in line for line in problems), problems
    assert all("\n" not in line for line in problems)


def test_a_good_definition_makes_a_job_that_calls_the_function_not_the_job() -> None:
    definition = Definition("weekly", job="mark", args=["weekly"], kwargs={"note": "n"}, every=7)
    assert definition.problems() == []
    job = to_job(definition)
    assert job.source == "database" and job.every == timedelta(seconds=7)
    assert job.name not in registry  # its own name, lock key and ticks
    assert job.key != registry.get("mark").key
    # The job's policies come with it: a schedule calling it retries and keeps ticks alike.
    assert (job.retry, job.at_most_once) == (registry.get("mark").retry, False)


def test_an_override_says_what_it_changed() -> None:
    code = registry.get("code_yearly")
    changed = overridden(code, Definition("code_yearly", override=True, every=30))
    assert changed.overridden == ("cron", "every") and changed.every == timedelta(seconds=30)
    assert changed.cron is None and changed.source == "code"
    disabled = overridden(code, Definition("code_yearly", override=True, enabled=False))
    assert disabled.overridden == ("enabled",) and disabled.cron == code.cron


def test_a_name_taken_says_where_the_other_job_is_defined() -> None:
    settings_job = to_job(
        Definition("nightly", job="mark", args=["n"], every=60), source="settings"
    )
    database_job = to_job(Definition("weekly", job="mark", args=["w"], every=60))
    known = [settings_job, database_job]
    (taken,) = Definition("nightly", job="mark", args=["x"], every=5).problems(known)
    assert "taken by a job declared in ADVISORY_CRON['SCHEDULES']" in taken
    assert taken.endswith("or override that job's schedule instead")
    (taken,) = Definition("weekly", job="mark", args=["x"], every=5).problems(known)
    assert taken.endswith("is taken by a job kept in the database; pick another name")
