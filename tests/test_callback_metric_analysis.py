"""Callbacks' ``trial.metric_analysis``, ``metric_n_steps`` and ``has_reported_at_least_once``, as Ray 2.60's
``Trial`` holds them in each hook.

``tests/data/ray_callback_metric_analysis.json`` was recorded from Ray 2.60 running this file's ``train`` and
``Rec`` (a grid of two trials one at a time; the second fails once after its checkpoint of step 6 and is
retried from it: Ray's analysis keeps counting the failed run's results).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import actors as tune
from actors import Callback, Checkpoint

DATA = os.path.join(os.path.dirname(__file__), "data", "ray_callback_metric_analysis.json")
KEEP = ("loss", "nested/a", "flag", "training_iteration", "done", "iterations_since_restore")


def train(config: dict[str, Any]) -> None:
    start = 0
    ck = tune.get_checkpoint()
    if ck:
        with ck.as_directory() as d, open(os.path.join(d, "s.json")) as f:
            start = json.load(f)["i"]
    for i in range(start, 12):
        if config["x"] == 2 and i == 7 and not os.path.exists(config["flag_file"]):
            open(config["flag_file"], "w").close()
            raise RuntimeError("once")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"i": i + 1}, f)
            tune.report({"loss": config["x"] * ((i * 7) % 5) + 0.5, "nested": {"a": i * i}, "flag": i % 2 == 0,
                         "name": "s"}, checkpoint=Checkpoint.from_directory(d) if i % 3 == 0 else None)


class Rec(Callback):
    def __init__(self) -> None:
        self.log: list[Any] = []

    def _ma(self, trial: Any) -> Any:  # copies: a Ray trial's analysis changes in place afterwards
        ma = trial.metric_analysis
        return (trial.has_reported_at_least_once, {k: dict(ma[k]) for k in KEEP if k in ma}, sorted(ma),
                {k: {n: list(v) for n, v in trial.metric_n_steps[k].items()} for k in ("loss",)
                 if k in trial.metric_n_steps})

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: Any, **info: Any) -> None:
        self.log.append(["result", trial.config["x"], result["training_iteration"], self._ma(trial)])

    def on_trial_complete(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self.log.append(["complete", trial.config["x"], self._ma(trial)])

    def on_trial_error(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self.log.append(["error", trial.config["x"], self._ma(trial)])

    def on_experiment_end(self, trials: Any, **info: Any) -> None:
        self.log.append(["end", sorted([t.config["x"], self._ma(t)] for t in trials)])


def test_callbacks_see_rays_metric_analysis_in_every_hook(tmp_path: Any) -> None:
    rec = Rec()
    tune.Tuner(train, param_space={"x": tune.grid_search([1, 2]), "flag_file": str(tmp_path / "failed")},
               tune_config=tune.TuneConfig(max_concurrent_trials=1),
               run_config=tune.RunConfig(storage=str(tmp_path / "results"), name="ma", verbose=0, callbacks=[rec],
                                         system="simple", failure_config=tune.FailureConfig(max_failures=1))).fit()
    with open(DATA, encoding="utf-8") as f:
        assert json.loads(json.dumps(rec.log, default=str)) == json.load(f)
