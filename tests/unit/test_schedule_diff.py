"""The diff of two schedule versions: exactly the fields that differ, enough to go from one to
the other, and always one line."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from django_advisory_cron.core.schedule_diff import ABSENT, applied, diff, one_line

FIELDS = st.sampled_from(["name", "cron", "every", "enabled", "args", "kwargs", "timezone"])
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
STATES = st.dictionaries(FIELDS, VALUES, max_size=7)


@settings(deadline=None)  # a loaded machine: the property holds however long it takes
@given(STATES)
def test_a_state_against_itself_has_no_change(state: dict[str, Any]) -> None:
    assert diff(state, state) == []
    assert one_line(state, dict(state)) == "no change"


@settings(deadline=None)  # a loaded machine: the property holds however long it takes
@given(st.none() | STATES, st.none() | STATES)
def test_the_changes_lead_from_the_old_state_to_the_new(
    old: dict[str, Any] | None, new: dict[str, Any] | None
) -> None:
    assert applied(old, diff(old, new)) == (new or {})


@settings(deadline=None)  # a loaded machine: the property holds however long it takes
@given(STATES, STATES)
def test_the_changes_are_exactly_the_fields_that_differ(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    fields = {change.field for change in diff(old, new)}
    same = {
        field
        for field in {*old, *new}
        if field in old and field in new and repr(old[field]) == repr(new[field])
    }
    assert not fields & same
    assert {*old, *new} - same - fields <= {
        field
        for field in {*old, *new}
        if field in old and field in new and old[field] == new[field]
    }


@settings(deadline=None)  # a loaded machine: the property holds however long it takes
@given(st.none() | STATES, st.none() | STATES)
def test_the_diff_is_one_line_whatever_the_values_hold(
    old: dict[str, Any] | None, new: dict[str, Any] | None
) -> None:
    assert len(one_line(old, new).splitlines()) == 1


def test_a_change_reads_field_old_new() -> None:
    said = one_line(
        {"cron": "0 2 * * *", "enabled": True}, {"cron": "30 2 * * *", "enabled": False}
    )
    assert said == 'cron: "0 2 * * *" -> "30 2 * * *"; enabled: true -> false'


def test_an_addition_names_what_it_was_given_and_a_removal_says_so() -> None:
    added: dict[str, Any] = {
        "cron": "0 7 * * 1",
        "every": None,
        "args": [],
        "enabled": True,
        "override": False,
    }
    assert one_line(None, added) == 'added: cron "0 7 * * 1", enabled true'
    assert one_line(added, None) == "removed"
    assert diff(None, {"cron": "x"})[0].old is ABSENT


def test_a_yes_is_not_a_one() -> None:
    assert [change.field for change in diff({"capture": True}, {"capture": 1})] == ["capture"]
    assert diff({"every": 60}, {"every": 60.0}) == []
