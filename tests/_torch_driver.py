"""A driver that runs a parallel PyTorch op before ``fit()`` (tests/test_fresh_start.py).

GNU OpenMP's thread pool, which PyTorch's CPU ops use, does not survive a fork, and it belongs to the thread
that ran the op: a parallel op on a forked child's main thread waits forever. The trainable runs on a thread
of its own in its (forked) trial process; the search algorithm and the scheduler here compute with torch too
(as BoTorch does), in the forked controller and scheduler actor. Prints one JSON line with how the actor
system started and the trials' results.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from actors import RunConfig, TuneConfig, Tuner, report
from actors.schedulers import FIFOScheduler
from actors.search import Searcher


def train(config: dict) -> None:
    torch.manual_seed(0)
    x = torch.randn(512, 256)
    model = torch.nn.Linear(256, 1)
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(3):
        loss = (model(x @ torch.eye(256)) - 1).pow(2).mean()  # (parallel ops: the product and the fill)
        opt.zero_grad()
        loss.backward()
        opt.step()
        report({"loss": float(loss.detach())})


def _parallel() -> float:
    ones = torch.ones(300, 300)  # (above ATen's grain size: the fill and the product run in parallel)
    return float((ones @ ones).sum())


class TorchSearcher(Searcher):
    def __init__(self) -> None:
        super().__init__(metric="loss", mode="min")
        self.count = 0

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.count == 2:
            return Searcher.FINISHED
        self.count += 1
        return {"lr": _parallel() / 2.7e8 * self.count}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        _parallel()


class TorchScheduler(FIFOScheduler):
    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        _parallel()
        return super().on_trial_result(tune_controller, trial, result)


if __name__ == "__main__":
    from actors._driver.fresh_system import fork_unsafe_reason

    big = torch.randn(500, 500) @ torch.randn(500, 500)  # the pool runs here
    tune_config = TuneConfig(metric="loss", mode="min", num_samples=2, search_alg=TorchSearcher(),
                             scheduler=TorchScheduler())
    grid = Tuner(train, tune_config=tune_config,
                 run_config=RunConfig(storage_path=sys.argv[1], name="torch", verbose=0)).fit()
    print(json.dumps({"fresh": fork_unsafe_reason(), "errors": [str(e) for e in grid.errors],
                      "iterations": sorted(r.metrics["training_iteration"] for r in grid)}), flush=True)
