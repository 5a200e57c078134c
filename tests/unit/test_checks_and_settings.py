"""System checks and the ADVISORY_CRON settings."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings

from django_advisory_cron import conf, locked_task, registry
from django_advisory_cron.checks.configuration import (
    check_jobs,
    check_lock_database,
    check_settings,
)
from django_advisory_cron.conf import app_settings

pytestmark = pytest.mark.usefixtures("fresh_registry")


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [message.id or "" for message in messages]


def test_defaults() -> None:
    assert app_settings.MAX_SKEW == 60
    assert app_settings.lock_database == "default"
    assert conf.problems() == []
    assert check_settings() == [] and check_lock_database() == [] and check_jobs() == []


@pytest.mark.parametrize(
    ("value", "key", "check_id"),
    [
        ({"NAMESPACE": 2**31}, "NAMESPACE", "E101"),
        ({"NAMESPACE": "cron"}, "NAMESPACE", "E101"),
        ({"LOCK_DATABASE": "missing"}, "LOCK_DATABASE", "E102"),
        ({"MAX_SKEW": 0}, "MAX_SKEW", "E103"),
        ({"JOBS_MODULE": "not a module"}, "JOBS_MODULE", "E104"),
        ({"HISTORY_DAYS": 0}, "HISTORY_DAYS", "E105"),
        ({"POOLING": "sometimes"}, "POOLING", "E106"),
        ({"HEARTBEAT": -1}, "HEARTBEAT", "E107"),
        ({"LEASE": 0}, "LEASE", "E108"),
        ({"STALE_AFTER": "1h"}, "STALE_AFTER", "E109"),
        ({"OVERDUE_GRACE": None}, "OVERDUE_GRACE", "E110"),
        ({"CATCH_UP": "some"}, "CATCH_UP", "E111"),
        ({"SYNC_ON_MIGRATE": 1}, "SYNC_ON_MIGRATE", "E112"),
        ({"CONNECT_TIMEOUT": 0}, "CONNECT_TIMEOUT", "E113"),
        ({"STATEMENT_TIMEOUT": -5}, "STATEMENT_TIMEOUT", "E114"),
        ({"HEARTBEAT": 5, "LEASE": 10}, "LEASE", "E115"),
        ({"TYPO": 1}, "TYPO", "E100"),
    ],
)
def test_invalid_setting_is_an_error_naming_the_key(
    value: dict[str, object], key: str, check_id: str
) -> None:
    with override_settings(ADVISORY_CRON=value):
        messages = check_settings()
    assert ids(messages) == [f"django_advisory_cron.{check_id}"]
    assert f"ADVISORY_CRON[{key!r}]" in messages[0].msg


def test_settings_must_be_a_dict() -> None:
    with override_settings(ADVISORY_CRON=["x"]):
        messages = check_settings()
    assert ids(messages) == ["django_advisory_cron.E001"]
    assert "must be a dict" in messages[0].msg


def test_non_postgresql_lock_database_is_a_warning() -> None:
    with override_settings(ADVISORY_CRON={"LOCK_DATABASE": "sqlite"}):
        messages = check_lock_database()
    assert ids(messages) == ["django_advisory_cron.W002"]
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
    from django_advisory_cron.core.keys import name_hash

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

    @locked_task(name="seven_fields", schedule="0 0 * * * * *")
    def seven_fields() -> None: ...

    messages = check_jobs()
    assert ids(messages) == ["django_advisory_cron.E005"] * 2
    assert "'never'" in messages[0].msg and "'seven_fields'" in messages[1].msg
    assert registry.get("never").cron == "61 * * * *"


# Two names whose SHA-256 digests share their first four bytes (found by a search over jobN).
COLLIDING = ("job111678", "job130505")


def test_a_job_name_longer_than_the_history_column_is_refused() -> None:
    """A 201-character name passed ``check`` and then failed every run with a DataError."""
    with pytest.raises(ValueError, match="201 characters"):
        locked_task(name="x" * 201)(lambda: None)
    # Registered some other way, the system check reports it.
    from django_advisory_cron.jobs.job import MAX_JOB_NAME, Job
    from django_advisory_cron.models import JobRun

    assert JobRun._meta.get_field("job").max_length == MAX_JOB_NAME
    registry.register(Job(func=lambda: None, name="y" * 201))
    messages = check_jobs()
    assert ids(messages) == ["django_advisory_cron.E006"]
    assert "201 characters" in messages[0].msg
