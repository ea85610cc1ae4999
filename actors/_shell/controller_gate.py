"""Result batches held for the driver's callbacks, so a callback can ask for a checkpoint.

Ray Tune reads ``result["should_checkpoint"]`` after the callbacks' ``on_trial_result`` ran and
checkpoints the trial at that very iteration. audition runs callbacks in the driver, so when a
driver callback implements ``on_trial_result`` (``ExperimentSpec.callback_gate``) the controller
sends each result batch to the driver at once and holds the batch's scheduler call until the
driver answers (``CallbackAnswer``). If a callback asked for a checkpoint, the trial (still
blocked in that ``report()``: the window is 1) saves first, and the held call goes out when the
save landed, so the trial cannot step on before it is saved. Mixed into ``ControllerActor``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from actors.messages import ActionKind, CallbackAnswer, EventType, HookKind, SchedulerAction, TrialResults


class GateMixin:
    """Uses the controller's ``spec``, ``table``, ``finished``, ``events``; calls ``_call``/``_run``."""

    spec: Any
    table: Any
    finished: bool
    events: list[Any]
    held: dict[str, tuple[TrialResults, bool]]  # trial -> its held batch, and whether a save is awaited

    if TYPE_CHECKING:  # provided by the actor and the other mixins; never shadow them at run time
        def _call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
                  run_id: int = 0, batch_seq: int = 0) -> int | None: ...

        def _run(self, effects: list[Any]) -> None: ...

        def _flush_events(self) -> None: ...

    def _gated(self) -> bool:
        return bool(self.spec is not None and self.spec.callback_gate and self.spec.forward_events)

    def _hold(self, msg: TrialResults) -> None:
        """Send the batch's events to the driver now; its scheduler call waits for the answer."""
        for i in range(len(self.events) - 1, -1, -1):  # the batch's last result asks for the answer
            ev = self.events[i]
            if ev.kind is EventType.RESULT and ev.trial.trial_id == msg.trial_id:
                self.events[i] = replace(ev, answer_run=msg.run_id, answer_batch=msg.seq)
                self.held[msg.trial_id] = (msg, False)
                self._flush_events()
                return
        self._call(HookKind.RESULT, msg.trial_id, msg.results, msg.run_id, msg.seq)  # nothing to hold

    def receiveMsg_CallbackAnswer(self, msg: CallbackAnswer, sender: Any) -> None:
        entry = self.held.get(msg.trial_id)
        if self.finished or entry is None or (entry[0].run_id, entry[0].seq) != (msg.run_id, msg.batch):
            return
        if msg.checkpoint:
            effects = self.table.request(SchedulerAction(ActionKind.CHECKPOINT, msg.trial_id))
            if effects:  # a save is on its way: the batch's decision waits until it landed
                self.held[msg.trial_id] = (entry[0], True)
                self._run(effects)
                return
        self._release_held(msg.trial_id)

    def _saved_release(self, trial_id: str) -> None:
        """A save landed: a batch held for it gets its scheduler call now."""
        entry = self.held.get(trial_id)
        if entry is not None and entry[1]:
            self._release_held(trial_id)

    def _release_held(self, trial_id: str) -> None:
        res, _ = self.held.pop(trial_id)
        self._call(HookKind.RESULT, res.trial_id, res.results, res.run_id, res.seq)


__all__ = ["GateMixin"]
