"""How the lock database is reached: directly, or through a connection pooler (and which mode).

Static signals only here; they are cheap and safe to evaluate on every run.
"""

from __future__ import annotations

from typing import Literal

from django.db import connections

from . import conf

Pooling = Literal["none", "session", "transaction", "statement"]

PGBOUNCER_PORT = 6432


def static_pooling(alias: str) -> tuple[Pooling | None, str]:
    """Best guess from settings alone: ``(mode or None when unknown, the reason)``."""
    declared = conf.get("POOLING")
    if declared is not None:
        return declared, "ADVISORY_CRON['POOLING'] says so"
    settings_dict = connections[alias].settings_dict
    if str(settings_dict.get("PORT") or "") == str(PGBOUNCER_PORT):
        return "transaction", f"port {PGBOUNCER_PORT} is PgBouncer's default"
    if settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        return "transaction", "DISABLE_SERVER_SIDE_CURSORS is set, as for transaction pooling"
    return None, "no pooler declared or suggested by the settings"


def is_transaction_pooled(alias: str) -> bool:
    """True when session state cannot be trusted to stay on one server connection."""
    mode, _reason = static_pooling(alias)
    return mode in ("transaction", "statement")
