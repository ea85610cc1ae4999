"""PBT fills the mutated keys a trial's config lacks, as Ray Tune 2.60's ``on_trial_add`` does.

Recorded from Ray 2.60 (``ray.init()``, then ``random.seed(3)``, ``numpy.random.seed(3)`` in the script, the
space and mutations below, ``num_samples=2``): each trial's config, its ``evaluated_params`` (a callback's
``on_trial_start``) and its ``experiment_tag``. No test imports Ray.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

np = pytest.importorskip("numpy")

import cloudpickle  # noqa: E402

from actors import Callback, RunConfig, TuneConfig, Tuner, report  # noqa: E402
from actors import search as tune  # noqa: E402
from actors.schedulers import PopulationBasedTraining  # noqa: E402
from actors.search import BasicVariantGenerator  # noqa: E402

RAY = [  # (config, evaluated_params, experiment_tag), by trial
    ({"x": 1, "u": 0.5507979025745755, "g": 1, "s": 0.23796462709189137, "lr": 0.3, "m": 0.2909047389129443,
      "f": 0.13042279608514273, "nest": {"a": 3, "b": 5.5108276051976635}, "q": 5},
     {"u": 0.5507979025745755, "g": 1, "lr": 0.3, "m": 0.2909047389129443, "f": 0.13042279608514273,
      "nest": {"a": 3, "b": 5.5108276051976635}, "q": 5}, "0_g=1,u=0.5508"),
    ({"x": 1, "u": 0.7081478226181048, "g": 2, "s": 0.47405353654712656, "lr": 0.3, "m": 0.43706194234112716,
      "f": 0.06552885923981311, "nest": {"a": 1, "b": 5.018748008650432}, "q": 5},
     {"u": 0.7081478226181048, "g": 2, "lr": 0.3, "m": 0.43706194234112716, "f": 0.06552885923981311,
      "nest": {"a": 1, "b": 5.018748008650432}, "q": 5}, "1_g=2,u=0.7081"),
    ({"x": 1, "u": 0.20724287813818676, "g": 1, "s": 0.9088184001853248, "lr": 0.2, "m": 0.44080984365063647,
      "f": 0.25935401432800764, "nest": {"a": 1, "b": 5.029876210878567}, "q": 6},
     {"u": 0.20724287813818676, "g": 1, "lr": 0.2, "m": 0.44080984365063647, "f": 0.25935401432800764,
      "nest": {"a": 1, "b": 5.029876210878567}, "q": 6}, "2_g=1,u=0.2072"),
    ({"x": 1, "u": 0.05146720330082988, "g": 2, "s": 0.1917441039952995, "lr": 0.3, "m": 0.6491440476147607,
      "f": 0.47026350752244794, "nest": {"a": 3, "b": 5.278487282647975}, "q": 6},
     {"u": 0.05146720330082988, "g": 2, "lr": 0.3, "m": 0.6491440476147607, "f": 0.47026350752244794,
      "nest": {"a": 3, "b": 5.278487282647975}, "q": 6}, "3_g=2,u=0.0515"),
]
RAY_NUMPY_AFTER = 0.49263592504607745  # numpy.random.random() in the script after fit()


def _mutations() -> dict[str, Any]:
    # "x" is in the param_space: Ray fills only the keys a config lacks
    return {"lr": [0.1, 0.2, 0.3], "m": tune.uniform(0, 1), "f": lambda: random.random(),
            "nest": {"a": [1, 2, 3], "b": tune.uniform(5, 6)}, "x": [7, 8], "q": tune.choice([4, 5, 6])}


def _space() -> dict[str, Any]:
    return {"x": 1, "u": tune.uniform(0, 1), "g": tune.grid_search([1, 2]),
            "s": tune.sample_from(lambda spec: random.random())}


class _Seen(Callback):
    def __init__(self) -> None:
        self.seen: dict[str, tuple[dict[str, Any], str]] = {}

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.seen[trial.trial_id] = (dict(trial.evaluated_params), trial.experiment_tag)


def _train(config: dict[str, Any]) -> None:
    report({"loss": config["lr"] + config["nest"]["b"]})  # (Ray's trainable reads the filled keys)


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_missing_mutated_keys_are_filled_as_ray_fills_them(tmp_path: Any, system: str) -> None:
    seen = _Seen()
    random.seed(3)
    np.random.seed(3)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=100, metric="loss",
                                  mode="min", hyperparam_mutations=_mutations())
    grid = Tuner(_train, param_space=_space(), tune_config=TuneConfig(scheduler=pbt, num_samples=2),
                 run_config=RunConfig(storage=str(tmp_path), name="fill", verbose=0, callbacks=[seen],
                                      system=system)).fit()
    got = []
    for r in sorted(grid, key=lambda r: r.metrics["trial_id"]):
        assert r.error is None
        assert list(r.config) == list(RAY[0][0])  # the filled keys after the param_space's, in Ray's order
        params, tag = seen.seen[r.metrics["trial_id"]]
        assert list(params) == list(RAY[0][1])
        got.append((r.config, params, tag))
        assert r.metrics["experiment_tag"] == tag
    assert got == RAY
    assert np.random.random() == RAY_NUMPY_AFTER  # the driver's numpy stream goes on after the fills


def test_nothing_is_filled_when_the_param_space_has_every_mutated_key(tmp_path: Any) -> None:
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=100, metric="loss",
                                  mode="min", hyperparam_mutations={"lr": [0.1, 0.2]})
    grid = Tuner(_train, param_space={"lr": 0.5, "nest": {"b": 1.0}},
                 tune_config=TuneConfig(scheduler=pbt, num_samples=2),
                 run_config=RunConfig(storage=str(tmp_path), name="full", verbose=0, system="simple")).fit()
    assert [r.config for r in grid] == [{"lr": 0.5, "nest": {"b": 1.0}}] * 2


def test_a_saved_generator_keeps_filling_after_a_restore() -> None:
    pbt = PopulationBasedTraining(metric="loss", mode="min", hyperparam_mutations={"lr": [0.1, 0.2, 0.3]})

    def gen() -> BasicVariantGenerator:
        g = BasicVariantGenerator(param_space={"x": tune.uniform(0, 1)}, num_samples=4)
        g.fill_on_add = pbt.config_fill()
        return g

    random.seed(5)
    np.random.seed(5)
    straight = gen()
    straight.capture_driver_stream()
    expected = [straight.suggest(f"t{i}") for i in range(4)]
    assert all(c["lr"] in (0.1, 0.2, 0.3) for c in expected)
    random.seed(5)
    np.random.seed(5)
    first = gen()
    first.capture_driver_stream()
    head = [first.suggest(f"t{i}") for i in range(2)]
    again = BasicVariantGenerator()
    again.restore(cloudpickle.loads(cloudpickle.dumps(first.save())))  # (a run's state is cloudpickled)
    assert head + [again.suggest(f"t{i}") for i in range(2, 4)] == expected


def test_a_simulation_fills_from_its_seed_not_the_process_streams() -> None:
    from actors.testing import simulate

    def run() -> list[dict[str, Any]]:
        pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                      hyperparam_mutations={"lr": [0.1, 0.2, 0.3], "m": tune.uniform(0, 1)})
        random.seed()  # whatever state the process is in
        np.random.seed()
        sim = simulate(lambda c, i: {"loss": c["lr"] * c["m"] / i}, {"x": tune.uniform(0, 1)},
                       TuneConfig(metric="loss", mode="min", num_samples=4, scheduler=pbt), max_iterations=4, seed=7)
        assert sim.results is not None and not sim.hung
        configs = [r.metrics["config"] for r in sorted(sim.results, key=lambda r: r.metrics["trial_id"])]
        sim.discard()
        return configs

    first = run()
    assert all({"x", "lr", "m"} <= set(c) for c in first)
    assert run() == first


class _Suggests(tune.Searcher):
    def suggest(self, trial_id: str) -> dict[str, Any]:
        return {"lr": 0.1}

    def on_trial_complete(self, trial_id: str, result: Any = None, error: bool = False) -> None:
        pass


def test_pbt_and_pb2_refuse_a_search_algorithm_as_ray_does() -> None:
    # Ray 2.60 (recorded): fit() raises ValueError "Search algorithms cannot be used with
    # PopulationBasedTraining schedulers. Please remove <SearchGenerator ...>." (PB2: "with PB2 schedulers"),
    # also for a ConcurrencyLimiter; the default generator, given explicitly, runs
    from actors._driver.errors import ConfigError
    from actors.schedulers import PB2
    from actors.search import ConcurrencyLimiter

    pbt = PopulationBasedTraining(metric="loss", mode="min", hyperparam_mutations={"lr": [0.1, 0.2]})
    with pytest.raises(ConfigError, match=r"^Search algorithms cannot be used with PopulationBasedTraining "
                                          r"schedulers \(as in Ray Tune\)\. Please remove TuneConfig\(search_alg="
                                          r"_Suggests\(\.\.\.\)\): put the search space in param_space"):
        Tuner(_train, tune_config=TuneConfig(scheduler=pbt, search_alg=_Suggests()))
    pb2 = PB2(metric="loss", mode="min", hyperparam_bounds={"lr": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"with PB2 schedulers .*search_alg=ConcurrencyLimiter"):
        Tuner(_train, tune_config=TuneConfig(scheduler=pb2, search_alg=ConcurrencyLimiter(_Suggests(), 1)))
    Tuner(_train, param_space={"lr": tune.uniform(0.1, 0.2)},
          tune_config=TuneConfig(scheduler=pbt, search_alg=BasicVariantGenerator(), num_samples=2))
