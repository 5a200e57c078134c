"""A per-tenant job's tenants spread over its jitter (issue 40): each tenant's offset is
computed from ``name@schema`` and the tick, in whole steps, below the jitter; the worker
holds each tenant's run until its start (the real workers: tests/test_tenants.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron.core.jitter import TENANT_STEP, offset
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.worker.spread import HeldBack

UTC = timezone.utc
TICK = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)


@given(
    name=st.text(min_size=1, max_size=100),
    jitter=st.floats(min_value=1e-6, max_value=86400.0),
    step=st.floats(min_value=1e-3, max_value=60.0),
)
def test_a_stepped_offset_is_whole_steps_below_the_jitter(
    name: str, jitter: float, step: float
) -> None:
    stepped = offset(name, TICK, jitter, step)
    assert timedelta(0) <= stepped <= offset(name, TICK, jitter) < timedelta(seconds=jitter)
    grain = max(1, round(step * 1_000_000))
    assert (stepped // timedelta(microseconds=1)) % grain == 0


def nothing() -> None:
    """A tenant's body."""


def tenant(schema: str, jitter: float | None) -> Job[..., object]:
    return Job(func=nothing, name=f"digest@{schema}", jitter=jitter, tenant=schema)


def test_each_tenant_has_its_own_start_in_whole_seconds() -> None:
    starts = {tenant(f"t{index}", 60).start_of(TICK) for index in range(200)}
    assert all(TICK <= start < TICK + timedelta(seconds=60) for start in starts)
    assert all(start.microsecond == 0 for start in starts)
    assert len(starts) > 40  # 200 tenants over 60 one-second steps: spread, not one moment
    assert tenant("acme", None).start_of(TICK) == TICK
    assert TENANT_STEP == 1.0
    # Another tick, another draw: a tenant is not always the last one.
    acme = tenant("acme", 60)
    assert len({acme.start_of(TICK + timedelta(hours=hour)) - TICK for hour in range(20)}) > 5


def test_a_tenants_start_and_shown_offset_are_in_whole_steps_and_no_other_jobs() -> None:
    """One place decides the step (the job's tenant): the worker, ``runlocked`` and the
    history all compute a tenant's tick's start from it, never the offset to the microsecond."""
    acme = tenant("acme", 60)
    plain = Job(func=nothing, name="digest@acme", jitter=60)  # a name alone makes no tenant
    stepped, exact = offset(acme.name, TICK, 60, TENANT_STEP), offset(acme.name, TICK, 60)
    assert stepped != exact  # this name and tick: a fraction of a second apart
    assert acme.start_of(TICK) == TICK + stepped
    assert acme.offset_seconds(TICK) == stepped.total_seconds()
    assert plain.start_of(TICK) == TICK + exact
    assert plain.offset_seconds(TICK) == exact.total_seconds()
    assert acme.offset_seconds(None) is None and tenant("acme", None).offset_seconds(TICK) is None


def test_held_back_runs_come_out_in_the_order_they_start() -> None:
    held = HeldBack()
    assert held.first() is None and held.due(TICK) == []
    late, early = tenant("late", 9), tenant("early", 9)
    held.hold(late, TICK, TICK + timedelta(seconds=5))
    held.hold(early, TICK, TICK + timedelta(seconds=2))
    assert held.first() == TICK + timedelta(seconds=2) and len(held) == 2
    assert held.due(TICK + timedelta(seconds=1)) == []
    assert held.due(TICK + timedelta(seconds=5)) == [(early, TICK), (late, TICK)]
    assert len(held) == 0
