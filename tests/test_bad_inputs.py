"""The catalogue of bad inputs (issue 13, item 6): each fails fast with an error that names the problem
and the fix, never hangs, never reports the user's mistake as an internal error, and leaves nothing
half-written. One test per case."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from typing import Any

import pytest

from actors import Checkpoint, RunConfig, Trainable, TuneConfig, Tuner, report, with_resources
from actors._driver.errors import ConfigError, TuneError
from actors._engine.trial import TrialStatus
from actors.schedulers import ASHAScheduler, PopulationBasedTraining
from actors.search import grid_search


def steps(config: dict[str, Any]) -> None:
    for i in range(config.get("steps", 2)):
        report({"loss": 1.0 / (i + 1)})


def reports_a_lock(config: dict[str, Any]) -> None:
    report({"loss": 1.0, "lk": threading.Lock()} if config["bad"] else {"loss": 1.0})
    report({"loss": 0.5})


def no_config() -> None:
    report({"loss": 1.0})


def _empty(path: str) -> bool:
    """Nothing was written: the directory is absent or holds nothing."""
    return not os.path.exists(path) or not os.listdir(path)


def _fit(trainable: Any, storage: str, **kw: Any) -> Any:
    tc = kw.pop("tune_config", None)
    return Tuner(trainable, param_space=kw.pop("param_space", None), tune_config=tc,
                 run_config=RunConfig(storage=storage, system=kw.pop("system", "simple"), verbose=0, **kw)).fit()


def _checkpoint_dirs(storage: str) -> list[str]:
    return [d for d, _, _ in os.walk(storage) if os.path.basename(d).startswith("checkpoint_")]


# ---------------------------------------------------------------------------------------- results
@pytest.mark.timeout(90)
def test_unpicklable_metric_fails_that_trial_naming_the_key(storage_dir, no_leaks) -> None:
    """Multi-process: the lock used to poison the transport and hang the run forever."""
    grid = _fit(reports_a_lock, storage_dir, system="multiproc", param_space={"bad": grid_search([True, False])},
                controller_timeout_s=30)
    by_bad = {r.config["bad"]: r for r in grid}
    bad, good = by_bad[True], by_bad[False]
    assert bad.status is TrialStatus.ERROR and good.status is TrialStatus.TERMINATED
    assert "'lk'" in str(bad.error) and "cannot be pickled" in str(bad.error)
    assert "report numbers, strings" in str(bad.error)
    assert bad.metrics_history == [] and len(good.metrics_history) == 2  # the bad row never landed


class StepsALock(Trainable):
    def step(self) -> dict[str, Any]:
        return {"loss": 1.0, "handle": threading.Lock()}


def test_unpicklable_metric_from_a_class_trainable_fails_that_trial(storage_dir) -> None:
    [r] = _fit(StepsALock, storage_dir)
    assert r.status is TrialStatus.ERROR and "'handle'" in str(r.error) and "cannot be pickled" in str(r.error)


def test_metric_name_that_is_not_a_string_fails_that_trial(storage_dir) -> None:
    def int_keys(config: dict[str, Any]) -> None:
        report({1: 0.5})

    [r] = _fit(int_keys, storage_dir)
    assert r.status is TrialStatus.ERROR and "metric names must be strings" in str(r.error)


# ---------------------------------------------------------------------------------------- resources
@pytest.mark.parametrize("make", [
    lambda: Tuner(with_resources(steps, {"cpu": 0})),
    lambda: Tuner(with_resources(steps, {"CPU": 0})),
    lambda: Tuner(steps, run_config=RunConfig(resources_per_trial={"cpu": 0})),
], ids=["with_resources", "ray_spelling", "resources_per_trial"])
def test_zero_cpu_is_refused_up_front(make) -> None:
    """It used to wait on '1 PENDING' forever."""
    with pytest.raises(ConfigError, match=r"would never be scheduled.*\{'cpu': 0\.5\}"):
        make()


@pytest.mark.parametrize("make", [
    lambda: Tuner(with_resources(steps, {"gpu": 0})),
    lambda: Tuner(with_resources(steps, {"GPU": 0, "memory": 0})),
    lambda: Tuner(steps, run_config=RunConfig(resources_per_trial={"slot": 0})),
], ids=["with_resources", "ray_spelling", "resources_per_trial"])
def test_resources_that_ask_for_nothing_are_refused_up_front(make) -> None:
    """They used to wait on PENDING forever (no CPU asked for, and nothing else either)."""
    with pytest.raises(ConfigError, match=r"asks for no resources at all.*give no resources for one CPU a trial"):
        make()


@pytest.mark.parametrize("amount", [-1, float("nan"), float("inf"), True, "2"])
def test_negative_or_non_numeric_cpu_is_refused_up_front(amount) -> None:
    with pytest.raises(ConfigError, match=r"with_resources: the amount of 'cpu' must be a finite number >= 0"):
        with_resources(steps, {"cpu": amount})


def test_ray_spelling_of_resources_is_understood() -> None:
    assert Tuner(with_resources(steps, {"CPU": 1}))._resources == {"cpu": 1.0}
    with pytest.raises(ConfigError, match="'cpu' is given twice"):
        with_resources(steps, {"CPU": 1, "cpu": 2})


# ---------------------------------------------------------------------------------------- stop=
@pytest.mark.parametrize("stop, says", [
    ({"loss": "low"}, "threshold for 'loss' must be a number"),
    (lambda result: True, "must accept two arguments"),
    (42, "stop must be a dict"),
    (ASHAScheduler, "is a class; pass an instance"),
], ids=["dict_value", "function_signature", "unknown_type", "a_class"])
def test_stop_mistake_is_refused_up_front_naming_stop(stop, says, storage_dir) -> None:
    with pytest.raises(ConfigError, match=r"RunConfig\(stop=\.\.\.\) is invalid: .*" + says):
        Tuner(steps, run_config=RunConfig(storage=storage_dir, stop=stop))
    assert _empty(storage_dir)


def reports_a_sometimes(config: dict[str, Any]) -> None:
    for i in range(6):
        report({"b": i} if i % 2 else {"a": i, "b": i, "nested": {"x": i}})


@pytest.mark.parametrize("stop, rows, done_at", [
    ({"a": 4}, 5, 5), ({"zzz": 1}, 6, None), ({"nested/x": 2}, 3, 3), ({"zzz": 1, "b": 3}, 4, 4)])
def test_a_stop_key_missing_from_results_is_passed_over(stop, rows, done_at, storage_dir, caplog) -> None:
    # recorded from Ray 2.60: a criterion missing from a result is skipped for that result, with a
    # warning, and the trial ends TERMINATED where the criteria present are met (or runs to its end):
    # {"a": 4} -> 5 rows, done at 5; {"zzz": 1} -> 6 rows; {"nested/x": 2} -> 3; {"zzz": 1, "b": 3} -> 4
    with caplog.at_level(logging.WARNING, logger="audition"):
        [r] = _fit(reports_a_sometimes, storage_dir, stop=stop)
    assert r.status.value == "TERMINATED" and r.error is None
    assert len(r.metrics_history) == rows
    assert [h["done"] for h in r.metrics_history][:-1] == [False] * (rows - 1)
    if done_at is not None:
        assert r.metrics_history[-1]["done"] is True
    assert sum("is not in the result of trial" in rec.getMessage() for rec in caplog.records) == 1


def test_stop_function_that_raises_is_the_users_error(storage_dir) -> None:
    def stop(trial_id: str, result: dict[str, Any]) -> bool:
        return result["acc"] > 0.9

    with pytest.raises(TuneError) as err:
        _fit(steps, storage_dir, stop=stop)
    msg = str(err.value)
    assert "internal error" not in msg and "RunConfig(stop=...) (FunctionStopper) failed" in msg
    assert "KeyError: 'acc'" in msg and "error in stop=, not in audition" in msg


# ---------------------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("sched, tc, says", [
    (ASHAScheduler(metric="loss", mode="min"), TuneConfig(metric="acc", mode="min"),
     r"metric is 'loss' in AsyncHyperBandScheduler\(\.\.\.\) but 'acc' in TuneConfig"),
    (ASHAScheduler(metric="loss", mode="min"), TuneConfig(metric="loss", mode="max"),
     r"mode is 'min' in AsyncHyperBandScheduler\(\.\.\.\) but 'max' in TuneConfig"),
    (ASHAScheduler(), TuneConfig(), r"AsyncHyperBandScheduler: metric and mode not set; pass metric=/mode="),
    (ASHAScheduler(metric="loss"), TuneConfig(), r"AsyncHyperBandScheduler: mode not set"),
], ids=["metric_conflict", "mode_conflict", "neither", "no_mode"])
def test_scheduler_objective_is_checked_up_front(sched, tc, says, storage_dir) -> None:
    tc.scheduler = sched
    with pytest.raises(ConfigError, match=says):
        Tuner(steps, tune_config=tc, run_config=RunConfig(storage=storage_dir))
    assert _empty(storage_dir)


def test_scheduler_metric_never_reported_fails_at_the_first_result_clearly(storage_dir) -> None:
    tc = TuneConfig(scheduler=ASHAScheduler(metric="acc", mode="max"))
    with pytest.raises(TuneError) as err:
        _fit(steps, storage_dir, tune_config=tc)
    msg = str(err.value)
    assert "reported a result without the metric 'acc' (it reported ['loss'])" in msg
    assert "change AsyncHyperBandScheduler(metric=...)" in msg and "Traceback" not in msg


# ---------------------------------------------------------------------------------------- checkpoints
def test_report_checkpoint_that_is_not_a_checkpoint_fails_that_trial(storage_dir) -> None:
    def dict_checkpoint(config: dict[str, Any]) -> None:
        report({"loss": 1.0}, checkpoint={"step": 1})  # type: ignore[arg-type]

    [r] = _fit(dict_checkpoint, storage_dir)
    assert r.status is TrialStatus.ERROR
    assert "takes an actors.Checkpoint, got dict" in str(r.error) and "Checkpoint.from_dict" in str(r.error)
    assert "AttributeError" not in str(r.error) and _checkpoint_dirs(storage_dir) == []


def deletes_its_checkpoint(config: dict[str, Any]) -> None:
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "w.bin"), "wb") as f:
        f.write(b"w")
    ckpt = Checkpoint.from_directory(d)
    if config["delete"]:
        shutil.rmtree(d)
    report({"loss": 1.0}, checkpoint=ckpt)


def test_checkpoint_directory_deleted_before_report_fails_only_that_trial(storage_dir) -> None:
    """It used to abort the whole experiment as a storage failure."""
    grid = _fit(deletes_its_checkpoint, storage_dir, param_space={"delete": grid_search([True, False])})
    by = {r.config["delete"]: r for r in grid}
    assert by[True].status is TrialStatus.ERROR and by[False].status is TrialStatus.TERMINATED
    assert "no longer exists; keep it until report() returns" in str(by[True].error)
    assert by[False].checkpoint is not None and len(_checkpoint_dirs(storage_dir)) == 1


# ---------------------------------------------------------------------------------------- trainable
@pytest.mark.parametrize("fn", [no_config, lambda a, b: None, lambda *, config: None],
                         ids=["no_argument", "two_arguments", "keyword_only"])
def test_trainable_that_cannot_take_the_config_is_refused(fn, storage_dir) -> None:
    """Ray's rule (wrap_function: fn must bind one positional argument); it used to fail in every trial."""
    with pytest.raises(ConfigError, match=r"must take one argument, the config dict .*def \w+\(config\)"):
        Tuner(fn, run_config=RunConfig(storage=storage_dir))
    assert _empty(storage_dir)


