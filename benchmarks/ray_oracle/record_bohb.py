"""Record what Ray Tune 2.60's BOHB does (the oracle for ``tests/data/ray_bohb.json``): ``TuneBOHB`` with
``HyperBandForBOHB``, one trial at a time (``max_concurrent_trials=1``, where the schedule does not depend on
timing), after ``numpy.random.seed``: every trial's config, the iterations it reported, its status and last
loss (Ray runs resumed trials beside the running one, up to the CPUs, so the order of results between trials
depends on timing; each trial's own results do not); a ConfigSpace space given by hand with
``mode="max"``; ``points_to_evaluate`` with a nested space; ``TuneBOHB`` under FIFO (no budgets); and the
errors of what it refuses.

Run with a Python that has Ray, hpbandster and ConfigSpace installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_bohb.py tests/data/ray_bohb.json

``tests/test_bohb.py`` runs the same experiments under audition and compares.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from typing import Any


def loss_of(config: dict[str, Any], i: int) -> float:
    """Case ``dict``/``fifo``: a curve that falls with the iterations, best near x=3."""
    return (config["x"] - 3) ** 2 / i + config["y"] * 0.1 + (0.5 if config["act"] == "relu" else 0.0)


def score_of(config: dict[str, Any], i: int) -> float:
    """Case ``configspace``: a curve to maximise."""
    import math

    return -abs(math.log10(config["lr"]) + 2) + config["units"] / 64 * (1 - 1 / i) + (0.3 if config["opt"] == "adam"
                                                                                      else 0.0)


def nested_of(config: dict[str, Any], i: int) -> float:
    """Case ``points``: a nested config."""
    return abs(config["opt"]["lr"] - 0.01) * 100 / i + config["n"]


def plain(value: Any) -> Any:
    """JSON's view of a config value (ConfigSpace gives numpy scalars), floats to 6 digits."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return float(f"{value:.6g}") if isinstance(value, float) else value


def main() -> None:
    import ConfigSpace as CS
    import numpy as np
    import ray
    from ray import tune
    from ray.tune.schedulers import FIFOScheduler
    from ray.tune.schedulers.hb_bohb import HyperBandForBOHB
    from ray.tune.search.bohb import TuneBOHB

    store = tempfile.mkdtemp()

    def run(curve: Any, metric: str, mode: str, space: Any, searcher: Any, scheduler: Any, samples: int,
            tuner_metric: bool = True) -> dict[str, Any]:
        def train(config: dict[str, Any]) -> None:
            for i in range(1, 40):
                tune.report({metric: curve(config, i)})

        np.random.seed(0)
        grid = tune.Tuner(train, param_space=space,
                          tune_config=tune.TuneConfig(metric=metric if tuner_metric else None,
                                                      mode=mode if tuner_metric else None, search_alg=searcher,
                                                      scheduler=scheduler, num_samples=samples,
                                                      max_concurrent_trials=1),
                          run_config=tune.RunConfig(storage_path=store, verbose=0)).fit()
        trials = []
        for r in grid:  # in creation order
            trials.append({"config": plain(r.config), "iterations": list(r.metrics_dataframe["training_iteration"]),
                             "last": float(f"{r.metrics[metric]:.6g}"), "error": r.error is not None})
        return {"trials": trials}

    out: dict[str, Any] = {"ray": ray.__version__, "ConfigSpace": CS.__version__}
    space = {"x": tune.uniform(0, 6), "y": tune.randint(0, 10), "act": tune.choice(["relu", "tanh"])}
    out["dict"] = run(loss_of, "loss", "min", space, TuneBOHB(seed=7),
                      HyperBandForBOHB(time_attr="training_iteration", max_t=9, reduction_factor=3), 12)
    cs = CS.ConfigurationSpace()
    cs.add(CS.UniformFloatHyperparameter("lr", lower=1e-4, upper=1e-1, log=True))
    cs.add(CS.UniformIntegerHyperparameter("units", lower=8, upper=64))
    cs.add(CS.CategoricalHyperparameter("opt", choices=["sgd", "adam"]))
    out["configspace"] = run(score_of, "score", "max", None, TuneBOHB(cs, metric="score", mode="max", seed=3),
                             HyperBandForBOHB(metric="score", mode="max", max_t=27, reduction_factor=3), 15,
                             tuner_metric=False)
    nested = {"opt": {"lr": tune.loguniform(1e-4, 1e-1)}, "n": tune.choice([1, 2, 3])}
    out["points"] = run(nested_of, "loss", "min", nested,
                        TuneBOHB(points_to_evaluate=[{"opt/lr": 0.01, "n": 1}], mode="min", seed=1),
                        HyperBandForBOHB(max_t=4, reduction_factor=2), 6)
    out["fifo"] = run(loss_of, "loss", "min", space, TuneBOHB(seed=5, mode="min"), FIFOScheduler(), 4)

    errors: dict[str, str] = {}
    for name, bad in (("grid", {"x": tune.grid_search([1, 2])}), ("randn", {"x": tune.randn(0, 1)})):
        try:
            TuneBOHB.convert_search_space(bad)
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {exc}"
    converted = TuneBOHB.convert_search_space({"q": tune.qrandint(0, 10, 2), "l": tune.lograndint(1, 100),
                                               "c": tune.randn(0, 1).clip(-2, 2) if hasattr(tune.randn(0, 1), "clip")
                                               else tune.uniform(-2, 2)})
    errors["converted"] = str(converted)

    def train(config: dict[str, Any]) -> None:
        for _ in range(3):
            tune.report({"loss": config["x"]})

    try:  # the first pause calls the searcher's on_pause, which the default generator has not
        tune.Tuner(train, param_space={"x": tune.uniform(0, 1)},
                   tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=3,
                                               scheduler=HyperBandForBOHB(max_t=3)),
                   run_config=tune.RunConfig(storage_path=store, verbose=0)).fit()
        errors["default_searcher"] = "no error"
    except Exception as exc:
        errors["default_searcher"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    out["errors"] = errors
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    logging.getLogger("ray").setLevel(logging.ERROR)
    main()
