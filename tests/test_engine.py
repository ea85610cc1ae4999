"""End-to-end runs of the engine on the in-process and the multi-process systems."""

from __future__ import annotations

import threading

import pytest

from actors import RunConfig, TuneConfig, Tuner
from actors._driver.errors import ConfigError, TuneError
from actors._engine.trial import TrialStatus
from actors.search import SearchSpaceError, grid_search
from tests import _trainables as T

SYSTEMS = ["simple", "multiproc"]


def _fit(trainable, storage_dir, system="simple", scheduler=None, space=None, **run):
    tuner = Tuner(
        trainable,
        param_space=space or {"x": grid_search([1.0, 2.0])},
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler),
        run_config=RunConfig(name="exp", storage=storage_dir, system=system, verbose=0, **run),
    )
    return tuner.fit()


def _iterations(result):
    return [r["training_iteration"] for r in result.metrics_history]


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("trainable", [T.fn_trainable, T.ClassTrainable], ids=["function", "class"])
def test_seed_scenario_pause_from_hook_then_noop(system, trainable, storage_dir, no_leaks):
    """The Ray Tune hang: the trial must pause with a checkpoint, resume from it, and finish."""
    grid = _fit(trainable, storage_dir, system, scheduler=T.PauseFromHook(at=2))
    assert grid.num_errors == 0
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        assert _iterations(r) == list(range(1, T.STEPS + 1))  # continues, no restart, no duplicate
        history = r.metrics_history
        assert history[2]["restored_from"] == 1  # step 3 ran after restoring the checkpoint of step 2
        assert history[1]["restored_from"] == -1
        assert r.checkpoint is not None


@pytest.mark.parametrize("system", SYSTEMS)
def test_stop_arriving_during_save_wins(system, storage_dir, no_leaks):
    """'a' is pausing with a 0.5 s save; 'b''s hook stops 'a' (and pauses it again) meanwhile."""
    grid = _fit(T.RoleTrainable, storage_dir, system, scheduler=T.StopDuringSave(),
                space={"role": grid_search(["a", "b"])})
    by_role = {r.config["role"]: r for r in grid}
    a = by_role["a"]
    assert a.status is TrialStatus.TERMINATED
    assert a.metrics["training_iteration"] == 2  # stopped at the pause point, never resumed
    assert a.checkpoint is not None  # the save in flight completed before the STOP took effect
    assert by_role["b"].metrics["training_iteration"] == 40


@pytest.mark.parametrize("system", SYSTEMS)
def test_pause_on_every_result_finishes(system, storage_dir, no_leaks):
    grid = _fit(T.fn_trainable, storage_dir, system, scheduler=T.PauseEveryResult(),
                space={"x": grid_search([1.0, 2.0, 3.0]), "steps": 4})
    assert [r.status for r in grid] == [TrialStatus.TERMINATED] * 3
    for r in grid:
        assert _iterations(r) == [1, 2, 3, 4]
        assert [h["restored_from"] for h in r.metrics_history] == [-1, 0, 1, 2]


def test_sigkill_retried_from_checkpoint(storage_dir, no_leaks):
    from actors import FailureConfig

    grid = _fit(T.killer, storage_dir, "multiproc", space={"kill": grid_search([True, False])},
                scheduler=T.PerResultFIFO(), failure_config=FailureConfig(max_failures=1))
    by_kill = {r.config["kill"]: r for r in grid}
    killed = by_kill[True]
    assert killed.status is TrialStatus.TERMINATED and killed.num_failures == 1
    assert _iterations(killed) == [1, 2, 3, 4, 5, 6]
    assert killed.metrics_history[4]["restored_from"] == 3
    assert by_kill[False].num_failures == 0


def test_sigkill_without_retries_errors_and_rest_completes(storage_dir, no_leaks):
    grid = _fit(T.killer, storage_dir, "multiproc", space={"kill": grid_search([True, False])})
    by_kill = {r.config["kill"]: r for r in grid}
    assert by_kill[True].status is TrialStatus.ERROR
    assert "the trial's process died (killed by SIGKILL" in str(by_kill[True].error)
    assert by_kill[False].status is TrialStatus.TERMINATED
    assert grid.num_errors == 1


@pytest.mark.parametrize("system", SYSTEMS)
def test_trainable_that_raises_is_an_error_with_traceback(system, storage_dir, no_leaks):
    grid = _fit(T.raiser, storage_dir, system, space={"fail": grid_search([True, False])})
    bad = next(r for r in grid if r.config["fail"])
    assert bad.status is TrialStatus.ERROR
    assert "ValueError: bad hyperparameter" in str(bad.error)
    assert "raise ValueError" in bad.error.traceback_text
    assert grid.get_best_result().config == {"fail": False}


def test_non_picklable_trainable_is_refused_before_start(storage_dir):
    lock = threading.Lock()

    def train(config):
        with lock:
            pass

    with pytest.raises(ConfigError, match="cannot be pickled"):
        Tuner(train, run_config=RunConfig(storage=storage_dir))


def test_invalid_search_space(storage_dir):
    from actors.search import loguniform

    with pytest.raises(SearchSpaceError, match="lower"):
        Tuner(T.fn_trainable, param_space={"lr": loguniform(0, 1)}, run_config=RunConfig(storage=storage_dir))


def test_bad_mode_and_unknown_metric(storage_dir, no_leaks):
    with pytest.raises(ConfigError, match="mode must be 'min' or 'max'"):
        TuneConfig(metric="loss", mode="minimum")
    grid = _fit(T.fn_trainable, storage_dir, space={"x": grid_search([1.0, 2.0]), "steps": 2})
    with pytest.raises(ConfigError, match="no trial reported the metric 'accuracy'") as raised:
        grid.get_best_result(metric="accuracy", mode="max")
    assert isinstance(raised.value, RuntimeError)  # what Ray Tune raises there
    with pytest.raises(ConfigError, match="mode must be 'min' or 'max'"):
        grid.get_best_result(metric="loss", mode="up")


@pytest.mark.parametrize("system", SYSTEMS)
def test_scheduler_that_raises_stops_the_experiment_clearly(system, storage_dir, no_leaks):
    with pytest.raises(TuneError, match="Exploding raised in its result hook"):
        _fit(T.fn_trainable, storage_dir, system, scheduler=T.Exploding())


def test_memory_storage_refused_for_multiproc():
    with pytest.raises(ConfigError, match="one process's memory"):
        Tuner(T.fn_trainable, run_config=RunConfig(storage="memory://x"))


def test_memory_storage_works_in_process(no_leaks):
    grid = _fit(T.fn_trainable, "memory://audition-test", "simple", space={"x": 1.0, "steps": 3})
    assert _iterations(grid[0]) == [1, 2, 3]


def test_missing_metric_in_results_is_a_clear_error(storage_dir, no_leaks):
    def train(config):
        from actors import report
        report({"acc": 1.0})

    with pytest.raises(TuneError, match=r"without the metric 'loss'.*'acc'"):
        _fit(train, storage_dir, space={"x": 1})