def test_trainable_with_optional_extras_is_accepted() -> None:
    Tuner(lambda config, data=None: None)


# ---------------------------------------------------------------------------------------- schedulers
def test_pbt_with_empty_mutations_is_refused_like_pbt_without_any() -> None:
    for kwargs in ({}, {"hyperparam_mutations": {}}):
        with pytest.raises(ValueError, match=r"give hyperparam_mutations .* or custom_explore_fn"):
            PopulationBasedTraining(metric="loss", mode="min", **kwargs)
    PopulationBasedTraining(hyperparam_mutations={}, custom_explore_fn=lambda c: c)


# ---------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("storage", ["", "   ", 5])
def test_empty_storage_is_refused(storage) -> None:
    """'' used to become the default location silently."""
    with pytest.raises(ConfigError, match=r"RunConfig\(storage=.*\): use a local directory or a URL"):
        RunConfig(storage=storage)


@pytest.mark.parametrize("make, says", [
    (lambda: Tuner(steps, tune_config=RunConfig()), r"Tuner\(tune_config=\.\.\.\) takes a TuneConfig"),  # type: ignore[arg-type]
    (lambda: Tuner(steps, run_config=TuneConfig()), r"Tuner\(run_config=\.\.\.\) takes a RunConfig"),  # type: ignore[arg-type]
    (lambda: RunConfig(failure_config={"max_failures": 2}), r"pass a FailureConfig\(\.\.\.\)"),
    (lambda: RunConfig(callbacks=object()), r"callbacks=.*pass a list"),
    (lambda: RunConfig(controller_timeout_s=0), r"controller_timeout_s=0\): use seconds > 0"),
    (lambda: TuneConfig(metric=5), r"TuneConfig\(metric=5\): use the name of a reported result key"),
    (lambda: TuneConfig(num_samples=True), r"num_samples=True\): use an int >= 1"),
    # removed from Ray Tune; recorded from Ray 2.60: DeprecationWarning (RunConfig: at once; TuneConfig: at fit())
    (lambda: TuneConfig(chdir_to_trial_dir=False), r"chdir_to_trial_dir=\.\.\.\) was removed .*CHDIR_TO_TRIAL_DIR=0"),
    (lambda: RunConfig(local_dir="/tmp/x"), r"local_dir='/tmp/x'\) was removed .*storage_path='/tmp/x'"),
], ids=["configs_swapped", "configs_swapped_2", "failure_config_dict", "callbacks_not_a_list",
        "controller_timeout_zero", "metric_not_a_string", "num_samples_bool", "chdir_to_trial_dir", "local_dir"])
