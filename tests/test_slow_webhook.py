"""A receiver that takes a request and answers after ``PING_TIMEOUT`` (a slow webhook, a slow
monitor) is told once: the request went out, so it is not sent again (issue 33, item 11: the
receiver got "failing" three times, and "recovered" three times). Each request carries an
``Idempotency-Key`` header, the same in every attempt and every replica. A real local HTTP
server, a real ``cronworker`` for the notices, ``job.run()`` for the pings."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test.utils import override_settings

from django_advisory_cron import locked_task
from django_advisory_cron.contrib import pings
from django_advisory_cron.contrib.pings import idempotency_key
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.ops import monitoring
from tests.monitor_servers import Recorder, recorder

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def server() -> Iterator[Recorder]:
    yield from recorder()


def received(server: Recorder, path: str) -> list[tuple[str | None, dict[str, Any]]]:
    """Each POST to ``path``: its idempotency key and its JSON."""
    with server.lock:
        return [
            (request.headers.get("Idempotency-Key"), json.loads(request.body))
            for request in server.requests
            if request.path == path
        ]


@pytest.mark.slow
def test_a_slow_webhook_gets_each_failure_notice_once(
    server: Recorder, spawn: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``notice_flaky`` fails its first five runs, one a second, then succeeds: "failing" goes
    after the third, "recovered" after the sixth, to a receiver answering 2 s late, with a 1-s
    ``PING_TIMEOUT`` and two retries. One cronworker: a process that lives past its
    notices (``runlocked`` waits ``PING_TIMEOUT`` at most for them and exits)."""
    path = "/slow/hooks/notices"
    settings = {
        "JOBS_MODULE": "notice_tasks",
        "MAX_SKEW": 0.5,
        "FAILURE_NOTICES": {"after": 3, "webhook": f"{server.url}{path}"},
        "PING_TIMEOUT": 1,
        "PING_RETRIES": 2,
    }
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps(settings))
    worker = spawn("cronworker", "notice_flaky", "--grace", "5")
    server.wait_for(
        lambda: any(notice["event"] == "recovered" for _key, notice in received(server, path)),
        timeout=60,
    )
    worker.terminate()
    _out, err = worker.communicate(timeout=30)
    notices = received(server, path)
    assert [(notice["event"], notice["failures"]) for _key, notice in notices] == [
        ("failing", 3),
        ("recovered", 5),
    ], err[-3000:]
    assert [key for key, _notice in notices] == [
        idempotency_key("notice_flaky", notice["run_id"], notice["event"])
        for _key, notice in notices
    ]
    assert "sent, but no answer came (timed out); not sent again" in err, err[-3000:]


def test_a_slow_monitor_gets_each_ping_once(server: Recorder, fresh_registry: None) -> None:
    @locked_task(name="slow.pinged")
    def pinged() -> None:
        pass

    url = f"{server.url}/slow/pings"
    setting = {"PING_URL": {"slow.pinged": url}, "PING_TIMEOUT": 1, "PING_RETRIES": 2}
    with override_settings(ADVISORY_CRON=setting):
        pings.pinger.failing = False
        assert [reporter.label for reporter in monitoring.connect()] == ["ping URLs"]
        try:
            ran: Job[Any, Any] = pinged
            result = ran.run()
            assert pings.pinger.drain(30)
        finally:
            monitoring.disconnect()
    assert server.paths("/slow/") == [("GET", "/slow/pings/start"), ("GET", "/slow/pings")]
    with server.lock:
        keys = [request.headers.get("Idempotency-Key") for request in server.requests]
    assert keys == [
        idempotency_key("slow.pinged", result.run_id, "start"),
        idempotency_key("slow.pinged", result.run_id, "succeeded"),
    ]
