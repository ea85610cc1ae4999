"""Actor-level test kit: drive one audition actor with scripted messages on the
in-process ``simpleSystemBase`` and assert what it sends back.

For users testing their own scheduler plugins::

    from actors.testing import SchedulerTestKit
    with SchedulerTestKit(MyScheduler(metric="loss", mode="min")) as kit:
        kit.add_trial("t1", {"lr": 0.1})
        reply = kit.result("t1", {"loss": 0.5, "training_iteration": 1})
        assert reply.decision is Decision.PAUSE

Everything runs in this process, deterministically; the system is shut down when
the ``with`` block ends.  The scheduler is pickled and unpickled on the way in,
exactly as in a real run, so an unpicklable plugin fails here first.
"""

from __future__ import annotations

import datetime
from typing import Any, Self

import cloudpickle
from thespian.actors import ActorExitRequest, ActorSystem, ActorTypeDispatcher

from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import (
    HookKind,
    ProbeDrain,
    ProbeForward,
    SchedulerCall,
    SchedulerFailed,
    SchedulerReady,
    SchedulerReply,
    SchedulerSetup,
)
from actors.schedulers._base import Scheduler


class ProbeActor(ActorTypeDispatcher):
    """Stands in for an actor's peer: forwards scripted messages and records replies."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inbox: list[Any] = []

    def receiveMsg_ProbeForward(self, msg: ProbeForward, sender: Any) -> None:
        self.send(msg.target, msg.message)

    def receiveMsg_ProbeDrain(self, msg: ProbeDrain, sender: Any) -> None:
        out, self.inbox = self.inbox, []
        self.send(sender, tuple(out))

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        self.inbox.append(msg)


class ActorTestKit:
    """An in-process actor system with a probe; shut down on exit."""

    def __init__(self) -> None:
        self.system = ActorSystem("simpleSystemBase", logDefs=False, transientUnique=True)
        self.probe = self.system.createActor(ProbeActor)
        self.created: list[Any] = []

    def create(self, actor_class: type) -> Any:
        actor = self.system.createActor(actor_class)
        self.created.append(actor)
        return actor

    def send(self, target: Any, message: Any) -> None:
        """Deliver ``message`` to ``target`` with the probe as its sender."""
        self.system.tell(self.probe, ProbeForward(target, message))

    def received(self, timeout_s: float = 5.0) -> tuple[Any, ...]:
        """Everything the probe has received since the last call."""
        out = self.system.ask(self.probe, ProbeDrain(), datetime.timedelta(seconds=timeout_s))
        return tuple(out or ())

    def wait_for(self, message_type: type, timeout_s: float = 5.0) -> tuple[Any, Any]:
        """Collect messages until one of ``message_type`` arrives; returns (it, everything seen).

        Actors driven by worker threads (trial actors) answer asynchronously, so this
        keeps the in-process system running (its timers fire only inside ask/listen).
        """
        import time

        seen: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            seen.extend(self.received(timeout_s=0.2))
            for m in seen:
                if isinstance(m, message_type):
                    return m, tuple(seen)
        raise AssertionError(f"no {message_type.__name__} within {timeout_s}s; got {seen!r}")

    def expect(self, message_type: type, timeout_s: float = 5.0) -> Any:
        """The single message of ``message_type`` received next (fails if absent)."""
        got = [m for m in self.received(timeout_s) if isinstance(m, message_type)]
        if len(got) != 1:
            raise AssertionError(f"expected one {message_type.__name__}, got {got!r}")
        return got[0]

    def close(self) -> None:
        """Ask every created actor to exit, then shut the system down.

        ``simpleSystemBase.shutdown()`` does not deliver ``ActorExitRequest``, so without this a
        trial actor's worker thread blocked on a decision would outlive the test.
        """
        for actor in self.created:
            self.system.tell(actor, ActorExitRequest())
        self.received(timeout_s=0.1)  # the in-process system delivers them inside ask()
        self.system.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class SchedulerTestKit(ActorTestKit):
    """Runs a scheduler plugin inside the real ``SchedulerActor`` and scripts its hooks."""

    def __init__(self, scheduler: Scheduler, metric: str | None = None, mode: str | None = None) -> None:
        from actors._shell.scheduler_actor import SchedulerActor

        super().__init__()
        self.seq = 0
        self.trials: dict[str, TrialSnapshot] = {}
        self.actor = self.create(SchedulerActor)
        self.send(self.actor, SchedulerSetup(cloudpickle.dumps(scheduler), metric, mode))
        got = self.received()
        failed = [m for m in got if isinstance(m, SchedulerFailed)]
        if failed:
            raise AssertionError(failed[0].error)
        self.ready: SchedulerReady = next(m for m in got if isinstance(m, SchedulerReady))

    def call(self, kind: HookKind, trial_id: str | None = None, results: tuple[dict[str, Any], ...] = (),
             updates: tuple[TrialSnapshot, ...] = ()) -> SchedulerReply:
        self.seq += 1
        self.send(self.actor, SchedulerCall(self.seq, kind, trial_id, results, updates))
        got = self.received()
        for m in got:
            if isinstance(m, SchedulerFailed):
                raise AssertionError(m.error)
        replies = [m for m in got if isinstance(m, SchedulerReply)]
        if len(replies) != 1:
            raise AssertionError(f"expected one SchedulerReply, got {got!r}")
        return replies[0]

    def set_status(self, trial_id: str, status: TrialStatus) -> TrialSnapshot:
        old = self.trials[trial_id]
        snap = TrialSnapshot(trial_id, old.config, status, old.last_result, old.num_failures,
                             old.checkpoint_iteration)
        self.trials[trial_id] = snap
        return snap

    def add_trial(self, trial_id: str, config: dict[str, Any],
                  status: TrialStatus = TrialStatus.PENDING) -> SchedulerReply:
        snap = TrialSnapshot(trial_id, dict(config), status)
        self.trials[trial_id] = snap
        return self.call(HookKind.ADD, trial_id, updates=(snap,))

    def result(self, trial_id: str, *results: dict[str, Any]) -> SchedulerReply:
        """Report results of a RUNNING trial; returns the merged decision and recorded actions."""
        snap = self.set_status(trial_id, TrialStatus.RUNNING)
        return self.call(HookKind.RESULT, trial_id, tuple(results), updates=(snap,))

    def complete(self, trial_id: str, result: dict[str, Any]) -> SchedulerReply:
        snap = self.set_status(trial_id, TrialStatus.TERMINATED)
        return self.call(HookKind.COMPLETE, trial_id, (result,), updates=(snap,))

    def choose(self) -> str | None:
        return self.call(HookKind.CHOOSE).chosen


__all__ = ["ActorTestKit", "ProbeActor", "SchedulerTestKit"]
