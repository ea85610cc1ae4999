"""The controller's side of the scheduler link: hook calls out, replies in, in ``seq`` order.

Mixed into ``ControllerActor``. Replies are applied in the order the calls were made, and the
requests a hook recorded merge into the trials' slots *before* the hook's own return value (see
``_on_reply``), which is what makes ``pause_trial()`` + NOOP pause at that very result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors._engine.lifecycle import Effect
from actors._engine.reducer import Decision
from actors._engine.sequencer import Sequencer
from actors._engine.trial import TrialStatus
from actors.messages import (
    ActionKind,
    HookKind,
    SchedulerAction,
    SchedulerCall,
    SchedulerFailed,
    SchedulerReady,
    SchedulerReply,
)


class SchedulerLinkMixin:
    """Uses the controller's ``spec``, ``table``, ``io`` and scheduler address ``sched``; calls back
    into its ``_run``, ``_fill``, ``_abort`` and ``_finish``."""

    spec: Any
    table: Any
    io: Any
    sched: Any
    ready: bool
    window: int
    seq: int
    calls: dict[int, tuple[HookKind, str | None, int, int]]
    choosing: bool
    choose_version: int
    hooks: frozenset[HookKind]
    replies: Sequencer[Any]
    finished: bool
    abort_save: int | None
    error: str | None

    if TYPE_CHECKING:  # provided by the Thespian actor this is mixed into; never shadow it at run time
        def send(self, target: Any, msg: Any) -> None: ...

    def _run(self, effects: list[Effect]) -> None:
        raise NotImplementedError

    def _fill(self) -> None:
        raise NotImplementedError

    def _abort(self, reason: str, scheduler_alive: bool = True) -> None:
        raise NotImplementedError

    def _finish(self, error: str | None) -> None:
        raise NotImplementedError

    def receiveMsg_SchedulerReady(self, msg: SchedulerReady, sender: Any) -> None:
        assert self.spec is not None
        self.ready = True
        self.hooks = msg.hooks
        # Stop criteria are checked here, in the controller, so they too need every result
        # decided before the next step: with a stopper, a trial may not run ahead (nor with a
        # driver callback that may ask for a checkpoint at a result: see _controller_gate).
        batching = msg.batching_allowed and self.spec.stopper is None and not self.spec.callback_gate
        self.window = self.spec.batch_window if batching else 1
        for rec in self.table.trials.values():
            if not rec.status.is_finished:
                self._call(HookKind.ADD, rec.trial_id)
        self._fill()

    def receiveMsg_SchedulerFailed(self, msg: SchedulerFailed, sender: Any) -> None:
        self._abort(f"the scheduler failed: {msg.error}", scheduler_alive=False)

    def receiveMsg_SchedulerReply(self, msg: SchedulerReply, sender: Any) -> None:
        for reply in self.replies.push(msg.seq, msg):
            if self.finished:
                return
            self._on_reply(reply)

    # ------------------------------------------------------------------ scheduler calls
    def _call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
              run_id: int = 0, batch_seq: int = 0) -> int | None:
        """Send one hook call; its number, or None when the controller answered it itself."""
        if kind not in self.hooks:
            # The plugin does not implement this hook: its answer is CONTINUE with no requests,
            # so give it here instead of a round trip (FIFO: 2 messages per result, not 4).
            if kind is HookKind.RESULT and trial_id is not None:
                self._run(self.table.decided(trial_id, run_id, batch_seq, Decision.CONTINUE))
            return None
        self.seq += 1
        updates = tuple(self.table.get(t).snapshot() for t in sorted(self.table.changed))
        self.table.changed.clear()
        self.calls[self.seq] = (kind, trial_id, run_id, batch_seq)
        self.send(self.sched, SchedulerCall(self.seq, kind, trial_id, results, updates))
        return self.seq

    def _on_reply(self, msg: SchedulerReply) -> None:
        kind, trial_id, run_id, batch_seq = self.calls.pop(msg.seq)
        effects: list[Effect] = []
        # requests made inside the hook merge first, then the hook's own return value
        # settles the slot: so pause_trial() + NOOP pauses (the Ray Tune hang).
        for action in msg.actions:
            effects += self._apply_action(action)
        if kind is HookKind.RESULT and trial_id is not None:
            effects += self.table.decided(trial_id, run_id, batch_seq, Decision(msg.decision))
        if kind is HookKind.SAVE and msg.state is not None:
            self.io.scheduler_saved(msg.state, msg.seq)
        if msg.seq == self.abort_save:
            self._finish(self.error)
            return
        self._run(effects)
        if kind is HookKind.CHOOSE:
            self.choosing = False
            if msg.chosen is not None:
                self._run(self.table.start(msg.chosen))
            elif (self.table.running == 0 and not self._busy() and not msg.actions
                  and self.table.version == self.choose_version):
                waiting = self.table.with_status(TrialStatus.PENDING, TrialStatus.PAUSED)
                if waiting:
                    self._abort(
                        f"the scheduler chose no trial to run although nothing is running and "
                        f"{len(waiting)} trial(s) wait ({', '.join(t.trial_id for t in waiting[:5])}); "
                        "its choose_trial_to_run must return a PENDING or PAUSED trial eventually")
                    return
        self._fill()

    def _apply_action(self, action: SchedulerAction) -> list[Effect]:
        source = None
        if action.kind is ActionKind.CLONE and action.source_id in self.table.trials:
            source = self.table.get(action.source_id).checkpoint
        return self.table.request(action, source)

    def _busy(self) -> bool:
        return any(k is not HookKind.CHOOSE for k, *_ in self.calls.values())


__all__ = ["SchedulerLinkMixin"]
