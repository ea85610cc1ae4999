"""A PBT clone restores the checkpoint PBT saved of its source at the source's own perturbation, and its
run goes on from that checkpoint's ``training_iteration`` (and ``time_total_s``, ``timesteps_total``,
``episodes_total``), not from its own, as in Ray 2.60.

Recorded from Ray 2.60 (``/work/rayvenv``: a probe in /tmp running this scenario with ``from ray import
tune``, ``ray.init(num_cpus=2)``, twice per trainable kind and ordering, the same values each time):
async PBT, ``perturbation_interval=2``, ``resample_probability=0``, two trials ``lr=0.1`` (B) and
``lr=0.4`` (A), stop at iteration 5, each step reporting ``timesteps_this_iter=10``,
``episodes_this_iter=1``. Markers order them: B's step 2 waits for A's result 1, A's step 2 for B's
result 2; so A is the top quantile at its result 2 (PBT saves it there). Then either A runs ahead to its
result 3 (a newer checkpoint) before B's step 3 ("ahead"; A's step 4 waits for B's end), or A's step 3
waits for B's end ("level"). B is the bottom quantile at its result 4 and clones A's checkpoint of state
2 in both. Ray's ``Trainable.restore`` takes the iteration and the totals from that checkpoint: B reports
iterations 3, 4, 5 again (``iterations_since_restore`` 1, 2, 3), its perturbation clock is A's (it
perturbs again at 4: a class trainable is saved twice there, for ``checkpoint_frequency`` and for PBT),
and the stop at 5 lets it run three more steps; its result.json holds its rows before and after.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

import actors as tune
from actors import Callback, Checkpoint, CheckpointConfig, RunConfig, TuneConfig, Tuner
from actors.schedulers import PopulationBasedTraining

# B's results as Ray 2.60 reported them to on_trial_result: (training_iteration, state x,
# iterations_since_restore, timesteps_total, timesteps_since_restore, episodes_total)
RAY_B_RESULTS = [(1, 1, 1, 10, 10, 1), (2, 2, 2, 20, 20, 2), (3, 3, 3, 30, 30, 3), (4, 4, 4, 40, 40, 4),
                 (3, 3, 1, 30, 10, 3), (4, 4, 2, 40, 20, 4), (5, 5, 3, 50, 30, 5)]
RAY_B_LOADS = [2]  # the state B's clone loaded: A's at its perturbation (iteration 2)
# class trainable, checkpoint_frequency=1: the states B saved before the clone (Ray saves nothing at the
# result that clones it; audition still saves there: docs/coming-from-ray.md) and after it (twice at 4:
# checkpoint_frequency, and PBT's save at the clone's own perturbation)
RAY_B_CLASS_SAVES = ([1, 2, 3], [3, 4, 4, 5])
# B's result.json as Ray 2.60 wrote it: (training_iteration, iterations_since_restore) per row; the
# clone's rows are appended after B's own (progress.csv holds the same 7 rows)
RAY_B_HISTORY = [(1, 1), (2, 2), (3, 3), (4, 4), (3, 1), (4, 2), (5, 3)]
RAY_B_FINAL = {"training_iteration": 5, "iterations_since_restore": 3, "timesteps_total": 50, "episodes_total": 5}


def _wait(bar: str, name: str, timeout_s: float = 60.0) -> None:
    """Block until the other trial (or the driver's callback) wrote marker ``name``."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(os.path.join(bar, name)):
        assert time.monotonic() < deadline, f"marker {name} never came"
        time.sleep(0.01)


def _log(bar: str, **row: Any) -> None:
    with open(os.path.join(bar, "log.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


GATES = {  # (trial, step) -> the marker that step waits for
    "ahead": {("B", 2): "seen_A_1", ("A", 2): "seen_B_2", ("B", 3): "A4", ("A", 4): "B_done"},
    "level": {("B", 2): "seen_A_1", ("A", 2): "seen_B_2", ("B", 3): "seen_A_2", ("A", 3): "B_done"},
    "synch": {},  # synch=True pauses both trials at each sync point: no marker needed
}
# synch=True, the same trials and stop (recorded likewise, twice per kind): at iteration 2 both are
# paused, B clones A's checkpoint of state 2; at 4 again (B is still the bottom), from A's state 4. Each
# trial's results: (training_iteration, x, iterations_since_restore, timesteps_total,
# timesteps_since_restore, episodes_total); A restarts from its own pause checkpoints (2, 4)
RAY_SYNCH_RESULTS = [(1, 1, 1, 10, 10, 1), (2, 2, 2, 20, 20, 2), (3, 3, 1, 30, 10, 3), (4, 4, 2, 40, 20, 4),
                     (5, 5, 1, 50, 10, 5)]
RAY_SYNCH_LOADS = {"A": [2, 4], "B": [2, 4]}


def _gate(bar: str, who: str, it: int) -> None:
    Path(bar, f"{who}{it}").touch()
    wait = GATES[Path(bar, "order").read_text()].get((who, it))
    if wait is not None:
        _wait(bar, wait)


def _who(trial_id: str) -> str:
    return "A" if trial_id.endswith("00001") else "B"


def _scenario(bar: str) -> tuple[type, Any, type]:
    class Counter(tune.Trainable):
        def setup(self, config: dict[str, Any]) -> None:
            self.x = 0

        def step(self) -> dict[str, Any]:
            _gate(bar, _who(self.trial_id), self.x + 1)
            self.x += 1
            return {"score": self.config["lr"] * self.x, "x": self.x, "timesteps_this_iter": 10,
                    "episodes_this_iter": 1}

        def save_checkpoint(self, d: str) -> None:
            _log(bar, ev="save", who=_who(self.trial_id), x=self.x)
            Path(d, "s.json").write_text(json.dumps({"x": self.x}))

        def load_checkpoint(self, d: str) -> None:
            self.x = json.loads(Path(d, "s.json").read_text())["x"]
            _log(bar, ev="load", who=_who(self.trial_id), x=self.x)

    def counter(config: dict[str, Any]) -> None:
        who, x = _who(tune.get_context().get_trial_id()), 0
        ck = tune.get_checkpoint()
        if ck is not None:
            with ck.as_directory() as d:
                x = json.loads(Path(d, "s.json").read_text())["x"]
            _log(bar, ev="load", who=who, x=x)
        while True:
            _gate(bar, who, x + 1)
            x += 1
            with tempfile.TemporaryDirectory() as d:
                Path(d, "s.json").write_text(json.dumps({"x": x}))
                tune.report({"score": config["lr"] * x, "x": x, "timesteps_this_iter": 10, "episodes_this_iter": 1},
                            checkpoint=Checkpoint.from_directory(d))

    class Hooks(Callback):
        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                            **info: Any) -> None:
            _log(bar, ev="result", who=_who(trial.trial_id), row=[result[k] for k in (
                "training_iteration", "x", "iterations_since_restore", "timesteps_total",
                "timesteps_since_restore", "episodes_total")], lr=trial.config["lr"], tt=result["time_total_s"],
                 before=result["time_total_s"] - result["time_since_restore"])
            Path(bar, f"seen_{_who(trial.trial_id)}_{result['training_iteration']}").touch()

        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            Path(bar, f"{_who(trial.trial_id)}_done").touch()

    return Counter, counter, Hooks


def _fit(tmp_path: Path, kind: str, order: str, system: str = "multiproc") -> tuple[list[dict[str, Any]], Any]:
    """Run the scenario; the log rows (results, saves, loads) and the grid."""
    bar = str(tmp_path / "bar")
    os.makedirs(bar)
    Path(bar, "order").write_text(order)
    counter_cls, counter_fn, hooks = _scenario(bar)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, resample_probability=0.0,
                                  synch=order == "synch", hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]})
    grid = Tuner(counter_cls if kind == "class" else counter_fn, param_space={"lr": tune.grid_search([0.1, 0.4])},
                 tune_config=TuneConfig(metric="score", mode="max", scheduler=pbt, reuse_actors=False),
                 run_config=RunConfig(name="c", storage_path=str(tmp_path / "results"), stop={"training_iteration": 5},
                                      system=system, callbacks=[hooks()], verbose=0, checkpoint_config=CheckpointConfig(
                                          **({"checkpoint_frequency": 1} if kind == "class" else {})))).fit()
    assert not grid.errors
    return [json.loads(line) for line in Path(bar, "log.jsonl").read_text().splitlines()], grid


