"""Fixtures that need no server, shared by tests/conftest.py and the unit tier's conftest
(which must not load tests/conftest.py: it imports the server helpers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from django_advisory_cron import registry


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Let a test register jobs; they and their clashes are removed afterwards."""
    before = {job.name for job in registry.all()}
    yield
    for job in registry.all():
        if job.name not in before:
            registry.unregister(job.name)
    registry.clashes.clear()
