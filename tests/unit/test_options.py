"""The table of a schedule's options (issue 35): every option is a field of the definition and a
column of the model, has help on the command line and the form (or says how it is set instead),
and what its rules accept builds a job that a schedule row holds."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import models
from hypothesis import HealthCheck, given, settings

from django_advisory_cron import locked_task
from django_advisory_cron.admin.schedules import GROUPS, ScheduleForm
from django_advisory_cron.checks.configuration import check_jobs
from django_advisory_cron.jobs import declared, job
from django_advisory_cron.jobs.definitions import Definition, to_job
from django_advisory_cron.jobs.option_values import EARLIEST, LATEST
from django_advisory_cron.jobs.options import BY_NAME, CHECKS, OPTIONS, Check, duration, within_span
from django_advisory_cron.management import schedule_options
from django_advisory_cron.management.schedule_options import row
from django_advisory_cron.models import Schedule
from tests.test_schedule_properties import definitions

#: The schedule's columns that are no option: the database's to set, or the admin's.
NOT_OPTIONS = {"id", "created", "changed", "changed_by"}
#: A value ``@locked_task`` refuses, for each option with a check of its own (an every=10
#: job's).
REFUSED: dict[str, Any] = {
    "catch_up": "sometimes",
    "max_lateness": -1.0,
    "late_after": -1.0,
    "jitter": 10,
    "max_runs": 0,
    "overlap": "sometimes",
    "calendar": "sometimes:US",
}


def test_every_option_is_a_definition_field_and_a_column() -> None:
    names = [option.name for option in OPTIONS]
    assert len(set(names)) == len(names)
    fields = {field.name for field in dataclasses.fields(Definition)} - {"changed"}
    columns = {field.name for field in Schedule._meta.concrete_fields} - NOT_OPTIONS
    assert set(names) == fields == columns


def test_every_option_has_help_a_flag_or_how_it_is_set() -> None:
    for option in OPTIONS:
        assert option.help_text(), option.name  # a flag's help, or how it is set without one
        if option.flag:
            assert option.flag.startswith("--") and option.metavar, option.name
    flags = {flag: name for flag, name, _metavar, _help in schedule_options.SCHEDULE_OPTIONS}
    assert sorted(flags.values()) == sorted(o.name for o in OPTIONS if o.flag)


def test_every_option_is_on_the_form_under_one_heading() -> None:
    on_form = [name for _title, names in GROUPS.values() for name in names]
    assert sorted(on_form) == sorted(option.name for option in OPTIONS)
    assert list(ScheduleForm.Meta.fields) == on_form
    declared_here = set(ScheduleForm.declared_fields)  # with a help text of their own
    for option in OPTIONS:
        has_help = option.form_help is not None or option.name in declared_here
        field = Schedule._meta.get_field(option.name)
        assert isinstance(field, models.Field), option.name
        assert has_help or str(field.verbose_name), option.name  # the label says it


def test_settings_keys_are_the_options_keys_in_order() -> None:
    assert list(declared.KEYS) == [option.key for option in OPTIONS if option.key]
    assert all(declared.KEYS[option.key] == option.name for option in OPTIONS if option.key)


def test_the_decorator_refuses_an_unknown_keyword_as_python_does() -> None:
    with pytest.raises(
        TypeError, match=r"locked_task\(\) got an unexpected keyword argument 'cron'"
    ):
        locked_task(cron="* * * * *")  # type: ignore[call-overload]


def test_the_decorator_s_signatures_list_the_options_keywords_alike() -> None:
    """Its overload for keywords and its definition spell each keyword, its type and its
    default the same, and every option a job defined in code sets is one of them."""
    tree = ast.parse(inspect.getsource(job))
    signatures = [
        [
            (arg.arg, ast.unparse(arg.annotation or arg), ast.unparse(default or arg))
            for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
        ]
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "locked_task"
    ]
    with_keywords = [signature for signature in signatures if signature]
    assert len(signatures) == 3 and len(with_keywords) == 2
    assert with_keywords[0] == with_keywords[1]
    keywords = {name for name, _type, _default in with_keywords[0]}
    missing = {option.keyword for option in OPTIONS if option.keyword} - keywords
    assert not missing, f"@locked_task has no keyword {missing}: add it to both signatures"


def test_a_job_holds_each_option_its_code_sets_by_the_option_s_name() -> None:
    fields = {field.name for field in dataclasses.fields(job.Job)}
    in_code = {option.name for option in OPTIONS if option.keyword}
    assert in_code - fields == {"retries", "retry_backoff"}  # its retry policy holds them
    assert "retry" in fields


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize("option", CHECKS, ids=lambda check: check.id)
def test_an_option_s_check_refuses_what_the_decorator_refuses(option: Check) -> None:
    (name,) = [each.name for each in OPTIONS if each.check is option]
    keyword = BY_NAME[name].keyword
    assert keyword is not None
    with pytest.raises(ValueError, match="@locked_task 'refused': "):
        locked_task(name="refused", every=10, **{keyword: REFUSED[name]})(print)
    job.registry.register(job.Job(func=print, name="by_hand", every=timedelta(seconds=10)))
    job.registry.register(
        job.Job(
            func=print, name="by_hand_bad", every=timedelta(seconds=10), **{name: REFUSED[name]}
        )
    )
    assert [message.id for message in check_jobs()] == [f"django_advisory_cron.{option.id}"]


@pytest.mark.parametrize("name", [option.name for option in OPTIONS if option.least])
def test_a_duration_is_built_by_the_check_that_accepts_it(name: str) -> None:
    least = BY_NAME[name].least
    assert least is not None
    assert duration(name, least.total_seconds()) == least
    refusal = re.escape(f"the {BY_NAME[name].what} must be a number")
    with pytest.raises(ValueError, match=refusal):
        duration(name, least.total_seconds() / 2)
    with pytest.raises(ValueError, match=refusal):
        duration(name, "5")


def test_one_span_for_a_start_and_an_end() -> None:
    """Every reader holds it: a date-time in any zone, ``timestamptz`` and ISO 8601 text."""
    for name in ("starts", "ends"):
        assert within_span(name, EARLIEST) == EARLIEST
        for outside in (EARLIEST - timedelta(microseconds=1), LATEST):
            with pytest.raises(ValueError, match="must be from 1970-01-01 to 9999-01-01"):
                within_span(name, outside)
    for zone in (timezone(timedelta(hours=14)), timezone(timedelta(hours=-14))):
        assert EARLIEST.astimezone(zone).isoformat() and LATEST.astimezone(zone).isoformat()
    assert datetime.fromisoformat(LATEST.isoformat()) == LATEST


@pytest.fixture
def schedule_jobs(fresh_registry: None) -> None:
    importlib.reload(importlib.import_module("tests.jobsapp.schedule_tasks"))


@pytest.mark.usefixtures("schedule_jobs")
@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(definition=definitions)
def test_what_the_rules_accept_builds_a_job_and_a_row(definition: Definition) -> None:
    """Without a server: the row's every column holds what it is given (the real
    PostgreSQL's round trip: tests/test_schedule_properties.py)."""
    if definition.problems():
        return
    job = to_job(definition)
    assert job.name == definition.name
    values = row(definition)
    assert set(values) == {option.name for option in OPTIONS}
    Schedule(**values).clean_fields(exclude=["created", "changed"])
