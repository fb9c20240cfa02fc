"""How soon a streaming command's wait for its query (`ordo.cli.streaming.wait_for`) notices a
stop: in Spark's terms, how long it asks the query to wait once the stop has come.

The query is a stand-in that runs until stopped and has made no progress: what is proven is the
command's own loop, not Spark's.
"""

from __future__ import annotations

import os
import signal

import click
import pytest

from ordo.cli.streaming import wait_for


class _RunningQuery:
    """A streaming query that runs until stopped; SIGTERM comes to this process as it is first
    waited for. Counts the seconds it was asked to wait after that."""

    lastProgress = None
    recentProgress: tuple[object, ...] = ()

    def __init__(self) -> None:
        self.is_stopped = False
        self.waits: list[float] = []

    def awaitTermination(self, timeout: float) -> bool:
        if not self.waits:
            os.kill(os.getpid(), signal.SIGTERM)  # the flag of wait_for takes it
        self.waits.append(timeout)
        return self.is_stopped

    def stop(self) -> None:
        self.is_stopped = True


def test_a_stop_ends_the_wait_for_a_running_query_within_a_fifth_of_a_second() -> None:
    """The command asked Spark to wait 2 s at a time, and looked at its stop flag only in
    between: SIGTERM or Ctrl-C were held up to 2 s while the query ran on."""
    query = _RunningQuery()
    with pytest.raises(click.exceptions.Exit) as ended:
        wait_for(query, "pipeline 'totals'")
    assert ended.value.exit_code == 128 + signal.SIGTERM
    assert query.is_stopped
    assert sum(query.waits) <= 0.2, query.waits
