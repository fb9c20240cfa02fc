"""ThrottledProgress: the progress lines of long commands, at most one every few seconds."""

from __future__ import annotations

import pytest

from ordo.cli.options import ThrottledProgress


class _Seconds:
    """A monotonic clock in seconds that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_first_line_at_once_then_one_per_interval_and_the_last_at_the_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    seconds = _Seconds()
    with ThrottledProgress(seconds=seconds) as show:
        for n in range(1, 5):
            show(f"batch {n}")  # all within the interval: only the first is printed
        assert capsys.readouterr().err == "batch 1\n"
        seconds.now = ThrottledProgress.EVERY_S
        show("batch 5")
        show("batch 6")
        assert capsys.readouterr().err == "batch 5\n"
    assert capsys.readouterr().err == "batch 6\n"  # held, printed when the work ends


def test_nothing_held_prints_nothing_more_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    with ThrottledProgress(seconds=_Seconds()) as show:
        show("only")
    assert capsys.readouterr().err == "only\n"


def test_an_interruption_still_prints_the_held_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C's line says "see above": above must be where the work stopped."""

    def interrupted_work(show: ThrottledProgress) -> None:
        show("batch 1")
        show("batch 2")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), ThrottledProgress(seconds=_Seconds()) as show:
        interrupted_work(show)
    assert capsys.readouterr().err == "batch 1\nbatch 2\n"
