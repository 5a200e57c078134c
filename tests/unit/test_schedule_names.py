"""A schedule's name is one line of printable text (issue 33): the definition rules refuse a
control character in one line (wherever a schedule is typed: tests/test_schedule_names.py)."""

from __future__ import annotations

import pytest

from django_advisory_cron.jobs.definitions import Definition

UNPRINTABLE = ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x85", "\x9b", "\ud800", "\u2028"]


@pytest.mark.parametrize("character", UNPRINTABLE, ids=[f"U+{ord(c):04X}" for c in UNPRINTABLE])
def test_a_name_with_a_control_character_is_refused(character: str) -> None:
    (problem,) = Definition(f"a{character}b", command="noop", every=60).problems(known=[])
    assert problem == (
        f"the name holds the control character U+{ord(character):04X}; a name is one line "
        "of printable text"
    )


def test_printable_names_are_accepted() -> None:
    for name in ("nightly report", "rapport-été", "日次", "a.b:c/d"):
        assert Definition(name, command="noop", every=60).problems(known=[]) == []
