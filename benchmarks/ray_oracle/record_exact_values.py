"""Record how Ray Tune 2.60 keeps values JSON does not hold as they are (the oracle for
``tests/data/ray_exact_values.json``):

* ``best_checkpoints``: each checkpoint's metrics are the reported values as they were (a ``float32``, an
  ndarray, a set, a tuple), in the run's results and after ``Tuner.restore`` alike (Ray pickles a trial's
  checkpoint results whole);
* a restored trial's config and last result: what JSON holds comes back as a JSON round trip gives it (an
  ``IntEnum`` as its int, a ``str`` subclass as a str, an ``OrderedDict`` as a dict, ``numpy.float64`` as a
  float, number keys as strings, a tuple as a list), the rest as it was (a ``float32``);
* a ``param_space`` dict with int keys (class weights, say) is taken as it is: the trainable gets int keys, the
  tag names ``0=...``, ``params.json`` and the frames show strings, and a restored config has string keys;
  with a search domain under an int key, HyperOpt fills it and the other searchers Ray offers raise ``TypeError``.

Run with a Python that has Ray installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_exact_values.py tests/data/ray_exact_values.json

``tests/test_exact_values.py`` runs the same experiments under audition, in every actor system, and compares.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import tempfile
from collections import OrderedDict
from typing import Any


class Color(enum.IntEnum):
    """An int JSON writes as its number."""

    RED = 1


class Name(str):
    """A str JSON writes as its text."""


def describe(value: Any) -> Any:
    """A value's type and content, recursively (what a comparison of two runs must see)."""
    import numpy as np

    if isinstance(value, dict):
        return {"type": type(value).__name__, "items": [[describe(k), describe(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *[describe(v) for v in value]]
    if isinstance(value, set):
        return ["set", *sorted(describe(v) for v in value)]
    if isinstance(value, np.ndarray):
        return ["ndarray", str(value.dtype), value.tolist()]
    if isinstance(value, np.generic):
        return [type(value).__name__, repr(value.item())]
    return [type(value).__name__, repr(value)]


def checkpointed(i: int) -> dict[str, Any]:
    """The i-th result of the checkpointing trainable (it reports three, each with a checkpoint)."""
    import numpy as np

    return {"loss": np.float32(0.1 * (i + 1)), "arr": np.arange(2) + i, "n": np.int64(i), "s": {1, i},
            "t": (1, i), "f64": np.float64(0.1 * i)}


CHECKPOINTED_KEYS = ("loss", "arr", "n", "s", "t", "f64")


def odd_values() -> dict[str, Any]:
    """Values JSON holds only in another shape, beside one it does not hold (a ``float32``)."""
    import numpy as np

    return {"e": Color.RED, "s": Name("x"), "od": OrderedDict(b=1, a=2), "k": {1: 1, 2: 2}, "kf": {1.5: 1},
            "f64": np.float64(0.5), "f32": np.float32(0.5), "t": (1, (2, 3)), "l": [np.float64(1.0)]}


def int_key_space(tune: Any) -> dict[str, Any]:
    """A param_space with int keys: a constant map and a grid under one."""
    return {"cw": {0: 1.0, 1: 2.5}, "w": {0: tune.grid_search([0.1, 0.2]), 1: 3}}


def int_key_result(config: dict[str, Any]) -> dict[str, Any]:
    """What the int-key trainable reports (its config read by int keys; a nested result with int keys)."""
    return {"loss": config["w"][0] + config["cw"][1], "per_class": {0: 0.5, 1: 0.25}}


def int_key_domain_result(config: dict[str, Any]) -> dict[str, Any]:
    """What the trainable searched under an int key reports."""
    return {"loss": config["w"][0]}


def ray_searcher(name: str) -> Any:
    """Ray's searcher of that name, seeded."""
    if name == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        return OptunaSearch(seed=0)
    if name == "hyperopt":
        from ray.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=0)
    if name == "bayesopt":
        from ray.tune.search.bayesopt import BayesOptSearch

        return BayesOptSearch(random_state=0)
    if name == "nevergrad":
        import nevergrad as ng
        from ray.tune.search.nevergrad import NevergradSearch

        return NevergradSearch(optimizer=ng.optimizers.OnePlusOne)
    from ray.tune.search.zoopt import ZOOptSearch

    return ZOOptSearch(budget=10)


SEARCHERS = ("optuna", "hyperopt", "bayesopt", "nevergrad", "zoopt")


def checkpoint_rows(grid: Any) -> list[Any]:
    """Each trial's best_checkpoints metrics and its metrics, described."""
    out = []
    for r in grid:
        out.append([[{k: describe(m[k]) for k in CHECKPOINTED_KEYS} for _, m in r.best_checkpoints],
                    {k: describe(r.metrics[k]) for k in CHECKPOINTED_KEYS}])
    return out


def odd_rows(grid: Any) -> list[Any]:
    """Each trial's config and metrics of ``odd_values``' keys, described."""
    keys = list(odd_values())
    return [[describe(r.config["c"]), describe({k: r.metrics[k] for k in keys})] for r in grid]


def int_key_rows(grid: Any) -> list[Any]:
    """What a run with int keys shows: configs, tags, results, files, frames (sorted by loss)."""
    rows = []
    for r in sorted(grid, key=lambda r: r.metrics["loss"]):
        with open(os.path.join(r.path, "params.json")) as f:
            params = json.load(f)
        with open(os.path.join(r.path, "progress.csv")) as f:
            header = f.readline().strip().split(",")
        rows.append({"config": describe(r.config), "tag": r.metrics.get("experiment_tag"),
                     "error": r.error is not None, "per_class": describe(r.metrics["per_class"]),
                     "columns": sorted(r.metrics_dataframe.columns), "params": params,
                     "csv_per_class": [c for c in header if c.startswith("per_class")]})
    return rows


def restored_configs(grid: Any) -> list[Any]:
    """The restored trials' configs and nested results, described (sorted by loss)."""
    return [[describe(r.config), describe(r.metrics["per_class"])]
            for r in sorted(grid, key=lambda r: r.metrics["loss"])]


def main() -> None:
    import ray
    from ray import tune

    store = tempfile.mkdtemp()

    def train_checkpointed(config: dict[str, Any]) -> None:
        for i in range(3):
            d = tempfile.mkdtemp()
            with open(os.path.join(d, "x"), "w") as f:
                f.write(str(i))
            tune.report(checkpointed(i), checkpoint=tune.Checkpoint.from_directory(d))

    grid = tune.Tuner(train_checkpointed, tune_config=tune.TuneConfig(metric="loss", mode="min"),
                      run_config=tune.RunConfig(name="ck", storage_path=store, verbose=0,
                                                checkpoint_config=tune.CheckpointConfig(
                                                    num_to_keep=2, checkpoint_score_attribute="loss"))).fit()
    fresh_ck = checkpoint_rows(grid)
    restored_ck = checkpoint_rows(tune.Tuner.restore(os.path.join(store, "ck"), train_checkpointed).get_results())

    def train_odd(config: dict[str, Any]) -> None:
        tune.report(dict(odd_values(), loss=1.0))

    grid = tune.Tuner(train_odd, param_space={"c": odd_values()},
                      run_config=tune.RunConfig(name="odd", storage_path=store, verbose=0)).fit()
    odd_fresh = odd_rows(grid)
    odd_restored = odd_rows(tune.Tuner.restore(os.path.join(store, "odd"), train_odd).get_results())

    def train_keys(config: dict[str, Any]) -> None:
        tune.report(int_key_result(config))

    grid = tune.Tuner(train_keys, param_space=int_key_space(tune),
                      tune_config=tune.TuneConfig(metric="loss", mode="min"),
                      run_config=tune.RunConfig(name="keys", storage_path=store, verbose=0)).fit()
    keys = int_key_rows(grid)
    keys_best = describe(grid.get_best_result().config)
    keys_restored = restored_configs(tune.Tuner.restore(os.path.join(store, "keys"), train_keys).get_results())

    def train_int_key_domain(config: dict[str, Any]) -> None:
        tune.report(int_key_domain_result(config))

    searchers = {}
    for name in SEARCHERS:  # each: what fit() raised, or the types of the trials' keys under "w"
        try:
            grid = tune.Tuner(train_int_key_domain, param_space={"w": {0: tune.uniform(0, 1), 1: 3}},
                              tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2,
                                                          search_alg=ray_searcher(name)),
                              run_config=tune.RunConfig(storage_path=store, verbose=0)).fit()
            searchers[name] = [[type(k).__name__ for k in r.config["w"]] for r in grid]
        except Exception as exc:
            searchers[name] = type(exc).__name__
    with open(sys.argv[1], "w") as f:
        json.dump({"ray": ray.__version__, "checkpoints": fresh_ck, "checkpoints_restored": restored_ck,
                   "odd_fresh": odd_fresh, "odd_restored": odd_restored, "int_keys": keys, "int_keys_best": keys_best,
                   "int_keys_restored": keys_restored, "int_key_searchers": searchers}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
