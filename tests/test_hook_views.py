"""What a scheduler's, a searcher's and a callback's hooks see of a trial's results, as Ray Tune 2.60.

Recorded from Ray 2.60.0 in its own virtualenv (see /work/shared/notes/ray-fidelity.md): a probe script
ran ``Tuner.fit()`` with a ``FIFOScheduler`` subclass whose ``on_trial_result``/``on_trial_complete``/
``on_trial_error`` wrote ``dict(trial.last_result)`` and the ``result`` argument, a ``Searcher`` whose
``on_trial_complete`` wrote ``(result, error)``, and a ``Callback`` whose ``on_trial_result`` wrote
``dict(trial.last_result)``; over a function and a class trainable with three results each, a trial the
scheduler stopped, a trial in error, a retry from a checkpoint, a retry without one and a pause-resume.
What Ray's hooks got is written below as literals: each dict's keys in order, and the values that do not
change from run to run (the rest, times, dates, pids, differ from run to run in Ray too).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import actors as tune
from actors import Callback, Checkpoint, CheckpointConfig, FailureConfig, RunConfig, TuneConfig, Tuner
from actors.schedulers import FIFOScheduler
from actors.search import Searcher

SHOWN = ("training_iteration", "loss", "done", "iterations_since_restore", "experiment_tag", "config")


def view(d: dict[str, Any] | None) -> Any:
    """A dict's keys in order, and the values of it that are the same in every run."""
    return None if d is None else (tuple(d), {k: d[k] for k in SHOWN if k in d})


def _write(path: str, *entry: Any) -> None:
    with open(path, "a") as f:  # the plugins run in the scheduler actor and the controller: a file
        f.write(json.dumps(entry) + "\n")


class Watching(FIFOScheduler):
    def __init__(self, log: str, stop_at: int = 0, pause_at: int = 0) -> None:
        super().__init__()
        self.log, self.stop_at, self.pause_at, self.paused = log, stop_at, pause_at, False

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        _write(self.log, "sched.result", dict(trial.last_result), result)
        if self.stop_at and result["training_iteration"] >= self.stop_at:
            return self.STOP
        if self.pause_at and result["training_iteration"] == self.pause_at and not self.paused:
            self.paused = True
            return self.PAUSE
        return self.CONTINUE

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        _write(self.log, "sched.complete", dict(trial.last_result), result)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        _write(self.log, "sched.error", dict(trial.last_result), None)


class OneConfig(Searcher):
    def __init__(self, log: str) -> None:
        super().__init__(metric="loss", mode="min")
        self.log, self.given = log, False

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.given:
            return Searcher.FINISHED
        self.given = True
        return {"x": 1}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        _write(self.log, "search.complete", result, error)


class LastResults(Callback):
    def __init__(self, log: str) -> None:
        self.log = log

    def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                        **info: Any) -> None:
        _write(self.log, "cb.result", dict(trial.last_result), result)


MARK = "HOOK_VIEWS_FAILED_ONCE"  # a file: a trial that fails once (run() names it in the environment)


def three(config: dict[str, Any]) -> None:
    """Three results (losses 0, 1, 2); with ``fail`` the first run fails before its third (every run
    with ``max_failures=0``); with ``ckpt`` each result carries a checkpoint the next run starts after."""
    ck = tune.get_checkpoint()
    start = ck.to_dict()["i"] if ck else 0
    for i in range(start, 3):
        if config.get("fail") and i == 2 and not ck and not os.path.exists(os.environ[MARK]):
            open(os.environ[MARK], "w").close()
            raise RuntimeError("planned failure")
        saves = config.get("ckpt") and (i == 0 or not config.get("first_only"))
        tune.report({"loss": float(i)}, checkpoint=Checkpoint.from_dict({"i": i + 1}) if saves else None)


class Three(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        fails_at = 3 if self.config.get("fail") else 4 if self.config.get("fail4") and not self.restored else 0
        if self.i == fails_at:
            raise RuntimeError("planned failure")
        return {"loss": float(self.i)}

    restored = False

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "i"), "w") as f:
            f.write(str(self.i))

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "i")) as f:
            self.i, self.restored = int(f.read()), True


