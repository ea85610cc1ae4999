"""Every built-in searcher, set up in one process and asked in another started afresh (test_fresh_start.py).

In an actor system started from a fresh interpreter, the searcher the driver built (its space converted,
numpy's stream captured) is unpickled in a controller that imported nothing of the driver's: state a library
keeps in its modules does not come along (zoopt's rounding did not). Run as a script, this reads a pickled
``{name: searcher}`` on stdin and prints each one's suggestions as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any

if __name__ == "__main__":  # run as a script: make the checkout importable
    import os

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cloudpickle


def searchers() -> dict[str, Any]:
    """Each searcher with its space set, as the driver hands it to the controller."""
    import nevergrad as ng
    import numpy as np

    import actors as tune
    from actors.search import ConcurrencyLimiter
    from actors.search.bayesopt import BayesOptSearch
    from actors.search.bohb import TuneBOHB
    from actors.search.hyperopt import HyperOptSearch
    from actors.search.nevergrad import NevergradSearch
    from actors.search.optuna import OptunaSearch
    from actors.search.zoopt import ZOOptSearch

    mixed = {"x": tune.uniform(-5, 5), "y": tune.randint(0, 4)}
    continuous = {"x": tune.uniform(-5, 5), "z": tune.uniform(0, 1)}
    built = {
        "optuna": (OptunaSearch(metric="loss", mode="min", seed=1), mixed),
        "hyperopt": (HyperOptSearch(metric="loss", mode="min", random_state_seed=1), mixed),
        "bayesopt": (BayesOptSearch(metric="loss", mode="min", random_state=1), continuous),
        "nevergrad": (NevergradSearch(optimizer=ng.optimizers.OnePlusOne, metric="loss", mode="min"), mixed),
        "zoopt": (ZOOptSearch(budget=10, metric="loss", mode="min"), mixed),
        "bohb": (TuneBOHB(metric="loss", mode="min", seed=1), mixed),
        "limited": (ConcurrencyLimiter(OptunaSearch(metric="loss", mode="min", seed=2), max_concurrent=2), mixed),
    }
    for searcher, space in built.values():
        np.random.seed(0)
        searcher.set_search_properties(None, None, space)
        if hasattr(searcher, "capture_driver_stream"):
            searcher.capture_driver_stream()
    return {name: searcher for name, (searcher, _) in built.items()}


def drive(searcher: Any, n: int = 6) -> list[Any]:
    out = []
    for i in range(n):
        config = searcher.suggest(f"t{i}")
        out.append(config)
        if isinstance(config, dict):
            loss = float(config["x"]) ** 2 + float(config.get("y", config.get("z", 0)))
            searcher.on_trial_complete(f"t{i}", {"loss": loss})
    return list(json.loads(json.dumps(out)))


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)  # (optuna's and hpbandster's notes)
    print(json.dumps({name: drive(s) for name, s in cloudpickle.loads(sys.stdin.buffer.read()).items()}))
