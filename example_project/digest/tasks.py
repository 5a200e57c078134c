"""The example's jobs, found by autodiscovery (a ``tasks`` module in each installed app).

Every replica's crontab calls ``manage.py runlocked <job>`` (or every replica runs
``manage.py cronworker``); the advisory lock lets exactly one of them run the job, and the run
history lets a scheduled job's tick run only once.
"""

import os
import socket
import time
from datetime import timedelta

from django.contrib.auth import get_user_model

from django_advisory_cron import locked_task

from .models import BouncePoll, DigestEmail, DigestStats, UptimeSample


def replica_name() -> str:
    """Which replica this process is (the demo sets ``REPLICA``; else the host name)."""
    return os.environ.get("REPLICA") or socket.gethostname()


@locked_task(name="send_daily_digest", schedule="0 2 * * *", max_runtime=600)
def send_daily_digest() -> int:
    """Send every active user their daily digest; returns how many were sent."""
    # Stands in for the SMTP round trip; the demo makes it long enough to overlap the replicas.
    delay = float(os.environ.get("DIGEST_SEND_DELAY", "0"))
    replica = replica_name()
    sent = 0
    for user in get_user_model().objects.filter(is_active=True).order_by("pk"):
        time.sleep(delay)
        DigestEmail.objects.create(user=user, replica=replica)
        sent += 1
    return sent


@locked_task(name="refresh_digest_stats", schedule="* * * * *")
def refresh_digest_stats() -> int:
    """A fast every-minute job: the tick record, not the lock, stops a second run."""
    count = DigestEmail.objects.count()
    DigestStats.objects.create(replica=replica_name(), digests=count)
    return count


@locked_task(name="poll_bounces", schedule="* * * * *")
def poll_bounces() -> str:
    """An every-minute job that takes a few seconds (the demo's django-q2 mode schedules it).

    Stands in for asking the mail provider which digests bounced. It outlives the demo's
    django-q2 ``retry``, so every tick is also delivered a second time while it runs.
    """
    time.sleep(float(os.environ.get("BOUNCE_POLL_SECONDS", "3")))
    BouncePoll.objects.create(replica=replica_name(), pid=os.getpid())
    return replica_name()


@locked_task(name="sample_uptime", every=timedelta(seconds=5))
def sample_uptime() -> str:
    """Every 5 seconds, on the epoch's grid: the demo's ``cronworker`` replicas all fire it."""
    UptimeSample.objects.create(replica=replica_name(), pid=os.getpid())
    return replica_name()
