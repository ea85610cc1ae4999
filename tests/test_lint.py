"""ruff and mypy, as configured in pyproject.toml, are clean."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("tool", [["ruff", "check", "."], ["mypy"]], ids=["ruff", "mypy"])
def test_clean(tool):
    out = subprocess.run([sys.executable, "-m", *tool], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
