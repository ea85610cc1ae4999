"""A trial's ``experiment_tag`` after a PBT exploit, as Ray 2.60 gives it.

Recorded from Ray 2.60 (``/work/rayvenv``, a probe in /tmp with ``from ray import tune``,
``ray.init(num_cpus=2)``): ``param_space={"lr": grid_search([0.001, 0.01, 0.1, 1.0]), "n": 1, "s": "a b",
"nest": {"x": 0.5}}``, ``PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
hyperparam_mutations={"lr": uniform(0.001, 1.0), "n": [1, 2, 3], "s": ["a b", "c/d", "e"], "nest": {"x":
[0.5, 0.25]}}, quantile_fraction=0.5, resample_probability=0.5)``, stop at 8 (12 and 14 for the restores),
``max_concurrent_trials=2``; a class trainable with ``checkpoint_frequency=1`` and a function trainable
reporting a checkpoint with each result, async and ``synch=True``; a Callback logged ``trial.experiment_tag``
and ``trial.last_result["experiment_tag"]`` in every hook, then ``Result.metrics``, ``get_dataframe()`` and
``pbt_global.txt`` were read; a run stopped by SIGINT from a callback was resumed with ``Tuner.restore``.
Ray's draws are not reproducible run to run, so the rules are checked against the configs audition's
exploits produced. The rules recorded: an exploited trial's tag is ``<its tag when PBT was told of
it>@perturbed[k=v,...]`` over the mutated top-level keys, sorted, of the new config (floats to 4 places, a
nested dict cleaned whole); a later exploit starts again from that tag (never nested in one run); after
``Tuner.restore`` PBT is told of the trial again with its perturbed tag (its policy line's tag is the
perturbed one); callbacks' trials, ``on_trial_complete``/``on_experiment_end``, ``Result.metrics`` and a
restored experiment's results carry the new tag; ``get_dataframe()`` has no ``experiment_tag`` column; the
policy logs name trials by their tags when PBT was told of them.
"""
from __future__ import annotations

import json
import os
from typing import Any

import actors as tune
from actors import Callback, CheckpointConfig, RunConfig, TuneConfig, Tuner
from actors._engine.scheduler_host import RecordingController
from actors._engine.trial import TrialSnapshot, TrialStatus, perturbed_tag
from actors.messages import ActionKind
from actors.schedulers import PopulationBasedTraining

MUTATIONS = {"lr": tune.uniform(0.001, 1.0), "n": [1, 2, 3], "s": ["a b", "c/d", "e"], "nest": {"x": [0.5, 0.25]}}
# Ray 2.60's tags (recorded): (the tag when added, the exploit's new config) -> the trial's new tag
RAY_TAGS = [
    (("0_lr=0.0010", {"lr": 0.919229312144508, "n": 1, "s": "c/d", "nest": {"x": 0.5}}),
     "0_lr=0.0010@perturbed[lr=0.9192,n=1,nest=x_0_5,s=c_d]"),
    (("2_lr=0.1000", {"lr": 0.09657689070406775, "n": 3, "s": "a b", "nest": {"x": 0.25}}),
     "2_lr=0.1000@perturbed[lr=0.0966,n=3,nest=x_0_25,s=a_b]"),
    (("2_lr=0.1000", {"lr": 1.2, "n": 1, "s": "c/d", "nest": {"x": 0.25}}),
     "2_lr=0.1000@perturbed[lr=1.2000,n=1,nest=x_0_25,s=c_d]"),
]
# how Ray wrote each mutated value in those tags (recorded)
RAY_S = {"a b": "a_b", "c/d": "c_d", "e": "e"}
RAY_NEST = {0.5: "x_0_5", 0.25: "x_0_25"}
RAY_ORIG = ["0_lr=0.0010", "1_lr=0.0100", "2_lr=0.1000", "3_lr=1.0000"]


def test_the_tag_is_rays() -> None:
    for (orig, config), want in RAY_TAGS:
        assert perturbed_tag(orig, config, MUTATIONS) == want


