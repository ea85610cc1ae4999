"""A driver that computes with polars before ``fit()``, then tunes a trainable that does (tests/test_fresh_start.py).

Forked from this process, a trial's first ``group_by`` waited forever on polars' thread pool (the run
hung, without a warning); prints one JSON line with the trials' results once ``fit()`` returns.
"""

from __future__ import annotations

import json
import sys

import polars as pl

from actors import RunConfig, Tuner, report


def frame(n: int) -> pl.DataFrame:
    return pl.DataFrame({"a": list(range(n)), "b": [i % 5 for i in range(n)]})


def train(config: dict) -> None:
    df = frame(config["n"])
    for _ in range(2):
        report({"total": int(df.group_by("b").agg(pl.col("a").sum())["a"].sum())})


if __name__ == "__main__":
    print(frame(200_000).group_by("b").agg(pl.col("a").sum()).height, file=sys.stderr)  # polars runs here first
    grid = Tuner(train, param_space={"n": 100_000},
                 run_config=RunConfig(storage_path=sys.argv[1], name="polars", verbose=0)).fit()
    print(json.dumps({"errors": [str(e) for e in grid.errors],
                      "iterations": [r.metrics["training_iteration"] for r in grid],
                      "totals": [r.metrics["total"] for r in grid]}), flush=True)
