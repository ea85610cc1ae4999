"""Make the golden saved experiments in this directory with an OLD audition checkout.

``tests/test_golden_restore.py`` restores them with today's code: an experiment saved by an
earlier version must still restore (its pickles name classes by the module paths of that
version; ``actors/_legacy.py`` maps them). Regenerating is only for adding a new golden
experiment: the existing ones are the point, so do not remake them with current code.

How the committed data was made (see ``MADE_WITH.json`` for the commit)::

    git clone <this repository> /tmp/before && git -C /tmp/before checkout 6651868
    # 6651868: the last commit with the flat layout (actors/_tuner.py, actors/_config.py, ...)
    /work/venv/bin/python tests/data/golden/make_golden.py /tmp/before

It imports ``actors`` and ``storage`` from the old checkout and ``tests.golden_trainables``
from this one (so the pickles reference the trainables by a path both versions import), runs
on ``system="simple"`` with local storage, and writes:

* ``asha_aborted/``: ASHA, ``BasicVariantGenerator(max_concurrent=2)`` (so trials are
  suggested lazily and the searcher's counter is saved mid-way), a ``MaximumIterationStopper``
  (state: iterations seen), a dict checkpoint every step. The driver is interrupted as by
  Ctrl-C after two trials completed: the run aborts and its final state leaves trials running
  (with checkpoints) and trials never suggested.
* ``pbt_finished/``: PBT over 4 trials, run to the end (exploits recorded in the state).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))  # tests/data/golden -> checkout


def _import_old(old: str) -> str:
    """Put the old checkout's ``actors``/``storage`` first and this checkout's ``tests`` package
    in place (the old checkout has a ``tests`` package too); returns the old commit."""
    import importlib.util

    sys.path.insert(0, old)
    import actors

    if not os.path.abspath(actors.__file__).startswith(os.path.abspath(old) + os.sep):
        raise SystemExit(f"actors was imported from {actors.__file__}, not from {old}")
    if not os.path.exists(os.path.join(old, "actors", "_tuner.py")):
        raise SystemExit(f"{old} is not a checkout with the flat layout (no actors/_tuner.py)")
    init = os.path.join(REPO, "tests", "__init__.py")
    spec = importlib.util.spec_from_file_location("tests", init,
                                                  submodule_search_locations=[os.path.dirname(init)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tests"] = module
    spec.loader.exec_module(module)
    return subprocess.run(["git", "-C", old, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def asha_aborted() -> None:
    from actors import CheckpointConfig, RunConfig, TuneConfig, Tuner
    from actors.schedulers import ASHAScheduler
    from actors.search import BasicVariantGenerator, uniform
    from actors.stoppers import MaximumIterationStopper
    from tests.golden_trainables import AbortAfter, counter

    tuner = Tuner(
        counter,
        param_space={"x": uniform(0.1, 1.0), "steps": 6},
        tune_config=TuneConfig(
            metric="loss", mode="min", num_samples=6,
            search_alg=BasicVariantGenerator(seed=0, max_concurrent=2),
            scheduler=ASHAScheduler(max_t=6, grace_period=2, reduction_factor=2)),
        run_config=RunConfig(
            name="asha_aborted", storage_path=HERE, system="simple", stop=MaximumIterationStopper(6),
            checkpoint_config=CheckpointConfig(num_to_keep=2), callbacks=[AbortAfter(2)], verbose=0),
    )
    try:
        tuner.fit()
    except KeyboardInterrupt:
        return
    raise SystemExit("asha_aborted: the run finished before the abort; it must stop mid-way")


def pbt_finished() -> None:
    from actors import CheckpointConfig, RunConfig, TuneConfig, Tuner
    from actors.schedulers import PopulationBasedTraining
    from actors.search import uniform
    from tests.golden_trainables import pbt_counter

    pbt = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=2,
                                  hyperparam_mutations={"lr": uniform(0.01, 1.0)}, quantile_fraction=0.5,
                                  seed=0)
    Tuner(
        pbt_counter,
        param_space={"lr": uniform(0.01, 1.0), "steps": 6},
        tune_config=TuneConfig(metric="loss", mode="min", num_samples=4, max_concurrent_trials=2,
                               scheduler=pbt),
        run_config=RunConfig(name="pbt_finished", storage_path=HERE, system="simple",
                             checkpoint_config=CheckpointConfig(num_to_keep=2), verbose=0),
    ).fit()


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python tests/data/golden/make_golden.py OLD_CHECKOUT")
    commit = _import_old(os.path.abspath(argv[0]))
    for name, make in (("asha_aborted", asha_aborted), ("pbt_finished", pbt_finished)):
        shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)
        make()
    with open(os.path.join(HERE, "MADE_WITH.json"), "w") as f:
        json.dump({"commit": commit, "python": sys.version.split()[0],
                   "experiments": ["asha_aborted", "pbt_finished"]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
