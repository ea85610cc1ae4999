"""The simulator finds engine bugs: deliberately broken engines (patched for the duration of a test)
break an invariant of actors.testing.invariants within a few seeds, while the real engine keeps
every invariant on the same seeds.

(A) a trial's messages are not put back in send order; (B) messages from an earlier run of a trial
are accepted; (C) a scheduler hook's return value is merged before the pause_trial() it recorded
(the Ray Tune hang: pause_trial() + CONTINUE must pause at that result); (D) a trial actor that never
sends a lost message again; (E) a core that asks the scheduler to choose again at once after it declined
(a busy loop between the controller and the scheduler actor in a real run); (F) a trial actor that drops an
order which overtook the start of its run.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, search
from actors._driver.config import CheckpointConfig, FailureConfig
from actors._engine.early import EarlyOrders
from actors._engine.marks import MarkKind
from actors._engine.pool import ActorPool
from actors._engine.scheduling import Scheduling
from actors._shell.trial_actor import TrialActor
from actors.messages import HookKind, SchedulerReply
from actors.schedulers import Decision, FIFOScheduler
from actors.testing import Faults, simulate
from actors.testing.invariants import violations
from tests._sim_scenarios import Scenario, budget, check, run, scenario

K = 40  # seeds tried per broken engine


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("audition")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def _out_of_order(self: ActorPool, trial_id: str, run_id: int, seq: int, msg: Any) -> list[Any]:
    """(A): the current run's messages handled as they arrive, not in send order."""
    entry = self.inbox.get(trial_id)
    return [msg] if entry is not None and entry[0] == run_id else []


def _any_run(self: ActorPool, trial_id: str, run_id: int, seq: int, msg: Any) -> list[Any]:
    """(B): a message of an earlier run of the trial is put in the current run's sequence."""
    entry = self.inbox.get(trial_id)
    return [] if entry is None else entry[1].push(seq, msg)


def _caught(seeds: range, faults: Faults) -> list[int]:
    """The seeds whose FIFO simulation (batched results) with these faults breaks an invariant."""
    out = []
    for seed in seeds:
        sim = run(Scenario(seed, "fifo", "trials", 6, 8, 2, False, -1), faults=faults)
        try:
            if violations(sim, num_samples=6, may_abort=False):
                out.append(seed)
        finally:
            sim.discard()
    return out


@pytest.mark.parametrize("broken, seeds, faults", [
    # A: a result batch overtaken by its TrialEnded (sent together at the trainable's end) is dropped:
    # lost rows (a checkpoint past the history, a TERMINATED trial without its done row)
    (_out_of_order, range(10), Faults(trial_fail_p=0.04, trial_die_p=0.04)),
    # B: a dead run's batch arriving after its restart (a straggler) fills the new run's sequence number,
    # so the new run's own batch is dropped as a duplicate: a gap, lost rows, or a hang. (Uniform latency
    # alone made that too rare to rely on: 0 to 2 of 40 seeds.)
    (_any_run, range(K), Faults(latency_s=(0.0, 0.5), trial_die_p=0.3, straggler_p=0.1, straggler_s=6.0)),
], ids=["A-send-order", "B-earlier-run"])
@pytest.mark.slow
def test_a_broken_trial_inbox_is_caught(monkeypatch: pytest.MonkeyPatch, broken: Any, seeds: range,
                                        faults: Faults) -> None:
    assert _caught(seeds, faults) == []  # the real engine keeps every invariant on these seeds
    monkeypatch.setattr(ActorPool, "in_order", broken)
    caught = _caught(seeds, faults)
    print(f"{broken.__name__}: caught in {len(caught)}/{len(seeds)} seeds (first: {caught[:1]})")
    assert caught, f"the broken engine ({broken.__doc__}) passed all {len(seeds)} seeds"


# ---------------------------------------------------------------- (C) pause_trial() + CONTINUE

PAUSE_AT = 2  # the iteration at which PausingScheduler pauses every trial once


