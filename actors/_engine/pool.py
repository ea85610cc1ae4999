"""Trial actors: which handle runs which trial, which idle ones can be reused, and each run's inbox.

Handles are numbers the core hands out; the shell maps them to Thespian addresses. A trial's
messages are put back in send order per run (``Sequencer``): Thespian's TCP transport does not keep
it, and a message from an earlier run of the trial is stale and dropped.
"""

from __future__ import annotations

from typing import Any

from actors._engine.sequencer import Sequencer
from actors._engine.signals import DRIVER, Handle


class ActorPool:
    def __init__(self, keep_idle: int) -> None:
        self.keep_idle = keep_idle
        self.next_handle = DRIVER + 1
        self.actor_of: dict[str, Handle] = {}
        self.trial_of: dict[Handle, str] = {}
        self.idle: list[tuple[Handle, str]] = []  # reusable trial actors and their member
        # what the trial an idle actor last ran was sized for (Ray reuses an actor only for a trial that asks for
        # the same resources: its actor cache is keyed by the resource request)
        self.sizes: dict[Handle, tuple[tuple[str, float], ...]] = {}
        self.inbox: dict[str, tuple[int, Sequencer[Any]]] = {}

    def new_handle(self) -> Handle:
        h = self.next_handle
        self.next_handle += 1
        return h

    def reuse(self, member: str, size: tuple[tuple[str, float], ...] = ()) -> Handle | None:
        """An idle actor on ``member`` that last ran a trial of ``size``, taken out of the pool."""
        for i, (h, m) in enumerate(self.idle):
            if m == member and self.sizes.get(h, ()) == size:
                del self.idle[i]
                self.sizes.pop(h, None)
                return h
        return None

    def assign(self, trial_id: str, handle: Handle, run_id: int) -> None:
        self.actor_of[trial_id] = handle
        self.trial_of[handle] = trial_id
        self.inbox[trial_id] = (run_id, Sequencer())

    def unassign(self, trial_id: str) -> Handle | None:
        handle = self.actor_of.pop(trial_id, None)
        if handle is not None:
            self.trial_of.pop(handle, None)
        return handle

    def park(self, handle: Handle, member: str, size: tuple[tuple[str, float], ...] = ()) -> bool:
        """Keep an actor for reuse (by a trial of ``size``), if there is room."""
        if len(self.idle) >= self.keep_idle:
            return False
        self.idle.append((handle, member))
        self.sizes[handle] = size
        return True

    def drop_idle(self, member: str) -> list[Handle]:
        """The member is lost: its idle actors are no longer reusable; their handles."""
        dropped = [h for h, m in self.idle if m == member]
        self.idle = [(h, m) for h, m in self.idle if m != member]
        for h in dropped:
            self.sizes.pop(h, None)
        return dropped

    def gone(self, handle: Handle) -> str | None:
        """The actor exited: drop it; the trial it was running, if any."""
        self.idle = [(h, m) for h, m in self.idle if h != handle]
        self.sizes.pop(handle, None)
        trial_id = self.trial_of.get(handle)
        if trial_id is not None:
            self.unassign(trial_id)
        return trial_id

    def in_order(self, trial_id: str, run_id: int, seq: int, msg: Any) -> list[Any]:
        """The run's messages now in send order; nothing for a message from an earlier run."""
        entry = self.inbox.get(trial_id)
        if entry is None or entry[0] != run_id:
            return []
        return entry[1].push(seq, msg)

    def close_inbox(self, trial_id: str) -> None:
        self.inbox.pop(trial_id, None)

    def all_handles(self) -> list[Handle]:
        return [*self.actor_of.values(), *(h for h, _ in self.idle)]


__all__ = ["ActorPool"]
