"""``--from crontab``: django-crontab's ``CRONJOBS`` setting. Its entries have the shape of
``ADVISORY_CRON["SCHEDULES"]``'s tuples, and are read the same way (a target is a registered
job's name or its function's dotted path, or ``call_command`` with the command's name first),
under the same names."""

from __future__ import annotations

from django.conf import settings

from . import Found, Unavailable


def entries() -> list[Found]:
    """Each entry of ``CRONJOBS``; the shell suffix (a fifth item) is left behind."""
    jobs = getattr(settings, "CRONJOBS", None)
    if jobs is None:
        raise Unavailable("the settings have no CRONJOBS (django-crontab's list of jobs)")
    found = []
    for index, job in enumerate(jobs):
        label = f"CRONJOBS[{index}]"
        if isinstance(job, (tuple, list)) and len(job) == 5:
            suffix = f"its shell suffix {job[4]!r} is left behind (a run's output is kept)"
            found.append(Found(label, tuple(job[:4]), notes=(suffix,)))
        else:
            found.append(Found(label, job))
    return found
