"""ASHA: N trials x up to 50 iterations of a synthetic learning curve, early-stopped by ASHAScheduler.

Trial ``i`` (a grid over 0..N-1, so Ray's equivalent gets the same configs) reports
``loss = b + a * exp(-k * t)`` for t = 1..50 with ``a, k, b`` derived from ``i`` (``curve_params``),
no sleeping: the cost is all engine. ASHAScheduler(max_t=50, grace_period=1, reduction_factor=3)
decides on every result (no batching). Reports fit() wall time, process wall time, the total
iterations run (the sum of every trial's last ``training_iteration``) and the best final loss.
Prints one JSON line.

    python benchmarks/bench_asha.py [--n 27] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import _common

MAX_T = 50
GRACE = 1
REDUCTION = 3


def curve_params(i: int) -> tuple[float, float, float]:
    """Deterministic (a, k, b) for trial i; the same formula is in ray_equivalents.py."""
    a = 1.0 + (i * 7 % 10) / 10.0
    k = 0.02 + 0.3 * ((i * 13) % 17) / 17.0
    b = 0.05 * ((i * 5) % 11)
    return a, k, b


def curve(config: dict[str, Any]) -> None:
    from actors import report

    a, k, b = curve_params(config["i"])
    for t in range(1, MAX_T + 1):
        report({"loss": b + a * math.exp(-k * t)})


def inner(n: int) -> dict[str, Any]:
    from actors import RunConfig, TuneConfig, Tuner
    from actors.schedulers import ASHAScheduler
    from actors.search import grid_search

    _common.quiet_logs()
    with _common.temp_storage() as storage:
        tuner = Tuner(
            curve, param_space={"i": grid_search(list(range(n)))},
            tune_config=TuneConfig(metric="loss", mode="min", scheduler=ASHAScheduler(
                time_attr="training_iteration", max_t=MAX_T, grace_period=GRACE, reduction_factor=REDUCTION)),
            run_config=RunConfig(name="asha", storage=storage, verbose=0))
        started = time.perf_counter()
        grid = tuner.fit()
        fit_s = time.perf_counter() - started
    iterations = sum(int(r.metrics.get("training_iteration", 0)) for r in grid)
    best = grid.get_best_result()
    return {"bench": "asha", "n": n, "max_t": MAX_T, "fit_s": round(fit_s, 4), "total_iterations": iterations,
            "best_loss": round(float(best.metrics["loss"]), 6), "best_i": best.config["i"],
            "iterations_per_s": round(iterations / fit_s, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=27)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _common.emit(inner(args.n))
        return
    _common.emit(_common.repeat_self(__file__, ["--n", str(args.n)], args.repeat,
                                     ["fit_s", "iterations_per_s"]))


if __name__ == "__main__":
    main(sys.argv[1:])
