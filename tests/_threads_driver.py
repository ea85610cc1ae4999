"""A driver that loads numpy and torch first (their pools as large as the machine), then runs the cases
of ``tests/data/ray_trial_threads.json`` (tests/test_trial_threads.py): each group's thread variables
set in the driver's environment, each case a one-trial ``fit()`` whose trial reports what its process
has. Prints one JSON line: the cases, and the driver's own torch threads before and after.

    python tests/_threads_driver.py DATA.json STORAGE_DIR
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy  # noqa: F401
import torch

from actors import RunConfig, Tuner, report, with_resources


def probe() -> dict[str, Any]:
    """What the trial's process has (the recorder's probe)."""
    import threadpoolctl

    pools = {lib["internal_api"]: lib["num_threads"] for lib in threadpoolctl.threadpool_info()}
    return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "pools": pools,
            "torch": torch.get_num_threads()}


def train(config: dict[str, Any]) -> None:
    report({"probe": json.dumps(probe())})


def main() -> None:
    data_path, storage = sys.argv[1], sys.argv[2]
    with open(data_path) as f:
        data = json.load(f)
    before = torch.get_num_threads()
    cases = {}
    for extra, group in data["groups"]:
        for key in [k for k in os.environ if k.endswith("_NUM_THREADS")]:
            del os.environ[key]
        os.environ.update(extra)
        for name, resources in group:
            trainable = train if resources is None else with_resources(train, resources)
            grid = Tuner(trainable, run_config=RunConfig(name=name, storage_path=storage, verbose=0)).fit()
            cases[name] = json.loads(grid[0].metrics["probe"])
    print(json.dumps({"cases": cases, "driver_torch": [before, torch.get_num_threads()]}))


if __name__ == "__main__":
    main()
