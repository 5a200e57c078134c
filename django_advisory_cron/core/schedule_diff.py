"""What changed between two versions of a database schedule, field by field, in a line
people read: ``cron: "0 2 * * *" -> "30 2 * * *"; enabled: true -> false``.

A version is the row's columns as JSON (``None``: the row did not exist, or was deleted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

State = Mapping[str, Any]


class _Absent:
    """A field a version does not have (the row did not exist then)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

#: What ``str.splitlines`` breaks a line at that JSON leaves as it is.
_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class Change(NamedTuple):
    """One field's value before and after (``ABSENT``: the row did not have it)."""

    field: str
    old: Any
    new: Any


def diff(old: State | None, new: State | None) -> list[Change]:
    """The fields whose value differs from ``old`` to ``new``, by name."""
    before, after = old or {}, new or {}
    pairs = (
        (field, before.get(field, ABSENT), after.get(field, ABSENT))
        for field in sorted({*before, *after})
    )
    return [Change(*pair) for pair in pairs if _differ(pair[1], pair[2])]


def _differ(old: Any, new: Any) -> bool:
    """Whether two JSON values differ (``true`` is not ``1``, as Python would have it)."""
    if isinstance(old, bool) != isinstance(new, bool) or (
        type(old) is not type(new)
        and (isinstance(old, (list, dict, str)) or isinstance(new, (list, dict, str)))
    ):
        return True
    if isinstance(old, list) and isinstance(new, list):
        return len(old) != len(new) or any(map(_differ, old, new))
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() != new.keys() or any(_differ(old[key], new[key]) for key in old)
    return bool(old != new)


def applied(old: State | None, changes: list[Change]) -> dict[str, Any]:
    """``old`` with ``changes`` made: ``new`` again, when they are ``diff(old, new)``."""
    state = dict(old or {})
    for change in changes:
        if change.new is ABSENT:
            state.pop(change.field, None)
        else:
            state[change.field] = change.new
    return state


def shown(value: Any) -> str:
    """A value as JSON, on one line whatever it holds."""
    if value is ABSENT:
        return "-"
    return json.dumps(value, ensure_ascii=False, sort_keys=True).translate(_BREAKS)


def empty(value: Any) -> bool:
    """A value that says nothing of an added schedule: none, blank, no arguments, no."""
    return value is ABSENT or value is None or value is False or value in ("", [], {})


def one_line(old: State | None, new: State | None) -> str:
    """The change from ``old`` to ``new`` in a line: ``added: ...`` (the fields it was given),
    ``removed``, ``field: old -> new; ...``, or ``no change``."""
    if new is None:
        return "removed" if old is not None else "no change"
    if old is None:
        given = [
            f"{field} {shown(value)}" for field, value in sorted(new.items()) if not empty(value)
        ]
        return "added: " + ", ".join(given) if given else "added"
    changes = diff(old, new)
    if not changes:
        return "no change"
    return "; ".join(f"{c.field}: {shown(c.old)} -> {shown(c.new)}" for c in changes)
