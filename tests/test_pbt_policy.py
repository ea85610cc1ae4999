"""PBT's policy log (``pbt_global.txt``, ``pbt_policy_<trial id>.txt``) and ``PopulationBasedTrainingReplay``.

Recorded from Ray 2.60 (/work/rayvenv) by a probe script: ``PopulationBasedTraining(time_attr=
"training_iteration", metric="acc", mode="max", perturbation_interval=2, hyperparam_mutations={"lr": [0.1,
0.2, 0.5, 1.0, 2.0]}, quantile_fraction=0.5)`` over ``{"lr": grid_search([0.1, 0.2, 1.0, 2.0]), "fixed": 7}``
(two at a time, a function trainable adding ``lr`` to ``acc`` at each of 8 steps, checkpointing each), whose
experiment directory then held the files quoted in ``RAY_FILES``; and ``PopulationBasedTrainingReplay`` of
``pbt_policy_3d6cd_00001.txt`` on the same trainable, whose results are quoted in the replay test.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import actors as tune
from actors import Checkpoint, RunConfig, TuneConfig, Tuner
from actors._engine.policy import policy_line
from actors.messages import ActionKind, SchedulerAction
from actors.schedulers import PopulationBasedTraining, PopulationBasedTrainingReplay
from actors.search import grid_search
from storage import StorageContext, log_pbt_exploit, read_bytes
from tests._fake_controller import Simulator

G = [  # Ray 2.60's pbt_global.txt, line by line
    '["0_lr=0.1000", "1_lr=0.2000", 3, 2, {"lr": 0.2, "fixed": 7}, {"lr": 0.1, "fixed": 7}]',
    '["0_lr=0.1000", "1_lr=0.2000", 3, 4, {"lr": 0.2, "fixed": 7}, {"lr": 0.2, "fixed": 7}]',
    '["0_lr=0.1000", "1_lr=0.2000", 5, 6, {"lr": 0.2, "fixed": 7}, {"lr": 0.5, "fixed": 7}]',
    '["1_lr=0.2000", "0_lr=0.1000", 7, 8, {"lr": 0.5, "fixed": 7}, {"lr": 0.2, "fixed": 7}]',
    '["2_lr=1.0000", "3_lr=2.0000", 3, 2, {"lr": 2.0, "fixed": 7}, {"lr": 0.5, "fixed": 7}]',
    '["2_lr=1.0000", "3_lr=2.0000", 3, 4, {"lr": 2.0, "fixed": 7}, {"lr": 1.0, "fixed": 7}]',
    '["2_lr=1.0000", "3_lr=2.0000", 5, 6, {"lr": 2.0, "fixed": 7}, {"lr": 2.0, "fixed": 7}]',
    '["2_lr=1.0000", "3_lr=2.0000", 7, 8, {"lr": 2.0, "fixed": 7}, {"lr": 1.0, "fixed": 7}]',
]
RAY_FILES = {  # the experiment's pbt_*.txt files (no file for 00003, which never exploited)
    "pbt_global.txt": G,
    "pbt_policy_3d6cd_00000.txt": G[0:3],
    "pbt_policy_3d6cd_00001.txt": G[0:4],
    "pbt_policy_3d6cd_00002.txt": G[4:8],
}
TRIAL = {"0": "3d6cd_00000", "1": "3d6cd_00001", "2": "3d6cd_00002", "3": "3d6cd_00003"}


def _pbt_files(root: str, ctx: StorageContext) -> dict[str, list[str]]:
    names = ["pbt_global.txt", *(f"pbt_policy_{t}.txt" for t in TRIAL.values())]
    out = {}
    for name in names:
        try:
            out[name] = read_bytes(ctx, f"{root}/{name}").decode().splitlines()
        except FileNotFoundError:
            continue
    return out


@pytest.mark.parametrize("url", ["local", "memory://policy-test"])
def test_exploits_write_rays_files(url: str, tmp_path: Any) -> None:
    # Ray's exploits, in order, written through the store: the same four files, line for line
    ctx = StorageContext(str(tmp_path) if url == "local" else url)
    root = ctx.join("exp")
    for line in G:
        target, source = json.loads(line)[:2]
        log_pbt_exploit(ctx, root, TRIAL[target[0]], TRIAL[source[0]], line)
    assert _pbt_files(root, ctx) == RAY_FILES


def test_the_line_is_rays_json_with_rays_tags() -> None:
    # Ray's tag of a trial of the default generator: "<index>_<drawn values>" (lr: a grid, fixed: a constant)
    action = SchedulerAction(ActionKind.LOG_POLICY, "3d6cd_00000", False, "3d6cd_00001", info={
        "trial_tag_config": {"lr": 0.1, "fixed": 7}, "source_tag_config": {"lr": 0.2, "fixed": 7},
        "trial_iteration": 3, "source_iteration": 2, "source_config": {"lr": 0.2, "fixed": 7},
        "new_config": {"lr": 0.1, "fixed": 7}})
    assert policy_line(action, (("lr",),)) == G[0]


def _pbt(**kw: Any) -> PopulationBasedTraining:
    return PopulationBasedTraining(time_attr="training_iteration", metric="acc", mode="max", perturbation_interval=2,
                                   hyperparam_mutations={"lr": [0.1, 0.2]}, resample_probability=0.0, seed=0, **kw)


@pytest.mark.parametrize("log_config", [True, False])
def test_an_exploit_is_logged_with_rays_iterations(log_config: bool) -> None:
    # Ray 2.60 logs the target's last_result before the result being decided (recorded: 3 for an exploit at
    # result 4, with perturbation_interval=2) and the source's latest result
    sim = Simulator(_pbt(log_config=log_config))
    for i, tid in enumerate(("t0", "t1")):
        sim.add(tid, {"lr": [0.1, 0.2][i], "fixed": 7})
        sim.start(tid)
    for _ in range(3):
        sim.report("t0", acc=0.1)
        sim.report("t1", acc=0.9, checkpoint=True)
    sim.report("t1", acc=0.9, checkpoint=True)  # t1: top at 4, checkpointed
    sim.report("t0", acc=0.1)  # t0 at 4: bottom, exploits t1
    (clone,) = sim.ctl.calls_of("clone")
    policy = sim.ctl.calls_of("policy")
    if not log_config:
        assert policy == []
        return
    assert policy == [("policy", "t0", "t1", {
        "trial_tag": "", "source_tag": "",  # (the simulator's trials carry no experiment_tag)
        "trial_tag_config": {"lr": 0.1, "fixed": 7}, "source_tag_config": {"lr": 0.2, "fixed": 7},
        "trial_iteration": 3, "source_iteration": 4, "source_config": {"lr": 0.2, "fixed": 7},
        "new_config": clone[3]})]


def train_fn(config: dict[str, Any], last: int = 8) -> None:
    ckpt = tune.get_checkpoint()
    start, acc = (ckpt.to_dict()["step"], ckpt.to_dict()["acc"]) if ckpt else (0, 0.0)
    for step in range(start + 1, last + 1):
        acc += config["lr"]
        tune.report({"acc": acc, "lr": config["lr"], "step": step, "start": start, "pid": os.getpid()},
                    checkpoint=Checkpoint.from_dict({"step": step, "acc": acc}))


def train_to_10(config: dict[str, Any]) -> None:
    train_fn(config, last=10)


@pytest.mark.parametrize("where", ["local, multiproc", "memory, simple"])
def test_a_pbt_run_writes_the_policy_files(where: str, storage_dir: str, no_leaks: None) -> None:
    pbt = PopulationBasedTraining(time_attr="training_iteration", metric="acc", mode="max", perturbation_interval=2,
                                  hyperparam_mutations={"lr": [0.1, 0.2, 0.5, 1.0, 2.0]}, quantile_fraction=0.5,
                                  seed=0)
    url, system = (storage_dir, "multiproc") if where.startswith("local") else ("memory://pbt-policy-run", "simple")
    grid = Tuner(train_fn, param_space={"lr": grid_search([0.1, 0.2, 1.0, 2.0]), "fixed": 7},
                 tune_config=TuneConfig(scheduler=pbt, max_concurrent_trials=2),
                 run_config=RunConfig(storage=url, name="pbt", verbose=0, system=system)).fit()
    ctx = StorageContext(url)
    exp = ctx.join("pbt")

    def read(name: str) -> list[str] | None:
        try:
            return read_bytes(ctx, f"{exp}/{name}").decode().splitlines()
        except FileNotFoundError:
            return None

    # every exploit is in the log; one whose clone had nothing left to run (it took a checkpoint at the last
    # step) never reaches a result, so the results hold no more than the log. The log is never empty: the
    # slower trial of the first two is below the other at its first perturbation. But in a loaded run (seen
    # once in the suite) the first trial can end before the second reports, so every clone is of a trial
    # that ended at its last step and no result shows an exploit
    exploits = [h["pbt_exploit"] for r in grid for h in r.metrics_history if h.get("pbt_exploit")]
    rows = [json.loads(line) for line in read("pbt_global.txt") or []]
    assert rows and len(rows) >= len(exploits)
    if system == "simple":  # one process, where the trials' reports take turns with the controller's: 25 of 25
        assert exploits     # runs had exploits in their results (2026-12-07), so the matching below is tested
    trials = sorted(r.metrics["trial_id"] for r in grid)
    # Ray's tag of each trial as it was added (the grid's lr, four decimals)
    ray_tag = {t: f"{t[-1]}_lr={v:.4f}" for t, v in zip(trials, (0.1, 0.2, 1.0, 2.0), strict=True)}
    of_tag = {tag: t for t, tag in ray_tag.items()}
    logged = [(of_tag[r[0]], of_tag[r[1]], r[4], r[5]) for r in rows]
    for e in exploits:
        assert (e["trial_id"], e["source"], e["source_config"], e["new_config"]) in logged
    for trial_id in trials:  # a trial's own file ends with its last exploit
        mine = [r for r in rows if r[0] == ray_tag[trial_id]]
        own = read(f"pbt_policy_{trial_id}.txt")
        assert (own is not None) == bool(mine)
        if own is not None:
            assert json.loads(own[-1]) == mine[-1]


# ------------------------------------------------------------------ PopulationBasedTrainingReplay


def test_replay_reads_rays_policy_as_ray(tmp_path: Any) -> None:
    # Ray 2.60: PopulationBasedTrainingReplay(<file>).config and ._policy of each of the recorded files
    expected = {"pbt_policy_3d6cd_00000.txt": ({"lr": 0.2, "fixed": 7}, [(6, {"lr": 0.5, "fixed": 7})]),
                "pbt_policy_3d6cd_00001.txt": ({"lr": 0.2, "fixed": 7}, [(6, {"lr": 0.5, "fixed": 7}),
                                                                         (8, {"lr": 0.2, "fixed": 7})]),
                "pbt_policy_3d6cd_00002.txt": ({"lr": 2.0, "fixed": 7}, [(8, {"lr": 1.0, "fixed": 7})])}
    for name, (config, policy) in expected.items():
        path = tmp_path / name
        path.write_text("".join(line + "\n" for line in RAY_FILES[name]))
        replay = PopulationBasedTrainingReplay(str(path))
        assert (replay.config, replay._policy) == (config, policy)
        assert replay.experiment_tag == f"replay_{name}"
    assert tune.create_scheduler("PBT_REPLAY", policy_file=str(path)).config == {"lr": 2.0, "fixed": 7}


def test_replay_bad_files(tmp_path: Any) -> None:
    # Ray 2.60: ValueError "Policy file not found: <path>" / "Could not read PBT policy file: <path>."
    with pytest.raises(ValueError, match=r"Policy file not found: .*missing\.txt"):
        PopulationBasedTrainingReplay(str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match=r"Could not read PBT policy file: .*bad\.txt"):
        PopulationBasedTrainingReplay(str(bad))


def test_replay_applies_the_schedule_at_the_recorded_iterations(tmp_path: Any, storage_dir: str,
                                                                 no_leaks: None) -> None:
    path = tmp_path / "pbt_policy_3d6cd_00001.txt"
    path.write_text("".join(line + "\n" for line in RAY_FILES[path.name]))
    grid = Tuner(train_to_10, param_space={"lr": 9.0},
                 tune_config=TuneConfig(scheduler=PopulationBasedTrainingReplay(str(path))),
                 run_config=RunConfig(storage=storage_dir, name="replay", verbose=0)).fit()
    (r,) = grid
    rows = [(h["training_iteration"], h["lr"], round(h["acc"], 6), h["start"]) for h in r.metrics_history]
    # Ray 2.60 (recorded, same trainable to step 10): iterations 1-6 at lr 0.2 (acc 0.2 ... 1.2), then the trial
    # restarts from its checkpoint at 6 with lr 0.5: iteration 7, acc 1.7, start 6; Ray then ends the trial
    # there (1.7 is its last result, config lr 0.5), where audition goes on with the schedule
    assert rows[:7] == [(1, 0.2, 0.2, 0), (2, 0.2, 0.4, 0), (3, 0.2, 0.6, 0), (4, 0.2, 0.8, 0), (5, 0.2, 1.0, 0),
                        (6, 0.2, 1.2, 0), (7, 0.5, 1.7, 6)]
    assert rows[7:] == [(8, 0.5, 2.2, 6), (9, 0.2, 2.4, 8), (10, 0.2, 2.6, 8)]
    assert r.config == {"lr": 0.2, "fixed": 7}  # the param_space was overwritten (with a warning, as Ray)
    assert r.metrics["pid"] != os.getpid()


def test_replay_takes_one_trial(tmp_path: Any, storage_dir: str, no_leaks: None) -> None:
    path = tmp_path / "pbt_policy_3d6cd_00002.txt"
    path.write_text("".join(line + "\n" for line in RAY_FILES[path.name]))
    with pytest.raises(tune.TuneError, match="More than one trial added to PBT replay run"):
        Tuner(train_fn, param_space={"lr": 9.0},
              tune_config=TuneConfig(scheduler=PopulationBasedTrainingReplay(str(path)), num_samples=2),
              run_config=RunConfig(storage=storage_dir, name="two", verbose=0, system="simple")).fit()


class Accumulate(tune.Trainable):
    """Adds ``lr`` to ``acc`` at each step; saves only when asked (no checkpoint of its own)."""

    def setup(self, config: dict[str, Any]) -> None:
        self.acc, self.start = 0.0, 0

    def step(self) -> dict[str, Any]:
        self.acc += self.config["lr"]
        return {"acc": self.acc, "lr": self.config["lr"], "start": self.start, "done": self.iteration + 1 >= 8}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"acc": self.acc, "step": self.iteration}

    def load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.acc, self.start = checkpoint["acc"], checkpoint["step"]


def test_replay_checkpoints_a_class_trainable_at_the_change(tmp_path: Any, storage_dir: str, no_leaks: None) -> None:
    # as Ray's replay, a save is taken at the change: the trial resumes from iteration 6 with the new lr.
    # Recorded from Ray 2.60 with the same class (its save_checkpoint writing the same values to a file) and
    # policy file: these eight rows, config {"lr": 0.5, "fixed": 7}
    path = tmp_path / "pbt_policy_3d6cd_00000.txt"
    path.write_text("".join(line + "\n" for line in RAY_FILES[path.name]))
    grid = Tuner(Accumulate, tune_config=TuneConfig(scheduler=PopulationBasedTrainingReplay(str(path))),
                 run_config=RunConfig(storage=storage_dir, name="replay_cls", verbose=0)).fit()
    rows = [(h["training_iteration"], h["lr"], round(h["acc"], 6), h["start"]) for h in grid[0].metrics_history]
    assert rows == [(1, 0.2, 0.2, 0), (2, 0.2, 0.4, 0), (3, 0.2, 0.6, 0), (4, 0.2, 0.8, 0), (5, 0.2, 1.0, 0),
                    (6, 0.2, 1.2, 0), (7, 0.5, 1.7, 6), (8, 0.5, 2.2, 6)]
    assert grid[0].config == {"lr": 0.5, "fixed": 7}
