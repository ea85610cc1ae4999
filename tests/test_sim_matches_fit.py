"""With no faults, a simulated experiment ends with the same table as fit(system="simple") on the same
seed: the same trial configs, statuses, iterations and last metrics (the trial ids differ: a
simulation numbers its trials by its seed, fit() by a random prefix, so trials are compared in
creation order). fit() runs CurveTrainable.make(curve, max_iterations), the trainable a simulation's
trials play (curve_function(curve, max_iterations), a function trainable that never checkpoints, for
simulate(..., checkpoints=False)).

Timing: FIFO's outcome is timing-independent at any concurrency. ASHA's decisions depend on which
results reached a rung first, which in a real run depends on thread timing; with one trial at a time
(max_concurrent_trials=1) the order is fixed, so both runs must decide alike."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, search
from actors.schedulers import ASHAScheduler, FIFOScheduler
from actors.testing import CurveTrainable, curve_function, simulate
from tests._trainables import PauseOnce

MAX_IT = 6
_names = itertools.count()


def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": config["lr"] / i + config["decay"] * i, "acc": 1.0 - config["lr"] / (i + 1)}


SPACE = {"lr": search.uniform(0.01, 1.0), "decay": search.choice([0.0, 0.05, 0.2])}
CHECKED = ("training_iteration", "iterations_since_restore", "loss", "acc", "done")


def _table(grid: Any) -> list[tuple[Any, ...]]:
    return [(r.config, r.status, tuple(r.metrics.get(k) for k in CHECKED),
             [h["training_iteration"] for h in r.metrics_history]) for r in grid]


@pytest.mark.parametrize("make, concurrent, checkpoints", [
    (lambda: FIFOScheduler(), None, True),
    (lambda: ASHAScheduler(max_t=MAX_IT, grace_period=1, reduction_factor=2), 1, True),
    # each trial paused once: without checkpoints it resumes from iteration 1 (its rows redone)
    (lambda: PauseOnce(at=3), 1, False),
], ids=["fifo", "asha", "pause-no-checkpoints"])
@pytest.mark.parametrize("seed", [0, 7])
def test_no_fault_simulation_matches_fit(make: Any, concurrent: int | None, checkpoints: bool, seed: int) -> None:
    tc = TuneConfig(metric="loss", mode="min", num_samples=5, scheduler=make(), seed=seed,
                    max_concurrent_trials=concurrent)
    sim = simulate(curve, SPACE, tc, max_iterations=MAX_IT, seed=seed, cpus=2, checkpoints=checkpoints)
    try:
        assert not sim.hung and sim.error is None
        simulated = _table(sim.results)
        paused = {sim.world.core.table.trials[r.trial_id].config["lr"] for r in sim.results
                  if any(m.kind.value == "pause" for m in sim.world.core.table.trials[r.trial_id].marks)}
    finally:
        sim.discard()
    tc = TuneConfig(metric="loss", mode="min", num_samples=5, scheduler=make(), seed=seed,
                    max_concurrent_trials=concurrent or 2)
    trainable = CurveTrainable.make(curve, MAX_IT) if checkpoints else curve_function(curve, MAX_IT)
    grid = Tuner(trainable, param_space=SPACE, tune_config=tc,
                 run_config=RunConfig(system="simple", verbose=0, name="fit",
                                      storage=f"memory://sim-vs-fit/{next(_names)}")).fit()
    assert _table(grid) == simulated
    if isinstance(tc.scheduler, ASHAScheduler):  # it stopped some trials early: the comparison covered that
        assert {row[2][0] for row in simulated} != {MAX_IT}
    if not checkpoints:  # every trial was paused, and started over
        assert paused == {row[0]["lr"] for row in simulated}


def _fails_at_first(config: dict[str, Any], i: int) -> dict[str, Any]:
    if config["lr"] > 0.5:
        raise RuntimeError("diverged")
    return curve(config, i)


def test_a_trial_failing_before_its_first_result_shows_the_same_metrics_as_in_fit() -> None:
    """Result.metrics of a run that never reported: the trial id, Ray's auto-filled keys of its process's
    start and the config, as fit() gives them (the simulated trial sends them at its start, as the real
    actor does); the simulated values are of simulated time and process."""
    tc = TuneConfig(metric="loss", mode="min", num_samples=6, seed=3)
    sim = simulate(_fails_at_first, SPACE, tc, max_iterations=2, seed=3, cpus=2)
    try:
        assert not sim.hung and sim.error is None
        simulated = [(r.config, r.error is not None, list(r.metrics)) for r in sim.results]
    finally:
        sim.discard()
    grid = Tuner(CurveTrainable.make(_fails_at_first, 2), param_space=SPACE, tune_config=tc,
                 run_config=RunConfig(system="simple", verbose=0, name="fit",
                                      storage=f"memory://sim-vs-fit/{next(_names)}")).fit()
    real = [(r.config, r.error is not None, list(r.metrics)) for r in grid]
    assert real == simulated
    failed = [keys for _, error, keys in real if error]
    never_reported = ["trial_id", "date", "timestamp", "pid", "hostname", "node_ip", "config"]
    assert 0 < len(failed) < len(real) and all(keys == never_reported for keys in failed)
