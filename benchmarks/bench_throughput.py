"""Result throughput: 2 concurrent trials, each reporting N results as fast as it can.

Two modes, in separate child processes (``--mode both``, the default, runs them alternately):

- ``batched``: the default FIFO scheduler, which tolerates batching (window 256, results travel
  in batches);
- ``per-result``: ``PerResult(FIFOScheduler)`` with ``tolerates_batching = False``: every result is
  decided by the scheduler before the trial's next step (window 1);
- ``checkpointed`` (only when asked for): FIFO, and every report commits a small checkpoint, each of
  which the trial actor sends to the controller at once.

``results_per_s`` = 2N / (fit() return - first result's ``wall``, the ``time.time()`` it reported;
results' ``timestamp`` is whole seconds, as Ray's): every result has been through the controller
(written to result.json, seen by the scheduler) when fit() returns, so this is the rate through the
controller, without actor start-up; ``fit_results_per_s`` = 2N / fit() wall.
Every trial's stored history is checked to hold all N results. Prints one JSON line.

    python benchmarks/bench_throughput.py [--n 2000] [--mode both|batched|per-result|checkpointed] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import _common

from actors.schedulers import FIFOScheduler


class PerResult(FIFOScheduler):
    """FIFO, but every result is decided before the trial goes on (window 1)."""

    tolerates_batching = False


def stream(config: dict[str, Any]) -> None:
    import time

    from actors import Checkpoint, report

    every = config.get("ckpt", False)
    for i in range(config["n"]):
        extra = {"wall": time.time()} if i == 0 else {}  # results' timestamp is whole seconds (Ray's)
        report({"loss": 1.0 / (i + 1), **extra}, checkpoint=Checkpoint.from_dict({"i": i}) if every else None)


def inner(n: int, mode: str) -> dict[str, Any]:
    from actors import RunConfig, TuneConfig, Tuner

    _common.quiet_logs()
    scheduler = PerResult() if mode == "per-result" else None
    with _common.temp_storage() as storage:
        tuner = Tuner(stream, param_space={"n": n, "ckpt": mode == "checkpointed"},
                      tune_config=TuneConfig(num_samples=2, max_concurrent_trials=2, scheduler=scheduler),
                      run_config=RunConfig(name="throughput", storage=storage, verbose=0))
        started_wall = time.time()
        started = time.perf_counter()
        grid = tuner.fit()
        fit_s = time.perf_counter() - started
        ended_wall = started_wall + fit_s
        histories = [r.metrics_history for r in grid]
    for h in histories:
        if [row["training_iteration"] for row in h] != list(range(1, n + 1)):
            raise SystemExit(f"a trial's history does not hold results 1..{n} exactly once")
    first = min(h[0]["wall"] for h in histories)
    stream_s = ended_wall - first
    return {"bench": "throughput", "mode": mode, "n": n, "trials": 2, "fit_s": round(fit_s, 4),
            "stream_s": round(stream_s, 4), "results_per_s": round(2 * n / stream_s),
            "fit_results_per_s": round(2 * n / fit_s)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--mode", default="both", choices=["both", "batched", "per-result", "checkpointed"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _common.emit(inner(args.n, args.mode))
        return
    keys = ["fit_s", "stream_s", "results_per_s", "fit_results_per_s"]
    modes = ["batched", "per-result"] if args.mode == "both" else [args.mode]
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for _ in range(args.repeat):
        for mode in modes:  # alternate the modes, so drifting machine load hits both alike
            runs[mode].append(_common.repeat_self(__file__, ["--n", str(args.n), "--mode", mode], 1, keys))
    out: dict[str, Any] = {"bench": "throughput", "n": args.n, "trials": 2, "repeat": args.repeat}
    for mode, got in runs.items():
        prefix = mode.replace("-", "_")
        for key in [*keys, "process_s"]:
            out[f"{prefix}_{key}"] = round(_common.median([float(r[key]) for r in got]), 4)
        out[f"{prefix}_runs"] = [r["results_per_s"] for r in got]
    _common.emit(out)


if __name__ == "__main__":
    main(sys.argv[1:])
