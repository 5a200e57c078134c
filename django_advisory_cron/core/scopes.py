"""Lock scopes: the names, and what ``"auto"`` may become."""

from __future__ import annotations

from typing import Literal

Scope = Literal["session", "transaction", "auto"]
ResolvedScope = Literal["session", "transaction"]
SCOPES: tuple[Scope, ...] = ("session", "transaction", "auto")


def check_scope(scope: str) -> Scope:
    """Return ``scope`` if it is a scope name, else raise ``ValueError``."""
    for known in SCOPES:
        if scope == known:
            return known
    raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
