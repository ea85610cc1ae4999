"""``TuneConfig(trial_name_creator=, trial_dirname_creator=)``: the user's names for trials.

Each creator is called once per trial, in the controller when the trial is created, with the
trial as Ray Tune passes it (``trial_id``, ``config``, ``trainable_name``, ``status``...).
A name is for display (``str(trial)``): any non-empty string, shared names allowed, as in Ray.
A directory name must be one plain path component and unique in the experiment: Ray refuses
only a ``/`` and lets two trials given the same directory overwrite each other's results and
checkpoints; here the experiment stops with an error naming both trials instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from actors._engine.lifecycle import TrialRecord


class TrialNamer:
    def __init__(self, name_creator: Callable[[Any], Any] | None, dirname_creator: Callable[[Any], Any] | None,
                 trainable_name: str, existing: Iterable[TrialRecord] = ()) -> None:
        self.name_creator = name_creator
        self.dirname_creator = dirname_creator
        self.trainable_name = trainable_name
        self.owner: dict[str, str] = {}  # directory name -> trial id
        for rec in existing:  # a restored table keeps its names
            self.owner[rec.dirname or rec.trial_id] = rec.trial_id

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
        dirname = rec.trial_id
        if self.dirname_creator is not None:
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
        if dirname != rec.trial_id:
            rec.dirname = dirname
        return None


class _Failed:
    def __init__(self, why: str) -> None:
        self.why = why


def _call(creator: Callable[[Any], Any], trial: Any, what: str) -> Any:
    try:
        return creator(trial)
    except Exception as exc:  # the user's function: the experiment stops with its error, not ours
        return _Failed(f"TuneConfig({what}=...) raised {type(exc).__name__}: {exc} (for trial {trial.trial_id}, "
                       f"config {trial.config!r:.200})")


__all__ = ["TrialNamer"]
