"""Ray Tune 2.60's shape of a trial's results: the key order of ``Result.metrics``, ``result.json``,
``progress.csv`` and the dataframes; ``done`` of a trial stopped from outside its own results; the
``date`` of a trial that never reported; the ``experiment_tag`` of ``points_to_evaluate`` trials.

Every expected value was recorded from Ray 2.60 (``/work/rayvenv``) with the same trainables under
``ray.tune`` imports: ``list(result.metrics)``, the last line of ``result.json``, the header of
``progress.csv``, ``list(result.metrics_dataframe.columns)``, ``list(grid.get_dataframe().columns)``
and ``trial.last_result["done"]`` in a callback's ``on_trial_complete``.
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from typing import Any

import pytest

import actors as tune
from actors import Callback, Checkpoint, CheckpointConfig, FailureConfig, RunConfig, TuneConfig, Tuner
from actors.search import BasicVariantGenerator
from tests._trainables import StopAllAfter

# recorded from Ray 2.60: a function trainable reporting {"loss", "acc"} (checkpoint: with one)
FUNCTION_KEYS = ["loss", "acc", "timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id",
                 "date", "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "config",
                 "time_since_restore", "iterations_since_restore"]
FUNCTION_CKPT_KEYS = [*FUNCTION_KEYS[:4], "should_checkpoint", *FUNCTION_KEYS[4:]]
# recorded from Ray 2.60: a class trainable whose step() returns {"loss", "acc"}, with and without
# CheckpointConfig(checkpoint_frequency=1) (the same order)
CLASS_KEYS = ["loss", "acc", "done", "training_iteration", "trial_id", "date", "timestamp", "time_this_iter_s",
              "time_total_s", "pid", "hostname", "node_ip", "config", "time_since_restore",
              "iterations_since_restore"]


def fn(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"loss": config["x"] * i, "acc": 1.0})


def fn_ckpt(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"loss": config["x"] * i, "acc": 1.0}, checkpoint=Checkpoint.from_dict({"i": i}))


class Cls(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"loss": self.config["x"] * self.i, "acc": 1.0}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"i": self.i}


class LastResults(Callback):
    def __init__(self) -> None:
        self.done: dict[str, Any] = {}
        self.keys: dict[str, list[str]] = {}

    def on_trial_complete(self, trial: Any, **info: Any) -> None:
        self.done[trial.trial_id] = trial.last_result.get("done")
        self.keys[trial.trial_id] = list(trial.last_result)


def _stored(path: str) -> tuple[list[dict[str, Any]], list[list[str]]]:
    with open(os.path.join(path, "result.json")) as f:
        rows = [json.loads(line) for line in f]
    with open(os.path.join(path, "progress.csv")) as f:
        return rows, list(csv.reader(f))


def _check_order(grid: Any, keys: list[str], cb: LastResults) -> None:
    no_config = [k for k in keys if k != "config"]
    for r in grid:
        assert list(r.metrics) == [*keys, "experiment_tag"]
        rows, table = _stored(r.path)
        assert list(rows[-1]) == keys and table[0] == no_config
        assert list(r.metrics_dataframe.columns) == [*no_config, "config/x"]
        assert cb.keys[r.trial_id] == [*keys, "experiment_tag"]  # as Ray 2.60's trial.last_result
    assert list(grid.get_dataframe().columns) == [*no_config, "config/x", "logdir"]


@pytest.mark.parametrize(("trainable", "space", "keys", "extra"), [
    (fn, {"x": 1}, FUNCTION_KEYS, {}),
    (fn_ckpt, {"x": 1}, FUNCTION_CKPT_KEYS, {}),
    (Cls, {"x": 1}, CLASS_KEYS, {}),
    (Cls, {"x": 1}, CLASS_KEYS, {"checkpoint_config": CheckpointConfig(checkpoint_frequency=1)}),
], ids=["function", "function-checkpoint", "class", "class-checkpoint"])
def test_keys_come_in_rays_order(storage_dir: str, trainable: Any, space: dict[str, Any], keys: list[str],
                                 extra: dict[str, Any]) -> None:
    pytest.importorskip("pandas")
    cb = LastResults()
    grid = Tuner(trainable, param_space=space, run_config=RunConfig(
        name="order", storage=storage_dir, verbose=0, system="simple", callbacks=[cb],
        stop={"training_iteration": 3}, **extra)).fit()
    _check_order(grid, keys, cb)
    # recorded: a trial that finished on its own (function) or at its stop criterion (class) says done
    assert [r.metrics["done"] for r in grid] == [True] and list(cb.done.values()) == [True]


def slow_fn(config: dict[str, Any]) -> None:
    for i in range(200):
        if config.get("fail") and i == 2:
            raise ValueError("boom")
        tune.report({"loss": i})
        threading.Event().wait(0.05)  # (the trainable's own pace, not a wait of the test)


class SlowCls(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        if self.config.get("fail") and self.i == 3:
            raise ValueError("boom")
        threading.Event().wait(0.05)
        return {"loss": self.i}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"i": self.i}


def _stopped_from_outside(storage_dir: str, trainable: Any, name: str, how: str,
                          system: str = "simple") -> tuple[Any, LastResults]:
    cb = LastResults()
    space: dict[str, Any] = {"x": tune.grid_search([1, 2])}
    tc, rc = TuneConfig(), RunConfig(name=name, storage=storage_dir, verbose=0, system=system, callbacks=[cb])
    if how == "stop_all":
        rc = RunConfig(name=name, storage=storage_dir, verbose=0, system=system, callbacks=[cb], stop=StopAllAfter(3))
    elif how == "time_budget":
        tc = TuneConfig(time_budget_s=2)
    else:
        space = {"fail": tune.grid_search([True, False])}
        rc = RunConfig(name=name, storage=storage_dir, verbose=0, system=system, callbacks=[cb],
                       failure_config=FailureConfig(fail_fast=True))
    return Tuner(trainable, param_space=space, tune_config=tc, run_config=rc).fit(), cb


@pytest.mark.parametrize("how", ["stop_all", "time_budget", "fail_fast"])
@pytest.mark.parametrize("trainable", [slow_fn, SlowCls], ids=["function", "class"])
def test_a_trial_stopped_from_outside_keeps_done_false(storage_dir: str, trainable: Any, how: str) -> None:
    """Recorded from Ray 2.60 (the same stopper, time_budget_s=3, fail_fast=True): every reported
    trial's Result.metrics, last result.json row, progress.csv row and metrics_dataframe row say
    done=False (Ray sets done only on a result a stop was decided on, or for a function that returned)."""
    grid, cb = _stopped_from_outside(storage_dir, trainable, how, how)
    reported = [r for r in grid if "training_iteration" in r.metrics]
    assert reported
    for r in reported:
        rows, table = _stored(r.path)
        assert r.metrics["done"] is False and rows[-1]["done"] is False
        assert table[-1][table[0].index("done")] == "False"
        assert not r.metrics_dataframe["done"].iloc[-1]
        assert r.trial_id not in cb.done  # Ray 2.60 calls no on_trial_complete for them (tests/test_halted_trials.py)


def test_stop_from_outside_and_key_order_in_a_default_fit(storage_dir: str) -> None:
    """Items 1 and 4 through a multi-process fit: a stopper's stop_all leaves done=False, and the
    function and class keys come in Ray's order there too."""
    pytest.importorskip("pandas")
    grid, cb = _stopped_from_outside(storage_dir, slow_fn, "mp", "stop_all", system="multiproc")
    for r in grid:
        if "training_iteration" in r.metrics:
            assert r.metrics["done"] is False
            assert list(r.metrics)[:len(FUNCTION_KEYS) - 1] == ["loss", *FUNCTION_KEYS[2:]]
    cb = LastResults()
    grid = Tuner(Cls, param_space={"x": 1}, run_config=RunConfig(
        name="mp-cls", storage=storage_dir, verbose=0, system="multiproc", callbacks=[cb],
        stop={"training_iteration": 3})).fit()
    _check_order(grid, CLASS_KEYS, cb)


