"""Where a simulated experiment's work goes: the simulator benchmark's experiment with a piece of
the engine switched off, to be counted by an instruction counter (timings on a shared machine
swing more than the pieces weigh).

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python benchmarks/probe_simulator_costs.py --without state,logs --runs 3

Run it again with ``--runs 0`` (the warm-up run only) and divide the difference by the runs.
``--without``: ``state`` (no periodic or dirty state writes, the final one only), ``logs`` (no
result rows logged). The switched-off runs are not valid experiments; they only weigh a piece.
Prints one JSON line with the deliveries and simulated seconds per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import _common  # noqa: F401  (puts the tree measured first on sys.path: this checkout, or PYTHONPATH's)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without", default="", help="comma-separated: state, logs")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--step-s", type=float, default=1.0)
    args = parser.parse_args()
    without = {w for w in args.without.split(",") if w}
    unknown = without - {"state", "logs"}
    if unknown:
        raise SystemExit(f"--without takes state and/or logs, not {', '.join(sorted(unknown))}")

    from actors import FailureConfig, RunConfig, TuneConfig, search
    from actors._shell.experiment_io import ExperimentIO
    from actors._shell.logger_host import ControllerLoggers
    from actors.schedulers import ASHAScheduler
    from actors.testing import simulate

    if "state" in without:
        ExperimentIO.state_due = lambda self: False  # type: ignore[method-assign]
    if "logs" in without:
        ControllerLoggers.results = lambda self, trial, results: None  # type: ignore[method-assign]
    step_s = args.step_s

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["lr"] / i + 0.01 * i, "time_this_iter_s": step_s}

    def one(seed: int) -> tuple[int, float]:
        sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                       TuneConfig(metric="loss", mode="min", num_samples=20,
                                  scheduler=ASHAScheduler(max_t=27, grace_period=1, reduction_factor=3)),
                       RunConfig(failure_config=FailureConfig(max_failures=-1)),
                       max_iterations=27, seed=seed, cpus=4)
        out = (sim.deliveries, sim.simulated_time_s)
        sim.discard()
        return out

    one(10_000)  # imports and first-use costs: the --runs 0 baseline
    done = [one(seed) for seed in range(args.runs)]
    print(json.dumps({
        "probe": "simulator costs", "without": sorted(without), "runs": args.runs, "step_s": step_s,
        "deliveries_per_run": round(statistics.mean(d for d, _ in done), 1) if done else None,
        "simulated_s_per_run": round(statistics.mean(s for _, s in done), 1) if done else None,
    }))


if __name__ == "__main__":
    main()
