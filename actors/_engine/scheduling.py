"""The scheduler's side of the experiment: hook calls out, replies applied in call order, and the
scheduling loop (draw trials from the search algorithm, ask the scheduler which one to start).

A reply applies in Ray Tune's order: the requests the hook recorded merge into the trials' slots first,
then the hook's own return value (a RESULT's decision goes to the result path, ``ResultPath.decided``),
so ``pause_trial()`` + NOOP pauses at that very result. Separate from the core because it owns the
conversation with the plugin (``SchedulerLink``, whose ``choosing`` flag it keeps) and the loop that keeps
trials running; it reaches the core (effects, ending the run) only through ``CoreOps``.
"""

from __future__ import annotations

from typing import Any

from actors._engine.clones import CloneWaits
from actors._engine.feed import DriverFeed
from actors._engine.lifecycle import Effect, TrialTable
from actors._engine.link import SchedulerLink
from actors._engine.members import Membership
from actors._engine.orders import TrialOrders
from actors._engine.policy import policy_line
from actors._engine.port import CoreOps, ExperimentPhase
from actors._engine.reducer import Decision
from actors._engine.results import ResultPath
from actors._engine.signals import Handle, Wake
from actors._engine.spec import ExperimentSpec
from actors._engine.suggest import TrialSource
from actors._engine.trial import TrialStatus
from actors.messages import ActionKind, EventType, HookKind, SchedulerAction, SchedulerReply

SCHEDULER: Handle = 1  # the scheduler actor's handle: spawned first
_KEEP_CHOICE = frozenset({HookKind.CHOOSE, HookKind.SAVE})


