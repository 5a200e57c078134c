"""Lock scopes: the names, and what ``"auto"`` may become."""

from __future__ import annotations

from typing import Literal

Scope = Literal["session", "transaction", "auto"]
#: Where a taken lock lives: a session, a transaction, or (``"lease"``) no lock at all once
#: claimed: a ``cronworker`` run claimed behind a transaction pooler, protected by its row's
#: lease (see the PgBouncer docs).
ResolvedScope = Literal["session", "transaction", "lease"]
SCOPES: tuple[Scope, ...] = ("session", "transaction", "auto")


def check_scope(scope: str) -> Scope:
    """Return ``scope`` if it is a scope name, else raise ``ValueError``."""
    for known in SCOPES:
        if scope == known:
            return known
    raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
