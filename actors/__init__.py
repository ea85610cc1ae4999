"""audition: hyperparameter tuning on Thespian actors, with Ray Tune's API.

Public names are imported lazily so that ``import actors.search`` (used inside
trial and scheduler actors) does not pull in the whole engine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Tuner": "actors._driver.tuner",
    "TuneConfig": "actors._driver.config",
    "RunConfig": "actors._driver.config",
    "FailureConfig": "actors._driver.config",
    "CheckpointConfig": "actors._driver.config",
    "SyncConfig": "actors._driver.config",
    "ResumeConfig": "actors._driver.resume",
    "Checkpoint": "actors._driver.checkpoint",
    "Trainable": "actors._driver.trainable",
    "report": "actors._worker.session",
    "get_checkpoint": "actors._worker.session",
    "get_trial_id": "actors._worker.session",
    "get_context": "actors._worker.session",
    "TuneContext": "actors._worker.session",
    "ResultGrid": "actors._driver.result_grid",
    "Result": "actors._driver.result_grid",
    "TrialStatus": "actors._engine.trial",
    "TrialSnapshot": "actors._engine.trial",
    "Decision": "actors._engine.reducer",
    "TuneError": "actors._driver.errors",
    "with_resources": "actors._driver.config",
    "PlacementGroupFactory": "actors._driver.resources",
    "with_parameters": "actors._driver.parameters",
    "Callback": "actors._driver.callbacks",
    "LoggerCallback": "actors._driver.loggers",
    "JsonLoggerCallback": "actors._driver.loggers",
    "CSVLoggerCallback": "actors._driver.loggers",
    "TBXLoggerCallback": "actors._driver.loggers",
    "pretty_print": "actors._driver.pretty",
    # Ray Tune's classic API: tune.run(...) -> ExperimentAnalysis, a layer over Tuner.fit()
    "run": "actors._driver.classic",
    "run_experiments": "actors._driver.experiments",
    "Experiment": "actors._driver.experiments",
    "ExperimentAnalysis": "actors._driver.analysis",
    "CLIReporter": "actors._driver.reporters",
    "JupyterNotebookReporter": "actors._driver.reporters",
    "ProgressReporter": "actors._driver.reporters",
    # the rest of ``from ray import tune``, so ``import actors as tune`` ports a script unchanged
    "Stopper": "actors.stoppers",
    "create_scheduler": "actors.schedulers",
    "create_searcher": "actors.search",
    "register_trainable": "actors._driver.registry",
    # ray.init(num_cpus=...)/ray.shutdown(): this machine's resources for the runs that follow
    "init": "actors._driver.local_resources",
    "shutdown": "actors._driver.local_resources",
    "is_initialized": "actors._driver.local_resources",
    **{name: "actors.search" for name in (
        "choice", "grid_search", "lograndint", "loguniform", "qlograndint", "qloguniform", "qrandint",
        "qrandn", "quniform", "randint", "randn", "sample_from", "uniform")},
}

__all__ = [*sorted(_EXPORTS), "__version__"]

#: ``ray.tune``'s submodules a script reaches as attributes (``tune.search.BasicVariantGenerator()``,
#: ``tune.schedulers.ASHAScheduler``), which ``from ray import tune`` has imported
_SUBMODULES = ("result", "schedulers", "search", "stopper")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"actors.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'actors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