def run(tmp_path: Path, trainable: Any, space: dict[str, Any] | None = None, system: str = "simple",
        callbacks: bool = True, search: bool = True, **kw: Any) -> dict[str, list[Any]]:
    """Run one trial; what each kind of hook got, in order (a kind's hooks run in one process)."""
    log = str(tmp_path / "hooks.jsonl")
    sched = Watching(log, kw.pop("stop_at", 0), kw.pop("pause_at", 0))
    os.environ[MARK] = str(tmp_path / "failed")
    Tuner(trainable, param_space=space or {},
          tune_config=TuneConfig(scheduler=sched, search_alg=OneConfig(log) if search else None, metric="loss",
                                 mode="min"),
          run_config=RunConfig(name="hooks", storage=str(tmp_path / "results"), verbose=0, system=system,
                               callbacks=[LastResults(log)] if callbacks else [], **kw)).fit()
    seen: dict[str, list[Any]] = {}
    for line in open(log):
        hook, *args = json.loads(line)
        seen.setdefault(hook, []).append(tuple(view(a) if isinstance(a, dict) or a is None else a for a in args))
    return seen


# Ray 2.60's key orders (recorded): a trial's last_result before any result; a function's and a class's
# result, nested (trial.last_result, a callback's result) and flattened (the scheduler's and searcher's)
PRE = ("trial_id", "date", "timestamp", "pid", "hostname", "node_ip", "config")
FN = ("loss", "timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date",
      "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "config", "time_since_restore",
      "iterations_since_restore")
FN_TAGGED = (*FN, "experiment_tag")
FN_FLAT_X = ("loss", "timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date",
             "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "time_since_restore",
             "iterations_since_restore", "config/x")
FN_FLAT_X_TAGGED = ("loss", "timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id", "date",
                    "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "time_since_restore",
                    "iterations_since_restore", "experiment_tag", "config/x")
CLS = ("loss", "done", "training_iteration", "trial_id", "date", "timestamp", "time_this_iter_s", "time_total_s",
       "pid", "hostname", "node_ip", "config", "time_since_restore", "iterations_since_restore")
CLS_TAGGED = (*CLS, "experiment_tag")
CLS_FLAT_X = ("loss", "done", "training_iteration", "trial_id", "date", "timestamp", "time_this_iter_s",
              "time_total_s", "pid", "hostname", "node_ip", "time_since_restore", "iterations_since_restore",
              "config/x")
CLS_FLAT_X_TAGGED = ("loss", "done", "training_iteration", "trial_id", "date", "timestamp", "time_this_iter_s",
                     "time_total_s", "pid", "hostname", "node_ip", "time_since_restore", "iterations_since_restore",
                     "experiment_tag", "config/x")
X = {"x": 1}


def row(ti: int, loss: float, done: bool = False, tag: str | None = None, config: Any = None,
        since: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"training_iteration": ti, "loss": loss, "done": done,
                           "iterations_since_restore": since or ti}
    if tag is not None:
        out["experiment_tag"] = tag
    if config is not None:
        out["config"] = config
    return out


def test_a_schedulers_hooks_see_the_previous_result_and_the_tagged_last_one_as_ray_2_60(tmp_path: Path) -> None:
    seen = run(tmp_path, three)
    # recorded from Ray 2.60 (function trainable, a Searcher giving {"x": 1}, see the module docstring)
    assert seen["sched.result"] == [
        ((PRE, {"config": X}), (FN_FLAT_X, row(1, 0.0))),
        ((FN_TAGGED, row(1, 0.0, tag="1_x=1", config=X)), (FN_FLAT_X, row(2, 1.0))),
        ((FN_TAGGED, row(2, 1.0, tag="1_x=1", config=X)), (FN_FLAT_X, row(3, 2.0))),
    ]
    assert seen["sched.complete"] == [
        ((FN_TAGGED, row(3, 2.0, True, "1_x=1", X)), (FN_FLAT_X_TAGGED, row(3, 2.0, True, "1_x=1")))]
    assert seen["search.complete"] == [((FN_FLAT_X_TAGGED, row(3, 2.0, True, "1_x=1")), False)]
    # a callback's trial.last_result in the trial's first on_trial_result: the keys before any result
    assert [s[0] for s in seen["cb.result"]] == [
        (PRE, {"config": X}), (FN_TAGGED, row(1, 0.0, tag="1_x=1", config=X)),
        (FN_TAGGED, row(2, 1.0, tag="1_x=1", config=X))]


