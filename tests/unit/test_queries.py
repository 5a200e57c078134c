"""The statements of ``db/queries.sql`` against the models: the tables, the columns written and
the status values they name are the models' own (tests/test_queries_sent.py checks, on a
server, that the code sends these statements verbatim and that PostgreSQL plans each)."""

from __future__ import annotations

import re

import pytest
from django.db import models

from django_advisory_cron.db import reads, sql
from django_advisory_cron.db.queries import QUERIES, parse
from django_advisory_cron.jobs.options import BY_NAME
from django_advisory_cron.models import (
    TICK_TAKING,
    EnqueuedTick,
    HeldLock,
    JobRun,
    JobState,
    RunStatus,
)
from django_advisory_cron.models import Schedule as ScheduleRow

#: The tables the statements name; the held locks' view is read only, by the skip rows.
MODELS: list[type[models.Model]] = [JobRun, JobState, EnqueuedTick, ScheduleRow, HeldLock]
TABLES = {model._meta.db_table: model for model in MODELS}


def columns(model: type[models.Model]) -> set[str]:
    return {field.column for field in model._meta.concrete_fields if field.column}


def test_the_file_parses_into_named_statements_with_their_comments_left_out() -> None:
    text = "-- header\n\n-- name: one\n-- what it is for\nSELECT 1\n\n-- name: two\nSELECT\n  2\n"
    assert parse(text) == {"one": "SELECT 1", "two": "SELECT\n  2"}
    assert len(QUERIES) >= 40
    assert all(text and not text.startswith("--") for text in QUERIES.values())


def test_every_table_named_is_a_models_table() -> None:
    named = {
        table for text in QUERIES.values() for table in re.findall(r"\bdjango_\w+\b(?!\.)", text)
    }
    functions = {"django_advisory_cron_claim", "django_advisory_cron_census"}
    channels = {sql.RUN_CHANNEL, sql.SCHEDULES_CHANNEL, *functions}
    assert named - channels <= set(TABLES), named - channels - set(TABLES)
    assert set(TABLES) <= named


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_column_written_is_its_tables(name: str) -> None:
    text = QUERIES[name]
    for table, listed in re.findall(r'INSERT INTO "(\w+)"(?: AS \w+)? \(([^)]*)\)', text):
        written = {column.strip() for column in listed.split(",")}
        assert written <= columns(TABLES[table]), (table, written - columns(TABLES[table]))
    for table, assignments in re.findall(
        r'UPDATE "(\w+)"(?: \w+)?\s+SET(.*?)(?:WHERE|FROM)', text, re.S
    ):
        assigned = set(re.findall(r"(?:^|,)\s*(\w+) =", assignments))
        assert assigned and assigned <= columns(TABLES[table]), (table, assigned)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_status_named_is_a_run_status_and_every_taking_list_is_tick_taking(
    name: str,
) -> None:
    text = QUERIES[name]
    statuses = {status.value for status in RunStatus}
    for listed in re.findall(r"status IN \(([^)]*)\)", text):
        values = re.findall(r"'(\w+)'", listed)
        assert set(values) <= statuses, values
        if len(values) > 2:
            assert values == [status.value for status in TICK_TAKING]
    # Besides statuses, a CASE names only the schedule's times Python cannot read.
    for value in re.findall(r"(?:status (?:=|<>) |THEN |ELSE )'(\w+)'", text):
        assert value in statuses | columns(ScheduleRow), value


def test_the_columns_read_are_the_python_tuples_in_their_order() -> None:
    assert set(reads.RUN_COLUMNS) <= columns(JobRun)
    # The catalog names a schedule row's values by the options' table, then ``changed``.
    read = re.findall(r"\bs\.(\w+)", QUERIES["schedule_rows"].split("concat_ws")[0])
    assert list(dict.fromkeys(read)) == [*BY_NAME, "changed"]
    assert set(read) <= columns(ScheduleRow)
    summary = QUERIES["job_summaries"].split("FROM")[0]
    assert re.findall(r"\br\.(\w+)", summary) == list(reads.RUN_COLUMNS)
    # A job's state is read whole, in the order the Python tuple names it.
    assert re.findall(r"\bst\.(\w+)", summary) == list(reads.STATE_COLUMNS)
    assert set(reads.STATE_COLUMNS) == columns(JobState)


