"""``Callback.get_state`` / ``set_state``: callback state saved with the experiment, as Ray Tune does.

The callbacks live in the driver, so the driver saves their state itself, in its own file of the
experiment directory (the controller writes the rest of the experiment state). As in Ray Tune 2.60
(recorded): states are keyed by the callback's position in ``RunConfig(callbacks=...)``; they are
taken once before the first trial starts, then at most every ``SAVE_PERIOD_S`` while the run goes
on, and once at its end, before ``on_experiment_end``; nothing is written while no callback returns
a truthy state; on ``Tuner.restore(...).fit()`` each callback at a position whose saved state is
truthy gets ``set_state(state)`` (whatever its class), before ``setup``.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

log = logging.getLogger("audition")
STATE_NAME = "callback_states.pkl"
SAVE_PERIOD_S = 10.0  # Ray Tune's initial experiment checkpoint period


def _driver_side(callbacks: list[Any]) -> list[tuple[int, Any]]:
    """(position, callback) of those that run in the driver: an ``in_controller`` logger's driver
    copy never sees an event, so its state would be its initial one."""
    from actors._driver.loggers import LoggerCallback

    return [(i, cb) for i, cb in enumerate(callbacks or [])
            if not (isinstance(cb, LoggerCallback) and cb.in_controller)]


class CallbackStates:
    """Takes and writes the callbacks' states; ``maybe_save`` is cheap between periods."""

    def __init__(self, callbacks: list[Any], ctx: Any, experiment_dir: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.callbacks = _driver_side(callbacks)
        self.ctx, self.path, self.clock = ctx, posixpath.join(experiment_dir, STATE_NAME), clock
        self.last = float("-inf")

    def maybe_save(self, force: bool = False) -> None:
        if not self.callbacks or (not force and self.clock() - self.last < SAVE_PERIOD_S):
            return
        self.last = self.clock()
        states: dict[int, Any] = {}
        for i, cb in self.callbacks:
            try:
                states[i] = cb.get_state()
                cloudpickle.dumps(states[i])
            except Exception:  # as any other hook: logged, the experiment goes on
                log.exception("callback %s failed in get_state (or its state cannot be pickled); its state "
                              "is not saved", type(cb).__name__)
                states[i] = None
        if not any(states.values()):
            return  # Ray Tune writes no file when no callback has state
        from storage import StorageError, write_bytes

        try:
            write_bytes(self.ctx, self.path, cloudpickle.dumps(states), what="saving callback state")
        except StorageError as exc:
            log.warning("could not save the callbacks' state to %s (%s); a restore gives them their "
                        "previous one", self.ctx.uri(self.path), exc)


def restore_states(callbacks: list[Any], ctx: Any, experiment_dir: str) -> None:
    """``set_state`` of each callback whose position has a truthy saved state; an experiment saved
    without callback state (or by an older audition) restores them untouched."""
    from actors._legacy import loads
    from storage import read_bytes

    path = posixpath.join(experiment_dir, STATE_NAME)
    try:
        states = loads(read_bytes(ctx, path, what="reading callback state"))
    except FileNotFoundError:
        return
    except Exception as exc:
        log.warning("the callbacks' saved state at %s cannot be read (%s); they start afresh",
                    ctx.uri(path), exc)
        return
    for i, cb in _driver_side(callbacks):
        state = states.get(i) if isinstance(states, dict) else None
        if state:
            try:
                cb.set_state(state)
            except Exception:
                log.exception("callback %s failed in set_state", type(cb).__name__)


__all__ = ["SAVE_PERIOD_S", "STATE_NAME", "CallbackStates", "restore_states"]
