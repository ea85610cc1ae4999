"""``actors.search.zoopt.ZOOptSearch``: Ray Tune 2.60's ``ZOOptSearch`` on zoopt 0.4.2.

``tests/data/ray_zoopt.json`` was recorded from Ray 2.60 running ``_run`` below (``numpy.random.seed(0)`` then
the Tuner; trials one at a time, ``with_resources(train, {"cpu": 2})`` on 2 CPUs): per scenario the number of
trials, each trial's config and loss in creation order, and the driver's next ``numpy.random.random()`` after
``fit()`` (zoopt draws from numpy's global stream in Ray's driver). No test imports Ray.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import actors as tune
from actors.search.zoopt import ZOOptSearch
from tests._lean import lazy, needs

pytestmark = needs("zoopt")
np = lazy("numpy")  # (an extra's dependency, not audition's: the module imports without it, to skip)
zoopt = lazy("zoopt")  # (which brings matplotlib: imported by the tests, tests/_lean.py)

DATA = os.path.join(os.path.dirname(__file__), "data", "ray_zoopt.json")


def train(config: dict[str, Any]) -> None:
    c = {"a": 0.0, "b": 1.0, "c": 2.0}[config.get("c", "a")]
    tune.report({"loss": (config["x"] - 3) ** 2 + config.get("y", 0) + c + config.get("q", 0.0)})


def _searcher(label: str) -> tuple[ZOOptSearch, dict[str, Any]]:
    if label == "space":
        return ZOOptSearch(budget=10, metric="loss", mode="min"), {
            "x": tune.uniform(-10, 10), "y": tune.randint(0, 5), "c": tune.choice(["a", "b", "c"]),
            "q": tune.quniform(0, 1, 0.1), "k": 7}
    if label == "native":
        dims = {"x": (zoopt.ValueType.CONTINUOUS, [-5, 5], 1e-2), "y": (zoopt.ValueType.DISCRETE, [0, 3], True)}
        return ZOOptSearch(budget=8, dim_dict=dims, metric="loss", mode="min", parallel_num=1), {"k": 1}
    return (ZOOptSearch(budget=8, metric="loss", mode="max", points_to_evaluate=[{"x": 1.0, "y": 2}]),
            {"x": tune.uniform(-10, 10), "y": tune.randint(0, 5)})


def _run(label: str, storage: str, system: str) -> dict[str, Any]:
    np.random.seed(0)
    alg, space = _searcher(label)
    grid = tune.Tuner(tune.with_resources(train, {"cpu": 2}), param_space=space,
                      tune_config=tune.TuneConfig(search_alg=alg, num_samples=12),
                      run_config=tune.RunConfig(storage=storage, name=label, verbose=0, system=system)).fit()
    rows = sorted(([int(r.metrics["experiment_tag"].split("_")[0]), r.config, r.metrics.get("loss")] for r in grid),
                  key=lambda t: t[0])
    return {"n": len(grid), "configs": [r[1] for r in rows], "loss": [r[2] for r in rows],
            "after": float(np.random.random())}


@pytest.mark.parametrize("label,system", [("space", "simple"), ("native", "simple"), ("max_points", "multiproc")])
def test_zoopt_suggests_what_rays_does(label: str, system: str, storage_dir: str, no_leaks: None) -> None:
    with open(DATA, encoding="utf-8") as f:
        ray = json.load(f)[label]
    assert json.loads(json.dumps(_run(label, storage_dir, system))) == ray


def test_a_restored_searcher_suggests_what_the_original_would() -> None:
    np.random.seed(1)
    a, space = _searcher("space")
    a.set_search_properties(None, None, space)
    a.capture_driver_stream()
    first = [a.suggest(f"t{i}") for i in range(3)]
    b = ZOOptSearch(budget=10)
    b.restore(a.save())
    for i, config in enumerate(first):
        for s in (a, b):
            s.on_trial_complete(f"t{i}", {"loss": float(config["x"])})
    after = [a.suggest(f"u{i}") for i in range(4)]
    assert after == [b.suggest(f"u{i}") for i in range(4)] and isinstance(after[0], dict)  # (a config, not None)


def test_convert_search_space_as_rays() -> None:
    got = ZOOptSearch.convert_search_space({"x": tune.uniform(0, 1), "n": tune.qrandint(1, 9, 2),
                                            "m": tune.randint(1, 9), "c": tune.choice([1, 2]), "k": 3})
    assert got == {"x": (zoopt.ValueType.CONTINUOUS, [0, 1], 1e-12), "n": (zoopt.ValueType.DISCRETE, [1, 9], True),
                   "m": (zoopt.ValueType.DISCRETE, [1, 8], True), "c": (zoopt.ValueType.GRID, [1, 2])}
    assert ZOOptSearch.convert_search_space({"x": tune.uniform(0, 1), "k": 3}, join=True)["k"] == 3


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="needs budget=N"):
        ZOOptSearch()
    with pytest.raises(ValueError, match="algo must be 'asracos' or 'sracos'"):
        ZOOptSearch(algo="cma", budget=3)
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        ZOOptSearch(budget=3, mode="best")
    with pytest.raises(ValueError, match=r"ZOOpt does not support loguniform\(.*\) at 'lr'"):
        ZOOptSearch.convert_search_space({"lr": tune.loguniform(1e-4, 1e-1)})
    with pytest.raises(ValueError, match="Grid search parameters cannot be automatically converted"):
        ZOOptSearch.convert_search_space({"g": tune.grid_search([1, 2])})
    with pytest.raises(RuntimeError, match="ZOOptSearch has no search space"):
        ZOOptSearch(budget=3, metric="loss", mode="min").suggest("t")


def test_one_trial_at_a_time_ends_with_a_message_where_ray_waits(storage_dir: str, no_leaks: None) -> None:
    # zoopt's initial phase waits for its trials, then never suggests again under max_concurrent_trials=1:
    # Ray 2.60 was still waiting when stopped after two minutes; audition ends the run saying why
    from actors import TuneError

    with pytest.raises(TuneError, match="the search algorithm suggested no configuration while no trial was "
                                        "running; it would wait forever"):
        tune.Tuner(train, param_space={"x": tune.uniform(0, 1)},
                   tune_config=tune.TuneConfig(search_alg=ZOOptSearch(budget=10, metric="loss", mode="min"),
                                               num_samples=10, max_concurrent_trials=1),
                   run_config=tune.RunConfig(storage=storage_dir, verbose=0, system="simple")).fit()


def test_a_searcher_unpickled_where_zoopt_built_no_dimension_suggests_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    # zoopt keeps the rounding of continuous dimensions in a process-wide list filled when a Dimension2 is built:
    # a searcher unpickled in an actor system started from a fresh interpreter (TensorFlow ran in the driver)
    # failed in its first sampled suggest with zoopt's IndexError
    import cloudpickle
    from zoopt.utils.zoo_global import gl

    np.random.seed(0)
    alg, space = _searcher("max_points")
    alg.set_search_properties(None, None, space)
    alg.capture_driver_stream()
    blob = cloudpickle.dumps(alg)
    want = [alg.suggest(f"t{i}") for i in range(3)]
    monkeypatch.setattr(gl, "float_precisions", [])  # (a fresh process: no Dimension2 built there)
    copy = cloudpickle.loads(blob)
    assert [copy.suggest(f"t{i}") for i in range(3)] == want
