"""Jobs for ``benchmarks/bench_tenants.py`` (its ``JOBS_MODULE``): ``BENCH_TENANT_JOBS``
per-tenant jobs (default 5), or with ``BENCH_TENANT_PLAIN=N`` N jobs that are not per tenant
(the baseline), on a ``BENCH_TENANT_EVERY``-second interval (default 10), with empty bodies."""

import os
from datetime import timedelta

from django_advisory_cron import locked_task


def _register(name: str, every: float, per_tenant: bool) -> None:
    def body() -> None:
        return None

    locked_task(name=name, every=timedelta(seconds=every), per_tenant=per_tenant)(body)


_every = float(os.environ.get("BENCH_TENANT_EVERY", "10"))
_plain = int(os.environ.get("BENCH_TENANT_PLAIN", "0"))
if _plain:
    for _number in range(_plain):
        _register(f"bench_plain_{_number}", _every, False)
else:
    for _number in range(int(os.environ.get("BENCH_TENANT_JOBS", "5"))):
        _register(f"bench_tenant_{_number}", _every, True)
