"""Failure notices with real parts: runs against the real PostgreSQL, the webhook POSTed to a
real local HTTP server, ``mail_admins`` through Django's locmem backend, and three real
``cronworker`` processes sharing one failing job (one notice per streak, one recovery)."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core import mail
from django.core.management.base import SystemCheckError
from django.test.utils import override_settings
from django.utils import timezone

from django_advisory_cron import exitcodes, locked_task
from django_advisory_cron.checks.configuration import check_monitoring, check_settings
from django_advisory_cron.contrib import notices
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.models import JobRun, RunStatus
from django_advisory_cron.ops import control, monitoring
from tests.jobsapp.models import Marker
from tests.monitor_servers import Recorder, recorder
from tests.waiting import wait_for, wait_for_workers

ADMINS = [("Ops", "ops@example.com")]


@pytest.fixture
def server() -> Iterator[Recorder]:
    yield from recorder()


@pytest.fixture
def notifying() -> Iterator[Callable[..., None]]:
    """Turn the failure notices on in this process with ``FAILURE_NOTICES`` as given."""
    overrides: list[Any] = []

    def connect(**options: Any) -> None:
        override = override_settings(
            ADVISORY_CRON={"FAILURE_NOTICES": options, "PING_TIMEOUT": 1, "PING_RETRIES": 0},
            ADMINS=ADMINS,
            EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
        )
        override.enable()
        overrides.append(override)
        notices.notifier.failing = False
        assert [r.label for r in monitoring.connect()] == ["failure notices"]

    yield connect
    monitoring.disconnect()
    assert notices.notifier.drain(10)
    for override in reversed(overrides):
        override.disable()


class Switch:
    """Whether ``notice.flaky`` fails when it runs next."""

    failing = True


@pytest.fixture
def flaky(db_url: str, fresh_registry: None) -> Job[Any, Any]:
    @locked_task(name="notice.flaky")
    def flaky() -> None:
        if Switch.failing:
            raise RuntimeError("disk full\nsecond line")

    return flaky


def run(job: Job[Any, Any], *, failing: bool) -> Any:
    """Run ``job`` once, failing or not (a failure is re-raised: the run path is the public one)."""
    Switch.failing = failing
    if not failing:
        return job.run()
    with pytest.raises(RuntimeError, match="disk full"):
        job.run()
    return None


def posted(server: Recorder, path: str) -> list[dict[str, Any]]:
    with server.lock:
        return [json.loads(r.body) for r in server.requests if r.path == path]


def test_settings_are_checked() -> None:
    bad = [
        {"after": 0, "mail_admins": True},
        {"after": True, "mail_admins": True},
        {"mail_admins": "yes"},
        {"webhook": "hooks.slack.com/x"},
        {"after": 3},
        {"mail": True},
        "on",
    ]
    for value in bad:
        with override_settings(ADVISORY_CRON={"FAILURE_NOTICES": value}):
            assert [str(e.id) for e in check_settings()] == ["django_advisory_cron.E149"], value
            assert monitoring.enabled_reporters() == []  # an invalid value is off
    good = {"after": 2, "webhook": "https://hooks.slack.com/services/x", "pause": True}
    with override_settings(ADVISORY_CRON={"FAILURE_NOTICES": good}):
        assert check_settings() == []
    with override_settings(ADVISORY_CRON={"FAILURE_NOTICES": {"mail_admins": True}}, ADMINS=[]):
        assert [str(e.id) for e in check_monitoring()] == ["django_advisory_cron.W044"]
    with override_settings(ADVISORY_CRON={"FAILURE_NOTICES": {"mail_admins": True}}, ADMINS=ADMINS):
        assert check_monitoring() == []


def test_one_notice_per_streak_and_one_recovery(
    flaky: Job[Any, Any], server: Recorder, notifying: Callable[..., None]
) -> None:
    path = "/ok/hooks/notices"
    notifying(after=3, mail_admins=True, webhook=f"{server.url}{path}")
    run(flaky, failing=False)
    for _ in range(2):
        run(flaky, failing=True)
    # Skips and interrupted runs neither extend nor end a streak.
    now = timezone.now()
    for status in (RunStatus.INTERRUPTED, RunStatus.SKIPPED_LOCKED):
        JobRun.objects.create(job="notice.flaky", host="h", pid=1, started=now, status=status)
    assert notices.notifier.drain(5)
    assert posted(server, path) == [] and mail.outbox == []
    third = None
    for _ in range(4):
        run(flaky, failing=True)
        third = third or JobRun.objects.filter(job="notice.flaky").latest("started", "id")
    recovered = run(flaky, failing=False)
    run(flaky, failing=False)
    assert notices.notifier.drain(5)

    failing, recovery = posted(server, path)
    assert third is not None and third.status == RunStatus.FAILED
    assert failing == {
        "text": "Job notice.flaky failed 3 times in a row (failed: disk full)",
        "event": "failing",
        "job": "notice.flaky",
        "tenant": None,  # not per tenant
        "failures": 3,
        "status": "failed",
        "error": "disk full",
        "run_id": third.id,
        "tick": None,
        "host": failing["host"],
        "paused": False,
    }
    assert (
        recovery["text"] == "Job notice.flaky recovered: it succeeded after 6 failed runs in a row"
    )
    assert (recovery["event"], recovery["failures"], recovery["status"]) == (
        "recovered",
        6,
        "succeeded",
    )
    assert recovery["run_id"] == recovered.run_id
    assert [message.subject for message in mail.outbox] == [
        f"[Django] {failing['text']}",
        f"[Django] {recovery['text']}",
    ]
    assert mail.outbox[0].to == ["ops@example.com"]
    assert "run_id: " in mail.outbox[0].body and "tenant" not in mail.outbox[0].body

    # A new streak is a new notice.
    for _ in range(3):
        run(flaky, failing=True)
    assert notices.notifier.drain(5)
    assert [notice["event"] for notice in posted(server, path)] == [
        "failing",
        "recovered",
        "failing",
    ]


def test_a_notice_names_the_line_of_a_long_error_that_says_what_failed(
    db_url: str, fresh_registry: None, notifying: Callable[..., None]
) -> None:
    """Django's own errors open with headers ('System check identified some issues:'): the
    notice's subject is the first line that says what failed."""

    @locked_task(name="notice.checked")
    def checked() -> None:
        raise SystemCheckError(
            "System check identified some issues:\n\nERRORS:\n"
            "?: (billing.E001) BILLING_KEY is not set.\n\nSystem check identified 1 issue."
        )

    notifying(after=1, mail_admins=True)
    with pytest.raises(SystemCheckError):
        checked.run()
    assert notices.notifier.drain(5)
    assert [message.subject for message in mail.outbox] == [
        "[Django] Job notice.checked failed (failed: ?: (billing.E001) BILLING_KEY is not set.)"
    ]


