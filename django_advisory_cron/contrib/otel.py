"""OpenTelemetry (``OPENTELEMETRY``): one span per run, from the replica that ran it.

The span ``advisory_cron.run`` starts when the job starts (after its lock was taken) and ends
with the run. Its attributes: ``advisory_cron.job``, ``advisory_cron.tick`` (ISO 8601, absent
for a run outside the schedule), ``advisory_cron.run_id``, ``advisory_cron.scope``,
``advisory_cron.lock_wait`` (seconds spent taking the lock) and ``advisory_cron.status`` (the
run's recorded status); a run that did not succeed records its exception and an error status.
Spans go wherever the application's tracer provider sends them; without one, the API's no-op
tracer makes this free.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..conf import APP_LABEL
from ..ops.monitoring import lock_wait


class Spans:
    """The ``OPENTELEMETRY`` reporter."""

    label = "OpenTelemetry"

    def __init__(self) -> None:
        self.spans: dict[int, Span] = {}

    def started(self, job: Any, run: Any) -> None:
        attributes: dict[str, Any] = {"advisory_cron.job": job.name}
        if run.tick is not None:
            attributes["advisory_cron.tick"] = run.tick.isoformat()
        if run.run_id is not None:
            attributes["advisory_cron.run_id"] = run.run_id
        lock = run.lock
        if lock is not None and getattr(lock, "scope", None):
            attributes["advisory_cron.scope"] = lock.scope
        waited = lock_wait(run)
        if waited is not None:
            attributes["advisory_cron.lock_wait"] = waited
        tracer = trace.get_tracer(APP_LABEL)
        self.spans[id(run)] = tracer.start_span(
            "advisory_cron.run", kind=SpanKind.INTERNAL, attributes=attributes
        )

    def ended(self, job: Any, run: Any) -> None:
        span = self.spans.pop(id(run), None)
        if span is None:
            return
        span.set_attribute("advisory_cron.status", str(run.status))
        if run.status == "succeeded":
            span.set_status(Status(StatusCode.OK))
        else:
            if isinstance(run.error, BaseException):
                span.record_exception(run.error)
            span.set_status(Status(StatusCode.ERROR, f"job {job.name} {run.status}"))
        span.end()
