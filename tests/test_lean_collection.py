"""The suite's collection imports none of the heavy libraries (tests/_lean.py says why: each pytest-xdist worker
collects every module, then forks actor processes from what it holds)."""

from __future__ import annotations

import glob
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_collection_stays_lean(request: pytest.FixtureRequest) -> None:
    modules, loaded = request.config._audition_collection  # (tests/conftest.py, after this process's collection)
    every = set(glob.glob(os.path.join(HERE, "test_*.py")))
    if not every <= modules:
        pytest.skip("only a collection of the whole suite (pytest tests/, as the README runs it) shows it")
    assert loaded == [], (
        f"collecting the suite imported {loaded}: a test module imports it at its top (importorskip or import); "
        "use tests._lean.needs / lazy, or import it inside the tests")