@pytest.mark.parametrize("system", ["multiproc", "simple"])  # (no markers: "simple" cannot deadlock on them)
@pytest.mark.parametrize("kind", ["class", "function"])
def test_synchronous_clones_restore_the_sync_points_checkpoint_and_iteration(tmp_path: Path, kind: str,
                                                                             system: str) -> None:
    rows, grid = _fit(tmp_path, kind, "synch", system)
    for who in ("A", "B"):
        mine = [r for r in rows if r["who"] == who]
        assert [tuple(r["row"]) for r in mine if r["ev"] == "result"] == RAY_SYNCH_RESULTS, who
        assert [r["x"] for r in mine if r["ev"] == "load"] == RAY_SYNCH_LOADS[who], who
    # B runs on with a config explored from A's lr=0.4 (Ray: 0.3 or 0.4, a neighbour in the list)
    assert {r["lr"] for r in rows if r["who"] == "B" and r["ev"] == "result" and r["row"][0] > 2} <= {0.3, 0.4}
    for r in grid:
        assert [h["training_iteration"] for h in r.metrics_history] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("order", ["ahead", "level"])
@pytest.mark.parametrize("kind", ["class", "function"])
def test_a_clone_restores_its_sources_perturbation_checkpoint_and_iteration(tmp_path: Path, kind: str,
                                                                             order: str) -> None:
    rows, grid = _fit(tmp_path, kind, order)
    b = [r for r in rows if r["who"] == "B"]
    assert [tuple(r["row"]) for r in b if r["ev"] == "result"] == RAY_B_RESULTS
    assert [r["x"] for r in b if r["ev"] == "load"] == RAY_B_LOADS
    if kind == "class":
        load = next(i for i, r in enumerate(b) if r["ev"] == "load")
        before, after = ([r["x"] for r in rows if r["ev"] == "save"] for rows in (b[:load], b[load:]))
        assert (before[:3], after) == RAY_B_CLASS_SAVES
    # the clone's time_total_s goes on from A's at its checkpoint (iteration 2), not from B's own (Ray:
    # time_total_s - time_since_restore of the clone's first result is A's time_total_s at 2)
    a_time_2 = next(r["tt"] for r in rows if r["who"] == "A" and r["ev"] == "result" and r["row"][0] == 2)
    assert [r for r in b if r["ev"] == "result"][4]["before"] == pytest.approx(a_time_2, abs=1e-6)
    (b_result,) = [r for r in grid if r.metrics["trial_id"].endswith("_00000")]
    assert {k: b_result.metrics[k] for k in RAY_B_FINAL} == RAY_B_FINAL
    assert [(h["training_iteration"], h["iterations_since_restore"]) for h in b_result.metrics_history] == RAY_B_HISTORY
    df = b_result.metrics_dataframe
    assert df is not None and list(zip(df["training_iteration"], df["iterations_since_restore"], strict=True)) \
        == RAY_B_HISTORY


