"""A trial actor's orders that arrived before the run they are for.

The controller sends a run's ``RunTrial``, then its orders (``TrialStop``, ``TrialSave``, ``TrialHold``), to
the trial's actor; Thespian's TCP transport does not keep the order of two messages between the same two
actors (``docs/architecture.md``, message ordering), so a stop decided right after a start (a time budget
running out, a scheduler stopping a trial that just started) may arrive first. Dropped as "another run's",
it left the run going until the controller killed it ``trial_stop_grace_s`` later, without the save the stop
asked for. Such an order is kept here and carried out when its run starts. An order for a run this actor
started before (a straggler from a run that ended) is still dropped.

Pure (no actor, no clock): ``TrialActor`` and the simulator's trial (``actors.testing.sim_trial``) run this
same object, so the simulator's reordering faults test it.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar


class RunOrder(Protocol):
    """What an order names: the trial and its run."""

    @property
    def trial_id(self) -> str: ...

    @property
    def run_id(self) -> int: ...


M = TypeVar("M", bound=RunOrder)


class EarlyOrders(Generic[M]):
    """The orders of runs not started yet on this actor, in arrival order."""

    def __init__(self) -> None:
        self._started: dict[str, int] = {}  # trial id -> the newest run of it this actor started
        self._kept: list[M] = []

    def keep(self, order: M) -> bool:
        """An order for no run going on here: kept (True) if its run has not started on this actor yet,
        else (a run that started here before) False: the caller drops it."""
        if order.run_id <= self._started.get(order.trial_id, 0):
            return False
        self._kept.append(order)
        return True

    def started(self, trial_id: str, run_id: int) -> list[M]:
        """A run starts on this actor: its orders kept so far, to carry out now in the order they came.
        Orders kept for an older run of the trial (one that never started here) are dropped."""
        self._started[trial_id] = max(run_id, self._started.get(trial_id, 0))
        now = [o for o in self._kept if o.trial_id == trial_id and o.run_id == run_id]
        self._kept = [o for o in self._kept if o.trial_id != trial_id or o.run_id > run_id]
        return now

    @property
    def waiting(self) -> int:
        """How many orders wait for their run."""
        return len(self._kept)


__all__ = ["EarlyOrders", "RunOrder"]