def test_a_class_trainables_hooks_see_what_rays_do(tmp_path: Path) -> None:
    seen = run(tmp_path, Three, stop={"training_iteration": 3})
    # recorded from Ray 2.60 (class trainable, stop={"training_iteration": 3}: the third result is the
    # stop criterion's, which the scheduler never sees)
    assert seen["sched.result"] == [
        ((PRE, {"config": X}), (CLS_FLAT_X, row(1, 1.0))),
        ((CLS_TAGGED, row(1, 1.0, tag="1_x=1", config=X)), (CLS_FLAT_X, row(2, 2.0))),
    ]
    assert seen["sched.complete"] == [
        ((CLS_TAGGED, row(3, 3.0, True, "1_x=1", X)), (CLS_FLAT_X_TAGGED, row(3, 3.0, True, "1_x=1")))]
    assert seen["search.complete"] == [((CLS_FLAT_X_TAGGED, row(3, 3.0, True, "1_x=1")), False)]
    assert [s[0] for s in seen["cb.result"]] == [
        (PRE, {"config": X}), (CLS_TAGGED, row(1, 1.0, tag="1_x=1", config=X)),
        (CLS_TAGGED, row(2, 2.0, tag="1_x=1", config=X))]


def test_a_trial_the_scheduler_stopped_completes_with_its_tagged_last_result(tmp_path: Path) -> None:
    seen = run(tmp_path, three, stop_at=2)
    # recorded from Ray 2.60: the result the scheduler stopped at says done=True
    assert seen["sched.complete"] == [
        ((FN_TAGGED, row(2, 1.0, True, "1_x=1", X)), (FN_FLAT_X_TAGGED, row(2, 1.0, True, "1_x=1")))]
    assert seen["search.complete"] == [((FN_FLAT_X_TAGGED, row(2, 1.0, True, "1_x=1")), False)]


@pytest.mark.parametrize("trainable", [three, Three])
def test_a_trial_in_error_completes_for_the_searcher_without_a_result(tmp_path: Path, trainable: Any) -> None:
    seen = run(tmp_path, trainable, {"fail": True}, failure_config=FailureConfig(max_failures=0))
    tag = "1_fail=True,x=1"
    # recorded from Ray 2.60: on_trial_complete(trial_id, result=None, error=True); the scheduler's
    # on_trial_error sees the last result, tagged
    assert seen["search.complete"] == [(None, True)]
    ((last, _),) = seen["sched.error"]
    assert last[0] == (FN_TAGGED if trainable is three else CLS_TAGGED)
    assert last[1]["experiment_tag"] == tag and last[1]["training_iteration"] == 2


FN_CK = ("loss", "timestamp", "checkpoint_dir_name", "should_checkpoint", "done", "training_iteration", "trial_id",
         "date", "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "config", "time_since_restore",
         "iterations_since_restore")
FN_CK_TAGGED = (*FN_CK, "experiment_tag")
FC = {"fail": True, "ckpt": True}
PC = {"ckpt": True}
F = {"fail": True}


