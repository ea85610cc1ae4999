"""``register_trainable(name, trainable)``: Ray Tune's registry of trainables by name.

A name is resolved to its function or class in the driver, by ``Tuner(name).fit()``, ``tune.run(name)``
or ``Tuner.restore(path, name)`` is called, so the object itself is pickled into the experiment and
reaches trial processes on any machine as an unregistered trainable would (Ray keeps its registry in
the cluster's key-value store instead). The registered name is the trainable's name: trials are
named ``<name>_<trial id>``, as in Ray.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any

from actors._driver.checks import check_trainable
from actors._driver.errors import ConfigError, TuneError

log = logging.getLogger("audition")
_TRAINABLES: dict[str, Any] = {}  # name -> function or Trainable class, in this (the driver's) process


def register_trainable(name: str, trainable: Any, warn: bool = True) -> None:
    """Register a function or ``Trainable`` class under ``name`` (a second registration replaces the
    first, as in Ray). ``warn`` is Ray's, kept for its signature: audition has no heuristics to warn of."""
    from actors._driver.trainable import Trainable

    if not isinstance(name, str) or not name:
        raise TypeError(f"register_trainable: the name must be a non-empty string, got {name!r}")
    if inspect.isclass(trainable):
        if not issubclass(trainable, Trainable):
            raise TypeError(f"register_trainable({name!r}, {trainable.__name__}): a class must subclass "
                            "actors.Trainable (Ray: 'Second argument must be convertable to Trainable')")
    elif not callable(trainable) or isinstance(trainable, str):
        raise TypeError(f"register_trainable({name!r}, ...) takes a function of the config dict or a Trainable "
                        f"subclass, got {type(trainable).__name__}")
    if not isinstance(trainable, (type, functools.partial)) and not inspect.isfunction(trainable):
        log.info("register_trainable(%r): a callable %s, used as a function trainable", name,
                 type(trainable).__name__)
    _TRAINABLES[name] = trainable


def is_registered(name: str) -> bool:
    return name in _TRAINABLES


def resolve_trainable(trainable: Any) -> tuple[Any, str, bool]:
    """(the trainable, its name, whether it was given by a registered name), checked as ``Tuner`` checks
    it. An unknown name raises ``TuneError`` (as Ray's ``fit()`` does: 'Unknown trainable: <name>')."""
    if not isinstance(trainable, str):
        return trainable, check_trainable(trainable), False
    if trainable not in _TRAINABLES:
        known = f" (registered: {sorted(_TRAINABLES)})" if _TRAINABLES else ""
        raise TuneError(f"Unknown trainable: {trainable}{known}. Register it first in this process with "
                        f"tune.register_trainable({trainable!r}, train_fn) before Tuner({trainable!r}).fit() or "
                        "tune.run, or pass the function or Trainable class itself")
    found = _TRAINABLES[trainable]
    check_trainable(found)
    return found, trainable, True


def resolve_on_restore(trainable: Any, spec: Any) -> tuple[Any, str]:
    """The trainable ``Tuner.restore`` continues with. As Ray 2.60 checks it (its
    ``Experiment.get_trainable_name``), its name must be the one the experiment was started with,
    whatever each is: a function's or class's ``__name__`` (a ``with_parameters``/``with_resources``
    wrapper has its function's), any lambda's, or a registered name (which needs registering again)."""
    obj, name, _ = resolve_trainable(trainable)
    saved_name, saved_registered = spec.trainable_name, getattr(spec, "trainable_registered", False)  # (older specs)
    if saved_name == "<lambda>":  # saved before lambdas were named 'lambda', as in Ray
        saved_name = "lambda"
    if name != saved_name:
        hint = (f"pass the name it was started with, Tuner.restore(path, {saved_name!r}), after "
                f"tune.register_trainable({saved_name!r}, ...)") if saved_registered else (
                f"pass the trainable it was started with ({saved_name}; the same function or class, "
                "or a with_parameters/with_resources wrapper of it)")
        raise ConfigError(f"Invalid `trainable` input to `Tuner.restore()`: the experiment was started with "
                          f"{saved_name!r}, got {name!r}; {hint}")
    return obj, name


__all__ = ["register_trainable", "resolve_on_restore", "resolve_trainable"]
