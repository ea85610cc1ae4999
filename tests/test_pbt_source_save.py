"""PBT's save of a source trial runs again at an iteration already checkpointed, as Ray 2.60 does.

Recorded from Ray 2.60 (``/work/rayvenv``: a probe in /tmp running this scenario, the same trainables,
gates and callback, with ``from ray import tune``; ``ray.init(num_cpus=2)``): async PBT,
``perturbation_interval=2``, two trials ``lr=0.1`` (B) and ``lr=0.4`` (A), stop at iteration 3. Each step
first writes a marker; B's step 1 waits for A's, A's step 2 for B's step 3 (B's result 2 was decided),
B's step 3 for A's step 3: so at A's result 2 both trials are ranked and running, A is the top quantile
and runs on, and PBT asks it to save. Ray's ``_schedule_trial_save`` runs ``save_checkpoint`` although
``checkpoint_frequency`` saved that iteration: two directories hold iteration 2, and the callbacks get
``on_checkpoint``/``on_trial_save`` for each in turn. A function trainable's save returns the checkpoint
its last report gave: no new directory, both hooks again with the same path. A save PBT asks for on a
result that pauses the trial is that result's only one. (A pause, and the end, save once:
``test_stop_saves.py``, ``test_api.py::test_checkpoint_at_end_of_a_pause_is_never_overwritten``.)
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
from actors._driver.config import default_cpus
from actors._engine.effects import EffectKind
from actors._engine.lifecycle import TrialTable
from actors._engine.reducer import Decision
from actors._engine.saves import SaveHooks, save_hooks
from actors._engine.scheduler_host import SchedulerHost
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import ActionKind, CheckpointRef, HookKind, SaveKind, SchedulerAction, SchedulerCall
from actors.schedulers import FIFOScheduler, PopulationBasedTraining


def _wait(bar: str, name: str, timeout_s: float = 60.0) -> None:
    """Block until another trial (or the driver's callback) has written marker ``name``."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(os.path.join(bar, name)):
        assert time.monotonic() < deadline, f"marker {name} never came"
        time.sleep(0.01)


def _mark(bar: str, name: str) -> None:
    Path(bar, name).touch()


def _log(bar: str, **row: Any) -> None:
    with open(os.path.join(bar, "log.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


def _gate(bar: str, lr: float, it: int) -> None:
    """Order the two trials so that A's result 2 is ranked against B's (see the module's docstring)."""
    who = "A" if lr == 0.4 else "B"
    _mark(bar, f"{who}{it}")
    if os.path.exists(os.path.join(bar, "simple")):
        # The in-process system runs the trials as threads, B's step mostly before A's, which ranks A's
        # result 2 against B's running trial. The other gates deadlock there (seen: B's step 3 waiting for A3
        # or for the callback's seen_A_2, 60 s); this one keeps a loaded machine from letting A run two steps
        # before B reported once (A was then not asked to save: 1 of 2 suite runs on 2026-12-07).
        if who == "A" and it == 2:
            _wait(bar, "B2")
        return
    if os.path.exists(os.path.join(bar, "three")):  # (test_pbt_save_on_a_result_that_pauses_is_saved_once)
        if who == "A" and it == 2:
            _wait(bar, "seen_B_2")
        return
    if who == "A" and it == 2:
        _wait(bar, "B3")
    elif who == "B" and it == 1:
        _wait(bar, "A1")
    elif who == "B" and it == 3:
        _wait(bar, "A3")


def _scenario(bar: str) -> tuple[type, Any, type]:
    class Counter(tune.Trainable):
        def setup(self, config: dict[str, Any]) -> None:
            self.x = 0

        def step(self) -> dict[str, Any]:
            _gate(bar, self.config["lr"], self.x + 1)
            self.x += 1
            return {"score": self.config["lr"] * self.x, "x": self.x}

        def save_checkpoint(self, d: str) -> None:
            _log(bar, ev="save_checkpoint", trial=self.trial_id, x=self.x)
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"x": self.x}, f)

        def load_checkpoint(self, d: str) -> None:  # (synchronous PBT pauses both trials, B clones A)
            self.x = json.loads(Path(d, "s.json").read_text())["x"]

    def counter(config: dict[str, Any]) -> None:
        x = 0
        while True:
            _gate(bar, config["lr"], x + 1)
            x += 1
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "s.json"), "w") as f:
                    json.dump({"x": x}, f)
                tune.report({"score": config["lr"] * x, "x": x}, checkpoint=Checkpoint.from_directory(d))

    class Hooks(Callback):
        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any],
                            **info: Any) -> None:
            _mark(bar, f"seen_{'A' if trial.config['lr'] == 0.4 else 'B'}_{result['training_iteration']}")
            _log(bar, ev="on_trial_result", trial=trial.trial_id, it=result["training_iteration"])

        def on_checkpoint(self, iteration: int, trials: list[Any], trial: Any, checkpoint: Any, **info: Any) -> None:
            _log(bar, ev="on_checkpoint", trial=trial.trial_id, ck=os.path.basename(checkpoint.path))

        def on_trial_save(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            ck = os.path.basename(trial.checkpoint.path) if trial.checkpoint else None
            _log(bar, ev="on_trial_save", trial=trial.trial_id, ck=ck)

    return Counter, counter, Hooks


def _run(tmp_path: Path, kind: str, freq: int, system: str, third: bool = False,
         keep: int | None = None) -> tuple[list[tuple[str, int]], list[list[Any]]]:
    """A's checkpoint directories (name, state) and A's log rows (hooks and saves), in order."""
    bar = str(tmp_path / "bar")
    os.makedirs(bar)
    if system != "simple" and third:
        _mark(bar, "three")
    elif system == "simple":
        _mark(bar, "simple")
    counter_cls, counter_fn, hooks = _scenario(bar)
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                  hyperparam_mutations={"lr": [0.1, 0.2, 0.3, 0.4]})
    ckpt = CheckpointConfig(num_to_keep=keep, **({"checkpoint_frequency": freq} if kind == "class" else {}))
    trainable = counter_cls if kind == "class" else counter_fn
    # two trials at a time (Ray: num_cpus=2), so a third one waits PENDING
    trainable = tune.with_resources(trainable, {"cpu": default_cpus() / 2}) if third else trainable
    grid = Tuner(trainable, param_space={"lr": tune.grid_search([0.1, 0.4, 0.2] if third else [0.1, 0.4])},
                 tune_config=TuneConfig(metric="score", mode="max", scheduler=pbt, reuse_actors=False),
                 run_config=RunConfig(name="s", storage_path=str(tmp_path / "results"), system=system,
                                      stop={"training_iteration": 3}, callbacks=[hooks()], checkpoint_config=ckpt,
                                      verbose=0)).fit()
    assert not grid.errors
    (a,) = [r for r in grid if r.metrics["trial_id"].endswith("_00001")]  # lr=0.4 (a clone's lr changes)
    assert a.path is not None
    dirs = sorted(d for d in os.listdir(a.path) if d.startswith("checkpoint_"))
    kept = [(d, json.loads(Path(a.path, d, "s.json").read_text())["x"]) for d in dirs]
    rows = [json.loads(line) for line in Path(bar, "log.jsonl").read_text().splitlines()]
    return kept, [[r["ev"], r.get("it", r.get("x", r.get("ck")))] for r in rows if r["trial"] == a.metrics["trial_id"]]