def test_config_of_the_wrong_kind_is_refused(make, says) -> None:
    with pytest.raises(ConfigError, match=says):
        make()


def test_tune_config_takes_rays_positional_order() -> None:
    """Ray 2.60's TuneConfig(mode, metric, search_alg, scheduler, num_samples, ...): recorded,
    TuneConfig("min", "loss").metric == "loss"."""
    tc = TuneConfig("min", "loss", None, None, 3)
    assert (tc.mode, tc.metric, tc.num_samples) == ("min", "loss", 3)


# ---------------------------------------------------------------------------------------- restore
def _exp(root: str, tuner: bytes, state: bytes) -> str:
    path = os.path.join(root, "exp")
    os.makedirs(os.path.join(path, ".state"))
    with open(os.path.join(path, "tuner.pkl"), "wb") as f:
        f.write(tuner)
    with open(os.path.join(path, "experiment_state.json"), "wb") as f:
        f.write(state)
    with open(os.path.join(path, ".state", "experiment_state-000000-ab.json"), "wb") as f:
        f.write(state)
    return path


@pytest.mark.parametrize("tuner, state", [
    (b"garbage", b"garbage"),
    (b"\x80\x05garbage", b"garbage"),
    (b"\x80\x05garbage", b'{"version": 999}'),
    (b"garbage", b'{"latest": "experiment_state-000000-ab.json", "seq": 0}'),
], ids=["all_garbage", "state_garbage", "state_of_another_version", "tuner_garbage"])
def test_can_restore_is_false_for_a_directory_of_garbage(tuner, state, tmp_path) -> None:
    assert Tuner.can_restore(_exp(str(tmp_path), tuner, state)) is False


