"""Jobs that run as several: each tick of a per-tenant job (``per_tenant=True``) becomes one
job per tenant schema, ``name@schema``, each claimed, locked and recorded on its own. How a
job is split is registered by the integration that knows the tenants
([tenants][django_advisory_cron.contrib.tenants]); this module only holds it, so the worker
needs no integration's import."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from .job import Job

logger = logging.getLogger("django_advisory_cron")

#: A per-tenant job's jobs for this tick: one per tenant, read when asked.
Split = Callable[[Job[..., object]], list[Job[..., object]]]

_split: list[Split] = []


def register(split: Split) -> None:
    """Split per-tenant jobs with ``split`` (once, at start-up)."""
    _split[:] = [split]


def installed() -> bool:
    """Whether an integration registered how per-tenant jobs are split (django-tenants is
    installed)."""
    return bool(_split)


def split(job: Job[..., object]) -> list[Job[..., object]]:
    """The jobs that run ``job``'s tick: itself, or for a per-tenant job one per tenant
    (none, logged, when nothing registered how: system check E082 names it)."""
    if not job.per_tenant:
        return [job]
    if not _split:
        logger.error(
            "cronworker: job %s is per_tenant but django-tenants is not installed; its tick "
            "is not run (manage.py check names it)",
            job.name,
        )
        return []
    return _split[0](job)


def tenant_job(jobs_by_name: Mapping[str, Job[..., object]], name: str) -> Job[..., object] | None:
    """The job of one tenant ``name`` names (``name@schema``) of a per-tenant job among
    ``jobs_by_name``, or ``None`` (not such a name, or no such tenant now): the worker, the
    commands and the admin find a tenant's runs by that name alike."""
    base, separator, schema = name.rpartition("@")
    job = jobs_by_name.get(base) if separator else None
    if job is None or not job.per_tenant:
        return None
    return next((each for each in split(job) if each.tenant == schema), None)
