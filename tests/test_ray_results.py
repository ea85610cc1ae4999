"""The keys Ray Tune 2.60 puts in every result (``Trainable.get_auto_filled_metrics`` and, for the
function API, ``checkpoint_dir_name``), and ``done=True`` on the result a stopper fires on, which
the searcher does not see (``TuneController._process_trial_result``)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import threading
import time
from typing import Any

import pytest

import actors
from actors import Callback, Checkpoint, FailureConfig, RunConfig, Trainable, TuneConfig, Tuner, get_checkpoint, report
from actors.search import Searcher, grid_search


class Seen(Callback):
    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any]) -> None:
        self.results.append(dict(result))


def reports(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"score": i * config["x"]}, checkpoint=Checkpoint.from_dict({"i": i}) if i == 1 else None)


class Steps(Trainable):
    def step(self) -> dict[str, Any]:
        return {"score": self.iteration, "done": self.iteration >= 1}


def _fit(trainable: Any, storage: str, seen: Seen) -> Any:
    return Tuner(trainable, param_space={"x": 2},
                 run_config=RunConfig(name="keys", storage=storage, verbose=0, callbacks=[seen],
                                      system="simple")).fit()[0]


def _check_ray_keys(row: dict[str, Any], i: int) -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", row["date"])
    assert isinstance(row["node_ip"], str) and row["node_ip"]
    assert row["config"] == {"x": 2}
    assert row["iterations_since_restore"] == row["training_iteration"] == i + 1
    assert row["time_since_restore"] == row["time_total_s"] > 0  # one run: nothing restored


def test_function_results_carry_rays_keys(storage_dir) -> None:
    seen = Seen()
    res = _fit(reports, storage_dir, seen)
    assert len(seen.results) == 3
    for src in (seen.results, res.metrics_history):
        for i, row in enumerate(src):
            _check_ray_keys(row, i)
        assert [r["checkpoint_dir_name"] for r in src] == [None, "checkpoint_000000", None]
    _check_ray_keys(res.metrics, 2)
    with open(os.path.join(res.path, "result.json")) as f:
        assert json.loads(f.readline())["config"] == {"x": 2}
    with open(os.path.join(res.path, "progress.csv")) as f:  # Ray's CSV logger leaves the config out
        header = next(csv.reader(f))
    assert "date" in header and not any(h.startswith("config") for h in header)


def test_class_results_carry_rays_keys_without_checkpoint_dir_name(storage_dir) -> None:
    seen = Seen()
    _fit(Steps, storage_dir, seen)
    assert len(seen.results) == 2
    for i, row in enumerate(seen.results):
        _check_ray_keys(row, i)
        assert "checkpoint_dir_name" not in row  # Ray's class API does not add it


class Once(Searcher):
    """One trial; writes each result it is told of to a file (it runs in the controller)."""

    def __init__(self, log: str) -> None:
        super().__init__(metric="score", mode="max")
        self.log, self.given = log, False

    def suggest(self, trial_id: str) -> Any:
        if self.given:
            return Searcher.FINISHED
        self.given = True
        return {"x": 2}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        with open(self.log, "a") as f:
            f.write(f"{result['training_iteration']}\n")

    def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
        pass

    def save(self) -> dict[str, Any]:
        return {"given": self.given}

    def restore(self, state: dict[str, Any]) -> None:
        self.given = state["given"]


def forever(config: dict[str, Any]) -> None:
    i = 0
    while True:
        i += 1
        report({"score": i})


def test_stopper_result_is_done_and_not_given_to_the_searcher(storage_dir, tmp_path) -> None:
    seen, log = Seen(), str(tmp_path / "searcher.log")
    res = Tuner(forever, tune_config=TuneConfig(search_alg=Once(log)),
                run_config=RunConfig(name="stop", storage=storage_dir, verbose=0, callbacks=[seen],
                                     system="simple", stop={"training_iteration": 3})).fit()[0]
    hit = [r for r in seen.results if r["training_iteration"] == 3]
    assert hit and hit[0]["done"] is True
    assert all(r["done"] is False for r in seen.results if r["training_iteration"] < 3)
    assert [r["done"] for r in res.metrics_history][:3] == [False, False, True]
    with open(log) as f:
        told = [int(line) for line in f]
    assert 3 not in told and told[:2] == [1, 2]


# ---------------------------------------------------------------- str(trial) where Ray shows it
def prints(config: dict[str, Any]) -> None:
    print(f"hello {config['x']}", flush=True)
    deadline = time.monotonic() + 30.0  # until the driver drew a table with this trial in it
    while not os.path.exists(config["flag"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    report({"score": 1})


def test_table_and_echo_name_trials_as_ray_does(storage_dir, no_leaks, monkeypatch, capfd, tmp_path) -> None:
    pytest.importorskip("rich")
    from rich.console import Console

    from actors._driver.progress import ProgressDisplay

    tables: list[str] = []
    flag = str(tmp_path / "drawn")
    original = ProgressDisplay.update

    def update(self: ProgressDisplay, msg: Any) -> None:
        if msg.rows:
            out = io.StringIO()
            Console(file=out, width=200).print(self._table(msg))
            tables.append(out.getvalue())
            open(flag, "w").close()
        original(self, msg)

    monkeypatch.setattr(ProgressDisplay, "update", update)
    grid = Tuner(prints, param_space={"x": 7, "flag": flag},
                 tune_config=TuneConfig(trial_name_creator=lambda t: f"named_{t.config['x']}"),
                 run_config=RunConfig(name="names", storage=storage_dir, verbose=0, system="multiproc")).fit()
    assert grid.num_errors == 0
    assert tables and all("named_7" in t and grid[0].trial_id not in t for t in tables)
    out = capfd.readouterr().out
    assert re.search(r"^\(named_7 pid=\d+\) hello 7$", out, re.M), out


# ------------------------------------------------ Ray's Trial: experiment_tag, evaluated_params, checkpoint
class Ends(Callback):
    def __init__(self) -> None:
        self.trials: list[Any] = []

    def on_trial_complete(self, iteration: int, trials: Any, trial: Any) -> None:
        self.trials.append(trial)


def test_callback_trials_carry_tag_evaluated_params_and_checkpoint(storage_dir) -> None:
    from actors.search import grid_search

    ends = Ends()
    Tuner(reports, param_space={"x": grid_search([1, 2.5]), "c": {"k": "const"}},
          run_config=RunConfig(name="tags", storage=storage_dir, verbose=0, callbacks=[ends],
                               system="simple")).fit()
    by_x = {t.config["x"]: t for t in ends.trials}
    for x, index, shown in ((1, 0, "1"), (2.5, 1, "2.5000")):
        t = by_x[x]
        assert t.trial_id.endswith(f"_{index:05d}")
        assert t.experiment_tag == f"{index}_x={shown}"  # Ray's format_vars: the drawn values only
        assert t.evaluated_params == {"x": x}
        assert t.checkpoint.path.endswith("checkpoint_000000") and t.checkpoint.to_dict() == {"i": 1}


# ---------------------------------------------------------------- timesteps/episodes totals
_TOTALS = ("training_iteration", "timesteps_total", "episodes_total", "timesteps_since_restore",
           "iterations_since_restore")


def reports_increments(config: dict[str, Any]) -> None:
    for i in range(3):
        metrics: dict[str, Any] = {"timesteps_this_iter": 10, "episodes_this_iter": 2}
        if i == 1:
            metrics["timesteps_total"] = 5  # a total of its own is kept, the running sum goes on
        report(metrics)


class StepsIncrements(Trainable):
    def step(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {"timesteps_this_iter": 10, "episodes_this_iter": 2, "done": self.iteration == 2}
        if self.iteration == 1:
            metrics["timesteps_total"] = 5
        return metrics


@pytest.mark.parametrize("trainable", [reports_increments, StepsIncrements])
def test_timesteps_and_episodes_are_summed_into_totals(trainable, storage_dir) -> None:
    # recorded from Ray 2.60 (Trainable.train(), which runs function trainables too)
    ray = [{"training_iteration": 1, "timesteps_total": 10, "episodes_total": 2, "timesteps_since_restore": 10,
            "iterations_since_restore": 1},
           {"training_iteration": 2, "timesteps_total": 5, "episodes_total": 4, "timesteps_since_restore": 20,
            "iterations_since_restore": 2},
           {"training_iteration": 3, "timesteps_total": 30, "episodes_total": 6, "timesteps_since_restore": 30,
            "iterations_since_restore": 3}]
    seen = Seen()
    res = _fit(trainable, storage_dir, seen)
    for src in (seen.results, res.metrics_history):
        assert [{k: r.get(k) for k in _TOTALS} for r in src] == ray


def test_without_increments_there_are_no_totals(storage_dir) -> None:
    seen = Seen()
    _fit(reports, storage_dir, seen)
    assert not {"timesteps_total", "episodes_total", "timesteps_since_restore"} & set(seen.results[-1])


def fails_once_after_a_checkpoint(config: dict[str, Any]) -> None:
    ckpt = get_checkpoint()
    n = ckpt.to_dict()["n"] if ckpt else 0
    while n < 5:
        n += 1
        if n == 3 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("planned failure")
        report({"timesteps_this_iter": 10, "episodes_this_iter": 1},
               checkpoint=Checkpoint.from_dict({"n": n}) if n % 2 == 0 else None)


def test_totals_go_on_from_the_checkpoint_a_retry_restores(storage_dir, tmp_path) -> None:
    # recorded from Ray 2.60 (max_failures=1, the retry restored from the checkpoint at iteration 2;
    # the same for a class trainable with checkpoint_frequency=2): the totals go on from that
    # checkpoint's result, the *_since_restore counts start again
    ray = [(1, 10, 1, 10, 1), (2, 20, 2, 20, 2), (3, 30, 3, 10, 1), (4, 40, 4, 20, 2), (5, 50, 5, 30, 3)]
    res = Tuner(fails_once_after_a_checkpoint, param_space={"marker": str(tmp_path / "failed")},
                run_config=RunConfig(name="totals", storage=storage_dir, verbose=0, system="simple",
                                     failure_config=FailureConfig(max_failures=1))).fit()[0]
    assert res.error is None and res.num_failures == 1
    assert [tuple(r[k] for k in _TOTALS) for r in res.metrics_history] == ray


def reports_its_own_iteration(config: dict[str, Any]) -> None:
    for i in range(2):
        report({"training_iteration": 100 + i, "score": i})


def test_a_reported_training_iteration_is_replaced_and_said_so(storage_dir) -> None:
    # a deliberate difference: Ray 2.60 keeps a reported training_iteration (result.setdefault), so it
    # would log 100, 101; audition's storage rewinds histories by its own count, so the count stays
    # and the trial's stderr says so, once
    seen = Seen()
    res = _fit(reports_its_own_iteration, storage_dir, seen)
    assert [r["training_iteration"] for r in res.metrics_history] == [1, 2]
    with open(os.path.join(res.path, "stderr.txt")) as f:
        err = f.read()
    assert err.count("reported training_iteration=100; it is replaced by audition's count (1)") == 1


# ------------------------------------------------ a trial that never reported
# Recorded from Ray 2.60 (ray.init(num_cpus=2), Tuner(...).fit(), then results[i].metrics, get_dataframe(),
# get_best_result("x", "max") and Tuner.restore(path, trainable).get_results()):
# - a function that raises before report(), a class whose first step() raises, a trial stopped before it
#   reported (Stopper.stop_all, time_budget_s), a retried trial that failed again: the trial id, then the
#   auto-filled keys of Trainable.get_auto_filled_metrics(debug_metrics_only=True), in this order;
# - a function that returns without reporting: the same and done=True;
# - a class whose setup() raises, and a trial still PENDING at the end (fail_fast=True): the id alone;
# - no row in get_dataframe() (an empty frame, no columns, when none reported), an empty
#   metrics_dataframe; get_best_result raises RuntimeError unless the experiment has one trial;
# - after Tuner.restore(...).get_results(): the id alone (Ray's saved state keeps no unreported keys).
RAY_UNREPORTED_KEYS = ["trial_id", "date", "timestamp", "pid", "hostname", "node_ip", "config"]


def raises_at_once(config: dict[str, Any]) -> None:
    raise ValueError("boom")


def returns_at_once(config: dict[str, Any]) -> None:
    return None


class SetupRaises(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        raise ValueError("setup boom")

    def step(self) -> dict[str, Any]:
        return {"x": 1}


class StepRaises(Trainable):
    def step(self) -> dict[str, Any]:
        raise ValueError("step boom")


def _check_unreported(r: Any, config: dict[str, Any], done: bool = False) -> None:
    import socket

    from actors._worker.autofill import node_ip

    assert list(r.metrics) == RAY_UNREPORTED_KEYS + (["done"] if done else [])
    assert r.metrics["trial_id"] == r.trial_id and r.metrics["config"] == config
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", r.metrics["date"])
    assert abs(r.metrics["timestamp"] - time.time()) < 600
    # in-process (system="simple"): the run's process is this one; node_ip as every reported result's
    assert (r.metrics["pid"], r.metrics["hostname"], r.metrics["node_ip"]) == (
        os.getpid(), socket.gethostname(), node_ip())
    assert r.metrics_dataframe.empty
    if done:
        assert r.metrics["done"] is True


@pytest.mark.parametrize("trainable, keys, done", [
    (raises_at_once, RAY_UNREPORTED_KEYS, False), (StepRaises, RAY_UNREPORTED_KEYS, False),
    (returns_at_once, [*RAY_UNREPORTED_KEYS, "done"], True), (SetupRaises, ["trial_id"], False)])
def test_a_trial_that_never_reported_has_rays_metrics(trainable: Any, keys: list[str], done: bool,
                                                      storage_dir: str) -> None:
    grid = Tuner(trainable, param_space={"a": 1},
                 run_config=RunConfig(name="unreported", storage=storage_dir, verbose=0, system="simple")).fit()
    (r,) = grid
    assert list(r.metrics) == keys
    if keys != ["trial_id"]:
        _check_unreported(r, {"a": 1}, done)
    assert r.metrics["trial_id"] == r.trial_id and "experiment_tag" not in r.metrics
    assert (r.error is None) == done
    assert grid.get_dataframe().empty and list(grid.get_dataframe().columns) == []
    assert grid.get_best_result("x", "max").trial_id == r.trial_id  # one trial: returned whatever the metric
    (again,) = Tuner.restore(grid.experiment_path, trainable).get_results()
    assert again.metrics == {"trial_id": r.trial_id}


def test_a_retried_trial_keeps_its_last_runs_keys(storage_dir: str) -> None:
    (r,) = Tuner(raises_at_once, param_space={"a": 1},
                 run_config=RunConfig(name="retry", storage=storage_dir, verbose=0, system="simple",
                                      failure_config=FailureConfig(max_failures=1))).fit()
    assert r.num_failures == 2
    _check_unreported(r, {"a": 1})


class StopAllAfterOne(actors.Stopper):
    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen += 1
        return False

    def stop_all(self) -> bool:
        return self.seen > 0


SECOND_RUNS = threading.Event()


def reports_or_waits(config: dict[str, Any]) -> None:
    if config["a"] == 0:  # reports (and so stops every trial) once the other one runs
        assert SECOND_RUNS.wait(30.0)
        report({"x": 0})
        return
    SECOND_RUNS.set()
    from actors._worker.session import _get_session

    runner = _get_session("test")  # (in-process) wait, without reporting, until the stop reached this trial
    deadline = time.monotonic() + 30.0
    while not runner.stop_requested and time.monotonic() < deadline:
        threading.Event().wait(0.01)
    report({"x": 1})  # the stop ends the trial here: this result is never recorded


def test_a_trial_stopped_before_it_reported(storage_dir: str) -> None:
    SECOND_RUNS.clear()
    grid = Tuner(reports_or_waits, param_space={"a": grid_search([0, 1])},
                 run_config=RunConfig(name="stopped", storage=storage_dir, verbose=0, system="simple",
                                      stop=StopAllAfterOne())).fit()
    done, stopped = sorted(grid, key=lambda r: r.config["a"])
    assert stopped.status.value == "TERMINATED" and stopped.error is None
    _check_unreported(stopped, {"a": 1})
    assert done.metrics["x"] == 0 and len(grid.get_dataframe()) == 1  # the one that reported: its row only
    assert grid.get_best_result("x", "max").trial_id == done.trial_id


def fails_first(config: dict[str, Any]) -> None:
    if config["a"] == 0:
        raise ValueError("boom")
    report({"x": config["a"]})


def test_trials_still_pending_at_the_end_have_their_id_alone(storage_dir: str) -> None:
    all_cpus = actors.with_resources(fails_first, {"cpu": os.cpu_count() or 1})  # one trial at a time
    grid = Tuner(all_cpus, param_space={"a": grid_search([0, 1, 2, 3])},
                 run_config=RunConfig(name="pending", storage=storage_dir, verbose=0, system="simple",
                                      failure_config=FailureConfig(fail_fast=True))).fit()
    failed, *pending = sorted(grid, key=lambda r: r.config["a"])
    _check_unreported(failed, {"a": 0})
    assert len(pending) == 3 and grid.num_terminated == 3
    assert [r.metrics for r in pending] == [{"trial_id": r.trial_id} for r in pending]
    assert all(r.metrics_dataframe.empty for r in pending)
    assert grid.get_dataframe().empty
    with pytest.raises(RuntimeError, match="no trial reported"):
        grid.get_best_result("x", "max")
