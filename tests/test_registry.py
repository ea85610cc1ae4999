"""Ray's name registries: ``register_trainable`` (``Tuner("name")``, ``tune.run("name")``, ``Tuner.restore``),
``create_scheduler`` and ``create_searcher``.

The expected values were recorded from Ray 2.60 (/work/rayvenv) by probe scripts that ran the same
trainables under ``ray.tune`` (``register_trainable``, ``Tuner(name).fit()``, ``tune.run(name)``,
``Tuner.restore``, and every name of ``create_scheduler``/``create_searcher``) and printed the results,
errors and messages quoted here.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import actors as tune
from actors import Checkpoint, RunConfig, Trainable, Tuner, get_checkpoint
from actors._driver import registry
from actors.schedulers import (
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
)
from actors.search import BasicVariantGenerator, grid_search


def train_fn(config: dict[str, Any]) -> None:
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["i"] + 1 if ckpt else 0
    for i in range(start, 3):
        tune.report({"score": config["x"] * (i + 1), "name": tune.get_context().get_trial_name(), "pid": os.getpid()},
                    checkpoint=Checkpoint.from_dict({"i": i}))


def train_fn2(config: dict[str, Any]) -> None:
    tune.report({"score": -1})


class MyT(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.x = config["x"]

    def step(self) -> dict[str, Any]:
        return {"score": self.x * (self.iteration + 1), "done": self.iteration >= 2}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"x": self.x}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.x = checkpoint["x"]


@pytest.fixture
def names() -> Iterator[None]:
    """Leave the process's registry as it was."""
    before = dict(registry._TRAINABLES)
    yield
    registry._TRAINABLES.clear()
    registry._TRAINABLES.update(before)


# ------------------------------------------------------------------ register_trainable


def test_registered_function_and_class_run_in_trial_processes(names, storage_dir, no_leaks) -> None:
    # Ray 2.60: both experiments give scores 3 and 6 at training_iteration 3, trials named myfn_<id>
    assert tune.register_trainable("myfn", train_fn) is None
    tune.register_trainable("mycls", MyT, warn=False)
    for name in ("myfn", "mycls"):
        grid = Tuner(name, param_space={"x": grid_search([1, 2])},
                     run_config=RunConfig(storage=storage_dir, name=f"exp_{name}", verbose=0)).fit()
        assert grid.num_errors == 0
        assert sorted((r.config["x"], r.metrics["score"], r.metrics["training_iteration"]) for r in grid) == [
            (1, 3, 3), (2, 6, 3)]
    fn_grid = Tuner.restore(f"{storage_dir}/exp_myfn", "myfn").get_results()
    assert all(r.metrics["name"].startswith("myfn_") for r in fn_grid)
    assert os.getpid() not in {r.metrics["pid"] for r in fn_grid}  # the trials ran in processes of their own


def test_unknown_name_is_a_tune_error_naming_the_fix(names, storage_dir) -> None:
    # Ray 2.60: Tuner("nosuch") is built; its fit() and tune.run("nosuch2") raise TuneError('Unknown trainable: nosuch')
    tuner = Tuner("nosuch", param_space={"x": 1}, run_config=RunConfig(storage=storage_dir, name="nosuch", verbose=0))
    with pytest.raises(tune.TuneError, match=r"Unknown trainable: nosuch\b.*register_trainable\('nosuch'"):
        tuner.fit()
    assert not os.path.exists(os.path.join(storage_dir, "nosuch"))  # refused before anything was written
    with pytest.raises(tune.TuneError, match=r"Unknown trainable: nosuch2\b"):
        tune.run("nosuch2", config={"x": 1}, storage_path=storage_dir, verbose=0)


def test_the_name_is_looked_up_by_fit(names, storage_dir) -> None:
    # Ray 2.60 (recorded: Tuner("late") before register_trainable("late", a), then fit(): a's result, trial named
    # late_<id>; register_trainable("swap", a), Tuner("swap"), register_trainable("swap", b), fit(): b's result)
    late = Tuner("late", param_space={"x": 1}, run_config=RunConfig(storage=storage_dir, name="late", verbose=0,
                                                                   system="simple"))
    tune.register_trainable("late", train_fn2)
    tune.register_trainable("swap", train_fn2)
    swap = Tuner("swap", param_space={"x": 2}, run_config=RunConfig(storage=storage_dir, name="swap", verbose=0,
                                                                   system="simple"))
    tune.register_trainable("swap", train_fn)
    (late_result,) = late.fit()
    assert late_result.metrics["score"] == -1
    assert late_result.metrics["training_iteration"] == 1
    (swap_result,) = swap.fit()
    assert [m["score"] for m in swap_result.metrics_history] == [2, 4, 6]
    assert swap_result.metrics["name"].startswith("swap_")


