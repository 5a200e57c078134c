"""``--from crontab``: django-crontab's ``CRONJOBS`` setting. Its entries have the shape of
``ADVISORY_CRON["SCHEDULES"]``'s tuples, and are read the same way (a target is a registered
job's name or its function's dotted path, or ``call_command`` with the command's name first),
under the same names."""

from __future__ import annotations

from django.conf import settings

from ...jobs.declared import CALL_COMMAND
from . import Found, Unavailable


def entries() -> list[Found]:
    """Each entry of ``CRONJOBS``; the shell suffix is left behind: a fifth item, or a third
    that is a string (``(cron, function, ">> log 2>&1")``), as django-crontab reads them."""
    jobs = getattr(settings, "CRONJOBS", None)
    if jobs is None:
        raise Unavailable("the settings have no CRONJOBS (django-crontab's list of jobs)")
    found = []
    for index, job in enumerate(jobs):
        label = f"CRONJOBS[{index}]"
        if not isinstance(job, (tuple, list)):
            found.append(Found(label, job))
        elif len(job) > 2 and isinstance(job[2], str):
            # django-crontab calls it with no arguments, and job[3] as keywords
            kept = tuple(job[:2]) if len(job) == 3 else (*job[:2], [], job[3])
            found.append(_without(label, kept, job[2]))
        elif len(job) == 5:
            found.append(_without(label, tuple(job[:4]), job[4]))
        else:
            found.append(Found(label, job))
    return found


def _without(label: str, job: tuple[object, ...], suffix: object) -> Found:
    """``job`` with a note that its shell ``suffix`` (an output redirect, mostly) is dropped,
    and how to keep a run's output instead: a command's is kept with the run, a job's when
    it is captured."""
    kept = (
        "a command's output is kept with each run"
        if job[1] == CALL_COMMAND
        else "to keep a job's output with each run, capture it (capture=True on the job, or "
        "'cronjob edit NAME --capture yes')"
    )
    return Found(label, job, notes=(f"its shell suffix {suffix!r} is dropped: {kept}",))
