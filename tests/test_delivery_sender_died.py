"""A sender killed between its claim of a tick and the broker's answer: the tick is not lost
from the history, and not sent again (at most once).

Two real ``cronworker`` processes send an every-second schedule to Celery through a broker
that accepts connections and never answers (a real TCP listener); the one sending a tick is
killed with SIGKILL while it waits. Its tick ends as one ``failed`` run saying the sender died
and the message may or may not have been sent, recorded by the other worker at its next claim
of the job once the send's lease ran out, and reported to the monitors (a real local HTTP
server receiving the pings) as a failed send; the other worker never sends that tick."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from tests.celery_servers import needs_redis
from tests.monitor_servers import Recorder
from tests.test_celery_delivery import NAME, cronworkers, every_second, ledger, stop
from tests.test_celery_monitors import server
from tests.waiting import wait_for

__all__ = ["ledger", "server"]  # fixtures

pytestmark = needs_redis


@pytest.mark.slow  # the send's lease (6.5 s) has to run out
@pytest.mark.usefixtures("transactional_db")
def test_a_sender_killed_while_the_broker_says_nothing_leaves_one_failed_run(
    ledger: Path, spawn: Any, server: Recorder
) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(128)
        broker = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        every_second()
        # Half a second per wait on the silent broker: the sender is killed within its three
        # attempts (2.5 s), and the survivor waits out the send's lease (6.5 s, not 11 s).
        ping = f"{server.url}/ok/{{job}}"
        workers = cronworkers(spawn, broker, ledger, 2, PING_URL=ping, CELERY_SEND_TIMEOUT=0.5)
        sending = wait_for(
            lambda: EnqueuedTick.objects.filter(job=NAME, task_id="").first(), timeout=30
        )
        os.kill(sending.pid, signal.SIGKILL)
        [survivor] = [worker for worker in workers if worker.pid != sending.pid]
        ended = wait_for(
            lambda: (
                JobRun.objects.filter(job=NAME, tick=sending.tick)
                .exclude(status=RunStatus.RUNNING)
                .first()
            ),
            timeout=30,
        )
        server.wait_for(
            lambda: any(b"may or may not have been sent" in r.body for r in server.requests)
        )
        silent.close()  # the survivor's send in flight fails at once: its stop waits for none
        [err] = stop([survivor])
    rows = JobRun.objects.filter(job=NAME, tick=sending.tick)
    assert rows.count() == 1
    print(f"\n{ended.status}: {ended.error}")
    assert (ended.status, ended.pid) == (RunStatus.FAILED, sending.pid)
    assert "died" in ended.error and "may or may not have been sent" in ended.error
    assert "\n" not in ended.error
    tick = str(sending.tick)
    said = [line for line in err.splitlines() if tick in line]
    print("\n".join(said))
    # The survivor never sent it (nothing "enqueued", nothing "not sent" for it).
    assert not [line for line in said if "enqueued to" in line or "not sent" in line]
    assert [line for line in said if "may or may not have been sent" in line]