def test_the_names_python_shares_with_the_statements_are_the_same() -> None:
    assert sql.HOME_NAME in QUERIES["try_lock_session"] and sql.HOME_NAME in QUERIES["unlock"]
    assert QUERIES["listen_runs"] == f"LISTEN {sql.RUN_CHANNEL}"
    assert QUERIES["listen_schedules"] == f"LISTEN {sql.SCHEDULES_CHANNEL}"


def spaced(text: str) -> str:
    return " ".join(text.replace("(", "( ").replace(")", " )").split())


#: The claim's algorithm: the function migration 0016 installs (its arguments ``_x`` are the
#: claim's ``%(x)s``), and the two statements that call it, with and without a census (the
#: function migration 0033 installs, which ``sighting`` reads alone).
CLAIM = "create_claim"
CENSUS = "create_census"
CALLS = ["claim_runs", "claim_runs_census"]


#: Parts that several statements spell alike (Python used to splice one copy into each): the
#: first and last words of each, and the statements that have it.
SHARED = {
    "why a job is paused": ("concat( 'paused'", "AS why", {CLAIM, "claim_enqueue"}),
    "a pause that holds now": (
        "paused AND ( paused_until IS NULL",
        "clock_timestamp( ) )",
        {CLAIM, "claim_enqueue", "latest_recorded_ticks"},
    ),
    "how a run's end is written": (
        "status = CASE WHEN status IN",
        "ELSE error || E'\\n' || %( error )s END",
        {"finish_run", "record_lost_run", "finish_child_run"},
    ),
    "a key held by this backend": (
        "SELECT 1 FROM ( SELECT * FROM pg_locks",
        "& 4294967295 END )",
        {"lock_held", "renew_leases"},
    ),
    "the schedules' version": (
        "SELECT count( * ) || ' '",
        '"django_advisory_cron_schedule" )',
        {CENSUS, "schedule_rows"},
    ),
}


@pytest.mark.parametrize("part", sorted(SHARED))
def test_a_part_several_statements_have_is_spelled_the_same_in_each(part: str) -> None:
    first, last, names = SHARED[part]
    found = {
        name: re.findall(re.escape(first) + ".*?" + re.escape(last), spaced(text))
        for name, text in QUERIES.items()
    }
    assert {name for name, spelled in found.items() if spelled} == names
    assert len({text for spelled in found.values() for text in spelled}) == 1, found


def test_the_claim_calls_pass_the_functions_arguments_and_differ_only_by_the_census() -> None:
    """Each call passes every argument of the function, in its order, as the parameter of the
    same name; the census call returns the claim's columns, then the census's fields (as
    ``sighting`` returns them alone), reading the census once."""
    arguments = re.search(r"_claim\((.*?)\)\nRETURNS", QUERIES[CLAIM], re.S)
    assert arguments
    base, census = (QUERIES[name] for name in CALLS)
    for call in (base, census):
        passed = re.findall(r"%\((\w+)\)s", call.split(" FROM django_advisory_cron_claim(")[1])
        assert ["_" + name for name in passed] == re.findall(r"(_\w+) ", arguments[1])
    returned = re.search(r"RETURNS TABLE \((.*?)\)\n", QUERIES[CLAIM], re.S)
    fields = re.search(r"AS \((.*?)\);", QUERIES[CENSUS], re.S)
    assert returned and fields
    claimed = [each.split()[0] for each in returned[1].split(",")]
    counted = [each.split()[0] for each in fields[1].split(",")]
    selected = re.search(r"SELECT (.*?)\n  FROM", census, re.S)
    assert selected
    read = [re.sub(r"^\(?t\.(census\)\.)?", "", each.strip()) for each in selected[1].split(",")]
    assert read == claimed + counted
    assert census.count("django_advisory_cron_census(%(prefix)s)") == 1
    assert QUERIES["sighting"] == "SELECT * FROM django_advisory_cron_census(%(prefix)s)"
