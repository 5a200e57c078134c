"""Ping URLs (``PING_URL``): healthchecks.io-style start, success and failure pings.

For a job with a URL, the replica that runs it requests ``<url>/start`` when the run starts,
``<url>`` when it succeeds, and ``<url>/<exit status>`` when it ends otherwise (the exit
status ``runlocked`` would use: 1 failed, 75 lock lost, 130/143 interrupted), with the last
line of the error as the request body. That is the protocol of healthchecks.io (and of the
services that copy it).

Pings never fail or delay a job: they are queued to one background thread that sends them in
order, each attempt bounded by ``PING_TIMEOUT`` and retried ``PING_RETRIES`` times when it could
not be sent or was answered with an error status; a request sent and left unanswered (a slow
monitor) is not sent again, as it may have arrived. Every retry carries the same
``Idempotency-Key`` header, derived from the job, its run and what the request says. At exit a
process waits for its queued pings at most ``PING_TIMEOUT`` seconds in all, so a short-lived
``runlocked`` still sends its success ping and a hanging monitor costs it that long at most.
An unreachable monitor is logged once (without the URL, which holds the check's secret key),
and again only after pings got through in between.
"""

from __future__ import annotations

import atexit
import http.client
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from ..conf import app_settings
from ..exceptions import first_line
from ..exitcodes import JOB_FAILED, LOCK_LOST, SIGINT, SIGTERM

logger = logging.getLogger("django_advisory_cron")

#: Seconds before the first retry; each further retry waits twice as long.
FIRST_BACKOFF = 0.5
#: The longest error text sent with a failure ping.
MAX_BODY = 10_000
#: What a failed attempt raises: a network error, a URL refused, or an answer that is not HTTP
#: (anything else would end the sending thread, and every later ping with it).
FAILURES = (OSError, ValueError, http.client.HTTPException)
#: The namespace of the idempotency keys.
KEYS = uuid.UUID("5b0f2a52-3f57-4c43-9a55-4d1c0ee9b6a1")


class Unanswered(OSError):
    """The request went out and no answer came (``PING_TIMEOUT`` passed, the connection
    dropped, the answer was not HTTP): it may have arrived, so it is not sent again."""


def idempotency_key(*parts: object) -> str:
    """The ``Idempotency-Key`` of a request about ``parts``: the same in every process and
    attempt, so that a receiver can tell a request it already took."""
    return str(uuid.uuid5(KEYS, "\x1f".join(map(str, parts))))


def ping_url(job: str) -> str | None:
    """The base URL of ``job``'s pings, or ``None`` when it has none."""
    setting = app_settings.PING_URL
    if isinstance(setting, dict):
        return setting.get(job)
    if setting:
        return setting.replace("{job}", quote(job, safe=""))
    return None


def exit_status(run: Any) -> int:
    """The exit status ``runlocked`` gives a run that ended this way."""
    if run.status == "lock_lost":
        return LOCK_LOST
    if run.status == "interrupted":
        return SIGINT if isinstance(run.error, KeyboardInterrupt) else SIGTERM
    return JOB_FAILED


@dataclass(frozen=True)
class Ping:
    """One request to a monitor: a GET, or a POST of ``body``."""

    job: str
    url: str
    body: bytes | None = None
    content_type: str = "text/plain; charset=utf-8"
    #: Its ``Idempotency-Key`` header (none when empty).
    key: str = ""

    @property
    def destination(self) -> str:
        """Where it goes, for the log: the host only (the path holds the check's secret)."""
        return urlsplit(self.url).netloc

    def send(self) -> None:
        """One attempt, bounded by ``PING_TIMEOUT``; one of ``FAILURES`` when it fails,
        ``Unanswered`` when it may have arrived."""
        method = "GET" if self.body is None else "POST"
        request = urllib.request.Request(self.url, data=self.body, method=method)
        request.add_header("User-Agent", "django-advisory-cron")
        if self.body is not None:
            request.add_header("Content-Type", self.content_type)
        if self.key:
            request.add_header("Idempotency-Key", self.key)
        try:
            with urllib.request.urlopen(request, timeout=app_settings.PING_TIMEOUT) as response:
                response.read()
        except urllib.error.URLError:
            # urllib wraps what fails before the request is out (no connection, a timeout
            # connecting), and an answer with an error status (HTTPError).
            raise
        except (OSError, http.client.HTTPException) as error:
            # Raised as they are once the request was sent: waiting for, or reading, the answer.
            cause = first_line(error) or type(error).__name__
            raise Unanswered(
                f"sent, but no answer came ({cause}); not sent again, as it may have arrived"
            ) from error


