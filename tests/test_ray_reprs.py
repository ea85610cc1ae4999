"""``print(result_grid)``, ``print(result)`` and ``print(checkpoint)`` as Ray Tune 2.60 prints them.

Recorded from Ray 2.60 (``/work/rayvenv``): a function trainable reporting
``{"loss": 1.5, "nest": {"a": 1}, "timesteps_total": 3}`` (with a checkpoint for ``x=1``; ``x=2``
then raises ``ValueError``), ``grid_search([1, 2])``, ``max_concurrent_trials=1``, then
``repr(grid)`` with the paths replaced by ``PATH``. Ray's error line names its ``RayTaskError``;
audition's the ``TrialError`` it raises instead.
"""

from __future__ import annotations

import re
import tempfile
from typing import Any

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, report
from actors.search import grid_search

RAY_REPR = """ResultGrid<[
  Result(
    metrics={'loss': 1.5, 'nest': {'a': 1}},
    path='PATH',
    filesystem='local',
    checkpoint=Checkpoint(filesystem=local, path=PATH)
  ),
  Result(
    error='TrialError(ValueError)',
    metrics={'loss': 1.5, 'nest': {'a': 1}},
    path='PATH',
    filesystem='local',
    checkpoint=None
  )
]>"""


def _train(config: dict[str, Any]) -> None:
    checkpoint = Checkpoint.from_directory(tempfile.mkdtemp()) if config["x"] == 1 else None
    report({"loss": 1.5, "nest": {"a": 1}, "timesteps_total": 3}, checkpoint=checkpoint)
    if config["x"] == 2:
        raise ValueError("no")


def test_result_grid_prints_as_rays(storage_dir: str) -> None:
    grid = Tuner(_train, param_space={"x": grid_search([1, 2])}, tune_config=TuneConfig(max_concurrent_trials=1),
                 run_config=RunConfig(name="reprs", storage=storage_dir, verbose=0, system="simple")).fit()
    paths = re.escape(storage_dir.rstrip("/")) + r"/reprs/[^'\n,)]*"
    assert re.sub(paths, "PATH", repr(grid)) == RAY_REPR
    assert re.sub(paths, "PATH", str(grid[0])) == "\n".join(
        line[2:] for line in RAY_REPR.splitlines()[1:7]).rstrip(",")
    assert repr(grid[0].checkpoint) == f"Checkpoint(filesystem=local, path={grid[0].checkpoint.path})"
