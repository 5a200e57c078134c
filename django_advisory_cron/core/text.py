"""Text as a PostgreSQL ``text`` column can hold it: a job's output or error, a host name or a
task id may hold what the server or the driver refuses, and a run's row must still be written."""

from __future__ import annotations

import re

#: What PostgreSQL text cannot hold: NUL, and unpaired surrogates (what ``os.fsdecode`` makes
#: of a byte that is not UTF-8), which the driver cannot encode.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` as a run row can hold it: each NUL and each unpaired surrogate becomes U+FFFD
    (the same length, so bounded output stays bounded; idempotent). Every text a run's row is
    written with goes through it, so no job's output or error can make the row's statement
    fail."""
    return _UNSTORABLE.sub("\ufffd", text)
