"""Record what a second ``Tuner.fit()`` on the same ``Tuner`` does in Ray Tune 2.60 (the oracle for
``tests/data/ray_fit_twice.json``): with the default generator it runs the trials again (new trial ids,
each to its end); with a searcher built with its own space (Optuna given the param_space) it raises
``ValueError``, as the searcher already has a space.

Run with a Python that has Ray (and optuna) installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_fit_twice.py tests/data/ray_fit_twice.json

``tests/test_fit_twice.py`` runs the same under audition and compares.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

STEPS = 2


def fits_row(first: Any, second: Any) -> dict[str, Any]:
    """What two fits of one Tuner gave."""
    return {"first": len(first), "second": len(second),
            "same_trials": sorted(r.metrics["trial_id"] for r in first) == sorted(r.metrics.get("trial_id")
                                                                               for r in second),
            "configs": sorted(r.config["a"] for r in second),
            "iterations": sorted(r.metrics.get("training_iteration") for r in second)}


def main() -> None:
    import ray
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    def train(config: dict[str, Any]) -> None:
        for i in range(1, STEPS + 1):
            tune.report({"loss": config["a"] * i})

    tuner = tune.Tuner(train, param_space={"a": tune.grid_search([1, 2])},
                       run_config=tune.RunConfig(name="s", storage_path=tempfile.mkdtemp(), verbose=0))
    out: dict[str, Any] = {"ray": ray.__version__, "grid": fits_row(tuner.fit(), tuner.fit())}
    tuner = tune.Tuner(train, param_space={"a": tune.uniform(0, 1)},
                       tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2,
                                                   search_alg=OptunaSearch(seed=0)),
                       run_config=tune.RunConfig(name="o", storage_path=tempfile.mkdtemp(), verbose=0))
    tuner.fit()
    try:
        tuner.fit()
        out["optuna_second"] = "ran"
    except Exception as exc:
        out["optuna_second"] = type(exc).__name__
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
