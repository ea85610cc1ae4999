"""TrialActor: one per running trial, a mailbox in front of a worker thread.

The actor's thread never runs user code; it forwards the runner's events as
messages (coalescing consecutive results into one ``TrialResults`` batch) and
turns the controller's messages into runner commands.

Batches are bounded in count (``MAX_BATCH``) and in time: a result waits at most
``batch_delay_s`` for more to join it, and none at all when it follows a pause that long
(a slow trainable); a checkpoint, a save, the end, or a full window sends at once.
Where Thespian supports ``ThespianWatch`` (the TCP base) the actor sleeps in its
transport's select while the worker computes, woken by a byte on a pipe: a spinning
``wakeupAfter(0)`` would keep the transport from ever selecting, and sent batches would
wait in it (unsent) until the trial ended.  Elsewhere (the simple base) it polls the
event queue with short blocking waits between wake-ups.
"""

from __future__ import annotations

import datetime
import os
import time
from typing import Any

from thespian.actors import (
    ActorExitRequest,
    ActorTypeDispatcher,
    ThespianWatch,
    WakeupMessage,
    WatchMessage,
)

from actors._driver.trainable import Trainable
from actors._engine.early import EarlyOrders
from actors._engine.outbox import Outbox
from actors._engine.placement import placed_here
from actors._process.children import end_children, end_children_at_exit, ends_children
from actors._process.hygiene import describe_on_signal, die_with_parent, in_driver_process
from actors._worker.autofill import started_metrics
from actors._worker.channel import Command, EventKind
from actors._worker.fdcapture import queued_bytes
from actors._worker.random_streams import reseed_inherited_streams
from actors._worker.runner import TrialRunner, release_trainable
from actors._worker.trial_logging import plain_root_logging
from actors.messages import (
    RunTrial,
    TrialEnded,
    TrialHold,
    TrialOutput,
    TrialProceed,
    TrialProcess,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)

MAX_BATCH = 512
OUTPUT_TICK = "output"  # the wake-up payload that sends the trial's printed lines
LIVENESS_TICK = "liveness"  # the wake-up payload of the periodic look (``TrialActor._liveness``)


