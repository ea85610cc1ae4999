"""benchmarks/_common picks the tree a benchmark measures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _root(pythonpath: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    code = f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import _common; print(_common.ROOT)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()


def test_the_tree_pythonpath_names_is_measured_else_the_checkout(tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "actors").mkdir(parents=True)
    (other / "actors" / "__init__.py").write_text("")
    checkout = str(BENCHMARKS.parent)
    assert _root(f"{tmp_path / 'elsewhere'}{os.pathsep}{other}") == str(other)
    assert _root(str(tmp_path)) == checkout  # no actors/ there: not a tree
    assert _root(None) == checkout
