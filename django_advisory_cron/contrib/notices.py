"""Failure notices (``FAILURE_NOTICES``): after ``after`` failed runs of a job in a row, mail
the ``ADMINS`` and/or POST to a webhook, optionally pause the job; one "recovered" notice when
it next succeeds.

Sent once across replicas without any coordination of their own: only the process that ran a
run sends its signals, a job's runs never overlap, and the streak is read from the run history
*up to and including that run*, so exactly one process finds the streak reaching ``after``
(and exactly one finds a success ending a streak that had reached it), whenever it reads.

What counts: ``failed``, ``timed_out`` and ``lock_lost`` runs extend a streak (they took their
tick, nobody runs it again: the ``FAILING`` statuses the health view calls failing), a success
ends it; skips and ``interrupted`` runs (their tick is given back and runs again) neither
extend nor end it.

The streak is one indexed statement after the run has finished (its row is committed), and
the pause one more; the mail and the webhook go to a background thread, as pings do (each
attempt bounded by ``PING_TIMEOUT``, retried ``PING_RETRIES`` times, a failure logged once),
so a slow mail server or a hanging webhook never delays or fails a run. A webhook's POST that
went out and got no answer is not sent again (the receiver may have it: a slow one would get
each notice again per retry); each carries an ``Idempotency-Key`` header, the same for every
attempt, derived from the job, the run and the event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.mail import mail_admins

from ..conf import FailureNotices as Settings
from ..conf import app_settings
from ..core.statuses import FAILING, RunStatus
from ..db import reads
from ..db.aliases import lock_database
from ..db.execute import fetch_one
from ..exceptions import first_line
from ..ops import control
from ..run.history import HOST
from .pings import Ping, Pinger, idempotency_key
from .tenants import SEPARATOR

#: Who a pause after failures is by, as the admin and ``cronjob list`` show it.
PAUSED_BY = "failure notices"
#: The longest error line a notice carries (it is also the mail's subject).
MAX_ERROR = 200


@dataclass(frozen=True)
class Mail(Ping):
    """A notice to the ``ADMINS``, sent with ``mail_admins`` (``url`` unused)."""

    subject: str = ""

    @property
    def destination(self) -> str:
        return "the ADMINS"

    def send(self) -> None:
        try:
            mail_admins(self.subject, (self.body or b"").decode(), fail_silently=False)
        except Exception as error:  # whatever the mail backend raises: retried, logged once
            raise OSError(first_line(error)) from error


notifier = Pinger("failure notices")


def alias(job: Any, run: Any) -> str:
    """Where the run was recorded: the run knows (a call's ``using`` may have chosen it)."""
    return lock_database(getattr(run, "using", None), job.using)


def failures_in_a_row(job: Any, run: Any, limit: int | None) -> int:
    statement = reads.failures_in_a_row(
        job=job.name, run_id=run.run_id, failing=list(FAILING), limit=limit
    )
    row = fetch_one(alias(job, run), statement)
    return int(row[0]) if row else 0


def named(job: Any) -> str:
    """The job as a notice's text names it: ``digest``, or for a tenant's run of a per-tenant
    job (``digest@acme``) ``digest for tenant acme``, the tenant in words an operator reads."""
    tenant = getattr(job, "tenant", None)
    if tenant is None:
        return str(job.name)
    return f"{str(job.name).removesuffix(f'{SEPARATOR}{tenant}')} for tenant {tenant}"


def payload(job: Any, run: Any, event: str, failures: int, paused: bool) -> dict[str, Any]:
    """The webhook's JSON: ``text`` is what Slack and Teams incoming webhooks show; the other
    fields are for a receiver that reads them (``job`` as its runs are recorded, ``tenant``
    the schema of a per-tenant job's run, else ``None``)."""
    error = first_line(run.error)[:MAX_ERROR] if run.error is not None else ""
    if event == "failing":
        streak = f" {failures} times in a row" if failures > 1 else ""
        text = f"Job {named(job)} failed{streak} ({RunStatus(run.status).label}"
        text += f": {error})" if error else ")"
        if paused:
            text += "; it is paused until someone resumes it"
    else:
        text = f"Job {named(job)} recovered: it succeeded after {failures} failed runs in a row"
    return {
        "text": text,
        "event": event,
        "job": job.name,
        "tenant": getattr(job, "tenant", None),
        "failures": failures,
        "status": str(run.status),
        "error": error,
        "run_id": run.run_id,
        "tick": run.tick.isoformat() if run.tick is not None else None,
        "host": HOST,
        "paused": paused,
    }


def notify(job: Any, notices: Settings, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    if notices.mail_admins:
        details = "\n".join(
            f"{key}: {value}"
            for key, value in document.items()
            if key != "text" and not (key == "tenant" and value is None)  # not per tenant
        )
        text = f"{document['text']}\n\n{details}\n".encode()
        notifier.send(Mail(job.name, "", text, subject=document["text"]))
    if notices.webhook:
        key = idempotency_key(job.name, document["run_id"], document["event"])
        notifier.send(Ping(job.name, notices.webhook, body, "application/json", key))


class FailureNotices:
    """The ``FAILURE_NOTICES`` reporter: it acts at the end of a run it ran."""

    label = "failure notices"

    def started(self, job: Any, run: Any) -> None:
        pass

    def ended(self, job: Any, run: Any) -> None:
        notices = app_settings.FAILURE_NOTICES
        if notices is None or run.run_id is None:
            return
        if run.status == RunStatus.SUCCEEDED:
            failures = failures_in_a_row(job, run, None)
            if failures >= notices.after:
                notify(job, notices, payload(job, run, "recovered", failures, False))
            return
        if run.status not in FAILING:
            return
        # Past ``after`` only to know the streak did not reach it with this run.
        failures = failures_in_a_row(job, run, notices.after + 1)
        if failures < notices.after:
            return
        if notices.pause:
            # Every failure past ``after`` pauses again: a job resumed unmended stops anew.
            more = "" if failures == notices.after else "more than "
            reason = f"failed {more}{notices.after} times in a row"
            if run.error is not None:
                reason += f" (last: {first_line(run.error)[:MAX_ERROR]})"
            control.pause(job.name, by=PAUSED_BY, reason=reason, using=alias(job, run))
        if failures == notices.after:
            notify(job, notices, payload(job, run, "failing", failures, notices.pause))
