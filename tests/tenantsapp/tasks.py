"""The per-tenant job of the tenants' tests: each run writes one row into the tenant's own
table (tests/tenantdata), in the schema it runs in."""

from django.db import connection

from django_advisory_cron import locked_task


@locked_task(every=2, per_tenant=True)
def tenant_digest() -> None:
    """Write one row in this tenant's schema."""
    from tests.tenantdata.models import Digest

    Digest.objects.create(schema=connection.schema_name)  # type: ignore[attr-defined]


@locked_task
def tenants_cleanup() -> None:
    """A job of the shared schema, not per tenant."""


@locked_task(every=6, jitter=5, per_tenant=True)
def tenant_spread() -> None:
    """Run each tenant at its own moment of the tick's jitter."""


@locked_task(every=2, per_tenant=True)
def tenant_held() -> None:
    """Go on until the file ``TENANT_HELD_UNTIL`` names exists (at most 60 s): a run still
    going when its worker stops."""
    import os
    import time
    from pathlib import Path

    marker = Path(os.environ.get("TENANT_HELD_UNTIL", "/nonexistent"))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@locked_task(every=3600, per_tenant=True)
def tenant_broken() -> None:
    """Fail, naming the schema it ran in: a failure notice names the tenant."""
    raise RuntimeError(f"no ledger in {connection.schema_name}")  # type: ignore[attr-defined]
