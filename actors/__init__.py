"""audition: hyperparameter tuning on Thespian actors, with Ray Tune's API.

Public names are imported lazily so that ``import actors.search`` (used inside
trial and scheduler actors) does not pull in the whole engine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Tuner": "actors._tuner",
    "TuneConfig": "actors._config",
    "RunConfig": "actors._config",
    "FailureConfig": "actors._config",
    "CheckpointConfig": "actors._config",
    "Checkpoint": "actors._checkpoint",
    "Trainable": "actors._trainable",
    "report": "actors._session",
    "get_checkpoint": "actors._session",
    "get_trial_id": "actors._session",
    "ResultGrid": "actors._result",
    "Result": "actors._result",
    "TrialStatus": "actors._trial",
    "TrialSnapshot": "actors._trial",
    "Decision": "actors._reducer",
    "TuneError": "actors._errors",
    "with_resources": "actors._config",
    "with_parameters": "actors._parameters",
    "Callback": "actors._callbacks",
    "LoggerCallback": "actors._loggers",
    "JsonLoggerCallback": "actors._loggers",
    "CSVLoggerCallback": "actors._loggers",
    "TBXLoggerCallback": "actors._loggers",
    # the rest of ``from ray import tune``, so ``import actors as tune`` ports a script unchanged
    "Stopper": "actors.stoppers",
    **{name: "actors.search" for name in (
        "choice", "grid_search", "lograndint", "loguniform", "qlograndint", "qloguniform", "qrandint",
        "qrandn", "quniform", "randint", "randn", "sample_from", "uniform")},
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
