"""Record how many threads Ray Tune 2.60 gives a trial's native libraries (the oracle for
``tests/data/ray_trial_threads.json``): the ``OMP_NUM_THREADS`` a trial sees, the thread counts
threadpoolctl reads from the loaded OpenBLAS and OpenMP, and ``torch.get_num_threads()``, for trials
of several CPU counts, in drivers with and without the thread variables set. The driver imports numpy
and torch first, as a training script does (it changes nothing in Ray, whose trials start afresh).

Run with a Python that has Ray, torch and threadpoolctl installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_trial_threads.py tests/data/ray_trial_threads.json

``tests/test_trial_threads.py`` runs the same cases under audition and compares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

# (the driver's extra environment, [(case name, the trial's resources or None for the default)])
GROUPS: list[tuple[dict[str, str], list[tuple[str, dict[str, float] | None]]]] = [
    ({}, [("default", None), ("cpu2", {"cpu": 2}), ("cpu0.5", {"cpu": 0.5}), ("cpu1.7", {"cpu": 1.7})]),
    ({"OMP_NUM_THREADS": "1"}, [("user_omp1_cpu2", {"cpu": 2})]),
    ({"OPENBLAS_NUM_THREADS": "2"}, [("user_openblas2_default", None)]),
]


def probe() -> dict[str, Any]:
    """What the trial's process has (called inside the trainable)."""
    import threadpoolctl
    import torch

    pools: dict[str, int] = {}
    for lib in threadpoolctl.threadpool_info():
        pools[lib["internal_api"]] = lib["num_threads"]
    return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "pools": pools,
            "torch": torch.get_num_threads()}


def _group(index: int) -> dict[str, Any]:
    import numpy  # noqa: F401  (loaded in the driver, as in a training script)
    import ray
    import torch  # noqa: F401
    from ray import tune

    def train(config: dict[str, Any]) -> None:
        tune.report({"probe": json.dumps(probe())})

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    out = {}
    for name, resources in GROUPS[index][1]:
        trainable = train if resources is None else tune.with_resources(train, resources)
        grid = tune.Tuner(trainable, run_config=tune.RunConfig(name=name, storage_path=tempfile.mkdtemp(),
                                                               verbose=0)).fit()
        out[name] = json.loads(grid[0].metrics["probe"])
    ray.shutdown()
    return out


def main() -> None:
    if sys.argv[1] == "--group":
        print(json.dumps(_group(int(sys.argv[2]))))
        return
    import ray

    cases: dict[str, Any] = {}
    for i, (extra, _) in enumerate(GROUPS):
        env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")} | extra
        run = subprocess.run([sys.executable, __file__, "--group", str(i)], env=env, capture_output=True,
                             text=True, check=True)
        cases.update(json.loads(run.stdout.strip().splitlines()[-1]))
    out = {"ray": ray.__version__, "cpu_count": os.cpu_count(), "groups": GROUPS,
           "cases": cases}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