def test_can_restore_is_false_when_a_real_experiments_tuner_is_garbage(storage_dir) -> None:
    path = _fit(steps, storage_dir, name="real").experiment_path
    assert Tuner.can_restore(path)
    with open(os.path.join(path, "tuner.pkl"), "wb") as f:
        f.write(b"not a pickle")
    assert Tuner.can_restore(path) is False


def test_a_script_run_again_under_its_name_runs_beside_the_earlier_experiment(
        storage_dir: str, caplog: pytest.LogCaptureFixture) -> None:
    # recorded from Ray 2.60: a second fit() under the same RunConfig(name=...) runs and returns only its own
    # trials (Ray writes them into the same directory, whose newest state Tuner.restore then continues);
    # audition saves the new run beside the old one, so not a byte of the earlier experiment changes
    grid = _fit(steps, storage_dir, name="same", param_space={"steps": 1})
    files = {}
    for d, _, names in os.walk(grid.experiment_path):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                files[os.path.join(d, n)] = f.read()
    with caplog.at_level(logging.WARNING, logger="audition"):
        again = _fit(steps, storage_dir, name="same", param_space={"steps": 3})
    assert again.experiment_path == grid.experiment_path + "_2"
    assert [r.metrics["training_iteration"] for r in again] == [3]  # its own trial only, as Ray's
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "an experiment named 'same' already exists at" in said
    assert "Tuner.restore(" in said and "this run is saved as 'same_2'" in said
    after = {}
    for d, _, names in os.walk(grid.experiment_path):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                after[os.path.join(d, n)] = f.read()
    assert after == files  # not a byte of the earlier experiment changed
    for path, iterations in ((grid.experiment_path, [1]), (again.experiment_path, [3])):
        restored = Tuner.restore(path, steps).get_results()
        assert [r.metrics["training_iteration"] for r in restored] == iterations
    third = _fit(steps, storage_dir, name="same", param_space={"steps": 2})
    assert third.experiment_path == grid.experiment_path + "_3"


