"""How an experiment ends: an abort that keeps it resumable, and the one final write and report.

Mixed into ``ControllerActor``. Every way out (all trials done, Ctrl-C or a dead driver, a
scheduler or storage failure, an internal error) goes through ``_abort`` and/or ``_finish``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from thespian.actors import ActorExitRequest

from actors._driver.system import shutdown_orphaned_system
from actors._engine.trial import TrialStatus
from actors.messages import ActionKind, EndReason, ExperimentFinished, HookKind, SchedulerAction

# how long an abort waits for the scheduler's state before it ends without it
ABORT_SAVE_TIMEOUT_S = 5.0
# fail_fast=True: how long a running trial may stay in its own code (it stops at its next
# report()) before its process is killed; Ray Tune ends its actor at once
STOP_ALL_GRACE_S = 2.0


class EndMixin:
    """Uses the controller's ``spec``, ``table``, ``io``, ``driver`` and trial actors."""

    spec: Any
    table: Any
    io: Any
    driver: Any
    ready: bool
    finished: bool
    error: str | None
    searcher_done: bool
    suggested: int
    abort_save: int | None
    abort_deadline: float
    orphaned: bool
    started_at: float
    actor_of: dict[str, Any]
    idle: list[tuple[Any, str]]
    event_seq: int
    output_batches: int
    stop_all_deadline: float | None

    if TYPE_CHECKING:  # provided by the Thespian actor and the other mixins; never shadow them at run time
        def send(self, target: Any, msg: Any) -> None: ...

        def _call(self, kind: HookKind, trial_id: str | None, *args: Any) -> int | None: ...

        def _run(self, effects: list[Any]) -> None: ...

        def _flush_events(self) -> None: ...

        def _ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: Any = None,
                   error: str | None = None, tb: str | None = None) -> None: ...

        def _kill_trial(self, trial_id: str, run_id: int, grace: float | None = None,
                        knob: str = "RunConfig(trial_stop_grace_s)") -> None: ...

    def _save_state(self) -> None:
        """Snapshot the table and ask the scheduler for its state: written together when it answers."""
        assert self.spec is not None
        self.io.snapshot_table(self.table, self.spec.searcher, self.suggested, self._call(HookKind.SAVE, None))

    def _abort(self, reason: str, scheduler_alive: bool = True) -> None:
        """End the experiment early, keeping it resumable.

        The table is frozen as it is *before* every trial is stopped, and the scheduler is asked
        for its state at that same moment; the run ends when that state is written (or after
        ``ABORT_SAVE_TIMEOUT_S`` without it), so ``Tuner.restore`` continues where it stopped.
        """
        if self.finished or self.abort_save is not None:
            return
        self.error = reason
        self.searcher_done = True
        tag = None
        if self.spec is not None and hasattr(self, "io"):
            tag = self._call(HookKind.SAVE, None) if self.ready and scheduler_alive else None
            self.io.freeze(self.table, self.spec.searcher, self.suggested, tag)
        self._run(self.table.abort_all())
        if tag is None:
            self._finish(reason)
        else:
            self.abort_save = tag
            self.abort_deadline = time.monotonic() + ABORT_SAVE_TIMEOUT_S

    def _stop_all(self) -> None:
        """``FailureConfig(fail_fast=True)``, as in Ray Tune: no new trials, every other trial is
        stopped (TERMINATED), and the run ends normally, so ``fit()`` returns the grid with the
        failed trial's error in it. Only ``fail_fast="raise"`` aborts (``_abort``) and raises."""
        if self.stop_all_deadline is not None or self.finished or self.abort_save is not None:
            return
        self.searcher_done = True
        self.stop_all_deadline = time.monotonic() + STOP_ALL_GRACE_S
        effects: list[Any] = []
        for rec in list(self.table.trials.values()):
            effects += self.table.request(SchedulerAction(ActionKind.STOP, rec.trial_id))
        self._run(effects)

    def _end_stragglers(self) -> None:
        """After ``STOP_ALL_GRACE_S``, end the trials still in their own code (a long step, a
        sleep, a C call): killed as a stop past ``trial_stop_grace_s`` is, so no process keeps
        running after the trial is TERMINATED with what it reported."""
        if self.stop_all_deadline is None or time.monotonic() < self.stop_all_deadline:
            return
        for rec in self.table.with_status(TrialStatus.RUNNING):
            self._kill_trial(rec.trial_id, rec.run_id, STOP_ALL_GRACE_S, "FailureConfig(fail_fast=True)")

    def _finish(self, error: str | None) -> None:
        if self.finished:
            return
        self.finished = True
        summaries: tuple[Any, ...] = ()
        try:
            if self.spec is not None:
                self.io.snapshot_table(self.table, self.spec.searcher, self.suggested)
                self.io.close(final=True)
                summaries = tuple(self.io.summary(r) for r in self.table.trials.values())
        except Exception as exc:
            error = (error + "\n" if error else "") + f"writing the final results failed: {exc!r}"
        if self.driver is not None:
            self._flush_events()
            self.send(self.driver, ExperimentFinished(summaries, error, time.time() - self.started_at,
                                                      self.event_seq, self.output_batches))
        for actor in [*self.actor_of.values(), *(a for a, _ in self.idle)]:
            self.send(actor, ActorExitRequest())
        if self.orphaned and self.spec is not None and self.spec.admin_port:
            shutdown_orphaned_system(self.spec.admin_port)


__all__ = ["ABORT_SAVE_TIMEOUT_S", "EndMixin"]
