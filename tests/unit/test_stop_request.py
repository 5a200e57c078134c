"""``overlap="cancel_other"``'s stop request on the holding side, without a server: a lock's
loss state is told the request once, and either its owner delivers it (SIGTERM in a process's
main thread) or the holding thread's next query raises ``RunCancelled``, once, so the body can
clean up with later queries."""

from __future__ import annotations

import re
from typing import Any

import pytest

from django_advisory_cron.exceptions import RunCancelled
from django_advisory_cron.lock.loss import Loss

ASKED = "cancelled by a new run (overlap cancel_other) started by host h pid 1"


def query(loss: Loss) -> str:
    def execute(sql_text: Any, params: Any, many: bool, context: Any) -> str:
        return "ran"

    answer: str = loss._guard(execute, "SELECT 1", None, False, {})
    return answer


def test_a_thread_s_next_query_raises_once_then_its_queries_go_through() -> None:
    loss = Loss("advisory lock (1, 2)", lambda error: None)
    assert query(loss) == "ran"
    loss.ask_stop(ASKED)
    with pytest.raises(RunCancelled, match=f"^{re.escape(ASKED)}; this run stops at this query$"):
        query(loss)
    assert query(loss) == "ran"
    assert not loss.lost  # a stop request is no lost lock


def test_a_request_delivered_by_its_owner_raises_nothing_and_is_told_once() -> None:
    told: list[str] = []
    loss = Loss("advisory lock (1, 2)", lambda error: None)

    def deliver(text: str) -> bool:
        told.append(text)
        return True

    loss.on_stop = deliver
    loss.ask_stop(ASKED)
    loss.ask_stop("another request")
    assert told == [ASKED] and loss.stop_asked == ASKED
    assert query(loss) == "ran"


def test_an_owner_that_cannot_deliver_it_leaves_it_to_the_next_query() -> None:
    loss = Loss("advisory lock (1, 2)", lambda error: None)
    loss.on_stop = lambda text: False
    loss.ask_stop(ASKED)
    with pytest.raises(RunCancelled):
        query(loss)
