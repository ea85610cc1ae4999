"""Decisions held for the driver's callbacks, so a callback can ask for a checkpoint first.

Ray Tune reads ``result["should_checkpoint"]`` after the callbacks' ``on_trial_result`` ran (which is
after the scheduler decided) and checkpoints the trial at that very iteration, before the decision
takes effect. audition runs callbacks in the driver, so when a driver callback implements
``on_trial_result`` (``ExperimentSpec.callback_gate``) the core sends each decided batch to the
driver at once and holds its decision until the driver answers (``CallbackAnswer``). If a callback
asked for a checkpoint, the trial (still blocked in that ``report()``: the window is 1) saves first,
and the decision applies when the save landed, so the trial cannot step on before it is saved.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors._engine.reducer import Decision
from actors.messages import CallbackAnswer, TrialResults


@dataclass
class Held:
    batch: TrialResults
    decision: Decision
    awaiting_save: bool = False


class ResultGate:
    """At most one held batch per trial (its window is 1 while the gate is on)."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.held: dict[str, Held] = {}
        # the batch held when the trial's run ended (a stopping result): the driver's answer still
        # marks its row should_checkpoint, as Ray logs the result after the callbacks changed it
        self.ended: dict[str, TrialResults] = {}

    def hold(self, batch: TrialResults, decision: Decision) -> None:
        self.held[batch.trial_id] = Held(batch, decision)
        self.ended.pop(batch.trial_id, None)

    def answer_for(self, msg: CallbackAnswer) -> Held | None:
        """The held batch this answer is for, or None (stale: another run or batch)."""
        entry = self.held.get(msg.trial_id)
        if entry is None or (entry.batch.run_id, entry.batch.seq) != (msg.run_id, msg.batch):
            return None
        return entry

    def saved(self, trial_id: str) -> Held | None:
        """A save landed: the batch held for it, to be released now."""
        entry = self.held.get(trial_id)
        if entry is not None and entry.awaiting_save:
            return self.release(trial_id)
        return None

    def release(self, trial_id: str) -> Held:
        return self.held.pop(trial_id)

    def drop(self, trial_id: str) -> None:
        """The run ended: its held batch needs no decision (its row may still be marked, unless the answer
        came already: one waiting for the save it asked for must not be waited for again)."""
        entry = self.held.pop(trial_id, None)
        if entry is not None and not entry.awaiting_save:
            self.ended[trial_id] = entry.batch

    def batch_for(self, msg: CallbackAnswer) -> TrialResults | None:
        """The batch this answer is for, held or of a run that ended since; None if stale."""
        entry = self.held.get(msg.trial_id)
        batch = entry.batch if entry is not None else self.ended.get(msg.trial_id)
        if batch is None or (batch.run_id, batch.seq) != (msg.run_id, msg.batch):
            return None  # (a stale answer leaves the ended batch waiting for its own)
        if entry is None:
            del self.ended[msg.trial_id]
        return batch


__all__ = ["Held", "ResultGate"]
