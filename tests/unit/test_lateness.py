"""How late runs started after their ticks: the text the admin shows, and the histogram read
back from the history statement's buckets (see ``job_summaries`` in ``queries.sql``)."""

from __future__ import annotations

import pytest

from django_advisory_cron.ops.charts import human_lateness
from django_advisory_cron.ops.status import LATENESS_BUCKETS, Lateness


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.0404, "40 ms"),
        (-0.012, "-12 ms"),
        (2.54, "2.5 s"),
        (190, "3 min 10 s"),
        (-75, "-1 min 15 s"),
    ],
)
def test_lateness_reads_in_milliseconds_below_a_second(seconds: float, said: str) -> None:
    assert human_lateness(seconds) == said


def test_the_buckets_read_back_cumulative_at_or_below_each_bound() -> None:
    """The statement answers, per number of bounds a run is at or below, how many runs: 11
    (at or below every bound: up to 0.05 s), 10 (0.1 s), 2 (above 30 s, up to 60), 0 (above
    them all)."""
    size = len(LATENESS_BUCKETS)
    read = Lateness.read({str(size): 3, str(size - 1): 1, "2": 2, "0": 1}, 555.5)
    assert dict(read.at_or_below) == {
        0.05: 3,
        0.1: 4,
        0.25: 4,
        0.5: 4,
        1.0: 4,
        2.5: 4,
        5.0: 4,
        10.0: 4,
        30.0: 4,
        60.0: 6,
        300.0: 6,
    }
    assert (read.runs, read.seconds) == (7, 555.5)
    assert Lateness.read({}, None) == Lateness(tuple((b, 0) for b in LATENESS_BUCKETS), 0, 0.0)
