"""The scheduler actor's logic without the actor: its messages in, its answers out.

``SchedulerActor`` (``actors/_shell/scheduler_actor.py``) is a mailbox around this object, and the
simulator (``actors.testing.simulate``) drives the same object directly, so a simulated experiment
runs exactly the translation a real one does: ``SchedulerSetup`` -> ``SchedulerReady`` (or
``SchedulerFailed``), ``SchedulerCall``s put back in send order, each answered by one
``SchedulerReply`` or ``SchedulerFailed``. A hook that raises is reported, not retried: a
scheduler in an unknown state must not keep making decisions.
"""

from __future__ import annotations

import dataclasses
import traceback

import cloudpickle

from actors._engine.reducer import Decision
from actors._engine.scheduler_host import SchedulerHost, overridden_hooks
from actors._engine.sequencer import Sequencer
from actors._engine.trial import TrialStatus
from actors.messages import (
    DecideResult,
    DirectDecision,
    HookKind,
    ResultDecided,
    SchedulerCall,
    SchedulerFailed,
    SchedulerReady,
    SchedulerReply,
    SchedulerSetup,
)

SchedulerAnswer = SchedulerReady | SchedulerReply | SchedulerFailed


def decides_every_result(ready: SchedulerReady) -> bool:
    """The plugin implements ``on_trial_result``, tolerates no batching and declares no horizon: the
    one for which the scheduler actor (and the simulator) offer direct decisions (``SchedulerReady.direct``).
    Not one that reads the cluster's resources: it sizes trials by the controller's view of them, which only
    the controller's calls bring (a direct decision carries the trial's result alone)."""
    return (not ready.batching_allowed and not ready.horizon_attr and HookKind.RESULT in ready.hooks
            and not ready.sees_cluster)


class SchedulerEndpoint:
    """One scheduler plugin behind the controller <-> scheduler protocol."""

    def __init__(self) -> None:
        self.host: SchedulerHost | None = None
        self.calls: Sequencer[SchedulerCall] = Sequencer()  # the transport may reorder calls

    def setup(self, msg: SchedulerSetup) -> SchedulerReady | SchedulerFailed:
        """Unpickle and configure the plugin (restoring its saved state on resume)."""
        try:
            sched = cloudpickle.loads(msg.scheduler)
            self.host = SchedulerHost(sched, msg.metric, msg.mode, msg.state, describe=msg.describe,
                                      search_properties=msg.search_properties)
            return SchedulerReady(sched.batching_allowed(), type(sched).__name__, overridden_hooks(sched),
                                  self.host.horizon_attr,
                                  sees_cluster=bool(getattr(sched, "sees_cluster_resources", False)))
        except Exception as exc:
            return SchedulerFailed(0, HookKind.ADD, f"loading the scheduler failed: {exc!r}\n"
                                   + traceback.format_exc())

    def call(self, msg: SchedulerCall) -> list[SchedulerReply | SchedulerFailed]:
        """The answers to every call now in order (none while an earlier call is still missing)."""
        return [self._handle(call) for call in self.calls.push(msg.seq, msg)]

    def decide(self, msg: DecideResult) -> tuple[ResultDecided, DirectDecision | SchedulerFailed | None]:
        """A result a trial asks about directly (``actors/_engine/direct.py``): the answer for the
        trial, and for the controller the hook's reply (or the failure that ends the experiment; None
        for a run the controller has already ended, whose question came late: nobody waits for it, and
        its hook does not run). The trial goes on at once only if the hook returned CONTINUE and asked
        for nothing."""
        if self.host is None or msg.trial_id not in self.host.controller.trials:
            return ResultDecided(False, msg.seq), SchedulerFailed(
                0, HookKind.RESULT, f"trial {msg.trial_id} asked for a decision before the scheduler knew of it "
                "(an engine bug: a trial starts only after its on_trial_add call)")
        mirror = self.host.controller.trials
        known = mirror[msg.trial_id]
        if msg.run_id < known.run_id or (msg.run_id == known.run_id and known.status is not TrialStatus.RUNNING):
            # (marking it RUNNING again would hide a waiting trial from choose_trial_to_run for good: seen in
            # a seeded simulation, where the experiment then ended "the scheduler chose no trial to run")
            return ResultDecided(False, msg.seq), None
        # a reporting trial runs, whether or not the controller's update saying so has arrived yet
        if known.status is not TrialStatus.RUNNING or known.run_id != msg.run_id:
            mirror[msg.trial_id] = dataclasses.replace(known, status=TrialStatus.RUNNING, run_id=msg.run_id)
        out = self._handle(SchedulerCall(0, HookKind.RESULT, msg.trial_id, (msg.result,)))
        if isinstance(out, SchedulerFailed):
            return ResultDecided(False, msg.seq), out
        go_on = out.decision is Decision.CONTINUE and not out.actions
        return ResultDecided(go_on, msg.seq), DirectDecision(msg.trial_id, msg.run_id,
                                                    int(msg.result.get("training_iteration", 0)), out)

    def _handle(self, msg: SchedulerCall) -> SchedulerReply | SchedulerFailed:
        if self.host is None:
            return SchedulerFailed(msg.seq, msg.kind, "scheduler not set up")
        try:
            return self.host.handle(msg)
        except Exception as exc:
            name = type(self.host.scheduler).__name__
            return SchedulerFailed(msg.seq, msg.kind,
                                   f"{name} raised in its {msg.kind.value} hook: {exc!r}\n{traceback.format_exc()}")


__all__ = ["SchedulerAnswer", "SchedulerEndpoint", "decides_every_result"]
