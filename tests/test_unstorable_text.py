"""Text PostgreSQL cannot store as it is (a NUL, an unpaired surrogate from ``os.fsdecode``) in a
run's output or error: the run is recorded as it ended, with the text in its storable form
(each such character U+FFFD), never as a lost lock; a value the database itself refuses (a
database whose encoding is not UTF-8) is no lost lock either. Real ``runlocked`` and
``cronworker`` processes against a real server."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import hypothesis
import psycopg
import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from psycopg import sql as pgsql

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.contrib import notices
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.core.text import storable
from django_advisory_cron.db import finishes, sql
from django_advisory_cron.db.execute import fetch_all
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control, monitoring
from tests.waiting import wait_for, workers_present

pytestmark = pytest.mark.usefixtures("transactional_db")

#: What a stored NUL or unpaired surrogate reads back as.
MARK = "\ufffd"
UNSTORABLE = ["\x00", *map(chr, range(0xD800, 0xE000))]
#: Any text, those characters often among it.
TEXT = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(UNSTORABLE)))


@pytest.fixture
def unstorable_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "unstorable_tasks"}))


#: ``runlocked`` arguments; its exit code; the run's status; the column; how it ends.
CASES = [
    (["logs_nul"], 0, "succeeded", "output", f"unstorable_tasks: abc{MARK}def\n"),
    (["logs_undecodable"], 0, "succeeded", "output", f"wrote report-{MARK}.csv\n"),
    (["raises_nul"], 1, "failed", "error", f"ValueError: bad{MARK}value"),
    (["raises_undecodable"], 1, "failed", "error", f"cannot read report-{MARK}.csv"),
    (["binary", "nul"], 0, "succeeded", "output", f"abc{MARK}def\n"),
    (["binary", "bytes"], 0, "succeeded", "output", MARK + "".join(map(chr, range(1, 256))) + "\n"),
    (["binary", "undecodable"], 0, "succeeded", "output", f"skipped report-{MARK}.csv\n"),
    (["binary", "raise"], 1, "failed", "error", f"CommandError: bad{MARK}name"),
]


@pytest.mark.usefixtures("unstorable_jobs")
@pytest.mark.parametrize(("args", "code", "status", "column", "ending"), CASES)
def test_runlocked_records_unstorable_text_in_its_storable_form(
    manage: Any, args: list[str], code: int, status: str, column: str, ending: str
) -> None:
    started = time.monotonic()
    done = manage("runlocked", *args)
    assert time.monotonic() - started < 15, "recording the run stalled"
    assert done.returncode == code, done.stderr
    (run,) = JobRun.objects.filter(job=args[0])
    assert run.status == status
    assert getattr(run, column).endswith(ending)
    assert "lock lost" not in done.stderr


@pytest.mark.usefixtures("unstorable_jobs")
def test_cronworker_records_unstorable_text_in_its_storable_form(
    spawn: Any, raw_connect: Any
) -> None:
    jobs = {"logs_nul": "succeeded", "logs_undecodable": "succeeded", "raises_nul": "failed"}
    jobs["raises_undecodable"] = "failed"
    worker = spawn("cronworker", *jobs)
    observer = raw_connect()
    wait_for(lambda: workers_present(observer) == 1)
    finished = JobRun.objects.filter(finished__isnull=False, job__in=jobs)
    wait_for(lambda: set(finished.values_list("job", flat=True)) == set(jobs))
    worker.terminate()
    worker.communicate(timeout=30)
    runs = {run.job: run for run in finished.order_by("-id")}
    assert {job: run.status for job, run in runs.items()} == jobs
    assert runs["logs_nul"].output.endswith(f"abc{MARK}def\n")
    assert runs["raises_undecodable"].error.endswith(f"cannot read report-{MARK}.csv")
    assert not JobRun.objects.filter(status=RunStatus.LOCK_LOST).exists()


#: The in-process jobs' logger: what it logs is kept with their runs and shown nowhere (a
#: surrogate in a test's report stops pytest-xdist from sending it).
logger = logging.getLogger("unstorable")
logger.addHandler(logging.NullHandler())
logger.propagate = False


@pytest.fixture
def quiet_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's log lines (a failed run's traceback) kept out of the test's report too."""
    monkeypatch.setattr(logging.getLogger("django_advisory_cron"), "propagate", False)


@pytest.fixture
def echo(db_url: str, fresh_registry: None, quiet_runner: None) -> Job[Any, Any]:
    @locked_task(name="unstorable.echo", capture=["unstorable"])
    def echo(text: str) -> None:
        """Logs ``text``, then raises it."""
        logger.warning("%s", text)
        raise ValueError(f"echo: {text}")

    return echo


@hypothesis.settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=TEXT)
def test_any_text_is_stored_and_read_back_in_its_storable_form(
    echo: Job[Any, Any], text: str
) -> None:
    with pytest.raises(ValueError, match=r"^echo: ") as raised:
        echo.run(text)
    assert raised.value.args == (f"echo: {text}",)
    run = JobRun.objects.filter(job="unstorable.echo").latest("id")
    assert run.status == RunStatus.FAILED
    kept = storable(text)
    assert not set(UNSTORABLE) & set(kept) and len(kept) == len(text) and storable(kept) == kept
    assert run.output.endswith(f"unstorable: {kept}\n")
    assert run.error.endswith(f"ValueError: echo: {kept}".strip())


