"""Every example runs (small sizes) so none rots; the console script answers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_prints_a_best_config_and_runs_again(tmp_path, no_leaks):
    """The README's first command works on a machine where it already ran (the name is taken then)."""
    best = []
    for _ in range(2):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py"), str(tmp_path)],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert out.returncode == 0, out.stderr[-3000:]
        best += [line for line in out.stdout.splitlines() if line.startswith("best config: {'lr':")]
        assert len(list((tmp_path / "quick").glob("*/result.json"))) == 8
    assert len(best) == 2 and best[0] == best[1], best


def test_console_script_version():
    out = subprocess.run([sys.executable, "-m", "actors._cli", "--version"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.startswith("audition ")


@pytest.mark.parametrize("key", [None, "0123456789abcdef0123456789abcdef"], ids=["open", "cluster-key"])
def test_multi_host_example(tmp_path, key, no_leaks):
    env = dict(os.environ, PYTHONPATH=ROOT)
    if key:
        env["AUDITION_CLUSTER_KEY"] = key  # leader and workers sign every frame
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "multi_host.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    members = {line.split(" ran on ")[1].split()[0] for line in out.stdout.splitlines() if " ran on " in line}
    assert members == {"worker0", "worker1"}
    assert "best config: {'lr': 0.1}" in out.stdout
