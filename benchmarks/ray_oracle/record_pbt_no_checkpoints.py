"""Record what Ray Tune 2.60's PBT does with function trainables that never report a checkpoint (the oracle
for ``tests/data/ray_pbt_no_checkpoints.json``): four trials on two CPUs, a perturbation every 2 of 8
iterations. Ray waits for the top trial's save, which resolves to no checkpoint, and skips every exploit
("no checkpoint for trial ... Skip exploit"): every trial ends with the config it started with.

Run with a Python that has Ray installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_pbt_no_checkpoints.py tests/data/ray_pbt_no_checkpoints.json

``tests/test_pbt_wait.py`` runs the same under audition (``wait_for_checkpoint=True``, Ray's waiting) and
compares.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

LRS = [0.1, 0.5, 0.9, 0.05]
STEPS = 8


def main() -> None:
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    def train(config: dict[str, Any]) -> None:
        for i in range(1, STEPS + 1):
            tune.report({"loss": config["lr"] / i + 0.01 * i, "lr": config["lr"]})

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                  hyperparam_mutations={"lr": tune.uniform(0.01, 1.0)})
    grid = tune.Tuner(train, param_space={"lr": tune.grid_search(LRS)},
                      tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=pbt),
                      run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), name="p", verbose=0)).fit()
    out = {"ray": ray.__version__,
           "configs": sorted(r.config["lr"] for r in grid),
           "final_iterations": sorted(r.metrics["training_iteration"] for r in grid),
           "reported_lrs": sorted({lr for r in grid for lr in r.metrics_dataframe["lr"]})}
    ray.shutdown()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
