"""Record small facts of Ray Tune's API that a ported script sees (the oracle for
``tests/data/ray_api_semantics.json``): the string constants' values and how they print, and where a
``mode`` given without a ``metric`` goes, and ASHA's ``debug_string``.

Run with a Python that has Ray installed, never audition's environment::

    python -m venv /tmp/rayvenv && /tmp/rayvenv/bin/pip install 'ray[tune]==2.60.0'
    /tmp/rayvenv/bin/python benchmarks/ray_oracle/record_api_semantics.py tests/data/ray_api_semantics.json

Each run is a grid over ``a`` in 1..4, one trial at a time, reporting ``loss = a / i`` for i = 1..9.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from typing import Any


def _nine(config: dict[str, Any]) -> None:
    from ray import tune

    for i in range(9):
        tune.report({"loss": config["a"] / (i + 1)})


def _asha_debug_string() -> dict[str, Any]:
    """``debug_string()`` of ASHA (two brackets drawn after ``numpy.random.seed(0)``) before and after
    four trials report ``loss = (n + 1) / it + 0.1 n`` for it = 1..9 until told STOP, driven directly (a
    trial is anything with a ``trial_id``)."""
    from types import SimpleNamespace

    import numpy as np
    from ray.tune.schedulers import AsyncHyperBandScheduler

    np.random.seed(0)
    s = AsyncHyperBandScheduler(metric="loss", mode="min", max_t=9, grace_period=1, reduction_factor=3, brackets=2)
    before = s.debug_string()
    trials = [SimpleNamespace(trial_id=t) for t in "ABCD"]
    for t in trials:
        s.on_trial_add(None, t)
    decisions, stopped = [], set()
    for it in range(1, 10):  # a trial told STOP reports no more, as under Tune
        for n, t in enumerate(trials):
            if t.trial_id not in stopped:
                d = str(s.on_trial_result(None, t, {"training_iteration": it, "loss": (n + 1) / it + 0.1 * n}))
                decisions.append(f"{t.trial_id}{it}:{d}")
                if d == "STOP":
                    stopped.add(t.trial_id)
    from ray.tune.schedulers import FIFOScheduler, MedianStoppingRule

    class _Trial:  # hashable, as the median rule keys its tables by trial
        def __init__(self, trial_id: str) -> None:
            self.trial_id, self.status = trial_id, "RUNNING"

    controller = SimpleNamespace(get_live_trials=lambda: [])  # (asked when samples are too few to judge)
    trials = [_Trial(t) for t in "ABCD"]
    median = MedianStoppingRule(metric="loss", mode="min", grace_period=1, min_samples_required=2)
    for t in trials:
        median.on_trial_add(controller, t)
    median_decisions, stopped = [], set()
    for it in range(1, 6):
        for n, t in enumerate(trials):
            if t.trial_id not in stopped:
                d = str(median.on_trial_result(controller, t, {"training_iteration": it, "time_total_s": float(it),
                                                         "loss": (n + 1) / it}))
                median_decisions.append(f"{t.trial_id}{it}:{d}")
                if d == "STOP":
                    stopped.add(t.trial_id)
    return {"before": before, "after": s.debug_string(), "decisions": decisions,
            "fifo": FIFOScheduler().debug_string(), "median": median.debug_string(),
            "median_decisions": median_decisions}


def main() -> None:
    import ray
    from ray import tune
    from ray.tune import RunConfig, TuneConfig, Tuner
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler
    from ray.tune.search import Searcher

    out: dict[str, Any] = {"ray": ray.__version__}
    out["constants"] = {
        name: {"repr": repr(getattr(TrialScheduler, name)), "str": str(getattr(TrialScheduler, name))}
        for name in ("CONTINUE", "PAUSE", "STOP", "NOOP")}
    out["constants"]["Searcher.FINISHED"] = {"repr": repr(Searcher.FINISHED), "str": str(Searcher.FINISHED)}
    grid = {"a": tune.grid_search([1, 2, 3, 4])}
    store = tempfile.mkdtemp()

    def iterations(results: Any) -> list[list[int]]:
        return sorted([r.config["a"], r.metrics["training_iteration"]] for r in results)

    runs: dict[str, Any] = {}
    for case, tune_kw, asha_kw in (("tuner_mode_only", {"mode": "min"}, {"metric": "loss"}),
                                   ("tuner_metric_only", {"metric": "loss"}, {"mode": "max"})):
        g = Tuner(_nine, param_space=grid, tune_config=TuneConfig(
            **tune_kw, max_concurrent_trials=1, scheduler=ASHAScheduler(max_t=9, grace_period=1, **asha_kw)),
            run_config=RunConfig(storage_path=store, name=case, verbose=0)).fit()
        entry: dict[str, Any] = {"iterations": iterations(g)}
        if "mode" in tune_kw:
            entry["best_loss_config"] = g.get_best_result(metric="loss").config
        runs[case] = entry
    a = tune.run(_nine, config=grid, mode="min", max_concurrent_trials=1, verbose=0, storage_path=store,
                 name="run_mode_only", scheduler=ASHAScheduler(metric="loss", max_t=9, grace_period=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = a.best_config
    runs["run_mode_only"] = {
        "iterations": sorted([t.config["a"], t.last_result["training_iteration"]] for t in a.trials),
        "default": [a.default_metric, a.default_mode], "best_config": best,
        "best_loss_config": a.get_best_config("loss"),
        "trial_status_repr": repr([t.status for t in a.trials][:1])}
    out["runs"] = runs
    out["asha_debug_string"] = _asha_debug_string()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
