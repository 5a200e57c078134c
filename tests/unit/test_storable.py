"""The storable form of a run's text (``core.text.storable``): what PostgreSQL text cannot hold
(NUL, an unpaired surrogate) becomes U+FFFD, nothing else changes, and the length stays (the
runs that store it: tests/test_unstorable_text.py)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from django_advisory_cron.core.text import storable

MARK = "\ufffd"
UNSTORABLE = ["\x00", "\ud800", "\udbff", "\udc00", "\udfff"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("plain", "plain"),
        ("a\x00b", f"a{MARK}b"),
        ("report-\udcff.csv", f"report-{MARK}.csv"),  # os.fsdecode(b"report-\xff.csv")
        ("\U0001f600 and \u20ac", "\U0001f600 and \u20ac"),  # paired in UTF-8: kept
        ("\ud83d\ude00", f"{MARK}{MARK}"),  # a pair of surrogates is still two in a str
    ],
)
def test_examples(text: str, expected: str) -> None:
    assert storable(text) == expected


@given(st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(UNSTORABLE))))
@example("\x00" * 3)
def test_any_text_becomes_storable_at_the_same_length_and_stays_so(text: str) -> None:
    kept = storable(text)
    assert len(kept) == len(text) and storable(kept) == kept
    kept.encode()  # UTF-8: what the driver sends
    changed = [(old, new) for old, new in zip(text, kept, strict=True) if old != new]
    assert all(
        new == MARK and (old == "\x00" or "\ud800" <= old <= "\udfff") for old, new in changed
    )


@given(st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"])))
def test_text_without_nul_or_surrogates_is_kept_as_it_is(text: str) -> None:
    assert storable(text) == text
