"""How a trial's worker thread wakes its actor, asleep in its transport's ``select``.

The actor watches a pipe and hands its write end to the worker (``fd``); a byte written there makes
it look at the events queue. It asks for a wake-up for every event (``wake_any``) only while it
holds no results; otherwise only urgent events (a checkpoint, a save, the end, the worker blocking
on its window) wake it, and the batch timer does the rest.
"""

from __future__ import annotations

import os


class Wakeup:
    """The worker's side of the actor's watched pipe."""

    def __init__(self) -> None:
        self.fd: int | None = None  # set by the actor when it sleeps between events
        self.wake_any = True  # the actor wants a wake-up for any event, not only urgent ones

    def event(self, urgent: bool) -> None:
        """Wake the actor (a byte on its watched pipe) if it asked to hear of this event."""
        fd = self.fd
        if fd is None or not (urgent or self.wake_any):
            return
        self.wake_any = False
        try:
            os.write(fd, b"\0")
        except OSError:  # full (wake-ups are pending anyway) or closed (the actor is exiting)
            pass

    def output(self) -> None:
        """The trial printed: the actor sends it within its output tick (any thread may call this)."""
        fd = self.fd
        if fd is not None:
            try:
                os.write(fd, b"\0")
            except OSError:
                pass


__all__ = ["Wakeup"]
