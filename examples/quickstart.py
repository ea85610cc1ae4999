"""Quickstart: 8 trials of a toy objective on the multi-process default, results on local disk.

Run: python examples/quickstart.py [storage_dir]
"""

from __future__ import annotations

import os
import sys

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors.search import loguniform


def train(config: dict) -> None:
    start = 0
    ckpt = get_checkpoint()  # None on a fresh start
    if ckpt:
        start = ckpt.to_dict()["step"] + 1
    for step in range(start, 20):
        report({"loss": (config["lr"] - 0.1) ** 2 + 1 / (step + 1)},
               checkpoint=Checkpoint.from_dict({"step": step}))


def main(storage: str = "/tmp/audition_results") -> None:
    path = os.path.join(storage, "quick")
    if Tuner.can_restore(path):  # run before: continue it (a finished one just returns its results)
        grid = Tuner.restore(path, train).fit()
    else:
        grid = Tuner(
            train,
            param_space={"lr": loguniform(1e-4, 1)},
            tune_config=TuneConfig(metric="loss", mode="min", num_samples=8, seed=0),
            run_config=RunConfig(name="quick", storage=storage),
        ).fit()
    best = grid.get_best_result()
    print("best config:", best.config, "loss:", round(best.metrics["loss"], 5))
    print("results in:", grid.experiment_path)


if __name__ == "__main__":
    main(*sys.argv[1:2])