def _last_results(seen: dict[str, list[Any]], hook: str) -> list[Any]:
    return [s[0] for s in seen[hook]]


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_retried_run_starts_from_its_checkpoints_result_untagged(tmp_path: Path, system: str) -> None:
    """Also where the scheduler decides each result with the trial itself (multiproc, no callback)."""
    seen = run(tmp_path, three, FC, system=system, callbacks=system == "simple", search=False,
               failure_config=FailureConfig(max_failures=1))
    # recorded from Ray 2.60 (the first run fails before its third result; the retry restores the
    # checkpoint of the second: Ray's Trial.on_restore sets last_result to that checkpoint's result)
    want = [(PRE, {"config": FC}), (FN_CK_TAGGED, row(1, 0.0, tag="0", config=FC)),
            (FN_CK, row(2, 1.0, config=FC))]
    assert _last_results(seen, "sched.result") == want
    assert [s[1][1]["training_iteration"] for s in seen["sched.result"]] == [1, 2, 3]
    assert _last_results(seen, "sched.error") == [(FN_CK_TAGGED, row(2, 1.0, tag="0", config=FC))]
    assert _last_results(seen, "sched.complete") == [(FN_CK_TAGGED, row(3, 2.0, True, "0", FC, since=1))]
    if system == "simple":
        assert _last_results(seen, "cb.result") == want


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_run_retried_from_an_older_checkpoint_starts_from_that_checkpoints_result(tmp_path: Path,
                                                                                    system: str) -> None:
    fco = {**FC, "first_only": True}
    seen = run(tmp_path, three, fco, system=system, callbacks=system == "simple", search=False,
               failure_config=FailureConfig(max_failures=1))
    # recorded from Ray 2.60 (a checkpoint with the first result only; the first run fails after its
    # second result; the retry restores the first result's checkpoint and reports iteration 2 again)
    want = [(PRE, {"config": fco}), (FN_CK_TAGGED, row(1, 0.0, tag="0", config=fco)),
            (FN_CK, row(1, 0.0, config=fco)), (FN_TAGGED, row(2, 1.0, tag="0", config=fco, since=1))]
    assert _last_results(seen, "sched.result") == want
    assert [s[1][1]["training_iteration"] for s in seen["sched.result"]] == [1, 2, 2, 3]
    assert _last_results(seen, "sched.error") == [(FN_TAGGED, row(2, 1.0, tag="0", config=fco))]
    if system == "simple":
        assert _last_results(seen, "cb.result") == want


def test_a_class_retried_from_an_older_checkpoint_frequency_save_starts_from_its_result(tmp_path: Path) -> None:
    f4 = {"fail4": True}
    seen = run(tmp_path, Three, f4, search=False, failure_config=FailureConfig(max_failures=1),
               checkpoint_config=CheckpointConfig(checkpoint_frequency=2), stop={"training_iteration": 5})
    # recorded from Ray 2.60 (saved every second iteration; the first run fails in its fourth step, after
    # its third result; the retry restores the save of the second; iteration 5 is the stop criterion's)
    want = [(PRE, {"config": f4}), (CLS_TAGGED, row(1, 1.0, tag="0", config=f4)),
            (CLS_TAGGED, row(2, 2.0, tag="0", config=f4)), (CLS, row(2, 2.0, config=f4)),
            (CLS_TAGGED, row(3, 3.0, tag="0", config=f4, since=1))]
    assert _last_results(seen, "sched.result") == want
    assert _last_results(seen, "cb.result") == [*want, (CLS_TAGGED, row(4, 4.0, tag="0", config=f4, since=2))]
    assert _last_results(seen, "sched.error") == [(CLS_TAGGED, row(3, 3.0, tag="0", config=f4))]


def test_a_retry_without_a_checkpoint_keeps_the_failed_runs_last_result(tmp_path: Path) -> None:
    seen = run(tmp_path, three, F, search=False, failure_config=FailureConfig(max_failures=1))
    # recorded from Ray 2.60: nothing restored, so last_result stays the failed run's (tagged)
    want = [(PRE, {"config": F})] + [(FN_TAGGED, row(ti, loss, tag="0", config=F)) for ti, loss in
                                     [(1, 0.0), (2, 1.0), (1, 0.0), (2, 1.0)]]
    assert _last_results(seen, "sched.result") == want
    assert _last_results(seen, "cb.result") == want


def test_a_resumed_pause_starts_from_its_checkpoints_result_untagged(tmp_path: Path) -> None:
    seen = run(tmp_path, three, PC, search=False, pause_at=2)
    # recorded from Ray 2.60 (paused at the second result, resumed from its checkpoint)
    want = [(PRE, {"config": PC}), (FN_CK_TAGGED, row(1, 0.0, tag="0", config=PC)),
            (FN_CK, row(2, 1.0, config=PC))]
    assert _last_results(seen, "sched.result") == want
    assert _last_results(seen, "cb.result") == want
    assert [s[1][1]["iterations_since_restore"] for s in seen["sched.result"]] == [1, 2, 1]


