"""Record what Ray Tune 2.60's asynchronous PBT does when it exploits at every step and the trials outnumber the
CPUs (the oracle for ``tests/data/ray_pbt_every_step.json``): four trials on two CPUs, a perturbation at every
iteration, half the population in each quantile, a loss that grows with the iteration for small learning rates.

Ray goes round in circles: a running trial reaches an iteration at which it scores worse than the PAUSED trials
one iteration behind, is cloned from one of them (its ``last_train_time`` becomes its source's), and
``choose_trial_to_run`` picks it again first (ties go by the order trials were added), so it reports the same
iteration again and again while the PAUSED trials never run. Nothing ends but the time budget.

Run with a Python that has Ray installed, never audition's environment::

    /tmp/rayvenv/bin/python benchmarks/ray_oracle/record_pbt_every_step.py tests/data/ray_pbt_every_step.json

``tests/test_pbt_every_step.py`` simulates the same experiment under audition and compares.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter
from typing import Any

# the learning rates and step lengths of the simulator's scenario seed 141 (tests/_sim_scenarios.py), in order
LRS = [0.7389335423142075, 0.011828478192881608, 0.18934574443942823, 0.6043582905879461]
STEP_S = [1.5, 1.5, 0.5, 1.0]
MAX_ITERATIONS = 7
BUDGET_S = 40.0
SLEEP_PER_STEP_S = 0.1  # a step of ``step_s`` sleeps this many times step_s (Ray restarts an actor in ~1 s)


def main() -> None:
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    class Curve(tune.Trainable):
        def setup(self, config: dict[str, Any]) -> None:
            self.lr = config["lr"]
            self.step_s = config["step_s"]

        def step(self) -> dict[str, Any]:
            time.sleep(SLEEP_PER_STEP_S * self.step_s)
            i = self.iteration + 1
            return {"loss": 0.01 * i + 0.001 * self.lr}

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            # (Ray keeps no checkpoint of an empty directory; the iteration travels in Trainable's own metadata)
            with open(f"{checkpoint_dir}/lr.json", "w") as f:
                json.dump({"lr": self.lr}, f)

        def load_checkpoint(self, checkpoint: Any) -> None:
            return None

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=1, quantile_fraction=0.5,
                                  resample_probability=0.5, hyperparam_mutations={"lr": tune.uniform(0.01, 1.0)})
    space = {"lr": tune.grid_search(LRS), "step_s": tune.sample_from(lambda spec: STEP_S[LRS.index(spec.config.lr)])}
    grid = tune.Tuner(
        tune.with_resources(Curve, {"cpu": 1}), param_space=space,
        tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=pbt, time_budget_s=BUDGET_S),
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(), name="p", verbose=0,
                                  stop={"training_iteration": MAX_ITERATIONS},
                                  checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=3,
                                                                          checkpoint_at_end=True))).fit()
    trials = []
    for r in sorted(grid, key=lambda r: r.metrics["trial_id"]):
        its = [int(i) for i in r.metrics_dataframe["training_iteration"]]
        trials.append({"rows": len(its), "last_iteration": its[-1], "reached_stop": max(its) >= MAX_ITERATIONS,
                       "most_repeats": max(Counter(its).values())})
    out = {"ray": ray.__version__, "budget_s": BUDGET_S, "max_iterations": MAX_ITERATIONS,
           "perturbations": pbt._num_perturbations, "trials": trials}
    ray.shutdown()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
