"""A seed gives Ray 2.60's configs: the values in tests/_ray_draws_data.py were recorded from Ray."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import pytest

np = pytest.importorskip("numpy")

import actors as tune  # noqa: E402
from actors import RunConfig, TuneConfig, Tuner  # noqa: E402
from actors.schedulers import ASHAScheduler  # noqa: E402
from actors.search import BasicVariantGenerator  # noqa: E402
from tests._ray_draws_data import FIT, SAMPLE, SAMPLED, space  # noqa: E402
from tests._ulps import assert_close  # noqa: E402

SEEDED = ("sf", "sfa")  # drawn by np.random in sample_from: unseeded in the seeded recordings


def _trainable(config: dict[str, Any]) -> dict[str, float]:
    return {"score": 1.0}


def _fit(tmp_path: Any, system: str = "simple", **tc: Any) -> list[dict[str, Any]]:
    tune_config = TuneConfig(num_samples=3, metric="score", mode="max", **tc)
    results = Tuner(_trainable, param_space=space(), tune_config=tune_config,
                    run_config=RunConfig(storage=str(tmp_path), system=system, verbose=0)).fit()
    rows = sorted((r.metrics["trial_id"], r.config) for r in results)
    configs: list[dict[str, Any]] = json.loads(json.dumps([c for _, c in rows]))[:6]
    return configs


def _without(configs: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k not in keys} for c in configs]


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_domain_sample_draws_rays_values(name: str) -> None:
    domain, want = SAMPLED[name], SAMPLE[name]
    cast = (lambda v: v) if name == "c" else float
    assert [cast(v) for v in domain.sample(size=3, random_state=42)] == want["int"]
    assert [cast(v) for v in domain.sample(size=3, random_state=np.random.default_rng(5))] == want["gen"]
    assert [cast(v) for v in domain.sample(size=3, random_state=np.random.RandomState(6))] == want["rs"]
    assert cast(domain.sample(random_state=9)) == want["one"]


@pytest.mark.parametrize(("label", "random_state"), [
    ("int7", lambda: 7), ("gen", lambda: np.random.default_rng(11)), ("rs", lambda: np.random.RandomState(13))])
def test_a_random_state_gives_rays_configs(tmp_path: Any, label: str, random_state: Any) -> None:
    got = _fit(tmp_path, search_alg=BasicVariantGenerator(random_state=random_state()))
    assert_close(_without(got, SEEDED), FIT[label])


def test_tune_config_seed_is_random_state(tmp_path: Any) -> None:
    # audition's TuneConfig(seed=7) seeds the default generator as Ray's random_state=7 does
    assert_close(_without(_fit(tmp_path, seed=7), SEEDED), FIT["int7"])


def test_numpy_random_seed_in_the_script_gives_rays_configs(tmp_path: Any) -> None:
    np.random.seed(2024)
    assert_close(_fit(tmp_path), FIT["global_fifo"])


def test_asha_takes_its_global_draw_per_trial_as_in_ray(tmp_path: Any) -> None:
    # Ray's ASHA draws np.random.choice(brackets, p=...) as each trial is added, between the
    # generator's draws: the configs after the first differ from FIFO's
    np.random.seed(2024)
    assert_close(_fit(tmp_path, scheduler=ASHAScheduler()), FIT["global_asha"])
    assert FIT["global_asha"][1:] != FIT["global_fifo"][1:]


def test_the_drivers_seed_reaches_the_controller_process(tmp_path: Any) -> None:
    # the default system draws in the controller actor's process: the driver's seeded state goes there
    np.random.seed(2024)
    assert_close(_fit(tmp_path, system="multiproc", scheduler=ASHAScheduler()), FIT["global_asha"])


def test_sample_from_is_drawn_per_trial_under_constant_grid_search(tmp_path: Any) -> None:
    # recorded from Ray 2.60: np.random.seed(5), this space, constant_grid_search=True, num_samples=2
    np.random.seed(5)
    param_space = {"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2, 3]),
                   "r": tune.sample_from(lambda c: float(np.random.uniform()))}
    results = Tuner(_trainable, param_space=param_space,
                    tune_config=TuneConfig(search_alg=BasicVariantGenerator(constant_grid_search=True),
                                           num_samples=2),
                    run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    got = [c for _, c in sorted((r.metrics["trial_id"], r.config) for r in results)]
    assert got == [
        {"x": 0.22199317108973948, "g": 1, "r": 0.8707323061773764},
        {"x": 0.22199317108973948, "g": 2, "r": 0.20671915533942642},
        {"x": 0.22199317108973948, "g": 3, "r": 0.9186109079379216},
        {"x": 0.48841118879482914, "g": 1, "r": 0.6117438629026457},
        {"x": 0.48841118879482914, "g": 2, "r": 0.7659078564803156},
        {"x": 0.48841118879482914, "g": 3, "r": 0.5184179878729432},
    ]


# recorded from Ray 2.60: random.seed(0), np.random.seed(1), this space, num_samples=2 (Ray calls the
# sample_from functions in the driver, so they draw from the script's seeded Python random)
PY_RANDOM_CONFIGS = [
    {"a": 0.8444218515250481, "b": 0.417022004702574, "c": "y", "g": 1},
    {"a": 0.04048437818077755, "b": 0.7203244934421581, "c": "z", "g": 2},
    {"a": 0.48592769656281265, "b": 0.00011437481734488664, "c": "y", "g": 1},
    {"a": 0.9677999949201714, "b": 0.30233257263183977, "c": "y", "g": 2},
]


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_random_seed_in_the_script_reaches_sample_from_as_in_ray(tmp_path: Any, system: str) -> None:
    import random

    random.seed(0)
    np.random.seed(1)
    param_space = {"a": tune.sample_from(lambda spec: random.random()), "b": tune.uniform(0, 1),
                   "c": tune.sample_from(lambda spec: random.choice(["x", "y", "z"])),
                   "g": tune.grid_search([1, 2])}
    results = Tuner(_trainable, param_space=param_space, tune_config=TuneConfig(num_samples=2),
                    run_config=RunConfig(storage=str(tmp_path), system=system, verbose=0)).fit()
    assert [c for _, c in sorted((r.metrics["trial_id"], r.config) for r in results)] == PY_RANDOM_CONFIGS
    # the script's stream goes on after the draws, as Ray's (which its own init moves further)
    random.seed(0)
    for _ in range(4):
        random.random(), random.choice(["x", "y", "z"])
    expected = random.random()
    random.seed(0)
    results = Tuner(_trainable, param_space=param_space, tune_config=TuneConfig(num_samples=2),
                    run_config=RunConfig(storage=str(tmp_path), system=system, verbose=0)).fit()
    assert random.random() == expected


# recorded from Ray 2.60 (/tmp probe): np.random.seed(7), then two Tuner(...).fit() in one script, each
# num_samples=2 over {"x": tune.randint(0, 1000)}, then np.random.randint(0, 1000) in the script: the
# second run draws on from where the first left the driver's stream, and so does the script
TWO_FITS = ([{"x": 175}, {"x": 196}], [{"x": 537}, {"x": 502}], 579)


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_second_fit_draws_on_from_the_drivers_numpy_stream_as_in_ray(tmp_path: Any, system: str) -> None:
    def fit(n: int) -> list[dict[str, Any]]:
        results = Tuner(_trainable, param_space={"x": tune.randint(0, 1000)},
                        tune_config=TuneConfig(num_samples=2),
                        run_config=RunConfig(storage=str(tmp_path), name=f"fit{n}", system=system,
                                             verbose=0)).fit()
        return [c for _, c in sorted((r.metrics["trial_id"], r.config) for r in results)]

    np.random.seed(7)
    assert (fit(1), fit(2), np.random.randint(0, 1000)) == TWO_FITS


def test_a_saved_generator_state_keeps_the_scripts_python_random() -> None:
    import random

    import cloudpickle

    def gen() -> BasicVariantGenerator:
        return BasicVariantGenerator(param_space={"a": tune.sample_from(lambda spec: random.random())},
                                     num_samples=4)

    random.seed(3)
    straight = gen()
    straight.capture_driver_stream()
    expected = [straight.suggest(f"t{i}") for i in range(4)]
    random.seed(3)
    first = gen()
    first.capture_driver_stream()
    head = [first.suggest(f"t{i}") for i in range(2)]
    random.seed(99)  # whatever the restoring process's own stream is
    again = gen()
    again.restore(cloudpickle.loads(cloudpickle.dumps(first.save())))  # (the state of a run is cloudpickled)
    assert head + [again.suggest(f"t{i}") for i in range(2, 4)] == expected


def test_a_negative_seed_is_refused() -> None:
    with pytest.raises(ValueError, match="random_state must be an int >= 0"):
        BasicVariantGenerator(random_state=-1)


def test_without_numpy_the_draws_are_pythons_and_a_seed_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now raises ImportError

    def drawn() -> list[Any]:
        gen = BasicVariantGenerator(param_space={"x": tune.uniform(0, 1), "c": tune.choice(["a", "b", "c"])},
                                    num_samples=3, random_state=7)
        return [gen.suggest(f"t{i}") for i in range(3)]

    with pytest.warns(RuntimeWarning, match="numpy is not installed.*pip install numpy"):
        first = drawn()
    with pytest.warns(RuntimeWarning, match="pip install numpy"):
        assert drawn() == first  # reproducible all the same
    with pytest.warns(RuntimeWarning, match=r"Domain.sample\(random_state=...\) is seeded"):
        assert tune.uniform(0, 1).sample(random_state=3) == tune.uniform(0, 1).sample(random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no seed, no warning; nor for audition's own seed= (no Ray values to miss)
        BasicVariantGenerator(param_space={"x": tune.uniform(0, 1)}).suggest("t0")
        gen = BasicVariantGenerator(param_space={"x": tune.uniform(0, 1)}, num_samples=2, seed=5)
        again = BasicVariantGenerator(param_space={"x": tune.uniform(0, 1)}, num_samples=2, seed=5)
        assert [gen.suggest("a"), gen.suggest("b")] == [again.suggest("a"), again.suggest("b")]


@pytest.mark.parametrize("as_object", [False, True], ids=["state-dict", "generator-object"])
def test_a_saved_generator_state_resumes_the_same_stream(as_object: bool) -> None:
    """The saved state holds the numpy Generator as its bit generator's state (plain, cheap to pickle);
    a state holding the Generator itself (as first saved) restores too. Either way the draws go on."""
    import pickle

    def gen() -> BasicVariantGenerator:
        return BasicVariantGenerator(param_space={"x": tune.uniform(0, 1)}, num_samples=6, random_state=11)

    straight = gen()
    expected = [straight.suggest(f"t{i}") for i in range(6)]
    first = gen()
    head = [first.suggest(f"t{i}") for i in range(3)]
    state = first.save()
    assert isinstance(state["rng"], dict) and "numpy_generator" in state["rng"]
    if as_object:
        state["rng"] = np.random.Generator(np.random.PCG64())
        state["rng"].bit_generator.state = first.save()["rng"]["numpy_generator"]
    resumed = gen()
    resumed.restore(pickle.loads(pickle.dumps(state)))
    assert head + [resumed.suggest(f"t{i}") for i in range(3, 6)] == expected