def _expected(orig: str, config: dict[str, Any]) -> str:
    """Ray's tag for ``config`` written out from the recorded pieces (not by ``perturbed_tag``)."""
    return (f"{orig}@perturbed[lr={config['lr']:.4f},n={config['n']},nest={RAY_NEST[config['nest']['x']]},"
            f"s={RAY_S[config['s']]}]")


class Step(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.v = 0.0

    def step(self) -> dict[str, Any]:
        self.v += self.config["lr"] * self.config["n"]
        return {"score": self.v}

    def save_checkpoint(self, d: str) -> None:
        with open(os.path.join(d, "s.json"), "w") as f:
            json.dump({"v": self.v}, f)

    def load_checkpoint(self, d: str) -> None:
        with open(os.path.join(d, "s.json")) as f:
            self.v = json.load(f)["v"]


class Tags(Callback):
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, dict[str, Any]]] = []  # (hook, trial id, tag, config)
        self.ended: dict[str, str] = {}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        assert "experiment_tag" not in result  # as Ray: the result argument carries none
        self.rows.append(("result", trial.trial_id, trial.experiment_tag, dict(trial.config)))

    def on_checkpoint(self, iteration: int, trials: list, trial: Any, checkpoint: Any, **info: Any) -> None:
        self.rows.append(("checkpoint", trial.trial_id, trial.experiment_tag, dict(trial.config)))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        assert trial.last_result["experiment_tag"] == trial.experiment_tag
        self.rows.append(("complete", trial.trial_id, trial.experiment_tag, dict(trial.config)))

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self.ended = {t.trial_id: t.experiment_tag for t in trials}


def test_an_exploited_trial_is_tagged_as_in_ray(tmp_path: Any) -> None:
    cb = Tags()
    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, metric="score",
                                  mode="max", hyperparam_mutations=MUTATIONS, quantile_fraction=0.5,
                                  resample_probability=0.5, seed=3)
    space = {"lr": tune.grid_search([0.001, 0.01, 0.1, 1.0]), "n": 1, "s": "a b", "nest": {"x": 0.5}}
    grid = Tuner(Step, param_space=space, tune_config=TuneConfig(scheduler=pbt, max_concurrent_trials=2),
                 run_config=RunConfig(name="e", storage_path=str(tmp_path), callbacks=[cb], system="simple",
                                      verbose=0, stop={"training_iteration": 8},
                                      checkpoint_config=CheckpointConfig(checkpoint_frequency=1))).fit()
    ids = sorted({tid for _, tid, _, _ in cb.rows})
    orig = dict(zip(ids, RAY_ORIG, strict=True))
    perturbed: dict[str, set[str]] = {tid: set() for tid in ids}
    for _hook, tid, tag, config in cb.rows:
        if tag != orig[tid]:  # exploited: the tag of the config the exploit gave, from the tag it was added with
            assert tag == _expected(orig[tid], config)
            perturbed[tid].add(tag)
    assert any(perturbed.values()), "the scenario must exploit"
    assert any(len(tags) > 1 for tags in perturbed.values()), "the scenario must exploit a trial twice"
    final = {tid: [tag for _, t, tag, _ in cb.rows if t == tid][-1] for tid in ids}
    assert cb.ended == final
    assert {tid: tag for hook, tid, tag, _ in cb.rows if hook == "complete"} == final
    assert {r.trial_id: r.metrics["experiment_tag"] for r in grid} == final
    # its directory keeps the name it was given at its first start, with its first tag (Ray 2.60's did:
    # pbt_train_2d96d_00000_0_lr=0.0100_<date> stayed after its exploit to lr=1.08)
    named = {r.trial_id: os.path.basename(r.path) for r in grid}
    assert all(named[t].startswith(f"Step_{t}_{orig[t]}_") for t in ids), named
    assert "experiment_tag" not in grid.get_dataframe().columns  # as Ray's
    with open(tmp_path / "e" / "pbt_global.txt") as f:
        logged = [json.loads(line)[:2] for line in f]
    assert logged and all(tag in RAY_ORIG for pair in logged for tag in pair)  # tags when added
    restored = Tuner.restore(str(tmp_path / "e"), Step).get_results()
    assert {r.trial_id: r.metrics["experiment_tag"] for r in restored} == final
    assert {r.trial_id: os.path.basename(r.path) for r in restored} == named


