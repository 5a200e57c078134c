"""Jobs for the cronworker catch-up test, loaded with
``ADVISORY_CRON_JSON='{"JOBS_MODULE": "catchup_tasks", ...}'`` in the worker processes: one
two-second job per ``catch_up`` policy."""

import os
from datetime import timedelta

from django_advisory_cron import locked_task
from django_advisory_cron.conf import CATCH_UP_CHOICES, CatchUp

from .models import Marker


def _register(policy: CatchUp) -> None:
    name = f"catchup_{policy}"

    def body() -> None:
        Marker.objects.create(job=name, pid=os.getpid())

    locked_task(name=name, every=timedelta(seconds=2), catch_up=policy)(body)


for _policy in CATCH_UP_CHOICES:
    _register(_policy)
