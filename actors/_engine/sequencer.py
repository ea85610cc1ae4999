"""Restores send order on the receiving side.

Measured here: Thespian's TCP transport does not keep the order of messages
sent by one actor to another (a result batch arrived after the trial's
``TrialEnded``).  Every ordered stream in audition therefore numbers its
messages from 1 and the receiver releases them strictly in that order.
"""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Sequencer(Generic[T]):
    """Buffers early arrivals; ``push`` returns the items now deliverable, in order."""

    def __init__(self, first: int = 1) -> None:
        self.next = first
        self.early: dict[int, T] = {}

    def push(self, seq: int, item: T) -> list[T]:
        if seq < self.next or seq in self.early:
            return []  # duplicate or stale: already delivered
        self.early[seq] = item
        out: list[T] = []
        while self.next in self.early:
            out.append(self.early.pop(self.next))
            self.next += 1
        return out

    def __len__(self) -> int:
        return len(self.early)


__all__ = ["Sequencer"]
