"""Errors users see.  Each message names the problem and what to do about it."""

from __future__ import annotations


class TuneError(Exception):
    """The experiment could not run or finish as asked (bad input, a crashed plugin, a stall)."""


class ConfigError(TuneError, ValueError):
    """A configuration value is invalid; raised before any actor starts."""


class NoBestTrialError(ConfigError, RuntimeError):
    """``get_best_result`` found no trial to pick (Ray Tune raises ``RuntimeError`` there)."""


class TrialError(TuneError):
    """A trial's trainable raised; carries the trial id and the formatted traceback."""

    def __init__(self, trial_id: str, message: str, traceback_text: str = "") -> None:
        super().__init__(f"trial {trial_id} failed: {message}")
        self.trial_id = trial_id
        self.traceback_text = traceback_text


__all__ = ["ConfigError", "NoBestTrialError", "TrialError", "TuneError"]