class PausingScheduler(FIFOScheduler):
    """Calls pause_trial() inside on_trial_result at PAUSE_AT and returns CONTINUE: Ray Tune's
    contract (and audition's) is that the trial pauses at that very result."""

    tolerates_batching = False

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Decision:
        if result["training_iteration"] == PAUSE_AT:
            controller.pause_trial(trial)
        return Decision.CONTINUE


def _decision_before_actions(orig: Any) -> Any:
    """(C): a RESULT reply's decision is applied first, the actions recorded in the hook after."""

    def on_reply(self: Scheduling, kind: HookKind, trial_id: str | None, run_id: int, batch_seq: int,
                  msg: SchedulerReply) -> None:
        if kind is not HookKind.RESULT or not msg.actions:
            orig(self, kind, trial_id, run_id, batch_seq, msg)
            return
        orig(self, kind, trial_id, run_id, batch_seq, dataclasses.replace(msg, actions=()))
        if not self.ops.finished:  # the recorded actions, as a reply of a hook that decides nothing
            orig(self, HookKind.ADD, trial_id, run_id, batch_seq,
                 dataclasses.replace(msg, kind=HookKind.ADD, decision=Decision.CONTINUE))

    return on_reply


def _paused_where_asked(seed: int) -> list[str]:
    """Invariants, plus: every trial was paused at the result whose hook called pause_trial(): its
    PAUSE mark is at PAUSE_AT and the next row comes from a run restored from that pause's checkpoint."""
    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["lr"] / i}

    sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                   TuneConfig(metric="loss", mode="min", num_samples=4, scheduler=PausingScheduler()),
                   RunConfig(failure_config=FailureConfig(max_failures=0),
                             checkpoint_config=CheckpointConfig()), max_iterations=5, seed=seed, cpus=2)
    try:
        out = violations(sim, num_samples=4, may_abort=False)
        for r in sim.results or ():
            marks = [m for m in sim.world.core.table.trials[r.trial_id].marks if m.kind is MarkKind.PAUSE]
            if [m.iteration for m in marks] != [PAUSE_AT]:
                out.append(f"trial {r.trial_id}: paused at {[m.iteration for m in marks]}, asked at {PAUSE_AT}")
            row = r.metrics_history[PAUSE_AT] if len(r.metrics_history) > PAUSE_AT else {}
            if row.get("iterations_since_restore") != 1:
                out.append(f"trial {r.trial_id}: row {PAUSE_AT + 1} is not the first of a run resumed from the "
                           f"pause at {PAUSE_AT} (iterations_since_restore {row.get('iterations_since_restore')})")
        return out
    finally:
        sim.discard()


def test_a_decision_merged_before_its_recorded_pause_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = range(10)
    assert [s for s in seeds if _paused_where_asked(s)] == []
    monkeypatch.setattr(Scheduling, "on_reply", _decision_before_actions(Scheduling.on_reply))
    caught = [s for s in seeds if _paused_where_asked(s)]
    print(f"decision before its recorded pause: caught in {len(caught)}/{len(seeds)} seeds")
    assert caught, "the broken engine (decision before the recorded pause) passed every seed"


def _restored_losses(seeds: range) -> list[int]:
    """The seeds whose aborted HyperBand simulation without checkpoints restores with a trial that never
    runs again missing rows the saved state had logged."""
    from actors.schedulers import HyperBandScheduler
    from actors.testing.invariants import restore_violations
    from tests._sim_scenarios import SPACE, curve

    out = []
    for seed in seeds:
        sim = simulate(curve, SPACE, TuneConfig(metric="loss", mode="min", num_samples=8,
                                                scheduler=HyperBandScheduler(max_t=8, reduction_factor=2)),
                       RunConfig(failure_config=FailureConfig(max_failures=-1)), max_iterations=10, seed=seed,
                       faults=Faults(abort_at_s=6.0 + seed % 7), cpus=3, checkpoints=False)
        again = None
        try:
            problems = violations(sim, num_samples=8)
            if not problems and sim.error is not None:
                found, again = restore_violations(sim, curve, max_iterations=10, num_samples=8, seed=seed,
                                                  checkpoints=False)
                problems += found
            if problems:
                out.append(seed)
        finally:
            sim.discard()
            if again is not None:
                again.discard()
    return out


