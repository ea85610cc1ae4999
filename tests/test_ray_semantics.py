"""Ray Tune semantics a ported script relies on without saying so (issue 14, "silent differences").

Each test is a behaviour Ray Tune 2.60 has that audition once dropped silently: the numbers came
out different and nothing said why.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from actors import (
    Callback,
    Checkpoint,
    CheckpointConfig,
    FailureConfig,
    RunConfig,
    Trainable,
    TuneConfig,
    Tuner,
    report,
    with_resources,
)
from actors._driver.errors import ConfigError, TrialError
from actors.result import DEFAULT_METRIC, SHOULD_CHECKPOINT
from actors.schedulers import Decision, FIFOScheduler
from actors.search import ConcurrencyLimiter, Searcher, SearcherSignal, grid_search
from tests._trainables import PauseOnce


def _fit(trainable: Any, storage: str, **kw: Any) -> Any:
    param_space = kw.pop("param_space", {})
    return Tuner(trainable, param_space=param_space, tune_config=kw.pop("tune_config", None),
                 run_config=RunConfig(storage=storage, system=kw.pop("system", "simple"), verbose=0, **kw)).fit()


def _rows(result: Any, *keys: str) -> list[dict[str, Any]]:
    return [{k: h[k] for k in keys if k in h} for h in result.metrics_history]


# ---------------------------------------------------------------- 1. a function trainable's return value
def reports_then_returns_dict(config: dict[str, Any]) -> dict[str, Any]:
    report({"score": 1})
    return {"score": 2, "final": True}


def returns_number(config: dict[str, Any]) -> float:
    return config["x"] * 2


def yields_results(config: dict[str, Any]) -> Any:
    for i in range(3):
        yield {"score": i}
    yield 7.5  # a yielded number is reported as _metric


def returns_nothing_reportable(config: dict[str, Any]) -> Any:
    report({"score": 1})
    return 0  # falsy: Ray reports nothing more


def returns_a_string(config: dict[str, Any]) -> str:
    return "not a metric"


def test_returned_dict_is_one_more_result(storage_dir) -> None:
    [r] = _fit(reports_then_returns_dict, storage_dir)
    assert _rows(r, "score", "final", "training_iteration", "done") == [
        {"score": 1, "training_iteration": 1, "done": False},
        {"score": 2, "final": True, "training_iteration": 2, "done": False}]
    assert r.metrics["score"] == 2 and r.metrics["final"] is True and r.metrics["done"] is True


def test_returned_number_is_reported_as_metric(storage_dir) -> None:
    grid = _fit(returns_number, storage_dir, param_space={"x": grid_search([1.5, 3.0])},
                tune_config=TuneConfig(metric=DEFAULT_METRIC, mode="max"))
    assert sorted(r.metrics[DEFAULT_METRIC] for r in grid) == [3.0, 6.0]
    assert all(r.metrics["training_iteration"] == 1 for r in grid)
    assert grid.get_best_result().config == {"x": 3.0}


def test_each_yielded_value_is_a_result(storage_dir) -> None:
    [r] = _fit(yields_results, storage_dir)
    assert _rows(r, "score", DEFAULT_METRIC, "training_iteration") == [
        {"score": 0, "training_iteration": 1}, {"score": 1, "training_iteration": 2},
        {"score": 2, "training_iteration": 3}, {DEFAULT_METRIC: 7.5, "training_iteration": 4}]
    assert r.metrics["done"] is True


def test_falsy_return_adds_nothing_and_other_types_fail_the_trial(storage_dir) -> None:
    [r] = _fit(returns_nothing_reportable, storage_dir)
    assert [h["score"] for h in r.metrics_history] == [1] and r.error is None
    [bad] = _fit(returns_a_string, storage_dir)
    assert bad.error is not None and "ValueError" in str(bad.error) and "a dict of metrics" in str(bad.error)


def reports_done_then_goes_on(config: dict[str, Any]) -> Any:
    for i in range(5):
        report({"i": i, "done": i == 1})
        with open(config["marker"], "a") as f:
            f.write(f"after {i}\n")
    with open(config["marker"], "a") as f:
        f.write("returned\n")


def yields_done_then_goes_on(config: dict[str, Any]) -> Any:
    for i in range(5):
        yield {"i": i, "done": i == 1}
        with open(config["marker"], "a") as f:
            f.write(f"after {i}\n")


@pytest.mark.parametrize("system", ["simple", "multiproc"])
@pytest.mark.parametrize("trainable", [reports_done_then_goes_on, yields_done_then_goes_on])
def test_a_reported_done_ends_a_function_trainable(trainable, system, storage_dir, tmp_path) -> None:
    # recorded from Ray 2.60: report({"done": True, ...}) is the trial's last result; the function
    # goes no further (the marker holds only "after 0") and the trial ends TERMINATED
    marker = tmp_path / "marker.txt"
    [r] = _fit(trainable, storage_dir, system=system, param_space={"marker": str(marker)})
    assert r.status.value == "TERMINATED" and r.error is None
    assert _rows(r, "i", "done", "training_iteration") == [
        {"i": 0, "done": False, "training_iteration": 1}, {"i": 1, "done": True, "training_iteration": 2}]
    assert r.metrics["i"] == 1 and r.metrics["done"] is True
    assert marker.read_text() == "after 0\n"


# ---------------------------------------------------------------- 2. should_checkpoint
class CheckpointsWhenAsked(Trainable):
    """Asks for a checkpoint from step() at iteration 2 only; no checkpoint_frequency is set."""

    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        return {"n": self.n, SHOULD_CHECKPOINT: self.n == 2, "done": self.n == 4}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"n": self.n}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.n = checkpoint["n"]


def test_step_result_should_checkpoint_saves_at_that_iteration(storage_dir) -> None:
    [r] = _fit(CheckpointsWhenAsked, storage_dir, checkpoint_config=CheckpointConfig(checkpoint_at_end=False))
    assert r.metrics["n"] == 4
    assert r.checkpoint is not None and r.checkpoint.to_dict() == {"n": 2}
    assert isinstance(r.checkpoint, Checkpoint)


def test_a_class_trainable_checkpoints_at_end_by_default(storage_dir) -> None:
    # recorded from Ray 2.60: CheckpointConfig() (checkpoint_at_end=None) becomes True for a class
    # trainable; this trial's checkpoints are {"n": 2} (asked by step()) and {"n": 4} (at its end)
    [r] = _fit(CheckpointsWhenAsked, storage_dir)
    assert r.checkpoint is not None and r.checkpoint.to_dict() == {"n": 4}
    assert [(c.to_dict()["n"], m["n"]) for c, m in r.best_checkpoints] == [(2, 2), (4, 4)]


def test_only_an_asked_checkpoint_at_end_turns_batching_off(storage_dir) -> None:
    """The class-trainable default saves at the end without giving up batching or horizons (a STOP on a
    trial's own result lands there anyway); checkpoint_at_end=True keeps every result decided, as before."""
    def spec(cc: CheckpointConfig) -> Any:
        return Tuner(CheckpointsWhenAsked, run_config=RunConfig(storage=storage_dir, checkpoint_config=cc))._spec()
    default, asked = spec(CheckpointConfig()), spec(CheckpointConfig(checkpoint_at_end=True))
    assert (default.checkpoint_at_end, default.checkpoint_at_end_by_default) == (True, True)
    assert (asked.checkpoint_at_end, asked.checkpoint_at_end_by_default) == (True, False)


class NeverSaves(Trainable):
    def step(self) -> dict[str, Any]:
        return {"done": self.iteration == 2}


def test_a_class_without_save_checkpoint_is_not_checkpointed_at_end_by_default(storage_dir) -> None:
    # a deliberate difference: Ray 2.60 ends this trial in ERROR (NotImplementedError from its
    # Trainable.save_checkpoint at the end save); audition's default is False for such a class
    [r] = _fit(NeverSaves, storage_dir)
    assert r.status.value == "TERMINATED" and r.error is None and r.checkpoint is None
    assert r.metrics["training_iteration"] == 3


def test_a_function_trainable_has_no_checkpoint_at_end(storage_dir) -> None:
    # recorded from Ray 2.60: None means False for a function trainable (no checkpoint, TERMINATED)
    # and checkpoint_at_end=True is refused before anything runs
    [r] = _fit(returns_number, storage_dir, param_space={"x": 1.0})
    assert r.checkpoint is None and r.status.value == "TERMINATED"
    with pytest.raises(ConfigError, match="checkpoint_at_end=True"):
        _fit(returns_number, storage_dir, checkpoint_config=CheckpointConfig(checkpoint_at_end=True))


class Counter(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.n = 0

    def step(self) -> dict[str, Any]:
        self.n += 1
        return {"n": self.n, "done": self.n == 7}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"n": self.n}


class CheckpointEveryThird(Callback):
    """Ray's custom_checkpointing_with_callback pattern; it also keeps state in the driver."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any]) -> None:
        self.seen.append(result["n"])
        if result["n"] % 3 == 0:
            result[SHOULD_CHECKPOINT] = True


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_callback_should_checkpoint_saves_at_that_iteration(system, storage_dir, no_leaks) -> None:
    cb = CheckpointEveryThird()
    [r] = _fit(Counter, storage_dir, system=system, callbacks=[cb],
               checkpoint_config=CheckpointConfig(checkpoint_at_end=False))
    assert cb.seen == [1, 2, 3, 4, 5, 6, 7]  # it ran in this process, on every result
    assert _saved(r, storage_dir) == [3, 6]  # exactly at the iterations the callback asked for
    assert r.checkpoint is not None and r.checkpoint.to_dict() == {"n": 6}
    # recorded from Ray 2.60: with the default CheckpointConfig() the class trainable is saved at its end too
    [r] = _fit(Counter, storage_dir, system=system, callbacks=[CheckpointEveryThird()])
    assert _saved(r, storage_dir) == [3, 6, 7]
    assert r.checkpoint is not None and r.checkpoint.to_dict() == {"n": 7}


def test_callback_should_checkpoint_saves_at_that_iteration_when_the_event_batch_fills(
        storage_dir, monkeypatch) -> None:
    """A result event that fills the driver's event batch is sent at once; its decision must still wait
    for the callbacks' answer (it used to be released unheld, and the request landed a batch late)."""
    from actors._engine import feed

    monkeypatch.setattr(feed, "EVENTS_BATCH", 1)  # every event fills a batch (the controller is in-process)
    [r] = _fit(Counter, storage_dir, system="simple", callbacks=[CheckpointEveryThird()],
               checkpoint_config=CheckpointConfig(checkpoint_at_end=False))
    assert _saved(r, storage_dir) == [3, 6]


def _saved(r: Any, storage_dir: str) -> list[int]:
    trial_dir = os.path.join(storage_dir, os.path.basename(r.path.rstrip("/")))
    if not os.path.isdir(trial_dir):
        trial_dir = r.path
    return sorted(Checkpoint(os.path.join(trial_dir, d)).to_dict()["n"]
                  for d in os.listdir(trial_dir) if d.startswith("checkpoint_"))


# ---------------------------------------------------------------- 3. an explicit BasicVariantGenerator
def test_explicit_basic_variant_generator_runs_num_samples(storage_dir) -> None:
    from actors.search import BasicVariantGenerator, uniform

    grid = _fit(returns_number, storage_dir, param_space={"x": uniform(0, 1)},
                tune_config=TuneConfig(search_alg=BasicVariantGenerator(), num_samples=4))
    assert len(grid) == 4 and len({r.config["x"] for r in grid}) == 4
    # with a grid, Ray runs num_samples sweeps of it; an empty space still gives num_samples trials
    grid = _fit(returns_number, storage_dir, param_space={"x": grid_search([1, 2])},
                tune_config=TuneConfig(search_alg=BasicVariantGenerator(), num_samples=2))
    assert sorted(r.config["x"] for r in grid) == [1, 1, 2, 2]
    assert len(_fit(reports_then_returns_dict, storage_dir,
                    tune_config=TuneConfig(search_alg=BasicVariantGenerator(), num_samples=3))) == 3


# ---------------------------------------------------------------- 4. fail_fast
def sleeper_or_raiser(config: dict[str, Any]) -> None:
    """'sleep' reports, then stays in its own code for good; 'raise' fails once 'sleep' reported."""
    marker = os.path.join(config["dir"], "sleeper_reported")
    if config["role"] == "sleep":
        report({"score": 1})
        open(marker, "w").close()
        time.sleep(600)  # only an engine that ends this trial itself lets the test finish
    elif config["role"] == "raise":
        deadline = time.monotonic() if config.get("at_once") else time.monotonic() + 60
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise ValueError("boom")
    report({"score": 3})


def test_fail_fast_true_stops_the_rest_and_returns_the_results(storage_dir, tmp_path, no_leaks) -> None:
    grid = Tuner(with_resources(sleeper_or_raiser, {"cpu": 0.5}),
                 param_space={"role": grid_search(["sleep", "raise", "never started"]), "dir": str(tmp_path)},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(storage=storage_dir, verbose=0,
                                      failure_config=FailureConfig(fail_fast=True))).fit()
    by_role = {r.config["role"]: r for r in grid}
    failed = by_role["raise"]
    assert failed.status.value == "ERROR" and "ValueError: boom" in str(failed.error)
    assert grid.errors == [failed.error]
    assert by_role["sleep"].status.value == "TERMINATED" and by_role["sleep"].error is None
    assert by_role["sleep"].metrics["score"] == 1  # what it reported before it was stopped
    # as Ray 2.60 (recorded: a 40-value grid, max_concurrent_trials=2, the first trial failing, gives 2
    # trials): the generator creates a trial only while fewer than 2 are live, so the third never was
    assert "never started" not in by_role and len(grid) == 2


def test_fail_fast_raise_raises_the_trial_error(storage_dir, tmp_path) -> None:
    with pytest.raises(TrialError, match="ValueError: boom") as info:
        _fit(sleeper_or_raiser, storage_dir, param_space={"role": "raise", "dir": str(tmp_path), "at_once": True},
             failure_config=FailureConfig(fail_fast="raise"))
    assert "Traceback" in info.value.traceback_text


@pytest.mark.parametrize(("kwargs", "match"), [({"fail_fast": "yes"}, "use True, False or 'raise'"),
                                               ({"fail_fast": True, "max_failures": 2}, "max_failures must be 0")])
def test_fail_fast_values_are_checked(kwargs, match) -> None:
    with pytest.raises(ConfigError, match=match):
        FailureConfig(**kwargs)


# ---------------------------------------------------------------- missing surface
RAY_TUNE_NAMES = ("uniform", "loguniform", "choice", "randint", "grid_search", "sample_from", "quniform",
                  "qloguniform", "qrandint", "lograndint", "qlograndint", "randn", "qrandn", "with_resources",
                  "Stopper", "Callback", "report", "get_checkpoint", "Checkpoint", "CheckpointConfig",
                  "FailureConfig", "RunConfig", "TuneConfig", "Tuner", "ResultGrid", "Trainable")


def test_import_actors_as_tune_has_ray_tunes_names() -> None:
    import actors as tune
    import actors.search

    missing = [n for n in RAY_TUNE_NAMES if not hasattr(tune, n)]
    assert missing == []
    assert tune.uniform is actors.search.uniform and set(RAY_TUNE_NAMES) <= set(dir(tune))
    from actors.search.basic_variant import BasicVariantGenerator
    from actors.search.optuna import OptunaSearch
    from actors.stopper import MaximumIterationStopper
    from actors.stoppers import MaximumIterationStopper as Same

    assert MaximumIterationStopper is Same and OptunaSearch and BasicVariantGenerator


def scored(config: dict[str, Any]) -> None:
    for loss in config["losses"]:
        report({"loss": loss}, checkpoint=Checkpoint.from_dict({"loss": loss}))


def test_storage_path_results_checkpoints_and_filtered_dataframe(storage_dir) -> None:
    pytest.importorskip("pandas")
    from actors import CheckpointConfig

    tuner = Tuner(scored, param_space={"losses": grid_search([[3.0, 1.0, 2.0], [5.0, 4.0, 6.0]])},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(storage_path=storage_dir, system="simple", verbose=0,
                                       checkpoint_config=CheckpointConfig(num_to_keep=2)))
    with pytest.raises(Exception, match="call fit"):
        tuner.get_results()
    grid = tuner.fit()
    assert tuner.get_results() is grid and grid.experiment_path.startswith(storage_dir)
    first = next(r for r in grid if r.config["losses"][0] == 3.0)
    # the two newest are kept (num_to_keep=2), each with the metrics of its result
    assert [(c.to_dict()["loss"], m["loss"]) for c, m in first.best_checkpoints] == [(1.0, 1.0), (2.0, 2.0)]
    df = grid.get_dataframe(filter_metric="loss", filter_mode="min")
    assert sorted(df["loss"]) == [1.0, 4.0] and sorted(grid.get_dataframe()["loss"]) == [2.0, 6.0]
    assert sorted(grid.get_dataframe(filter_metric="loss", filter_mode="max")["loss"]) == [3.0, 6.0]
    # Ray 2.60: a filter_metric without filter_mode gives each trial's last result; a mode needs a metric
    assert sorted(grid.get_dataframe(filter_metric="loss")["loss"]) == [2.0, 6.0]
    with pytest.raises(ConfigError, match="filter_mode needs filter_metric"):
        grid.get_dataframe(filter_mode="min")
    with pytest.raises(ConfigError, match="same setting"):
        RunConfig(storage=storage_dir, storage_path=storage_dir + "x")


# ---------------------------------------------------------------- a scheduler's STOP marks the result done
class StopAtThree:
    """A scheduler that stops every trial at its third result and records what it was shown."""

    def __init__(self) -> None:

        class _S(FIFOScheduler):
            def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
                return Decision.STOP if result["training_iteration"] == 3 else Decision.CONTINUE
        self.scheduler = _S()


class SeenByCallbacks(Callback):
    def __init__(self) -> None:
        self.done: list[tuple[int, bool]] = []

    def on_trial_result(self, iteration: int, trials: Any, trial: Any, result: dict[str, Any]) -> None:
        self.done.append((result["training_iteration"], result["done"]))


def counts_to_ten(config: dict[str, Any]) -> None:
    for i in range(10):
        report({"score": i})


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_scheduler_stop_marks_that_result_done_before_callbacks_and_logs(system, storage_dir, no_leaks) -> None:
    """Ray Tune sets done=True on the result its scheduler decided STOP at, before the callbacks and
    loggers see it (and does not hand it to the searcher): the last row of the history says done."""
    cb = SeenByCallbacks()
    [r] = _fit(counts_to_ten, storage_dir, system=system, callbacks=[cb],
               tune_config=TuneConfig(scheduler=StopAtThree().scheduler, metric="score", mode="max"))
    assert _rows(r, "training_iteration", "done") == [
        {"training_iteration": 1, "done": False}, {"training_iteration": 2, "done": False},
        {"training_iteration": 3, "done": True}]
    assert cb.done == [(1, False), (2, False), (3, True)]


class RecordingScheduler:
    def __init__(self) -> None:

        class _S(FIFOScheduler):
            seen: list[int] = []

            def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
                self.seen.append(result["training_iteration"])
                if result["training_iteration"] > 4:  # the stop criterion fired at 4: never shown
                    raise AssertionError(f"the scheduler saw iteration {result['training_iteration']}")
                return super().on_trial_result(controller, trial, result)

            def on_trial_complete(self, controller: Any, trial: Any, result: dict[str, Any]) -> None:
                if result["training_iteration"] != 4 or 4 in self.seen:
                    raise AssertionError(f"complete with {result['training_iteration']}, seen {self.seen}")
        self.scheduler = _S()


def test_a_stop_criterion_decides_without_the_scheduler(storage_dir) -> None:
    """Ray Tune: a result that meets ``stop=`` is decided STOP by the controller; the scheduler's
    ``on_trial_result`` never sees it (only ``on_trial_complete`` does), so rung bookkeeping such as
    ASHA's does not count it."""
    sched = RecordingScheduler().scheduler
    [r] = _fit(counts_to_ten, storage_dir, stop={"training_iteration": 4},
               tune_config=TuneConfig(scheduler=sched, metric="score", mode="max"))
    assert r.error is None, r.error
    assert [h["training_iteration"] for h in r.metrics_history] == [1, 2, 3, 4]
    assert r.metrics_history[-1]["done"] is True


@pytest.mark.parametrize("kw, match", [({"checkpoint_at_end": True}, "checkpoint_at_end"),
                                       ({"checkpoint_frequency": 2}, "checkpoint_frequency")])
def test_function_trainables_refuse_what_ray_refuses(storage_dir, kw, match) -> None:
    """Ray Tune raises for checkpoint_at_end / checkpoint_frequency with a function trainable (they
    could only be ignored): audition refuses them too, in Tuner(...), saying what to do instead."""
    from actors import CheckpointConfig

    with pytest.raises(ConfigError, match=match) as err:
        Tuner(counts_to_ten, run_config=RunConfig(storage=storage_dir, checkpoint_config=CheckpointConfig(**kw)))
    assert "report(metrics, checkpoint=" in str(err.value)


# ---------------------------------------------------------------- max_concurrent_trials caps the default generator
def first_fails(config: dict[str, Any]) -> None:
    if config["k"] == 0:
        raise RuntimeError("x")
    time.sleep(config.get("busy_s", 0.0))  # (the work beside the failing trial, as in the Ray recording)
    report({"v": 1})


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_max_concurrent_trials_creates_trials_only_as_they_can_run(system, storage_dir, no_leaks) -> None:
    """Recorded from Ray 2.60 (40-value grid, max_concurrent_trials=2, fail_fast=True, the first
    trial fails): the grid holds 2 trials, the failed one and the one running beside it. Ray's
    default generator gets max_concurrent=max_concurrent_trials and creates a trial only while fewer
    are live; without the cap all 40 would be listed (38 never run)."""
    grid = Tuner(first_fails, param_space={"k": grid_search(list(range(40))), "busy_s": 0.5},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(storage=storage_dir, verbose=0, system=system,
                                      failure_config=FailureConfig(fail_fast=True))).fit()
    assert len(grid) == 2 and grid.num_errors == 1
    # and without fail_fast every trial still runs, two at a time
    grid = Tuner(first_fails, param_space={"k": grid_search(list(range(1, 9)))},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(storage=storage_dir, verbose=0, system=system)).fit()
    assert sorted(r.config["k"] for r in grid) == list(range(1, 9)) and grid.num_errors == 0


# ---------------------------------------------------------------- max_concurrent_trials wraps other searchers
EVENTS: list[tuple[str, str]] = []  # (what, trial_id): the searcher's calls, in order (system="simple")


class ListSearcher(Searcher):
    """Ray's probe searcher: configs x=1..n, each call recorded."""

    def __init__(self, n: int, own_limit: bool = False) -> None:
        super().__init__(metric="score", mode="max")
        self.n, self.i, self.own_limit = n, 0, own_limit

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return self.own_limit

    def suggest(self, trial_id: str) -> dict[str, Any] | SearcherSignal | None:
        if self.i >= self.n:
            return Searcher.FINISHED
        self.i += 1
        EVENTS.append(("suggest", trial_id))
        return {"x": self.i}

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        EVENTS.append(("complete", trial_id))


def four_steps(config: dict[str, Any]) -> None:
    for i in range(4):
        time.sleep(0.05)  # (the work: long enough that the engine draws while two trials run, as Ray's probe did)
        report({"score": config["x"] * i})


def _most_live(events: list[tuple[str, str]]) -> int:
    live = most = 0
    for what, _ in events:
        live += 1 if what == "suggest" else -1
        most = max(most, live)
    return most


@pytest.mark.parametrize("pausing", [False, True])
def test_max_concurrent_trials_limits_a_searchers_live_trials_as_ray(pausing: bool, storage_dir: str) -> None:
    """Recorded from Ray 2.60 (a Searcher giving x=1..5, num_samples=5, max_concurrent_trials=2, 4 CPUs;
    with and without a scheduler pausing each trial at its second result): Ray wraps the searcher in a
    ConcurrencyLimiter, so it is asked for trial 3 only after a trial completed, and two PAUSED trials
    keep it from being asked at all (suggest 1, suggest 2, then a completion before each further
    suggestion). audition asked for a third trial while two ran, and for every trial while trials paused."""
    EVENTS.clear()
    grid = Tuner(four_steps, tune_config=TuneConfig(search_alg=ListSearcher(5), num_samples=5, max_concurrent_trials=2,
                                                    metric="score", mode="max",
                                                    scheduler=PauseOnce() if pausing else None),
                 run_config=RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()
    assert sorted((r.config["x"], r.metrics["training_iteration"]) for r in grid) == [(x, 4) for x in range(1, 6)]
    assert [w for w, _ in EVENTS[:2]] == ["suggest", "suggest"] and len(EVENTS) == 10
    assert _most_live(EVENTS) == 2, EVENTS


def test_a_searcher_that_limits_itself_is_left_to_it(storage_dir: str) -> None:
    """Ray's contract: set_max_concurrency returning True means the searcher keeps the limit itself,
    and the ConcurrencyLimiter passes every call through (here it does not: more than 2 get live)."""
    EVENTS.clear()
    limited = ConcurrencyLimiter(ListSearcher(5, own_limit=True), max_concurrent=1)
    assert limited.suggest("a") == {"x": 1} and limited.suggest("b") == {"x": 2}
    EVENTS.clear()
    Tuner(four_steps, tune_config=TuneConfig(search_alg=ListSearcher(5, own_limit=True), num_samples=5,
                                             max_concurrent_trials=1, metric="score", mode="max"),
          run_config=RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()
    assert _most_live(EVENTS) > 1, EVENTS


def test_max_concurrent_trials_beside_a_concurrency_limiter(storage_dir: str, caplog: Any) -> None:
    """Ray 2.60 (tune.py): a ConcurrencyLimiter with another limit is a ValueError naming the fix; with the
    same limit, a warning, and the limiter is not wrapped again."""
    with pytest.raises(ConfigError, match="already a ConcurrencyLimiter with max_concurrent=3"):
        Tuner(four_steps, tune_config=TuneConfig(search_alg=ConcurrencyLimiter(ListSearcher(5), 3), num_samples=5,
                                                 max_concurrent_trials=2),
              run_config=RunConfig(storage=storage_dir, verbose=0, system="simple"))
    limiter = ConcurrencyLimiter(ListSearcher(5), 2)
    tuner = Tuner(four_steps, tune_config=TuneConfig(search_alg=limiter, num_samples=5, max_concurrent_trials=2),
                  run_config=RunConfig(storage=storage_dir, verbose=0, system="simple"))
    assert tuner._searcher is limiter and "adds nothing" in caplog.text


# ---------------------------------------------------------------- Result.error is also the raised class
class NeedsTwo(Exception):
    def __init__(self, a: int, b: int) -> None:  # an __init__ that TrialError's message would not fit
        super().__init__(f"{a}/{b}")


def raises_by_k(config: dict[str, Any]) -> None:
    report({"v": 1})
    if config["k"] == "value":
        raise ValueError("boom")
    if config["k"] == "two":
        raise NeedsTwo(1, 2)
    raise KeyError("k")


def test_a_failed_trials_error_is_also_an_instance_of_what_it_raised(storage_dir) -> None:
    """Recorded from Ray 2.60: Result.error of a trial that raised ValueError (or a class of the
    driver's script) is RayTaskError(ValueError), an instance of ValueError (of that class). Here it is
    TrialError(ValueError): a TrialError and a ValueError, and it pickles."""
    import pickle

    grid = Tuner(raises_by_k, param_space={"k": grid_search(["value", "two", "key"])},
                 run_config=RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()
    errors = {r.config["k"]: r.error for r in grid}
    assert isinstance(errors["value"], ValueError) and isinstance(errors["value"], TrialError)
    assert type(errors["value"]).__name__ == "TrialError(ValueError)" and "ValueError: boom" in str(errors["value"])
    assert isinstance(errors["two"], NeedsTwo) and isinstance(errors["key"], KeyError)
    again = pickle.loads(pickle.dumps(errors["two"]))
    assert isinstance(again, NeedsTwo) and str(again) == str(errors["two"])
    from actors._driver.errors import trial_error

    unknown = trial_error("t", "NoSuchError: x", "Traceback ...\nsomewhere.NoSuchError: x\n")
    assert type(unknown) is TrialError


# ---------------------------------------------------------------- progress reporters and verbose=3
def test_a_progress_reporter_is_accepted_and_ignored_with_a_warning_as_ray(storage_dir: str, caplog: Any) -> None:
    """Recorded from Ray 2.60 (a 2-trial grid with RunConfig(progress_reporter=CLIReporter(metric_columns=
    ["loss"], max_report_frequency=1), verbose=3), and again with progress_reporter="nope", verbose=1): the
    run completes, with one warning that the passed-in ProgressReporter is ignored; verbose=3 is valid."""
    from actors import CLIReporter, JupyterNotebookReporter, ProgressReporter

    reporter = CLIReporter(metric_columns=["loss"], max_report_frequency=1)
    reporter.add_metric_column("acc", "accuracy")
    with pytest.raises(ValueError, match="'loss' is already there"):
        reporter.add_metric_column("loss")
    assert isinstance(JupyterNotebookReporter(overwrite=False, metric_columns={"loss": "L"}), ProgressReporter)
    for given, verbose in ((reporter, 3), ("nope", 1)):
        caplog.clear()
        grid = Tuner(first_fails, param_space={"k": grid_search([1, 2])},
                     run_config=RunConfig(storage=storage_dir, system="simple", verbose=verbose,
                                          progress_reporter=given)).fit()
        assert len(grid) == 2 and grid.num_errors == 0
        assert caplog.text.count("progress_reporter=...) is ignored") == 1, caplog.text
    with pytest.raises(ConfigError, match="3 is accepted as 2"):
        RunConfig(verbose=4)
    assert RunConfig(verbose=False).verbose == 0  # Ray's pbt_function.py example passes verbose=False


def _quadratic(config: dict[str, Any]) -> None:
    from actors import report

    report({"loss": (config["x"] - 0.3) ** 2})


def _xs(grid: Any) -> list[float]:
    return sorted(round(r.config["x"], 6) for r in grid)


def test_a_searcher_is_saved_after_fit_and_restored_from_a_file_or_the_experiment_as_in_ray(tmp_path: Any) -> None:
    """Ray's guide "Saving and Restoring Tune Search Algorithms", recorded from Ray 2.60 (OptunaSearch(seed=0),
    ``x`` uniform(0, 1), loss ``(x - 0.3) ** 2``): 3 trials draw the first configs; ``search_alg.save(path)``
    after ``fit()`` saves what the run learned, and a new ``OptunaSearch(seed=0)`` restored from that file,
    or with ``restore_from_dir(<experiment>)``, suggests the next two configs of the same study."""
    pytest.importorskip("optuna")
    from actors import RunConfig, TuneConfig, Tuner
    from actors.search import uniform
    from actors.search.optuna import OptunaSearch

    def fit(name: str, search_alg: Any, n: int, space: Any = None) -> Any:
        return Tuner(_quadratic, param_space=space, run_config=RunConfig(storage=str(tmp_path), name=name,
                                                                         system="simple", verbose=0),
                     tune_config=TuneConfig(search_alg=search_alg, num_samples=n, metric="loss", mode="min")).fit()

    search_alg = OptunaSearch(seed=0)
    first = fit("first", search_alg, 3, {"x": uniform(0, 1)})
    assert _xs(first) == [0.548814, 0.602763, 0.715189]
    path = str(tmp_path / "my-checkpoint.pkl")
    search_alg.save(path)
    from_file = OptunaSearch(seed=0)
    from_file.restore(path)
    assert _xs(fit("second", from_file, 2)) == [0.423655, 0.544883]
    from_dir = OptunaSearch(seed=0)
    from_dir.restore_from_dir(first.experiment_path)
    assert _xs(fit("third", from_dir, 2)) == [0.423655, 0.544883]


def _nine(config: dict[str, Any]) -> None:
    for i in range(9):
        report({"loss": config["a"] / (i + 1)})


@pytest.mark.parametrize(("case", "tune_kw", "asha_kw"), [
    ("tuner_mode_only", {"mode": "min"}, {"metric": "loss"}),  # (a=1 is best at every rung; the others stop at 1)
    ("tuner_metric_only", {"metric": "loss"}, {"mode": "max"}),  # (each later trial is better at its rung)
])
def test_metric_and_mode_may_come_one_from_tuneconfig_one_from_the_scheduler_as_in_ray(
        case: str, tune_kw: dict[str, str], asha_kw: dict[str, str], storage_dir: str) -> None:
    """Recorded from Ray 2.60 (tests/data/ray_api_semantics.json): TuneConfig(mode='min') without a metric is
    accepted; the scheduler's own metric takes its mode, and get_best_result(metric=...) takes TuneConfig's mode
    (as the scheduler takes a metric)."""
    from actors.schedulers import ASHAScheduler
    from tests._ray_api import RAY_API

    ray = RAY_API["runs"][case]
    grid = Tuner(_nine, param_space={"a": grid_search([1, 2, 3, 4])},
                 tune_config=TuneConfig(**tune_kw, max_concurrent_trials=1,  # type: ignore[arg-type]
                                        scheduler=ASHAScheduler(max_t=9, grace_period=1, **asha_kw)),
                 run_config=RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()
    assert sorted([r.config["a"], r.metrics["training_iteration"]] for r in grid) == ray["iterations"]
    if "mode" in tune_kw:
        assert grid.get_best_result(metric="loss").config == ray["best_loss_config"]
        with pytest.raises(ConfigError, match="no metric given, and TuneConfig sets none"):
            grid.get_best_result()
    else:
        with pytest.raises(ConfigError, match="no mode given, and TuneConfig sets none"):
            grid.get_best_result()
