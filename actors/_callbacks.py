"""Experiment callbacks (Ray Tune's ``Callback`` hooks) and the driver-side dispatcher.

Callbacks run in the driver process (only a ``LoggerCallback`` with ``in_controller`` runs
in the controller, see ``actors._loggers``): the controller
batches trial events into ``TrialEvents`` messages (about once a second, and
before ``ExperimentFinished``) and moves on, so a slow callback delays only the
driver's own loop, never a trial.  Events of one trial arrive in order; every
event is delivered exactly once.
"""

from __future__ import annotations

import logging
from abc import ABC
from typing import Any

from actors._sequencer import Sequencer
from actors._trial import TrialSnapshot
from actors.messages import EventType, TrialEvent, TrialEvents

log = logging.getLogger("audition")


class Callback(ABC):  # noqa: B024 - every hook is optional
    """Override the hooks you need; all run in the driver process, one at a time."""

    def on_trial_start(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot) -> None:
        """A trial's actor was started (first run, resume or retry)."""

    def on_trial_result(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                        result: dict[str, Any]) -> None:
        """A trial reported ``result``."""

    def on_checkpoint(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot,
                      checkpoint: str) -> None:
        """A checkpoint of ``trial`` was committed at URL ``checkpoint``."""

    def on_trial_complete(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot) -> None:
        """The trial ended TERMINATED."""

    def on_trial_error(self, iteration: int, trials: list[TrialSnapshot], trial: TrialSnapshot) -> None:
        """The trial ended in ERROR (no retries left)."""

    def on_experiment_end(self, trials: list[TrialSnapshot]) -> None:
        """The experiment finished (or was stopped); ``trials`` is the final table."""

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

    def push(self, batch: TrialEvents) -> None:
        for b in self.order.push(batch.seq, batch):
            self.received = b.seq
            for ev in b.events:
                self._dispatch(ev)

    def _dispatch(self, ev: TrialEvent) -> None:
        self.iteration += 1
        snap = ev.trial
        self.trials[snap.trial_id] = snap
        table = list(self.trials.values())
        for cb in self.callbacks:
            try:
                if ev.kind is EventType.START:
                    cb.on_trial_start(self.iteration, table, snap)
                elif ev.kind is EventType.RESULT:
                    cb.on_trial_result(self.iteration, table, snap, dict(ev.result or {}))
                elif ev.kind is EventType.CHECKPOINT:
                    cb.on_checkpoint(self.iteration, table, snap, ev.checkpoint or "")
                elif ev.kind is EventType.COMPLETE:
                    cb.on_trial_complete(self.iteration, table, snap)
                elif ev.kind is EventType.ERROR:
                    cb.on_trial_error(self.iteration, table, snap)
            except Exception:  # a broken callback must not end the experiment
                log.exception("callback %s failed in %s", type(cb).__name__, ev.kind.value)

    def end(self) -> None:
        """``on_experiment_end``; ``fit()`` calls it once, whether the run finished, failed or was interrupted."""
        for cb in self.callbacks:
            try:
                cb.on_experiment_end(list(self.trials.values()))
            except Exception:
                log.exception("callback %s failed in on_experiment_end", type(cb).__name__)


__all__ = ["Callback", "CallbackDispatcher"]
