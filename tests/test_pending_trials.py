"""The default generator's trials are created up front, as in Ray Tune, so HyperBand's brackets fill as Ray's do.

Ray keeps up to ``max(200, 1.1 x CPUs)`` trials of a ``BasicVariantGenerator`` PENDING; HyperBand
assigns a trial to a bracket when it is added and halves a bracket once all its trials wait at the
milestone. Adding one trial per free slot (audition before) let a bracket halve with only its first
two trials in it: Ray's ``hyperband_function_example`` stopped 9 of 20 trials at iteration 66, audition none.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, report
from actors.schedulers import HyperBandScheduler
from actors.search import BasicVariantGenerator, ConcurrencyLimiter, OptunaSearch, uniform
from actors.search._variant import pending_trials_wanted


def climb(config: dict[str, Any]) -> None:
    for t in range(100):
        report({"episode_reward_mean": config["height"] * t / 100})


@pytest.mark.parametrize(("limit", "ray"), [(None, [(66, 9), (100, 11)]), (2, [(100, 20)])])
def test_hyperband_brackets_halve_as_in_ray(limit: int | None, ray: list[tuple[int, int]], tmp_path: Any) -> None:
    grid = Tuner(climb, param_space={"height": uniform(0, 100)},
                 tune_config=TuneConfig(num_samples=20, metric="episode_reward_mean", mode="max", seed=0,
                                        scheduler=HyperBandScheduler(max_t=200), max_concurrent_trials=limit),
                 run_config=RunConfig(storage=str(tmp_path), system="simple", verbose=0)).fit()
    # Ray 2.60, same script (recorded with 2 CPUs): brackets of 6 (milestone 200), 9 (66: keeps 3) and 5
    # (22, never full); with max_concurrent_trials=2 its generator creates a trial only while fewer
    # than 2 are live, and a paused trial is live: no bracket ever fills, no trial is stopped
    assert sorted(collections.Counter(r.metrics["training_iteration"] for r in grid).items()) == ray
    assert len(grid) == 20


def test_pending_trials_wanted() -> None:
    assert pending_trials_wanted(BasicVariantGenerator(param_space={}), 2, 2.0) == 200
    assert pending_trials_wanted(BasicVariantGenerator(param_space={}), 2, 400.0) == 440
    limited = ConcurrencyLimiter(OptunaSearch({"x": uniform(0, 1)}, "loss", "min"), 4)
    assert pending_trials_wanted(limited, 3, 2.0) == 3  # a learning searcher: one per free slot
    assert pending_trials_wanted(limited, 0, 2.0) == 1
