"""Direct decisions: a plugin that decides every result answers the trial itself.

Without a decision horizon, each result of such a plugin used to wait for four Thespian hops
(trial -> controller -> scheduler -> controller -> trial). With direct decisions the trial's worker
asks the scheduler actor over a socket (``DecideResult`` / ``ResultDecided``); the hook runs there
exactly once per result, in the order the trial reported them. The trial goes on at once only when
the hook returned CONTINUE and asked for nothing; anything else (a STOP or PAUSE, a request about
any trial) makes it hold until the controller has applied that reply, so a decision still takes
effect at the very result it was made for (the ``pause_trial()`` + NOOP case included).

The controller meanwhile receives the results as batches from the trial (as with FIFO) and the
hook's replies from the scheduler (``DecidedResults``), in either order. ``DecisionJoin`` keeps the
replies until the batch they belong to is there, and gives one reply per batch: the decisions
merged (``max``, the reducer's lattice) and the requests in the order the hooks made them, which is
what the core would have got had it called the hook with the whole batch.
"""

from __future__ import annotations

from typing import Any

from actors._engine.reducer import Decision, merge
from actors.messages import DirectDecision, HookKind, SchedulerReply


class DecisionJoin:
    """Replies of directly decided results, waiting for their batches (per trial and run)."""

    __slots__ = ("replies",)

    def __init__(self) -> None:
        self.replies: dict[tuple[str, int], dict[int, SchedulerReply]] = {}

    def add(self, d: DirectDecision) -> None:
        self.replies.setdefault((d.trial_id, d.run_id), {})[d.iteration] = d.reply

    def take(self, trial_id: str, run_id: int, results: tuple[dict[str, Any], ...]) -> SchedulerReply | None:
        """The batch's merged reply once every result of it is decided (the replies are then
        forgotten); None while one is missing."""
        got = self.replies.get((trial_id, run_id))
        if got is None:
            return None
        its = [int(r["training_iteration"]) for r in results]
        if any(i not in got for i in its):
            return None
        replies = [got.pop(i) for i in its]
        if not got:
            del self.replies[(trial_id, run_id)]
        decision = Decision.CONTINUE
        for r in replies:
            decision = merge(decision, Decision(r.decision))
        actions = tuple(a for r in replies for a in r.actions)
        notes = tuple(r.notes[0] if r.notes else None for r in replies)
        return SchedulerReply(0, HookKind.RESULT, trial_id, decision, actions,
                              notes=notes if any(n is not None for n in notes) else ())

    def forget(self, trial_id: str) -> None:
        """A run of the trial ended: replies still kept for it can belong to no batch any more."""
        for key in [k for k in self.replies if k[0] == trial_id]:
            del self.replies[key]

    def __len__(self) -> int:
        return sum(len(v) for v in self.replies.values())


__all__ = ["DecisionJoin"]
