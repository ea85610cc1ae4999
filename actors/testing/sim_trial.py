"""One trial actor and its worker thread, simulated: the real protocol, no threads, simulated time.

``SimTrial`` plays ``actors/_shell/trial_actor.py`` (the mailbox, batching, ``seq`` numbering) and
``actors/_worker/runner.py`` (a class trainable's loop: results held in a window of at most
``RunTrial.window`` unacknowledged ones, commands acted on only inside ``report()``) as they behave,
so the core meets the same message sequences as in a real run. The trainable is a user
``curve(config, iteration) -> dict``; a step lasts the dict's ``time_this_iter_s`` (default 1.0)
simulated seconds. Checkpoints are committed for real through the ``storage`` package, as the
runner commits them, so ``ExperimentIO.recover`` finds the ones whose results were never sent.

The owner (``SimWorld``) delivers messages with ``receive`` and, when ``step_at`` comes, calls
``step_done``; both return the messages the actor sends, in send order.
"""

from __future__ import annotations

import collections
import functools
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors._engine.early import EarlyOrders
from actors._engine.horizon import ResultWindow
from actors._engine.outbox import Outbox
from actors._shell.trial_actor import MAX_BATCH, TrialActor
from actors._worker.autofill import Autofill, ray_result
from actors._worker.channel import Command
from actors._worker.counters import RunningTotals
from actors.messages import (
    CheckpointRef,
    DecideResult,
    EndReason,
    ResultDecided,
    RunTrial,
    TrialEnded,
    TrialHold,
    TrialProceed,
    TrialProcess,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)
from actors.result import SHOULD_CHECKPOINT, TIME_THIS_ITER_S
from actors.testing._sim_commits import Commit, SimCommits
from actors.testing.faults import Crash
from actors.testing.sim_store import commit_empty, use_sim_storage
from storage import ExperimentLayout, StorageContext, StorageError

Curve = Callable[[dict[str, Any], int], dict[str, Any]]
DEFAULT_STEP_S = 1.0


@functools.lru_cache(maxsize=64)
def _date(second: int) -> str:
    """A result's ``date`` at simulated time ``second`` (whole seconds: what ``time.gmtime`` keeps)."""
    return time.strftime("%Y-%m-%d_%H-%M-%S", time.gmtime(second))


class _Stop(Exception):
    """The worker's ``_StopTrial``: the run unwinds (stopped, or failed to commit)."""


@dataclass(frozen=True)
class DirectAnswer:
    """The scheduler's ``ResultDecided`` for one run's worker (the real worker reads it from the
    socket of its own run, so an answer meant for an earlier run never reaches a later one)."""

    trial_id: str
    run_id: int
    answer: ResultDecided