def test_a_hanging_or_failing_webhook_never_delays_nor_fails_a_run(
    flaky: Job[Any, Any], server: Recorder, notifying: Callable[..., None], caplog: Any
) -> None:
    notifying(after=1, webhook=f"{server.url}/hang/hooks")
    for failing in (True, True, False, True, False):
        started = time.monotonic()
        result = run(flaky, failing=failing)
        assert time.monotonic() - started < 0.5  # the webhook's PING_TIMEOUT is 1 s
        if result is not None:
            assert result.status == RunStatus.SUCCEEDED
    statuses = list(
        JobRun.objects.filter(job="notice.flaky")
        .order_by("started")
        .values_list("status", flat=True)
    )
    assert statuses == ["failed", "failed", "succeeded", "failed", "succeeded"]
    # Four notices (failing, recovered, failing, recovered); the hanging receiver got the first
    # while the others wait behind it, and the failure is logged once.
    server.wait_for(lambda: len(server.paths("/hang/")) >= 1)
    wait_for(lambda: "failure notices: sending for job notice.flaky" in caplog.text, timeout=10)
    assert caplog.text.count("failure notices: sending for job") == 1
    assert "/hang/hooks" not in caplog.text


@pytest.fixture
def nonsense() -> Iterator[str]:
    """The URL of a server that answers every request with a line that is not HTTP."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            try:
                client, _address = listener.accept()
            except OSError:
                return  # closed
            with client:
                client.recv(65536)
                client.sendall(b"NONSENSE\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/hooks"
    listener.close()


def test_a_receiver_answering_nonsense_does_not_stop_the_next_notices(
    flaky: Job[Any, Any],
    server: Recorder,
    nonsense: str,
    notifying: Callable[..., None],
    caplog: Any,
) -> None:
    notifying(after=1, webhook=nonsense)
    run(flaky, failing=True)
    assert notices.notifier.drain(5)
    notifying(after=1, webhook=f"{server.url}/ok/later")
    run(flaky, failing=False)
    assert notices.notifier.drain(5)
    assert [notice["event"] for notice in posted(server, "/ok/later")] == ["recovered"]
    assert caplog.text.count("failure notices: sending for job notice.flaky") == 1


def test_pause_after_failures_shows_the_job_paused_with_the_reason(
    flaky: Job[Any, Any], notifying: Callable[..., None]
) -> None:
    notifying(after=2, pause=True)
    run(flaky, failing=True)
    assert control.state("notice.flaky") is None
    run(flaky, failing=True)
    state = control.state("notice.flaky")
    assert state is not None and control.is_paused(state, timezone.now())
    assert control.describe_pause(state) == (
        "paused by failure notices: failed 2 times in a row (last: disk full)"
    )
    assert flaky.run().status == RunStatus.SKIPPED_PAUSED
    # Resumed without a fix: the next failure pauses it again.
    control.resume("notice.flaky")
    run(flaky, failing=True)
    state = control.state("notice.flaky")
    assert state is not None and control.is_paused(state, timezone.now())
    assert state.reason == "failed more than 2 times in a row (last: disk full)"
    control.resume("notice.flaky")
    run(flaky, failing=False)
    assert not control.is_paused(control.state("notice.flaky"), timezone.now())


@pytest.mark.slow
@pytest.mark.usefixtures("transactional_db")
@pytest.mark.parametrize("receiver", ["ok", "hang"])
def test_three_workers_send_one_notice_and_one_recovery(
    receiver: str,
    server: Recorder,
    spawn: Callable[..., Any],
    raw_connect: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job fails its first five runs, wherever they run, then succeeds. A receiver that
    hangs gets the same two notices (it records a request as it arrives), each after the
    previous one timed out, and no run waits for it."""
    path = f"/{receiver}/hooks/fleet"
    settings = {
        "JOBS_MODULE": "notice_tasks",
        "MAX_SKEW": 0.5,
        "FAILURE_NOTICES": {"after": 3, "webhook": f"{server.url}{path}"},
        "PING_TIMEOUT": 2,
        "PING_RETRIES": 0,
    }
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    workers = [spawn("cronworker", "--grace", "10") for _ in range(3)]
    wait_for_workers(raw_connect(), workers)
    try:
        wait_for(
            lambda: (
                JobRun.objects.filter(job="notice_flaky", status=RunStatus.SUCCEEDED).count() >= 3
            ),
            timeout=60,
        )
        server.wait_for(lambda: len(posted(server, path)) >= 2, timeout=15)
    finally:
        server.hang_no_more()  # a stopping worker waits for a notice the receiver holds
        for worker in workers:
            worker.terminate()
        errors = [worker.communicate(timeout=30)[1] for worker in workers]
    ran = list(
        JobRun.objects.filter(job="notice_flaky")
        .exclude(status__startswith="skipped")
        .order_by("started")
    )
    statuses = [run.status for run in ran]
    assert statuses[:8] == ["failed"] * 5 + ["succeeded"] * 3, statuses
    assert Marker.objects.filter(job="notice_flaky").count() == len(ran)
    notices_sent = posted(server, path)
    assert [(n["event"], n["failures"]) for n in notices_sent] == [
        ("failing", 3),
        ("recovered", 5),
    ], (notices_sent, [e[-2000:] for e in errors])
    third = ran[2]
    assert notices_sent[0]["run_id"] == third.id
    assert third.tick is not None and notices_sent[0]["tick"] == third.tick.isoformat()
    # No run waited for a notice: each took well under the 2 s a hanging receiver holds one,
    # and the job ran every tick, one second apart, while they were being sent.
    for run in ran[:8]:
        assert run.duration is not None and run.duration < 1, (run.status, run.duration)
    ticks = [run.tick for run in ran[:8] if run.tick is not None]
    assert len(ticks) == 8
    gaps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(ticks)}
    assert gaps == {1.0}, gaps


@pytest.mark.slow
@pytest.mark.usefixtures("transactional_db")
def test_timed_out_runs_of_runlocked_make_a_streak(
    server: Recorder, manage: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``runlocked`` process lives for one run: the third still sends its notice before it
    exits, and its exit status is the one it has without notices."""
    path = "/ok/hooks/runlocked"
    settings = {
        "JOBS_MODULE": "notice_tasks",
        "FAILURE_NOTICES": {"after": 3, "webhook": f"{server.url}{path}"},
    }
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    codes = [manage("runlocked", "notice_slow").returncode for _ in range(4)]
    assert codes == [exitcodes.TIMED_OUT] * 4
    (notice,) = posted(server, path)
    assert notice["text"].startswith("Job notice_slow failed 3 times in a row (timed out: ")
    assert (notice["status"], notice["failures"]) == ("timed_out", 3)
