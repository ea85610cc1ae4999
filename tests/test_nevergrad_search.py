"""NevergradSearch as Ray Tune 2.60's: the same suggestions after the same ``numpy.random.seed``, the same errors.

Every expected value is in ``tests/data/ray_nevergrad.json``, recorded from ``ray.tune.search.nevergrad.
NevergradSearch`` (Ray 2.60.0, nevergrad 1.0.12) driving the same spaces and optimizers, and a ``Tuner`` run; no
test imports Ray.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors import search as tune
from actors.search.nevergrad import NevergradSearch
from tests._lean import lazy, needs
from tests._ulps import assert_close

pytestmark = needs("nevergrad")
np = lazy("numpy")  # (an extra's dependency, not audition's: the module imports without it, to skip)
ng = lazy("nevergrad")  # (which brings scikit-learn and pandas: imported by the tests, tests/_lean.py)


@pytest.fixture(autouse=True, scope="module")
def _nevergrad_imported() -> None:
    """Imported before a test seeds numpy, as a script imports it at its top: the import draws from numpy's
    global stream."""
    assert ng.optimizers is not None

with open(os.path.join(os.path.dirname(__file__), "data", "ray_nevergrad.json")) as _f:
    RAY = json.load(_f)


def _space() -> dict[str, Any]:
    return {"x": tune.uniform(-5, 5), "nest": {"y": tune.uniform(0, 1)}, "lr": tune.loguniform(1e-3, 1),
            "n": tune.randint(1, 10), "q": tune.qrandint(2, 20, 2), "c": tune.choice(["a", "b", "c"]), "k": 3}


def _loss(c: dict[str, Any]) -> float:
    return ((c["x"] - 1) ** 2 + c["nest"]["y"] + 0.1 * math.log(c["lr"]) + 0.01 * c["n"] + 0.001 * c["q"]
            + (0.5 if c["c"] == "b" else 0))


def _plain(v: Any) -> Any:
    """As the recording wrote values: numpy scalars tagged with their kind (Ray's own-name optimizer gives them)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, np.floating):
        return ["np.float", float(v)]
    if isinstance(v, np.integer):
        return ["np.int", int(v)]
    return v


def _drive(searcher: NevergradSearch, n: int, *, fail: tuple[int, ...] = (), space: Any = _space,
           loss: Any = _loss) -> list[Any]:
    """Ray's recording loop: suggest, then complete (the trials in ``fail`` failed)."""
    if space is not None:
        searcher.set_search_properties(None, None, space())
    got: list[Any] = []
    for i in range(n):
        c = searcher.suggest(f"t{i}")
        got.append([list(c), _plain(c)] if isinstance(c, dict) else c)
        if i in fail:
            searcher.on_trial_complete(f"t{i}", None, error=True)
        else:
            searcher.on_trial_complete(f"t{i}", {"loss": loss(c)})
    return got


def _same(got: Any) -> Any:
    return json.loads(json.dumps(got))  # (tuples as lists, as the recording holds them)


def test_the_same_numpy_seed_suggests_what_ray_suggests(caplog: pytest.LogCaptureFixture) -> None:
    np.random.seed(0)
    with caplog.at_level("WARNING", "audition"):
        got = _drive(NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="min"), 8)
    assert_close(_same(got), RAY["oneplusone"])
    assert float(np.random.random()) == RAY["np_after_oneplusone"]  # nevergrad took from numpy's stream as Ray's
    assert "Nevergrad does not support quantization. Dropped quantization." in caplog.text  # (qrandint, as Ray)
    # a ConfiguredOptimizer (TwoPointsDE), a failed trial told nothing
    np.random.seed(2)
    got = _drive(NevergradSearch(optimizer=ng.optimizers.TwoPointsDE, metric="loss", mode="min"), 8, fail=(2,))
    assert_close(_same(got), RAY["de_configured"])
    # log-uniform and quantized domains: Log for loguniform and lograndint, quantization dropped
    np.random.seed(5)
    searcher = NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="min")
    searcher.set_search_properties(None, None, {
        "qu": tune.quniform(0, 1, 0.1), "li": tune.lograndint(1, 100), "ql": tune.qlograndint(2, 64, 2),
        "lu": tune.qloguniform(1e-4, 1e-1, 1e-5)})
    got = []
    for i in range(5):
        c = searcher.suggest(f"t{i}")
        got.append(c)
        searcher.on_trial_complete(f"t{i}", {"loss": c["qu"] + c["li"] * 0.01 + c["ql"] * 0.001 + c["lu"]})
    assert_close(_same(got), RAY["log_quantized"])


def test_points_to_evaluate_come_first_and_max_is_negated_as_in_ray() -> None:
    points = [{"x": 1.0, "nest/y": 0.5, "lr": 0.01, "n": 3, "q": 4, "c": "b"},
              {"x": -1.0, "nest/y": 0.25, "lr": 0.1, "n": 5, "q": 6, "c": "a"}]
    np.random.seed(1)
    got = _drive(NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="max",
                                 points_to_evaluate=points), 6)
    assert_close(_same(got), RAY["max_points"])
    # audition also takes the points nested (Ray's must name nested parameters "nest/y": nevergrad refuses others)
    nested = [{**{k: v for k, v in p.items() if k != "nest/y"}, "nest": {"y": p["nest/y"]}} for p in points]
    np.random.seed(1)
    got = _drive(NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="max",
                                 points_to_evaluate=nested), 6)
    assert_close(_same(got), RAY["max_points"])


