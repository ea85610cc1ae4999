"""What Ray Tune 2.60 hands callbacks (recorded with Ray in its own virtualenv, see
/work/shared/notes/ray-fidelity.md): hooks called by keyword; ``on_checkpoint``'s ``checkpoint`` a
``Checkpoint`` object, with ``trial.checkpoint`` still the previous one during the call; results'
``timestamp`` in whole seconds and ``should_checkpoint: True`` on a function result that carried a
checkpoint; and after ``Tuner.restore`` the trials carry the checkpoint they resume from."""

from __future__ import annotations

import os
import shutil
from typing import Any

from actors import Callback, Checkpoint, RunConfig, Trainable, Tuner, get_checkpoint, report
from actors._driver.checkpoint import committed_at
from actors.schedulers import FIFOScheduler
from actors.search import BasicVariantGenerator


def saves_twice(config: dict[str, Any]) -> None:
    """Two checkpointed results; the first run then fails, a resumed one ends."""
    ck = get_checkpoint()
    start = ck.to_dict()["i"] + 1 if ck else 0
    for i in range(start, start + 2):
        report({"m": i, "timestamp": 5}, checkpoint=Checkpoint.from_dict({"i": i}))
    report({"m": -1})  # no checkpoint
    if ck is None:
        raise RuntimeError("planned failure")


def _path(trial: Any) -> str | None:
    return None if trial.checkpoint is None else os.path.basename(trial.checkpoint.path.rstrip("/"))