# Recorded from Ray 2.60 (see the module's docstring), of trial A: its checkpoint directories (name, the
# state it holds); the directories its on_checkpoint/on_trial_save pairs name, in order (each pair is
# on_checkpoint then on_trial_save); the states its save_checkpoint calls saved. Where the hooks fall among
# the on_trial_result calls is a race in Ray (the second save's pair came before on_trial_result(3) in one
# run, after it in another) and so is where save_checkpoint falls: those orders are not compared.
RAY_CLASS_FREQ_1 = ([("checkpoint_000000", 1), ("checkpoint_000001", 2), ("checkpoint_000002", 2),
                     ("checkpoint_000003", 3)],
                    ["checkpoint_000000", "checkpoint_000001", "checkpoint_000002", "checkpoint_000003"],
                    [1, 2, 2, 3])
RAY_CLASS_FREQ_2 = ([("checkpoint_000000", 2), ("checkpoint_000001", 2), ("checkpoint_000002", 3)],
                    ["checkpoint_000000", "checkpoint_000001", "checkpoint_000002"],
                    [2, 2, 3])
RAY_FUNCTION = ([("checkpoint_000000", 1), ("checkpoint_000001", 2), ("checkpoint_000002", 3)],
                ["checkpoint_000000", "checkpoint_000001", "checkpoint_000001", "checkpoint_000002"],
                [])