def test_a_script_run_again_under_its_name_on_s3_runs_beside_the_earlier_one(
        s3_location: tuple[str, dict[str, Any]]) -> None:
    url, options = s3_location
    first = _fit(steps, url, name="same", storage_options=options, param_space={"steps": 1})
    again = _fit(steps, url, name="same", storage_options=options, param_space={"steps": 2})
    assert again.experiment_path == first.experiment_path + "_2"
    for path, iterations in ((first.experiment_path, [1]), (again.experiment_path, [2])):
        restored = Tuner.restore(path, steps, storage_options=options).get_results()
        assert [r.metrics["training_iteration"] for r in restored] == iterations


def test_generated_names_never_overwrite_an_earlier_experiment(storage_dir) -> None:
    tuner = Tuner(steps, run_config=RunConfig(storage=storage_dir, system="simple", verbose=0))
    first = tuner.fit().experiment_path
    second = tuner.fit().experiment_path  # the same generated name: a new directory, not over the first
    assert second == first + "_2"
    assert Tuner.can_restore(first) and Tuner.can_restore(second)


def _searcher_raising_in(hook: str) -> Any:
    from actors.search import Searcher

    class Broken(Searcher):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def suggest(self, trial_id: str) -> Any:
            if hook == "suggest":
                raise KeyError("no space")
            self.n += 1
            return {"x": self.n} if self.n <= 2 else Searcher.FINISHED

        def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
            if hook == "on_trial_result":
                raise ValueError("bad result")

        def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
            if hook == "on_trial_complete":
                raise RuntimeError("bad end")

        def save(self) -> dict[str, Any]:
            return {"n": self.n}

        def restore(self, state: dict[str, Any]) -> None:
            self.n = state["n"]

    return Broken()


def _reports(config: dict[str, Any]) -> None:
    report({"loss": config["x"]})


@pytest.mark.parametrize("hook", ["suggest", "on_trial_result", "on_trial_complete"])
def test_a_failing_searcher_is_named_not_reported_as_an_internal_error(hook: str, storage_dir) -> None:
    tuner = Tuner(_reports, tune_config=TuneConfig(search_alg=_searcher_raising_in(hook), metric="loss", mode="min"),
                  run_config=RunConfig(system="simple", storage=storage_dir, verbose=0))
    with pytest.raises(TuneError) as info:
        tuner.fit()
    text = str(info.value)
    assert f"the search algorithm Broken failed in {hook}" in text, text
    assert "internal error" not in text and "Traceback" not in text


def test_optuna_with_its_own_space_and_no_metric_says_where_the_metric_goes(storage_dir) -> None:
    """OptunaSearch(space=fn) does not take TuneConfig's metric/mode (as in Ray): the run stops
    naming the searcher and where to pass them, not as an internal error with a traceback."""
    pytest.importorskip("optuna")
    from actors.search import OptunaSearch

    def space(trial: Any) -> None:
        trial.suggest_float("x", 0, 1)

    tuner = Tuner(_reports, param_space={"c": 1},
                  tune_config=TuneConfig(search_alg=OptunaSearch(space=space), metric="loss", mode="min",
                                         num_samples=2),
                  run_config=RunConfig(system="simple", storage=storage_dir, verbose=0))
    says = r"OptunaSearch failed in suggest: .*pass them to OptunaSearch\(\.\.\.\)"
    with pytest.raises(TuneError, match=says) as info:
        tuner.fit()
    assert "internal error" not in str(info.value) and "Traceback" not in str(info.value)


