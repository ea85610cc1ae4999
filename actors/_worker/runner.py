"""Runs one trial's trainable in a worker thread of the trial actor.

The thread owns the user's code; the actor's own thread owns the mailbox.  They
talk through two queues (``channel``): ``events`` (results, saves, the end) flow up to the
actor, ``commands`` (proceed, save, stop) flow down.  Commands are acted on only
inside ``report()``, between steps, so the user's state is never touched by two
threads at once.  ``report()`` blocks while ``window`` results are unacknowledged (a window of 1
means the decision on result N is known before step N+1 starts), and after a result that reached
the trial's decision horizon until it is decided (``actors/_engine/horizon.py``).

The actor may sleep between events: the thread wakes it through its watched pipe (``wakeup``).
The thread commits checkpoints to storage itself (``commits``).
"""

from __future__ import annotations

import inspect
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import cloudpickle

from actors._driver.checkpoint import Checkpoint
from actors._driver.checks import check_result
from actors._driver.console import ConsoleTee
from actors._driver.trainable import Trainable
from actors._driver.trainable_direct import built_by_engine, load_into
from actors._engine.horizon import ResultWindow
from actors._worker.autofill import HOST, Autofill, node_ip, ray_result, started_metrics
from actors._worker.capture import OutputCapture
from actors._worker.channel import Command, Event, EventKind
from actors._worker.commits import CheckpointCommits
from actors._worker.counters import RunningTotals
from actors._worker.decide import DecisionClient
from actors._worker.function import run_function
from actors._worker.session import _set_session
from actors._worker.threads import RunPools
from actors._worker.wakeup import Wakeup
from actors._worker.workdir import chdir_wanted, enter_trial_dir, local_trial_dir
from actors.messages import CheckpointRef, DecideResult, EndReason, RunTrial
from actors.result import DONE, SHOULD_CHECKPOINT, TIME_THIS_ITER_S, TRAINING_ITERATION


class _StopTrial(BaseException):
    """Raised inside ``report()`` to unwind the user's function on STOP/PAUSE."""


class _ReportedDone(BaseException):
    """Raised inside ``report()`` after a function trainable reported ``done=True``: as in Ray Tune,
    that result is the trial's last and the rest of the function never runs; the trial completes."""


def _resettable(t: Trainable) -> bool:
    """Whether the class implements reset_config (the base one always answers False)."""
    return type(t).reset_config is not Trainable.reset_config


def release_trainable(t: Trainable) -> None:
    """Call the user's cleanup(); a failure there must not hide how the run ended."""
    try:
        t.cleanup()
    except Exception:
        pass