class TrialActor(ActorTypeDispatcher):
    """Runs trials handed to it by the controller, one at a time."""

    poll_block_s = 0.02
    batch_delay_s = 0.05  # longest a result waits in this actor for more to batch with
    output_every_s = 0.3  # at most one TrialOutput per this long (RunConfig(log_to_driver))
    # every this long while a run is on, and after its end until a new run begins: look at the worker's
    # events without a wake-up; send again each numbered message not acknowledged for this long (at most
    # `resends` times each): a TrialProceed acknowledges its batch and everything numbered before it
    liveness_s = 5.0
    resends = 3

    # run only on the member the controller placed it on (multi-host)
    actorSystemCapabilityCheck = staticmethod(placed_here)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = time.monotonic
        self.held: list[dict[str, Any]] = []  # results not sent yet, and the checkpoints among them
        self.held_ckpts: list[Any] = []
        self.held_since = self.last_result_at = 0.0
        self.quiet = False  # the held batch began after a pause of batch_delay_s: send it at once
        # a pipe the worker writes to when the actor must wake (where Thespian can watch it)
        self.wake: tuple[int, int] | None = None
        self.wake_checked = False
        die_with_parent()
        describe_on_signal(self._describe)
        end_children_at_exit()
        if not in_driver_process():  # (the in-process system's trials share the driver's: the user's)
            reseed_inherited_streams()
            plain_root_logging()
        self.runner: TrialRunner | None = None
        self.trainable_bytes = b""
        self.controller: Any = None
        self.cmd_sent = 0
        self.seq = 0
        self.batch_sizes: dict[int, int] = {}
        self.wakeup_pending = False
        self.ended = False
        self.output_seq = 0
        self.output_sent_at = -1e9
        self.output_timer = False
        self.liveness_timer = False
        self.outbox: Outbox[TrialResults | TrialSaved | TrialEnded] = self._new_outbox()  # until acknowledged
        self.early: EarlyOrders[TrialStop | TrialSave | TrialHold] = EarlyOrders()  # orders that overtook their run

    # ------------------------------------------------------------------ messages
    def receiveMsg_RunTrial(self, msg: RunTrial, sender: Any) -> None:
        self.controller = sender
        # who to kill if this run ignores a stop (blocked in C, sleeping without reports)
        self.send(sender, TrialProcess(msg.trial_id, msg.run_id, os.getpid(), started_metrics(time.time())))
        reuse = self._kept(msg.trainable)
        self.trainable_bytes = msg.trainable
        self.runner = TrialRunner(msg, reuse=reuse)
        self.cmd_sent = 0
        self.seq = 0
        self.batch_sizes = {}
        self.held, self.held_ckpts = [], []
        self.last_result_at = self.clock()
        self.ended = False
        self.outbox = self._new_outbox()
        self.output_seq = 0
        if not self.wake_checked:
            self._open_wake()
        if self.wake is not None:
            self._drain_wake()
            self.runner.wakeup.fd = self.wake[1]
        self.runner.start()
        self._pump(block=True)
        self._arm_liveness()
        for order in self.early.started(msg.trial_id, msg.run_id):  # (sent after this message, arrived before)
            self._order(order)

    def _current(self, trial_id: str, run_id: int) -> TrialRunner | None:
        r = self.runner
        if r is None or r.trial_id != trial_id or r.msg.run_id != run_id or self.ended:
            return None
        return r

    def _command(self, r: TrialRunner, cmd: Command, arg: Any = 0) -> None:
        r.send_command(cmd, arg)
        self.cmd_sent += 1
        self._pump(block=True)

    def receiveMsg_TrialProceed(self, msg: TrialProceed, sender: Any) -> None:
        r = self._current(msg.trial_id, msg.run_id)
        if r is not None:
            self.outbox.acknowledged(msg.seq)  # (released in order: all before it too)
            self._command(r, Command.PROCEED, (self.batch_sizes.pop(msg.seq, 0), msg.horizon))

    def receiveMsg_TrialHold(self, msg: TrialHold, sender: Any) -> None:
        self._order(msg)

    def receiveMsg_TrialSave(self, msg: TrialSave, sender: Any) -> None:
        self._order(msg)

    def receiveMsg_TrialStop(self, msg: TrialStop, sender: Any) -> None:
        self._order(msg)

    def _order(self, msg: TrialStop | TrialSave | TrialHold) -> None:
        """Carry out an order for the run going on; one for a run not started here yet is kept until it starts
        (``EarlyOrders``), one for an earlier run dropped."""
        r = self._current(msg.trial_id, msg.run_id)
        if r is None:
            self.early.keep(msg)
        elif isinstance(msg, TrialStop):
            r.request_stop(msg.save)
            self._command(r, Command.STOP, int(msg.save))
        elif isinstance(msg, TrialSave):
            self._command(r, Command.SAVE, msg.kind)
        else:
            self._command(r, Command.HOLD)

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        if msg.payload == LIVENESS_TICK:
            self.liveness_timer = False
            self._liveness()
            return
        if msg.payload == OUTPUT_TICK:
            self.output_timer = False
            if self.runner is not None and not self.ended:
                self._send_output(self.runner)
            return
        self.wakeup_pending = False
        self._pump(block=self.wake is None)  # with a watched pipe this is only the batch timer

    def _arm_liveness(self) -> None:
        if not self.liveness_timer:
            self.liveness_timer = True
            self.wakeupAfter(datetime.timedelta(seconds=self.liveness_s), payload=LIVENESS_TICK)

    def _liveness(self) -> None:
        """The periodic look that needs no message to arrive. While the run is on: the worker's events,
        as a wake-up would have them looked at (a lost wake-up delays its events by ``liveness_s``, not
        for ever). Then each numbered message not acknowledged for ``liveness_s`` again, in order, at most
        ``resends`` times: the controller releases them strictly in order (``actors._engine.sequencer``),
        so a ``TrialProceed`` for a batch acknowledges it and all before it; one that never arrived would
        hold every later one there, the run's end included. A copy of one it had is dropped by its number.
        A batch whose decision is slow, a save or end nothing acknowledges (a parked actor's) cost up to
        three copies for nothing (why at all: ``docs/architecture.md``, Message ordering)."""
        if self.runner is None:
            return
        if not self.ended:
            self._pump(block=False)
        for msg in self.outbox.due(self.clock()):
            self.send(self.controller, msg)
        if not self.ended or self.outbox.may_resend:
            self._arm_liveness()

    def _new_outbox(self) -> Outbox[TrialResults | TrialSaved | TrialEnded]:
        return Outbox(self.liveness_s, self.resends)

    def _send_numbered(self, msg: TrialResults | TrialSaved | TrialEnded) -> None:
        """Send a message the controller releases by its number, kept until acknowledged (``_liveness``)."""
        self.outbox.sent(msg.seq, msg, self.clock())
        self.send(self.controller, msg)

    def receiveMsg_WatchMessage(self, msg: WatchMessage, sender: Any) -> None:
        self._drain_wake()
        self._pump(block=False)

    def _open_wake(self) -> None:
        """Use a watched pipe if this actor's transport can watch one (the condition Thespian's
        own ActorManager applies to a returned ``ThespianWatch``); else poll."""
        self.wake_checked = True
        transport = getattr(getattr(self, "_myRef", None), "transport", None)
        if hasattr(transport, "set_watch"):
            rfd, wfd = os.pipe()
            os.set_blocking(rfd, False)
            os.set_blocking(wfd, False)
            self.wake = (rfd, wfd)

    def _drain_wake(self) -> None:
        assert self.wake is not None
        try:
            while os.read(self.wake[0], 4096):
                pass
        except OSError:  # empty (non-blocking)
            pass

    def receiveMessage(self, msg: Any, sender: Any) -> Any:
        """Every handler's answer: keep watching the worker's pipe while a run is on (Thespian
        replaces the watch list after each message with what the handler returned)."""
        super().receiveMessage(msg, sender)
        self._output_due()
        if self.wake is None or self.runner is None or self.ended or isinstance(msg, ActorExitRequest):
            return None
        return ThespianWatch([self.wake[0]])

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
        if ends_children():  # now, while this process surely runs (see ends_children)
            end_children()

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass

    def _describe(self) -> str:
        """What this actor waits for (``kill -USR2``, beside its stacks): its run, what it sent, and what
        its worker left for it (an end it has not forwarded shows as an event queued with the worker gone).
        Takes no lock and imports nothing: the signal may land while this thread holds one."""
        r = self.runner
        if r is None:
            return "trial actor: no run yet"
        wake = "-" if self.wake is None else str(queued_bytes(self.wake[0]))
        return (f"trial actor: trial {r.trial_id} run {r.msg.run_id}: ended={self.ended} last_seq_sent={self.seq} "
                f"results_held={len(self.held)} unacknowledged={self.outbox.numbers()} "
                f"timer_pending={self.wakeup_pending} commands_sent={self.cmd_sent} "
                f"worker_alive={r.thread.is_alive()} worker_waiting={r.waiting} commands_seen={r.cmd_seen} "
                f"events_queued={len(r.events.queue)} wake_pipe_bytes={wake}")

    # ------------------------------------------------------------------ event pump
    def _pump(self, block: bool) -> None:
        """Forward what the worker thread produced, batching results for at most ``batch_delay_s``;
        arrange to run again: a timer while results are held, else the worker's wake-up (or a poll)."""
        r = self.runner
        if r is None or self.ended:
            return
        # read before draining: if the thread was blocked then, every event it will
        # produce before our next command is already queued
        idle = r.is_idle(self.cmd_sent)
        polling = self.wake is None
        wait = block and not idle  # e.g. right after a command: the next event is often imminent
        while True:
            urgent = False
            while True:
                try:
                    ev = r.events.get(timeout=self.poll_block_s) if wait else r.events.get_nowait()
                except Exception:
                    break
                wait = False
                if ev.kind is EventKind.RESULT:
                    assert ev.result is not None
                    now = self.clock()
                    if not self.held:  # a slow trainable gains nothing from waiting for more
                        self.held_since, self.quiet = now, now - self.last_result_at >= self.batch_delay_s
                    self.last_result_at = now
                    self.held.append(ev.result)
                    if ev.checkpoint is not None:
                        self.held_ckpts.append(ev.checkpoint)
                        urgent = True
                    if len(self.held) >= MAX_BATCH:
                        self._flush(r)
                    continue
                self._flush(r)
                self.seq += 1
                if ev.kind is EventKind.SAVED:
                    assert ev.save is not None
                    self._send_numbered(TrialSaved(r.trial_id, r.msg.run_id, self.seq, ev.checkpoint, ev.save))
                    continue
                assert ev.reason is not None
                self.ended = True
                last = self._output_chunk(r, final=True)  # in order with the end
                self._send_numbered(TrialEnded(r.trial_id, r.msg.run_id, self.seq, ev.reason, ev.checkpoint, ev.error,
                                               ev.traceback, ev.storage_failure, output=last,
                                               outputs_sent=self.output_seq - (last is not None),
                                               setup_failed=ev.setup_failed, started=ev.started or {}))
                return
            due = self.held_since + self.batch_delay_s - self.clock()
            # the worker has (or is about to have) a full window: it waits for these to be decided
            full = sum(self.batch_sizes.values()) + len(self.held) >= r.msg.window
            if self.held and (urgent or idle or full or self.quiet or due <= 0):
                self._flush(r)
            if self.held:  # results keep coming: wait up to batch_delay_s for more
                r.wakeup.wake_any = False  # until then only urgent events wake me
                if not self.wakeup_pending:
                    self.wakeup_pending = True
                    self.wakeupAfter(datetime.timedelta(seconds=0 if polling else due))
                return
            if polling:
                break
            r.wakeup.wake_any = True  # nothing held: wake me for the next result; but one may be in already
            if r.events.empty():
                return
        if not idle and not self.wakeup_pending:
            self.wakeup_pending = True
            self.wakeupAfter(datetime.timedelta(seconds=0))

    def _output_due(self) -> None:
        """Send the trial's printed lines now if the last send was ``output_every_s`` ago, else
        when that time comes: a quiet trial costs nothing, a chatty one ~3 messages a second."""
        r = self.runner
        if r is None or r.console is None or self.ended or self.output_timer or not r.console.pending():
            return
        due = self.output_sent_at + self.output_every_s - self.clock()
        if due <= 0:
            self._send_output(r)
        else:
            self.output_timer = True
            self.wakeupAfter(datetime.timedelta(seconds=due), payload=OUTPUT_TICK)

    def _send_output(self, r: TrialRunner) -> None:
        chunk = self._output_chunk(r)
        if chunk is not None:
            self.output_sent_at = self.clock()
            self.send(self.controller, chunk)

    def _output_chunk(self, r: TrialRunner, final: bool = False) -> TrialOutput | None:
        lines = r.console.take(final) if r.console is not None else []
        if not lines:
            return None
        self.output_seq += 1
        return TrialOutput(r.trial_id, r.msg.run_id, self.output_seq, os.getpid(), r.msg.member, tuple(lines),
                           r.msg.trial_name)

    def _flush(self, r: TrialRunner) -> None:
        """Send the held results as one batch, with every checkpoint committed among them."""
        results, ckpts = self.held, self.held_ckpts
        if not results:
            return
        self.held, self.held_ckpts = [], []
        self.seq += 1
        self.batch_sizes[self.seq] = len(results)
        latest = ckpts[-1] if ckpts else None
        self._send_numbered(TrialResults(r.trial_id, r.msg.run_id, self.seq, tuple(results), latest, tuple(ckpts[:-1])))
        if latest is not None:
            r.checkpoint_sent.set()


__all__ = ["TrialActor"]