class Scheduling:
    """Hook calls and their replies, and the loop that starts trials while there is room."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, link: SchedulerLink, orders: TrialOrders,
                 members: Membership, source: TrialSource, clone_waits: CloneWaits, results: ResultPath,
                 feed: DriverFeed, ops: CoreOps) -> None:
        self.spec = spec
        self.table = table
        self.link = link
        self.orders = orders
        self.members = members
        self.source = source
        self.clone_waits = clone_waits
        self.results = results
        self.feed = feed  # (the end waits for trial output still on its way: DriverFeed.output_due)
        self.ops = ops
        # the plugin answered a hook since it last saved its state: a natural end asks it once more, so that
        # the final state holds what it learned (the script's scheduler object takes it after fit(), as Ray's)
        self.unsaved_hooks = False
        # A CHOOSE the plugin declined (no trial) is asked again only once another event came: it would answer
        # the same, and asking at once spun the controller and the scheduler actor (4,134 calls in 5 s of a
        # HyperBand run whose paused trials waited for a slow one; Ray asks once per step of its event loop)
        self.heard = 0  # events that may change the plugin's answer (``ExperimentCore.handle`` counts them)
        self.asked_at = -1  # ``heard`` when the last CHOOSE was sent
        self.declined_at: int | None = None  # ``heard`` when the plugin last declined, until asked again

    # ------------------------------------------------------------------ the scheduler link
    def call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
             run_id: int = 0, batch_seq: int = 0) -> int | None:
        """Send one hook call; its number, or None when the core answered it itself."""
        if not self.link.implements(kind):
            # the plugin does not implement this hook: CONTINUE with no requests, without a round trip
            if kind is HookKind.RESULT and trial_id is not None:
                self.ops.run(self.table.decided(trial_id, run_id, batch_seq, Decision.CONTINUE))
            return None
        changed = self.table.changed
        updates = tuple(self.table.get(t).snapshot() for t in sorted(changed)) if changed else ()
        changed.clear()
        order = self.table.take_order()  # (a retry moved to the end, a restored table: FIFO picks by list order)
        cluster = self.members.totals() if self.link.sees_cluster else None
        call = self.link.call(kind, trial_id, results, run_id, batch_seq, updates, order, cluster,
                              self.clone_waits.take_skipped())
        self.ops.send(SCHEDULER, call)
        return call.seq

    def reply(self, msg: SchedulerReply) -> None:
        for call, reply in self.link.answered(msg):
            if self.ops.finished:
                return
            self.on_reply(call.kind, call.trial_id, call.run_id, call.batch_seq, reply)

    def on_reply(self, kind: HookKind, trial_id: str | None, run_id: int, batch_seq: int,
                 msg: SchedulerReply) -> None:
        effects: list[Effect] = []
        if self.orders.horizon_attr and trial_id is not None and kind in (HookKind.RESULT, HookKind.ADD):
            # (before the batch's decision below, whose TrialProceed carries it)
            self.orders.declare_horizon(trial_id, msg.horizon)
        # requests made inside the hook merge first, then the hook's own return value settles the
        # slot: so pause_trial() + NOOP pauses (the Ray Tune hang)
        policy: list[SchedulerAction] = []  # PBT's log_config lines: written for the exploits that take place
        skipped: set[str] = set()
        for action in msg.actions:
            if action.kind is ActionKind.LOG_POLICY:
                policy.append(action)
                continue
            if action.kind is ActionKind.SEARCHER:  # made now: before the searcher hears of the result, as Ray
                if not self.ops.searcher_call(action.method, action.args):
                    return
                continue
            source, awaits = None, False
            if action.kind is ActionKind.CLONE and action.source_id in self.table.trials:
                source = self.table.exploit_source(action.source_id)
                awaits = self.clone_waits.would_wait(action)
                if source is None and action.source_id != action.trial_id and not awaits:
                    # its source has no checkpoint to give and none on its way (never saved, or its save in
                    # flight died with its run): the exploit is skipped, as Ray's PBT skips it
                    skipped.add(action.trial_id)
                    self.clone_waits.skip(action.trial_id, action.source_id or "")
                    continue
            effects += self.table.request(action, source, waiting=awaits)
            self.clone_waits.note(action)
        for action in policy:
            if action.trial_id not in skipped:
                line = policy_line(action, self.spec.tag_paths)
                self.ops.io.log_policy(action.trial_id, action.source_id or "", line)
        if kind is HookKind.RESULT and trial_id is not None:
            rest = self.results.decided(trial_id, run_id, batch_seq, Decision(msg.decision), effects, msg.notes)
            if rest is None:
                return
            effects = rest
        self.unsaved_hooks = kind is not HookKind.SAVE
        if kind is HookKind.SAVE:  # (only a SAVE call's reply can be the one an abort waits for)
            if msg.state is not None:
                self.ops.io.scheduler_saved(msg.state, msg.seq)
            if self.ops.save_answered(msg.seq):
                return
        self.ops.run(effects)
        if kind is HookKind.CHOOSE:
            self.link.choosing = False
            # a trial still waiting for its clone's checkpoint cannot start: as if none was chosen
            chosen = None if msg.chosen is None or msg.chosen in self.clone_waits else msg.chosen
            if chosen is None and not msg.actions and self.asked_at == self.heard:
                self.declined_at = self.heard  # (nothing came meanwhile: the same question gets the same answer)
            unfit = chosen is not None and self.spec.resources_of is not None and not self._fits(chosen)
            if unfit:
                # its resources are not free yet: a pending trial they are free for starts instead, as Ray starts
                # every pending trial whose resources are granted; none: asked again after the next event (one
                # that no member can ever hold ends the run through the placement deadline, Cluster.unplaceable)
                chosen = next((r.trial_id for r in self.table.with_status(TrialStatus.PENDING)
                               if r.trial_id not in self.clone_waits and self._fits(r.trial_id)), None)
                if chosen is None:
                    self.declined_at = self.heard
            if chosen is not None:
                self.ops.run(self.table.start(chosen))
            elif (not unfit and self.table.running == 0 and not self.link.busy() and not msg.actions
                  and self.table.version == self.link.choose_version):
                waiting = self.table.with_status(TrialStatus.PENDING, TrialStatus.PAUSED)
                if waiting:
                    self.ops.abort(
                        f"the scheduler chose no trial to run although nothing is running and {len(waiting)} "
                        f"trial(s) wait ({', '.join(t.trial_id for t in waiting[:5])}); its choose_trial_to_run "
                        "must return a PENDING or PAUSED trial eventually")
                    return
        self.fill()

    # ------------------------------------------------------------------ the scheduling loop
    def fill(self) -> None:
        """Start trials while resources allow; finish when everything is done."""
        if self.ops.phase not in (ExperimentPhase.RUNNING, ExperimentPhase.DRAINING):
            return
        self._top_up()
        if self.ops.phase not in (ExperimentPhase.RUNNING, ExperimentPhase.DRAINING):
            return
        waiting = self.table.count(TrialStatus.PENDING) + self.table.count(TrialStatus.PAUSED)
        blocked = self.clone_waits.blocked()
        # (free room is counted only when a trial could take it and the concurrency cap leaves
        # room: this runs after every decision)
        if (waiting > blocked and not self.link.choosing and self.declined_at is None
                and self.spec.max_concurrent > self.table.running and self._room()):
            self.link.choosing = True
            self.asked_at = self.heard
            self.link.choose_version = self.table.version
            self.call(HookKind.CHOOSE, None)
            return
        if self.source.done and self.table.all_finished() and not self.link.pending():
            if self.unsaved_hooks and self.ops.phase is ExperimentPhase.RUNNING:
                self.unsaved_hooks = False
                if self.call(HookKind.SAVE, None) is not None:
                    return  # its answer comes back through on_reply, which fills again: then the run ends
            if not self.results.answers_due() and not self.feed.output_due(self.ops.now):
                self.ops.finish(None)
        elif not waiting and self.table.running == 0 and not self.link.pending() and not self.source.done:
            self.ops.abort("the search algorithm suggested no configuration while no trial was running; "
                           "it would wait forever (check its max_concurrent / suggest())")

    def _room(self) -> bool:
        """Whether a waiting trial could start now: a free slot, or (trials of many sizes) one that fits somewhere."""
        if self.spec.resources_of is None:
            return self.members.free_slots() > 0
        return any(self._fits(r.trial_id) for r in self.table.with_status(TrialStatus.PENDING, TrialStatus.PAUSED)
                   if r.trial_id not in self.clone_waits)

    def _fits(self, trial_id: str) -> bool:
        return self.members.choose(self.members.need_of(self.table.get(trial_id).resources)) is not None

    def note(self, event: Any) -> None:
        """Count an event the core takes that may change a declined CHOOSE's answer: all but the plugin's own
        CHOOSE and SAVE answers and the ticks (its answer moves with the trials' events, not with time)."""
        if type(event) is Wake or (type(event) is SchedulerReply and event.kind in _KEEP_CHOICE):
            return
        self.heard += 1

    def ask_again(self) -> bool:
        """Whether an event came since the plugin declined to choose (then it is asked again: ``fill``)."""
        if self.declined_at is None or self.declined_at == self.heard:
            return False
        self.declined_at = None
        return True

    def _top_up(self) -> None:
        """Add the trials the search algorithm gives while it should give more (Ray's rule)."""
        while not self.source.done:  # (done: it gives no more, and the free room need not be counted)
            room = min(self.members.free_slots(), self.spec.max_concurrent - self.table.running)
            drawn = self.source.draw(self.table, room, self.ops.io.trial_prefix)
            if drawn is None:
                return
            if drawn.record is None:
                assert drawn.problem is not None, "a Drawn holds a record or a problem"
                self.ops.abort(drawn.problem)
                return
            rec = drawn.record
            if rec.resources is not None and not self.spec.multi_host and not self.members.could_ever_fit(
                    self.members.need_of(rec.resources)):  # (no machine will join: it would wait for ever)
                self.ops.abort(f"trial {rec.trial_id} asks for {rec.resources} (its config {rec.config!r}) but this "
                               f"machine offers {self.spec.total_resources}; ask for less in the resources function, "
                               "declare more with init(...), or run multi-host")
                return
            self.ops.io.on_add(drawn.record)
            # callbacks' trials list holds pending trials too (Ray's add_trial)
            self.ops.event(EventType.ADD, drawn.record)
            self.call(HookKind.ADD, drawn.record.trial_id)


__all__ = ["SCHEDULER", "Scheduling"]
