"""A driver that runs joblib's process pool before ``fit()``, then tunes a trainable that does
(tests/test_fresh_start.py): scikit-learn's ``n_jobs`` in both places.

Forked from this process, a trial's ``Parallel(n_jobs=2)`` waited forever on the pool copied from the
driver without the threads that serve it (the run hung); prints one JSON line once ``fit()`` returns.
"""

from __future__ import annotations

import json
import sys

from joblib import Parallel, delayed

from actors import RunConfig, Tuner, report


def squares(n: int) -> int:
    return sum(Parallel(n_jobs=2)(delayed(pow)(i, 2) for i in range(n)))


def train(config: dict) -> None:
    for _ in range(2):
        report({"total": squares(config["n"])})


if __name__ == "__main__":
    print(squares(10), file=sys.stderr)  # the pool runs here first
    grid = Tuner(train, param_space={"n": 20},
                 run_config=RunConfig(storage_path=sys.argv[1], name="joblib", verbose=0)).fit()
    print(json.dumps({"errors": [str(e) for e in grid.errors],
                      "iterations": [r.metrics["training_iteration"] for r in grid],
                      "totals": [r.metrics["total"] for r in grid]}), flush=True)
