"""Close matches of a mistyped name, for the one-line refusals that name it (a job's, a
management command's), so each says "did you mean" alike."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str], otherwise: str = "") -> str:
    """``"; did you mean a, b?"`` with up to three close matches of ``name``, else
    ``"; " + otherwise`` (what to do to see the names), or nothing without ``otherwise``."""
    close = difflib.get_close_matches(name, list(candidates), n=3)
    if close:
        return f"; did you mean {', '.join(close)}?"
    return f"; {otherwise}" if otherwise else ""
