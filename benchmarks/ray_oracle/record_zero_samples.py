"""Record what Ray Tune 2.60 does with ``num_samples=0`` (the oracle for ``tests/data/ray_zero_samples.json``):
no trial runs, with the default generator over a grid and with a searcher (Optuna) alike; ``fit()`` returns
an empty ``ResultGrid`` (``get_best_result`` raises ``RuntimeError``, the frame is empty) and ``tune.run``
an analysis without trials.

Run with a Python that has Ray (and optuna) installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_zero_samples.py tests/data/ray_zero_samples.json

``tests/test_zero_samples.py`` runs the same under audition, in every actor system, and compares.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any


def report_of(config: dict[str, Any]) -> dict[str, Any]:
    """What each trial would report."""
    return {"loss": config["x"]}


def grid_row(grid: Any) -> dict[str, Any]:
    """What an empty run shows."""
    try:
        grid.get_best_result()
        best = "no error"
    except RuntimeError:
        best = "RuntimeError"
    return {"trials": len(grid), "errors": grid.num_errors, "terminated": grid.num_terminated,
            "best": best, "frame": list(grid.get_dataframe().shape)}


def main() -> None:
    import ray
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    def train(config: dict[str, Any]) -> None:
        tune.report(report_of(config))

    store = tempfile.mkdtemp()
    out: dict[str, Any] = {"ray": ray.__version__}
    for name, space, searcher in (("grid", {"x": tune.grid_search([1.0, 2.0])}, None),
                                  ("optuna", {"x": tune.uniform(0, 1)}, OptunaSearch(seed=0))):
        grid = tune.Tuner(train, param_space=space,
                          tune_config=tune.TuneConfig(num_samples=0, metric="loss", mode="min", search_alg=searcher),
                          run_config=tune.RunConfig(storage_path=store, verbose=0)).fit()
        out[name] = grid_row(grid)
    out["run"] = len(tune.run(train, config={"x": tune.uniform(0, 1)}, num_samples=0, storage_path=store,
                              verbose=0).trials)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