def test_the_host_takes_a_restored_runs_start_from_the_snapshot_when_its_batch_moved_the_trial_on() -> None:
    """The controller's update for a restarted trial may already hold the run's first result (its batch
    carried a checkpoint); the run's start (``TrialSnapshot.run_start``) still says what Ray's
    ``last_result`` was: the restored checkpoint's result, untagged (as recorded above)."""
    from actors._engine.scheduler_host import SchedulerHost
    from actors._engine.trial import TrialSnapshot, TrialStatus
    from actors.messages import HookKind, SchedulerCall

    log: list[Any] = []

    class Seeing(FIFOScheduler):
        def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
            log.append(view(trial.last_result))
            return self.CONTINUE

    def res(ti: int, since: int) -> dict[str, Any]:
        return {"loss": float(ti), "training_iteration": ti, "config": X, "iterations_since_restore": since}

    host = SchedulerHost(Seeing(), "loss", "min")
    snap = TrialSnapshot("t", dict(X), TrialStatus.RUNNING, experiment_tag="0_x=1")
    host.handle(SchedulerCall(1, HookKind.ADD, "t", (), (snap,)))
    host.handle(SchedulerCall(2, HookKind.RESULT, "t", (res(1, 1), res(2, 2), res(3, 3))))
    paused = TrialSnapshot("t", dict(X), TrialStatus.PAUSED, res(3, 3), experiment_tag="0_x=1")
    host.handle(SchedulerCall(3, HookKind.ADD, "t", (), (paused,)))
    restarted = TrialSnapshot("t", dict(X), TrialStatus.RUNNING, res(2, 1), experiment_tag="0_x=1",
                              run_start=res(1, 1))
    host.handle(SchedulerCall(4, HookKind.RESULT, "t", (res(2, 1),), (restarted,)))
    keys = ("loss", "training_iteration", "config", "iterations_since_restore")
    assert log == [
        (("trial_id", "config"), {"config": X}),  # no process keys known here: Ray's id and config
        ((*keys, "experiment_tag"), {"training_iteration": 1, "loss": 1.0, "iterations_since_restore": 1,
                                     "experiment_tag": "0_x=1", "config": X}),
        ((*keys, "experiment_tag"), {"training_iteration": 2, "loss": 2.0, "iterations_since_restore": 2,
                                     "experiment_tag": "0_x=1", "config": X}),
        (keys, {"training_iteration": 1, "loss": 1.0, "iterations_since_restore": 1, "config": X}),
    ]


def slow_first(config: dict[str, Any]) -> None:
    time.sleep(1.2)  # the work before the first result (no waiting on an event: this is the trainable)
    tune.report({"loss": 1.0})


class Stamps(FIFOScheduler):
    def __init__(self, log: str) -> None:
        super().__init__()
        self.log = log

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        _write(self.log, "sched", trial.last_result.get("timestamp"), result["timestamp"])
        return self.CONTINUE


class CallbackStamps(Callback):
    def __init__(self, log: str) -> None:
        self.log = log

    def on_trial_result(self, trial: Any, result: dict[str, Any], **info: Any) -> None:
        _write(self.log, "cb", trial.last_result.get("timestamp"), result["timestamp"])


def test_the_keys_before_the_first_result_are_taken_when_the_trainable_started(tmp_path: Path) -> None:
    log = str(tmp_path / "stamps.jsonl")
    Tuner(slow_first, tune_config=TuneConfig(scheduler=Stamps(log)),
          run_config=RunConfig(name="stamps", storage=str(tmp_path / "results"), verbose=0, system="simple",
                               callbacks=[CallbackStamps(log)])).fit()
    # recorded from Ray 2.60 (a function sleeping 2.2 s before its first report): in both hooks the first
    # result's timestamp is 3 s after trial.last_result's, which Ray took when the trainable was built
    seen = {hook: new - before for hook, before, new in (json.loads(line) for line in open(log))}
    assert seen.keys() == {"sched", "cb"} and min(seen.values()) >= 1, seen


