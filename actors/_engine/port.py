"""The port through which the core's collaborators reach back into it (``CoreOps``), and the phase they read.

The result path (``results.py``), the scheduler's calls and replies and the scheduling loop
(``scheduling.py``), the trials' runs (``runs.py``), the periodic checks and the members' events
(``upkeep.py``) and restore settling (``restored.py``) each own their state, but their work interleaves
with the core's and with each other's: a decision runs table effects that start and end trials (hooks, the
searcher, events), a failing searcher or store ends the experiment. Each gets the ``ExperimentCore`` as a
``CoreOps`` in its constructor: the operations listed here, type-checked against the core (mypy checks the
core conforms where it passes itself), and nothing of its private state. Shared objects (the table, the
link, the feed...) are handed to a collaborator's constructor explicitly; the phase changes stay the core's
alone: a collaborator reads the phase and asks (``abort``, ``finish``, ``drain``, ``save_state``).
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Protocol

from actors._engine.cluster import RunLost
from actors._engine.lifecycle import Effect, TrialRecord
from actors._engine.signals import Command, Handle
from actors._engine.store import ExperimentStore
from actors.messages import CheckpointRef, EndReason, EventType, HookKind, SchedulerReply


class ExperimentPhase(Enum):
    STARTING = "starting"  # waiting for the scheduler plugin to load
    RUNNING = "running"
    DRAINING = "draining"  # fail_fast=True: every trial is being stopped, the run ends normally
    ABORTING = "aborting"  # stopping early, waiting for the scheduler's state to keep it resumable
    FINISHED = "finished"


class CoreOps(Protocol):
    """What a collaborator may ask of the experiment core (``ExperimentCore`` implements it).

    Who calls: a collaborator, only from inside one of its own methods the core called while handling an
    event (``ExperimentCore.handle``); never on its own, never later. Each call runs synchronously and the
    commands it leads to join that event's output in call order, so moving code into a collaborator keeps
    the order of the commands.

    What may re-enter: all but the reads (``phase``, ``finished``, ``now``, ``io``), ``emit``, ``put``,
    ``send``, ``event`` and ``stop_every_trial`` may call back into the collaborators, the caller included.
    ``run``, ``call`` (a hook the plugin lacks is answered at once), ``reply``, ``fill``, ``ended``,
    ``host_lost``, ``drain`` and ``searcher`` (which aborts if the search algorithm raised) can start and end
    trials; ``abort``, ``finish`` and ``save_state`` call the scheduler or log the batches still waiting;
    ``fill``, ``reply``, ``ended``, ``abort`` and ``save_answered`` may finish the experiment. After one of
    them a collaborator checks ``finished`` (or the ``phase``) before going on wherever the order needs it.
    """

    @property
    def phase(self) -> ExperimentPhase:
        """The experiment's phase (changed by the core only)."""
        ...

    @property
    def finished(self) -> bool:
        """The experiment has ended: nothing more is to be done for this event."""
        ...

    @property
    def now(self) -> float:
        """The time of the event being handled (the core reads no clock)."""
        ...

    @property
    def io(self) -> ExperimentStore:
        """The experiment's store (opened by ``Start``, before any collaborator is called)."""
        ...

    def emit(self, commands: list[Command]) -> None:
        """Append commands to this event's output."""
        ...

    def put(self, command: Command) -> None:
        """Append one command to this event's output."""
        ...

    def send(self, to: Handle, msg: Any) -> None:
        """Send a message (to the driver only while it is there)."""
        ...

    def run(self, effects: list[Effect]) -> None:
        """Carry out table effects: start trials, end them (events, hooks, the searcher), order their actors."""
        ...

    def ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: CheckpointRef | None = None,
              error: str | None = None, tb: str | None = None) -> None:
        """This run of the trial is over (a no-op for an unknown trial or an old run): hooks, a retry, the
        searcher, the next trials."""
        ...

    def host_lost(self, lost: RunLost) -> None:
        """The member running this run is unreachable: what it committed counts, the run ends FAILED."""
        ...

    def stop_every_trial(self) -> list[Effect]:
        """``stop_all``: no more trials are drawn; the effects stopping every trial (ended without hooks)."""
        ...

    def call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
             run_id: int = 0, batch_seq: int = 0) -> int | None:
        """Call a scheduler hook; the call's number, or None when the core answered it itself."""
        ...

    def reply(self, kind: HookKind, trial_id: str | None, run_id: int, batch_seq: int, msg: SchedulerReply) -> None:
        """Apply the scheduler's reply to a hook call (a RESULT reply a trial got directly, too)."""
        ...

    def fill(self) -> None:
        """Start trials while resources allow; finish when everything is done."""
        ...

    def event(self, kind: EventType, rec: TrialRecord, result: dict[str, Any] | None = None,
              checkpoint: str | None = None) -> None:
        """A trial event for the driver's callbacks (if they listen)."""
        ...

    def searcher(self, hook: str, trial_id: str, result: dict[str, Any] | None, *rest: Any,
                 flat: dict[str, Any] | None = None) -> bool:
        """Tell the search algorithm (``flat``: the result flattened already, as the scheduler's hook left
        it); False after ending the run naming it if it raised."""
        ...

    def searcher_call(self, method: str, args: tuple[Any, ...]) -> bool:
        """A call of the search algorithm's method a scheduler hook made (``ActionKind.SEARCHER``); False
        after ending the run naming it if the algorithm has no such method or it raised."""
        ...

    def abort(self, reason: str) -> None:
        """End the experiment early, keeping it resumable."""
        ...

    def finish(self, error: str | None) -> None:
        """End the experiment now (``error``: why it failed, None when every trial is done)."""
        ...

    def save_state(self) -> None:
        """Snapshot the table now (a trial's end is written soon, not only every ``state_interval_s``)."""
        ...

    def drain(self) -> None:
        """``fail_fast=True``: stop every trial, the run then ends normally."""
        ...

    def save_answered(self, seq: int) -> bool:
        """The scheduler answered its SAVE call ``seq``: True if an abort waited for it (it has now finished)."""
        ...


__all__ = ["CoreOps", "ExperimentPhase"]
