"""``PopulationBasedTrainingReplay``: train one trial with the config schedule a PBT run found.

Ray Tune 2.60's replay, on audition's controller: the policy file (``pbt_policy_<trial id>.txt``,
written by ``PopulationBasedTraining(log_config=True)``) is read when the scheduler is built; the
chain of exploits that made the trial's last config gives the initial config and the changes, each
``(iteration, config)``. The trial starts with the initial config; at its first result at or past a
change's iteration it is checkpointed, paused, given the new config and resumed from that checkpoint
(``checkpoint_trial`` + ``clone_trial`` of the trial onto itself), as Ray's replay does.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, perturbed_tag
from actors.schedulers._base import FIFOScheduler, SchedulerController

log = logging.getLogger("audition")
_ITERATION = "training_iteration"


def load_policy(policy_file: str) -> tuple[dict[str, Any] | None, list[tuple[int, dict[str, Any]]]]:
    """(initial config, [(iteration, config), ...]) of a policy file, read as Ray reads it: from the
    last line back while each line's target tag is the previous (later) line's source tag."""
    rows = []
    for line in Path(policy_file).read_text().splitlines():
        try:
            rows.append(tuple(json.loads(line)))
        except json.JSONDecodeError:
            raise ValueError(f"Could not read PBT policy file: {policy_file}. Each line must be a JSON list "
                             "[target tag, source tag, target iteration, source iteration, source config, new "
                             "config], as PopulationBasedTraining(log_config=True) writes it") from None
    policy: list[tuple[int, dict[str, Any]]] = []
    last_new_tag, last_old_conf = None, None
    for row in reversed(rows):
        if len(row) != 6:
            raise ValueError(f"Could not read PBT policy file: {policy_file}: a line has {len(row)} items, not 6")
        old_tag, new_tag, _old_step, new_step, old_conf, new_conf = row
        if last_new_tag and old_tag != last_new_tag:
            break  # an older chain: its changes were overwritten by the exploits after it
        last_new_tag, last_old_conf = new_tag, old_conf
        policy.append((new_step, new_conf))
    return last_old_conf, list(reversed(policy))


class PopulationBasedTrainingReplay(FIFOScheduler):
    """Replays the config schedule of one trial of a PBT run (Ray Tune's ``PopulationBasedTrainingReplay``).

    ``policy_file``: the trial's ``pbt_policy_<trial id>.txt`` in the PBT experiment's directory (a
    local path; ``~`` is expanded). Train a single trial with it (``num_samples=1``, and no
    ``param_space`` needed): its config is replaced by the schedule's.
    """

    def __init__(self, policy_file: str) -> None:
        path = Path(policy_file).expanduser()
        if not path.exists():
            raise ValueError(f"Policy file not found: {path.as_posix()} (give the path of a pbt_policy_<trial id>.txt "
                             "that PopulationBasedTraining wrote in its experiment directory)")
        self.policy_file = path.as_posix()
        initial, self._policy = load_policy(self.policy_file)
        self.experiment_tag = f"replay_{path.name}"
        self.config: dict[str, Any] | None = initial
        self.current_config = self.config
        self._trial: str | None = None
        self._current_step = 0
        self._num_perturbations = 0
        self._next = 0  # index in _policy of the next change

    def on_trial_add(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        if self._trial is not None and self._trial != trial.trial_id:
            raise ValueError("More than one trial added to PBT replay run. This means the same schedule will be "
                             "trained multiple times. Do you want to set `num_samples=1`?")
        self._trial = trial.trial_id
        if trial.config and self._policy:
            log.warning("Trial was initialized with a config, which was overwritten. Did you start the PBT replay "
                        "with a `config` parameter?")
        elif trial.config and not self._policy:
            self.config = dict(trial.config)  # only train with the initial policy
        elif not trial.config and not self._policy:
            raise ValueError("No replay policy found and trial initialized without a valid config. Either pass a "
                             "`param_space` to `Tuner()` or consider not using PBT replay for this run.")
        if self.config is not None and dict(trial.config) != self.config:
            tune_controller.clone_trial(trial, trial, dict(self.config), {"replay": self.policy_file, "step": 0})

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        if _ITERATION not in result or self._next >= len(self._policy):
            return Decision.CONTINUE
        step = result[_ITERATION]
        self._current_step = step
        change_at, new_config = self._policy[self._next]
        if step < change_at:
            return Decision.CONTINUE
        log.info("Population Based Training replay is now at step %s. Configuration will be changed to %s.",
                 step, new_config)
        # as Ray: a checkpoint now, the trial paused, restarted from it with the new config
        tune_controller.checkpoint_trial(trial)
        # as Ray's replay: its own tag, then every key of the new config (not the trial's tag)
        tune_controller.clone_trial(trial, trial, dict(new_config), {"replay": self.policy_file, "step": step},
                                    wait_for_checkpoint=True,
                                    experiment_tag=perturbed_tag(self.experiment_tag, new_config, new_config))
        self.current_config = new_config
        self._num_perturbations += 1
        self._next += 1
        return Decision.NOOP

    def horizon_attr(self) -> str | None:
        return _ITERATION

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        """The next change's iteration: the results before it are CONTINUE."""
        return float(self._policy[self._next][0]) if self._next < len(self._policy) else math.inf

    def debug_string(self) -> str:
        return f"PopulationBasedTraining replay: Step {self._current_step}, perturb {self._num_perturbations}"


__all__ = ["PopulationBasedTrainingReplay", "load_policy"]
