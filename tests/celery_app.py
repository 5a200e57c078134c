"""The Celery app of the Celery delivery's tests and soak: its broker is
``CELERY_TEST_BROKER``; its one task writes a line per execution to ``CELERY_TEST_LEDGER``
(the tick it was sent for, its task id, its arguments, when it ran), so a test counts what ran."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from celery import Celery

from django_advisory_cron.contrib.celery import JOB_HEADER, tick_of

app = Celery("advisory_cron_tests", broker=os.environ.get("CELERY_TEST_BROKER", "memory://"))
app.conf.update(broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)


@app.task(bind=True, name="tests.record_tick")  # type: ignore[untyped-decorator]
def record_tick(self: Any, *args: Any, **kwargs: Any) -> None:
    """Append one line per execution: one ``write`` on an ``O_APPEND`` file, whole."""
    tick = tick_of(self.request)
    line = {
        "tick": tick.isoformat() if tick else None,
        "job": getattr(self.request, JOB_HEADER, None),
        "task_id": self.request.id,
        "args": list(args),
        "kwargs": kwargs,
        "pid": os.getpid(),
        "at": time.time(),
    }
    descriptor = os.open(os.environ["CELERY_TEST_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, (json.dumps(line) + "\n").encode())
    finally:
        os.close(descriptor)
