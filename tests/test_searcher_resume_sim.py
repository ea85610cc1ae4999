"""Model-based searchers under seeded faults: an experiment aborted at a random moment and restored suggests
exactly the configurations the uninterrupted run suggested (in their random phase the draws follow the seed
alone, so a lost, repeated or skipped draw shows as a different set), and every engine invariant holds."""

from __future__ import annotations

import random
from typing import Any

import pytest

from actors import TuneConfig, search
from actors._driver.config import FailureConfig, RunConfig
from actors.testing import Faults, simulate
from actors.testing.invariants import restore_violations, violations

SEEDS = range(8)
# a restored trial that starts again reports its first steps again: Optuna ignores those with a warning
pytestmark = pytest.mark.filterwarnings("ignore:The reported value is ignored:UserWarning")


def _curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": (config["x"] - 0.3) ** 2 + 1.0 / i, "time_this_iter_s": config["step_s"]}


def _searcher(name: str, seed: int) -> Any:
    if name == "hyperopt":
        from actors.search.hyperopt import HyperOptSearch

        return HyperOptSearch(n_initial_points=20, random_state_seed=seed)
    if name == "bayesopt":
        from actors.search.bayesopt import BayesOptSearch

        return BayesOptSearch(random_search_steps=20, random_state=seed)
    from actors.search.optuna import OptunaSearch

    return OptunaSearch(seed=seed + 1)


def _run(name: str, seed: int, faults: Faults) -> Any:
    return simulate(_curve, {"x": search.uniform(-1.0, 1.0), "step_s": 1.0},
                    TuneConfig(metric="loss", mode="min", num_samples=6, search_alg=_searcher(name, seed)),
                    RunConfig(failure_config=FailureConfig(max_failures=-1)),
                    max_iterations=5, cpus=3, seed=seed, faults=faults)


@pytest.mark.parametrize("name", ["hyperopt", "bayesopt", "optuna"])
def test_an_aborted_run_resumes_with_the_same_draws(name: str) -> None:
    pytest.importorskip({"hyperopt": "hyperopt", "bayesopt": "bayes_opt", "optuna": "optuna"}[name])
    for seed in SEEDS:
        rng = random.Random(seed)
        whole = _run(name, seed, Faults(trial_fail_p=0.05))
        aborted = _run(name, seed, Faults(abort_at_s=rng.uniform(0.5, 5.0), trial_fail_p=0.05))
        again = None
        try:
            assert whole.results is not None and aborted.results is not None
            assert not violations(whole, num_samples=6, may_abort=False), (name, seed)
            assert not violations(aborted, num_samples=6, may_abort=True), (name, seed)
            expected = sorted(r.config["x"] for r in whole.results)
            if aborted.error is None:  # (the abort came after the end)
                assert sorted(r.config["x"] for r in aborted.results) == expected, (name, seed)
                continue
            problems, again = restore_violations(aborted, _curve, max_iterations=5, num_samples=6, seed=seed)
            assert not problems, (name, seed, problems)
            assert again is not None and again.results is not None
            assert sorted(r.config["x"] for r in again.results) == expected, (name, seed)
        finally:
            for sim in (whole, aborted, again):
                if sim is not None:
                    sim.discard()
