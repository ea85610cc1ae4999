"""Long histories on an object store: trials that report many small results, results on S3.

On an object store each trial's ``result.json`` and ``progress.csv`` are rewritten whole (no append),
so what one rewrite costs grows with the history; this measures a whole ``fit()`` whose trials each
report ``--results`` results as fast as they can, against a moto S3 server started here, and prints
one JSON line: fit()'s wall time, results a second and the final size of one ``result.json``.

    python benchmarks/bench_s3_histories.py [--trials 2] [--results 20000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import _common


def chatty(config: dict[str, Any]) -> None:
    from actors import report

    for i in range(config["n"]):
        report({f"m{k}": 0.123456 * k * i for k in range(10)})


def one(trials: int, results: int) -> dict[str, Any]:
    from actors import RunConfig, Tuner
    from actors.search import grid_search
    from tests._s3 import start_moto_server

    server = start_moto_server()
    try:
        url, options = server.new_location()
        started = time.perf_counter()
        grid = Tuner(chatty, param_space={"n": results, "k": grid_search(list(range(trials)))},
                     run_config=RunConfig(storage=url, storage_options=options, name="histories", verbose=0)).fit()
        fit_s = time.perf_counter() - started
        assert grid.num_errors == 0 and all(len(r.metrics_history) == results for r in grid)
        from storage import StorageContext

        ctx = StorageContext(url, options)
        size = max(ctx.fs.size(p) for p in ctx.fs.glob(f"{ctx.root}/histories/*/result.json"))
        return {"fit_s": round(fit_s, 2), "results_per_s": round(trials * results / fit_s),
                "result_json_mb": round(size / 1e6, 2)}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--results", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    runs = [one(args.trials, args.results) for _ in range(args.repeat)]
    _common.emit({"benchmark": "s3_histories", "trials": args.trials, "results_per_trial": args.results,
                  "fit_s": statistics.median(r["fit_s"] for r in runs),
                  "results_per_s": statistics.median(r["results_per_s"] for r in runs),
                  "result_json_mb": runs[0]["result_json_mb"], "runs": runs})


if __name__ == "__main__":
    main()