def test_its_own_space_and_a_built_optimizer_with_names_as_in_ray() -> None:
    np.random.seed(3)
    own = ng.p.Dict(x=ng.p.Scalar(lower=-5, upper=5), nest=ng.p.Dict(y=ng.p.Scalar(lower=0, upper=1)))
    got = _drive(NevergradSearch(optimizer=ng.optimizers.CMA, optimizer_kwargs={"budget": 20}, space=own,
                                 metric="loss", mode="min"), 6, space=None,
                 loss=lambda c: (c["x"] - 1) ** 2 + c["nest"]["y"])
    assert_close(_same(got), RAY["cma_own_space"])
    np.random.seed(4)
    got = _drive(NevergradSearch(optimizer=ng.optimizers.OnePlusOne(parametrization=2), space=["a", "b"],
                                 metric="loss", mode="min"), 5, space=None,
                 loss=lambda c: (c["a"] - 0.3) ** 2 + (c["b"] + 0.2) ** 2)
    assert_close(_same(got), RAY["built_names"])  # numpy float64 values, as Ray's


def test_bad_arguments_raise_rays_errors() -> None:
    errors = RAY["errors"]

    def raised(f: Any) -> list[str]:
        with pytest.raises(ValueError) as info:
            f()
        return [type(info.value).__name__, str(info.value)]

    assert raised(lambda: NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="l", mode="min")
                  .set_search_properties(None, None, {"g": tune.grid_search([1, 2])})) == errors["grid"]
    for key, make in (
            ("built_with_kwargs", lambda: NevergradSearch(optimizer=ng.optimizers.OnePlusOne(parametrization=2),
                                                          optimizer_kwargs={"budget": 3}, space=["a", "b"])),
            ("built_with_dict_space", lambda: NevergradSearch(optimizer=ng.optimizers.OnePlusOne(parametrization=2),
                                                              space={"a": 1})),
            ("names_mismatch", lambda: NevergradSearch(optimizer=ng.optimizers.OnePlusOne(parametrization=2),
                                                       space=["a"])),
            ("points_not_list", lambda: NevergradSearch(optimizer=ng.optimizers.OnePlusOne,
                                                        points_to_evaluate={"x": 1}))):  # type: ignore[arg-type]
        assert raised(make) == errors[key], key
    kind, message = raised(lambda: NevergradSearch(optimizer="OnePlusOne"))
    assert [kind, message.split(" (e.g.")[0] + "."] == errors["bad_optimizer"]
    # a function is refused (Ray: "does not support parameters of type `Function`"), and so is randn, which Ray
    # converts to a range between infinite bounds and suggests NaN for (recorded)
    searcher = NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="l", mode="min")
    with pytest.raises(ValueError, match="Nevergrad does not support sample_from"):
        searcher.set_search_properties(None, None, {"f": tune.sample_from(lambda spec: 1)})
    with pytest.raises(ValueError, match=r"randn.* suggests NaN"):
        searcher.set_search_properties(None, None, {"r": tune.randn(2.0, 3.0)})
    with pytest.raises(ValueError, match="inside a list"):  # (Ray: a TypeError joining the path)
        searcher.set_search_properties(None, None, {"l": [tune.uniform(0, 1), 2]})
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):  # (Ray: AssertionError)
        NevergradSearch(optimizer=ng.optimizers.OnePlusOne, mode="best")
    lost = NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="l", mode="min")
    lost.set_search_properties(None, None, {"x": tune.uniform(0, 1)})
    lost.suggest("t0")
    with pytest.raises(RuntimeError, match="has no 'l'"):  # (Ray: KeyError 'l')
        lost.on_trial_complete("t0", {"other": 1})
    with pytest.raises(RuntimeError, match="has no search space"):
        NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="l", mode="min").suggest("t0")


def test_a_restored_searcher_suggests_what_the_original_would_have(tmp_path: Any) -> None:
    np.random.seed(0)
    original = NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="min")
    first = _drive(original, 3)
    live = original.suggest("t3")  # saved with a trial live
    assert isinstance(live, dict)
    saved = original.save()
    original.save(str(tmp_path / "searcher.pkl"))
    original.on_trial_complete("t3", {"loss": _loss(live)})
    rest = _drive(original, 4, space=None)
    assert_close(_same(first), RAY["oneplusone"][:3])
    for state in (saved, str(tmp_path / "searcher.pkl")):
        restored = NevergradSearch(optimizer=ng.optimizers.OnePlusOne)
        restored.restore(state)
        restored.on_trial_complete("t3", {"loss": _loss(live)})
        assert _drive(restored, 4, space=None) == rest


def _trainable(config: dict[str, Any]) -> None:
    for i in range(2):
        report({"loss": (config["x"] - 1) ** 2 + config["nest"]["y"] + i})


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_a_tuner_runs_the_trials_ray_runs(tmp_path: Any, system: str) -> None:
    np.random.seed(7)  # the script's stream: the searcher takes it at fit() and hands it back after
    grid = Tuner(_trainable,
                 param_space={"x": tune.uniform(-5, 5), "k": 3, "nest": {"y": tune.uniform(0, 1), "c": "s"}},
                 tune_config=TuneConfig(metric="loss", mode="min", num_samples=6, max_concurrent_trials=1,
                                        search_alg=NevergradSearch(optimizer=ng.optimizers.OnePlusOne)),
                 run_config=RunConfig(storage=str(tmp_path), name="ng", system=system, verbose=0)).fit()
    got = [(list(r.config), list(r.config["nest"]), r.config["x"], r.config["nest"]["y"], r.metrics["experiment_tag"],
            r.metrics["loss"]) for r in sorted(grid, key=lambda r: int(r.metrics["experiment_tag"].split("_")[0]))]
    assert_close(_same(got), RAY["tuner"])
    assert float(np.random.random()) == RAY["np_after_tuner"]
