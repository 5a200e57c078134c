"""What ``cronjob crontab`` prints: a crontab line per cron-scheduled job, running
``runlocked`` the way this command was started, so that cron in every replica can call the
jobs without a cronworker."""

from __future__ import annotations

import os
import shlex
import sys

from ..conf import app_settings
from ..core.once import Once
from ..core.schedule import Every
from ..jobs.job import registry


def crontab_lines() -> list[str]:
    """A crontab line per cron-scheduled job (a comment for the others), after the
    ``CRON_TZ=`` of its zone."""
    command = _runlocked_command()
    lines = [
        "# django-advisory-cron: the same lines in every replica's crontab "
        "(manage.py cronjob crontab)",
        f"# runlocked takes the tick nearest its start within MAX_SKEW "
        f"({app_settings.MAX_SKEW:g}s): each line takes the tick it is called for",
    ]
    zone = None
    for job in registry.all():
        schedule = job.schedule
        if schedule is None:
            continue
        if job.per_tenant:  # its tenants are read at each tick: no fixed list of lines
            lines.append(
                f"# {job.name}: runs per tenant, for the tenants of each tick: run it with "
                "manage.py cronworker"
            )
            continue
        if isinstance(schedule, (Every, Once)) or schedule.has_seconds:
            kind = (
                "an interval (every=)"
                if isinstance(schedule, Every)
                else "a one-off (at=)"
                if isinstance(schedule, Once)
                else "a seconds field"
            )
            lines.append(
                f"# {job.name}: {job.schedule_text!r} is {kind}, which crontab cannot "
                "express: run it with manage.py cronworker"
            )
            continue
        if schedule.zone_name != zone:
            zone = schedule.zone_name
            lines.append(f"CRON_TZ={zone}")
        enqueue = "--enqueue " if job.deliver else ""
        line = f"{command} {enqueue}{shlex.quote(job.name)}"
        lines.append(f"{schedule.expression} {line.replace('%', chr(92) + '%')}")
    return lines


def _runlocked_command() -> str:
    """``cd DIR && DJANGO_SETTINGS_MODULE=... PYTHON MANAGE runlocked``, as this command was
    started (``python -m django`` when it was not started from a manage.py)."""
    started = sys.argv[0]
    if started.endswith(".py") and os.path.basename(started) != "__main__.py":
        manage = shlex.quote(os.path.abspath(started))
    else:
        manage = "-m django"
    module = os.environ.get("DJANGO_SETTINGS_MODULE")
    environment = f"DJANGO_SETTINGS_MODULE={shlex.quote(module)} " if module else ""
    return (
        f"cd {shlex.quote(os.getcwd())} && {environment}{shlex.quote(sys.executable)} "
        f"{manage} runlocked"
    )