class Pinger:
    """One background thread sending pings in order; started with the first ping.

    ``label`` names it in the log; the failure notices have their own (a hanging webhook
    never holds up a ping, nor a ping a notice)."""

    def __init__(self, label: str = "ping URLs") -> None:
        self.label = label
        self.queue: queue.Queue[Ping] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.failing = False

    def send(self, ping: Ping) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._work, name=f"advisory-cron {self.label}", daemon=True
                )
                self.thread.start()
                atexit.register(self.drain)
        self.queue.put(ping)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued ping was tried, at most ``timeout`` (``PING_TIMEOUT``)
        seconds; True when none is left."""
        deadline = time.monotonic() + (app_settings.PING_TIMEOUT if timeout is None else timeout)
        while self.queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                if self._first_failure():
                    logger.warning(
                        "%s: %d request(s) not sent before the process exits (the monitor "
                        "did not answer within PING_TIMEOUT)",
                        self.label,
                        self.queue.unfinished_tasks,
                    )
                return False
            time.sleep(0.01)
        return True

    def _work(self) -> None:
        while True:
            ping = self.queue.get()
            try:
                self._deliver(ping)
            finally:
                self.queue.task_done()

    def _deliver(self, ping: Ping) -> None:
        retries = app_settings.PING_RETRIES
        for attempt in range(retries + 1):
            try:
                ping.send()
            except Unanswered as error:
                self._failed(ping, error, attempt + 1)
                return
            except FAILURES as error:
                if attempt == retries:
                    self._failed(ping, error, attempt + 1)
                    return
                time.sleep(FIRST_BACKOFF * 2**attempt)
            else:
                if self.failing:
                    logger.info("%s: the monitor answers again (job %s)", self.label, ping.job)
                self.failing = False
                return

    def _first_failure(self) -> bool:
        """Mark the monitor failing; True for the failure that marked it, the one logged.
        One test-and-set: the sending thread's failure and the exit's give-up come in the same
        instant when the exit waits exactly as long as the send does (``PING_TIMEOUT``), and
        both used to be logged."""
        with self.lock:
            first, self.failing = not self.failing, True
        return first

    def _failed(self, ping: Ping, error: Exception, attempts: int) -> None:
        if not self._first_failure():
            return
        if isinstance(error, urllib.error.HTTPError):
            error = OSError(f"HTTP {error.code}")
        logger.warning(
            "%s: sending for job %s to %s failed after %d attempt(s): %s; the job is not "
            "affected, and further failures are not logged until one gets through",
            self.label,
            ping.job,
            ping.destination,
            attempts,
            error,
        )


pinger = Pinger()


class Pings:
    """The ``PING_URL`` reporter."""

    label = "ping URLs"

    def started(self, job: Any, run: Any) -> None:
        url = ping_url(job.name)
        if url is not None:
            pinger.send(Ping(job.name, f"{url.rstrip('/')}/start", key=_key(job, run, "start")))

    def ended(self, job: Any, run: Any) -> None:
        url = ping_url(job.name)
        if url is None:
            return
        if run.status == "succeeded":
            pinger.send(Ping(job.name, url, key=_key(job, run, "succeeded")))
            return
        error = run.error
        line = (str(error).strip().splitlines() or [""])[-1] if error is not None else ""
        body = f"job {job.name} {run.status}: {line}".strip()[:MAX_BODY]
        pinger.send(
            Ping(
                job.name,
                f"{url.rstrip('/')}/{exit_status(run)}",
                body.encode(),
                key=_key(job, run, run.status),
            )
        )


def _key(job: Any, run: Any, what: str) -> str:
    """The idempotency key of the ping saying ``what`` of ``run`` (none for a run without a
    row: nothing tells its pings from another's)."""
    return idempotency_key(job.name, run.run_id, what) if run.run_id is not None else ""
