"""Test modules skip on a missing library without importing it, so collection stays lean.

Every pytest-xdist worker collects every test module before it runs any test. A library a module imports at
collection (``pytest.importorskip``, a top-level import) then lives in all four workers for the whole suite, and
each actor process a worker forks copies its address space: measured on this 2-core machine, forking and
reaping a process holding TensorFlow, torch and Lightning (~800 MB) costs ~30 ms of system time against ~1.6 ms
for a bare interpreter, and two suite files of actor-system tests ran 1.8x longer in workers that held them.
So these libraries are imported by the tests that use them, never at collection (what each worker's own
collection imported is checked by ``test_collection_stays_lean``, tests/test_lean_collection.py), and the tests
that import TensorFlow or torch in the worker itself share one worker (``IN_PROCESS``).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import pytest

# imported by no test module at collection (each is tens to hundreds of MB in a process)
HEAVY = ("tensorflow", "keras", "torch", "lightning", "sklearn", "scipy", "pandas", "matplotlib", "mlflow",
         "comet_ml", "jax", "polars")


# tests that import one of them in the worker itself: with ``--dist loadgroup`` (the README's command) they all
# run in one worker, so one worker, not four, forks from a process holding them afterwards
IN_PROCESS = pytest.mark.xdist_group("heavy-libraries")


def needs(*modules: str) -> pytest.MarkDecorator:
    """Skip the module's tests unless every one of ``modules`` is installed (found, not imported)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


class lazy:
    """A module imported on its first attribute read: ``xgb = lazy("xgboost")`` at a test module's top."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # (pytest's collection probes module attributes: _pytestfixturefunction, ...)
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)