@pytest.mark.parametrize("system", ["multiproc", "simple"])
@pytest.mark.parametrize(("kind", "freq", "ray"), [("class", 1, RAY_CLASS_FREQ_1), ("class", 2, RAY_CLASS_FREQ_2),
                                                   ("function", 0, RAY_FUNCTION)])
def test_pbt_source_saves_again_at_a_checkpointed_iteration(tmp_path: Path, kind: str, freq: int,
                                                            ray: tuple[Any, ...], system: str) -> None:
    dirs, rows = _run(tmp_path, kind, freq, system)
    assert dirs == ray[0]
    pairs = [[hook, d] for d in ray[1] for hook in ("on_checkpoint", "on_trial_save")]
    assert [r for r in rows if r[0] in ("on_checkpoint", "on_trial_save")] == pairs
    assert [r[1] for r in rows if r[0] == "on_trial_result"] == [1, 2, 3]
    assert [r[1] for r in rows if r[0] == "save_checkpoint"] == ray[2]


# Recorded from Ray 2.60 as above with CheckpointConfig(num_to_keep=2): each of the two directories of
# iteration 2 counts, so the third checkpoint retires PBT's (checkpoint_000001), as Ray's does. A function
# trainable's checkpoint announced twice is counted once here; Ray registers it twice and deletes
# checkpoint_000001 at the next one while its best_checkpoints still name it (docs/coming-from-ray.md).
RAY_KEEP_2 = {"class": [("checkpoint_000002", 2), ("checkpoint_000003", 3)],
              "function": [("checkpoint_000001", 2), ("checkpoint_000002", 3)]}  # Ray's disk: checkpoint_000002


@pytest.mark.parametrize("system", ["multiproc", "simple"])
@pytest.mark.parametrize("kind", ["class", "function"])
def test_pbt_source_save_counts_for_num_to_keep(tmp_path: Path, kind: str, system: str) -> None:
    dirs, _ = _run(tmp_path, kind, 1 if kind == "class" else 0, system, keep=2)
    assert dirs == RAY_KEEP_2[kind]


# Recorded from Ray 2.60 as above with a third trial C (lr=0.2) and two at a time (ray.init(num_cpus=2)),
# A's step 2 waiting until B's result 2 was seen: B perturbs alone and pauses (C is PENDING), so at A's
# result 2 PBT asks A to save and pauses it (B is PAUSED). Ray skips the checkpoint_frequency save of a
# result that pauses and pauses after PBT's save without another: one save_checkpoint, one directory at
# iteration 2 (here the frequency's checkpoint is reused); A resumes from it.
# A function trainable: no second on_checkpoint/on_trial_save either (this one does not read its checkpoint
# back: it counts from 1 again after the pause, in Ray as here).
RAY_PAUSED = {"class": ([("checkpoint_000000", 1), ("checkpoint_000001", 2), ("checkpoint_000002", 3)],
                        ["checkpoint_000000", "checkpoint_000001", "checkpoint_000002"],
                        [1, 2, 3]),
              "function": ([("checkpoint_000000", 1), ("checkpoint_000001", 2), ("checkpoint_000002", 1)],
                           ["checkpoint_000000", "checkpoint_000001", "checkpoint_000002"],
                           [])}