class TrialRunner:
    """One run of one trial (a fresh run after every pause/retry)."""

    def __init__(self, msg: RunTrial, clock: Callable[[], float] = time.time,
                 reuse: Trainable | None = None) -> None:
        from storage import ExperimentLayout, StorageContext

        self.msg = msg
        self.trial_id = msg.trial_id
        self.clock = clock
        self.events: queue.Queue[Event] = queue.Queue()
        self.commands: queue.Queue[tuple[Command, Any]] = queue.Queue()  # PROCEED: (count, horizon)
        self.lock = threading.Lock()
        self.waiting = False
        self.cmd_seen = 0
        # results not yet acknowledged (so perhaps never received), oldest first: a checkpoint's
        # manifest keeps those after the previous checkpoint, for a retry to recover
        self.window = ResultWindow(msg.window, msg.horizon_attr, msg.horizon)
        # the scheduler decides each result with this thread directly (actors/_engine/direct.py)
        self.decider = DecisionClient(msg.decide_at, lambda: self.stop_requested) if msg.decide_at else None
        # set by the actor once a batch carrying a checkpoint is sent (direct decisions wait for it)
        self.checkpoint_sent = threading.Event()
        self.wakeup = Wakeup()  # the actor sets its pipe when it sleeps between events
        self.iteration = msg.start_iteration
        self.time_total = msg.start_time_total_s
        self.time_since_restore = 0.0  # Ray's *_since_restore: this run only (each run is a restore)
        self.totals = RunningTotals(msg.checkpoint.metrics if msg.checkpoint else None)
        self.warned_iteration = False
        self.node_ip = node_ip()
        self.stop_requested = False
        # the stop asked for a save first (checkpoint_at_end): a class trainable is then stopped by the
        # STOP command, after its step being computed is reported, so that save is never skipped
        self.save_at_stop = False
        self.ended_ok = False
        self.ctx = StorageContext(msg.storage_url, msg.storage_options)
        self.layout = ExperimentLayout(self.ctx, msg.experiment_name)
        self.layout.set_dirname(msg.trial_id, msg.trial_dirname)
        self.commits = CheckpointCommits(self.ctx, self.layout, msg.trial_id, msg.next_checkpoint_index,
                                         msg.checkpoint, msg.start_iteration)
        self.restore_checkpoint: Checkpoint | None = (
            Checkpoint(self.ctx.uri(msg.checkpoint.path), msg.storage_options) if msg.checkpoint else None
        )
        self._class_trainable: Trainable | None = None
        self.built = False  # the trainable exists: a function at once, a class once setup() returned
        self.built_metrics: dict[str, Any] = {}
        # a Trainable kept by the actor from its previous run of the same class (reuse_actors)
        self.reuse = reuse
        self.kept: Trainable | None = None  # this run's instance, kept for the next run
        self.log_results = False  # the class overrides Trainable.log_result
        self.last_result: dict[str, Any] | None = None
        self._extra = dict(msg.extra_result)
        # lines for the driver's console; the first after each send wakes the actor
        self.console = ConsoleTee(notify=self.wakeup.output) if msg.echo_output else None
        self.output = OutputCapture(self.ctx, {"stdout": self.layout.stdout_file(msg.trial_id),
                                               "stderr": self.layout.stderr_file(msg.trial_id)},
                                    capture_fds=msg.capture_fds, console=self.console)
        self.thread = threading.Thread(target=self._main, name=f"trial-{msg.trial_id}", daemon=True)
        # as Ray: OMP_NUM_THREADS and the loaded pools sized by the trial's CPUs (threads.py), in a process of its
        # own (where the output capture takes the process's fds)
        self.pools = RunPools(msg.resources).prepare() if self.output.capture_fds else None

    # ------------------------------------------------------------------ actor side
    def start(self) -> None:
        self.thread.start()

    def send_command(self, cmd: Command, arg: Any = 0) -> None:
        self.commands.put((cmd, arg))

    def request_stop(self, save: bool) -> None:
        """A stop is on its way (its STOP command follows): end at the next ``report()``. A function
        trainable unwinds there before reporting (Ray stops it at once); a class trainable asked to
        save (``checkpoint_at_end``) reports the step it was computing and the STOP command then saves,
        so the end checkpoint is never skipped and holds the state the trial is at, at its iteration."""
        self.save_at_stop = self.save_at_stop or save
        self.stop_requested = True

    def is_idle(self, cmd_sent: int) -> bool:
        """True when the thread is blocked waiting for a command it has not got yet."""
        with self.lock:
            return self.waiting and self.cmd_seen == cmd_sent

    # ------------------------------------------------------------------ thread side
    def _main(self) -> None:
        _set_session(self)
        self.output.start()
        started = self.clock()
        self._run_started = started
        if self.pools is not None:
            self.pools.apply()
        try:
            trainable = cloudpickle.loads(self.msg.trainable)
            if self.msg.capture_fds and chdir_wanted():  # (capture_fds: the trial has a process of its own)
                enter_trial_dir(local_trial_dir(self.layout.trial_dir(self.trial_id), self.ctx.is_local,
                                                self.msg.experiment_name))
            if inspect.isclass(trainable) and issubclass(trainable, Trainable):
                self._run_class(trainable)
            else:
                self._mark_built()
                # what it returns or yields is reported too (Ray Tune's function API)
                try:
                    run_function(trainable, dict(self.msg.config), lambda m: self.report(m, None))
                except _ReportedDone:
                    pass
            at_end = (self.msg.checkpoint_at_end and self._class_trainable is not None
                      and not self.commits.saved_at(self.iteration))
            ckpt = self._save_class() if at_end else None
            self._end(EndReason.COMPLETED, ckpt or self.commits.latest)
        except _StopTrial:
            self._end(EndReason.STOPPED, self.commits.latest)
        except Exception as exc:  # the user's code raised: report it, the controller decides
            self._end(EndReason.FAILED, self.commits.latest, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        except BaseException as exc:  # SystemExit/KeyboardInterrupt inside user code
            self._end(EndReason.FAILED, self.commits.latest, f"{type(exc).__name__}: {exc}", traceback.format_exc())
        finally:
            if self.decider is not None:
                self.decider.close()
            t = self._class_trainable
            if t is not None and _resettable(t) and self.ended_ok:
                self.kept = t  # reset_config() may take the next trial in place: no cleanup yet
            elif t is not None:
                release_trainable(t)
            self.output.flush()  # whatever cleanup() printed
            self.output.stop()
            _set_session(None)

    def _end(self, reason: EndReason, ckpt: CheckpointRef | None, error: str | None = None,
             tb: str | None = None) -> None:
        if self.commits.storage_failure is not None and reason is not EndReason.FAILED:
            # the user's code caught the error report() raised: the run still failed to persist
            reason, error = EndReason.FAILED, f"StorageError: {self.commits.storage_failure}"
        self.ended_ok = reason is not EndReason.FAILED
        if tb:
            self.output.add("stderr", tb)  # as an uncaught exception would print it
        self.output.flush()
        failure = self.commits.storage_failure if reason is EndReason.FAILED else None
        self.events.put(Event(EventKind.ENDED, checkpoint=ckpt, reason=reason, error=error, traceback=tb,
                              storage_failure=failure, setup_failed=not self.built,
                              started=self.built_metrics))
        with self.lock:
            self.waiting = True
        self.wakeup.event(urgent=True)

    def _mark_built(self) -> None:
        """The trainable is up (a class after ``setup()``): where Ray takes the date, timestamp and pid
        of a trial that never reports (its actor's ``get_auto_filled_metrics``, queued behind setup)."""
        self.built = True
        self.built_metrics = started_metrics(self.clock())

    def _run_class(self, cls: type[Trainable]) -> None:
        t, old, self.reuse = None, self.reuse, None
        if old is not None:
            # Ray Tune's contract: reset_config(new_config) True means "switched in place", so
            # setup() is not run again; False means "build a fresh one".
            if old.reset_config(dict(self.msg.config)):
                t = old
                t.config = dict(self.msg.config)
            else:
                release_trainable(old)
        if t is None:
            with built_by_engine():  # so that __init__ leaves setup() to us (by hand, Ray's runs it there)
                t = cls(dict(self.msg.config))
            self._class_trainable = t
            t.setup(dict(self.msg.config))
        self._class_trainable = t
        self._mark_built()
        if self.restore_checkpoint is not None:
            load_into(t, self.restore_checkpoint)
        self.log_results = type(t).log_result is not Trainable.log_result  # Ray's train() calls it per result
        t.iteration = self.iteration
        freq = self.msg.checkpoint_frequency
        while True:
            metrics = t.step()
            if not isinstance(metrics, dict):
                raise TypeError(f"{cls.__name__}.step() must return a dict of metrics, got {type(metrics).__name__}")
            t.iteration = self.iteration + 1
            # Ray Tune: a step() result with should_checkpoint=True is saved at that iteration
            want_ckpt = (bool(freq) and t.iteration % freq == 0) or bool(metrics.get(SHOULD_CHECKPOINT))
            self._report(metrics, None, save_class=want_ckpt)
            if metrics.get("done"):
                return

    def report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None) -> None:
        self._report(metrics, checkpoint, save_class=False)
        if metrics.get(DONE) and self._class_trainable is None:
            raise _ReportedDone()

    def _report(self, metrics: dict[str, Any], checkpoint: Checkpoint | None, save_class: bool) -> None:
        if self.stop_requested and not (self.save_at_stop and self._class_trainable is not None):
            raise _StopTrial()
        check_result(metrics)  # before it reaches the transport: an unpicklable value fails this trial
        now = self.clock()
        self.iteration += 1
        elapsed = now - self._run_started
        self._run_started = now
        given = metrics.get(TIME_THIS_ITER_S)  # Ray counts a reported time_this_iter_s, not the clock
        if isinstance(given, (int, float)) and not isinstance(given, bool):
            elapsed = given
        self.time_total += elapsed
        self.time_since_restore += elapsed
        extra, self._extra = self._extra, {}
        fill = Autofill(self.trial_id, self.iteration, elapsed, self.time_total, self.time_since_restore,
                        self.iteration - self.msg.start_iteration, now, os.getpid(), HOST, self.node_ip,
                        self.msg.config)
        function_api = self._class_trainable is None
        # Ray's function API (train.report) names the checkpoint a result carries
        name = self.commits.next_name() if function_api and checkpoint is not None else None
        result = ray_result({**metrics, **extra}, fill, self.totals.count(metrics), self.totals.auto_filled(),
                            name, function_api)
        if not self.warned_iteration and metrics.get(TRAINING_ITERATION, self.iteration) != self.iteration:
            self.warned_iteration = True
            print(f"audition: trial {self.trial_id} reported training_iteration="
                  f"{metrics[TRAINING_ITERATION]!r}; it is replaced by audition's count ({self.iteration}), "
                  "which storage and restores rely on (Ray Tune keeps a reported one): report your own "
                  "count under another key", file=sys.stderr)
        if self.msg.member:
            result["member"] = self.msg.member
        if self.log_results and self._class_trainable is not None:
            self._class_trainable.log_result(result)
        self.last_result = result
        self.window.reported(result)
        ref = None
        if checkpoint is not None:
            ref = self.commits.commit(checkpoint, result, self.iteration, self.time_total, self.window)
        elif save_class:
            ref = self._save_class(result)
        self.output.maybe_flush()
        if ref is not None:
            self.checkpoint_sent.clear()
        self.events.put(Event(EventKind.RESULT, result=result, checkpoint=ref))
        if self.decider is not None and not result.get(DONE):  # done: decided STOP without the scheduler (Ray)
            if ref is not None:  # the controller must hold a checkpoint the scheduler decides on, even if
                self.wakeup.event(urgent=True)  # this process dies (or hogs the GIL) right after the answer
                while not self.checkpoint_sent.wait(0.5) and not self.stop_requested:
                    pass
            if not self.decider.ask(DecideResult(self.trial_id, self.msg.run_id, result)):
                self.window.hold()  # not a plain CONTINUE: wait here until the controller has applied it
        block = self.window.full
        if not block:  # (blocking wakes the actor anyway)
            self.wakeup.event(urgent=ref is not None)  # a checkpoint's result goes to the controller at once
        self._serve(block)

    def _serve(self, block: bool) -> None:
        """Handle queued commands; while ``block``, wait for the window to open."""
        while True:
            if block:
                with self.lock:
                    self.waiting = True
                self.wakeup.event(urgent=True)  # the actor must now send everything it holds
                cmd, arg = self.commands.get()
            else:
                try:
                    cmd, arg = self.commands.get_nowait()
                except queue.Empty:
                    return
            with self.lock:
                self.waiting = False
                self.cmd_seen += 1
            if cmd is Command.PROCEED:
                self.window.acknowledged(*arg)  # (count, horizon)
            elif cmd is Command.HOLD:
                self.window.hold()
            elif cmd is Command.SAVE:  # arg: its SaveKind (a scheduler's saves an iteration committed again)
                fresh = self._class_trainable is not None and not (arg.reuses and self.commits.saved_at(self.iteration))
                ckpt = self._save_class() if fresh else self.commits.latest
                self.output.flush()
                self.events.put(Event(EventKind.SAVED, checkpoint=ckpt, save=arg))
                self.wakeup.event(urgent=True)
            elif cmd is Command.STOP:
                self.stop_requested = True
                if arg and self._class_trainable is not None and not self.commits.saved_at(self.iteration):
                    self._save_class()
                raise _StopTrial()
            block = self.window.full

    def _save_class(self, result: dict[str, Any] | None = None) -> CheckpointRef:
        """Save a class trainable; a save outside a report (asked for, or at the end) carries the
        last result's metrics, so score-based retention ranks it like any other checkpoint."""
        t = self._class_trainable
        assert t is not None
        result = result if result is not None else self.last_result
        return self.commits.save(t, result, self.iteration, self.time_total, self.window)


__all__ = ["TrialRunner", "release_trainable"]
