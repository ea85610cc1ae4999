"""PBT exploiting a top trial whose checkpoint is still being saved (issue 14).

Ray Tune's PBT schedules a save of each top-quantile trial and, when a bottom trial exploits it,
waits for that save (``_FutureTrainingResult.resolve()``) and clones the checkpoint it produced.
``PopulationBasedTraining(wait_for_checkpoint=True)`` does the same; by default audition clones the
newest checkpoint that has landed (and skips the exploit when none has). The simulator makes the race
happen on purpose: every trial steps in lockstep, so a bottom trial's result often arrives while the
top trial's save is in flight.
"""

from __future__ import annotations

from typing import Any

import pytest

from actors import TuneConfig, search
from actors._engine.runs import TrialRuns
from actors._engine.scheduling import Scheduling
from actors.schedulers import PopulationBasedTraining
from actors.testing import simulate


def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"score": config["lr"] * i, "time_this_iter_s": 1.0}


def _run(monkeypatch: pytest.MonkeyPatch, wait: bool, seed: int) -> tuple[list[Any], dict[str, Any]]:
    """Clones decided while their source's save was in flight: (target, the source's checkpoint then,
    the checkpoint the target was started from, the source's newest when the target started)."""
    raced: dict[str, tuple[str, Any]] = {}
    started: list[tuple[str, Any, Any, Any]] = []
    orig_reply, orig_start = Scheduling.on_reply, TrialRuns.start_trial

    def on_reply(self: Any, kind: Any, trial_id: Any, run_id: int, batch: int, msg: Any) -> None:
        for a in msg.actions:
            src = self.table.trials.get(a.source_id or "")
            if a.kind.value == "clone" and src is not None and src.saves_inflight:
                raced[a.trial_id] = (src.trial_id, src.checkpoint.path if src.checkpoint else None)
        orig_reply(self, kind, trial_id, run_id, batch, msg)

    def start(self: Any, rec: Any) -> None:
        if rec.trial_id in raced and rec.trial_id not in self.clone_waits:
            source, before = raced.pop(rec.trial_id)
            newest = self.table.get(source).checkpoint
            started.append((rec.trial_id, before, rec.checkpoint.path if rec.checkpoint else None,
                            newest.path if newest else None))
        orig_start(self, rec)

    monkeypatch.setattr(Scheduling, "on_reply", on_reply)
    monkeypatch.setattr(TrialRuns, "start_trial", start)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=1, seed=1,
                                  hyperparam_mutations={"lr": search.uniform(0.1, 1.0)}, wait_for_checkpoint=wait)
    sim = simulate(curve, {"lr": search.uniform(0.1, 1.0)},
                   TuneConfig(metric="score", mode="max", num_samples=16, scheduler=pbt),
                   max_iterations=10, seed=seed, cpus=16)
    assert not sim.hung and sim.error is None, (sim.hang_reason, sim.error)
    return started, {"exploits": sum(1 for r in sim.results for h in r.metrics_history if h.get("pbt_exploit"))}


@pytest.mark.parametrize("seed", [3, 4])
def test_wait_for_checkpoint_clones_the_checkpoint_the_save_in_flight_commits(monkeypatch, seed) -> None:
    started, _ = _run(monkeypatch, wait=True, seed=seed)
    assert started, "the lockstep population made no clone race a save in flight: the test proves nothing"
    for trial_id, before, used, newest in started:
        assert used != before and used == newest, (
            f"{trial_id} restarted from {used}, not the checkpoint its source's save in flight committed")


def test_by_default_a_clone_takes_the_checkpoint_that_has_landed(monkeypatch) -> None:
    started, _ = _run(monkeypatch, wait=False, seed=3)
    assert started and all(used == before for _, before, used, _ in started)


def test_a_source_whose_save_gives_no_checkpoint_is_not_exploited_as_in_ray(tmp_path: Any) -> None:
    """Function trainables that never report a checkpoint: Ray 2.60's PBT waits for the top trial's save,
    which resolves to none, and skips every exploit (recorded, ``tests/data/ray_pbt_no_checkpoints.json``):
    every trial keeps its config. Before, audition's clone (decided before the save landed) started over
    with a mutated config."""
    import json
    import os

    from actors import RunConfig, Tuner, report

    with open(os.path.join(os.path.dirname(__file__), "data", "ray_pbt_no_checkpoints.json")) as f:
        ray = json.load(f)

    def train(config: dict[str, Any]) -> None:
        for i in range(1, 9):
            report({"loss": config["lr"] / i + 0.01 * i, "lr": config["lr"]})

    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, seed=0,
                                  hyperparam_mutations={"lr": search.uniform(0.01, 1.0)}, wait_for_checkpoint=True)
    grid = Tuner(train, param_space={"lr": search.grid_search([0.1, 0.5, 0.9, 0.05])},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=pbt, max_concurrent_trials=2),
                 run_config=RunConfig(storage_path=str(tmp_path), name="p", verbose=0)).fit()
    assert sorted(r.config["lr"] for r in grid) == ray["configs"]
    assert sorted(r.metrics["training_iteration"] for r in grid) == ray["final_iterations"]
    assert sorted({h["lr"] for r in grid for h in r.metrics_history}) == ray["reported_lrs"]
