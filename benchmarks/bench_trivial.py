"""Trivial trials: N trials, each reports one result and returns (the per-trial bookkeeping cost).

Runs itself as a child process and times it from outside, so ``process_s`` covers interpreter
start-up, imports, fit() and the actor system's shutdown; ``fit_s`` is fit() alone, measured inside.
Default multi-process actor system, default FIFO scheduler, results on local disk (a temp dir).
Prints one JSON line.

    python benchmarks/bench_trivial.py [--n 100] [--repeat 3] [--system multiproc|simple]

Each repeat is a fresh process; the JSON line gives medians and every run.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import _common


def trivial(config: dict[str, Any]) -> None:
    from actors import report

    report({"loss": 0.0})


def inner(n: int, system: str) -> dict[str, Any]:
    from actors import RunConfig, TuneConfig, Tuner

    _common.quiet_logs()
    with _common.temp_storage() as storage:
        tuner = Tuner(trivial, tune_config=TuneConfig(num_samples=n),
                      run_config=RunConfig(name="trivial", storage=storage, verbose=0, system=system))
        started = time.perf_counter()
        grid = tuner.fit()
        fit_s = time.perf_counter() - started
        done = sum(1 for r in grid if r.status.value == "TERMINATED" and r.metrics.get("training_iteration") == 1)
    if done != n:
        raise SystemExit(f"only {done} of {n} trials terminated with one result")
    return {"bench": "trivial", "n": n, "system": system, "fit_s": round(fit_s, 4),
            "trials_per_s": round(n / fit_s, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--system", default="multiproc", choices=["multiproc", "simple"])
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _common.emit(inner(args.n, args.system))
        return
    data = _common.repeat_self(__file__, ["--n", str(args.n), "--system", args.system], args.repeat,
                               ["fit_s", "trials_per_s"])
    _common.emit(data)


if __name__ == "__main__":
    main(sys.argv[1:])