class RayStyle(Callback):
    """Hooks written as Ray users write them: only the names they use, by keyword, and ``**info``."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def on_trial_start(self, trial: Any, **info: Any) -> None:
        self.seen.append(("start", _path(trial)))

    def on_trial_result(self, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.seen.append(("result", _path(trial), result["timestamp"], result.get("should_checkpoint")))

    def on_checkpoint(self, trial: Any, checkpoint: Any, **info: Any) -> None:
        assert isinstance(checkpoint, Checkpoint), type(checkpoint)
        self.seen.append(("checkpoint", os.path.basename(checkpoint.path), checkpoint.to_dict()["i"], _path(trial)))

    def on_trial_save(self, trial: Any, **info: Any) -> None:
        self.seen.append(("save", _path(trial)))

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        self.seen.append(("end", [_path(t) for t in trials]))


def test_callbacks_get_what_ray_hands_them(storage_dir) -> None:
    cb = RayStyle()
    grid = Tuner(saves_twice, run_config=RunConfig(name="cbs", storage=storage_dir, verbose=0, callbacks=[cb],
                                                   system="simple")).fit()
    assert grid.num_errors == 1
    results = [s for s in cb.seen if s[0] == "result"]
    assert all(type(s[2]) is int and s[2] != 5 for s in results)  # Ray: int(now), the function API's own
    assert [s[3] for s in results] == [True, True, None]  # FunctionTrainable.step's should_checkpoint
    assert [s for s in cb.seen if s[0] != "result"] == [
        ("start", None),
        ("checkpoint", "checkpoint_000000", 0, None),  # Ray: trial.checkpoint is still the previous one
        ("save", "checkpoint_000000"),  # Ray's _on_saving_result: on_trial_save once the trial holds it
        ("checkpoint", "checkpoint_000001", 1, "checkpoint_000000"),
        ("save", "checkpoint_000001"),
        ("end", ["checkpoint_000001"]),
    ]
    assert [s[1] for s in results] == [None, "checkpoint_000000", "checkpoint_000001"]


class Stamped(Trainable):
    def step(self) -> dict[str, Any]:
        return {"timestamp": 5, "time_this_iter_s": 2.5, "done": self.iteration >= 1}


class Results(Callback):
    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any], **info: Any) -> None:
        self.results.append(result)


def test_class_results_keep_their_timestamp_and_time_this_iter_s(storage_dir) -> None:
    """Ray's ``Trainable.train``: a step()'s own truthy timestamp stays, and its time_this_iter_s is the
    one counted into time_total_s."""
    cb = Results()
    Tuner(Stamped, run_config=RunConfig(name="stamped", storage=storage_dir, verbose=0, callbacks=[cb],
                                        system="simple")).fit()
    assert [(r["timestamp"], r["time_this_iter_s"], r["time_total_s"]) for r in cb.results] == [
        (5, 2.5, 2.5), (5, 2.5, 5.0)]
    assert "should_checkpoint" not in cb.results[0]
def test_restored_trials_carry_the_checkpoint_they_resume_from(storage_dir) -> None:
    first = Tuner(saves_twice, run_config=RunConfig(name="rs", storage=storage_dir, verbose=0,
                                                    system="simple")).fit()
    cb = RayStyle()
    grid = Tuner.restore(first.experiment_path, saves_twice, resume_errored=True, callbacks=[cb]).fit()
    assert grid.num_errors == 0 and grid[0].metrics["m"] == -1
    assert cb.seen[:2] == [("start", "checkpoint_000001"), ("result", "checkpoint_000001", cb.seen[1][2], True)]
    assert ("checkpoint", "checkpoint_000002", 2, "checkpoint_000001") in cb.seen
    assert cb.seen[-1] == ("end", ["checkpoint_000003"])


def test_a_restored_trial_whose_saved_checkpoint_is_gone_carries_the_one_it_resumes_from(storage_dir) -> None:
    """Storage, not the saved state, decides: the state's checkpoint deleted, the trial resumes from
    the older one, and that is the one its trial object carries."""
    first = Tuner(saves_twice, run_config=RunConfig(name="gone", storage=storage_dir, verbose=0,
                                                    system="simple")).fit()
    found = [committed_at(first[0].path, {}, it) for it in (1, 2, 7)]  # by the iteration it was saved at
    assert [f and os.path.basename(f) for f in found] == ["checkpoint_000000", "checkpoint_000001", None]
    shutil.rmtree(os.path.join(first[0].path, "checkpoint_000001"))
    cb = RayStyle()
    Tuner.restore(first.experiment_path, saves_twice, resume_errored=True, callbacks=[cb]).fit()
    assert cb.seen[0] == ("start", "checkpoint_000000")


class _RayHooks(Callback):
    """The Ray Tune hooks beyond the trial's start, results and end."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def setup(self, stop: Any = None, num_samples: Any = None, total_num_samples: Any = None, **info: Any) -> None:
        self.seen.append(("setup", stop, num_samples, total_num_samples, sorted(info.items())))

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.seen.append("step_begin")

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.seen.append("step_end")

    def on_trial_start(self, trial: Any, **info: Any) -> None:
        self.seen.append(("start", trial.num_failures))

    def on_trial_recover(self, trial: Any, **info: Any) -> None:
        self.seen.append(("recover", str(trial.status), trial.num_failures))

    def on_trial_complete(self, trial: Any, **info: Any) -> None:
        self.seen.append(("complete", trial.num_failures))


def fails_once(config: dict[str, Any]) -> None:
    for i in range(2):
        report({"m": i})
    marker = os.path.join(config["dir"], "failed")
    if config["x"] == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("once")


