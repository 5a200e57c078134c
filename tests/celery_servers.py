"""A real Redis (Debian's ``redis-server``) on a free loopback port in a temp dir, and a real
Celery worker (``celery -A tests.celery_app worker --pool solo``), for the Celery delivery's
tests and its soak (``benchmarks/bench_celery_soak.py``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from django_advisory_cron.testing.postgres import free_port

ROOT = Path(__file__).resolve().parent.parent


#: The test task the Celery delivery tests send (``tests/celery_app.py``).
TASK = "tests.record_tick"

#: Skips a test module where Debian's ``redis-server`` is missing (CI installs it).
needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None,
    reason="Debian's redis-server is not installed here (apt-get install redis-server)",
)


def _until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g} s")
        time.sleep(0.02)


class RedisServer:
    """One ``redis-server`` without persistence; ``stop()`` and ``start()`` again on the same
    port (a broker that goes down and comes back)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.process = subprocess.Popen(
            [
                *(binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""),
                *("--appendonly", "no", "--dir", str(self.directory), "--daemonize", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _until(self.answers, 10, f"redis-server did not answer on port {self.port}")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as client:
                client.sendall(b"PING\r\n")
                return client.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A started Redis, stopped and its directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="advisory-cron-redis-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


def celery_env(broker: str, ledger: Path) -> dict[str, str]:
    """What the test Celery app reads: its broker and the file its task writes to."""
    return {"CELERY_TEST_BROKER": broker, "CELERY_TEST_LEDGER": str(ledger)}


@contextmanager
def celery_worker(broker: str, ledger: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker of ``tests.celery_app`` (solo pool), ready to take tasks; stopped
    (warm shutdown) afterwards."""
    log = ledger.with_suffix(".worker.log")
    command = [sys.executable, "-m", "celery", "-A", "tests.celery_app", "worker"]
    command += ["--pool", "solo", "--without-heartbeat", "--without-gossip", "--without-mingle"]
    command += ["--loglevel", "INFO", "--logfile", str(log), "--hostname", f"tests@{ledger.stem}"]
    env = {**os.environ, **celery_env(broker, ledger), "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _until(
            lambda: process.poll() is not None or (log.exists() and " ready." in log.read_text()),
            60,
            "the Celery worker was not ready",
        )
        assert process.poll() is None, log.read_text() if log.exists() else "no log"
        yield process
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def executions(ledger: Path) -> list[dict[str, Any]]:
    """Every execution the test task recorded, in order."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
