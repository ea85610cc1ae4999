"""A trial run's numbered stream, seen from the trial: what the controller has not acknowledged, and
what to send again.

The controller releases a run's ``TrialResults``, ``TrialSaved`` and ``TrialEnded`` strictly by
their number (``actors._engine.sequencer``), so one that never arrived would hold every later one,
the run's end included, for ever. The trial actor keeps each until a ``TrialProceed`` acknowledges
it (a proceed for batch ``n`` acknowledges everything numbered up to ``n``: they were released in
order) and, at each of its periodic looks, sends again those waiting for ``every_s``, at most
``resends`` times each. Pure (no clock, no actor): ``TrialActor`` and the simulator's trial
(``actors.testing.sim_trial``) run this same object, so the simulator's lost-message faults test it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

M = TypeVar("M")


@dataclass
class _Waiting(Generic[M]):
    """A message sent and not acknowledged yet: when it was last sent, and how often again."""

    msg: M
    at: float
    again: int = 0


class Outbox(Generic[M]):
    """The numbered messages of one run until acknowledged (a new run starts a new ``Outbox``)."""

    def __init__(self, every_s: float, resends: int) -> None:
        if every_s <= 0 or resends < 0:
            raise ValueError(f"Outbox(every_s={every_s!r}, resends={resends!r}): every_s > 0, resends >= 0")
        self.every_s = every_s
        self.resends = resends
        self._waiting: dict[int, _Waiting[M]] = {}  # by number, in the order sent (numbers only grow)

    def sent(self, seq: int, msg: M, now: float) -> None:
        """``msg``, numbered ``seq``, was sent at ``now``."""
        self._waiting[seq] = _Waiting(msg, now)

    def acknowledged(self, seq: int) -> None:
        """A proceed for batch ``seq`` arrived: it and everything numbered before it were released."""
        for n in [n for n in self._waiting if n <= seq]:
            del self._waiting[n]

    def due(self, now: float) -> list[M]:
        """The messages to send again at ``now``, in number order (each counted as sent again now)."""
        out: list[M] = []
        for seq in sorted(self._waiting):
            w = self._waiting[seq]
            if w.again < self.resends and now - w.at >= self.every_s:
                w.at, w.again = now, w.again + 1
                out.append(w.msg)
        return out

    @property
    def may_resend(self) -> bool:
        """Whether some message may still be sent again (the actor's look stays armed while so)."""
        return any(w.again < self.resends for w in self._waiting.values())

    def numbers(self) -> list[int]:
        """The numbers waiting, in order (what ``kill -USR2`` shows)."""
        return sorted(self._waiting)

    def __len__(self) -> int:
        return len(self._waiting)


__all__ = ["Outbox"]
