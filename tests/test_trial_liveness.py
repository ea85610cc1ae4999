"""A trial's results and end reach the controller even when a wake-up or a message is lost (``TrialActor._liveness``).

Seen once in the suite (2026-12-07, ``test_tensorboard.py``): the controller had logged every result of a
trial and still held it RUNNING; the trial's process was idle, its worker thread gone, until the test timed out.
Each test here breaks one link inside the trial's own process (the trainable runs there, so it can) and
checks that the experiment still ends with the trial's results: the actor looks at its worker's events every
``liveness_s`` without a wake-up, and sends each numbered message again until the controller acknowledged it.
"""

from __future__ import annotations

import time
from typing import Any

from actors import RunConfig, TuneConfig, Tuner, report


def _end_without_waking_the_actor(config: dict[str, Any]) -> None:
    report({"step": 1})
    time.sleep(0.3)  # (the result's batch is sent: its wake-up still works)
    from actors._worker.wakeup import Wakeup

    Wakeup.event = lambda self, urgent: None  # type: ignore[method-assign]  # the end's wake-up is lost


def _lose_the_first(kind: str) -> None:
    """From now on in this trial's process, the first ``kind`` message its actor sends never arrives."""
    from actors._shell.trial_actor import TrialActor

    send = TrialActor.send
    dropped: list[Any] = []

    def lose_the_first(self: Any, to: Any, msg: Any) -> None:
        if type(msg).__name__ == kind and not dropped:
            dropped.append(msg)  # as a message lost on the way
            return
        send(self, to, msg)

    TrialActor.send = lose_the_first  # type: ignore[method-assign]


def _end_whose_notice_is_lost(config: dict[str, Any]) -> None:
    _lose_the_first("TrialEnded")
    report({"step": 1})


def _first_batch_lost(config: dict[str, Any]) -> None:
    _lose_the_first("TrialResults")
    for step in range(1, 4):
        report({"step": step})


def _fit(trainable: Any, tmp_path: Any, name: str) -> tuple[Any, float]:
    started = time.monotonic()
    grid = Tuner(trainable, tune_config=TuneConfig(num_samples=1),
                 run_config=RunConfig(storage_path=str(tmp_path), name=name, verbose=0)).fit()
    return grid, time.monotonic() - started


def test_a_lost_wakeup_of_the_end_delays_it_by_one_look(tmp_path, no_leaks):
    grid, took = _fit(_end_without_waking_the_actor, tmp_path, "wakeup")
    assert grid.num_errors == 0 and grid[0].metrics["step"] == 1
    assert grid[0].metrics["done"] is True  # ended as a completed run, not by a timeout or a kill
    assert took < 60, took


def test_a_lost_end_notice_is_sent_again(tmp_path, no_leaks):
    grid, took = _fit(_end_whose_notice_is_lost, tmp_path, "notice")
    assert grid.num_errors == 0 and grid[0].metrics["step"] == 1
    assert grid[0].metrics["done"] is True
    assert took < 60, took


def test_a_lost_result_batch_is_sent_again_and_nothing_is_missing(tmp_path, no_leaks):
    grid, took = _fit(_first_batch_lost, tmp_path, "batch")
    assert grid.num_errors == 0 and grid[0].metrics["step"] == 3
    steps = list(grid[0].metrics_dataframe["step"])
    assert steps == [1, 2, 3], steps  # the lost batch's results are there, once, in order
    assert took < 60, took
