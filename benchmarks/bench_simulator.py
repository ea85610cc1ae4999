"""How many whole experiments ``actors.testing.simulate`` runs per second (issue 15's target: >= 100/s
for a 20-trial ASHA experiment).

The workload: 20 trials drawn by the default generator, ASHA (max_t=27, grace_period=1, reduction
factor 3), 4 simulated CPUs, a learning curve whose steps last ``--step-s`` simulated seconds
(1.0: steps as long as the once-a-second progress tick and state write of a real run; shorter
steps mean fewer ticks per experiment). Each run has its own seed and its ``memory://`` storage is
discarded after it. Prints one JSON line: ``runs_per_s`` (median of ``--repeat`` rounds), and per
run the deliveries, simulated seconds and milliseconds of wall time.

``--processes N`` (N > 1) runs each round's seeds in N forked processes at once (a seed sweep as
``docs/testing.md`` shows it) and reports the round's runs over its wall time: the rate of a sweep
on this machine's cores, beside the one-process rate of the same seeds.

    python benchmarks/bench_simulator.py [--runs 30] [--repeat 3] [--step-s 1.0] [--faults] [--processes 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import _common  # noqa: F401  (puts the tree measured first on sys.path: this checkout, or PYTHONPATH's)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="experiments per round")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the median is reported)")
    parser.add_argument("--step-s", type=float, default=1.0, help="simulated seconds per training step")
    parser.add_argument("--faults", action="store_true", help="inject trial failures and deaths too")
    parser.add_argument("--processes", type=int, default=1, help="forked processes sharing each round's seeds")
    args = parser.parse_args()

    from actors import FailureConfig, RunConfig, TuneConfig, search
    from actors.schedulers import ASHAScheduler
    from actors.testing import Faults, simulate

    step_s = args.step_s

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["lr"] / i + 0.01 * i, "time_this_iter_s": step_s}

    faults = Faults(trial_fail_p=0.01, trial_die_p=0.01, lost_exit_p=0.5) if args.faults else Faults()

    def one(seed: int) -> tuple[int, float]:
        sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                       TuneConfig(metric="loss", mode="min", num_samples=20,
                                  scheduler=ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3)),
                       RunConfig(failure_config=FailureConfig(max_failures=-1)),
                       max_iterations=27, seed=seed, faults=faults, cpus=4)
        if sim.hung or sim.results is None or len(sim.results) != 20:
            raise SystemExit(f"seed {seed}: the simulation hung or lost trials ({sim.hang_reason})")
        out = (sim.deliveries, sim.simulated_time_s)
        sim.discard()
        return out

    one(10_000)  # imports and first-use costs are not per-run costs
    rates, deliveries, sim_s = [], [], []
    pool = _pool(args.processes, one) if args.processes > 1 else None
    seed = 0
    try:
        for _ in range(args.repeat):
            seeds = range(seed, seed + args.runs)
            started = time.perf_counter()
            outs = list(pool.map(_run_seed, seeds)) if pool is not None else [one(s) for s in seeds]
            rates.append(args.runs / (time.perf_counter() - started))
            deliveries += [d for d, _ in outs]
            sim_s += [s for _, s in outs]
            seed += args.runs
    finally:
        if pool is not None:
            pool.shutdown()
    rate = statistics.median(rates)
    print(json.dumps({
        "benchmark": "simulator", "workload": "20-trial ASHA (max_t=27), 4 simulated CPUs",
        "step_s": step_s, "faults": args.faults, "runs_per_s": round(rate, 1),
        "rounds_runs_per_s": [round(r, 1) for r in rates], "ms_per_run": round(1000 / rate, 1),
        "deliveries_per_run": round(statistics.mean(deliveries), 1),
        "simulated_s_per_run": round(statistics.mean(sim_s), 1), "target_runs_per_s": 100,
        "processes": args.processes,
    }))


_one: Any = None  # the forked workers' run function (inherited, not pickled)


def _run_seed(seed: int) -> tuple[int, float]:
    return _one(seed)


def _pool(processes: int, one: Any) -> Any:
    """``processes`` forked workers, each warmed up by one run before the rounds are timed."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _one
    _one = one
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"))
    list(pool.map(_run_seed, [10_001 + i for i in range(processes)]))  # (each worker's first run, likely)
    return pool


if __name__ == "__main__":
    main()
