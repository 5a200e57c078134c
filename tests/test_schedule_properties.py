"""What the definition rules accept is a job (issue 33): for generated definitions (names,
what they call and with which arguments, crons, intervals, time zones, timeouts, lateness,
lateness targets, retries, times), every one without problems makes a job whose schedule
ticks and whose lateness target is judged, is stored as a row of the real PostgreSQL, and is
read back through the catalog as the same schedule, a job and not a schedule that cannot
run."""

from __future__ import annotations

import dataclasses
import importlib
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from django_advisory_cron.jobs import catalog
from django_advisory_cron.jobs.definitions import Definition, to_job
from django_advisory_cron.management.schedule_options import row
from django_advisory_cron.models import Schedule
from django_advisory_cron.ops.status import JobStatus

NOW = datetime(2026, 12, 5, 8, 0, tzinfo=timezone.utc)

#: Any text, NUL and lone surrogates included (what a form, a command line or SQL can hand).
texts = st.text(st.characters(exclude_categories=()), max_size=12)
#: Any number of seconds, the extremes included.
any_seconds = st.one_of(st.floats(), st.integers(-(10**12), 10**12), st.floats(0, 2))
json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
times = st.datetimes(timezones=st.just(timezone.utc), allow_imaginary=False)
usual_times = st.one_of(st.none(), times.filter(lambda t: 1970 <= t.year < 9999))
usual_seconds = st.one_of(st.none(), st.floats(1e-6, 31622400))

#: A definition of the kind people type: each field within what the rules take, mostly.
usual = st.builds(
    lambda name, target, when, **rest: Definition.from_values(
        {"name": name, **target, **when, **rest}
    ),
    name=st.from_regex(r"[a-z][a-z0-9_.-]{0,30}", fullmatch=True),
    target=st.one_of(
        st.fixed_dictionaries(
            {"job": st.just("mark"), "args": st.lists(texts, min_size=1, max_size=2)}
        ),
        st.fixed_dictionaries(
            {
                "job": st.just("mark"),
                "kwargs": st.fixed_dictionaries({"label": texts}, optional={"note": texts}),
            }
        ),
        st.fixed_dictionaries({"command": st.sampled_from(["noop", "check"])}),
        st.fixed_dictionaries({"job": st.text(max_size=30), "deliver": st.just("celery")}),
    ),
    when=st.one_of(
        st.fixed_dictionaries({"every": st.floats(1, 31622400)}),
        st.fixed_dictionaries(
            {
                "cron": st.sampled_from(
                    ["0 3 * * *", "*/5 * * * *", "0 0 29 2 1", "0 2 * * * 30", "@hourly"]
                ),
                "timezone": st.sampled_from(["", "Europe/Paris", "America/St_Johns"]),
            }
        ),
    ),
    timeout=usual_seconds,
    max_lateness=usual_seconds,
    late_after=usual_seconds,
    retries=st.one_of(st.none(), st.integers(0, 100)),
    catch_up=st.sampled_from(["", "all", "latest", "none"]),
    description=st.text(max_size=500),
    starts=usual_times,
    enabled=st.booleans(),
)
#: What each field may also hold: its extremes, and anything a form, a command or SQL hands.
EXTREMES: dict[str, st.SearchStrategy[Any]] = {
    "name": st.one_of(texts, st.text(min_size=195, max_size=205)),
    "job": st.one_of(texts, st.text(min_size=195, max_size=205)),
    "command": texts,
    "args": st.lists(json_values, max_size=3),
    "kwargs": st.dictionaries(texts, json_values, max_size=3),
    "every": any_seconds,
    "cron": st.sampled_from(
        ["0 0 30 2 *", "61 * * * *", "* * * * * * *", "1,2,3 " * 50 + "* * * *"]
    ),
    "timezone": st.one_of(texts, st.sampled_from(["Mars/Olympus", "../../etc/passwd"])),
    "timeout": any_seconds,
    "max_lateness": any_seconds,
    "late_after": any_seconds,
    "retries": st.integers(-1, 10**10),
    "retry_backoff": any_seconds,
    "catch_up": texts,
    "deliver": st.one_of(texts, st.just("celery:" + "q" * 200)),
    "description": st.one_of(texts, st.text(min_size=495, max_size=510)),
    "starts": times,
    "ends": times,
    "per_tenant": st.one_of(
        texts,
        st.sampled_from(["*", "acme", "acme, globex", "pg_catalog", "s" * 64, "*,acme", ","]),
    ),
}
definitions = st.one_of(
    usual,
    st.tuples(usual, st.sampled_from(sorted(EXTREMES))).flatmap(
        lambda pair: EXTREMES[pair[1]].map(
            lambda value: dataclasses.replace(pair[0], **{pair[1]: value})
        )
    ),
)


@pytest.fixture
def schedule_jobs(fresh_registry: None) -> None:
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))


@pytest.mark.django_db
@pytest.mark.usefixtures("schedule_jobs")
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(definition=definitions)
@example(Definition("tiny", command="noop", every=1e-9))  # issue 33: rounds to no interval
@example(Definition("huge", command="noop", every=1e300))  # overflows a timedelta
@example(Definition("slow", command="noop", every=60, timeout=1e300))  # overflows the timer
def test_accepted_by_the_rules_builds_a_job_and_stores(definition: Definition) -> None:
    if definition.problems():
        return
    job = to_job(definition)
    assert job.schedule is not None
    assert job.schedule.next_tick(NOW) > NOW
    for limit in (job.timeout, job.max_lateness, job.late_after, job.retry and job.retry.backoff):
        assert not limit or NOW + timedelta(seconds=limit) > NOW  # deadlines are times
    # Its lateness target is judged against its ticks, a year back (a run 400 days late).
    judged = JobStatus(job, NOW, last_ticked=(NOW - timedelta(days=400), NOW))
    assert judged.late == (job.late_after is not None and job.enabled)
    assert definition.schedule_text()
    with transaction.atomic():
        Schedule.objects.create(**row(definition), changed_by="hypothesis")
        found = catalog.read(connection)
        transaction.set_rollback(True)
    assert definition.name not in found.broken, found.broken[definition.name]
    assert found.get(definition.name).schedule_text == job.schedule_text
    read = found.definition(definition.name)
    assert read is not None
    assert dataclasses.replace(read, changed=None) == definition
