"""The overlap policies without a server: which names are built and which are refused (in one
line, by name), ``max_concurrent``'s bounds, the run slots' keys (distinct, each its job's,
slot 1 the job's own key), and the claim's parameters (a job with one slot sends none)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_advisory_cron import locked_task
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.core.moments import UTC
from django_advisory_cron.core.overlap import (
    MAX_BUFFERED,
    MAX_CONCURRENT,
    OVERLAPS,
    combination_problem,
    concurrent_runs,
    overlap_policy,
    slots,
    waiting_bound,
)
from django_advisory_cron.db import sql
from django_advisory_cron.jobs.definitions import Definition, to_job
from django_advisory_cron.jobs.overlap import POLICIES

pytestmark = pytest.mark.usefixtures("fresh_registry")


def test_skip_is_the_default_and_allow_all_is_built() -> None:
    assert overlap_policy(None) == overlap_policy("") == overlap_policy("skip") == "skip"
    assert overlap_policy("allow_all") == "allow_all"
    assert overlap_policy("terminate_other") == "terminate_other"
    assert overlap_policy("buffer_one") == "buffer_one"
    assert overlap_policy("buffer_all") == "buffer_all"


def test_every_one_of_temporal_s_names_is_built() -> None:
    assert {policy.upper() for policy in OVERLAPS} == {
        "SKIP", "BUFFER_ONE", "BUFFER_ALL", "ALLOW_ALL", "CANCEL_OTHER", "TERMINATE_OTHER"
    }  # fmt: skip
    assert overlap_policy("cancel_other") == "cancel_other"


@given(st.one_of(st.text(), st.integers(), st.none(), st.booleans()))
def test_any_other_value_is_refused_in_one_line(value: Any) -> None:
    if value in (None, "", *OVERLAPS):
        return
    with pytest.raises(
        ValueError,
        match=r"^overlap must be 'skip', 'buffer_one', 'buffer_all', 'allow_all', "
        r"'cancel_other' or 'terminate_other', not ",
    ) as refused:
        overlap_policy(value)
    assert "\n" not in str(refused.value)


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.text()))
def test_max_concurrent_is_a_whole_number_within_its_bounds(value: Any) -> None:
    good = type(value) is int and 1 <= value <= MAX_CONCURRENT
    if good:
        assert concurrent_runs(value) == value
    else:
        with pytest.raises(ValueError, match=r"^max_concurrent must be a whole number from 1 to"):
            concurrent_runs(value)


def test_only_allow_all_has_more_than_one_slot() -> None:
    assert slots("skip", 5) == 1
    assert slots("allow_all", None) == 2
    assert slots("allow_all", 7) == 7


@pytest.mark.parametrize("mode", ["sha256", "hashtext"])
def test_a_job_s_slots_are_distinct_keys_named_for_it(mode: Any) -> None:
    job = locked_task(name="many", key=mode, overlap="allow_all", max_concurrent=32)(print)
    keys = job.keys
    assert len(keys) == 32 and keys[0] == job.key and keys[0].text == "many"
    assert {key.name for key in keys} == {"many"}
    assert len({key.lock_ids if mode == "sha256" else key.text for key in keys}) == 32
    assert not any(keys[0].same_lock(key) for key in keys[1:])
    assert locked_task(name="one")(print).keys == (LockKey("one", namespace=keys[0].namespace),)


@pytest.mark.parametrize(
    ("keywords", "says"),
    [
        ({"overlap": "sometimes"}, "overlap must be 'skip', 'buffer_one', "),
        (
            {"overlap": "buffer_one", "max_concurrent": 2},
            "max_concurrent goes with overlap 'allow_all' only; overlap 'buffer_one' runs one "
            "tick at a time: remove max_concurrent or use 'allow_all'$",
        ),
        ({"overlap": "allow_all", "max_concurrent": 0}, "max_concurrent must be a whole number"),
        ({"overlap": "allow_all", "max_concurrent": True}, "max_concurrent must be a whole"),
    ],
)
def test_the_decorator_refuses_a_bad_policy_naming_the_job(
    keywords: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError, match=f"^@locked_task 'bad': {says}"):
        locked_task(name="bad", every=60, **keywords)(print)


def test_a_schedule_s_policy_is_its_job_s() -> None:
    locked_task(name="body")(print)  # a builtin: Python 3.10 reads no signature of it
    definition = Definition("kept", job="body", every=60, overlap="allow_all", max_concurrent=4)
    assert definition.problems([]) == []
    job = to_job(definition)
    assert (job.overlap, job.slots) == ("allow_all", 4)
    assert Definition("bad", job="body", every=60, overlap="sometimes").problems([]) == [
        "overlap must be 'skip', 'buffer_one', 'buffer_all', 'allow_all', 'cancel_other' or "
        "'terminate_other', not 'sometimes'"
    ]
    buffered = Definition("queued", job="body", every=60, overlap="buffer_all")
    assert buffered.problems([]) == [] and to_job(buffered).slots == 1
    assert Definition(
        "both", job="body", every=60, overlap="buffer_one", max_concurrent=3
    ).problems([]) == [
        "max_concurrent goes with overlap 'allow_all' only; overlap 'buffer_one' runs one tick "
        "at a time: remove max_concurrent or use 'allow_all'"
    ]


def test_the_claim_sends_the_slots_of_a_job_that_has_them_only() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    many = locked_task(name="many", overlap="allow_all", max_concurrent=3)(print)
    one = locked_task(name="one")(print)
    claims = [
        sql.Claim("one", one.key, [(at, at)], at),
        sql.Claim("many", many.key, [(at, at)], at, slots=many.keys),
    ]
    text, params = sql.claim_runs(
        claims, "session", host="h", pid=1, max_skew=1, lease=5, final=True, settle=True,
        record_skips=False,
    )  # fmt: skip
    assert params["slot_n"] == [2, 2, 2]
    assert params["slot_objids"] == [key.objid for key in many.keys]
    alone, alone_params = sql.claim_runs(
        claims[:1], "session", host="h", pid=1, max_skew=1, lease=5, final=True, settle=True,
        record_skips=False,
    )  # fmt: skip
    assert alone_params["slot_n"] == [] and alone == text


def test_the_buffering_policies_keep_one_or_up_to_their_bound_waiting() -> None:
    assert waiting_bound("buffer_one") == 1
    assert waiting_bound("buffer_all") == MAX_BUFFERED == 20
    assert [waiting_bound(policy) for policy in ("skip", "allow_all", "terminate_other")] == [0] * 3


@pytest.mark.parametrize("policy", OVERLAPS)
def test_max_concurrent_is_refused_beside_a_buffering_policy_only(policy: str) -> None:
    assert combination_problem(policy, None) is None
    refused = combination_problem(policy, 2)
    assert (refused is not None) == (policy in ("buffer_one", "buffer_all", "cancel_other"))
    assert refused is None or "\n" not in refused


def test_a_job_s_waiting_key_is_its_own_and_no_slot_s() -> None:
    job = locked_task(name="queued", overlap="buffer_all")(print)
    waiting = job.key.waiting_key()
    assert waiting.name == "queued\x1fwaiting" and not waiting.same_lock(job.key)
    assert job.keys == (job.key,)
    many = locked_task(name="queued2", overlap="allow_all", max_concurrent=32)(print)
    assert not any(many.key.waiting_key().same_lock(key) for key in many.keys)


def test_the_help_of_the_admin_field_lists_every_policy_and_the_bound() -> None:
    from django_advisory_cron.jobs.options import BY_NAME

    option = BY_NAME["overlap"]
    for text in (str(option.form_help), option.help_text()):
        assert all(policy in text for policy in OVERLAPS), text
        assert f"{MAX_BUFFERED}" in text, text


def test_every_policy_built_has_its_behaviour_and_only_skip_s_kind_is_batched() -> None:
    """The runner and the worker ask a job's policy, never its name: each name built has one,
    and only the policies the claim alone decides (skip, allow_all) let a worker batch their
    claims on its shared connection or skip a tick that meets a run going there."""
    assert set(POLICIES) == set(OVERLAPS)
    acting = {name for name, policy in POLICIES.items() if policy.acts_on_runs_going}
    assert acting == {"buffer_one", "buffer_all", "terminate_other", "cancel_other"}
