"""TrialActor: one per running trial, a mailbox in front of a worker thread.

The actor's thread never runs user code; it forwards the runner's events as
messages (coalescing consecutive results into one ``TrialResults`` batch) and
turns the controller's messages into runner commands.  While the worker thread
computes, the actor polls its event queue with short blocking waits between
wake-ups, so the mailbox stays live for STOP, SAVE and shutdown.
"""

from __future__ import annotations

import datetime
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, WakeupMessage

from actors._placement import MEMBER_CAP
from actors._proc import die_with_parent
from actors._runner import Command, EventKind, TrialRunner, release_trainable
from actors._trainable import Trainable
from actors.messages import (
    RunTrial,
    TrialEnded,
    TrialProceed,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)

MAX_BATCH = 512


class TrialActor(ActorTypeDispatcher):
    """Runs trials handed to it by the controller, one at a time."""

    poll_block_s = 0.02

    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        """Run only on the member the controller placed the trial on (multi-host)."""
        want = (requirements or {}).get(MEMBER_CAP)
        return want is None or capabilities.get(MEMBER_CAP) == want

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        self.runner: TrialRunner | None = None
        self.trainable_bytes = b""
        self.controller: Any = None
        self.cmd_sent = 0
        self.seq = 0
        self.batch_sizes: dict[int, int] = {}
        self.wakeup_pending = False
        self.ended = False

    # ------------------------------------------------------------------ messages
    def receiveMsg_RunTrial(self, msg: RunTrial, sender: Any) -> None:
        self.controller = sender
        reuse = self._kept(msg.trainable)
        self.trainable_bytes = msg.trainable
        self.runner = TrialRunner(msg, reuse=reuse)
        self.cmd_sent = 0
        self.seq = 0
        self.batch_sizes = {}
        self.ended = False
        self.runner.start()
        self._pump(block=True)

    def _current(self, trial_id: str, run_id: int) -> TrialRunner | None:
        r = self.runner
        if r is None or r.trial_id != trial_id or r.msg.run_id != run_id or self.ended:
            return None
        return r

    def _command(self, r: TrialRunner, cmd: Command, arg: int = 0) -> None:
        r.send_command(cmd, arg)
        self.cmd_sent += 1
        self._pump(block=True)

    def receiveMsg_TrialProceed(self, msg: TrialProceed, sender: Any) -> None:
        r = self._current(msg.trial_id, msg.run_id)
        if r is not None:
            self._command(r, Command.PROCEED, self.batch_sizes.pop(msg.seq, 0))

    def receiveMsg_TrialSave(self, msg: TrialSave, sender: Any) -> None:
        r = self._current(msg.trial_id, msg.run_id)
        if r is not None:
            self._command(r, Command.SAVE)

    def receiveMsg_TrialStop(self, msg: TrialStop, sender: Any) -> None:
        r = self._current(msg.trial_id, msg.run_id)
        if r is not None:
            r.stop_requested = True
            self._command(r, Command.STOP, int(msg.save))

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        self.wakeup_pending = False
        self._pump(block=True)

    def _kept(self, trainable: bytes) -> Trainable | None:
        """The previous run's Trainable if it is of the same trainable and was kept for reuse."""
        prev = self.runner
        if prev is None:
            return None
        prev.thread.join(timeout=5.0)  # it already reported ENDED; only its cleanup may remain
        kept, prev.kept = prev.kept, None
        if kept is not None and trainable != self.trainable_bytes:
            release_trainable(kept)
            kept = None
        return kept

    def receiveMsg_ActorExitRequest(self, msg: ActorExitRequest, sender: Any) -> None:
        if self.runner is not None and self.runner.kept is not None:
            kept, self.runner.kept = self.runner.kept, None
            release_trainable(kept)
        if self.runner is not None:
            self.runner.stop_requested = True
            # wake a thread blocked on a decision, so it ends (and releases its output capture)
            self.runner.send_command(Command.STOP)

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass

    # ------------------------------------------------------------------ event pump
    def _pump(self, block: bool) -> None:
        """Forward whatever the worker thread produced; keep polling while it computes."""
        r = self.runner
        if r is None or self.ended:
            return
        idle = r.is_idle(self.cmd_sent)
        results: list[dict[str, Any]] = []
        ckpts: list[Any] = []  # every checkpoint committed in this batch, in order
        first = True
        while True:
            try:
                if first and block and not idle:
                    ev = r.events.get(timeout=self.poll_block_s)
                else:
                    ev = r.events.get_nowait()
            except Exception:
                break
            first = False
            if ev.kind is EventKind.RESULT:
                assert ev.result is not None
                results.append(ev.result)
                if ev.checkpoint is not None:
                    ckpts.append(ev.checkpoint)
                if len(results) >= MAX_BATCH:
                    self._flush(r, results, ckpts)
                    results, ckpts = [], []
                continue
            self._flush(r, results, ckpts)
            results, ckpts = [], []
            self.seq += 1
            if ev.kind is EventKind.SAVED:
                self.send(self.controller, TrialSaved(r.trial_id, r.msg.run_id, self.seq, ev.checkpoint))
            else:
                assert ev.reason is not None
                self.ended = True
                self.send(
                    self.controller,
                    TrialEnded(r.trial_id, r.msg.run_id, self.seq, ev.reason, ev.checkpoint, ev.error,
                               ev.traceback, ev.storage_failure),
                )
                return
        self._flush(r, results, ckpts)
        # ``idle`` was read before draining: if the thread was blocked then, every
        # event it will ever produce before our next command is already forwarded.
        if not idle and not self.wakeup_pending:
            self.wakeup_pending = True
            self.wakeupAfter(datetime.timedelta(seconds=0))

    def _flush(self, r: TrialRunner, results: list[dict[str, Any]], ckpts: list[Any]) -> None:
        if not results:
            return
        self.seq += 1
        self.batch_sizes[self.seq] = len(results)
        latest = ckpts[-1] if ckpts else None
        self.send(self.controller, TrialResults(r.trial_id, r.msg.run_id, self.seq, tuple(results), latest,
                                                tuple(ckpts[:-1])))


__all__ = ["TrialActor"]