class SlowSetup(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        threading.Event().wait(1.2)  # the trainable's own slow setup (Ray takes the date after it)
        SlowSetup.built_at = time.time()

    def step(self) -> dict[str, Any]:
        raise ValueError("fails before its first result")


def test_a_trial_that_never_reported_is_dated_once_built(storage_dir: str) -> None:
    """Ray 2.60 takes a never-reported trial's date/timestamp from its actor once the trainable was
    built (get_auto_filled_metrics, queued behind the class's setup), not at the run's start."""
    began = time.time()
    grid = Tuner(SlowSetup, run_config=RunConfig(name="late", storage=storage_dir, verbose=0,
                                                 system="simple")).fit()
    m = grid[0].metrics
    assert "training_iteration" not in m and int(began) < int(SlowSetup.built_at)
    assert m["timestamp"] == int(SlowSetup.built_at)
    assert m["date"] == time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(SlowSetup.built_at))
    # recorded from Ray 2.60: a never-reported trial's keys, in this order
    assert list(m) == ["trial_id", "date", "timestamp", "pid", "hostname", "node_ip", "config"]


def test_points_trials_are_tagged_by_what_they_draw(storage_dir: str) -> None:
    """Recorded from Ray 2.60: a point's trials list only the swept and drawn values."""
    space = {"x": tune.uniform(0, 1), "y": tune.grid_search([1, 2]), "c": 5}
    tc = TuneConfig(search_alg=BasicVariantGenerator(points_to_evaluate=[{"x": 0.5}, {"x": 0.25, "y": 3}]),
                    num_samples=3)
    grid = Tuner(fn, param_space=space, tune_config=tc, run_config=RunConfig(
        name="points", storage=storage_dir, verbose=0, system="simple")).fit()
    tags = [r.metrics["experiment_tag"] for r in sorted(grid, key=lambda r: r.trial_id)]
    assert tags[:3] == ["0_y=1", "1_y=2", "2"]  # Ray 2.60: "0_y=1", "1_y=2", "2"
    assert [t.split(",")[0][:4] for t in tags[3:]] == ["3_x=", "4_x="]  # Ray: "3_x=0.4888,y=1", ...
    assert [t.split(",")[1] for t in tags[3:]] == ["y=1", "y=2"]


def _report_once(config: dict[str, Any]) -> None:
    tune.report({"a": 1})


def test_a_trials_params_pkl_and_params_json_are_rays(tmp_path: Any) -> None:
    """Recorded from Ray 2.60 (``param_space={"t": (1, 2), "s": {1, 2}, "g": grid_search([1])}``): the
    trial directory holds ``params.pkl``, the config cloudpickled (a tuple and a set kept), and
    ``params.json`` writes the set as its ``str``, the tuple as a list, keys sorted."""
    import pickle

    grid = Tuner(_report_once, param_space={"t": (1, 2), "s": {1, 2}, "g": tune.grid_search([1])},
                 run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    path = grid[0].path
    assert {"params.json", "params.pkl", "progress.csv", "result.json"} <= set(os.listdir(path))
    with open(os.path.join(path, "params.pkl"), "rb") as f:
        assert pickle.load(f) == {"t": (1, 2), "s": {1, 2}, "g": 1}
    with open(os.path.join(path, "params.json"), encoding="utf-8") as f:
        assert json.load(f) == {"g": 1, "s": "{1, 2}", "t": [1, 2]}