class ViewRecorder(FIFOScheduler):
    """Writes what its on_trial_result sees of the trial (the plugin is copied into the run)."""

    def __init__(self, out: str) -> None:
        self.out = out

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        exp = os.path.join(os.path.dirname(self.out), "exp", "")
        with open(self.out, "a") as f:
            f.write(json.dumps({"name": str(trial).rsplit("_", 2)[0] + "_" + str(trial).rsplit("_", 1)[1],
                                "params": trial.evaluated_params, "tag": trial.experiment_tag,
                                "in_exp": bool(trial.path and trial.path.startswith(exp)),
                                "dir": os.path.basename(trial.path)[len(trial.trainable_name) + 7:][:13],
                                "local": trial.local_path == trial.path, "tn": trial.trainable_name}) + "\n")
        return super().on_trial_result(tune_controller, trial, result)


def reports_once(config: dict[str, Any]) -> None:
    tune.report({"x": 1})


def test_a_scheduler_sees_rays_trial_name_directory_and_evaluated_params(tmp_path: Path) -> None:
    """Recorded from Ray 2.60 with the same experiment: ``str(trial)`` is ``<trainable>_<id>``, ``path``
    the trial's directory in the experiment, ``evaluated_params`` the drawn values (they were "", None
    and None in a scheduler's hooks)."""
    out = str(tmp_path / "view.jsonl")
    Tuner(reports_once, param_space={"x": tune.grid_search([1, 2]), "y": tune.choice(["a"])},
          tune_config=TuneConfig(scheduler=ViewRecorder(out)),
          run_config=RunConfig(storage=str(tmp_path), name="exp", verbose=0, system="simple")).fit()
    seen = [json.loads(line) for line in open(out)]
    assert [{k: v for k, v in s.items() if k != "local"} for s in seen] == [
        {"name": "reports_once_00000", "params": {"y": "a", "x": 1}, "tag": "0_x=1,y=a", "in_exp": True,
         "dir": "00000_0_x=1,y", "tn": "reports_once"},
        {"name": "reports_once_00001", "params": {"y": "a", "x": 2}, "tag": "1_x=2,y=a", "in_exp": True,
         "dir": "00001_1_x=2,y", "tn": "reports_once"}]
    assert all(s["local"] for s in seen)  # (Ray's local_path is its driver staging directory: docs)


