"""``audition migrate``: a Ray Tune script's imports rewritten to audition's, everything else kept byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from actors._cli.main import _audition_has
from actors._cli.migrate import migrate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RAY_SCRIPT = '''\
"""A Ray Tune script."""
import argparse

import ray
from ray import tune, train  # both are audition's top level
from ray.tune import Checkpoint
from ray.tune.schedulers import (
    ASHAScheduler,  # rungs
    PopulationBasedTraining,
)
from ray.tune.search.optuna import OptunaSearch
from ray.tune.result import SHOULD_CHECKPOINT
from ray.tune.logger import LoggerCallback
from ray.tune.utils.mock_trainable import MyTrainableClass
from ray.tune.experiment import Trial  # a plugin's type hints and Trial.PAUSED
from ray.tune.execution.placement_groups import PlacementGroupFactory
import ray.tune as rt


def objective(config):
    ray.tune.report({"loss": config["x"]})  # chain through `import ray`
    train.report({"loss": 1})


if __name__ == "__main__":
    ray.init(num_cpus=2,
             configure_logging=False)
    sched = ray.tune.schedulers.ASHAScheduler()
    ray.shutdown()
'''

EXPECTED = '''\
"""A Ray Tune script."""
import argparse

import actors, actors.schedulers
import actors as tune
import actors as train  # both are audition's top level
from actors import Checkpoint
from actors.schedulers import (
    ASHAScheduler,  # rungs
    PopulationBasedTraining,
)
from actors.search.optuna import OptunaSearch
from actors.result import SHOULD_CHECKPOINT
from actors import LoggerCallback
from actors.mock_trainable import MyTrainableClass
from actors.experiment import Trial  # a plugin's type hints and Trial.PAUSED
from actors import PlacementGroupFactory
import actors as rt


def objective(config):
    actors.report({"loss": config["x"]})  # chain through `import ray`
    train.report({"loss": 1})


if __name__ == "__main__":
    actors.init(num_cpus=2,
             configure_logging=False)
    sched = actors.schedulers.ASHAScheduler()
    actors.shutdown()
'''


def test_imports_are_rewritten_and_everything_else_kept() -> None:
    result = migrate(RAY_SCRIPT, _audition_has)
    assert result.text == EXPECTED
    assert not result.warnings
    again = migrate(result.text, _audition_has)
    assert again.text == result.text and again.changes == 0  # idempotent


def test_what_cannot_be_mapped_is_named_with_its_line_and_left_alone() -> None:
    source = textwrap.dedent('''\
        import ray
        from ray.tune import Tuner, register_env
        from ray import tune, data
        import ray.rllib as rllib

        @ray.remote
        def f():
            return ray.get(tune.NoSuchThing)

        handle = ray.init()
        ''')
    result = migrate(source, _audition_has)
    found = [(w.line, w.name) for w in result.warnings]
    assert found == [(2, "ray.tune.register_env"), (3, "ray.data"), (4, "ray.rllib"), (6, "ray.remote"),
                     (8, "ray.get"), (8, "tune.NoSuchThing"), (10, "ray.init")]
    lines = result.text.splitlines()
    assert lines[0] == "import ray"  # still needed by what is left
    assert lines[1:3] == ["from actors import Tuner", "from ray.tune import register_env"]
    assert lines[3:5] == ["import actors as tune", "from ray import data"]
    assert "import ray.rllib as rllib" in lines and "handle = ray.init()" in lines


def test_import_ray_becomes_import_actors_for_init_and_goes_where_nothing_uses_it() -> None:
    source = textwrap.dedent('''\
        import os, ray  # keep os
        from ray import tune

        def main():
            import ray
            ray.init()

        if True:
            import ray
        ''')
    result = migrate(source, _audition_has)
    assert not result.warnings
    assert result.text == textwrap.dedent('''\
        import os
        import actors  # keep os
        import actors as tune

        def main():
            actors.init()

        if True:
            pass  # audition migrate: import ray removed
        ''')
    compile(result.text, "<migrated>", "exec")


def test_non_ascii_source_keeps_its_columns() -> None:
    source = 'x = "héllo"; from ray import tune  # ünïcode\nprint(x)\n'
    assert migrate(source, _audition_has).text == 'x = "héllo"; import actors as tune  # ünïcode\nprint(x)\n'


def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "actors._cli", "migrate", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env=env)


RUNNABLE = '''\
import ray
from ray import tune


def objective(config):
    for step in range(3):
        tune.report({"loss": (config["x"] - 1) ** 2 + 1 / (step + 1)})


if __name__ == "__main__":
    ray.init(num_cpus=2)
    tuner = tune.Tuner(objective, param_space={"x": tune.grid_search([0.0, 1.0])},
                       tune_config=tune.TuneConfig(metric="loss", mode="min"),
                       run_config=tune.RunConfig(storage_path="STORAGE", name="migrated", verbose=0))
    print("BEST", tuner.fit().get_best_result().config)
'''


@pytest.mark.slow
def test_cli_prints_diffs_writes_and_the_result_runs(tmp_path: os.PathLike[str], no_leaks: None) -> None:
    path = os.path.join(tmp_path, "script.py")
    with open(path, "w") as f:
        f.write(RUNNABLE.replace("STORAGE", str(tmp_path)))
    printed = _cli(path, cwd=str(tmp_path))
    assert printed.returncode == 0 and printed.stderr == ""
    assert "import actors as tune" in printed.stdout and open(path).read().startswith("import ray\n")
    diff = _cli(path, "--diff", cwd=str(tmp_path))
    assert "-from ray import tune\n" in diff.stdout and "-import ray\n" in diff.stdout
    assert "+import actors\n+import actors as tune\n" in diff.stdout and "+    actors.init(num_cpus=2)\n" in diff.stdout
    written = _cli(path, "--write", cwd=str(tmp_path))
    assert written.returncode == 0 and "wrote" in written.stderr and written.stdout == ""
    assert open(path).read() == printed.stdout
    run = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stderr[-2000:]
    assert "BEST {'x': 1.0}" in run.stdout


def test_cli_warnings_and_bad_files(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "script.py")
    with open(path, "w") as f:
        f.write("from ray import tune\nfrom ray.tune import register_env\n")
    res = _cli(path, "--write", cwd=str(tmp_path))
    assert res.returncode == 1
    assert f"{path}:2: ray.tune.register_env: no audition counterpart" in res.stderr
    assert open(path).read() == "import actors as tune\nfrom ray.tune import register_env\n"
    with open(path, "w") as f:
        f.write("from ray import tune\ndef broken(:\n")
    res = _cli(path, cwd=str(tmp_path))
    assert res.returncode == 2 and "is not valid Python (line 2" in res.stderr and "Traceback" not in res.stderr
    res = _cli(os.path.join(tmp_path, "missing.py"), cwd=str(tmp_path))
    assert res.returncode == 2 and "cannot read" in res.stderr and "Traceback" not in res.stderr


def test_mock_trainable_curve_and_checkpoint(tmp_path: os.PathLike[str]) -> None:
    """Ray's examples train MyTrainableClass (migrated to actors.mock_trainable): same curve, resumable."""
    import math

    from actors.mock_trainable import MyTrainableClass

    t = MyTrainableClass({"width": 10, "height": 50})
    t.setup(t.config)
    rewards = [t.step()["episode_reward_mean"] for _ in range(3)]
    assert rewards == [50 * math.tanh(i / 10) for i in (1, 2, 3)]
    t.save_checkpoint(str(tmp_path))
    other = MyTrainableClass({"width": 10, "height": 50, "mock_error": True})
    other.setup(other.config)
    other.load_checkpoint(str(tmp_path))
    assert other.step()["episode_reward_mean"] == 50 * math.tanh(4 / 10)  # restored: no mock error
    failing = MyTrainableClass({"mock_error": True})
    failing.setup(failing.config)
    failing.step()
    with pytest.raises(RuntimeError, match="on purpose"):
        failing.step()


def test_every_module_migrate_maps_to_imports() -> None:
    """A mistyped target would leave a migrated script failing at its first line."""
    import importlib

    from actors._cli.migrate import MODULES

    missing = []
    for ray_module, target in sorted(MODULES.items()):
        try:
            importlib.import_module(target)
        except ImportError as exc:
            if "pip install 'audition[" not in str(exc):  # (an optional library not installed: said by name)
                missing.append((ray_module, target, str(exc)))
    assert not missing
