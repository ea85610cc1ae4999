"""Results reach the controller (and result.json) promptly, and are not lost when the process dies.

The guarantee (docs/architecture.md, "Decision timing" and "Failure handling"): a trial actor
holds a result at most ``TrialActor.batch_delay_s`` (50 ms) before sending it, and sends a
result that commits a checkpoint at once. So when a trial's process dies, the history keeps

* every result reported before a committed checkpoint (the checkpoint's manifest carries those
  the controller may not have, and the controller reads them back after the failure), and
* every result reported more than the time bound (plus transport time) before the death.

Only results reported in the last moments before an unannounced death may be lost. The
multi-process system is the one where results used to sit unsent in the trial's transport.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors import (
    Callback,
    Checkpoint,
    FailureConfig,
    RunConfig,
    TuneConfig,
    Tuner,
    get_context,
    get_trial_id,
    report,
)
from actors._engine.trial import TrialStatus
from actors.search import grid_search

NAME = "exp"
STEP_S = 0.5  # ten times the batching bound, so "before step k+2" leaves a wide margin


def _rows(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


def slow_steps(config: dict[str, Any]) -> None:
    """At the start of each step, counts the rows its result.json holds and the checkpoints the
    driver's callback has heard of (no waiting: what is there is what it reports)."""
    trial_dir = get_context().get_trial_dir()
    for i in range(config["steps"]):
        seen = _rows(os.path.join(trial_dir, "result.json"))
        heard = _rows(os.path.join(config["heard"], get_trial_id()))
        time.sleep(STEP_S)
        report({"seen": seen, "heard": heard}, checkpoint=Checkpoint.from_dict({"i": i}) if config["ckpt"] else None)


class Heard(Callback):
    """Appends a line to a file per trial each time the driver hears of a checkpoint. (A callback
    with ``on_trial_result`` is sent each result batch at once and answers it; this one gets the
    controller's batched events.)"""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_checkpoint(self, iteration: int, trials: Any, trial: Any, checkpoint: Any, **info: Any) -> None:
        with open(os.path.join(self.path, trial.trial_id), "a", encoding="utf-8") as f:
            f.write("1\n")


@pytest.mark.slow
def test_results_reach_result_json_and_callbacks_while_the_trial_runs(tmp_path, no_leaks):
    """Row k is in result.json before step k+2 starts (a trial without checkpoints: the time bound
    sends it); the driver's callback has heard of checkpoint k by then (the controller's events)."""
    root, heard = str(tmp_path / "results"), str(tmp_path / "heard")
    os.makedirs(heard)
    grid = Tuner(slow_steps, param_space={"root": root, "heard": heard, "steps": 6, "ckpt": grid_search([False, True])},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(name=NAME, storage=root, verbose=0, callbacks=[Heard(heard)])).fit()
    by_ckpt = {r.config["ckpt"]: r.metrics_history for r in grid}
    for history in by_ckpt.values():
        assert [h["training_iteration"] for h in history] == [1, 2, 3, 4, 5, 6]
    # history[k-1] was reported at the end of step k, and counted what step k saw at its start
    seen = [h["seen"] for h in by_ckpt[False]]
    assert [n >= k - 2 for k, n in enumerate(seen, 1)] == [True] * 6, seen
    heard_ = [h["heard"] for h in by_ckpt[True]]
    assert [n >= k - 2 for k, n in enumerate(heard_, 1)] == [True] * 6, heard_


def reports_then_dies(config: dict[str, Any]) -> None:
    """20 results, then the process dies without a word (``os._exit``), at once or a while later."""
    n = config["n"]
    for i in range(1, n + 1):
        if config["gap_s"]:
            time.sleep(config["gap_s"])
        last = i == n and config["last_with_checkpoint"]
        ckpt: Checkpoint | None = None
        if last:
            ckpt = DiesAfterCommit.from_dict({"i": i}) if config["inside_commit"] else Checkpoint.from_dict({"i": i})
        report({"i": i}, checkpoint=ckpt)
    if config["linger_s"]:
        time.sleep(config["linger_s"])
    os._exit(3)


class DiesAfterCommit(Checkpoint):
    """The process dies as soon as the checkpoint is committed (its manifest written), before the
    report that made it can hand its result to the trial actor: the controller never hears of it."""

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        with super().as_directory() as d:
            yield d
        os._exit(3)


def _dies(root: str, **config: Any) -> Any:
    space = {"n": 20, "last_with_checkpoint": False, "inside_commit": False, "linger_s": 0.0, "gap_s": 0.0,
             **config}
    grid = Tuner(reports_then_dies, param_space=space,
                 run_config=RunConfig(name=NAME, storage=root, verbose=0,
                                      failure_config=FailureConfig(max_failures=0))).fit()
    (result,) = list(grid)
    assert result.status is TrialStatus.ERROR
    return result


@pytest.mark.slow
@pytest.mark.parametrize("case", [
    # older than the time bound: 0.5 s is ten times it (steps of 20 ms, as a fast trainable's)
    pytest.param({"linger_s": 0.5, "gap_s": 0.02}, id="dies_0.5s_after"),
    # reported before a committed checkpoint: kept however soon the process dies
    pytest.param({"last_with_checkpoint": True}, id="dies_right_after_checkpoint"),
    pytest.param({"last_with_checkpoint": True, "inside_commit": True}, id="dies_inside_commit"),
])
def test_reported_results_survive_the_process_dying(case, tmp_path, no_leaks):
    result = _dies(str(tmp_path / "results"), **case)
    assert [h["i"] for h in result.metrics_history] == list(range(1, 21))
    assert [h["training_iteration"] for h in result.metrics_history] == list(range(1, 21))
    if case.get("last_with_checkpoint"):  # the checkpoint it died after is the trial's checkpoint
        assert result.checkpoint is not None and result.checkpoint.to_dict() == {"i": 20}
