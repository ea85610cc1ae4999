"""The core's side of the scheduler link: hook calls numbered out, replies taken back in call order.

Replies are applied in the order the calls were made (``Sequencer``), and the requests a hook
recorded merge into the trials' slots *before* the hook's own return value (``ExperimentCore``),
which is what makes ``pause_trial()`` + NOOP pause at that very result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors._engine.sequencer import Sequencer
from actors._engine.trial import TrialSnapshot
from actors.messages import HookKind, SchedulerCall, SchedulerReady, SchedulerReply


@dataclass(frozen=True)
class PendingCall:
    """What a call in flight was about, to apply its reply."""

    kind: HookKind
    trial_id: str | None
    run_id: int
    batch_seq: int


class SchedulerLink:
    """Numbers hook calls, remembers them, and gives replies back in call order."""

    def __init__(self) -> None:
        self.seq = 0
        self.calls: dict[int, PendingCall] = {}
        self.replies: Sequencer[SchedulerReply] = Sequencer()
        self.hooks: frozenset[HookKind] = frozenset(HookKind)
        self.batching_allowed = False
        self.choosing = False  # a CHOOSE call is in flight
        self.choose_version = -1  # the table's version when it was made
        self.sees_cluster = False  # the plugin reads the cluster's resources: each call carries them

    def ready(self, msg: SchedulerReady) -> None:
        self.hooks = msg.hooks
        self.batching_allowed = msg.batching_allowed
        self.sees_cluster = msg.sees_cluster

    def implements(self, kind: HookKind) -> bool:
        """False: the plugin does not override this hook, so its answer is CONTINUE with no requests."""
        return kind in self.hooks

    def call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...], run_id: int,
             batch_seq: int, updates: tuple[TrialSnapshot, ...], order: tuple[str, ...] = (),
             cluster: dict[str, float] | None = None, skipped: tuple[tuple[str, str], ...] = ()) -> SchedulerCall:
        self.seq += 1
        self.calls[self.seq] = PendingCall(kind, trial_id, run_id, batch_seq)
        return SchedulerCall(self.seq, kind, trial_id, results, updates, order, cluster, skipped)

    def answered(self, msg: SchedulerReply) -> list[tuple[PendingCall, SchedulerReply]]:
        """The replies now in call order (none if an earlier one is still missing)."""
        return [(self.calls.pop(r.seq), r) for r in self.replies.push(msg.seq, msg) if r.seq in self.calls]

    def busy(self) -> bool:
        """A call other than CHOOSE is in flight (its reply may still change the table)."""
        return any(c.kind is not HookKind.CHOOSE for c in self.calls.values())

    def pending(self) -> bool:
        return bool(self.calls)


__all__ = ["PendingCall", "SchedulerLink"]
