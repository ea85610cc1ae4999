"""CPU-bound PyTorch trials in a driver that imported torch: how long they train (threads per trial).

A driver that imports torch (and numpy) before ``fit()``, as training scripts do, runs ``--trials``
one-CPU trials of a fixed amount of float work (``--steps`` products of 400x400 matrices), as many at
once as the machine has cores. Ray gives each trial one thread (``OMP_NUM_THREADS=1``; see
``actors/_worker/threads.py``); a forked trial that kept the driver's machine-sized pool runs as many
threads as there are cores, and the trials slow each other down. Each repeat is a fresh process.
Prints one JSON line: ``fit_s`` (wall time of ``fit()``), ``trial_compute_s`` (the median trial's
time in its loop), medians of ``--repeat`` processes, and each process's figures.

    python benchmarks/bench_trial_threads.py [--trials 4] [--steps 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import _common


def train(config: dict[str, Any]) -> None:
    import torch

    from actors import report

    a = torch.randn(400, 400, generator=torch.Generator().manual_seed(config["i"]))
    started = time.perf_counter()
    for _ in range(config["steps"]):
        a = torch.tanh(a @ a / 400)
    report({"compute_s": time.perf_counter() - started, "threads": torch.get_num_threads()})


def inner(trials: int, steps: int) -> dict[str, Any]:
    import numpy  # noqa: F401  (the driver loads both first, as a training script does)
    import torch  # noqa: F401

    from actors import RunConfig, Tuner, grid_search

    _common.quiet_logs()
    with _common.temp_storage() as storage:
        tuner = Tuner(train, param_space={"i": grid_search(list(range(trials))), "steps": steps},
                      run_config=RunConfig(name="threads", storage=storage, verbose=0))
        started = time.perf_counter()
        grid = tuner.fit()
        fit_s = time.perf_counter() - started
    if len(grid) != trials or grid.errors:
        raise SystemExit(f"{len(grid.errors)} of {trials} trials failed")
    return {"bench": "trial_threads", "trials": trials, "steps": steps, "fit_s": round(fit_s, 3),
            "trial_compute_s": round(statistics.median(r.metrics["compute_s"] for r in grid), 3),
            "trial_threads": sorted({r.metrics["threads"] for r in grid})}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        _common.emit(inner(args.trials, args.steps))
        return
    _common.emit(_common.repeat_self(__file__, ["--trials", str(args.trials), "--steps", str(args.steps)],
                                     args.repeat, ["fit_s", "trial_compute_s"]))


if __name__ == "__main__":
    main()
