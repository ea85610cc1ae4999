"""Trials' names: ``TuneConfig(trial_name_creator=, trial_dirname_creator=)`` and Ray's default directory.

Each creator is called once per trial, in the controller when the trial is created, with the
trial as Ray Tune passes it (``trial_id``, ``config``, ``trainable_name``, ``status``...).
A name is for display (``str(trial)``): any non-empty string, shared names allowed, as in Ray.
A directory name must be one plain path component and unique in the experiment: Ray refuses
only a ``/`` and lets two trials given the same directory overwrite each other's results and
checkpoints; here the experiment stops with an error naming both trials instead.

Without a directory creator, a trial's directory is named at its first start, as Ray 2.60's
``Trial._generate_dirname`` names it then: ``f"{str(trial)}_{experiment_tag}"`` cut to
``TUNE_MAX_LEN_IDENTIFIER`` (130) characters, ``_<local date and time>`` appended, the characters
Ray strips replaced by ``_`` (``train_36f01_00000_0_x=1_2026-12-04_21-34-30``). The name is kept
for good: a PBT exploit's new tag does not rename it, and a restore reuses it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from actors._engine.lifecycle import TrialRecord
from actors._engine.store import TRIAL_DIRS_NAMED
from actors._engine.trial import trial_name

DEFAULT_MAX_LEN_IDENTIFIER = 130  # Ray's TUNE_MAX_LEN_IDENTIFIER default
_STRIPPED = re.compile(r'[/()<>:"\\|?*]')  # Ray's: rsync's and Windows' reserved characters
# Ray's default directory name ends in its date, perhaps with 4 hex digits after it (first_start)
_RAY_DEFAULT_END = re.compile(r"_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_[0-9a-f]{4})?$")


def ray_dirname(name: str, tag: str, wall: float, utc_offset_s: int = 0,
                max_len: int = DEFAULT_MAX_LEN_IDENTIFIER) -> str:
    """Ray's default trial directory name for a trial named ``name`` (``str(trial)``) with
    ``experiment_tag`` ``tag``, first started at ``wall`` (epoch seconds), shown in local time
    (``utc_offset_s`` ahead of UTC) as Ray's ``date_str`` shows ``datetime.today()``."""
    return _STRIPPED.sub("_", f"{f'{name}_{tag}'[:max_len]}_{stamp(int(wall // 1) + utc_offset_s)}")


def stamp(seconds: int) -> str:
    """``%Y-%m-%d_%H-%M-%S`` of ``seconds`` after 1970-01-01 00:00:00, by arithmetic (the core reads
    no clock and imports no time module): Hinnant's ``civil_from_days``."""
    days, rem = divmod(seconds, 86400)
    hh, rem = divmod(rem, 3600)
    mm, ss = divmod(rem, 60)
    era, doe = divmod(days + 719468, 146097)
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d, m = doy - (153 * mp + 2) // 5 + 1, mp + 3 if mp < 10 else mp - 9
    y = yoe + era * 400 + (m <= 2)
    return f"{y:04d}-{m:02d}-{d:02d}_{hh:02d}-{mm:02d}-{ss:02d}"


