"""A trial's native thread pools are sized as Ray Tune sizes them (``actors/_worker/threads.py``).

Recorded from Ray 2.60 (``benchmarks/ray_oracle/record_trial_threads.py``): a trial sees
``OMP_NUM_THREADS`` = its CPUs rounded down (at least 1) unless the driver set it, and OpenBLAS, OpenMP
and torch follow it (OpenBLAS's own variable first). audition's trial processes are copies of a driver
that loaded numpy and torch with pools as large as the machine; they must end up as Ray's fresh ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from actors._worker.threads import ThreadPlan, plan
from tests._lean import IN_PROCESS

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "ray_trial_threads.json")


@pytest.mark.parametrize(("resources", "environ", "expected"), [
    ({}, {}, ThreadPlan("1", {"openblas": 1, "mkl": 1, "blis": 1, "flexiblas": 1, "openmp": 1})),
    ({"cpu": 3.9}, {}, ThreadPlan("3", {"openblas": 3, "mkl": 3, "blis": 3, "flexiblas": 3, "openmp": 3})),
    ({"cpu": 0.25, "gpu": 1}, {}, ThreadPlan("1", {"openblas": 1, "mkl": 1, "blis": 1, "flexiblas": 1,
                                                      "openmp": 1})),
    ({"cpu": 4}, {"OMP_NUM_THREADS": "2"}, ThreadPlan(None, {"openblas": 2, "mkl": 2, "blis": 2,
                                                                 "flexiblas": 2, "openmp": 2})),
    ({"cpu": 4}, {"OMP_NUM_THREADS": "3,1"}, ThreadPlan(None, {"openblas": 3, "mkl": 3, "blis": 3,
                                                                   "flexiblas": 3, "openmp": 3})),
    # a value OpenMP would not take: the libraries keep what they read themselves
    ({"cpu": 4}, {"OMP_NUM_THREADS": "lots"}, ThreadPlan(None, {})),
    ({"cpu": 2}, {"MKL_NUM_THREADS": "5", "GOTO_NUM_THREADS": "6"},
     ThreadPlan("2", {"openblas": 6, "mkl": 5, "blis": 2, "flexiblas": 2, "openmp": 2})),
    ({}, {"OPENBLAS_NUM_THREADS": "4", "GOTO_NUM_THREADS": "6", "OMP_NUM_THREADS": "0"},
     ThreadPlan(None, {"openblas": 4})),
])
def test_plan_follows_rays_rule(resources, environ, expected):
    assert plan(resources, environ) == expected


@pytest.mark.slow
def test_trials_get_rays_thread_counts_in_a_driver_that_loaded_numpy_and_torch(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("threadpoolctl")
    with open(DATA) as f:
        ray = json.load(f)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    run = subprocess.run([sys.executable, os.path.join(HERE, "_threads_driver.py"), DATA, str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["cases"] == ray["cases"]
    # the driver's own pools are the user's: untouched
    assert got["driver_torch"][0] == got["driver_torch"][1]


@IN_PROCESS
def test_trials_in_the_drivers_own_process_leave_its_threads_alone(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from actors import RunConfig, Tuner, report

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()

    def train(config):
        report({"omp": os.environ.get("OMP_NUM_THREADS", "unset"), "torch": torch.get_num_threads()})

    grid = Tuner(train, run_config=RunConfig(system="simple", storage_path=str(tmp_path), verbose=0)).fit()
    assert (grid[0].metrics["omp"], grid[0].metrics["torch"]) == ("unset", before)
    assert "OMP_NUM_THREADS" not in os.environ and torch.get_num_threads() == before
