"""BOHB in seeded simulations with faults (``actors.testing.simulate``): HyperBandForBOHB pauses nearly every
trial at every milestone and drives the searcher through ``on_pause``/``on_unpause`` calls and its results'
``hyperband_info``, so it runs the paths added for it (``SchedulerReply.notes``, ``SEARCHER`` actions) under
trial crashes, poisoned messages, scheduler errors, storage and checkpoint failures, aborts, latency and member
loss, with several trials at once. Every run must end, keep every invariant, and restore when aborted."""

from __future__ import annotations

import logging
import random

import pytest

from actors import RunConfig, TuneConfig
from actors._driver.config import CheckpointConfig, FailureConfig
from actors.schedulers.hb_bohb import HyperBandForBOHB
from actors.search.bohb import TuneBOHB
from actors.testing import simulate
from actors.testing.invariants import restore_violations, violations
from tests._lean import needs
from tests._sim_scenarios import ABORTING, FAULTS, SPACE, curve, draw_faults

pytestmark = needs("hpbandster", "ConfigSpace")  # (ConfigSpace brings SciPy: imported by the test, tests/_lean.py)

SEEDS = 72  # eight per fault kind


def _check(seed: int) -> list[str]:
    rng = random.Random(seed * 104729 + 7)
    kind = FAULTS[seed % len(FAULTS)]
    faults, more = draw_faults(kind, random.Random(seed))
    samples, max_t = rng.randint(5, 9), rng.choice([4, 8, 9])
    sim = simulate(curve, SPACE,
                   TuneConfig(metric="loss", mode="min", num_samples=samples, search_alg=TuneBOHB(seed=seed),
                              scheduler=HyperBandForBOHB(max_t=max_t, reduction_factor=rng.choice([2, 3])),
                              max_concurrent_trials=rng.choice([None, 1, 2])),
                   RunConfig(checkpoint_config=CheckpointConfig(checkpoint_frequency=rng.choice([0, 1, 2])),
                             failure_config=FailureConfig(max_failures=rng.choice([-1, 3]))),
                   max_iterations=max_t + 2, seed=seed, faults=faults, **{"cpus": 3, **more})
    again = None
    try:
        problems = violations(sim, num_samples=samples, may_abort=kind in ABORTING)
        if not problems and sim.error is not None:
            found, again = restore_violations(sim, curve, max_iterations=max_t + 2, num_samples=samples, seed=seed)
            problems += found
        return [f"seed {seed} ({kind}): {p}" for p in problems[:3]]
    finally:
        sim.discard()
        if again is not None:
            again.discard()


@pytest.mark.slow
def test_seeded_bohb_simulations_with_faults_keep_every_invariant() -> None:
    logger = logging.getLogger("audition")
    level = logger.level
    logger.setLevel(logging.ERROR)  # (the faults' warnings are expected noise)
    try:
        failures = [p for seed in range(SEEDS) for p in _check(seed)]
    finally:
        logger.setLevel(level)  # (and the worker's later tests see warnings again: caplog checks them)
    assert not failures, "\n".join(failures[:10])
