"""What each trial's actor is told: the ``RunTrial`` that starts a run, the ``TrialProceed``/``TrialHold``/
``TrialSave``/``TrialStop`` a table effect turns into, and whether a freed actor is parked or retired.

Also how trials run between decisions, chosen once the scheduler is ready: the decision window (how far a
trial may run ahead of its decisions), the scheduler's decision horizons, and the endpoint trials ask for
their decisions directly. The core owns one ``TrialOrders`` over its ``TrialTable``, ``ActorPool``,
``Membership`` and ``Watchdog`` (handed in); it returns commands and keeps the hooks, events and the
searcher to the core.
"""

from __future__ import annotations

from actors._engine.effects import Effect, EffectKind, Phase
from actors._engine.lifecycle import TrialRecord, TrialTable
from actors._engine.members import Membership
from actors._engine.pool import ActorPool
from actors._engine.reducer import Decision
from actors._engine.signals import ActorKind, Command, Handle, Retire, Send, Spawn
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import trial_name
from actors._engine.watch import Watchdog
from actors.messages import RunTrial, SchedulerReady, TrialHold, TrialProceed, TrialSave, TrialStop


class TrialOrders:
    """The messages to trial actors, and the pace (window, horizons, direct decisions) they carry."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, pool: ActorPool, members: Membership,
                 watch: Watchdog) -> None:
        self.spec = spec
        self.table = table
        self.pool = pool
        self.members = members
        self.watch = watch
        self.window = 1
        self.horizon_attr = ""  # the scheduler's decision horizons are on, in this result key
        self.horizons: dict[str, float] = {}  # per trial, the newest the scheduler declared
        # where trials ask the scheduler for each decision themselves ("": through the core)
        self.direct = ""

    def pace(self, msg: SchedulerReady) -> None:
        """Choose how far trials run ahead of their decisions, once the scheduler said what it allows."""
        # Stop criteria are checked in the core, so they too need every result decided before the next
        # step: with a stopper a trial may not run ahead (nor with a callback that may ask for a checkpoint).
        # Ray Tune also buffers no results with checkpoint_at_end, so the end checkpoint is at the stopping result.
        # Not when it is only the class-trainable default: a trial then saves at its own end, and a STOP decided
        # on its result lands there anyway (at a horizon, or held by a direct decision); the fast paths stay.
        # A plugin with decision horizons lets a trial run ahead too, waiting only at its horizon.
        asked_end_save = self.spec.checkpoint_at_end and not self.spec.checkpoint_at_end_by_default
        core_decides = self.spec.stopper is not None or self.spec.callback_gate or asked_end_save
        batching = (msg.batching_allowed or bool(msg.horizon_attr)) and not core_decides
        self.horizon_attr = (msg.horizon_attr or "") if batching and not msg.batching_allowed else ""
        # A plugin that decides every result answers the trials directly where its actor offers that
        # (scheduler_endpoint.offering_direct), on the same host, when the core need not decide each result.
        self.direct = msg.direct if msg.direct and not core_decides and not self.spec.multi_host else ""
        self.window = self.spec.batch_window if batching or self.direct else 1

    def declare_horizon(self, trial_id: str, horizon: float | None) -> None:
        """The scheduler's newest horizon for the trial (None: it has none), carried by its next order."""
        if horizon is None:
            self.horizons.pop(trial_id, None)
        else:
            self.horizons[trial_id] = horizon

    def order(self, e: Effect, now: float) -> Command | None:
        """The message a PROCEED, HOLD, SAVE or STOP effect sends to the trial's actor (None: no actor, or
        nothing to say); a save to pause and a stop arm the trial's halt deadline."""
        rec = self.table.get(e.trial_id)
        actor = self.pool.actor_of.get(e.trial_id)
        if actor is None:
            return None
        kind = e.kind
        if kind is EffectKind.PROCEED:
            return Send(actor, TrialProceed(e.trial_id, rec.run_id, e.seq, self.horizons.get(e.trial_id)))
        if kind is EffectKind.HOLD:
            # (with a window of one the trial already waits for that decision)
            return Send(actor, TrialHold(e.trial_id, rec.run_id)) if self.window > 1 else None
        if kind is EffectKind.SAVE:
            if rec.phase is Phase.SAVING:  # saving to pause: it must halt within the grace period
                self.watch.arm(e.trial_id, rec.run_id, now)
            return Send(actor, TrialSave(e.trial_id, rec.run_id, e.save))
        if kind is EffectKind.STOP:
            # the end checkpoint is for the trial's end: a pause has its own save (or none, as asked)
            at_end = self.spec.checkpoint_at_end and rec.pending is not Decision.PAUSE
            self.watch.arm(e.trial_id, rec.run_id, now)
            return Send(actor, TrialStop(e.trial_id, rec.run_id, at_end))
        return None

    def place(self, rec: TrialRecord, member: str) -> tuple[Spawn | None, Handle]:
        """Give the trial's run an actor on ``member``: an idle one, or a new one to spawn."""
        need = self.members.need_of(rec.resources)
        handle = self.pool.reuse(member, _size(need))
        spawn = None
        if handle is None:
            handle = self.pool.new_handle()
            spawn = Spawn(handle, ActorKind.TRIAL, member if self.spec.multi_host else None)
        self.members.place(rec.trial_id, member, need)
        self.pool.assign(rec.trial_id, handle, rec.run_id)
        return spawn, handle

    def run_trial(self, rec: TrialRecord, member: str, checkpoint_index: int) -> RunTrial:
        """The message that starts the trial's run (it takes the extra result fields the run starts with)."""
        s = self.spec
        extra, rec.extra_result = rec.extra_result, {}
        return RunTrial(
            rec.trial_id, rec.run_id, dict(rec.config), s.trainable, rec.checkpoint, rec.iteration,
            rec.time_total_s, self.window, s.storage_url, s.storage_options, s.name,
            checkpoint_index, s.checkpoint_frequency, s.checkpoint_at_end, extra,
            member if s.multi_host else "", capture_fds=s.actor_processes, echo_output=s.log_to_driver,
            trial_dirname=rec.dirname or "",
            trial_name=trial_name(rec.trial_id, s.trainable_name, rec.config, rec.name),
            horizon_attr=self.horizon_attr, horizon=self.horizons.get(rec.trial_id), decide_at=self.direct,
            resources=dict(s.resources_per_trial if rec.resources is None else rec.resources))

    def release(self, trial_id: str, reusable: bool) -> list[Command]:
        """The trial's run is over: its actor is parked for reuse if it may be and there is room, else retired."""
        member = self.members.where(trial_id)
        self.members.release(trial_id)
        handle = self.pool.unassign(trial_id)
        if handle is None:
            return []
        rec = self.table.trials.get(trial_id)
        if not (reusable and rec is not None and member is not None and member not in self.members.lost
                and self.pool.park(handle, member, _size(self.members.need_of(rec.resources)))):
            return [Retire(handle)]
        return []


def _size(need: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """What a trial needs, as the key an idle actor is reused by (Ray's actor cache: by resource request)."""
    return tuple(sorted(need.items()))


__all__ = ["TrialOrders"]
