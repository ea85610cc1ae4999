"""Experiment callbacks (Ray Tune's ``Callback`` hooks) and the driver-side dispatcher.

Callbacks run in the driver process (only a ``LoggerCallback`` with ``in_controller`` runs
in the controller, see ``actors._driver.loggers``): the controller
batches trial events into ``TrialEvents`` messages (about once a second, and
before ``ExperimentFinished``) and moves on, so a slow callback delays only the
driver's own loop, never a trial.  Events of one trial arrive in order; every
event is delivered exactly once.  Hooks are called with keyword arguments, as Ray Tune's
``CallbackList`` calls them, so a hook may name only the arguments it uses and take ``**info``.
"""

from __future__ import annotations

import logging
import posixpath
from abc import ABC
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from actors._driver.callback_trial import SNAPSHOT_FIELDS, CallbackTrial
from actors._driver.metric_analysis import MetricAnalysis
from actors._engine.hook_view import before_result, tagged
from actors._engine.sequencer import Sequencer
from actors._engine.trial import Paths, TagPaths, TrialDescription, TrialSnapshot, TrialStatus, tag_of
from actors.messages import CallbackAnswer, EventType, TrialEvent, TrialEvents, TrialSummary
from actors.result import SHOULD_CHECKPOINT, TRAINING_ITERATION

if TYPE_CHECKING:
    from actors._driver.checkpoint import Checkpoint

log = logging.getLogger("audition")


class Callback(ABC):  # noqa: B024 - every hook is optional
    """Override the hooks you need; all run in the driver process, one at a time."""

    def setup(self, stop: Any = None, num_samples: int | None = None, total_num_samples: int | None = None,
              **info: Any) -> None:
        """Once, before anything runs, with what Ray Tune 2.60 passes: ``stop`` (the dict given to
        ``RunConfig(stop=)``, else ``{}``), ``num_samples``, ``total_num_samples`` (the trials the
        searcher will create: grid points times samples for the default generator) and, in ``info``,
        ``time_budget_s``."""

    def on_step_begin(self, iteration: int, trials: list[TrialSnapshot], **info: Any) -> None:
        """Before the driver hands the callbacks a batch of trial events (Ray Tune: before each step
        of its control loop; here about once a second while trials run, or once per result while a
        callback implements ``on_trial_result``)."""

    def on_step_end(self, iteration: int, trials: list[TrialSnapshot], **info: Any) -> None:
        """After the driver handed the callbacks a batch of trial events (see ``on_step_begin``)."""

    def on_trial_start(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                       **info: Any) -> None:
        """A trial's actor was started (first run, resume or retry)."""

    def on_trial_result(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                        result: dict[str, Any], **info: Any) -> None:
        """A trial reported ``result`` (``trial.last_result`` is still its previous one, as in Ray).
        Set ``result["should_checkpoint"] = True`` to have the trial checkpointed at this result
        (as in Ray Tune): while a callback implements this hook, each
        result waits for the driver's callbacks before the trial goes on."""

    def on_checkpoint(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                      checkpoint: Checkpoint, **info: Any) -> None:
        """``checkpoint`` (an ``actors.Checkpoint``; ``.path`` is its URL) of ``trial`` was committed.
        As in Ray Tune, ``trial.checkpoint`` is still the previous one during this call."""

    def on_trial_restore(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                         **info: Any) -> None:
        """Ray Tune's hook for a trial restored from a checkpoint, which Ray 2.60's controller never
        calls (recorded: not on a retry from a checkpoint, a resumed pause or ``Tuner.restore``; each
        of these calls ``on_trial_start``). audition does not call it either: it exists so code
        written for Ray (an override calling ``super()``, a list forwarding every hook) runs."""

    def on_trial_save(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                      **info: Any) -> None:
        """Right after ``on_checkpoint`` for the same checkpoint, once every callback's
        ``on_checkpoint`` ran: ``trial.checkpoint`` is now the new one (Ray Tune calls it after
        processing each save)."""

    def on_trial_complete(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                          **info: Any) -> None:
        """The trial ended TERMINATED on its own or by its own result's stop (as in Ray 2.60, not when a
        stopper's ``stop_all``, a time budget or ``fail_fast`` stopped it: no hook hears of that)."""

    def on_trial_error(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                       **info: Any) -> None:
        """The trial ended in ERROR (no retries left)."""

    def on_trial_recover(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                         **info: Any) -> None:
        """The trial's run failed and it will be retried (``FailureConfig(max_failures)``), before
        its next run starts."""

    def on_experiment_end(self, trials: list[TrialSnapshot], **info: Any) -> None:
        """The experiment finished (or was stopped); ``trials`` is the final table."""

    def get_state(self) -> dict[str, Any] | None:
        """State to save with the experiment (any picklable value; ``None``, the default, or an
        empty one saves nothing). Called before the first trial starts, at most every 10 s while
        the run goes on and at its end, before ``on_experiment_end`` (as Ray Tune 2.60 calls it)."""
        return None

    def set_state(self, state: dict[str, Any]) -> None:
        """On ``Tuner.restore(...).fit()``, before ``setup``: the state ``get_state`` last saved for
        the callback at this position of the callbacks list (only if it was truthy)."""

    def on_experiment_start(self, experiment_path: str, local: bool) -> None:
        """Before any trial starts: the experiment's URL and whether it is on the local disk.
        (audition's own hook; raise ``ConfigError`` here to refuse a setting before anything runs.)"""


