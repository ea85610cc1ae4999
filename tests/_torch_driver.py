"""A driver that runs a parallel PyTorch op before ``fit()`` (tests/test_fresh_start.py).

GNU OpenMP's thread pool, which PyTorch's CPU ops use, does not survive a fork; but it belongs to the thread
that ran the op, and the trainable runs on a thread of its own in the (forked) trial process, so the trial
trains. Prints one JSON line with how the actor system started and the trials' results.
"""

from __future__ import annotations

import json
import sys

import torch

from actors import RunConfig, TuneConfig, Tuner, report


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


if __name__ == "__main__":
    from actors._driver.fresh_system import fork_unsafe_reason

    big = torch.randn(500, 500) @ torch.randn(500, 500)  # the pool runs here
    grid = Tuner(train, param_space={"lr": 0.01}, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(storage_path=sys.argv[1], name="torch", verbose=0)).fit()
    print(json.dumps({"fresh": fork_unsafe_reason(), "errors": [str(e) for e in grid.errors],
                      "iterations": [r.metrics["training_iteration"] for r in grid]}), flush=True)
