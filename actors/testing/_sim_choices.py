"""The core's questions to the scheduler which trial to start, as the simulator sees them go by: a question
asked again with nothing new since the last one (no event that may change the answer, no trial started) is
what keeps the controller and the scheduler actor busy in a real run (``invariants.violations`` reports it)."""

from __future__ import annotations

from typing import Any

from actors._engine.signals import Wake
from actors.messages import HookKind, RunTrial, SchedulerCall, SchedulerReply

_SAME_CHOICE = frozenset({HookKind.CHOOSE, HookKind.SAVE})  # answers after which a declined choice stands


class ChoiceWatch:
    """Counts the CHOOSE calls the core sends and those it repeats with nothing new in between."""

    __slots__ = ("_last", "_news", "_starts", "chooses", "repeated")

    def __init__(self) -> None:
        self.chooses = 0
        self.repeated = 0
        self._news = 0  # events the core took that may change a scheduler's answer
        self._starts = 0  # RunTrial messages sent
        self._last = (-1, -1)  # (news, starts) when the last CHOOSE was sent

    def event(self, event: Any) -> None:
        """An event the core takes: all but ticks and plain CHOOSE and SAVE answers may change the answer."""
        kind = type(event)
        if kind is not Wake and (kind is not SchedulerReply or event.kind not in _SAME_CHOICE or event.actions):
            self._news += 1

    def sent(self, msg: Any) -> None:
        """A message the core sends to an actor."""
        kind = type(msg)
        if kind is SchedulerCall and msg.kind is HookKind.CHOOSE:
            self.chooses += 1
            if self._last == (self._news, self._starts):
                self.repeated += 1
            self._last = (self._news, self._starts)
        elif kind is RunTrial:
            self._starts += 1


__all__ = ["ChoiceWatch"]
