"""Plugin code (search algorithms, schedulers, stoppers) on a thread of the actor process's own.

GNU OpenMP keeps its thread pool per thread, and a fork copies the pool's bookkeeping but not its threads:
in a process forked from one whose main thread ran a parallel op, a parallel op on the main thread waits
forever for the missing threads (measured with torch 2.13: a 500x500 product in the driver, then a search
algorithm's product in the controller: the run hung). The admin, the controller and the scheduler actor
are all forked from the driver's main thread, and Thespian calls their handlers on their main threads; Ray
calls its search algorithm and scheduler in the driver itself, unforked. A thread started in the forked
process builds a pool of its own, so the controller's core and the scheduler's hooks run on one while the
main thread waits: still one call at a time, in message order. Only where GNU OpenMP is loaded (PyTorch,
scikit-learn, XGBoost, LightGBM bring it); elsewhere a call is a plain call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from actors._process.hygiene import in_driver_process
from actors._worker.threads import mapped

T = TypeVar("T")


def openmp_loaded() -> bool:
    """Whether GNU OpenMP's runtime is mapped into this process (Linux; False where /proc cannot tell)."""
    return mapped(("libgomp",))


class PluginThread:
    """Runs each call on one thread of its own, started at the first call; the caller waits for it."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], list[Any], threading.Event]] = \
            queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="audition-plugins", daemon=True)
            self._thread.start()
        box: list[Any] = []
        done = threading.Event()
        self._jobs.put((fn, args, box, done))
        done.wait()
        ok, value = box[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def _serve(self) -> None:
        while True:
            fn, args, box, done = self._jobs.get()
            try:
                box.append((True, fn(*args)))
            except BaseException as exc:  # handed to the caller, which raises it where the call was made
                box.append((False, exc))
            done.set()
            del fn, args, box, done  # (nothing of a call outlives it here)


def plugin_caller() -> Callable[..., Any]:
    """How this actor process calls plugin code: on a thread of its own in a forked process where GNU OpenMP
    is loaded, else directly (the in-process system runs actors in the driver itself: no fork there)."""
    if in_driver_process() or not openmp_loaded():
        return _direct
    return PluginThread().call


def _direct(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


__all__ = ["PluginThread", "openmp_loaded", "plugin_caller"]
