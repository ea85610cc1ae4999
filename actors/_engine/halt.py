"""Trials stopped from outside their own results, as Ray Tune 2.60 ends them.

A stopper's ``stop_all``, ``TuneConfig(time_budget_s)`` and ``FailureConfig(fail_fast=True)`` (for
the trials other than the failed one) stop every unfinished trial through Ray's
``_schedule_trial_stop``: the trial is TERMINATED at once and *no* hook hears of it, neither the
callbacks' ``on_trial_complete`` (so no ``LoggerCallback.log_trial_end``), nor the scheduler's
``on_trial_complete``/``on_trial_remove``, nor the searcher's ``on_trial_complete`` (recorded from
Ray 2.60, see tests/test_halted_trials.py). A trial whose own result already decided its stop (a
stop criterion, the scheduler's STOP) is not halted: Ray's ``stop_trial`` ran its hooks.

The core asks :class:`Halts` which trials to stop and, as each one ends, whether it was halted; it
still closes the controller's loggers' files for it and records it TERMINATED in the state. An abort
halts every unfinished trial the same way (:meth:`Halts.abort_all`; its state, frozen before, keeps them
unfinished).
"""

from __future__ import annotations

from actors._engine.lifecycle import Effect, TrialTable
from actors._engine.reducer import Decision
from actors.messages import ActionKind, SchedulerAction


class Halts:
    """The ids of the trials the run stopped from outside (they end without hooks)."""

    def __init__(self) -> None:
        self.ids: set[str] = set()

    def stop_all(self, table: TrialTable) -> list[Effect]:
        """Stop every unfinished trial; remember the ones not already stopping on their own result."""
        effects: list[Effect] = []
        for rec in list(table.trials.values()):
            if not rec.status.is_finished and rec.pending is not Decision.STOP:
                self.ids.add(rec.trial_id)
            effects += table.request(SchedulerAction(ActionKind.STOP, rec.trial_id))
        return effects

    def abort_all(self, table: TrialTable) -> list[Effect]:
        """An abort (Ctrl-C, a failed scheduler, ``fail_fast="raise"``, ...), as Ray's cleanup after its
        loop: every unfinished trial is halted, so no hook hears of its end (recorded from Ray 2.60 with
        SIGINT: tests/test_ctrl_c.py); one already stopping on its own result is still told."""
        for rec in table.trials.values():
            if not rec.status.is_finished and rec.pending is not Decision.STOP:
                self.ids.add(rec.trial_id)
        return table.abort_all()

    def told(self, trial_id: str) -> bool:
        """Whether the end of ``trial_id`` is told to the hooks (it was not halted)."""
        return trial_id not in self.ids


__all__ = ["Halts"]
