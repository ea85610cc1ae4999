"""Trial output echoed on the driver's console, as Ray prints ``(train pid=123) ...`` lines.

Two halves, both pure (no actor runtime):

- :class:`ConsoleTee`, in the trial's process: ``OutputCapture`` feeds it everything the trial
  writes (Python, threads, fd-level writes); it cuts the text into lines and bounds the volume, so
  a trial printing megabytes per second cannot flood the controller: at most ``LINES_PER_S`` lines
  a second (bursts of ``BURST_LINES``) and ``MAX_LINE_CHARS`` per line go out; the rest is counted
  and replaced by one ``[N lines dropped ...]`` line. The trial's ``stdout.txt``/``stderr.txt``
  still get every byte.
- :class:`ConsolePrinter`, in the driver: puts each run's ``TrialOutput`` chunks back in order
  (the transport does not keep it) and writes the lines with their trial's prefix.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from actors._engine.sequencer import Sequencer
from actors.messages import TrialOutput

LINES_PER_S = 100.0  # sustained lines per second a trial may echo
BURST_LINES = 1000  # lines it may echo at once after a quiet spell
MAX_LINE_CHARS = 2000  # a longer line (or a partial line that long) is cut
DROPPED = "[{n} lines dropped: over {rate:g} lines/s; the trial's stdout.txt/stderr.txt have them all]"


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]} [... {len(line) - MAX_LINE_CHARS} characters cut]"


class ConsoleTee:
    """Lines a trial printed, waiting to be sent; thread-safe (the fd pump and user threads feed it).

    ``notify`` runs (outside the lock) when the first line arrives after a :meth:`take`: the trial
    actor wakes up for it, so a quiet trial costs nothing and a printing one sends within its tick.
    """

    def __init__(self, notify: Callable[[], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 rate: float = LINES_PER_S, burst: int = BURST_LINES) -> None:
        self.notify = notify
        self.clock = clock
        self.rate, self.burst = rate, burst
        self._lock = threading.Lock()
        self._partial: dict[int, str] = {1: "", 2: ""}
        self._lines: list[tuple[int, str]] = []
        self._dropped = 0
        self._tokens = float(burst)
        self._refilled = clock()
        self._notified = False

    def feed(self, fd: int, text: str) -> None:
        """Take ``text`` written to ``fd`` (1 or 2); complete lines are kept or counted as dropped."""
        with self._lock:
            parts = (self._partial[fd] + text).split("\n")
            rest = parts.pop()
            if len(rest) > MAX_LINE_CHARS:  # no newline in sight: send what there is as a line
                parts.append(rest)
                rest = ""
            self._partial[fd] = rest
            if not parts:
                return
            now = self.clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            keep = min(len(parts), int(self._tokens))
            self._tokens -= keep
            self._dropped += len(parts) - keep
            self._lines.extend((fd, _cut(p)) for p in parts[:keep])
            wake = not self._notified
            self._notified = True
        if wake and self.notify is not None:
            self.notify()

    def pending(self) -> bool:
        return self._notified

    def take(self, final: bool = False) -> list[tuple[int, str]]:
        """The lines to send now (and, if ``final``, what is left of unfinished lines)."""
        with self._lock:
            out, self._lines = self._lines, []
            if self._dropped:
                out.append((2, DROPPED.format(n=self._dropped, rate=self.rate)))
                self._dropped = 0
            if final:
                for fd in (1, 2):
                    if self._partial[fd]:
                        out.append((fd, _cut(self._partial[fd])))
                        self._partial[fd] = ""
            self._notified = False
        return out


def prefix(chunk: TrialOutput) -> str:
    """Ray's shape, ``(train pid=123)``, naming the trial as Ray's str(trial) does; ``ip=`` for a trial elsewhere."""
    where = f", ip={chunk.member}" if chunk.member else ""
    return f"({chunk.name or chunk.trial_id} pid={chunk.pid}{where})"


class ConsolePrinter:
    """Driver side: releases each run's chunks in send order and hands out prefixed lines."""

    def __init__(self, write: Callable[[int, str], None]) -> None:
        self.write = write
        self.batches = 0  # TrialOutputBatch messages received (ExperimentFinished says how many were sent)
        self._order: dict[tuple[str, int], Sequencer[TrialOutput]] = {}

    def push(self, chunks: Iterable[TrialOutput]) -> None:
        self.batches += 1
        for chunk in chunks:
            seq = self._order.setdefault((chunk.trial_id, chunk.run_id), Sequencer())
            for ready in seq.push(chunk.seq, chunk):
                self._print(ready)

    def _print(self, chunk: TrialOutput) -> None:
        head = prefix(chunk)
        for fd, line in chunk.lines:
            self.write(fd, f"{head} {line}")

    def close(self) -> None:
        """Print what still waits for an earlier chunk that never came (its process died sending)."""
        for seq in self._order.values():
            for n in sorted(seq.early):
                self._print(seq.early[n])
        self._order = {}


__all__ = ["ConsolePrinter", "ConsoleTee", "prefix"]
