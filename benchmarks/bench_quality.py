"""Search quality per scheduler: best loss found, iterations spent and wall time on a synthetic objective.

Each trial follows a learning curve fixed by its config and the seed::

    y(t) = final(c) + (y(t-1) - final(c)) * exp(-1 / tau(c)),   y(0) = START
    loss(t) = y(t) + NOISE * N(0, 1)  (seeded by seed, config and t)

``final`` is lowest near lr = 1e-2, momentum = 0.9; ``tau`` is shorter for large
learning rates and for high momentum, so fast starters are not always the best
finishers: curves cross, mildly (``tau ~ lr**-0.15``).  With a strong crossing
(``lr**-0.35``) early stopping at iteration 1 is misled on some seeds: seed 0
then gives ASHA 1.13 x and HyperBand 1.09 x FIFO's best loss.  The trainable keeps ``y`` and ``t`` in its checkpoint,
so PBT's clones carry the learning state over and then follow the new config.

The same ``--trials`` configs (a seeded random search) run under FIFO, ASHA,
HyperBand, the median stopping rule and PBT, all with
``time_attr="training_iteration"`` and the default concurrency (one trial per
CPU).  One JSON line per scheduler; ASHA's and HyperBand's lines carry the check
"best loss within 5% of FIFO's with at most 35% of FIFO's iterations", and the
exit status is 1 if a check fails.  For scale, those lines also give
``random_same_budget_vs_fifo``: the expected best loss of as many randomly picked
FIFO trials as the scheduler's iterations could have trained to the end.

    python benchmarks/bench_quality.py [--trials 81] [--max-t 81] [--seed 0]
                                       [--schedulers fifo,asha,hyperband,median,pbt]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
from math import comb
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from actors import RunConfig, Trainable, TuneConfig, Tuner
from actors.schedulers import (
    ASHAScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    PopulationBasedTraining,
    Scheduler,
)
from actors.search import loguniform, uniform

START = 2.5  # loss before training (about an untrained 10-class cross-entropy)
NOISE = 0.005
LR = (1e-4, 1e-1)
MOMENTUM = (0.5, 0.99)
METRIC_TOLERANCE = 0.05  # ASHA / HyperBand: best loss at most 5% above FIFO's ...
ITERATION_BUDGET = 0.35  # ... with at most 35% of FIFO's iterations
ALL = ("fifo", "asha", "hyperband", "median", "pbt")


def final_loss(config: dict[str, Any]) -> float:
    """Where the curve of ``config`` levels off."""
    return 0.25 + 0.3 * (math.log10(config["lr"]) + 2) ** 2 + (config["momentum"] - 0.9) ** 2


def time_constant(config: dict[str, Any]) -> float:
    """Iterations for the gap to the final loss to shrink by e: long for small learning rates."""
    return 4.0 * (1e-2 / config["lr"]) ** 0.15 * (1.5 - config["momentum"])


def noise(seed: int, config: dict[str, Any], t: int) -> float:
    """Deterministic in (seed, config, t), in every process (str seeds are hashed with SHA-512)."""
    return NOISE * random.Random(f"{seed}:{config['lr']!r}:{config['momentum']!r}:{t}").gauss(0.0, 1.0)


class Curve(Trainable):
    """One step of the synthetic learning curve per iteration; done at ``max_t`` iterations."""

    def setup(self, config: dict[str, Any]) -> None:
        self.y, self.t = START, 0

    def step(self) -> dict[str, Any]:
        c = self.config
        self.t += 1
        final = final_loss(c)
        self.y = final + (self.y - final) * math.exp(-1.0 / time_constant(c))
        return {"loss": self.y + noise(c["seed"], c, self.t), "done": self.iteration + 1 >= c["max_t"]}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"y": self.y, "t": self.t}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.y, self.t = checkpoint["y"], checkpoint["t"]


def make_scheduler(name: str, max_t: int, seed: int) -> Scheduler | None:
    if name == "fifo":
        return None
    if name == "asha":
        return ASHAScheduler(time_attr="training_iteration", max_t=max_t, grace_period=1, reduction_factor=3)
    if name == "hyperband":
        return HyperBandScheduler(time_attr="training_iteration", max_t=max_t, reduction_factor=3)
    if name == "median":
        return MedianStoppingRule(time_attr="training_iteration", grace_period=max(1, max_t // 9),
                                  min_samples_required=3)
    if name == "pbt":
        return PopulationBasedTraining(
            time_attr="training_iteration", perturbation_interval=max(1, max_t // 9),
            hyperparam_mutations={"lr": loguniform(*LR), "momentum": uniform(*MOMENTUM)}, seed=seed)
    raise SystemExit(f"unknown scheduler {name!r}; choose from {', '.join(ALL)}")


def run(name: str, trials: int, max_t: int, seed: int, storage: str) -> dict[str, Any]:
    tuner = Tuner(
        Curve,
        param_space={"lr": loguniform(*LR), "momentum": uniform(*MOMENTUM), "max_t": max_t, "seed": seed},
        tune_config=TuneConfig(metric="loss", mode="min", num_samples=trials, seed=seed,
                               scheduler=make_scheduler(name, max_t, seed)),
        run_config=RunConfig(name=f"{name}_{time.strftime('%Y%m%d-%H%M%S')}", storage=storage, verbose=0),
    )
    started = time.perf_counter()
    grid = tuner.fit()
    wall = time.perf_counter() - started
    best = grid.get_best_result(scope="last")
    return {
        "scheduler": name,
        "trials": len(grid),
        "errors": grid.num_errors,
        "best_loss": round(best.metrics["loss"], 5),
        "best_final_loss": round(final_loss(best.config), 5),  # where the chosen config levels off
        "best_config": {"lr": round(best.config["lr"], 6), "momentum": round(best.config["momentum"], 4)},
        "iterations": sum(int(r.metrics.get("training_iteration", 0)) for r in grid),
        "wall_s": round(wall, 2),
        "_last_losses": [r.metrics["loss"] for r in grid],
    }


def expected_best_of_random(losses: list[float], k: int) -> float:
    """Expected minimum of ``k`` of ``losses`` drawn without replacement (exact order statistics)."""
    s, n = sorted(losses), len(losses)
    k = max(1, min(k, n))
    return sum(s[i] * comb(n - 1 - i, k - 1) / comb(n, k) for i in range(n - k + 1))


def compare(row: dict[str, Any], fifo: dict[str, Any]) -> None:
    """Add the ratios to FIFO (and, for ASHA / HyperBand, the pass/fail check) to ``row``."""
    row["loss_vs_fifo"] = round(row["best_loss"] / fifo["best_loss"], 4)
    row["iterations_vs_fifo"] = round(row["iterations"] / fifo["iterations"], 4)
    if row["scheduler"] in ("asha", "hyperband"):
        per_trial = max(1, fifo["iterations"] // max(1, fifo["trials"]))  # max_t: FIFO runs every trial out
        k = row["iterations"] // per_trial
        row["random_same_budget_vs_fifo"] = round(
            expected_best_of_random(fifo["_last_losses"], k) / fifo["best_loss"], 4)
        row["check_ok"] = (row["loss_vs_fifo"] <= 1 + METRIC_TOLERANCE
                           and row["iterations_vs_fifo"] <= ITERATION_BUDGET and row["errors"] == 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=81)
    parser.add_argument("--max-t", type=int, default=81)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schedulers", default=",".join(ALL),
                        help="comma-separated, from: " + ", ".join(ALL) + " (fifo always runs first)")
    parser.add_argument("--storage", default=None, help="results directory (default: a temporary one)")
    args = parser.parse_args(argv)
    names = ["fifo"] + [n for n in args.schedulers.split(",") if n and n != "fifo"]
    for n in names:
        make_scheduler(n, args.max_t, args.seed)  # fail on a bad name before anything runs
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench_quality_") as tmp:
        storage = args.storage or tmp
        fifo: dict[str, Any] | None = None
        for name in names:
            row = run(name, args.trials, args.max_t, args.seed, storage)
            fifo = fifo or row
            compare(row, fifo)
            ok = ok and row.get("check_ok", True)
            print(json.dumps({k: v for k, v in row.items() if not k.startswith("_")}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
