"""Record the order in which Ray Tune 2.60 runs trials when one fails and is retried (the oracle for
``tests/data/ray_retry_order.json``): Ray's ``_requeue_trial`` moves the failed trial to the end of the
trial list, so with one CPU the trials waiting run before its retry, and results list it last.

Run with a Python that has Ray installed, never audition's environment::

    /tmp/rayvenv/bin/python benchmarks/ray_oracle/record_retry_order.py tests/data/ray_retry_order.json

``tests/test_retry_order.py`` runs the same trainable under audition and compares.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

# name -> (the grid of lr, the failing trial's lr, whether it fails on its retry too, max_failures)
SCENARIOS: dict[str, tuple[list[float], float, bool, int]] = {
    "fails_every_run": ([0.1, 0.2, 0.3], 0.1, True, 1),
    "fails_once": ([0.1, 0.2, 0.3, 0.4], 0.2, False, 2),
}
STEPS = 3


def trainable(report: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Each step logs (lr, iteration) to ``config["log"]`` before reporting; the failing trial raises at
    iteration 2 (on every run, or on its first only)."""

    def train(config: dict[str, Any]) -> None:
        log = config["log"]
        for i in range(1, STEPS + 1):
            with open(os.path.join(log, "steps"), "a") as f:
                f.write(json.dumps([config["lr"], i]) + "\n")
            if config["lr"] == config["fail_lr"] and i == 2:
                marker = os.path.join(log, "failed")
                if config["fail_always"] or not os.path.exists(marker):
                    open(marker, "w").close()
                    raise RuntimeError("planned failure")
            report({"loss": config["lr"] / i})

    return train


def space(name: str, log: str, grid_search: Callable[[list[float]], Any]) -> dict[str, Any]:
    lrs, fail_lr, always, _ = SCENARIOS[name]
    return {"lr": grid_search(lrs), "log": log, "fail_lr": fail_lr, "fail_always": always}


def observed(grid: Any, log: str) -> dict[str, Any]:
    """What a run showed: the results' order, their errors, and every step in the order it ran."""
    with open(os.path.join(log, "steps")) as f:
        steps = [json.loads(line) for line in f]
    return {"grid": [r.config["lr"] for r in grid], "errored": [r.error is not None for r in grid], "steps": steps}


def main() -> None:
    import ray
    from ray import tune

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    out: dict[str, Any] = {"ray": ray.__version__}
    for name, (_, _, _, max_failures) in SCENARIOS.items():
        log = tempfile.mkdtemp()
        tuner = tune.Tuner(trainable(tune.report), param_space=space(name, log, tune.grid_search),
                           tune_config=tune.TuneConfig(scheduler=tune.schedulers.FIFOScheduler()),
                           run_config=tune.RunConfig(name=name, storage_path=tempfile.mkdtemp(),
                                                     failure_config=tune.FailureConfig(max_failures=max_failures)))
        out[name] = observed(tuner.fit(), log)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
