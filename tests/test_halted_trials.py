"""Trials stopped from outside their own results end without hooks, as in Ray 2.60; callbacks see
``trial.last_result`` as Ray's ``Trial`` has it.

Recorded from Ray 2.60 (``/work/rayvenv``, a probe running 4 trials of a function trainable that
reports and checkpoints every 0.25 s, with a recording ``Callback``, ``LoggerCallback``,
``FIFOScheduler`` subclass and ``Searcher`` subclass, ``ray.init(num_cpus=3)``):

* a stopper's ``stop_all``, ``TuneConfig(time_budget_s=3)``: for the trials stopped (running or
  pending) no ``on_trial_complete``/``on_trial_error`` of the callbacks, no ``log_trial_end``, no
  scheduler ``on_trial_complete``/``on_trial_remove``, no searcher ``on_trial_complete``;
  ``on_experiment_end`` lists them TERMINATED; ``Result.metrics["done"]`` is False.
* ``FailureConfig(fail_fast=True)``: the failed trial gets scheduler ``on_trial_error``, searcher
  ``on_trial_complete(error=True)``, callback ``on_trial_error`` (status ERROR) and
  ``log_trial_end(failed=True)``; the other trials get nothing; ``on_experiment_end``: ERROR, then
  TERMINATED.
* a scheduler's STOP (for comparison): scheduler ``on_trial_complete``, searcher
  ``on_trial_complete`` (with the result), callback ``on_trial_complete`` (status RUNNING) and
  ``log_trial_end(failed=False)``.
* ``trial.last_result``: in ``on_trial_result`` it is the *previous* result (the first call sees
  the keys the trial had before any result: no ``training_iteration``, no ``experiment_tag``); a
  reported result there, and in ``on_checkpoint``, ``on_trial_complete`` and
  ``on_experiment_end``, ends with ``experiment_tag``; the ``result`` argument has none.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

import actors as tune
from actors import Callback, FailureConfig, LoggerCallback, RunConfig, TuneConfig, Tuner
from actors.schedulers import FIFOScheduler, TrialScheduler
from actors.search import Searcher
from tests._trainables import StopAllAfter

STOP_ALL_AFTER = 12  # results over all trials
_release = threading.Event()  # never set: a wait that bounds a trainable's step without a bare sleep


def train(config: dict[str, Any]) -> None:
    for it in range(1, 400 if config["mode"] != "sched_stop" else 5):
        _release.wait(0.03)
        if config["mode"] == "fail_fast" and config["i"] == 0 and it == 3:
            raise RuntimeError("boom")
        tune.report({"score": it})


def _note(path: str, *entry: Any) -> None:
    with open(path, "a") as f:
        f.write(json.dumps([str(getattr(x, "value", x)) if not isinstance(x, (int, bool, type(None))) else x
                            for x in entry]) + "\n")


class Rec(Callback):
    def __init__(self, path: str) -> None:
        self.path = path

    def on_trial_result(self, trial: Any, result: dict[str, Any], **info: Any) -> None:
        lr = trial.last_result
        _note(self.path, "cb.result", trial.config["i"], result["training_iteration"], lr.get("training_iteration"),
              list(lr)[-1] if lr else None, "experiment_tag" in result)

    def on_trial_complete(self, trial: Any, **info: Any) -> None:
        lr = trial.last_result
        _note(self.path, "cb.complete", trial.config["i"], trial.status, list(lr)[-1] if lr else None)

    def on_trial_error(self, trial: Any, **info: Any) -> None:
        _note(self.path, "cb.error", trial.config["i"], trial.status)

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        for t in trials:
            _note(self.path, "cb.end", t.config["i"], t.status, list(t.last_result)[-1] if t.last_result else None)


class Log(LoggerCallback):
    def __init__(self, path: str) -> None:
        self.path = path

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        _note(self.path, "log.end", trial.config["i"], failed)


class Sched(FIFOScheduler):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if trial.config["mode"] == "sched_stop" and trial.config["i"] == 0 and result["training_iteration"] >= 3:
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        _note(self.path, "sched.complete", trial.config["i"])

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        _note(self.path, "sched.remove", trial.config["i"])

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        _note(self.path, "sched.error", trial.config["i"])


class Srch(Searcher):
    def __init__(self, path: str, mode: str) -> None:
        super().__init__(metric="score", mode="max")
        self.path, self.run_mode, self.n, self.ids = path, mode, 0, {}

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.n >= 3:
            return Searcher.FINISHED  # type: ignore[return-value]
        self.ids[trial_id] = self.n
        self.n += 1
        return {"i": self.n - 1, "mode": self.run_mode}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        _note(self.path, "srch.complete", self.ids[trial_id], error)


def _run(mode: str, tmp_path: Any) -> tuple[list[list[Any]], Any]:
    path = str(tmp_path / "hooks.jsonl")
    open(path, "w").close()
    tc: dict[str, Any] = {"search_alg": Srch(path, mode), "scheduler": Sched(path), "metric": "score", "mode": "max",
                          "num_samples": 3}
    rc: dict[str, Any] = {}
    if mode == "stop_all":
        rc["stop"] = StopAllAfter(STOP_ALL_AFTER)
    elif mode == "time_budget":
        tc["time_budget_s"] = 1.5
    elif mode == "fail_fast":
        rc["failure_config"] = FailureConfig(fail_fast=True)
    grid = Tuner(train, tune_config=TuneConfig(**tc), run_config=RunConfig(
        name=mode, storage=str(tmp_path / "results"), verbose=0, system="simple",
        callbacks=[Rec(path), Log(path)], **rc)).fit()
    with open(path) as f:
        return [json.loads(line) for line in f], grid


_END_HOOKS = {"cb.complete", "cb.error", "log.end", "sched.complete", "sched.remove", "sched.error", "srch.complete"}


@pytest.mark.parametrize("mode", ["stop_all", "time_budget"])
def test_stopped_from_outside_ends_without_hooks(mode: str, tmp_path: Any, no_leaks: Any) -> None:
    hooks, grid = _run(mode, tmp_path)
    assert [h for h in hooks if h[0] in _END_HOOKS] == []  # Ray 2.60: none
    ends = sorted((h[1], h[2]) for h in hooks if h[0] == "cb.end")
    assert ends == [(i, "TERMINATED") for i in range(len(ends))] and len(ends) >= 2, ends
    assert all(r.metrics.get("done") in (False, None) for r in grid)  # never-started trials have no "done"


def test_fail_fast_ends_only_the_failed_trial_with_hooks(tmp_path: Any, no_leaks: Any) -> None:
    hooks, _ = _run("fail_fast", tmp_path)
    ends = sorted(tuple(h) for h in hooks if h[0] in _END_HOOKS)
    assert ends == sorted([("sched.error", 0), ("srch.complete", 0, True), ("cb.error", 0, "ERROR"),
                           ("log.end", 0, True)])
    assert sorted((h[1], h[2]) for h in hooks if h[0] == "cb.end") == [(0, "ERROR"), (1, "TERMINATED"),
                                                                       (2, "TERMINATED")]


def test_scheduler_stop_runs_every_end_hook_and_last_result_is_rays(tmp_path: Any, no_leaks: Any) -> None:
    hooks, _ = _run("sched_stop", tmp_path)
    for i in range(3):
        assert ["sched.complete", i] in hooks and ["srch.complete", i, False] in hooks
        assert ["cb.complete", i, "RUNNING", "experiment_tag"] in hooks and ["log.end", i, False] in hooks
        assert ["cb.end", i, "TERMINATED", "experiment_tag"] in hooks
        seen = [h[2:] for h in hooks if h[0] == "cb.result" and h[1] == i]
        # (result's iteration, last_result's iteration, last_result's last key, tag in result)
        # Ray's first call sees the trial's keys before any result (its last key "config"); audition's, none yet
        assert seen[0][:2] == [1, None] and seen[0][2] != "experiment_tag" and seen[0][3] is False
        assert seen[1:] == [[n, n - 1, "experiment_tag", False] for n in range(2, len(seen) + 1)]
