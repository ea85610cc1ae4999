"""Where pickled objects of older audition versions now live.

Saved experiments hold pickles (``tuner.pkl``, the scheduler's, searcher's and stopper's state)
that name classes by module path. Those paths moved when ``actors/`` was split into packages by
role; ``loads`` maps the old paths to the new ones, so an experiment saved before the move still
restores (``tests/test_golden_restore.py``).
"""

from __future__ import annotations

import io
import pickle
from typing import Any

# module path before the split into packages -> module path now
MOVED: dict[str, str] = {
    "actors._auth": "actors._cluster.auth",
    "actors._auth_codec": "actors._cluster.auth_codec",
    "actors._auth_keys": "actors._cluster.auth_keys",
    "actors._callbacks": "actors._driver.callbacks",
    "actors._capture": "actors._worker.capture",
    "actors._checkpoint": "actors._driver.checkpoint",
    "actors._checks": "actors._driver.checks",
    "actors._cli": "actors._cli.main",
    "actors._config": "actors._driver.config",
    "actors._console": "actors._driver.console",
    "actors._controller": "actors._shell.controller",
    "actors._controller_io": "actors._shell.experiment_io",
    "actors._errors": "actors._driver.errors",
    "actors._fdcapture": "actors._worker.fdcapture",
    "actors._function": "actors._worker.function",
    "actors._inspect": "actors._cli.inspect",
    "actors._join": "actors._cluster.join",
    "actors._lifecycle": "actors._engine.lifecycle",
    "actors._logger_host": "actors._shell.logger_host",
    "actors._loggers": "actors._driver.loggers",
    "actors._marks": "actors._engine.marks",
    "actors._migrate": "actors._cli.migrate",
    "actors._naming": "actors._engine.naming",
    "actors._parameters": "actors._driver.parameters",
    "actors._placement": "actors._engine.placement",
    "actors._plot": "actors._cli.plot",
    "actors._plugins": "actors._driver.plugins",
    "actors._proc": "actors._process.hygiene",
    "actors._progress": "actors._driver.progress",
    "actors._recovery": "actors._shell.recovery",
    "actors._reducer": "actors._engine.reducer",
    "actors._restore": "actors._driver.restore",
    "actors._result": "actors._driver.result_grid",
    "actors._runner": "actors._worker.runner",
    "actors._scheduler_actor": "actors._shell.scheduler_actor",
    "actors._scheduler_host": "actors._engine.scheduler_host",
    "actors._sequencer": "actors._engine.sequencer",
    "actors._session": "actors._worker.session",
    "actors._spec": "actors._engine.spec",
    "actors._system": "actors._driver.system",
    "actors._trainable": "actors._driver.trainable",
    "actors._trial": "actors._engine.trial",
    "actors._trial_actor": "actors._shell.trial_actor",
    "actors._tuner": "actors._driver.tuner",
    "actors._worker": "actors._cluster.member",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED.get(module, module), name)


def loads(data: bytes) -> Any:
    """``pickle.loads`` (and so ``cloudpickle.loads``) that also reads pickles naming old module paths."""
    return _Unpickler(io.BytesIO(data)).load()


__all__ = ["MOVED", "loads"]
