"""The statements of ``queries.sql``, by name, parsed once at import.

A statement starts at a ``-- name: <name>`` line; the comment lines right after it say what it
is for and are not sent; the statement runs to the next name line. Its text is sent as the file
has it, so a statement seen in a server log is found in the file.
"""

from __future__ import annotations

import re
from importlib.resources import files

_NAME = re.compile(r"^-- name: ([a-z0-9_]+)\n((?:--.*\n)*)", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Each statement of ``text`` (the format of ``queries.sql``) by its name."""
    parts = _NAME.split(text)
    statements: dict[str, str] = {}
    # parts: the file's header, then (name, doc lines, statement) for each statement.
    for name, _doc, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        assert name not in statements, f"two statements named {name} in queries.sql"
        statements[name] = body.strip()
    return statements


#: Every statement, by name.
QUERIES = parse(files(__package__).joinpath("queries.sql").read_text(encoding="utf-8"))
