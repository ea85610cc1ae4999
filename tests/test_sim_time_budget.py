"""Time budgets in a simulation count simulated seconds, and what a budget ends: PBT exploiting at every step,
which goes round in circles as Ray Tune's does (recorded: ``tests/data/ray_scheduler_oracle/pbt.json``)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from actors import RunConfig, TuneConfig, search
from actors._driver.config import CheckpointConfig, FailureConfig
from actors.schedulers import FIFOScheduler
from actors.stoppers import CombinedStopper, MaximumIterationStopper, TimeoutStopper
from actors.testing import Faults, simulate
from tests._sim_scenarios import SPACE, curve, draw_faults, scenario, scheduler

ORACLE = Path(__file__).parent / "data" / "ray_scheduler_oracle" / "pbt.json"


def _ten_second_steps(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": config["lr"] / i, "time_this_iter_s": 10.0}


def _histories(sim: Any) -> dict[str, list[int]]:
    return {r.metrics["trial_id"]: [int(i) for i in r.metrics_dataframe["training_iteration"]] for r in sim.results}


def test_a_time_budget_counts_simulated_seconds() -> None:
    """``TuneConfig(time_budget_s=60)`` ends a simulated run after 60 simulated seconds, as it ends a real run
    after 60 seconds: on the wall clock (the stopper's own) the budget never ran out in a simulation that takes
    a fraction of a second, and the run went on to its end (300 simulated seconds here)."""
    def run() -> Any:
        return simulate(_ten_second_steps, {"lr": search.uniform(0.01, 1.0)},
                        TuneConfig(metric="loss", mode="min", num_samples=4, time_budget_s=60,
                                   scheduler=FIFOScheduler()),
                        max_iterations=30, seed=3, cpus=4)

    with run() as sim, run() as again:
        assert not sim.hung and sim.error is None, (sim.hang_reason, sim.error)  # (a budget ends a run normally)
        assert 60 <= sim.simulated_time_s < 75, sim.simulated_time_s
        histories = _histories(sim)
        assert all(0 < len(h) < 30 for h in histories.values()), histories
        assert histories == _histories(again)  # the seed fixes the outcome, whatever the machine's speed


def test_a_timeout_stopper_given_as_stop_counts_simulated_seconds_and_the_users_keeps_its_clock() -> None:
    users = TimeoutStopper(40)
    stop = CombinedStopper(MaximumIterationStopper(100), users)
    with simulate(_ten_second_steps, {"lr": search.uniform(0.01, 1.0)},
                  TuneConfig(metric="loss", mode="min", num_samples=2), RunConfig(stop=stop),
                  max_iterations=30, seed=1, cpus=2) as sim:
        assert sim.error is None and 40 <= sim.simulated_time_s < 55, (sim.error, sim.simulated_time_s)
    assert users.clock is time.monotonic and users.elapsed() < 1.0  # the simulation ran on a copy


def test_ray_goes_round_in_circles_when_pbt_exploits_every_step_of_a_worsening_population() -> None:
    """The recording behind the next test: Ray 2.60's PBT (``perturbation_interval=1``, half the population in
    each quantile), trials outnumbering the slots, scores that worsen with training. A running trial is cloned
    back to a PAUSED one, takes its ``last_train_time``, and ``choose_trial_to_run`` picks it again first (the
    tie goes to the trial added first): the first two trials report the same iterations again and again, the
    others never run again, and only the recorder's step cap ends the run. ``test_ray_scheduler_fidelity``
    replays these streams (``pbt-6``, ``pbt-7``) and finds every decision audition's PBT takes the same."""
    streams = [s for s in json.loads(ORACLE.read_text())["streams"] if s["spec"].get("worsens")]
    assert len(streams) == 2
    for s in streams:
        results = [e for e in s["events"] if e[0] == "result"]
        assert len(results) == s["spec"]["max_steps"]  # the cap ended it, not the trials
        late = Counter(e[1] for e in results[len(results) // 2:])
        assert set(late) <= {"t00", "t01", "t02"}, late  # the trials added last never run in the second half
        assert max(e[2][0] for e in results) < s["spec"]["max_len"]  # nobody reaches its end


def test_pbt_exploiting_every_step_goes_round_in_circles_until_its_time_budget_as_in_ray() -> None:
    """The engine does what the recording shows Ray does (the simulator's scenario seed 141 on 2 CPUs, where
    the loss of a small learning rate grows with the iteration): the two trials added first are cloned back
    to iteration 3 at every result, the PAUSED ones they clone never run again, and the run ends when its time
    budget does. (Without a budget or stopper it runs for ever, as Ray's does: the simulator's sweeps leave
    this PBT setting out.)"""
    sc = scenario(141, schedulers=("pbt-every-step",))
    with simulate(curve, SPACE,
                  TuneConfig(metric="loss", mode="min", num_samples=sc.num_samples, time_budget_s=120,
                             scheduler=scheduler(sc.scheduler, sc.max_iterations)),
                  RunConfig(checkpoint_config=CheckpointConfig(checkpoint_frequency=sc.checkpoint_frequency,
                                                               checkpoint_at_end=sc.checkpoint_at_end)),
                  max_iterations=sc.max_iterations, seed=sc.seed, faults=Faults(), cpus=2,
                  max_deliveries=20_000) as sim:  # (~2,000 until the budget runs out)
        assert not sim.hung and sim.error is None, (sim.hang_reason, sim.error)
        assert 120 <= sim.simulated_time_s < 130, sim.simulated_time_s
        h = [_histories(sim)[f"sim00141_0000{i}"] for i in range(4)]
    assert all(max(x) < sc.max_iterations for x in h), h  # nobody reached its end
    for cycling in h[:2]:  # the same iteration, over and over
        assert Counter(cycling).most_common(1)[0][1] > 30, cycling
    assert all(len(x) <= 4 for x in h[2:]), h  # the clones' sources: paused early, never run again


def test_a_stop_that_overtakes_the_start_of_its_run_is_carried_out() -> None:
    """The budget runs out just after a trial was started; with messages overtaking each other (``latency``
    faults, as Thespian's TCP transport does), its ``TrialStop`` reaches the trial's actor before its
    ``RunTrial``. The actor keeps the stop until the run starts (``actors._engine.early``): the run ends
    at once, nobody is killed, and the experiment ends ~3 s after its budget. Dropped, as before, the run went
    on until the controller killed its process after ``trial_stop_grace_s`` (10 s): 11.6 s past the budget."""
    sc = scenario(54)  # (a deciding scheduler that lets trials run ahead; latency faults: up to 2 s)
    faults, _ = draw_faults(sc.faults, random.Random(sc.seed))
    with simulate(curve, SPACE,
                  TuneConfig(metric="loss", mode="min", num_samples=-1, time_budget_s=8.5,
                             scheduler=scheduler(sc.scheduler, sc.max_iterations, sc.checkpoints)),
                  RunConfig(failure_config=FailureConfig(max_failures=sc.max_failures)),
                  max_iterations=sc.max_iterations, seed=sc.seed, faults=faults, checkpoints=sc.checkpoints,
                  cpus=3) as sim:
        assert not sim.hung and sim.error is None, (sim.hang_reason, sim.error)
        killed = [pid for pid, code in sim.world.dead.items() if code == -9]
        assert not killed and sim.simulated_time_s < 8.5 + 5, (killed, sim.simulated_time_s)