def _snap(tid: str, config: dict[str, Any], tag: str) -> TrialSnapshot:
    return TrialSnapshot(tid, config, TrialStatus.RUNNING, checkpoint_iteration=1, experiment_tag=tag)


def _exploit_of_t0(pbt: PopulationBasedTraining, ctl: RecordingController, tag0: str, at: int) -> Any:
    """t1 scores high and t0 low at iteration ``at`` (both scored before): t0 clones t1; the CLONE and
    LOG_POLICY actions."""
    t0, t1 = _snap("t0", {"lr": 0.1}, tag0), _snap("t1", {"lr": 0.2}, "1_lr=0.2000")
    ctl.trials = {"t0": t0, "t1": t1}
    ctl.actions = []
    pbt.on_trial_result(ctl, t1, {"training_iteration": at, "acc": 0.9})
    pbt.on_trial_result(ctl, t0, {"training_iteration": at, "acc": 0.1})
    kinds = {a.kind: a for a in ctl.actions}
    return kinds[ActionKind.CLONE], kinds[ActionKind.LOG_POLICY]


def test_after_a_restore_the_next_exploit_starts_from_the_restored_tag() -> None:
    def pbt() -> PopulationBasedTraining:
        return PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2, metric="acc",
                                       mode="max", hyperparam_mutations={"lr": [0.1, 0.2]},
                                       resample_probability=0.0, seed=0)

    first, ctl = pbt(), RecordingController()
    for tid, tag in (("t0", "0_lr=0.1000"), ("t1", "1_lr=0.2000")):
        first.on_trial_add(ctl, _snap(tid, {"lr": 0.1}, tag))
    first.on_trial_result(ctl, _snap("t0", {"lr": 0.1}, "0_lr=0.1000"), {"training_iteration": 2, "acc": 0.1})
    clone, policy = _exploit_of_t0(first, ctl, "0_lr=0.1000", 4)
    tag = clone.experiment_tag
    assert tag == f"0_lr=0.1000@perturbed[lr={clone.new_config['lr']:.4f}]"
    clone, policy = _exploit_of_t0(first, ctl, tag, 6)  # in the same run: from the tag it was added with
    assert clone.experiment_tag == f"0_lr=0.1000@perturbed[lr={clone.new_config['lr']:.4f}]"
    assert policy.info["trial_tag"] == "0_lr=0.1000"
    tag = clone.experiment_tag
    # Tuner.restore: the state comes back, and PBT is told of the unfinished trials again with their tags
    again = pbt()
    again.restore(first.save())
    again.on_trial_add(ctl, _snap("t0", {"lr": 0.1}, tag))
    clone, policy = _exploit_of_t0(again, ctl, tag, 8)
    assert policy.info["trial_tag"] == tag  # as Ray's policy line after a restore (recorded)
    assert clone.experiment_tag == f"{tag}@perturbed[lr={clone.new_config['lr']:.4f}]"


def test_a_replayed_change_is_tagged_as_rays_replay(tmp_path: Any) -> None:
    # Ray 2.60's PopulationBasedTrainingReplay (read in its source, not recorded: a replay run's tag was not
    # logged) tags the trial "replay_<policy file name>@perturbed[...]" over every key of the new config
    from actors.schedulers import PopulationBasedTrainingReplay

    policy = tmp_path / "pbt_policy_t0.txt"
    policy.write_text(json.dumps(["0_lr=0.1000", "1_lr=0.2000", 3, 4, {"lr": 0.2, "s": "a b"},
                                  {"lr": 0.24, "s": "c/d"}]) + "\n")
    replay, ctl = PopulationBasedTrainingReplay(str(policy)), RecordingController()
    trial = _snap("t0", {"lr": 0.2, "s": "a b"}, "0")
    ctl.trials = {"t0": trial}
    replay.on_trial_add(ctl, trial)
    replay.on_trial_result(ctl, trial, {"training_iteration": 4})
    (clone,) = [a for a in ctl.actions if a.kind is ActionKind.CLONE]
    assert clone.experiment_tag == "replay_pbt_policy_t0.txt@perturbed[lr=0.2400,s=c_d]"
