"""Helpers for the pooling tests: extra DATABASES aliases pointing through a real PgBouncer."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import connection, connections

from django_advisory_cron.db import pooler
from django_advisory_cron.testing import PgBouncer, find_pgbouncer


@contextmanager
def database_alias(alias: str, **entry: Any) -> Iterator[str]:
    """Add ``alias`` (the test database's settings updated with ``entry``) for the block.

    ``override_settings(DATABASES=...)`` does not reset Django's connection handler, so the
    alias is added to both ``settings.DATABASES`` and ``connections.settings`` by hand.
    """
    base = {key: value for key, value in connection.settings_dict.items() if key != "TEST"}
    full = {**base, "OPTIONS": dict(base.get("OPTIONS") or {}), **entry}
    settings.DATABASES[alias] = full
    configured = connections.configure_settings({"default": dict(full), alias: dict(full)})
    connections.settings[alias] = configured[alias]
    pooler.clear_cache()
    test_case = _running_test_case()
    allowed = test_case.databases if test_case is not None else None
    if test_case is not None and allowed is not None:
        test_case.databases = frozenset({*allowed, alias})
    try:
        yield alias
    finally:
        if test_case is not None and allowed is not None:
            test_case.databases = allowed
        if hasattr(connections._connections, alias):  # type: ignore[attr-defined]
            wrapper = connections[alias]
            wrapper.close()
            close_pool = getattr(wrapper, "close_pool", None)
            if close_pool is not None:
                close_pool()
            del connections[alias]
        connections.settings.pop(alias, None)
        settings.DATABASES.pop(alias, None)
        pooler.clear_cache()


def _running_test_case() -> Any:
    """The Django test case class whose database guard is active, if any.

    Django only lets a test connect to the aliases in its ``databases``; an alias added during
    the test must be allowed explicitly. The guard is a closure over that class.
    """
    from django.db.backends.base.base import BaseDatabaseWrapper

    for cell in getattr(BaseDatabaseWrapper.ensure_connection, "__closure__", None) or ():
        value = cell.cell_contents
        if isinstance(value, type) and hasattr(value, "databases"):
            return value
    return None


def upstream() -> Any:
    """The test database as a PgBouncer upstream, for a test that starts a PgBouncer of its own
    (skipped without the binary, except under CI, which must run the PgBouncer tests)."""
    from .conftest import Upstream

    if find_pgbouncer() is None:
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed, and CI must run the PgBouncer tests")
        pytest.skip("pgbouncer binary not installed")
    entry = connection.settings_dict
    return Upstream(entry["HOST"], int(entry["PORT"]), entry["USER"], entry["NAME"])


def bouncer_entry(bouncer: PgBouncer) -> dict[str, Any]:
    """DATABASES fields that route the test database through ``bouncer``."""
    return {"HOST": bouncer.host, "PORT": str(bouncer.port)}


def server_url() -> str:
    """A direct URL of the test database (bypasses any pooler)."""
    entry = connection.settings_dict
    return f"postgresql://{entry['USER']}@{entry['HOST']}:{entry['PORT']}/{entry['NAME']}"


def bouncer_url(bouncer: PgBouncer) -> str:
    return bouncer.url(str(connection.settings_dict["NAME"]))


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until truthy; return its value, or the last falsy one on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