@pytest.mark.parametrize("bad", [5, "train_fn", dict], ids=["int", "str", "not-a-Trainable"])
def test_register_refuses_what_is_not_a_trainable(names, bad: Any) -> None:
    # Ray 2.60: TypeError for all three ('issubclass() arg 1 must be a class' for 5 and "train_fn";
    # ('Second argument must be convertable to Trainable', dict))
    with pytest.raises(TypeError, match="register_trainable"):
        tune.register_trainable("bad", bad)
    assert "bad" not in registry._TRAINABLES


def test_run_takes_a_name_and_a_second_registration_replaces_the_first(names, storage_dir, no_leaks) -> None:
    # Ray 2.60: tune.run("myfn", config={"x": 3}) -> last score 9, trial myfn_<id>; after registering
    # train_fn2 under the same name, Tuner("myfn") runs train_fn2 (score -1)
    tune.register_trainable("myfn", train_fn)
    analysis = tune.run("myfn", config={"x": 3}, storage_path=storage_dir, name="runexp", verbose=0,
                        search_alg="random", scheduler="FIFO")
    assert [t.last_result["score"] for t in analysis.trials] == [9]
    assert analysis.trials[0].last_result["name"].startswith("myfn_")
    tune.register_trainable("myfn", train_fn2)
    grid = Tuner("myfn", param_space={"x": 1},
                 run_config=RunConfig(storage=storage_dir, name="rereg", verbose=0)).fit()
    assert grid[0].metrics["score"] == -1


def test_restore_of_a_registered_name_needs_the_name(names, storage_dir, no_leaks) -> None:
    # Ray 2.60: Tuner.restore(path, trainable=train_fn) and (..., trainable="mycls") raise ValueError
    # "Invalid `trainable` input to `Tuner.restore()`. ... Got a trainable with identifier 'train_fn' but
    # expected 'myfn'."; (..., trainable="myfn") restores, and its fit() gives the scores [6, 3]
    tune.register_trainable("myfn", train_fn)
    tune.register_trainable("mycls", MyT)
    path = f"{storage_dir}/exp"
    Tuner("myfn", param_space={"x": grid_search([1, 2])},
          run_config=RunConfig(storage=storage_dir, name="exp", verbose=0)).fit()
    for other, got in ((train_fn, "train_fn"), ("mycls", "mycls")):
        with pytest.raises(ValueError, match=rf"Invalid `trainable` input to `Tuner.restore\(\)`.*'myfn'.*'{got}'"):
            Tuner.restore(path, other)
    grid = Tuner.restore(path, "myfn", resume_errored=True).fit()
    assert sorted(r.metrics["score"] for r in grid) == [3, 6]
    # an experiment started with the function itself is checked by its name too (see test_restore_trainable.py)
    Tuner(train_fn, param_space={"x": 1}, run_config=RunConfig(storage=storage_dir, name="plain", verbose=0)).fit()
    with pytest.raises(ValueError, match="started with 'train_fn', got 'myfn'"):
        Tuner.restore(f"{storage_dir}/plain", "myfn")
    assert Tuner.restore(f"{storage_dir}/plain", train_fn).trainable_name == "train_fn"


# ------------------------------------------------------------------ create_scheduler / create_searcher


def test_exported_where_ray_exports_them() -> None:
    import actors.schedulers
    import actors.search

    assert tune.create_scheduler is actors.schedulers.create_scheduler
    assert tune.create_searcher is actors.search.create_searcher
    assert {"create_scheduler", "create_searcher", "register_trainable"} <= set(tune.__all__)
    assert "create_scheduler" in actors.schedulers.__all__ and "create_searcher" in actors.search.__all__


@pytest.mark.parametrize(("name", "cls"), [
    ("fifo", FIFOScheduler), ("FIFO", FIFOScheduler), ("async_hyperband", AsyncHyperBandScheduler),
    ("asynchyperband", AsyncHyperBandScheduler), ("median_stopping_rule", MedianStoppingRule),
    ("medianstopping", MedianStoppingRule), ("hyperband", HyperBandScheduler)])
