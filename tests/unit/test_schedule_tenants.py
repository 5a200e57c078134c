"""Which tenants a job runs for (issue 40): ``per_tenant`` spelled in code (``True``, schema
names) and in a schedule (``*``, names joined by commas) reads to one value, refused in one
line when no tenant schema can have that name; a schedule kept as data that runs per tenant
needs django-tenants (this tier's settings have none) and the worker's threads. The
schedule's runs in a real django-tenants project: tests/test_tenants.py."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron import locked_task
from django_advisory_cron.jobs import fanout
from django_advisory_cron.jobs.definitions import Definition, to_job
from django_advisory_cron.jobs.option_values import EVERY_TENANT, MAX_SCHEMA, per_tenant

pytestmark = pytest.mark.usefixtures("fresh_registry")

#: Schema names a tenant can have.
schemas = st.text(
    st.characters(exclude_characters="\"'\\;,\x00\r\n", codec="utf-8"),
    min_size=1,
    max_size=20,
).filter(
    lambda name: (
        name.strip() not in ("", EVERY_TENANT)
        and len(name.strip().encode()) <= MAX_SCHEMA
        and not name.strip().lower().startswith("pg_")
    )
)


@pytest.mark.parametrize(
    ("given_value", "read"),
    [
        ("", False),
        (None, False),
        (False, False),
        (True, True),
        (EVERY_TENANT, True),
        ("acme", ("acme",)),
        (" globex , acme,acme", ("acme", "globex")),
        (["globex", "acme"], ("acme", "globex")),
        (("acme",), ("acme",)),
    ],
)
def test_code_and_a_schedule_spell_the_same_tenants(given_value: object, read: object) -> None:
    assert per_tenant(given_value) == read


@pytest.mark.parametrize(
    ("given_value", "refusal"),
    [
        ("acme,", "per_tenant is '\\*' \\(every tenant\\) or schema names separated by commas"),
        ("*,acme", "per_tenant is '\\*'"),
        ("pg_catalog", "'pg_catalog' is no tenant schema's name"),
        ("a;b", "'a;b' is no tenant schema's name"),
        ("s" * (MAX_SCHEMA + 1), f"1 to {MAX_SCHEMA} bytes"),
        ([], "per_tenant must be True"),
        (3, "per_tenant must be True .* not int"),
        ([3], "per_tenant names tenant schemas, not int"),
    ],
)
def test_a_name_no_schema_can_have_is_refused_in_one_line(
    given_value: object, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal) as refused:
        per_tenant(given_value)
    assert "\n" not in str(refused.value)


@given(st.lists(schemas, min_size=1, max_size=4))
def test_whatever_it_accepts_is_stored_and_read_back_alike(names: list[str]) -> None:
    """What a schedule row stores (the names joined by commas) reads back to the same tenants,
    within the column."""
    tenants = per_tenant(names)
    assert isinstance(tenants, tuple) and tenants == tuple(sorted({n.strip() for n in names}))
    stored = ",".join(tenants)
    assert per_tenant(stored) == tenants and len(stored) <= 4 * 21  # the column holds 500


def test_the_decorator_takes_schema_names_and_refuses_a_delivery_with_them() -> None:
    job = locked_task(name="acme_only", every=60, per_tenant=["acme"])(print)
    assert job.per_tenant == ("acme",)
    with pytest.raises(ValueError, match="@locked_task 'sent': per_tenant runs in the worker"):
        locked_task(name="sent", every=60, per_tenant=True, deliver="tasks")(print)


def test_a_schedule_per_tenant_needs_django_tenants_in_one_line() -> None:
    assert not fanout.installed()  # this tier's settings have no django-tenants
    definition = Definition("report", command="check", every=60, per_tenant="acme")
    assert definition.problems() == [
        "per_tenant needs django-tenants, set up as the tenants docs say (the tenants extra), "
        "or an empty per_tenant"
    ]


def test_a_schedule_runs_for_its_tenants_or_its_job_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With django-tenants (its split registered), a schedule's own ``per_tenant`` is the
    job's; left empty, it runs as the job it calls does; with a timeout it is refused."""
    monkeypatch.setattr(fanout, "_split", [lambda job: [job]])
    locked_task(name="digest", every=60, per_tenant=True)(print)
    locked_task(name="plain", every=60)(print)
    some = Definition("some", job="plain", every=60, per_tenant="globex,acme")
    inherited = Definition("inherited", job="digest", every=60)
    assert some.problems() == [] and to_job(some).per_tenant == ("acme", "globex")
    assert inherited.problems() == [] and to_job(inherited).per_tenant is True
    assert to_job(Definition("none", job="plain", every=60)).per_tenant is False
    assert dataclasses.replace(inherited, timeout=5).problems() == [
        "per_tenant runs in the worker's threads, one run per tenant schema: remove the "
        "delivery (deliver) and the timeout"
    ]
