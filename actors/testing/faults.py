"""What can go wrong in a simulated experiment, the draws that decide it, and the wrappers that inject it.

Every fault is drawn from the simulation's seeded random generator (probabilities) or fixed in
advance (points), so a seed reproduces the same failures at the same moments: ``FaultDice`` draws
for the world (latencies, stragglers, crashes, lost notices), ``FaultyEndpoint`` makes scheduler
hooks raise, ``faulty_commits`` checkpoint commits, ``FaultyStore`` the store's writes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from actors._engine.scheduler_endpoint import SchedulerEndpoint
from actors.messages import SchedulerCall, SchedulerFailed, SchedulerReply
from actors.testing._sim_commits import Commit
from storage import StorageContext, StorageError


class Crash(Enum):
    """How a simulated step goes wrong."""

    RAISE = "raise"  # the trainable raises instead of reporting: TrialEnded(FAILED)
    DIE = "die"  # the process dies right after the step's report (and checkpoint): nothing more is sent


@dataclass(frozen=True)
class Faults:
    """Failures to inject into a simulated experiment (all off by default).

    Probabilities are per opportunity: per trial step, per message, per hook call, per store call.
    Points name a trial by its number (0 for the first trial created) and the iteration it
    reaches: ``fail_at=((0, 3),)`` makes the first trial's trainable raise at its third step.
    """

    # the trainable raises at a step: TrialEnded(FAILED) after every result before it
    trial_fail_p: float = 0.0
    fail_at: tuple[tuple[int, int], ...] = ()
    # the trial's process dies right after a step's report (and its checkpoint, if any): results
    # already sent are still in flight, those it held are lost; the core hears ActorGone
    trial_die_p: float = 0.0
    die_at: tuple[tuple[int, int], ...] = ()
    # a process death whose ActorGone is never delivered (found only through CheckProcesses)
    lost_exit_p: float = 0.0
    # a scheduler hook raises (SchedulerFailed); SETUP loading never fails
    scheduler_error_p: float = 0.0
    # a message to a trial actor or probe cannot be handled (Undeliverable back to the core); the
    # scheduler actor's failures are scheduler_error_p
    poison_p: float = 0.0
    # a store call that writes raises StorageError; ``storage_fail_at``: (method, n) fails its n-th call
    storage_error_p: float = 0.0
    storage_fail_at: tuple[tuple[str, int], ...] = ()
    # a trial's checkpoint commit raises StorageError (the run fails, the experiment stops)
    checkpoint_error_p: float = 0.0
    # multi-host: (at_s, member_id, back_after_s) the member vanishes (its actors die silently, no
    # heartbeats) and registers again back_after_s later (never if back_after_s < 0)
    member_loss: tuple[tuple[float, str, float], ...] = ()
    # a lost member's registration end is delivered (MemberLeft) with this probability
    member_left_p: float = 0.5
    # the driver sends AbortExperiment at this simulated time
    abort_at_s: float | None = None
    # message latency: uniform in [min, max] simulated seconds (reorders messages, even one sender's)
    latency_s: tuple[float, float] = (0.0001, 0.003)
    # a straggler: with this probability a message takes ``straggler_s`` longer (a congested link, a
    # dying process's last words flushed late): a dead run's results then land after its restart
    straggler_p: float = 0.0
    straggler_s: float = 5.0
    # a trial's numbered message (TrialResults, TrialSaved, TrialEnded) arrives again ``duplicate_after_s``
    # later: the trial actor's re-send of one not acknowledged in time (``TrialActor._liveness``); the
    # core must drop the copy by its number, whenever it lands (before or after the run's end)
    duplicate_p: float = 0.0
    duplicate_after_s: float = 5.0
    # a trial's numbered message is lost on its first send (a transport that dropped it): the trial actor
    # sends it again at its next periodic look after ``TrialActor.liveness_s`` (``actors._engine.outbox``)
    lost_p: float = 0.0

    def __post_init__(self) -> None:
        for name in ("trial_fail_p", "trial_die_p", "lost_exit_p", "scheduler_error_p", "poison_p",
                     "storage_error_p", "checkpoint_error_p", "member_left_p", "straggler_p", "duplicate_p", "lost_p"):
            p = getattr(self, name)
            if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
                raise ValueError(f"Faults({name}={p!r}): a probability between 0 and 1")
        lo, hi = self.latency_s
        if not 0.0 <= lo <= hi:
            raise ValueError(f"Faults(latency_s={self.latency_s!r}): give (min, max) with 0 <= min <= max")
        for name in ("straggler_s", "duplicate_after_s"):
            delay = getattr(self, name)
            if not isinstance(delay, (int, float)) or not 0.0 <= delay < float("inf"):
                raise ValueError(f"Faults({name}={delay!r}): the extra delay, in simulated seconds >= 0")
        for method, _ in self.storage_fail_at:
            if method not in WRITE_CALLS:
                raise ValueError(f"Faults(storage_fail_at=...): {method!r} is not a store call that writes; "
                                 f"choose one of {sorted(WRITE_CALLS)}")


# the ExperimentStore calls that write to storage (the ones a storage failure can hit)
WRITE_CALLS = frozenset({"on_add", "on_first_start", "on_start", "on_results", "on_checkpoint", "on_error",
                         "on_finished", "fence", "freeze", "snapshot_table", "scheduler_saved", "close"})


class FaultyStore:
    """Wraps an ``ExperimentStore``: a chosen or drawn write call raises ``StorageError`` (before writing)."""

    def __init__(self, inner: Any, faults: Faults, rng: random.Random) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_faults", faults)
        object.__setattr__(self, "_rng", rng)
        object.__setattr__(self, "_counts", {})
        object.__setattr__(self, "failures", [])

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value  # data (``dirty``, ``trial_prefix``): read through each time
        faults: Faults = self._faults
        if name in WRITE_CALLS and (faults.storage_fail_at or faults.storage_error_p):  # else: nothing to inject
            value = self._faulty(name, value)
        object.__setattr__(self, name, value)  # a method: found directly from now on
        return value

    def _faulty(self, name: str, method: Any) -> Any:
        faults: Faults = self._faults

        def call(*args: Any, **kwargs: Any) -> Any:
            n = self._counts[name] = self._counts.get(name, 0) + 1
            if (name, n) in faults.storage_fail_at or (
                    faults.storage_error_p and self._rng.random() < faults.storage_error_p):
                self.failures.append((name, n))
                raise StorageError(f"simulated storage failure in {name} (call {n})", url="memory://simulated")
            return method(*args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)  # the core sets store.dirty


class FaultDice:
    """The world's seeded draws: one generator, drawn in the same order for a seed, so a seed replays."""

    def __init__(self, faults: Faults, seed: int) -> None:
        self.faults = faults
        self.rng = random.Random(seed)
        self._random = self.rng.random
        self._latency_s = faults.latency_s
        self._straggler = (faults.straggler_p, faults.straggler_s)

    def latency(self) -> float:
        """A message's delay: uniform in ``latency_s``, plus ``straggler_s`` for a straggler."""
        lo, hi = self._latency_s
        latency = lo + (hi - lo) * self._random()
        p, extra = self._straggler
        return latency + extra if p > 0.0 and self._random() < p else latency  # (no draw without stragglers)

    def chance(self, p: float) -> bool:
        """True with probability ``p``; no draw when ``p`` is 0 (an unused fault changes no seed)."""
        return p > 0.0 and self.rng.random() < p

    def crash(self, point: tuple[int, int]) -> Crash | None:
        """How a trial's step at ``point`` (trial number, iteration) ends: raising, dying, or not at all."""
        f = self.faults
        if point in f.fail_at or self.chance(f.trial_fail_p):
            return Crash.RAISE
        if point in f.die_at or self.chance(f.trial_die_p):
            return Crash.DIE
        return None