# A retry restores its checkpoint the same way, which audition already did. Recorded from Ray 2.60 (a probe
# in /tmp, twice per kind, the same values): a trainable checkpointing at even iterations (class:
# checkpoint_frequency=2) reports 1-5, raises at step 6 once, max_failures=1, stop at 7. The retry goes
# on from the checkpoint at 4: (training_iteration, x, iterations_since_restore, timesteps_total,
# timesteps_since_restore) to on_trial_result. (Ray's result.json also keeps the first run's row 5;
# audition's history holds one row per iteration: docs/coming-from-ray.md.)
RAY_RETRY_RESULTS = [(1, 1, 1, 10, 10), (2, 2, 2, 20, 20), (3, 3, 3, 30, 30), (4, 4, 4, 40, 40), (5, 5, 5, 50, 50),
                     (5, 5, 1, 50, 10), (6, 6, 2, 60, 20), (7, 7, 3, 70, 30)]


@pytest.mark.parametrize("kind", ["class", "function"])
def test_a_retry_goes_on_from_its_checkpoints_iteration_and_totals(tmp_path: Path, kind: str) -> None:
    bar = tmp_path / "bar"
    bar.mkdir()

    def step(x: int) -> dict[str, Any]:
        if x == 6 and not (bar / "failed").exists():
            (bar / "failed").touch()
            raise RuntimeError("boom")
        return {"x": x, "timesteps_this_iter": 10}

    class Counter(tune.Trainable):
        def setup(self, config: dict[str, Any]) -> None:
            self.x = 0

        def step(self) -> dict[str, Any]:
            self.x += 1
            return step(self.x)

        def save_checkpoint(self, d: str) -> None:
            Path(d, "s.json").write_text(json.dumps({"x": self.x}))

        def load_checkpoint(self, d: str) -> None:
            self.x = json.loads(Path(d, "s.json").read_text())["x"]

    def counter(config: dict[str, Any]) -> None:
        x, ck = 0, tune.get_checkpoint()
        if ck is not None:
            with ck.as_directory() as d:
                x = json.loads(Path(d, "s.json").read_text())["x"]
        while True:
            x += 1
            metrics = step(x)
            if x % 2:
                tune.report(metrics)
                continue
            with tempfile.TemporaryDirectory() as d:
                Path(d, "s.json").write_text(json.dumps({"x": x}))
                tune.report(metrics, checkpoint=Checkpoint.from_directory(d))

    seen: list[tuple[int, ...]] = []

    class Hooks(Callback):
        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                            **info: Any) -> None:
            seen.append(tuple(result[k] for k in ("training_iteration", "x", "iterations_since_restore",
                                                  "timesteps_total", "timesteps_since_restore")))

    grid = Tuner(Counter if kind == "class" else counter, param_space={}, run_config=RunConfig(
        name="r", storage_path=str(tmp_path / "results"), stop={"training_iteration": 7}, callbacks=[Hooks()],
        failure_config=tune.FailureConfig(max_failures=1), verbose=0,
        checkpoint_config=CheckpointConfig(**({"checkpoint_frequency": 2} if kind == "class" else {})))).fit()
    assert not grid.errors
    assert seen == RAY_RETRY_RESULTS
