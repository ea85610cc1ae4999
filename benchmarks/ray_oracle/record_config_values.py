"""Record what Ray Tune does with functions in a ``param_space`` (the oracle for
``tests/data/ray_config_values.json``): a lambda, a ``grid_search`` over functions (a lambda and a
local closure), and a one-argument lambda nested in a dict are config values like any other: each
trial's trainable gets the function itself (not resolved as ``sample_from``) and can call it, and
``Result.config`` holds it. A lambda reported as a metric is in ``Result.metrics``, callable. A trial
restored by ``Tuner.restore`` gets back the config values JSON cannot hold (a function, a numpy array and
``float32``, a set, an object) as they were; a tuple comes back a list. So does a finished trial's last
result in ``Tuner.restore(...).get_results()``.

Run with a Python that has Ray installed, never audition's environment::

    /tmp/rayvenv/bin/python benchmarks/ray_oracle/record_config_values.py tests/data/ray_config_values.json

``tests/test_config_values.py`` runs the same experiment under audition, in every actor system, and compares.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any


def space(tune: Any) -> dict[str, Any]:
    """The param_space (the test builds the same with audition's ``grid_search``)."""
    offset = 10

    def closure(x: int) -> int:
        return x + offset

    return {"f": lambda: 1, "g": tune.grid_search([lambda x: x * 2, closure]), "nest": {"h": lambda spec: 3}}


def seen(config: dict[str, Any]) -> dict[str, Any]:
    """What the trainable reports about its config's functions."""
    return {"f_type": type(config["f"]).__name__, "f": config["f"](), "g": config["g"](1),
            "h_type": type(config["nest"]["h"]).__name__, "h": config["nest"]["h"](None)}


def reported(config: dict[str, Any]) -> dict[str, Any]:
    """A result holding a lambda (and a number)."""
    return {"loss": 1, "fn": lambda: 5}


def metric_rows(grid: Any) -> list[Any]:
    """What ``Result.metrics`` holds of ``reported``'s result."""
    return [[r.metrics.get("loss"), type(r.metrics.get("fn")).__name__, r.metrics["fn"]() if callable(
        r.metrics.get("fn")) else None, r.error is not None] for r in grid]


class Net:
    """A user's object as a config value."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Net({self.n})"


def odd_space(tune: Any, flag: str) -> dict[str, Any]:
    """Config values JSON cannot hold; trial a=2 fails once (``flag``), so a restore reruns it."""
    import numpy as np

    return {"a": tune.grid_search([1, 2]), "flag": flag, "f": lambda x: x * 10, "t": (1, 2), "arr": np.arange(3),
            "f32": np.float32(1.5), "s": {1, 2}, "obj": Net(3), "nested": {"b": abs}}


def fails_once(config: dict[str, Any]) -> dict[str, Any]:
    """The restore case's step: raises once for a=2, else what the trial reports."""
    import os

    if config["a"] == 2 and not os.path.exists(config["flag"]):
        open(config["flag"], "w").close()
        raise RuntimeError("once")
    return {"v": config["f"](config["a"])}


def restored_rows(grid: Any) -> list[Any]:
    """Each restored trial's config values, by type and str (a numpy repr differs between versions), and what
    it reported."""
    return sorted([r.config["a"], r.metrics.get("v"), r.error is not None,
                   {k: [type(v).__name__, str(v)] for k, v in sorted(r.config.items()) if k not in ("a", "flag", "f")},
                   type(r.config["f"]).__name__] for r in grid)


def odd_metrics(config: dict[str, Any]) -> dict[str, Any]:
    """A result JSON cannot hold all of."""
    import numpy as np

    return {"loss": np.float32(0.5), "arr": np.arange(2), "fn": lambda: 5, "s": {1}, "t": (1, 2)}


def metric_types(grid: Any) -> list[Any]:
    """The restored results' metrics, by type and str, and the function's answer."""
    return [[{k: [type(r.metrics[k]).__name__, str(r.metrics[k])] for k in ("loss", "arr", "s", "t")},
             type(r.metrics["fn"]).__name__, r.metrics["fn"]() if callable(r.metrics["fn"]) else None] for r in grid]


def main() -> None:
    import ray
    from ray import tune
    from ray.tune import RunConfig, TuneConfig, Tuner

    def train(config: dict[str, Any]) -> None:
        tune.report(seen(config))

    grid = Tuner(train, param_space=space(tune), tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(storage_path=tempfile.mkdtemp(), name="functions", verbose=0)).fit()
    rows = sorted(([{k: r.metrics[k] for k in ("f_type", "f", "g", "h_type", "h")},
                    type(r.config["g"]).__name__, r.error is not None] for r in grid), key=json.dumps)

    def train_reporting(config: dict[str, Any]) -> None:
        tune.report(reported(config))

    grid = Tuner(train_reporting, run_config=RunConfig(storage_path=tempfile.mkdtemp(), name="reported",
                                                       verbose=0)).fit()
    reported_rows = metric_rows(grid)

    def train_once(config: dict[str, Any]) -> None:
        tune.report(fails_once(config))

    import os

    store = tempfile.mkdtemp()
    Tuner(train_once, param_space=odd_space(tune, os.path.join(store, "flag")),
          tune_config=TuneConfig(max_concurrent_trials=1),
          run_config=RunConfig(storage_path=store, name="odd", verbose=0)).fit()
    grid = Tuner.restore(os.path.join(store, "odd"), train_once, resume_errored=True).fit()

    def train_odd(config: dict[str, Any]) -> None:
        tune.report(odd_metrics(config))

    Tuner(train_odd, run_config=RunConfig(storage_path=store, name="odd_metrics", verbose=0)).fit()
    results = Tuner.restore(os.path.join(store, "odd_metrics"), train_odd).get_results()
    with open(sys.argv[1], "w") as f:
        json.dump({"ray": ray.__version__, "trials": rows, "reported": reported_rows,
                   "restored": restored_rows(grid), "restored_metrics": metric_types(results)}, f, indent=1,
                  sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