def test_a_restore_that_drops_a_paused_trials_logged_rows_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """(D) The twenty-sixth session's restore bug: a trial paused past its last checkpoint (none, with
    function trainables that never checkpoint) lost the rows the saved state had logged, and when its
    scheduler stopped it before it ran again (HyperBand's halving) it ended without them."""
    import actors._shell.restore_storage as restore_storage

    seeds = range(6)
    assert _restored_losses(seeds) == []
    monkeypatch.setattr(restore_storage, "_exploited", lambda row: True)  # paused trials rewound like the others
    caught = _restored_losses(seeds)
    print(f"paused trial's logged rows dropped on restore: caught in {len(caught)}/{len(seeds)} seeds")
    assert caught, "the broken restore (a paused trial's logged rows dropped) passed every seed"


# ---------------------------------------------------------------- (D) lost messages never sent again


@pytest.mark.slow
def test_a_trial_actor_that_never_sends_again_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """(D): with 30% of the trials' numbered messages lost on their first send, the real engine (the trial
    actor's outbox sends each again, ``actors._engine.outbox``) keeps every invariant; with its re-sends
    off (``TrialActor.resends = 0``: the simulated trial runs the same ``Outbox``), the controller waits
    for ever for a message that never comes, and the simulations hang."""
    assert _caught(range(10), Faults(lost_p=0.3)) == []
    monkeypatch.setattr(TrialActor, "resends", 0)
    caught = _caught(range(10), Faults(lost_p=0.3))
    print(f"no re-sends: caught in {len(caught)}/10 seeds")
    assert len(caught) >= 5, caught


# ---------------------------------------------------------------- (E) a declined choice asked again at once


def _declined_choices_asked_again(seeds: range) -> list[int]:
    out = []
    for seed in seeds:
        sc = scenario(seed, schedulers=("hyperband",), kinds=("trials",))
        sim = run(sc)
        try:
            if any("busy loop" in v for v in violations(sim, num_samples=sc.num_samples, may_abort=False)):
                out.append(seed)
        finally:
            sim.discard()
    return out


def test_a_core_that_asks_again_at_once_after_a_declined_choice_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """(E): HyperBand declines to choose while its paused trials wait for a slower one. The real core asks again
    once another event came; broken so that the plugin's own CHOOSE answer counts as news (``Scheduling.note``),
    it asks again at once, as it did before 2026-12-07, and ``violations`` names the busy loop."""
    assert _declined_choices_asked_again(range(10)) == []
    monkeypatch.setattr(Scheduling, "note", lambda self, event: setattr(self, "heard", self.heard + 1))
    caught = _declined_choices_asked_again(range(10))
    print(f"asked again at once: caught in {len(caught)}/10 seeds")
    assert len(caught) >= 3, caught


# ---------------------------------------------------------------- (F) an order that overtook its run dropped


def _killed_after_budgets(seeds: range) -> list[int]:
    """Seeds whose run ended by a time budget (sampling endlessly, messages overtaking each other by up to 2 s)
    had to kill a trial that ignored its stop (``check`` reports it)."""
    out = []
    for seed in seeds:
        found = check(scenario(seed, kinds=("latency",)), **{**budget(seed), "endless": True})
        if any("killed" in p for p in found):
            out.append(seed)
    return out


@pytest.mark.slow
def test_a_trial_actor_that_drops_an_order_which_overtook_its_run_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """(F): a budget that runs out right after a start sends the new run a stop that may overtake its ``RunTrial``.
    The real actor keeps it until the run starts (``actors._engine.early``); broken so that it drops it, as it did
    before 2026-12-07, the run goes on until the controller kills it 10 s later, and the check names the kill."""
    assert _killed_after_budgets(range(40)) == []
    monkeypatch.setattr(EarlyOrders, "keep", lambda self, order: False)
    caught = _killed_after_budgets(range(40))
    print(f"early orders dropped: caught in {len(caught)}/40 seeds")
    assert len(caught) >= 2, caught
