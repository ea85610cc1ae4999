"""Leader for the network-namespace tests: runs one experiment and prints a JSON summary."""

from __future__ import annotations

import json
import sys

from actors import FailureConfig, RunConfig, TuneConfig, Tuner
from actors.search import grid_search
from tests import _trainables as T

if __name__ == "__main__":
    address, storage, n_trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
    grid = Tuner(
        T.fn_trainable,
        param_space={"x": grid_search([float(i + 1) for i in range(n_trials)]), "steps": 25, "slow_save": 0.1},
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.PerResultFIFO()),
        run_config=RunConfig(name="ns", storage=storage, system=f"tcp://{address}", leader_runs_trials=False,
                             heartbeat_timeout_s=3.0, failure_config=FailureConfig(max_failures=5), verbose=0),
    ).fit()
    print(json.dumps([{"trial": r.trial_id, "status": r.status.value, "failures": r.num_failures,
                       "history": [{k: h[k] for k in ("training_iteration", "member", "wall", "restored_from")}
                                   for h in r.metrics_history]} for r in grid]), flush=True)