def test_create_scheduler_maps_rays_names(name: str, cls: type) -> None:
    # Ray 2.60: each builds that class with its defaults (AsyncHyperBandScheduler: max_t 100)
    made = tune.create_scheduler(name)
    assert type(made) is cls


def test_create_scheduler_passes_the_arguments_the_class_takes() -> None:
    # Ray 2.60: create_scheduler("async_hyperband", metric="loss", mode="min", max_t=7, bogus=3) builds it
    # with max_t 7 and drops bogus (silently; audition warns)
    with pytest.warns(UserWarning, match=r"takes no \['bogus'\]"):
        asha = tune.create_scheduler("async_hyperband", metric="loss", mode="min", max_t=7, bogus=3)
    assert (asha.metric, asha.mode, asha.max_t) == ("loss", "min", 7)
    pbt = tune.create_scheduler("pbt", metric="loss", mode="min", perturbation_interval=2,
                                hyperparam_mutations={"lr": [1, 2]})
    assert isinstance(pbt, PopulationBasedTraining) and pbt.perturbation_interval == 2
    # Ray 2.60: create_scheduler("pbt") -> TuneError 'You must specify at least one of `hyperparam_mutations`
    # or `custom_explore_fn` to use PBT.' (the class's own check)
    with pytest.raises(ValueError, match="hyperparam_mutations"):
        tune.create_scheduler("pbt")


RAY_SCHEDULERS = ("['fifo', 'async_hyperband', 'asynchyperband', 'median_stopping_rule', 'medianstopping', "
                  "'hyperband', 'hb_bohb', 'pbt', 'pbt_replay', 'pb2', 'resource_changing']")


def test_create_scheduler_unknown_and_not_offered_names() -> None:
    # Ray 2.60: create_scheduler("asha") -> ValueError "The `scheduler` argument must be one of [...]. Got: asha"
    for name in ("asha", "nosuch"):
        with pytest.raises(ValueError) as info:
            tune.create_scheduler(name)
        assert str(info.value) == f"The `scheduler` argument must be one of {RAY_SCHEDULERS}. Got: {name}"
    # Ray 2.60 builds ResourceChangingScheduler; so does audition (tests/test_resource_changing.py)
    assert type(tune.create_scheduler("resource_changing")).__name__ == "ResourceChangingScheduler"
    # Ray 2.60: AttributeError "'int' object has no attribute 'lower'"
    with pytest.raises(TypeError, match="must be a name such as 'fifo', got int"):
        tune.create_scheduler(5)  # type: ignore[arg-type]


def test_create_searcher_names() -> None:
    # Ray 2.60: "variant_generator", "random", "Random" -> BasicVariantGenerator; kwargs it does not take dropped
    for name in ("variant_generator", "random", "Random"):
        assert type(tune.create_searcher(name)) is BasicVariantGenerator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = tune.create_searcher("random", max_concurrent=2, random_state=1, bogus=1)
    assert type(made) is BasicVariantGenerator
    # Ray 2.60: "nosuch" -> ValueError "The `search_alg` argument must be one of [...]. Got: nosuch"
    with pytest.raises(ValueError) as info:
        tune.create_searcher("NoSuch")
    assert str(info.value) == ("The `search_alg` argument must be one of ['variant_generator', 'random', 'ax', "
                               "'hyperopt', 'bayesopt', 'bohb', 'nevergrad', 'optuna', 'zoopt', 'hebo']. Got: nosuch")
    # Ray 2.60 builds these when their libraries are installed (AssertionError naming the pip package otherwise)
    for name, what in (("ax", "AxSearch"), ("hebo", "HEBOSearch")):
        with pytest.raises(ValueError, match=rf"Ray Tune's {what}, which audition does not offer; instead: .*'optuna'"):
            tune.create_searcher(name)


def test_create_searcher_nevergrad() -> None:
    ng = pytest.importorskip("nevergrad")
    from actors.search.nevergrad import NevergradSearch

    made = tune.create_searcher("nevergrad", optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="min")
    assert type(made) is NevergradSearch


def test_create_searcher_optuna() -> None:
    pytest.importorskip("optuna")
    from actors.search import OptunaSearch

    made = tune.create_searcher("optuna", metric="loss", mode="min")
    assert type(made) is OptunaSearch