@pytest.mark.parametrize("system", ["multiproc", "simple"])
@pytest.mark.parametrize("kind", ["class", "function"])
def test_pbt_save_on_a_result_that_pauses_is_saved_once(tmp_path: Path, kind: str, system: str) -> None:
    dirs, rows = _run(tmp_path, kind, 1 if kind == "class" else 0, system, third=True)
    ray = RAY_PAUSED[kind]
    assert dirs == ray[0]
    pairs = [[hook, d] for d in ray[1] for hook in ("on_checkpoint", "on_trial_save")]
    assert [r for r in rows if r[0] in ("on_checkpoint", "on_trial_save")] == pairs
    assert [r[1] for r in rows if r[0] == "on_trial_result"] == [1, 2, 3]
    assert [r[1] for r in rows if r[0] == "save_checkpoint"] == ray[2]


# ---------------------------------------------------------------------------- the pure pieces, unit by unit


class _SavesItself(FIFOScheduler):
    """Asks a save of the reporting trial (and of another) and returns the decision it is given."""

    def __init__(self, decision: Decision) -> None:
        super().__init__()
        self.decision = decision

    def on_trial_result(self, controller: Any, trial: TrialSnapshot, result: dict[str, Any]) -> Decision:
        controller.checkpoint_trial(trial)
        controller.checkpoint_trial("other")
        return self.decision


@pytest.mark.parametrize(("decision", "own"), [(Decision.CONTINUE, SaveKind.SCHEDULER),
                                                (Decision.PAUSE, SaveKind.PAUSE)])
def test_scheduler_host_makes_a_pausing_results_own_save_a_pause_save(decision: Decision, own: SaveKind) -> None:
    host = SchedulerHost(_SavesItself(decision), "score", "max")
    call = SchedulerCall(1, HookKind.RESULT, "t", ({"score": 1.0, "training_iteration": 2},),
                         (TrialSnapshot("t", {}, TrialStatus.RUNNING),))
    reply = host.handle(call)
    assert [(a.kind, a.trial_id, a.save) for a in reply.actions] == [
        (ActionKind.CHECKPOINT, "t", own), (ActionKind.CHECKPOINT, "other", SaveKind.SCHEDULER)]


def test_save_hooks_follow_ray() -> None:
    known = CheckpointRef("ckpt/1", 1, 2)
    assert save_hooks(known, 2, CheckpointRef("ckpt/2", 2, 2), SaveKind.PAUSE) is SaveHooks.CHECKPOINT  # a new one
    assert save_hooks(None, 2, known, SaveKind.PAUSE) is SaveHooks.CHECKPOINT
    assert save_hooks(known, 3, known, SaveKind.SCHEDULER) is SaveHooks.SAVED  # older than the trial's iteration
    assert save_hooks(known, 3, known, SaveKind.PAUSE) is SaveHooks.SAVED
    assert save_hooks(known, 2, known, SaveKind.SCHEDULER) is SaveHooks.CHECKPOINT  # PBT's source: announced again
    assert save_hooks(known, 2, known, SaveKind.PAUSE) is SaveHooks.NONE
    assert save_hooks(known, 2, known, SaveKind.CALLBACK) is SaveHooks.NONE


def test_trial_table_passes_the_kind_of_save_on() -> None:
    table = TrialTable()
    table.add("t", {})
    table.start("t")
    rec = table.get("t")
    assert table.results("t", rec.run_id, 1, ({"training_iteration": 1},), None)
    table.decided("t", rec.run_id, 1, Decision.CONTINUE)
    (save,) = table.request(SchedulerAction(ActionKind.CHECKPOINT, "t"))
    assert (save.kind, save.save) == (EffectKind.SAVE, SaveKind.SCHEDULER)
    (save,) = table.request(SchedulerAction(ActionKind.CHECKPOINT, "t", save=SaveKind.CALLBACK))
    assert save.save is SaveKind.CALLBACK
    table.saved("t", rec.run_id, None)
    table.saved("t", rec.run_id, None)
    (pause,) = table.request(SchedulerAction(ActionKind.PAUSE, "t", True))
    assert (pause.kind, pause.save) == (EffectKind.SAVE, SaveKind.PAUSE)
