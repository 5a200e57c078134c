"""Jobs for the at-most-once tests, loaded with ``ADVISORY_CRON_JSON='{"JOBS_MODULE":
"once_tasks", ...}'``: the same body under each interruption policy, run for a given tick."""

import os
import time

from django_advisory_cron import locked_task

from .models import Marker

YEARLY = "0 0 1 1 *"


def _hold(name: str, path: str) -> None:
    """Mark the start, then hold the tick until ``path`` exists."""
    Marker.objects.create(job=name, pid=os.getpid())
    while not os.path.exists(path):
        time.sleep(0.02)


@locked_task(name="given_back", schedule=YEARLY, scope="session")
def given_back(path: str) -> None:
    """Today's default: an interrupted run gives its tick back."""
    _hold("given_back", path)


@locked_task(name="at_most_once", schedule=YEARLY, scope="session", at_most_once=True)
def at_most_once(path: str) -> None:
    """A tick whose body started is taken, whatever happened to the run."""
    _hold("at_most_once", path)