class FaultyEndpoint(SchedulerEndpoint):
    """The real endpoint, whose hooks may be made to raise."""

    def __init__(self, fail: Callable[[], bool]) -> None:
        super().__init__()
        self.fail = fail

    def _handle(self, msg: SchedulerCall) -> SchedulerReply | SchedulerFailed:
        if self.host is not None and self.fail():
            name = type(self.host.scheduler).__name__
            return SchedulerFailed(msg.seq, msg.kind, f"{name} raised in its {msg.kind.value} hook: "
                                   "RuntimeError('simulated scheduler failure')\n")
        return super()._handle(msg)


def faulty_commits(dice: FaultDice, commit: Commit) -> Commit:
    """``commit``, except that one fails with ``StorageError`` with probability ``checkpoint_error_p``."""

    def commit_checkpoint(ctx: StorageContext, dest: str, meta: dict[str, Any]) -> None:
        if dice.chance(dice.faults.checkpoint_error_p):
            raise StorageError(f"simulated checkpoint commit failure at {dest}", url=ctx.uri(dest))
        commit(ctx, dest, meta)

    return commit_checkpoint


__all__ = ["WRITE_CALLS", "Crash", "FaultDice", "Faults", "FaultyEndpoint", "FaultyStore", "faulty_commits"]
