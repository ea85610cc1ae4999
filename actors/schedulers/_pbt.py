"""Population Based Training: exploit better trials' checkpoints, explore their configs.

Every ``perturbation_interval`` of ``time_attr`` (after ``burn_in_period``) a
trial's score is recorded and the scored population is split into quantiles.
A top-quantile trial is checkpointed so others can copy it; a bottom-quantile
trial is restarted (``tune_controller.clone_trial``) from a random top-quantile
trial's checkpoint with a perturbed copy of that trial's config.

Asynchronous mode (default): each trial perturbs on its own clock.  When other
trials are waiting for a slot (population larger than the concurrency), a trial
that was not cloned yields (PAUSE) at its perturbation point and the trial that
is furthest behind runs next, so the population advances together.

Synchronous mode (``synch=True``): a trial reaching the next sync point is
paused there.  As soon as every live trial has reached it (the last one's
pause may still be in flight) the quantiles are taken over the whole
population at once, bottom trials are cloned, and everyone is resumed
(``resume_trial``; a resume of a pause in flight lands after the pause).  A
trial that ends before the sync point no longer holds the others back.

All random choices use ``random.Random(seed)``; the RNG state is saved with
the rest of the state.  ``exploit_log`` keeps one info dict per exploit; with
``log_config`` (the default) each exploit is also logged in Ray's policy files
(``tune_controller.log_policy``: ``pbt_global.txt``, ``pbt_policy_<trial id>.txt``),
which ``PopulationBasedTrainingReplay`` replays.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus, perturbed_tag
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, check_number
from actors.schedulers._pbt_explore import ConfigFill, ExploreFn, explore, validate_mutations


@dataclass
class _Member:
    """What PBT remembers about one trial."""

    config: dict[str, Any]
    orig_config: dict[str, Any] | None = None  # the config it was added with
    orig_tag: str = ""  # its experiment_tag when added (Ray's orig_tag): what an exploit's tag starts from
    iteration: int = 0  # training_iteration of its latest result, and of the one before (Ray's last_result
    prev_iteration: int = 0  # while a hook runs is the one before: the policy log records that)
    time: float | None = None  # latest time_attr seen (None: never reported)
    last_perturbation: float = 0.0
    score: float | None = None  # at the last perturbation point, higher is better (NaN: unranked)
    last_train_time: float = 0.0  # time of the last perturbation or exploit (Ray's choice order)
    checkpointed: bool = False  # top quantile at its last perturbation: others may clone it
    ended: bool = False
    errored: bool = False
    waiting: bool = False  # synch mode: parked at the sync point
    # (last_perturbation, last_train_time) before its latest exploit: what a skipped exploit gives back
    before_clone: tuple[float, float] | None = None


class PopulationBasedTraining(MetricScheduler):
    """PBT with Ray Tune's parameters; see the module docstring for the protocol."""

    _leaves_results = True  # its on_trial_result never changes the result (SchedulerHost.watch_results)
    # whether a trial asked to save makes a checkpoint it does not have yet (a class trainable's save_checkpoint)
    # or gives only what it reported (a function trainable: none before its first): set by the driver
    # (searcher_setup.wire_trainable_kind), since Ray skips an exploit whose source's save resolved to none
    saves_when_asked: bool = True

    _PARAMS: ClassVar[tuple[str, ...]] = (
        "time_attr", "perturbation_interval", "burn_in_period", "quantile_fraction",
        "resample_probability", "perturbation_factors", "log_config", "require_attrs", "synch",
        "clip_perturbations",
    )
    _STATE: ClassVar[tuple[str, ...]] = ("_members", "_rng", "_next_sync", "_exploits", "_num_checkpoints")
    _STATE_DEFAULTS: ClassVar[dict[str, Any]] = {"_num_checkpoints": 0}  # (not counted before 2026-12-05)

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: dict[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: Sequence[float] = (1.2, 0.8),
        custom_explore_fn: ExploreFn | None = None,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        seed: int | None = None,
        clip_perturbations: bool = True,
        wait_for_checkpoint: bool = False,
    ) -> None:
        super().__init__(metric, mode)
        # a perturbed value of a search domain stays within its bounds; False: unclipped, as in Ray
        self.clip_perturbations = bool(clip_perturbations)
        # exploit a top trial whose checkpoint is still being saved by waiting for it, as Ray does;
        # False: such an exploit is skipped (no trial waits on another's save)
        self.wait_for_checkpoint = bool(wait_for_checkpoint)
        name = type(self).__name__
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(f"{name}: time_attr must be a non-empty result key, got {time_attr!r}")
        self.time_attr = time_attr
        self.perturbation_interval = check_number(
            name, "perturbation_interval", perturbation_interval, minimum=0, strict=True
        )
        self.burn_in_period = check_number(name, "burn_in_period", burn_in_period, minimum=0)
        self.quantile_fraction = check_number(name, "quantile_fraction", quantile_fraction, minimum=0)
        if self.quantile_fraction > 0.5:
            raise ValueError(
                f"{name}: quantile_fraction must be between 0 and 0.5 (top and bottom quantiles may not "
                f"overlap), got {quantile_fraction!r}"
            )
        self.resample_probability = check_number(
            name, "resample_probability", resample_probability, minimum=0
        )
        if self.resample_probability > 1:
            raise ValueError(
                f"{name}: resample_probability must be between 0 and 1, got {resample_probability!r}"
            )
        if isinstance(perturbation_factors, str | bytes) or not isinstance(perturbation_factors, Sequence) \
                or not perturbation_factors:
            raise ValueError(
                f"{name}: perturbation_factors must be a non-empty sequence of numbers such as (1.2, 0.8), "
                f"got {perturbation_factors!r}"
            )
        self.perturbation_factors = tuple(
            check_number(name, "perturbation_factors item", f, minimum=0, strict=True)
            for f in perturbation_factors
        )
        if not hyperparam_mutations and custom_explore_fn is None:  # Ray: `{}` is refused like None
            raise ValueError(
                f"{name}: give hyperparam_mutations (e.g. {{'lr': [1e-3, 1e-2]}}) or custom_explore_fn, "
                f"otherwise PBT has nothing to explore (got hyperparam_mutations={hyperparam_mutations!r})"
            )
        if hyperparam_mutations is not None:
            validate_mutations(hyperparam_mutations, name)
        if custom_explore_fn is not None and not callable(custom_explore_fn):
            raise TypeError(
                f"{name}: custom_explore_fn must be a function config -> config, got {custom_explore_fn!r}"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"{name}: seed must be an int or None, got {seed!r}")
        self.hyperparam_mutations = hyperparam_mutations or {}
        self.custom_explore_fn = custom_explore_fn
        self.log_config = bool(log_config)
        self.require_attrs = bool(require_attrs)
        self.synch = bool(synch)
        self.seed = seed
        self._members: dict[str, _Member] = {}
        self._rng = random.Random(seed)
        self._next_sync = max(self.perturbation_interval, self.burn_in_period)
        self._exploits: list[dict[str, Any]] = []
        self._num_checkpoints = 0  # top-quantile trials checkpointed at a perturbation (Ray's count)
        self._current: str | None = None  # the trial whose result is being decided

    def config_fill(self) -> Callable[[dict[str, Any]], None] | None:
        """As Ray's ``on_trial_add``: a mutated key the param_space lacks gets a first value per trial."""
        return ConfigFill(self.hyperparam_mutations) if self.hyperparam_mutations else None

    @property
    def exploit_log(self) -> list[dict[str, Any]]:
        """One info dict per exploit, in order (a copy)."""
        return copy.deepcopy(self._exploits)

    def _member(self, trial: TrialSnapshot) -> _Member:
        m = self._members.get(trial.trial_id)
        if m is None:
            config = copy.deepcopy(dict(trial.config))
            m = self._members[trial.trial_id] = _Member(config, orig_config=copy.deepcopy(config),
                                                        orig_tag=trial.experiment_tag)
        return m

    # ------------------------------------------------------------------ hooks

    def on_trial_add(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        m = self._members.get(trial.trial_id)
        if m is not None and m.ended:
            # added again after it ended (a retry, as Ray requeues it): Ray starts its record afresh,
            # in the same place of its table, its tag the one it has now (an exploit's, if it was cloned)
            config = copy.deepcopy(dict(trial.config))
            self._members[trial.trial_id] = _Member(config, orig_config=copy.deepcopy(config),
                                                    orig_tag=trial.experiment_tag)
        elif m is not None:  # told again after Tuner.restore: Ray's PBT starts from the tag restored
            m.orig_tag = trial.experiment_tag or m.orig_tag  # (a perturbed one: the next exploit's nests)
        self._member(trial)

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        m = self._member(trial)
        m.prev_iteration, m.iteration = m.iteration, int(result.get("training_iteration", m.iteration))
        self._current = trial.trial_id
        try:
            return self._on_result(tune_controller, trial, result, m)
        finally:
            self._current = None

    def _on_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any], m: _Member
    ) -> Decision:
        metric, _ = self._objective()
        if not self.require_attrs and (self.time_attr not in result or metric not in result):
            return Decision.CONTINUE
        t = self._time(result, self.time_attr)
        score = self._score(result, keep_nan=True)
        m.time = t
        if trial.config:
            m.config = copy.deepcopy(dict(trial.config))
        if result.get("done"):
            # The trial ends with this result: pausing or cloning it would restart it past its end.
            return Decision.CONTINUE
        if self.synch:
            if t < self._next_sync:
                return Decision.CONTINUE
            if not m.waiting:
                m.waiting, m.score, m.last_perturbation = True, score, t
                self._scored(trial, result, score)
                self._maybe_sync(tune_controller)
            return Decision.PAUSE
        if t < self.burn_in_period or t - m.last_perturbation < self.perturbation_interval:
            return Decision.CONTINUE
        m.last_perturbation, m.score, m.last_train_time = t, score, t
        self._scored(trial, result, score)
        # finished trials are not ranked (as in Ray Tune): cloning one's final checkpoint would
        # leave the clone nothing to do, and it would end at once at its source's last step
        lower, upper = self._quantiles([tid for tid, mm in self._members.items() if not mm.ended])
        m.checkpointed = trial.trial_id in upper
        if m.checkpointed:
            self._num_checkpoints += 1
            tune_controller.checkpoint_trial(trial)
        elif trial.trial_id in lower and self._exploit(tune_controller, trial, upper, t):
            return Decision.CONTINUE  # the clone restarts the trial
        others_wait = any(
            o.trial_id != trial.trial_id and o.status in (TrialStatus.PENDING, TrialStatus.PAUSED)
            for o in tune_controller.get_trials()
        )
        return Decision.PAUSE if others_wait else Decision.CONTINUE

    def horizon_attr(self) -> str | None:
        return self.time_attr

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        """The next perturbation point: ``burn_in_period``, then ``perturbation_interval`` after the
        last one (in synch mode the next sync point; a trial parked there is decided at every result)."""
        m = self._members.get(trial.trial_id)
        if m is None or m.ended:
            return None
        if self.synch:
            return None if m.waiting else float(self._next_sync)
        return float(max(self.burn_in_period, m.last_perturbation + self.perturbation_interval))

    def _ended(self, tune_controller: SchedulerController, trial: TrialSnapshot, errored: bool) -> None:
        m = self._member(trial)
        m.ended, m.waiting = True, False
        m.errored = m.errored or errored
        if self.synch:
            self._maybe_sync(tune_controller)

    def on_trial_complete(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> None:
        self._ended(tune_controller, trial, errored=False)

    def on_trial_error(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._ended(tune_controller, trial, errored=True)

    def on_trial_remove(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._ended(tune_controller, trial, errored=False)

    def on_clone_skipped(self, tune_controller: SchedulerController, trial_id: str, source_id: str) -> None:
        """The controller skipped this exploit (its source had no checkpoint to give): take it back, as Ray's PBT
        never records one it skips (``_exploit`` returns before it copies the source's clocks or counts the
        perturbation). The trial's config is its own again at its next result (``_on_result`` reads it). What the
        exploit drew from the random streams (the explore step's; PB2's model and its rows) is not given back, so
        later draws differ from Ray's, which never made them."""
        m = self._members.get(trial_id)
        if m is not None and m.before_clone is not None:
            m.last_perturbation, m.last_train_time = m.before_clone
            m.before_clone = None
        for i in range(len(self._exploits) - 1, -1, -1):
            if self._exploits[i]["trial_id"] == trial_id and self._exploits[i]["source"] == source_id:
                del self._exploits[i]
                break

    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        """The waiting trial whose last perturbation (or exploit) is earliest, first added
        first on ties (Ray Tune's order); in synch mode the one furthest behind, skipping
        trials parked at the sync point unless the sync happens now."""
        if self.synch:
            self._maybe_sync(tune_controller)
        candidates = []
        for t in tune_controller.get_trials():
            m = self._members.get(t.trial_id)
            if t.status is TrialStatus.PENDING or (
                t.status is TrialStatus.PAUSED and (m is None or not m.waiting)
            ):
                candidates.append(t)
        if not candidates:
            return None

        def progress(t: TrialSnapshot) -> float:
            m = self._members.get(t.trial_id)
            if not self.synch:
                return 0.0 if m is None else m.last_train_time
            return -math.inf if m is None or m.time is None else m.time

        return min(candidates, key=progress)

    # ------------------------------------------------------------------ exploit / explore

    def _quantiles(self, pool: list[str]) -> tuple[list[str], list[str]]:
        """(bottom, top) trial ids of the scored trials of ``pool`` (NaN scores are left out, as in
        Ray Tune); both empty below two trials."""
        scores = {tid: s for tid in pool if (s := self._members[tid].score) is not None and not math.isnan(s)}
        ranked = sorted(scores, key=scores.__getitem__)  # stable: ties keep the order trials were added
        n = len(ranked)
        k = math.ceil(n * self.quantile_fraction)
        k = min(k, n // 2)
        if k == 0:
            return [], []
        return ranked[:k], ranked[-k:]

    def _exploit(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, upper: list[str], t: float
    ) -> bool:
        """Clone ``trial`` from a random top trial; False if that one has no checkpoint to give.

        As in Ray Tune the source is drawn from the whole top quantile first (one draw, so a
        seeded run draws as Ray's ``random.choice`` would), and the exploit is skipped when it
        was not in the top quantile at its own last perturbation (no checkpoint was taken).
        Ray waits for a checkpoint still being saved (``wait_for_checkpoint=True``), and skips the exploit
        when that save gives none (a function trainable that never reported one); by default audition
        skips the exploit if none has landed yet.
        """
        snaps = {s.trial_id: s for s in tune_controller.get_trials()}
        pick = upper[self._rng.randrange(len(upper))] if upper else None
        if pick is None or pick == trial.trial_id or not self._members[pick].checkpointed or pick not in snaps:
            return False
        if snaps[pick].checkpoint_iteration is None and not (self.wait_for_checkpoint and self.saves_when_asked):
            return False
        source = snaps[pick]
        source_config = dict(source.config) or self._members[source.trial_id].config
        new_config = self._new_config(trial, source, source_config)
        info = {
            "source": source.trial_id,
            "trial_id": trial.trial_id,
            "old_config": copy.deepcopy(dict(trial.config)),
            "source_config": copy.deepcopy(source_config),
            "new_config": copy.deepcopy(new_config),
            "time": t,
        }
        m, src = self._members[trial.trial_id], self._members[source.trial_id]
        if self.log_config:
            def seen(t: _Member, tid: str) -> int:  # Ray's last_result: the result being decided is not in it yet
                return t.prev_iteration if tid == getattr(self, "_current", None) else t.iteration
            tune_controller.log_policy(trial, source, {
                "trial_tag": m.orig_tag, "source_tag": src.orig_tag,
                "trial_tag_config": m.orig_config or m.config, "source_tag_config": src.orig_config or src.config,
                "trial_iteration": seen(m, trial.trial_id), "source_iteration": seen(src, source.trial_id),
                "source_config": copy.deepcopy(source_config), "new_config": copy.deepcopy(new_config)})
        # as Ray: the tag it was added with, then the mutated keys' new values (recorded from Ray 2.60)
        tag = perturbed_tag(m.orig_tag, new_config, self.hyperparam_mutations)
        tune_controller.clone_trial(trial, source, new_config, info, wait_for_checkpoint=self.wait_for_checkpoint,
                                    experiment_tag=tag)
        # the clone resumes where the source's checkpoint is, so its clocks become the source's
        m.before_clone = (m.last_perturbation, m.last_train_time)
        m.config, m.last_perturbation, m.last_train_time = (
            copy.deepcopy(new_config), src.last_perturbation, src.last_train_time)
        self._exploits.append(copy.deepcopy(info))
        return True

    def _scored(self, trial: TrialSnapshot, result: dict[str, Any], score: float) -> None:
        """A trial's score was taken at a perturbation point (Ray's ``_save_trial_state``); PB2 records it."""

    def _new_config(self, trial: TrialSnapshot, source: TrialSnapshot, source_config: dict[str, Any]) -> dict[str, Any]:
        """The config ``trial`` gets on cloning ``source`` (Ray's ``_get_new_config``): PBT's explore step."""
        return explore(
            source_config, self.hyperparam_mutations, self._rng, self.resample_probability,
            self.perturbation_factors, self.custom_explore_fn, type(self).__name__, clip=self.clip_perturbations,
        )

    def _maybe_sync(self, tune_controller: SchedulerController) -> bool:
        """Synch mode: once every live trial waits at the sync point, exploit and resume all."""
        live = [tid for tid, m in self._members.items() if not m.ended]
        if not live or not all(self._members[tid].waiting for tid in live):
            return False
        snaps = {s.trial_id: s for s in tune_controller.get_trials()}
        for tid in live:
            snaps.setdefault(tid, TrialSnapshot(tid, dict(self._members[tid].config), TrialStatus.PAUSED))
        lower, upper = self._quantiles(live)
        for tid in live:
            self._members[tid].checkpointed = tid in upper
        self._num_checkpoints += len(upper)
        for tid in lower:
            m = self._members[tid]
            self._exploit(tune_controller, snaps[tid], upper, m.time if m.time is not None else 0.0)
        latest = max(self._members[tid].time or 0.0 for tid in live)
        while self._next_sync <= latest:
            self._next_sync += self.perturbation_interval
        for tid in live:
            self._members[tid].waiting = False
            tune_controller.resume_trial(snaps[tid])
        return True

    def debug_string(self) -> str:
        return f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, {len(self._exploits)} perturbs"


__all__ = ["PopulationBasedTraining"]
