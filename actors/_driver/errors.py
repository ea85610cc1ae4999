"""Errors users see.  Each message names the problem and what to do about it."""

from __future__ import annotations

import builtins
import sys
from typing import Any

from actors._engine.errors import ConfigError, TuneError


class NoBestTrialError(ConfigError, RuntimeError):
    """``get_best_result`` found no trial to pick (Ray Tune raises ``RuntimeError`` there)."""


class TrialError(TuneError):
    """A trial's trainable raised; carries the trial id and the formatted traceback."""

    def __init__(self, trial_id: str, message: str, traceback_text: str = "") -> None:
        super().__init__(f"trial {trial_id} failed: {message}")
        self.trial_id = trial_id
        self.message = message
        self.traceback_text = traceback_text


_AS_RAISED: dict[type, type] = {}  # the exception class a trial raised -> TrialError mixed with it


def trial_error(trial_id: str, message: str, traceback_text: str = "") -> TrialError:
    """The ``TrialError`` of a failed trial, also an instance of the exception class its trainable
    raised when this process knows that class (a builtin, one of an imported module, or one of the
    driver's main script), as Ray Tune's ``RayTaskError(ValueError)``: ``isinstance(result.error,
    ValueError)`` holds in both. A plain ``TrialError`` otherwise."""
    raised = _raised_class(message, traceback_text)
    if raised is None:
        return TrialError(trial_id, message, traceback_text)
    mixed = _AS_RAISED.get(raised)
    if mixed is None:
        try:
            mixed = type(f"TrialError({raised.__name__})", (TrialError, raised), {
                "__init__": _mixed_init, "__str__": BaseException.__str__, "__reduce__": _mixed_reduce})
        except TypeError:  # a layout or metaclass conflict: the plain error
            return TrialError(trial_id, message, traceback_text)
        _AS_RAISED[raised] = mixed
    return mixed(trial_id, message, traceback_text)  # type: ignore[no-any-return]


def _mixed_init(self: TrialError, trial_id: str, message: str, traceback_text: str = "") -> None:
    BaseException.__init__(self, f"trial {trial_id} failed: {message}")  # not the raised class's own __init__
    self.trial_id, self.message, self.traceback_text = trial_id, message, traceback_text


def _mixed_reduce(self: TrialError) -> tuple[Any, ...]:
    return trial_error, (self.trial_id, self.message, self.traceback_text)


def _raised_class(message: str, traceback_text: str) -> type | None:
    """The class named by ``"<Class>: ..."`` (or, for one outside builtins and the main script, by the
    traceback's last line, ``"<module>.<Class>: ..."``); only modules this process already imported."""
    name = message.split(":", 1)[0].strip()
    last = next((line for line in reversed(traceback_text.splitlines()) if line.strip()), "")
    qualified = last.split(":", 1)[0].strip()
    candidates: list[tuple[Any, str]] = [(builtins, name), (sys.modules.get("__main__"), name)]
    if qualified.endswith("." + name):
        module, _, cls_name = qualified.rpartition(".")
        candidates.insert(0, (sys.modules.get(module), cls_name))
    for module, attr in candidates:
        found = getattr(module, attr, None) if module is not None and attr.isidentifier() else None
        if isinstance(found, type) and issubclass(found, Exception) and not issubclass(found, TuneError):
            return found
    return None


__all__ = ["ConfigError", "NoBestTrialError", "TrialError", "TuneError", "trial_error"]
