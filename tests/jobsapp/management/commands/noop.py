"""``manage.py noop``: does nothing; the benchmark's baseline for a ``runlocked`` process."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Do nothing (the baseline of a runlocked process in the benchmarks)."

    def handle(self, *args: Any, **options: Any) -> None:
        return None
