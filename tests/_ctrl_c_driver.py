"""A driver that Ctrl-C interrupts: ``python tests/_ctrl_c_driver.py DIR STORAGE MODE`` (``fresh`` or ``restore``).

Every hook it gets (callback, scheduler, searcher) is one JSON line in ``DIR/log_MODE.jsonl``; after its
third result the callback writes ``DIR/third_result``, the test's cue to send SIGINT. In ``fresh`` mode,
once the test wrote ``DIR/signalled``, the scheduler's saved state waits (up to 4 s) for the running
trials to have stopped (each writes ``DIR/stopped_X`` as its code unwinds): the ends of the aborted
trials then reach the controller before the run ends, so a hook told of them would show.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

if __name__ == "__main__":  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors import Callback, Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors.schedulers import FIFOScheduler
from actors.search import BasicVariantGenerator, grid_search

STEPS = 5


def _log(**line: Any) -> None:
    """Appended to the file the test named (the scheduler and searcher run in other processes)."""
    with open(os.environ["CTRL_C_LOG"], "a") as f:
        f.write(json.dumps(line) + "\n")


def train(config: dict[str, Any]) -> None:
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] if ckpt else 0
    try:
        for i in range(start, STEPS):
            time.sleep(0.2)
            report({"step": i + 1, "start": start}, checkpoint=Checkpoint.from_dict({"step": i + 1}))
    finally:
        open(os.path.join(os.environ["CTRL_C_DIR"], f"stopped_{config['x']}"), "w").close()


def _statuses(trials: list[Any]) -> list[list[Any]]:
    return [[t.config["x"], str(t.status)] for t in trials]


class Hooks(Callback):
    def __init__(self) -> None:
        self.results = 0

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        _log(hook="cb.on_trial_start", x=trial.config["x"])

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        _log(hook="cb.on_trial_result", x=trial.config["x"], step=result["step"], start=result["start"])
        self.results += 1
        if self.results == 3:
            open(os.path.join(os.environ["CTRL_C_DIR"], "third_result"), "w").close()

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        _log(hook="cb.on_trial_complete", x=trial.config["x"], status=str(trial.status))

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        _log(hook="cb.on_trial_error", x=trial.config["x"], status=str(trial.status))

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        _log(hook="cb.on_experiment_end", trials=_statuses(trials))


class LoggingFIFO(FIFOScheduler):
    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        _log(hook="sched.on_trial_complete", x=trial.config["x"])
        super().on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        _log(hook="sched.on_trial_remove", x=trial.config["x"])
        super().on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        _log(hook="sched.on_trial_error", x=trial.config["x"])
        super().on_trial_error(tune_controller, trial)

    def _save_to_pickle(self) -> Any:
        where = os.environ["CTRL_C_DIR"]
        if os.environ.get("CTRL_C_MODE") == "fresh" and os.path.exists(os.path.join(where, "signalled")):
            deadline = time.monotonic() + 4.0  # under the abort's wait for this state (ABORT_SAVE_TIMEOUT_S)
            while time.monotonic() < deadline and not all(
                    os.path.exists(os.path.join(where, f"stopped_{x}")) for x in (0, 1)):
                time.sleep(0.02)
        return super()._save_to_pickle()


class LoggingGenerator(BasicVariantGenerator):
    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        _log(hook="search.on_trial_complete", trial_id=trial_id, error=error)
        super().on_trial_complete(trial_id, result, error)


if __name__ == "__main__":
    where, storage, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    os.environ.update(CTRL_C_DIR=where, CTRL_C_MODE=mode, CTRL_C_LOG=os.path.join(where, f"log_{mode}.jsonl"))
    if mode == "fresh":
        tuner = Tuner(train, param_space={"x": grid_search([0, 1, 2, 3])},
                      tune_config=TuneConfig(scheduler=LoggingFIFO(), search_alg=LoggingGenerator(max_concurrent=2)),
                      run_config=RunConfig(name="e", storage=storage, verbose=0, callbacks=[Hooks()]))
    else:
        tuner = Tuner.restore(os.path.join(storage, "e"), train, callbacks=[Hooks()])
    grid = tuner.fit()
    _log(hook="fit returned", results=[[r.config["x"], str(r.status), r.metrics.get("step"), r.metrics.get("done"),
                                        r.error is not None, r.checkpoint.to_dict()["step"] if r.checkpoint else None]
                                       for r in grid])
