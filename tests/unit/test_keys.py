"""Lock keys are stable: pinned values and the namespace setting (what pg_locks shows:
tests/test_keys.py)."""

from __future__ import annotations

import hashlib

import pytest
from django.test import override_settings

from django_advisory_cron import job_key
from django_advisory_cron.conf import DEFAULT_NAMESPACE
from django_advisory_cron.core.keys import name_hash

PINNED = {
    "send_daily_digest": -1141730283,
    "clearsessions": -393243896,
    "a": -896040686,
    "é-job": -101302113,
}


@pytest.mark.parametrize(("name", "expected"), PINNED.items())
def test_pinned_name_hashes(name: str, expected: int) -> None:
    assert name_hash(name) == expected


def test_hash_is_documented_digest() -> None:
    digest = hashlib.sha256(b"send_daily_digest").digest()
    assert name_hash("send_daily_digest") == int.from_bytes(digest[:4], "big", signed=True)


def test_default_namespace_is_cron_in_ascii() -> None:
    assert DEFAULT_NAMESPACE == 1668444014 == int.from_bytes(b"cron", "big")
    assert job_key("x").namespace == DEFAULT_NAMESPACE


@override_settings(ADVISORY_CRON={"NAMESPACE": -5})
def test_namespace_setting() -> None:
    key = job_key("send_daily_digest")
    assert key.params == {"lock_ns": -5, "lock_id": -1141730283}
    assert key.lock_ids == (2**32 - 5, 2**32 - 1141730283, 2)


def test_hashtext_mode_renders_hashtext_sql() -> None:
    key = job_key("nightly", mode="hashtext")
    assert key.sql == "hashtext(%(lock_name)s)"
    assert key.params == {"lock_name": "nightly"}
    assert key.lock_ids is None


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="key mode"):
        job_key("x", mode="md5")  # type: ignore[arg-type]
