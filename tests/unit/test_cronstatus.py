"""``cronstatus``'s description of a schedule (the command itself: tests/test_cronstatus.py)."""

from __future__ import annotations

import pytest

from django_advisory_cron.ops.status import describe


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("*/5 * * * *", "every 5 minutes"),
        ("* * * * *", "every minute"),
        ("*/1 * * * *", "every minute"),
        ("0 */1 * * *", "every hour at minute 0"),
        ("15 * * * *", "every hour at minute 15"),
        ("0 */6 * * *", "every 6 hours at minute 0"),
        ("30 2 * * *", "every day at 02:30"),
        ("0 9 * * 1", "every Monday at 09:00"),
        ("@daily", "every day at 00:00"),
        ("0 9 1-5 * *", "minute 0, hour 9, day 1-5, month *, weekday *"),
    ],
)
def test_describe(expression: str, text: str) -> None:
    assert describe(expression) == text
