"""Record what a trial draws from the global random streams in Ray Tune 2.60 (the oracle for
``tests/data/ray_random_streams.json``): numpy's global ``RandomState``, Python's ``random`` and torch's
default generator, in a driver that seeded all three (``numpy.random.seed(0)``, ``random.seed(0)``,
``torch.manual_seed(0)``) and drew from them, as training scripts do. For each case it records how many
different values the trials drew, whether a trial drew what the driver would have drawn next, how many
trials found numpy's stream untouched (seeded afresh, no draw yet) and how many processes ran them.
Ray's values themselves are random (each worker seeds from the OS), so they are not recorded.

Run with a Python that has Ray and torch installed, never audition's environment::

    /work/rayvenv/bin/python benchmarks/ray_oracle/record_random_streams.py tests/data/ray_random_streams.json

``tests/test_random_streams.py`` runs the same cases under audition (``tests/_random_driver.py``) and compares.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from typing import Any

# (case, trainable kind, num_samples, reuse_actors, max_concurrent_trials)
CASES: list[tuple[str, str, int, bool, int]] = [
    ("function_fresh", "function", 4, False, 2),
    ("function_reused", "function", 3, True, 1),
    ("class_fresh", "class", 3, False, 2),
]
STREAMS = ("numpy", "random", "torch")


def draws() -> dict[str, Any]:
    """What the trial's process draws first (called where the trainable starts)."""
    import numpy as np
    import torch

    # a Mersenne Twister freshly seeded and not drawn from yet is at the position a new one has
    fresh = np.random.get_state()[2] == np.random.RandomState().get_state()[2]
    return {"numpy": float(np.random.rand()), "random": random.random(), "torch": float(torch.rand(1)),
            "numpy_fresh": bool(fresh), "pid": os.getpid()}


def driver_next() -> dict[str, float]:
    """What the driver would draw next from each stream (copies: the driver's own streams do not move)."""
    import numpy as np
    import torch

    rs = np.random.RandomState()
    rs.set_state(np.random.get_state())
    py = random.Random()
    py.setstate(random.getstate())
    gen = torch.Generator()
    gen.set_state(torch.get_rng_state())
    return {"numpy": float(rs.rand()), "random": py.random(), "torch": float(torch.rand(1, generator=gen))}


def summary(trials: list[dict[str, Any]], nxt: dict[str, float]) -> dict[str, Any]:
    """What a case's trials drew, as recorded (the same function reads audition's trials in the test)."""
    return {"trials": len(trials),
            "distinct": {s: len({t[s] for t in trials}) for s in STREAMS},
            "drew_driver_next": {s: any(t[s] == nxt[s] for t in trials) for s in STREAMS},
            "numpy_fresh": sum(bool(t["numpy_fresh"]) for t in trials),
            "processes": len({t["pid"] for t in trials})}


def run_cases(tune: Any, storage: str) -> dict[str, Any]:
    """Seed and use the driver's streams, then run every case with ``tune`` (``ray.tune``, or audition's
    ``actors`` in the test: the same calls) and summarise each."""
    import numpy as np
    import torch

    def train(config: dict[str, Any]) -> None:
        tune.report(draws())

    class Train(tune.Trainable):  # type: ignore[name-defined,misc]
        def setup(self, config: dict[str, Any]) -> None:
            self.first = draws()

        def step(self) -> dict[str, Any]:
            return dict(self.first, done=True)

        def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
            return {}

        def load_checkpoint(self, checkpoint: Any) -> None:
            pass

    np.random.seed(0)
    random.seed(0)
    torch.manual_seed(0)
    np.random.rand(3), random.random(), torch.rand(2)  # the script uses its streams before fit()
    cases = {}
    for name, kind, n, reuse, concurrent in CASES:
        nxt = driver_next()
        grid = tune.Tuner(train if kind == "function" else Train,
                          tune_config=tune.TuneConfig(num_samples=n, reuse_actors=reuse,
                                                      max_concurrent_trials=concurrent),
                          run_config=tune.RunConfig(name=name, storage_path=storage, verbose=0)).fit()
        cases[name] = summary([r.metrics for r in grid], nxt)
    return cases


def main() -> None:
    import ray
    from ray import tune

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    cases = run_cases(tune, tempfile.mkdtemp())
    ray.shutdown()
    with open(sys.argv[1], "w") as f:
        json.dump({"ray": ray.__version__, "cases": CASES, "results": cases}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