class TrialNamer:
    def __init__(self, name_creator: Callable[[Any], Any] | None, dirname_creator: Callable[[Any], Any] | None,
                 trainable_name: str, existing: Iterable[TrialRecord] = (),
                 max_len: int = DEFAULT_MAX_LEN_IDENTIFIER) -> None:
        self.name_creator = name_creator
        self.dirname_creator = dirname_creator
        self.trainable_name = trainable_name
        self.max_len = max_len
        self.owner: dict[str, str] = {}  # directory name -> trial id
        for rec in existing:  # a restored table keeps its names
            if rec.dirname:
                self.owner[rec.dirname] = rec.trial_id

    def apply(self, rec: TrialRecord) -> str | None:
        """Name ``rec`` (sets ``name``/``dirname``); the reason the experiment must stop, or None."""
        from dataclasses import replace

        from storage._layout import check_dirname

        trial = replace(rec.snapshot(), trainable_name=self.trainable_name)
        if self.name_creator is not None:
            name = _call(self.name_creator, trial, "trial_name_creator")
            if isinstance(name, _Failed):
                return name.why
            if not isinstance(name, str) or not name.strip():
                return (f"TuneConfig(trial_name_creator=...) returned {name!r} for trial {rec.trial_id}; "
                        "return a non-empty string, e.g. f'{trial.trainable_name}_{trial.trial_id}'")
            rec.name = name
            trial = replace(trial, custom_trial_name=name)
        if self.dirname_creator is None:
            return None  # named at its first start (first_start)
        made = _call(self.dirname_creator, trial, "trial_dirname_creator")
        if isinstance(made, _Failed):
            return made.why
        try:
            dirname = check_dirname(made, "the trial directory name")
        except ValueError as exc:
            return (f"TuneConfig(trial_dirname_creator=...) returned {made!r} for trial {rec.trial_id}: {exc}. "
                    "Return one plain name (no '/'), unique to the trial, e.g. f'trial_{trial.trial_id}'")
        other = self.owner.get(dirname)
        if other is not None and other != rec.trial_id:
            return (f"TuneConfig(trial_dirname_creator=...) gave trial {rec.trial_id} the directory {dirname!r}, "
                    f"which is already trial {other}'s: two trials would overwrite each other's results and "
                    "checkpoints (Ray Tune lets them). Put something unique in it, such as trial.trial_id")
        self.owner[dirname] = rec.trial_id
        rec.dirname, rec.dirname_custom = dirname, True
        return None

    def first_start(self, rec: TrialRecord, wall: float, utc_offset_s: int = 0) -> str | None:
        """Name the directory of a trial starting for the first time at ``wall`` (epoch seconds; local
        time ``utc_offset_s`` ahead of UTC) unless it has a name; the reason the experiment must stop, or None."""
        from storage._layout import check_dirname

        if rec.dirname:
            return None
        name = ray_dirname(trial_name(rec.trial_id, self.trainable_name, rec.config, rec.name), rec.tag, wall,
                           utc_offset_s, self.max_len)
        if self.owner.get(name, rec.trial_id) != rec.trial_id:  # a name cut short to another's: Ray adds
            name += "_" + hashlib.sha1(rec.trial_id.encode()).hexdigest()[:4]  # 4 hex digits (uuid4's there)
        try:
            check_dirname(name, "the trial directory name")
        except ValueError as exc:
            return (f"trial {rec.trial_id}'s directory would be named {name!r} (its name, its experiment_tag and "
                    f"the date, as Ray Tune names it): {exc}. Give TuneConfig(trial_dirname_creator=...) or a "
                    "trial_name_creator whose names do not start with '.'")
        self.owner[name] = rec.trial_id
        rec.dirname = name
        return None


def saved_dirname_custom(state: dict[str, Any], row: dict[str, Any]) -> bool:
    """Whether ``TuneConfig(trial_dirname_creator=...)`` named the directory of the trial saved as ``row``
    in the experiment state ``state`` (callbacks' ``trial.custom_dirname`` shows it; Ray's is None for a
    default name). Rows say so (``dirname_custom``); in a state from before trials were named as Ray
    names them, every saved name was the creator's; in one written between the two no row says, and a
    name ending in Ray's date is taken for a default one."""
    name = row.get("dirname")
    if not isinstance(name, str) or not name:
        return False
    if "dirname_custom" in row:
        return bool(row["dirname_custom"])
    return state.get("trial_dirs") != TRIAL_DIRS_NAMED or not _RAY_DEFAULT_END.search(name)


class _Failed:
    def __init__(self, why: str) -> None:
        self.why = why


def _call(creator: Callable[[Any], Any], trial: Any, what: str) -> Any:
    try:
        return creator(trial)
    except Exception as exc:  # the user's function: the experiment stops with its error, not ours
        return _Failed(f"TuneConfig({what}=...) raised {type(exc).__name__}: {exc} (for trial {trial.trial_id}, "
                       f"config {trial.config!r:.200})")


__all__ = ["TrialNamer", "saved_dirname_custom"]
