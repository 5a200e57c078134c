"""Per-tenant jobs with django-tenants: a job declared ``@locked_task(..., per_tenant=True)``
runs each tick once for every tenant schema, inside that schema
(``django_tenants.utils.schema_context``).

Each tenant's run is the job ``name@schema``: its own advisory lock key (derived from that
name), its own row per tick in the shared schema's run table, claimed by the same once-per-tick
claim as any job, in the worker's batched claims (one statement per 1,000 entries). The
tenants are read from the tenant model at each tick, so a tenant added or dropped between ticks
is picked up without a restart.

[install][django_advisory_cron.contrib.tenants.install] is called by the app's ``ready()``
when ``django_tenants`` is installed; the checks (``E080`` to ``E082``) are registered always.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import weakref
from typing import Any

from django.db import DatabaseError

from ...exceptions import first_line
from ...jobs import fanout
from ...jobs.job import MAX_JOB_NAME, Job

__all__ = ["SEPARATOR", "install", "tenant_jobs", "tenant_of"]

logger = logging.getLogger("django_advisory_cron")

#: Between a per-tenant job's name and the schema, in the name its runs are recorded under.
SEPARATOR = "@"

#: Each per-tenant job's tenant jobs made so far, by schema (made once, reused every tick).
_made: weakref.WeakKeyDictionary[Job[..., object], dict[str, Job[..., object]]] = (
    weakref.WeakKeyDictionary()
)


def install() -> None:
    """Split per-tenant jobs by the tenants of the tenant model (from the app's ``ready()``)."""
    fanout.register(tenant_jobs)


def tenant_of(name: str) -> tuple[str, str | None]:
    """The job and the schema a run's recorded job name says: ``("digest", "acme")`` for
    ``digest@acme``, ``(name, None)`` for a job that is not a tenant's."""
    job, separator, schema = name.rpartition(SEPARATOR)
    return (job, schema) if separator and job and schema else (name, None)


#: Seconds a reading of the tenants serves: the per-tenant jobs due at one tick share one
#: reading; the next tick reads them again.
FRESH = 1.0

#: The last reading of the tenants: when (``time.monotonic()``) and the schemas.
_read: tuple[float, list[str]] | None = None


def schemas() -> list[str]:
    """The tenant schemas, public excluded, read from the tenant model (one statement; a
    reading less than ``FRESH`` seconds old is reused)."""
    from django_tenants.utils import get_public_schema_name, get_tenant_model, schema_context

    global _read
    now = time.monotonic()
    if _read is not None and 0 <= now - _read[0] < FRESH:
        return list(_read[1])
    with schema_context(get_public_schema_name()):
        found = list(
            get_tenant_model()
            .objects.exclude(schema_name=get_public_schema_name())
            .order_by("schema_name")
            .values_list("schema_name", flat=True)
        )
    _read = (now, found)
    return list(found)


def tenant_jobs(job: Job[..., object]) -> list[Job[..., object]]:
    """``job``'s jobs for this tick, one per tenant schema it runs for (none, logged, when the
    tenants cannot be read: the next tick reads them again)."""
    try:
        found = schemas()
    except DatabaseError as error:
        logger.error(
            "cronworker: job %s: its tenants could not be read (%s); this tick is not run for them",
            job.name,
            first_line(error),
        )
        return []
    if isinstance(job.per_tenant, tuple):  # these tenants only: those of them that exist now
        found = [schema for schema in found if schema in job.per_tenant]
    made = _made.setdefault(job, {})
    for gone in set(made) - set(found):
        del made[gone]
    return [
        made[schema] if schema in made else made.setdefault(schema, _for_schema(job, schema))
        for schema in found
        if len(job.name) + len(SEPARATOR) + len(schema) <= MAX_JOB_NAME
    ]


def _for_schema(job: Job[..., object], schema: str) -> Job[..., object]:
    """``job`` for one tenant: named ``name@schema``, its body inside the schema."""
    from django_tenants.utils import schema_context

    body = job.func

    @functools.wraps(body)
    def in_schema(*args: Any, **kwargs: Any) -> object:
        with schema_context(schema):
            return body(*args, **kwargs)

    return dataclasses.replace(
        job,
        func=in_schema,
        name=f"{job.name}{SEPARATOR}{schema}",
        per_tenant=False,
        tenant=schema,
        description=job.description,
    )
