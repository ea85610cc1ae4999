"""What a restore does to each saved trial, by its status: Ray Tune's ``ResumeConfig``.

``Tuner.restore``'s three flags, ``run(resume="AUTO+...")``'s suffixes and a ``ResumeConfig`` all come
down to one ``ResumeChoices`` (a resume type per status), which ``actors._driver.restore`` applies to
the saved table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from actors._driver.errors import ConfigError


class ResumeType(Enum):
    """What happens to a saved trial of one status (Ray's ``ResumeConfig.ResumeType``)."""

    RESUME = "resume"  # continue from its latest checkpoint (from scratch without one), same trial id
    RESTART = "restart"  # a new trial (new id, new directory) with the same config and tag, from scratch
    SKIP = "skip"  # left as it ended: an unfinished trial ends TERMINATED, an errored one stays ERROR


_Type = ResumeType  # (inside ResumeConfig, the name is its class attribute)


@dataclass
class ResumeConfig:
    """Ray Tune's ``ResumeConfig`` ([Experimental] there too): ``Tuner.restore(path, trainable,
    _resume_config=...)`` or ``run(..., resume_config=...)``. ``unfinished`` covers the trials that were
    running, pending or paused. Ray's default is Ray's: finished trials kept, unfinished ones resumed,
    errored ones kept. Unlike Ray, the values may also be the types' strings (``"restart"``), and a
    wrong one is refused when the tuner is built, not when ``fit()`` requeues the trials."""

    ResumeType = ResumeType

    finished: _Type | str = _Type.SKIP
    unfinished: _Type | str = _Type.RESUME
    errored: _Type | str = _Type.SKIP


@dataclass(frozen=True)
class ResumeChoices:
    """A ``ResumeConfig`` checked: what the restore does to finished, unfinished and errored trials."""

    finished: ResumeType = ResumeType.SKIP
    unfinished: ResumeType = ResumeType.RESUME
    errored: ResumeType = ResumeType.SKIP


def choices_of(config: Any, where: str) -> ResumeChoices:
    """``config`` (a ``ResumeConfig``, or anything with its three attributes) checked."""
    if not all(hasattr(config, k) for k in ("finished", "unfinished", "errored")):
        raise ConfigError(f"{where} must be a ResumeConfig, got {type(config).__name__}; use "
                          "actors.ResumeConfig(finished=..., unfinished=..., errored=...)")
    picked = {k: _type(getattr(config, k), f"{where}.{k}") for k in ("finished", "unfinished", "errored")}
    if picked["unfinished"] is ResumeType.RESTART:
        raise ConfigError(f"{where}.unfinished=RESTART is not supported: audition restores the scheduler's "
                          "state, in which the unfinished trial is still live; use RESUME (continue it from "
                          "its checkpoint) or SKIP (end it TERMINATED)")
    return ResumeChoices(**picked)


def flags_choices(resume_unfinished: bool, resume_errored: bool, restart_errored: bool) -> ResumeChoices:
    """``Tuner.restore``'s flags, as Ray 2.60 maps them: ``resume_errored`` wins over ``restart_errored``."""
    errored = ResumeType.SKIP
    if resume_errored:
        errored = ResumeType.RESUME
    elif restart_errored:
        errored = ResumeType.RESTART
    return ResumeChoices(unfinished=ResumeType.RESUME if resume_unfinished else ResumeType.SKIP, errored=errored)


def _type(value: Any, where: str) -> ResumeType:
    if isinstance(value, ResumeType):
        return value
    if isinstance(value, Enum):  # Ray's own enum (a script that mixed imports): by its value
        value = value.value
    try:
        return ResumeType(value.lower() if isinstance(value, str) else value)
    except ValueError:
        raise ConfigError(f"{where}={value!r} is not a resume type; use ResumeConfig.ResumeType.RESUME, "
                          "RESTART or SKIP") from None


__all__ = ["ResumeChoices", "ResumeConfig", "ResumeType", "choices_of", "flags_choices"]