class SimTrial:
    """A trial actor with its worker, as a pure state machine over simulated time."""

    batch_delay_s = TrialActor.batch_delay_s

    def __init__(self, curve: Curve, pid: int, max_iterations: int | None = None,
                 commit: Commit = commit_empty, hostname: str = "simulated", node_ip: str = "127.0.0.1",
                 saves: bool = True) -> None:
        self.curve = curve
        self.saves = saves  # False: a function trainable that never passes a checkpoint to report()
        self.save_at_stop = False
        self.started: dict[str, Any] = {}  # Ray's auto-filled keys at the current run's start
        self.pid = pid
        self.max_iterations = max_iterations
        self.commit = commit
        self.hostname = hostname
        self.node_ip = node_ip
        self.msg: RunTrial | None = None
        self.trial_id = ""  # the current run's (``msg``'s), kept at hand: read at every step
        self._run_id = 0
        self.ended = True
        self.dead = False
        self.step_at: float | None = None  # when the step being computed reports
        self.step_token = 0  # bumped per step: a stale step event is ignored
        self._ctx: StorageContext | None = None
        self._url: tuple[str, dict[str, Any]] | None = None
        # the run's numbered messages until acknowledged (the real actor's, ``TrialActor._liveness``): the
        # owner records each as sent and calls ``liveness`` every ``liveness_s`` from the first run on
        self.outbox: Outbox[Any] = self._new_outbox()
        self.liveness_armed = False
        self.early: EarlyOrders[Any] = EarlyOrders()  # orders that overtook their run's RunTrial (as the actor's)

    @property
    def iteration(self) -> int:
        """The iteration the worker has reported up to (the step being computed is the next)."""
        return self._iteration if self.msg is not None else 0

    # ------------------------------------------------------------------ the actor's mailbox
    def receive(self, msg: Any, now: float) -> list[Any]:
        if self.dead:
            return []
        if isinstance(msg, RunTrial):
            return self._run(msg, now)
        if isinstance(msg, DirectAnswer):
            if self.msg is None or self.ended or not self.asking or (msg.trial_id, msg.run_id) != (
                    self.msg.trial_id, self.msg.run_id):
                return []
            return self._answered(now, msg.answer.go_on)
        if not isinstance(msg, (TrialProceed, TrialHold, TrialSave, TrialStop)):
            return []  # the real actor ignores what it does not know
        m = self.msg
        if m is None or self.ended or msg.trial_id != m.trial_id or msg.run_id != m.run_id:
            if not isinstance(msg, TrialProceed):  # (a proceed answers a batch: never before its run)
                self.early.keep(msg)  # a run not started here yet: carried out when it starts
            return []  # another run's, or after the end
        if isinstance(msg, TrialProceed):
            self.outbox.acknowledged(msg.seq)  # (released in order: all before it too)
            self.commands.append((Command.PROCEED, (self.batch_sizes.pop(msg.seq, 0), msg.horizon)))
        elif isinstance(msg, TrialHold):
            self.commands.append((Command.HOLD, 0))
        elif isinstance(msg, TrialSave):
            self.commands.append((Command.SAVE, msg.kind))
        else:
            self.stop_requested = True  # the next report unwinds, whatever the command queue holds,
            save = msg.save and self.saves  # (only a class trainable saves when stopped)
            self.save_at_stop = self.save_at_stop or save  # unless the stop saves: then the step is
            self.commands.append((Command.STOP, int(save)))  # reported and the STOP command saves it
            if self.asking:  # DecisionClient.ask gives up waiting for the scheduler's answer
                return self._answered(now, False)
        return self._serve(now, block=True) if self.blocked else []

    def liveness(self, now: float) -> tuple[list[Any], bool]:
        """The actor's periodic look (``TrialActor._liveness``): the numbered messages to send again now,
        and whether the look is armed again (while the run is on, or a message may still be sent again).
        (No lost wake-ups here: the worker's events were all looked at when they came.)"""
        if self.msg is None or self.dead:
            self.liveness_armed = False
            return [], False
        again = self.outbox.due(now)
        self.liveness_armed = not self.ended or self.outbox.may_resend
        return again, self.liveness_armed

    @staticmethod
    def _new_outbox() -> Outbox[Any]:
        return Outbox(TrialActor.liveness_s, TrialActor.resends)

    def die(self) -> None:
        """The process is gone: nothing it held is ever sent."""
        self.dead = True
        self.step_at = None

    def _run(self, msg: RunTrial, now: float) -> list[Any]:
        if self._ctx is None or self._url != (msg.storage_url, msg.storage_options):
            self._ctx = StorageContext(msg.storage_url, msg.storage_options)
            use_sim_storage(self._ctx)  # the controller's store: listing a trial encodes none of its files
            self._url = (msg.storage_url, msg.storage_options)
        layout = ExperimentLayout(self._ctx, msg.experiment_name)
        layout.set_dirname(msg.trial_id, msg.trial_dirname)
        self.commits = SimCommits(self._ctx, layout, msg.trial_id, msg.next_checkpoint_index, msg.checkpoint,
                                  msg.start_iteration, self.commit)
        self.msg = msg
        self.trial_id, self._run_id = msg.trial_id, msg.run_id
        self.ended = False
        self.seq = 0
        self.outbox = self._new_outbox()
        self.batch_sizes: dict[int, int] = {}
        self.held: list[dict[str, Any]] = []
        self.held_ckpts: list[CheckpointRef] = []
        self.held_since = 0.0
        self.quiet = False
        self.urgent = False
        # the worker (TrialRunner)
        self.commands: collections.deque[tuple[Command, Any]] = collections.deque()  # PROCEED: (count, horizon)
        self.blocked = False
        self.asking = False  # waiting for the scheduler's direct answer (RunTrial.decide_at)
        self.stop_requested = False
        self.save_at_stop = False  # TrialRunner.request_stop(save): a class trainable reports, then saves
        self.window = ResultWindow(msg.window, msg.horizon_attr, msg.horizon)
        self.totals = RunningTotals(msg.checkpoint.metrics if msg.checkpoint else None)
        self._iteration = msg.start_iteration
        self.time_total = msg.start_time_total_s
        self.time_since_restore = 0.0
        self.last_report_at = self.last_result_at = now
        self.last_result: dict[str, Any] | None = None
        self.extra = dict(msg.extra_result)
        self.done = False
        # Ray's auto-filled keys as the real actor sends them at each run's start (trial_actor.py,
        # autofill.started_metrics): Result.metrics of a run that ends before its first result
        # (again in its TrialEnded, which may overtake this message)
        self.started = {"date": _date(int(now)), "timestamp": int(now), "pid": self.pid,
                        "hostname": self.hostname, "node_ip": self.node_ip}
        out: list[Any] = [TrialProcess(msg.trial_id, msg.run_id, self.pid, self.started)]
        self._start_step(now)
        for order in self.early.started(msg.trial_id, msg.run_id):  # (sent after this message, arrived before)
            out += self.receive(order, now)
        return out

    # ------------------------------------------------------------------ the worker
    def _start_step(self, now: float) -> None:
        assert self.msg is not None
        i = self._iteration + 1
        self.step_token += 1
        self.failure: tuple[str, str] | None = None
        try:
            metrics = self.curve(dict(self.msg.config), i)
            if not isinstance(metrics, dict):
                raise TypeError(f"curve(config, iteration) must return a dict of metrics, got "
                                f"{type(metrics).__name__}")
            metrics = dict(metrics)
            metrics.setdefault(TIME_THIS_ITER_S, DEFAULT_STEP_S)  # reported, as CurveTrainable reports it
            duration = float(metrics[TIME_THIS_ITER_S])
            if not duration >= 0.0:
                raise ValueError(f"curve returned time_this_iter_s={duration!r}: a step lasts >= 0 seconds")
        except Exception as exc:  # the user's code raised: the run fails, as a raising step() does
            self.failure = (f"{type(exc).__name__}: {exc}", traceback.format_exc())
            metrics, duration = {}, 0.0
        if self.max_iterations is not None and i >= self.max_iterations:
            metrics["done"] = True
        self.pending = metrics
        self.step_at = now + duration

    def step_done(self, now: float, crash: Crash | None = None) -> list[Any]:
        """The step being computed has finished: report it (or fail, or die) and go on."""
        if self.dead or self.ended or self.step_at is None:
            return []
        self.step_at = None
        if crash is Crash.RAISE:
            self.failure = ("RuntimeError: simulated trainable failure",
                            "Traceback (most recent call last):\nRuntimeError: simulated trainable failure\n")
        if self.failure is not None:
            return self._end(EndReason.FAILED, self.commits.latest, *self.failure)
        if self.stop_requested and not self.save_at_stop:  # report() unwinds before recording anything
            return self._end(EndReason.STOPPED, self.commits.latest)
        metrics = self.pending
        result = self._result(metrics, now)
        freq = self.msg.checkpoint_frequency if self.msg else 0
        want = self.saves and ((bool(freq) and self._iteration % freq == 0) or bool(metrics.get(SHOULD_CHECKPOINT)))
        self.window.reported(result)
        ref = None
        if want:
            try:
                ref = self._commit(result)
            except _Stop:
                return self._failed_commit()
        if not self.held:
            self.held_since, self.quiet = now, now - self.last_result_at >= self.batch_delay_s
        self.last_result_at = now
        self.held.append(result)
        if ref is not None:
            self.held_ckpts.append(ref)
            self.urgent = True
        if crash is Crash.DIE:
            self.die()
            return []
        out = self._flush() if len(self.held) >= MAX_BATCH else []
        self.done = bool(metrics.get("done"))
        if self.msg is not None and self.msg.decide_at and not self.done:  # TrialRunner: DecisionClient.ask
            self.asking = True
            return [*out, DecideResult(self.trial_id, self._run_id, result), *self._pump(now, idle=False)]
        return out + self._serve(now, block=self.window.full)

    def _answered(self, now: float, go_on: bool) -> list[Any]:
        self.asking = False
        if not go_on:
            self.window.hold()
        return self._serve(now, block=self.window.full)

    @property
    def _window(self) -> int:
        return self.msg.window if self.msg is not None else 1

    def _serve(self, now: float, block: bool) -> list[Any]:
        """The worker inside report(): act on queued commands; block while the window is full."""
        out: list[Any] = []
        while True:
            if not self.commands:
                if block:
                    self.blocked = True
                    return out + self._pump(now, idle=True)
                break
            cmd, arg = self.commands.popleft()
            if cmd is Command.PROCEED:
                self.window.acknowledged(*arg)  # (count, horizon)
            elif cmd is Command.HOLD:
                self.window.hold()
            elif cmd is Command.SAVE:
                try:
                    saved = (self.commits.latest if not self.saves or (arg.reuses and self._saved_here())
                             else self._commit(self.last_result))
                except _Stop:
                    return out + self._failed_commit()
                out += self._flush()
                self.seq += 1
                out.append(TrialSaved(self.trial_id, self._run_id, self.seq, saved, arg))
            else:  # STOP
                self.stop_requested = True
                if arg and not self._saved_here():
                    try:
                        self._commit(self.last_result)
                    except _Stop:
                        return out + self._failed_commit()
                return out + self._end(EndReason.STOPPED, self.commits.latest)
            block = self.window.full
        self.blocked = False
        if self.done:  # the trainable returned: checkpoint_at_end, then the end
            ckpt: CheckpointRef | None = None
            if self.msg is not None and self.msg.checkpoint_at_end and self.saves and not self._saved_here():
                try:
                    ckpt = self._commit(self.last_result)
                except _Stop:
                    return out + self._failed_commit()
            return out + self._end(EndReason.COMPLETED, ckpt or self.commits.latest)
        self._start_step(now)
        return out + self._pump(now, idle=False)

    def _result(self, metrics: dict[str, Any], now: float) -> dict[str, Any]:
        """The result as TrialRunner._report builds it, with the same function (``autofill.ray_result``):
        the user's metrics, then Ray's auto-filled keys in Ray's order, a class trainable's or (``saves``
        False) a function trainable's; its ``date`` of simulated time in UTC, as every simulated date."""
        assert self.msg is not None
        self._iteration += 1
        elapsed = now - self.last_report_at
        self.last_report_at = now
        given = metrics.get(TIME_THIS_ITER_S)  # a reported time_this_iter_s counts, not the clock
        if isinstance(given, (int, float)) and not isinstance(given, bool):
            elapsed = float(given)
        self.time_total += elapsed
        self.time_since_restore += elapsed
        extra, self.extra = self.extra, {}
        fill = Autofill(self.trial_id, self._iteration, elapsed, self.time_total, self.time_since_restore,
                        self._iteration - self.msg.start_iteration, now, self.pid, self.hostname, self.node_ip,
                        self.msg.config)
        result = ray_result({**metrics, **extra}, fill, self.totals.count(metrics), self.totals.auto_filled(),
                            None, function_api=not self.saves)
        result["date"] = _date(int(now))
        if self.msg.member:
            result["member"] = self.msg.member
        self.last_result = result
        return result

    def _saved_here(self) -> bool:
        return self.commits.saved_at(self._iteration)

    def _commit(self, result: dict[str, Any] | None) -> CheckpointRef:
        """Commit a checkpoint as the worker does; a StorageError fails the run (``_Stop``)."""
        try:
            return self.commits.commit_result(result, self._iteration, self.time_total, self.window)
        except StorageError as exc:
            raise _Stop() from exc

    def _failed_commit(self) -> list[Any]:
        return self._end(EndReason.FAILED, self.commits.latest, f"StorageError: {self.commits.storage_failure}",
                         f"Traceback (most recent call last):\nstorage.StorageError: {self.commits.storage_failure}\n")

    # ------------------------------------------------------------------ the actor's pump
    def _pump(self, now: float, idle: bool) -> list[Any]:
        """Send the held batch when the real actor would: a checkpoint among it, the worker blocked,
        a full window, a slow trainable, or no further result before its batch_delay_s is up."""
        if not self.held:
            return []
        full = sum(self.batch_sizes.values()) + len(self.held) >= self._window
        late = (self.step_at is None and not self.asking) or (
            self.step_at is not None and self.step_at > self.held_since + self.batch_delay_s)
        if self.urgent or idle or full or self.quiet or late:
            return self._flush()
        return []

    def _flush(self) -> list[Any]:
        if not self.held:
            return []
        results, ckpts = self.held, self.held_ckpts
        self.held, self.held_ckpts, self.urgent = [], [], False
        self.seq += 1
        self.batch_sizes[self.seq] = len(results)
        latest = ckpts[-1] if ckpts else None
        return [TrialResults(self.trial_id, self._run_id, self.seq, tuple(results), latest, tuple(ckpts[:-1]))]

    def _end(self, reason: EndReason, ckpt: CheckpointRef | None, error: str | None = None,
             tb: str | None = None) -> list[Any]:
        if self.commits.storage_failure is not None and reason is not EndReason.FAILED:
            reason, error = EndReason.FAILED, f"StorageError: {self.commits.storage_failure}"
        failure = self.commits.storage_failure if reason is EndReason.FAILED else None
        out = self._flush()
        self.seq += 1
        self.ended = True
        self.blocked = False
        self.step_at = None
        out.append(TrialEnded(self.trial_id, self._run_id, self.seq, reason, ckpt, error, tb, failure,
                              started=self.started))
        return out


__all__ = ["Crash", "Curve", "DirectAnswer", "SimTrial", "commit_empty"]