def test_a_searcher_without_on_trial_complete_is_refused_when_built() -> None:
    # Ray 2.60 builds it and fit() raises TuneError(NotImplementedError) once the first trial completes
    # (recorded); audition's Searcher declares both hooks abstract, so the class is refused at once
    from actors.search import Searcher

    class OnlySuggests(Searcher):
        def suggest(self, trial_id: str) -> dict[str, Any] | None:
            return {"x": 1}

    with pytest.raises(TypeError, match="abstract method on_trial_complete"):
        OnlySuggests()  # type: ignore[abstract]


def test_an_unknown_system_names_every_kind_it_takes() -> None:
    with pytest.raises(ConfigError, match=r"system='multiprocess'\).*'multiproc'.*'simple'.*'tcp://HOST:PORT'"):
        RunConfig(system="multiprocess")


def test_a_searcher_whose_save_raises_ends_the_run_with_its_error_and_the_results(storage_dir: str,
                                                                                   caplog: Any) -> None:
    """Its state is part of the experiment's, so the run stops (Ray's fit fails too), naming the searcher,
    what it raised and the fix, with no traceback of the controller's (before: an actor failure logged
    twice, and the error said only 'writing the final results failed: RuntimeError('cannot save')')."""
    from actors.search import Searcher

    class Unsaveable(Searcher):
        def __init__(self) -> None:
            super().__init__(metric="loss", mode="min")
            self.n = 0

        def suggest(self, trial_id: str) -> dict[str, Any] | None:
            self.n += 1
            return {"x": self.n} if self.n <= 3 else None

        def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
            pass

        def save(self, checkpoint_path: str = "") -> Any:
            raise RuntimeError("cannot save")

    tuner = Tuner(_reports, tune_config=TuneConfig(search_alg=Unsaveable(), num_samples=3),
                  run_config=RunConfig(system="simple", storage=storage_dir, verbose=0))
    with caplog.at_level(logging.ERROR), pytest.raises(TuneError) as info:
        tuner.fit()
    said = str(info.value)
    assert "Unsaveable.save() raised RuntimeError: cannot save" in said
    assert "raise NotImplementedError there to run without saving it" in said
    assert "internal error" not in said and "writing the final results failed" not in said
    assert not [r for r in caplog.records if "during message processing" in r.getMessage()]


@pytest.mark.parametrize("wrap", ["limiter", "repeater"])
def test_a_wrapper_around_the_default_generator_is_refused(wrap: str, storage_dir: str) -> None:
    """Ray 2.60 refuses both (recorded: ConcurrencyLimiter(BasicVariantGenerator(), 1) raises RuntimeError
    'only works with Searcher objects', Repeater(BasicVariantGenerator()) an AttributeError at fit); audition
    ran 1 trial where num_samples asked for 4, saying nothing."""
    from actors.search import BasicVariantGenerator, ConcurrencyLimiter, Repeater, uniform

    alg = ConcurrencyLimiter(BasicVariantGenerator(), 1) if wrap == "limiter" else Repeater(BasicVariantGenerator())
    with pytest.raises(ConfigError, match=r"not the default generator; for it set TuneConfig\(max_concurrent_trials"):
        Tuner(_reports, param_space={"x": uniform(0, 1)},
              tune_config=TuneConfig(search_alg=alg, num_samples=4, metric="loss", mode="min"),
              run_config=RunConfig(system="simple", storage=storage_dir, verbose=0)).fit()


def test_an_unpicklable_param_space_value_is_named_by_its_key(storage_dir) -> None:
    def train(config: dict) -> None:
        report({"x": 1})

    space = {"lr": 0.1, "model": {"opts": [1, threading.Lock()]}}
    with pytest.raises(ConfigError, match=r"param_space\['model'\]\['opts'\]\[1\] cannot be pickled .*_thread.lock"):
        Tuner(train, param_space=space, run_config=RunConfig(storage=storage_dir, verbose=0))
    assert not os.path.exists(storage_dir) or not os.listdir(storage_dir)  # (refused before anything is written)
