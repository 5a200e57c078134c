"""System checks and the ADVISORY_CRON settings."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings

from django_advisory_cron import conf, locked_task, registry
from django_advisory_cron.checks import check_jobs, check_lock_database, check_settings

pytestmark = pytest.mark.usefixtures("fresh_registry")


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id or "" for message in messages]


def test_defaults() -> None:
    assert conf.get("MAX_SKEW") == 60
    assert conf.lock_database() == "default"
    assert conf.problems() == []
    assert check_settings() == [] and check_lock_database() == [] and check_jobs() == []


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"NAMESPACE": 2**31}, "NAMESPACE"),
        ({"NAMESPACE": "cron"}, "NAMESPACE"),
        ({"LOCK_DATABASE": "missing"}, "LOCK_DATABASE"),
        ({"MAX_SKEW": 0}, "MAX_SKEW"),
        ({"HEARTBEAT": -1}, "HEARTBEAT"),
        ({"JOBS_MODULE": "not a module"}, "JOBS_MODULE"),
        ({"HISTORY_DAYS": 0}, "HISTORY_DAYS"),
        ({"POOLING": "sometimes"}, "POOLING"),
        ({"TYPO": 1}, "TYPO"),
    ],
)
def test_invalid_setting_is_an_error_naming_the_key(value: dict[str, object], key: str) -> None:
    with override_settings(ADVISORY_CRON=value):
        messages = check_settings()
    assert ids(messages) == ["django_advisory_cron.E001"]
    assert f"ADVISORY_CRON[{key!r}]" in messages[0].msg


def test_settings_must_be_a_dict() -> None:
    with override_settings(ADVISORY_CRON=["x"]):
        assert "must be a dict" in check_settings()[0].msg


def test_non_postgresql_lock_database_is_an_error() -> None:
    with override_settings(ADVISORY_CRON={"LOCK_DATABASE": "sqlite"}):
        messages = check_lock_database()
    assert ids(messages) == ["django_advisory_cron.E002"]
    assert "sqlite" in messages[0].msg


def test_two_jobs_with_one_name_is_an_error() -> None:
    @locked_task(name="twin")
    def first() -> None: ...

    @locked_task(name="twin")
    def second() -> None: ...

    messages = check_jobs()
    assert ids(messages) == ["django_advisory_cron.E003"]
    assert "first" in messages[0].msg and "second" in messages[0].msg


def test_reimporting_the_same_function_is_not_a_clash() -> None:
    def same() -> None: ...

    locked_task(name="again")(same)
    locked_task(name="again")(same)
    assert check_jobs() == []


def test_two_names_with_one_key_is_an_error() -> None:
    """A real 32-bit collision: found by brute force over short names, pinned here."""
    from django_advisory_cron.keys import name_hash

    first, second = COLLIDING
    assert name_hash(first) == name_hash(second)
    locked_task(name=first)(lambda: None)
    locked_task(name=second)(lambda: None)
    messages = check_jobs()
    assert ids(messages) == ["django_advisory_cron.E004"]
    assert first in messages[0].msg and second in messages[0].msg


def test_invalid_schedule_is_an_error_naming_the_job() -> None:
    @locked_task(name="never", schedule="61 * * * *")
    def never() -> None: ...

    @locked_task(name="six_fields", schedule="0 0 * * * *")
    def six_fields() -> None: ...

    messages = check_jobs()
    assert ids(messages) == ["django_advisory_cron.E005"] * 2
    assert "'never'" in messages[0].msg and "'six_fields'" in messages[1].msg
    assert registry.get("never").cron == "61 * * * *"


def test_check_command_runs_the_checks(manage) -> None:
    result = manage("check")
    assert result.returncode == 0, result.stderr


# Two names whose SHA-256 digests share their first four bytes (found by a search over jobN).
COLLIDING = ("job111678", "job130505")