class CallbackDispatcher:
    """Replays ``TrialEvents`` batches, in send order, into the user's callbacks."""

    def __init__(self, callbacks: list[Callback]) -> None:
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks must be actors.Callback instances, got {type(cb).__name__}")
        self.callbacks = list(callbacks)
        self.order: Sequencer[TrialEvents] = Sequencer()
        self.trials: dict[str, TrialSnapshot] = {}
        self.iteration = 0
        self.received = 0
        # a callback implementing on_trial_result may set should_checkpoint; loggers only log
        from actors._driver.loggers import LoggerCallback

        self.may_ask_checkpoint = any(type(cb).on_trial_result is not Callback.on_trial_result
                                      and not isinstance(cb, LoggerCallback) for cb in self.callbacks)
        self.answer: Callable[[CallbackAnswer], None] | None = None  # to the controller (set by fit())
        # trials whose callbacks asked for a checkpoint in the batch being replayed (answered with its last result)
        self.asked: set[str] = set()
        # what Ray's Trial carries beyond the controller's snapshot, as the scheduler host has it (set by fit():
        # describe()): the trainable's name, the experiment's path, the default generator's domain paths
        self.description = TrialDescription("", None)
        self.storage_options: dict[str, Any] = {}
        self.tags: dict[str, tuple[str, dict[str, Any]]] = {}  # trial id -> (experiment_tag, evaluated_params)
        self.latest: dict[str, Any] = {}  # trial id -> its latest checkpoint (an actors.Checkpoint)
        self.analyses: dict[str, MetricAnalysis] = {}  # trial id -> Ray's metric_analysis of its results so far
        # trial id -> (metric_analysis, metric_n_steps) as its snapshots carry them: copied once per result
        self.analysis_views: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.looked_up: set[tuple[str, int]] = set()  # (trial id, iteration) of resumed checkpoints sought
        from actors._driver.checkpoint import committed_at

        self.find_checkpoint: Callable[[str, dict[str, Any], int], str | None] = committed_at  # storage I/O

    def describe(self, trainable_name: str, experiment_path: str | None, local: bool,
                 storage_options: dict[str, Any] | None = None,
                 searched: Paths | TagPaths | None = None, resources: dict[str, float] | None = None) -> None:
        self.description = TrialDescription(trainable_name, experiment_path, local, searched, resources)
        self.storage_options = dict(storage_options or {})

    @property
    def experiment_path(self) -> str | None:
        return self.description.experiment_path

    def _as_ray_trial(self, snap: TrialSnapshot) -> TrialSnapshot:
        """The snapshot with what Ray's ``Trial`` has beyond it: ``trainable_name``, ``path``,
        ``local_path``, ``experiment_tag``, ``evaluated_params`` (worked out once per trial),
        ``checkpoint`` (the latest one a ``CHECKPOINT`` event announced), and the tag as the last key
        of a reported ``last_result`` (Ray's ``Trial.update_last_result`` adds it)."""
        if self.experiment_path is None:
            return self._analysed(snap)
        tag = self.tags.get(snap.trial_id)
        if tag is None:
            tag = self.tags[snap.trial_id] = tag_of(snap.trial_id, snap.config, self.description.tag_paths)
        now = snap.experiment_tag or tag[0]  # the controller's (a PBT exploit's perturbed one), else worked out
        return self._analysed(replace(self.description.described(snap, tag[1]), experiment_tag=now,
                                      checkpoint=self.latest.get(snap.trial_id),
                                      last_result=tagged(snap.last_result, now)))

    def _analysed(self, snap: TrialSnapshot) -> CallbackTrial:
        """``snap`` with the trial's ``metric_analysis`` and ``metric_n_steps`` as they are now."""
        analysis, n_steps = self.analysis_views.get(snap.trial_id) or ({}, {})
        return CallbackTrial(**{name: getattr(snap, name) for name in SNAPSHOT_FIELDS}, metric_analysis=analysis,
                             metric_n_steps=n_steps, storage_options=self.storage_options)

    def _analyse(self, trial_id: str, result: dict[str, Any]) -> None:
        found = self.analyses.setdefault(trial_id, MetricAnalysis())
        found.update(result)
        self.analysis_views[trial_id] = found.copied()

    def _trial_path(self, snap: TrialSnapshot) -> str:
        return str(self.description.path(snap))

    def _resumed(self, snap: TrialSnapshot) -> None:
        """A trial that starts from a checkpoint no event of this run announced (after
        ``Tuner.restore``: the one the controller chose from storage) carries it from its start, as
        Ray's restored ``Trial`` does. The snapshot gives its iteration; it is looked up once."""
        from actors._driver.checkpoint import Checkpoint

        it = snap.checkpoint_iteration
        key = (snap.trial_id, it or 0)
        if it is None or snap.trial_id in self.latest or self.experiment_path is None or key in self.looked_up:
            return
        self.looked_up.add(key)
        uri = self.find_checkpoint(self._trial_path(snap), self.storage_options, it)
        if uri:
            self.latest[snap.trial_id] = Checkpoint(uri, self.storage_options)

    def _note_checkpoint(self, trial_id: str, ckpt: Checkpoint) -> None:
        old = self.latest.get(trial_id)
        # zero-padded checkpoint_NNNNNN names: a recovered older one, announced late, never wins
        if old is None or ckpt.path.rstrip("/").rpartition("/")[2] >= old.path.rstrip("/").rpartition("/")[2]:
            self.latest[trial_id] = ckpt

    def restored(self, rows: Iterable[dict[str, Any]]) -> None:
        """``Tuner.restore``: every trial of the saved experiment is in ``trials`` from the start, with
        the status it resumes in, before any trial this run creates. Ray's
        ``TuneController._requeue_restored_trials`` adds them most recent result first; the state keeps
        no result arrival time, so the result's ``date`` (set by the trial's clock, whole seconds) stands
        in for it, ties going to the later-created trial, and trials that never reported come last. A
        finished trial carries its last checkpoint; one that resumes gets its checkpoint when it starts
        (``_resumed``: storage decides which)."""
        from actors._driver.checkpoint import Checkpoint

        def last_time(item: tuple[int, dict[str, Any]]) -> tuple[str, int]:
            date = (item[1].get("last_result") or {}).get("date")
            return (date if isinstance(date, str) else "", item[0])  # "%Y-%m-%d_%H-%M-%S": sorts by time

        for _, row in sorted(enumerate(rows), key=last_time, reverse=True):
            ck = row.get("checkpoint") or None
            snap = TrialSnapshot(row["trial_id"], dict(row["config"]), TrialStatus(row["status"]),
                                 dict(row.get("last_result") or {}), int(row.get("num_failures") or 0),
                                 ck["iteration"] if ck else None, row.get("name"),
                                 row.get("dirname") if row.get("dirname_custom") else None,
                                 experiment_tag=str(row.get("experiment_tag") or ""), dirname=row.get("dirname"),
                                 resources=row.get("resources"))
            if ck and snap.status.is_finished and self.experiment_path is not None:
                uri = f"{self._trial_path(snap)}/{posixpath.basename(str(ck['path']).rstrip('/'))}"
                self.latest[snap.trial_id] = Checkpoint(uri, self.storage_options)
            if TRAINING_ITERATION in snap.last_result:  # (its analysis restarts from its saved last result)
                self._analyse(snap.trial_id, snap.last_result)
            self.trials[snap.trial_id] = self._as_ray_trial(snap)

    def _final(self, summaries: Iterable[TrialSummary]) -> None:
        """The controller's final word on every trial, for ``on_experiment_end``: as in Ray, the list
        holds every trial of the experiment with its final status, not only those with an event."""
        from actors._driver.checkpoint import Checkpoint

        for t in summaries:
            ck = t.checkpoint
            if ck is not None and t.trial_id not in self.latest:
                self.latest[t.trial_id] = Checkpoint(f"{t.path.rstrip('/')}/{posixpath.basename(ck.path.rstrip('/'))}",
                                                     self.storage_options)
            old = self.trials.get(t.trial_id)
            snap = TrialSnapshot(t.trial_id, dict(t.config), t.status, dict(t.last_result), t.num_failures,
                                 ck.iteration if ck else None, t.name, t.dirname if t.dirname_custom else None,
                                 experiment_tag=t.experiment_tag, dirname=t.dirname, resources=t.resources)
            tag = t.experiment_tag or (old.experiment_tag if old is not None else "")
            self.trials[t.trial_id] = self._as_ray_trial(snap) if old is None else replace(
                old, status=t.status, last_result=tagged(dict(t.last_result), tag), experiment_tag=tag,
                num_failures=t.num_failures, checkpoint_iteration=snap.checkpoint_iteration,
                checkpoint=self.latest.get(t.trial_id))

    def setup(self, **spec: Any) -> None:
        """``Callback.setup`` of every callback, once, before the experiment starts. A driver-side
        ``LoggerCallback`` gets it only if it overrides ``setup`` (as a Ray Tune logger may): the
        base class's ``setup(ctx, layout)`` is the controller-side one."""
        from actors._driver.loggers import LoggerCallback

        for cb in self.callbacks:
            if isinstance(cb, LoggerCallback) and type(cb).setup is LoggerCallback.setup:
                continue
            try:
                cb.setup(**spec)
            except Exception:  # as any other hook: logged, the experiment goes on
                log.exception("callback %s failed in setup", type(cb).__name__)

    def push(self, batch: TrialEvents) -> None:
        for b in self.order.push(batch.seq, batch):
            self.received = b.seq
            self._step("on_step_begin")
            for ev in b.events:
                self._dispatch(ev)
            self._step("on_step_end")

    def _step(self, hook: str) -> None:
        table = list(self.trials.values())
        for cb in self.callbacks:
            try:
                getattr(cb, hook)(iteration=self.iteration, trials=table)
            except Exception:
                log.exception("callback %s failed in %s", type(cb).__name__, hook)

    def _dispatch(self, ev: TrialEvent) -> None:
        from actors._driver.checkpoint import Checkpoint

        if ev.kind is EventType.ADD:  # a trial was created (PENDING): in the list from now on, no hook
            self.trials.setdefault(ev.trial.trial_id, self._as_ray_trial(ev.trial))
            return
        if ev.kind is EventType.HALT:  # stopped from outside its results: TERMINATED, no hook (as Ray)
            self.trials[ev.trial.trial_id] = self._as_ray_trial(ev.trial)
            return
        self.iteration += 1
        if ev.kind in (EventType.START, EventType.COMPLETE, EventType.ERROR):
            self.asked.discard(ev.trial.trial_id)  # a run began or ended: a request is never carried into another
        if ev.kind is EventType.START:
            self._resumed(ev.trial)
        prev = self.trials.get(ev.trial.trial_id)
        after = self._as_ray_trial(ev.trial)
        seen = prev.last_result if prev is not None else {}
        if ev.kind is EventType.START and TRAINING_ITERATION not in after.last_result and seen:
            after = replace(after, last_result=seen)  # a retry restoring no checkpoint: Ray keeps the last one
        if ev.kind is EventType.RESULT:  # Ray runs on_trial_result before the result is the trial's last
            after = replace(after, last_result=before_result(
                dict(ev.result or {}), seen, ev.trial.run_start, after.trial_id, after.config))
        snap = self.trials[after.trial_id] = _as_ray_sees(ev.kind, after, prev)
        table = list(self.trials.values())
        result = dict(ev.result or {})  # one dict for every callback, as in Ray: each sees the others' keys
        ckpt = (Checkpoint(ev.checkpoint, self.storage_options)
                if ev.kind is EventType.CHECKPOINT and ev.checkpoint else None)
        for cb in self.callbacks:
            try:
                # keyword arguments, as Ray Tune's CallbackList passes them
                if ev.kind is EventType.START:
                    cb.on_trial_start(iteration=self.iteration, trials=table, trial=snap)
                elif ev.kind is EventType.RESULT:
                    cb.on_trial_result(iteration=self.iteration, trials=table, trial=snap, result=result)
                elif ev.kind is EventType.CHECKPOINT and ckpt is not None:  # Ray: no call for an empty one
                    cb.on_checkpoint(iteration=self.iteration, trials=table, trial=snap, checkpoint=ckpt)
                elif ev.kind is EventType.COMPLETE:
                    cb.on_trial_complete(iteration=self.iteration, trials=table, trial=snap)
                elif ev.kind is EventType.ERROR:
                    cb.on_trial_error(iteration=self.iteration, trials=table, trial=snap)
                elif ev.kind is EventType.RECOVER:
                    cb.on_trial_recover(iteration=self.iteration, trials=table, trial=snap)
            except Exception:  # a broken callback must not end the experiment
                log.exception("callback %s failed in %s", type(cb).__name__, ev.kind.value)
        if ckpt is not None:  # Ray registers it with the trial after the callbacks ran
            self._note_checkpoint(snap.trial_id, ckpt)
            snap = self.trials[snap.trial_id] = replace(snap, checkpoint=self.latest[snap.trial_id])
        if ckpt is not None or ev.kind is EventType.SAVED:
            self._saved(snap)
        if snap.status is not after.status and not (ev.kind is EventType.CHECKPOINT and after.status.is_finished):
            # the status the trial has once the hook ran (an end checkpoint's trial is still RUNNING for
            # Ray until on_trial_complete, which makes it TERMINATED)
            self.trials[after.trial_id] = replace(after, checkpoint=snap.checkpoint)
        if ev.kind is EventType.RESULT:  # Ray's update_last_result, after the callbacks (which may change it)
            last = tagged(result, after.experiment_tag)
            self._analyse(snap.trial_id, last)
            self.trials[snap.trial_id] = self._analysed(replace(self.trials[snap.trial_id], last_result=last))
            self._answer(ev, result)

    def _saved(self, trial: TrialSnapshot) -> None:
        """Ray's ``on_trial_save``, after the checkpoint is the trial's (``TuneController._on_saving_result``)."""
        table = list(self.trials.values())
        for cb in self.callbacks:
            try:
                cb.on_trial_save(iteration=self.iteration, trials=table, trial=trial)
            except Exception:
                log.exception("callback %s failed in on_trial_save", type(cb).__name__)

    def _answer(self, ev: TrialEvent, result: dict[str, Any]) -> None:
        """Tell the controller, for a held batch, whether a callback asked for a checkpoint (a
        ``should_checkpoint`` the trainable reported itself was already acted on in the trial)."""
        tid = ev.trial.trial_id
        if result.get(SHOULD_CHECKPOINT) and not (ev.result or {}).get(SHOULD_CHECKPOINT):
            self.asked.add(tid)
        if ev.answer_batch and self.answer is not None:
            want = tid in self.asked
            self.asked.discard(tid)
            self.answer(CallbackAnswer(tid, ev.answer_run, ev.answer_batch, want))

    def end(self, final: Iterable[TrialSummary] = ()) -> None:
        """``on_experiment_end``; ``fit()`` calls it once, whether the run finished, failed or was
        interrupted, with the controller's ``final`` table when it has one."""
        self._final(final)
        for cb in self.callbacks:
            try:
                cb.on_experiment_end(trials=list(self.trials.values()))
            except Exception:
                log.exception("callback %s failed in on_experiment_end", type(cb).__name__)


def _as_ray_sees(kind: EventType, snap: TrialSnapshot, prev: TrialSnapshot | None) -> TrialSnapshot:
    """The trial as Ray Tune's hook sees it: ``on_trial_start`` before the trial is RUNNING (still
    PENDING), ``on_trial_complete`` before it is TERMINATED (still RUNNING, or PENDING/PAUSED when
    stopped before it ran again); Ray sets the new status right after the hook."""
    if kind is EventType.START:
        return replace(snap, status=TrialStatus.PENDING)
    if kind is EventType.COMPLETE and prev is not None and not prev.status.is_finished:
        return replace(snap, status=prev.status)
    if kind in (EventType.CHECKPOINT, EventType.SAVED) and prev is not None and prev.status is TrialStatus.RUNNING:
        return replace(snap, status=TrialStatus.RUNNING)  # the pause's or the end's save: Ray saves a RUNNING trial
    return snap


__all__ = ["Callback", "CallbackDispatcher"]
