"""A trial's end reaches the controller even when its wake-up or its end notice is lost (``TrialActor._liveness``).

Seen once in the suite (2026-12-07, ``test_tensorboard.py``): the controller had logged every result of a
trial and still held it RUNNING; the trial's process was idle, its worker thread gone, until the test timed out.
Each test here breaks one link inside the trial's own process (the trainable runs there, so it can) and
checks that the experiment still ends with the trial's results: the actor looks at its worker's events every
``liveness_s`` without a wake-up, and sends its end notice again until a new run begins.
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


def _end_whose_notice_is_lost(config: dict[str, Any]) -> None:
    from actors._shell.trial_actor import TrialActor

    send = TrialActor.send
    dropped: list[Any] = []

    def lose_the_first_end(self: Any, to: Any, msg: Any) -> None:
        if type(msg).__name__ == "TrialEnded" and not dropped:
            dropped.append(msg)  # never reaches the controller, as a message lost on the way
            return
        send(self, to, msg)

    TrialActor.send = lose_the_first_end  # type: ignore[method-assign]
    report({"step": 1})


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