def test_setup_step_and_recover_hooks_are_called_as_ray_calls_them(storage_dir, tmp_path) -> None:
    """Recorded with Ray Tune 2.60 (the same experiment with a one-value grid, num_samples=2,
    time_budget_s=600, stop={"training_iteration": 5}, max_failures=1, one trial failing once):
    ``setup(stop={"training_iteration": 5}, num_samples=2, total_num_samples=2, time_budget_s=600)``
    first; ``on_trial_recover`` once, with the trial PENDING and num_failures=1, after the failed
    run's results and before its retry starts; ``on_step_begin``/``on_step_end`` in pairs around
    everything else (Ray: every step of its loop; here around each batch of events)."""
    from actors import FailureConfig, TuneConfig, search

    cb = _RayHooks()
    grid = Tuner(fails_once, param_space={"x": search.grid_search([1, 2]), "dir": str(tmp_path)},
                 tune_config=TuneConfig(num_samples=1, time_budget_s=600, max_concurrent_trials=1),
                 run_config=RunConfig(name="hooks", storage=storage_dir, verbose=0, callbacks=[cb],
                                      system="simple", stop={"training_iteration": 5},
                                      failure_config=FailureConfig(max_failures=1))).fit()
    assert grid.num_errors == 0
    assert cb.seen[0] == ("setup", {"training_iteration": 5}, 1, 2, [("time_budget_s", 600)])
    hooks = [s for s in cb.seen[1:] if s not in ("step_begin", "step_end")]
    assert hooks == [("start", 0), ("recover", "PENDING", 1), ("start", 0), ("complete", 0),
                     ("start", 1), ("complete", 1)] or hooks == [
        ("start", 0), ("recover", "PENDING", 1), ("start", 1), ("complete", 1), ("start", 0), ("complete", 0)]
    steps = [s for s in cb.seen[1:] if s in ("step_begin", "step_end")]
    assert steps and steps == ["step_begin", "step_end"] * (len(steps) // 2)
    # every hook but setup runs inside a step
    depth = 0
    for s in cb.seen[1:]:
        depth += 1 if s == "step_begin" else -1 if s == "step_end" else 0
        assert depth in (0, 1) and (depth == 1 or s in ("step_begin", "step_end")), cb.seen


def test_setup_gets_no_stop_dict_for_a_stopper_object(storage_dir) -> None:
    """Ray's Experiment.public_spec carries only a dict ``stop``; a Stopper object gives ``{}``."""
    from actors.stopper import MaximumIterationStopper

    cb = _RayHooks()
    Tuner(saves_twice, run_config=RunConfig(name="stopobj", storage=storage_dir, verbose=0, callbacks=[cb],
                                            system="simple", stop=MaximumIterationStopper(1))).fit()
    assert cb.seen[0] == ("setup", {}, 1, 1, [("time_budget_s", None)])


def test_a_driver_side_logger_gets_setup_only_if_it_overrides_it(storage_dir) -> None:
    """A Ray Tune LoggerCallback may override Callback.setup; audition's own loggers' setup is the
    controller-side one, never called with Ray's arguments."""
    from actors import LoggerCallback

    class RayLogger(LoggerCallback):
        def __init__(self) -> None:
            self.args: list[Any] = []

        def setup(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
            self.args.append((args, sorted(kwargs)))

    class Plain(LoggerCallback):
        pass

    ray_logger, plain = RayLogger(), Plain()
    Tuner(saves_twice, run_config=RunConfig(name="loggers", storage=storage_dir, verbose=0, system="simple",
                                            callbacks=[ray_logger, plain])).fit()
    assert ray_logger.args == [((), ["num_samples", "stop", "time_budget_s", "total_num_samples"])]


def test_a_driver_side_logger_gets_log_trial_save(storage_dir) -> None:
    """Ray's ``LoggerCallback.on_trial_save`` calls ``log_trial_save(trial)``: a logger written for Ray
    that records checkpoints there sees each one, the trial already holding it."""
    from actors import LoggerCallback

    class Saves(LoggerCallback):
        def __init__(self) -> None:
            self.saved: list[str | None] = []

        def log_trial_save(self, trial: Any) -> None:
            self.saved.append(_path(trial))

    logger = Saves()
    Tuner(saves_twice, run_config=RunConfig(name="log", storage=storage_dir, verbose=0, callbacks=[logger],
                                            system="simple")).fit()
    assert logger.saved == ["checkpoint_000000", "checkpoint_000001"]


class _Statuses(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def on_trial_start(self, trial: Any, trials: list[Any], **info: Any) -> None:
        self.seen.append(("start", trial.config["k"], str(trial.status)))

    def on_trial_result(self, trial: Any, trials: list[Any], **info: Any) -> None:
        self.seen.append(("result", trial.config["k"], str(trial.status)))

    def on_trial_complete(self, trial: Any, trials: list[Any], **info: Any) -> None:
        listed = [t for t in trials if t.trial_id == trial.trial_id]
        assert [t.status for t in listed] == [trial.status]  # the list holds the trial as the hook sees it
        self.seen.append(("complete", trial.config["k"], str(trial.status)))

    def on_trial_error(self, trial: Any, trials: list[Any], **info: Any) -> None:
        self.seen.append(("error", trial.config["k"], str(trial.status)))


def ok_err_stop(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"v": i})
        if config["k"] == "err" and i == 1:
            raise RuntimeError("x")


def test_the_trial_status_each_hook_sees_is_rays(storage_dir) -> None:
    """Recorded from Ray Tune 2.60 (the same experiment, one trial at a time): ``on_trial_start``
    sees the trial PENDING (Ray sets RUNNING after the hook), ``on_trial_complete`` RUNNING (Ray sets
    TERMINATED after it), ``on_trial_error`` ERROR."""
    from actors import TuneConfig, search

    cb = _Statuses()
    Tuner(ok_err_stop, param_space={"k": search.grid_search(["ok", "err", "stop"])},
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(name="statuses", storage=storage_dir, verbose=0, callbacks=[cb], system="simple",
                               stop=lambda tid, r: r["config"]["k"] == "stop" and r["training_iteration"] >= 2)).fit()
    P, R = "PENDING", "RUNNING"
    assert cb.seen == [("start", "ok", P), ("result", "ok", R), ("result", "ok", R), ("result", "ok", R),
                       ("complete", "ok", R), ("start", "err", P), ("result", "err", R), ("result", "err", R),
                       ("error", "err", "ERROR"), ("start", "stop", P), ("result", "stop", R),
                       ("result", "stop", R), ("complete", "stop", R)]


HOOKS: list[tuple[str, int]] = []  # scheduler hooks and callback hooks, in order (system="simple")


class _RecordingFIFO(FIFOScheduler):
    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        HOOKS.append(("add", trial.config["k"]))

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        HOOKS.append(("error", trial.config["k"]))

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        HOOKS.append(("complete", trial.config["k"]))


class _StartsAndRecovers(Callback):
    def on_trial_start(self, trial: Any, **info: Any) -> None:
        HOOKS.append(("start", trial.config["k"]))

    def on_trial_recover(self, trial: Any, **info: Any) -> None:
        HOOKS.append(("recover", trial.config["k"]))


def k0_fails_once(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"v": i})
        marker = os.path.join(config["dir"], "failed")
        if config["k"] == 0 and i == 1 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("once")


def test_a_retried_trial_is_requeued_as_ray_requeues_it(storage_dir, tmp_path) -> None:
    """Recorded from Ray Tune 2.60 (one trial at a time, k=0 fails once, max_failures=1): the
    scheduler hears on_trial_error then on_trial_add again before on_trial_recover; the retry runs
    after the trials already waiting, and the grid lists it last."""
    from actors import FailureConfig, TuneConfig, search, with_resources
    from actors._driver.config import default_cpus

    HOOKS.clear()
    grid = Tuner(with_resources(k0_fails_once, {"cpu": default_cpus()}),
                 param_space={"k": search.grid_search([0, 1, 2]), "dir": str(tmp_path)},
                 tune_config=TuneConfig(scheduler=_RecordingFIFO()),
                 run_config=RunConfig(name="requeue", storage=storage_dir, verbose=0, system="simple",
                                      callbacks=[_StartsAndRecovers()],
                                      failure_config=FailureConfig(max_failures=1))).fit()
    ray = [("add", 0), ("add", 1), ("add", 2), ("start", 0), ("error", 0), ("add", 0), ("recover", 0),
           ("start", 1), ("complete", 1), ("start", 2), ("complete", 2), ("start", 0), ("complete", 0)]
    # the scheduler and the driver's callbacks are two actors here: each one's order is Ray's
    callbacks = ("start", "recover")
    assert [h for h in HOOKS if h[0] not in callbacks] == [h for h in ray if h[0] not in callbacks]
    assert [h for h in HOOKS if h[0] in callbacks] == [h for h in ray if h[0] in callbacks]
    assert [r.config["k"] for r in grid] == [1, 2, 0] and grid.num_errors == 0


SEARCHER_HEARD: list[tuple[str, Any]] = []


class _StopsTheWaiting(FIFOScheduler):
    """On the first trial's first result, stops every trial still waiting to run."""

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        for t in tune_controller.get_trials():
            if str(t.status) == "PENDING":
                tune_controller.stop_trial(t)
        return super().on_trial_result(tune_controller, trial, result)


class _RecordingGenerator(BasicVariantGenerator):
    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        SEARCHER_HEARD.append((trial_id[-1], None if result is None else result.get("v")))
        super().on_trial_complete(trial_id, result, error)


def test_a_trial_stopped_while_waiting_is_complete_for_the_searcher(storage_dir) -> None:
    """Ray 2.60's TuneController.stop_trial: a PENDING or PAUSED trial gets the scheduler's
    on_trial_remove and the searcher's on_trial_complete(trial_id) with no result (a generator capped
    by max_concurrent_trials otherwise counts it live for good)."""
    from actors import TuneConfig, search, with_resources
    from actors._driver.config import default_cpus

    SEARCHER_HEARD.clear()
    grid = Tuner(with_resources(k0_fails_once, {"cpu": default_cpus()}),
                 param_space={"dir": storage_dir, "k": search.grid_search([1, 2, 3])},
                 tune_config=TuneConfig(scheduler=_StopsTheWaiting(), search_alg=_RecordingGenerator()),
                 run_config=RunConfig(name="removed", storage=storage_dir, verbose=0, system="simple")).fit()
    assert len(grid) == 3 and grid.num_terminated == 3
    assert sorted(SEARCHER_HEARD) == [("0", 2), ("1", None), ("2", None)]


class _EveryTrialHook(Callback):
    """Every per-trial hook Ray Tune has, on_trial_restore included, by name and the status seen."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def _note(self, hook: str, trial: Any) -> None:
        self.seen.append((hook, str(trial.status)))

    def on_trial_start(self, trial: Any, **info: Any) -> None:
        self._note("start", trial)

    def on_trial_restore(self, trial: Any, **info: Any) -> None:
        self._note("restore", trial)

    def on_trial_result(self, trial: Any, **info: Any) -> None:
        self._note("result", trial)

    def on_checkpoint(self, trial: Any, **info: Any) -> None:
        self._note("checkpoint", trial)

    def on_trial_save(self, trial: Any, **info: Any) -> None:
        self._note("save", trial)

    def on_trial_recover(self, trial: Any, **info: Any) -> None:
        self._note("recover", trial)

    def on_trial_complete(self, trial: Any, **info: Any) -> None:
        self._note("complete", trial)

    def on_trial_error(self, trial: Any, **info: Any) -> None:
        self._note("error", trial)


def four_checkpoints(config: dict[str, Any]) -> None:
    """Reports 1..4, each with a checkpoint; fails before the third once (``config["marker"]``), or
    every time while ``config["always"]`` exists. A resumed run continues after its checkpoint."""
    ck = get_checkpoint()
    start = ck.to_dict()["i"] if ck else 0
    for i in range(start + 1, 5):
        if i == 3 and "marker" in config and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            raise RuntimeError("planned failure")
        if i == 3 and os.path.exists(config.get("always", "/nonexistent")):
            raise RuntimeError("planned failure, every run")
        report({"score": i}, checkpoint=Checkpoint.from_dict({"i": i}))


class _PauseOnce(FIFOScheduler):
    """PAUSE at the second result, once (as the Ray recording's scheduler returned it)."""

    def __init__(self) -> None:
        self.paused = False

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        from actors.schedulers import Decision

        if result["training_iteration"] == 2 and not self.paused:
            self.paused = True
            return Decision.PAUSE
        return Decision.CONTINUE


# recorded from Ray 2.60 (the same trainable with Checkpoint.from_directory, one trial, a callback
# overriding every hook; /work/rayvenv): on_trial_restore is never called, a run from a checkpoint
# starts with on_trial_start (the trial PENDING) as every run does
_RUN = [("start", "PENDING"), *[("result", "RUNNING"), ("checkpoint", "RUNNING"), ("save", "RUNNING")] * 2]
_RUN_ON = [*[("result", "RUNNING"), ("checkpoint", "RUNNING"), ("save", "RUNNING")] * 2]
RAY_RETRY = [*_RUN, ("recover", "PENDING"), ("start", "PENDING"), *_RUN_ON, ("complete", "RUNNING")]
RAY_PAUSE = [*_RUN, ("start", "PENDING"), *_RUN_ON, ("complete", "RUNNING")]
RAY_RESTORED = [("start", "PENDING"), *_RUN_ON, ("complete", "RUNNING")]  # Tuner.restore(resume_errored=True)


def test_on_trial_restore_is_never_called_as_in_ray(storage_dir, tmp_path) -> None:
    from actors import FailureConfig, TuneConfig

    cb = _EveryTrialHook()
    Tuner(four_checkpoints, param_space={"marker": str(tmp_path / "m")}, run_config=RunConfig(
        name="retry", storage=storage_dir, verbose=0, callbacks=[cb], system="simple",
        failure_config=FailureConfig(max_failures=1))).fit()
    assert cb.seen == RAY_RETRY
    cb = _EveryTrialHook()
    Tuner(four_checkpoints, tune_config=TuneConfig(scheduler=_PauseOnce()), run_config=RunConfig(
        name="pause", storage=storage_dir, verbose=0, callbacks=[cb], system="simple")).fit()
    assert cb.seen == RAY_PAUSE  # (paused at a result that brought a checkpoint: Ray saves no more)
    always = tmp_path / "always"
    always.touch()
    first = Tuner(four_checkpoints, param_space={"always": str(always)}, run_config=RunConfig(
        name="restored", storage=storage_dir, verbose=0, system="simple")).fit()
    assert first.num_errors == 1
    always.unlink()
    cb = _EveryTrialHook()
    Tuner.restore(first.experiment_path, four_checkpoints, resume_errored=True, callbacks=[cb]).fit()
    assert cb.seen == RAY_RESTORED


# ---------------------------------------------------------------- the save a pause makes, as callbacks see it
class _SavesSeen(_EveryTrialHook):
    """As its base, but a result by its iteration and a checkpoint by its directory's name."""

    def on_trial_result(self, trial: Any, result: dict[str, Any], **info: Any) -> None:  # type: ignore[override]
        self.seen.append(("result", result["training_iteration"]))  # type: ignore[arg-type]

    def on_checkpoint(self, trial: Any, checkpoint: Any, **info: Any) -> None:  # type: ignore[override]
        self.seen.append(("checkpoint", os.path.basename(checkpoint.path.rstrip("/"))))


def checkpoint_at_first(config: dict[str, Any]) -> None:
    ck = get_checkpoint()
    for i in range(ck.to_dict()["i"] + 1 if ck else 1, 5):
        report({"score": i}, checkpoint=Checkpoint.from_dict({"i": i}) if i == 1 else None)


class Counter(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.i = 0

    def step(self) -> dict[str, Any]:
        self.i += 1
        return {"score": self.i, "done": self.i >= 4}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"i": self.i}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.i = checkpoint["i"]


def test_a_pause_saves_as_ray_saves(storage_dir: str) -> None:
    """Recorded from Ray 2.60 (a scheduler PAUSEs the trial at its second result, once; a callback
    overriding each hook): a function whose latest checkpoint came with an earlier result gets
    on_trial_save alone (the save gives no new checkpoint), and resumes from that checkpoint; a class
    is saved once at the pause (on_checkpoint, on_trial_save) and once at its end, every save seen on a
    RUNNING trial, the end one before on_trial_complete. audition announced the function's old checkpoint
    again, and saved the class twice at the pause (its end checkpoint taken at the pause's stop)."""
    from actors import TuneConfig

    ray_fn = [("start", "PENDING"), ("result", 1), ("checkpoint", "checkpoint_000000"), ("save", "RUNNING"),
              ("result", 2), ("save", "RUNNING"), ("start", "PENDING"), ("result", 2), ("result", 3),
              ("result", 4), ("complete", "RUNNING")]
    ray_cls = [("start", "PENDING"), ("result", 1), ("result", 2), ("checkpoint", "checkpoint_000000"),
               ("save", "RUNNING"), ("start", "PENDING"), ("result", 3), ("result", 4),
               ("checkpoint", "checkpoint_000001"), ("save", "RUNNING"), ("complete", "RUNNING")]
    for trainable, ray in ((checkpoint_at_first, ray_fn), (Counter, ray_cls)):
        cb = _SavesSeen()
        grid = Tuner(trainable, tune_config=TuneConfig(scheduler=_PauseOnce()), run_config=RunConfig(
            name=trainable.__name__, storage=storage_dir, verbose=0, callbacks=[cb], system="simple")).fit()
        assert cb.seen == ray, trainable.__name__
        assert sorted(n for n in os.listdir(grid[0].path) if n.startswith("checkpoint_")) == sorted(
            {h[1] for h in ray if h[0] == "checkpoint"})


class _ReadsLogdir(Callback):
    """The custom logger of Ray's logging guide: ``os.path.join(trial.logdir, ...)`` in a hook."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        try:
            self.seen.append(trial.logdir)
        except DeprecationWarning as exc:
            self.seen.append(str(exc))


def _two_reports(config: dict[str, Any]) -> None:
    report({"m": 1})


def test_trial_logdir_raises_rays_deprecation_naming_local_path(tmp_path: Any) -> None:
    """Recorded from Ray 2.60: reading ``trial.logdir`` in a callback raises
    ``DeprecationWarning("Use `local_path` instead of `logdir`.")``."""
    cb = _ReadsLogdir()
    Tuner(_two_reports, run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0,
                                             callbacks=[cb])).fit()
    assert cb.seen == ["Use `local_path` instead of `logdir`."]


def three_reports(config: dict[str, Any]) -> None:
    for i in range(3):
        report({"x": i})


def test_a_driver_logger_whose_setup_calls_super_with_rays_arguments_works(storage_dir: str) -> None:
    """Ray's pattern, ``def setup(self, *args, **kwargs): super().setup(*args, **kwargs)``, in a
    ``LoggerCallback`` subclass: recorded from Ray 2.60, setup gets these keywords and every result is
    logged. (audition's base took the controller's (ctx, layout), so super() raised, the hook's error
    was logged, and the logger went on without what its setup set.)"""
    from actors import LoggerCallback

    class Collect(LoggerCallback):
        def setup(self, *args: Any, **kwargs: Any) -> None:
            super().setup(*args, **kwargs)
            self.keys = sorted(kwargs)
            self.rows: list[int] = []

        def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
            self.rows.append(result["x"])

    cb = Collect()
    Tuner(three_reports, run_config=RunConfig(storage=storage_dir, verbose=0, system="simple", callbacks=[cb])).fit()
    assert cb.keys == ["num_samples", "stop", "time_budget_s", "total_num_samples"]
    assert cb.rows == [0, 1, 2]