@hypothesis.settings(max_examples=40, deadline=None, database=None)
@given(texts=st.lists(st.tuples(TEXT, TEXT), min_size=2, max_size=4))
def test_finishes_sent_together_store_any_text_in_its_storable_form(
    texts: list[tuple[str, str]],
) -> None:
    """The finishes of runs that end together go as one statement of text arrays
    (db.finishes): whatever their errors and outputs hold, each row reads back its own, in its
    storable form, as its own finish would have written it."""
    runs = [
        JobRun.objects.create(
            job=f"unstorable.together{n}", host="h", pid=1, status="running", started=timezone.now()
        )
        for n in range(len(texts))
    ]
    statement = finishes.finish_runs(
        [
            sql.finish_run(
                job_key(run.job),
                "session",
                run_id=run.id,
                status="failed",
                error=error,
                output=output,
                shared=True,
            )
            for run, (error, output) in zip(runs, texts, strict=True)
        ]
    )
    assert statement is not None
    assert len(fetch_all("default", statement)) == len(runs)
    for run, (error, output) in zip(runs, texts, strict=True):
        run.refresh_from_db()
        assert (run.status, run.error, run.output) == ("failed", storable(error), storable(output))


def test_a_healthy_job_that_logs_a_binary_byte_is_not_paused(
    db_url: str, fresh_registry: None, quiet_runner: None, settings: Any
) -> None:
    settings.ADVISORY_CRON = {"FAILURE_NOTICES": {"after": 1, "pause": True}}
    notices.notifier.failing = False
    assert [r.label for r in monitoring.connect()] == ["failure notices"]

    @locked_task(name="unstorable.binary", capture=["unstorable"])
    def binary() -> None:
        logger.warning("read %s", os.fsdecode(b"\xff"))

    try:
        for _ in range(2):
            assert binary.run().status == RunStatus.SUCCEEDED
        state = control.state("unstorable.binary")
        assert state is None or not control.is_paused(state, timezone.now())
    finally:
        monitoring.disconnect()
        assert notices.notifier.drain(10)


@pytest.fixture
def latin1_database_url(manage: Any) -> Iterator[str]:
    """A migrated database whose encoding is LATIN1, on the test server, dropped afterwards."""
    server_url = os.environ["DATABASE_URL"]  # exported by tests/settings.py
    name = f"latin1_{uuid.uuid4().hex[:12]}"
    create = pgsql.SQL(
        "CREATE DATABASE {} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
    )
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(create.format(pgsql.Identifier(name)))
    url = urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    try:
        migrated = manage("migrate", "django_advisory_cron", "--verbosity", "0", url=url)
        assert migrated.returncode == 0, migrated.stderr
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            drop = pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(pgsql.Identifier(name)))


NOT_STORED = "the run's error text and output were stored escaped ("


@pytest.mark.usefixtures("unstorable_jobs")
@pytest.mark.parametrize(
    ("args", "code", "status", "ending", "kept"),
    [
        (["logs_euro"], exitcodes.OK, "succeeded", ")", "costs 5 \\u20ac"),
        (["logs_nul"], exitcodes.OK, "succeeded", ")", "abc\\ufffddef"),
        (["raises_euro"], exitcodes.JOB_FAILED, "failed", "ValueError: costs 5 \\u20ac", ""),
        (
            ["--scope", "transaction", "logs_euro"],
            exitcodes.JOB_FAILED,
            "failed",
            "rolled back",
            "costs 5 \\u20ac",
        ),
    ],
)
def test_text_the_database_refuses_is_no_lost_lock(
    manage: Any,
    latin1_database_url: str,
    args: list[str],
    code: int,
    status: str,
    ending: str,
    kept: str,
) -> None:
    started = time.monotonic()
    done = manage("runlocked", *args, url=latin1_database_url)
    assert time.monotonic() - started < 15, "recording the run stalled"
    assert done.returncode == code, done.stderr
    with psycopg.connect(latin1_database_url) as conn:
        rows = conn.execute("SELECT status, error, output FROM django_advisory_cron_jobrun")
        ((stored, error, output),) = rows.fetchall()
    assert stored == status
    assert output.isascii() and kept in output, output
    assert error.startswith(NOT_STORED) and error.endswith(ending), error


@pytest.mark.usefixtures("unstorable_jobs")
def test_a_finish_refused_beside_others_is_recorded_alone_and_theirs_as_they_are(
    spawn: Any, raw_connect: Any, latin1_database_url: str
) -> None:
    """A cronworker's runs of one tick end together and their finishes go as one statement
    (db.finishes); when the database refuses it for a text some of them carry (the euro sign,
    and the storable form of a NUL), nothing of it ran, so each finish is sent alone: the
    plain run is recorded as it is, the refused ones escaped, and no lock is reported lost."""
    refused = {"logs_nul": "abc\\ufffddef", "logs_euro_each_second": "costs 5 \\u20ac"}
    jobs = [*refused, "logs_plain_each_second"]
    worker = spawn("cronworker", *jobs, url=latin1_database_url)
    observer = raw_connect(latin1_database_url)
    finished = "SELECT DISTINCT job FROM django_advisory_cron_jobrun WHERE finished IS NOT NULL"
    wait_for(lambda: {row[0] for row in observer.execute(finished)} == set(jobs))
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    rows = observer.execute(
        "SELECT job, status, error, output FROM django_advisory_cron_jobrun ORDER BY id"
    ).fetchall()
    assert {status for _job, status, _e, _o in rows} == {"succeeded"}, err
    for job, _status, error, output in rows:
        if job in refused:
            assert error.startswith(NOT_STORED) and refused[job] in output, (job, error, output)
        else:
            assert error == "" and output.endswith("plain\n"), (job, error, output)