class CheckpointSeen(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.seen.append((result["training_iteration"], trial.has_checkpoint(), trial.node_ip == result["node_ip"],
                          trial.node_ip is None))

    def on_trial_complete(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        self.seen.append(("complete", trial.has_checkpoint()))


class CheckpointSeenByScheduler(FIFOScheduler):
    def __init__(self, out: str) -> None:
        self.out = out

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        with open(self.out, "a") as f:
            f.write(json.dumps([result["training_iteration"], trial.has_checkpoint(),
                                trial.node_ip == result["node_ip"]]) + "\n")
        return super().on_trial_result(tune_controller, trial, result)


def checkpoint_at_two(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"x": i}, checkpoint=Checkpoint.from_dict({"i": i}) if i == 1 else None)


def test_has_checkpoint_and_node_ip_in_the_hooks_as_in_ray(tmp_path: Path) -> None:
    """Recorded from Ray 2.60: a result's own checkpoint is held only after its hooks ran, and
    ``node_ip`` is None until the first result's hooks ran (Ray learns the location from it)."""
    cb, out = CheckpointSeen(), str(tmp_path / "sched.jsonl")
    Tuner(checkpoint_at_two, tune_config=TuneConfig(scheduler=CheckpointSeenByScheduler(out)),
          run_config=RunConfig(storage=str(tmp_path), verbose=0, system="simple", callbacks=[cb])).fit()
    assert cb.seen == [(1, False, False, True), (2, False, True, False), (3, True, True, False), ("complete", True)]
    assert [json.loads(line) for line in open(out)] == [[1, False, False], [2, False, True], [3, True, True]]


class LiveTrials(FIFOScheduler):
    def __init__(self, out: str) -> None:
        self.out = out

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        live = tune_controller.get_live_trials()
        with open(self.out, "a") as f:
            f.write(json.dumps([trial.config["x"], type(live).__name__, sorted(str(t.status) for t in live)]) + "\n")
        return super().on_trial_result(tune_controller, trial, result)


def two_reports(config: dict[str, Any]) -> None:
    for i in range(2):
        tune.report({"i": i})


def test_get_live_trials_as_in_ray(tmp_path: Path) -> None:
    """Ray's tune_controller.get_live_trials(), used by Ray's own schedulers: recorded from Ray 2.60 with
    the same experiment, a set of the trials not ended (here the one running: the others are not created
    yet or have finished)."""
    out = str(tmp_path / "live.jsonl")
    Tuner(two_reports, param_space={"x": tune.grid_search([1, 2, 3])},
          tune_config=TuneConfig(scheduler=LiveTrials(out), max_concurrent_trials=1),
          run_config=RunConfig(storage=str(tmp_path), verbose=0, system="simple")).fit()
    assert [json.loads(line) for line in open(out)] == [[x, "set", ["RUNNING"]] for x in (1, 1, 2, 2, 3, 3)]


class CountingScheduler(FIFOScheduler):
    def __init__(self) -> None:
        super().__init__()
        self.results = 0
        self.completed: list[int] = []

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        self.results += 1
        return super().on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        self.completed.append(trial.config["x"])


def three_losses(config: dict[str, Any]) -> None:
    for i in range(3):
        tune.report({"loss": config["x"] * (3 - i)})


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_the_scripts_scheduler_holds_what_the_run_taught_it_after_fit(system: str, tmp_path: Path,
                                                                      no_leaks: Any) -> None:
    """Recorded from Ray 2.60, which runs the very object in the driver: after fit() it has seen the 9
    results and the 3 completions. audition runs a copy and hands its final state back."""
    sched = CountingScheduler()
    Tuner(three_losses, param_space={"x": tune.grid_search([1, 2, 3])}, tune_config=TuneConfig(scheduler=sched),
          run_config=RunConfig(storage=str(tmp_path), verbose=0, system=system)).fit()
    assert (sched.results, sorted(sched.completed)) == (9, [1, 2, 3])


class CountingStopper(tune.Stopper):
    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.seen += 1
        return False

    def stop_all(self) -> bool:
        return False

    def save(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def restore(self, state: dict[str, Any]) -> None:
        self.seen = state["seen"]


class ThreeSteps(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"loss": self.i, "done": self.i >= 3}


def test_the_scripts_stopper_holds_its_final_saved_state_after_fit(tmp_path: Path) -> None:
    """Recorded from Ray 2.60 with this class trainable: the stopper object was called 9 times. audition's
    copy's final save() is handed back (a stopper without save() keeps no state to hand back)."""
    stopper = CountingStopper()
    Tuner(ThreeSteps, param_space={"x": tune.grid_search([1, 2, 3])},
          run_config=RunConfig(storage=str(tmp_path), verbose=0, system="simple", stop=stopper)).fit()
    assert stopper.seen == 9


class ErrorFileSeen(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, bool, str]] = []
        self.texts: list[str | None] = []  # trial.get_error() in each hook

    def on_trial_error(self, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        path = trial.error_file
        self.seen.append((os.path.basename(path), os.path.exists(path), open(path).read().splitlines()[0]))
        self.texts.append(trial.get_error())

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.seen.append(("result", trial.error_file is None, ""))  # (a hook's own exception is only logged)
        self.texts.append(trial.get_error())


def fails_after_one(config: dict[str, Any]) -> None:
    tune.report({"x": 1})
    raise ValueError("bad x")


def test_a_callback_finds_the_failed_trials_error_file_as_in_ray(tmp_path: Path) -> None:
    """Recorded from Ray 2.60: in on_trial_error, trial.error_file is an existing error.txt (Ray's in its
    driver's staging directory; audition's in the trial's directory) and trial.get_error() its text; None for
    a trial not in ERROR."""
    from actors._engine.trial import ERROR_FILE
    from storage._layout import ERROR_NAME

    assert ERROR_FILE == ERROR_NAME  # (the core's copy of storage's name)
    cb = ErrorFileSeen()
    Tuner(fails_after_one, run_config=RunConfig(storage=str(tmp_path), verbose=0, system="simple",
                                                callbacks=[cb])).fit()
    assert cb.seen == [("result", True, ""), ("error.txt", True, "ValueError: bad x")]
    # Ray's get_error(): the error file's text (audition's: the error and its traceback), None without one
    assert cb.texts[0] is None and cb.texts[1] is not None
    assert cb.texts[1].startswith("ValueError: bad x") and 'raise ValueError("bad x")' in cb.texts[1]
