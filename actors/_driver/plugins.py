"""Loading scheduler plugins given by object, import path or entry-point name."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from actors._driver.errors import ConfigError
from actors.schedulers._base import FIFOScheduler, Scheduler

ENTRY_POINT_GROUP = "audition.schedulers"


def load_scheduler(spec: Any) -> Scheduler:
    """``None`` -> FIFO; a Scheduler; a class; "pkg.mod:Class"/"pkg.mod.Class"; or an entry-point name."""
    if spec is None:
        return FIFOScheduler()
    if isinstance(spec, Scheduler):
        return spec
    if isinstance(spec, type) and issubclass(spec, Scheduler):
        return _instantiate(spec, spec.__name__)
    if isinstance(spec, str):
        return _instantiate(_resolve(spec), spec)
    raise ConfigError(
        f"scheduler must be an actors.schedulers.Scheduler, a subclass, an import path or an "
        f"'{ENTRY_POINT_GROUP}' entry-point name; got {type(spec).__name__}"
    )


def _resolve(name: str) -> Any:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                return ep.load()
            except Exception as exc:
                raise ConfigError(f"scheduler entry point {name!r} ({ep.value}) failed to load: {exc}") from exc
    module, sep, attr = name.partition(":")
    if not sep:
        module, _, attr = name.rpartition(".")
    if not module or not attr:
        raise ConfigError(
            f"scheduler {name!r} is neither an installed '{ENTRY_POINT_GROUP}' entry point nor an import "
            "path like 'my_pkg.my_module:MyScheduler'"
        )
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"scheduler {name!r} could not be imported: {exc}") from exc


def _instantiate(obj: Any, name: str) -> Scheduler:
    if isinstance(obj, Scheduler):
        return obj
    if not callable(obj):
        raise ConfigError(f"scheduler {name!r} does not name a Scheduler subclass or factory")
    try:
        made = obj()
    except Exception as exc:
        raise ConfigError(
            f"scheduler {name!r} could not be created without arguments ({type(exc).__name__}: {exc}); "
            "give its parameters defaults, or pass an instance: TuneConfig(scheduler=MyScheduler(...))"
        ) from exc
    if isinstance(made, Scheduler):
        return made
    raise ConfigError(f"scheduler {name!r} does not name a Scheduler subclass or factory")


__all__ = ["ENTRY_POINT_GROUP", "load_scheduler"]
