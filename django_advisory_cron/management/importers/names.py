"""The name an imported entry's schedule gets: one a shell takes as it is, and never a
look-alike of the name of a job defined in code (or declared in settings).

The name is the source's (for django-crontab's entries, which have none, the job's and its
arguments'), each run of characters other than letters, digits, ``_``, ``.`` and ``-`` made
one ``-``: ``send_report(daily)`` is ``send_report-daily``, ``nightly report`` is
``nightly-report``. Two names that differ only in case and in those marks (``purge-tokens``,
``purge_tokens``) are look-alikes. An entry whose name is a code job's, or a look-alike of it:

* calls that job with no arguments: it is that job's schedule (an override of it, as
  ``cronjob edit NAME --schedule`` writes), under the job's name;
* calls that job with arguments: it is named after the job and them (``send_report-weekly``);
* calls anything else: it is refused, to be renamed in the source.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...jobs.declared import derived_name
from ...jobs.definitions import Definition
from ...jobs.job import Job

#: What a name keeps as it is; each run of anything else is one ``-``.
_UNSAFE = re.compile(r"[^\w.-]+")
#: What two look-alike names may differ in (besides case).
_MARKS = re.compile(r"[\W_]+")
#: Where a job that is not kept in the database is defined, for people.
WHERE = {"code": "defined in code", "settings": "declared in ADVISORY_CRON['SCHEDULES']"}


@dataclass(frozen=True)
class Named:
    """An entry's definition under the name it is imported as; ``refused`` says why it is
    not imported, ``note`` why its name is not the source's."""

    definition: Definition
    refused: str = ""
    note: str = ""


def shell_safe(name: str) -> str:
    """``name`` with each run of characters a shell would need quoted made one ``-`` (and
    none at either end); ``name`` itself when nothing would be left."""
    return _UNSAFE.sub("-", name).strip("-") or name


def _alike(name: str) -> str:
    return _MARKS.sub("", name).casefold()


def named(definition: Definition, jobs: Iterable[Job[Any, Any]]) -> Named:
    """``definition`` under the name it is imported as, among ``jobs`` (the catalog's)."""
    name = shell_safe(definition.name)
    ours = dataclasses.replace(definition, name=name)
    job = next(
        (job for job in jobs if job.source != "database" and _alike(job.name) == _alike(name)),
        None,
    )
    if job is None:
        return Named(ours)
    calls_it = definition.job == job.name and not definition.deliver
    if not calls_it:
        if name == job.name:  # the definition's own check says it
            return Named(ours)
        return Named(
            ours,
            refused=f"the name {name!r} is too like job {job.name!r} {WHERE[job.source]}, which "
            "it does not call; rename it in the source",
        )
    if definition.args or definition.kwargs:
        call = shell_safe(derived_name(dataclasses.asdict(definition)))
        return Named(
            dataclasses.replace(definition, name=call),
            note=f"named so, not {definition.name!r}, which is too like job {job.name!r} "
            f"{WHERE[job.source]}",
        )
    override = Definition(
        name=job.name,
        override=True,
        cron=definition.cron,
        every=definition.every,
        timezone=definition.timezone,
        enabled=definition.enabled,
    )
    if definition.starts or definition.ends or definition.at or definition.max_runs:
        return Named(
            override,
            refused=f"it is the schedule of job {job.name!r} {WHERE[job.source]}, which cannot "
            "keep a start or end time, a one-off's moment or a number of runs: add it by hand "
            f"('cronjob edit {job.name} --schedule ...'), or give it another name in the source",
        )
    return Named(override)
