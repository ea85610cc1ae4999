"""The engine's hang-freedom and no-loss tests: thousands of seeded simulated experiments with faults
(actors.testing.simulate), each checked against actors.testing.invariants after it ends; an aborted
one must restore and finish. One seed fixes the scheduler, the faults, the size and the message
interleaving (tests/_sim_scenarios.py), so a failure names a reproducible seed."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from actors.testing import Faults
from actors.testing.invariants import violations
from tests._sim_scenarios import (
    FAULTS,
    LONG_STEPS,
    SCHEDULERS,
    TRANSPORT,
    Scenario,
    budget,
    check,
    concurrency,
    run,
    scenario,
)

SEEDS = int(os.environ.get("AUDITION_SIM_SEEDS", "2000"))
# Known engine issues the sweep tolerates, as (scheduler, fault kind, problem text); each has a strict
# xfail reproduction below. (HyperBand's restore after an abort mid-decision and a PBT clone pending when its
# trial fails were fixed on 2026-12-04; their seeds are tests below.)
KNOWN: tuple[tuple[str, str, str], ...] = ()


@pytest.fixture(autouse=True)
def _quiet() -> object:
    """Member losses and aborts log warnings on every run; thousands of them are noise here."""
    logger = logging.getLogger("audition")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def _problems(sc: Scenario, space: dict[str, Any] | None = None, duplicate_p: float = 0.0,
              lost_p: float = 0.0, transport: dict[str, Any] | None = None,
              draw: Callable[[int], dict[str, Any]] | None = None) -> list[str]:
    """``draw``: more of ``check``'s arguments, from the seed (``budget``, ``concurrency``)."""
    try:
        found = check(sc, space=space, duplicate_p=duplicate_p, lost_p=lost_p, transport=transport,
                      **(draw(sc.seed) if draw is not None else {}))
    except Exception as exc:  # the simulator or a check itself crashed: as much a failure
        return [f"raised {exc!r}"]
    return [p for p in found if not any(sc.scheduler == s and sc.faults == f and k in p for s, f, k in KNOWN)]


def _sweep(seeds: range, space: dict[str, Any] | None = None, duplicate_p: float = 0.0,
           lost_p: float = 0.0, transport: dict[str, Any] | None = None,
           schedulers: tuple[str, ...] = SCHEDULERS, draw: Callable[[int], dict[str, Any]] | None = None
           ) -> list[str]:
    """The failures among these seeds, each with its seed and scenario (runs in a worker process)."""
    logging.getLogger("audition").setLevel(logging.ERROR)
    failures = []
    for seed in seeds:
        sc = scenario(seed, schedulers)
        found = _problems(sc, space, duplicate_p, lost_p, transport, draw)
        if found:
            failures.append(f"seed {seed} {sc}:\n    " + "\n    ".join(found[:5]))
    return failures


def _sweep_all(seeds: int | range, space: dict[str, Any] | None = None, duplicate_p: float = 0.0,
               lost_p: float = 0.0, transport: dict[str, Any] | None = None,
               schedulers: tuple[str, ...] = SCHEDULERS, draw: Callable[[int], dict[str, Any]] | None = None
               ) -> None:
    started = time.perf_counter()
    seeds = range(seeds) if isinstance(seeds, int) else seeds
    workers = max(1, min(2, os.cpu_count() or 1))  # simulations are CPU-bound and independent: use the cores
    chunks = [seeds[i::workers] for i in range(workers)]
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        sweep = functools.partial(_sweep, space=space, duplicate_p=duplicate_p, lost_p=lost_p, transport=transport,
                                  schedulers=schedulers, draw=draw)
        failures = [f for part in pool.map(sweep, chunks) for f in part]
    failures.sort(key=lambda f: int(f.split()[1]))
    elapsed = time.perf_counter() - started
    print(f"{len(seeds)} simulations in {elapsed:.1f}s ({len(seeds) / elapsed:.1f}/s)")
    named = "SILENT_DEATHS" if transport is SILENT_DEATHS else "TRANSPORT"
    again = "check(scenario(seed" + (f", {schedulers}" if schedulers != SCHEDULERS else "") + ")" + (
        ", space=LONG_STEPS" if space is not None else "") + (
        f", duplicate_p={duplicate_p}" if duplicate_p else "") + (f", lost_p={lost_p}" if lost_p else "") + (
        f", transport={named}" if transport else "") + (f", **{draw.__name__}(seed)" if draw else "") + ")"
    assert not failures, f"{len(failures)} of {len(seeds)} seeds broke an invariant (reproduce with " \
        f"tests/_sim_scenarios.{again}):\n" + "\n".join(failures[:20])


SWEEP_PARTS = 4  # the sweep as several tests, so the suite's workers share it and none nears the timeout


@pytest.mark.slow
@pytest.mark.parametrize("part", range(SWEEP_PARTS))
def test_seeded_simulations_with_faults_keep_every_invariant(part: int) -> None:
    """SEEDS simulations (2,000 by default, a quarter in each part) over every scheduler x fault kind:
    each ends, keeps contiguous histories, loses no reported row, ends every trial in a final status,
    and restores when it was aborted."""
    _sweep_all(range(part, SEEDS, SWEEP_PARTS))


@pytest.mark.slow
def test_seeded_simulations_with_long_steps_keep_every_invariant() -> None:
    """The same scenarios with steps of 3-12 simulated seconds (an eighth as many seeds; 20,000 ran clean on
    2026-12-05), where most of the controller's ticks are idle and not delivered (``skip_idle_ticks=True``)."""
    _sweep_all(max(1, SEEDS // 8), LONG_STEPS)


DUPLICATE_P = 0.3


@pytest.mark.slow
def test_seeded_simulations_with_copies_of_trial_messages_keep_every_invariant() -> None:
    """The scenarios with 30% of the trials' numbered messages arriving a second time 5 simulated seconds
    later, as the trial actor's re-sends do (``TrialActor._liveness``; an eighth as many seeds): the core
    drops each copy by its number, before or after the run's end, so histories stay contiguous and no row
    is logged twice. With copies of released messages delivered again, 27 of the first 60 seeds fail."""
    _sweep_all(max(1, SEEDS // 8), duplicate_p=DUPLICATE_P)


def test_copies_are_delivered_and_keep_every_invariant() -> None:
    """A few seeds in the fast suite: copies are queued (their draws change the interleaving too, so the
    outcome may differ from the same seed's without them), and every invariant holds."""
    copies = 0
    for seed in range(0, 40, 4):
        sc = scenario(seed, kinds=("latency",))
        sim = run(sc, duplicate_p=0.5)
        try:
            copies += sim.world.copies
            assert not violations(sim, num_samples=sc.num_samples, may_abort=sc.may_abort), seed
        finally:
            sim.discard()
    assert copies >= 50, copies


LOST_P = 0.3


@pytest.mark.slow
def test_seeded_simulations_with_trial_messages_lost_keep_every_invariant() -> None:
    """The scenarios with 30% of the trials' numbered messages lost on their first send (an eighth as many
    seeds): each trial actor's periodic look sends them again (``actors._engine.outbox``, the real actor's
    object), so every experiment still ends with contiguous histories. With the actor's re-sends off, most
    seeds hang (``test_sim_catches_bugs.py``)."""
    _sweep_all(max(1, SEEDS // 8), lost_p=LOST_P)


def test_lost_messages_are_sent_again_and_keep_every_invariant() -> None:
    """A few seeds in the fast suite: messages are lost, sent again by the actors' looks, and every invariant
    holds (the same seeds with the re-sends off hang: ``test_sim_catches_bugs.py``)."""
    lost = resent = 0
    for seed in range(0, 40, 4):
        sc = scenario(seed, kinds=("trials",))
        sim = run(sc, lost_p=0.3)
        try:
            lost, resent = lost + sim.world.lost, resent + sim.world.resent
            assert not violations(sim, num_samples=sc.num_samples, may_abort=sc.may_abort), seed
        finally:
            sim.discard()
    assert lost >= 20 and resent >= lost, (lost, resent)


@pytest.mark.slow
def test_seeded_simulations_with_every_transport_fault_at_once_keep_every_invariant() -> None:
    """The scenarios with ``TRANSPORT`` besides their own faults: messages lost, copied, late and overtaking
    each other, all at once (an eighth as many seeds; 10,000 ran clean on 2026-12-07 once the three bugs
    below were mended, which this sweep found at seeds 202, 658 and 2419 of such sweeps)."""
    _sweep_all(max(1, SEEDS // 8), transport=TRANSPORT)


# deaths nobody is told of, on top: a twentieth of the steps end in a process death, half the exit notices are
# lost, and messages straggle 20 s (past the 10 s heartbeat timeout) with latencies up to 3 s
SILENT_DEATHS: dict[str, Any] = {**TRANSPORT, "trial_die_p": 0.05, "lost_exit_p": 0.5, "straggler_s": 20.0,
                                 "latency_s": (0.0, 3.0)}


@pytest.mark.slow
def test_seeded_simulations_with_silent_deaths_and_slow_messages_keep_every_invariant() -> None:
    """``SILENT_DEATHS`` on every scenario (an eighth as many seeds). Before the members' probes looked up their
    trial processes (``ProbeCheck``), 237 of 4,000 such seeds hung: a trial process that died on another member
    with its exit notice lost was never found."""
    _sweep_all(max(1, SEEDS // 8), transport=SILENT_DEATHS)


@pytest.mark.slow
def test_seeded_simulations_ended_by_a_time_budget_keep_every_invariant() -> None:
    """Every scenario with ``TuneConfig(time_budget_s)`` of 1-15 simulated seconds, a third of them sampling
    endlessly (``num_samples=-1``) until it ends them (an eighth as many seeds). Before, a simulation's budget ran
    on the wall clock and never ended one. The sweep found a stop that overtook its trial's start dropped (the
    run went on until it was killed 10 s later: 7 of 1,260 seeds, all with latency faults), so it also checks
    that no trial is killed."""
    _sweep_all(max(1, SEEDS // 8), draw=budget)


@pytest.mark.slow
def test_seeded_simulations_with_a_concurrency_limit_keep_every_invariant() -> None:
    """Every scenario with ``max_concurrent_trials`` of 1 or 2, with every transport fault at once (an eighth as many
    seeds). It found a state written at a trial's end before the searcher heard of that end: restored after an
    abort, the generator still counted the trial running and suggested nothing more (2 of 400 seeds)."""
    _sweep_all(max(1, SEEDS // 8), transport=TRANSPORT, draw=concurrency)


@pytest.mark.slow
def test_seeded_synchronous_pbt_simulations_keep_every_invariant() -> None:
    """Synchronous PBT (all trials wait at each sync point) over every fault kind, with silent deaths and slow
    messages besides (an eighth as many seeds: its own sweep, so the other sweeps' seeds keep their scenarios)."""
    _sweep_all(max(1, SEEDS // 8), transport=SILENT_DEATHS, schedulers=("pbt-synch",))


@pytest.mark.parametrize("seed, extra", [
    (495, {"transport": SILENT_DEATHS}),
    (187, {"space": LONG_STEPS, "transport": SILENT_DEATHS}),
    (674, {"callback_checkpoint_p": 0.3, "transport": SILENT_DEATHS}),
])
def test_a_clone_whose_run_dies_at_once_goes_on_from_its_sources_checkpoint(seed: int, extra: dict[str, Any]) -> None:
    """Synchronous PBT with silent deaths: a trial's pause save committed, its notice lost with its process; the
    sync then cloned it, and the clone's first run died before it reported. The retry's recovery found the lost
    save (of the lineage the clone left) and resumed from it with the clone's config, logging its row again: a
    history of two runs mixed. Now an exploit abandons what the trial committed unseen
    (``ExperimentIO.abandon_unseen``)."""
    assert check(scenario(seed, schedulers=("pbt-synch",)), **extra) == []


def test_a_clone_abandons_an_unseen_save_of_an_earlier_run() -> None:
    """Seed 329 of PBT exploiting at every step, with silent deaths: a pause ended without its notice (its save
    committed unseen), the next run ended cleanly in an exploit; the run was aborted and restored from the state
    before, which resumed the clone from that unseen save and dropped a row the state had logged."""
    assert check(scenario(329, schedulers=("pbt-every-step",)), transport=SILENT_DEATHS) == []


def test_an_abort_that_never_gets_the_schedulers_state_keeps_the_state_stored_before() -> None:
    """Seed 103 of synchronous PBT with silent deaths: a storage failure aborts the run, and the scheduler's state
    for the abort's table straggles past the 5 s the abort waits. The table (a trial TERMINATED) was written
    beside the scheduler's state of a second before (the trial still live), so the restored PBT waited for ever
    at its sync point for that trial ("the scheduler chose no trial to run"). Now the state stored before,
    whose table and scheduler state match, is kept (``ExperimentIO.scheduler_state_lost``)."""
    assert check(scenario(103, schedulers=("pbt-synch",)), transport=SILENT_DEATHS) == []


@pytest.mark.parametrize("seed, transport, what", [
    # an earlier run's TrialProcess, late, hid the running one's process from the liveness check: its death
    # (exit notice lost) went unseen and the experiment hung (Upkeep.process)
    (202, {"lost_p": 0.3, "duplicate_p": 0.3, "straggler_p": 0.05}, "late process notice"),
    # a checkpoint's record failed to write mid-batch and a later batch of the trial was logged on the way
    # out: a gap in its history (ResultPath.unwritten)
    (658, {"lost_p": 0.5, "straggler_p": 0.2, "latency_s": (0.0, 1.0)}, "write failed mid-batch"),
    # a restore resumed from a checkpoint of a run killed while its save was on the way, whose rows the
    # history (a later run's) did not hold (recovery.choose)
    (2419, {"lost_p": 0.5, "straggler_p": 0.2, "latency_s": (0.0, 1.0)}, "another run's checkpoint"),
    # a dead run's late question to the scheduler marked the waiting trial RUNNING in its mirror for good: the
    # scheduler never chose it again (SchedulerEndpoint.decide)
    (2288, SILENT_DEATHS, "a late question"),
    # PBT chose a trial that waits for its clone's checkpoint, could not start it, and was asked again at once,
    # 651 times: a busy loop in a real run (Scheduling.on_reply: such a choice counts as declined)
    (60, {"lost_p": 0.3}, "a chosen trial that cannot start yet"),
])
def test_seeds_that_found_engine_bugs_keep_every_invariant(seed: int, transport: dict[str, Any], what: str) -> None:
    assert check(scenario(seed), transport=transport) == [], what


@pytest.mark.parametrize("seed", [400, 790])
def test_a_restore_after_a_state_written_at_a_trials_end_goes_on_with_a_concurrency_limit(seed: int) -> None:
    """The concurrency sweep's finds (``max_concurrent_trials`` 1 or 2, every transport fault): the run aborted
    (a scheduler or storage fault) after a trial's end had written the last state it stored, which held the trial
    TERMINATED beside a generator that had not heard of its end; the restored generator counted it running and
    suggested nothing, and the restored run aborted. The searcher now hears of an end before the state is
    written (``TrialRuns.ended``)."""
    assert check(scenario(seed), transport=TRANSPORT, **concurrency(seed)) == []


def test_a_pbt_clone_whose_source_lost_its_save_is_skipped() -> None:
    """Seed 746 with ``max_failures=1`` and silent deaths: a top trial's exploit save died with its run, and PBT
    (``wait_for_checkpoint=True``) cloned it twice; each clone restarted the trial from its own checkpoint with the
    source's perturbed config, and after a failed retry its last result (the checkpoint's) fell behind a row of
    that clone lineage ("last result is iteration 3 but the history ends at 4"). Such an exploit is now skipped,
    as Ray's (``Scheduling.on_reply``, ``CloneWaits.landed``)."""
    assert check(dataclasses.replace(scenario(746), max_failures=1), transport=SILENT_DEATHS) == []


def test_a_restored_hyperband_run_whose_paused_trial_waits_for_a_slow_one_ends() -> None:
    """Seed 338 with long steps and silent deaths (HyperBand, function trainables): restored, one trial runs
    12 s steps while another waits PAUSED at its milestone and a slot is free. The core asked the scheduler
    to choose again the moment it declined, ~1,300 round trips a simulated second, so the restored run hit
    its delivery cap (reported as hung); now it asks once another event came (``Scheduling.ask_again``)."""
    assert check(scenario(338), space=LONG_STEPS, transport=SILENT_DEATHS) == []


def test_no_row_is_written_after_a_trials_batch_failed_to_write() -> None:
    """Seed 219 (HyperBand, a storage failure): a trial's first batch is lost, so its next six arrive with
    it 10 s later and are logged in a row; writing the third fails and the experiment ends. The batches
    after it were written on the way out, leaving iteration 3 out of the history ([1, 2, 4, 5, 6, 7]);
    now none is written after a failed one (``ResultPath.unwritten``), and the restore takes those rows
    from the checkpoints' manifests."""
    assert check(scenario(219), lost_p=0.5) == []


def _sweep_callbacks(seeds: range) -> list[str]:
    logging.getLogger("audition").setLevel(logging.ERROR)
    failures = []
    for seed in seeds:
        sc = scenario(seed)
        try:
            found = check(sc, callback_checkpoint_p=CALLBACK_CHECKPOINT_P)
        except Exception as exc:
            found = [f"raised {exc!r}"]
        if found:
            failures.append(f"seed {seed} {sc}:\n    " + "\n    ".join(found[:5]))
    return failures


CALLBACK_CHECKPOINT_P = 0.3


@pytest.mark.slow
def test_seeded_simulations_with_driver_callbacks_keep_every_invariant() -> None:
    """The scenarios with a driver ``Callback`` (an eighth as many seeds; 15,000 ran clean on 2026-12-05): the
    controller holds each result batch's decision for the driver's answer, and the callback asks for a
    checkpoint 30% of the time."""
    seeds = max(1, SEEDS // 8)
    workers = max(1, min(2, os.cpu_count() or 1))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        failures = [f for part in pool.map(_sweep_callbacks, [range(i, seeds, workers) for i in range(workers)])
                    for f in part]
    assert not failures, f"{len(failures)} of {seeds} seeds broke an invariant (reproduce with tests/" \
        "_sim_scenarios.check(scenario(seed), callback_checkpoint_p=0.3)):\n" + "\n".join(failures[:20])


def test_every_scheduler_and_fault_kind_is_in_the_sweep() -> None:
    """The sweep's seeds cover every (scheduler, fault kind) pair many times over."""
    pairs = Counter((scenario(s).scheduler, scenario(s).faults) for s in range(SEEDS))
    assert set(pairs) == {(s, f) for s in SCHEDULERS for f in FAULTS}
    assert min(pairs.values()) >= SEEDS // (len(SCHEDULERS) * len(FAULTS)) - 1


def test_quick_sweep() -> None:
    """A few seeds of every fault kind in the fast suite (the slow sweep runs thousands)."""
    failures = [f"seed {s}: {p}" for s in range(0, 90, 2) for p in _problems(scenario(s))]
    assert not failures, "\n".join(failures)


def test_the_checks_read_what_storage_keeps() -> None:
    """A retried trial's history is what storage keeps after the retry rewound it to its checkpoint:
    contiguous, each run's rows counted from 1 by iterations_since_restore."""
    sc = Scenario(3, "fifo", "lost_exits", 6, 8, 2, False, -1)
    sim = run(sc)
    try:
        assert violations(sim, num_samples=6, may_abort=False) == []
        retried = [r for r in sim.results if r.num_failures]
        assert retried  # lost_exits kills trials: some were retried from their checkpoints
        for r in retried:  # a run restarted from a checkpoint: its rows count iterations_since_restore from 1
            rows = r.metrics_history
            assert [h["training_iteration"] for h in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 8
        assert any(h["iterations_since_restore"] == 1 for r in retried for h in r.metrics_history[1:])
    finally:
        sim.discard()


# ---------------------------------------------------------------- engine bugs the sweep found (regressions)

def test_a_rewound_run_that_reports_nothing_keeps_metrics_its_history_has() -> None:
    # trial 4: runs 1..8 (checkpoint at 8), a poisoned message fails it, run 3 reports 9, is failed
    # again, the rewind to 8 drops row 9, run 4 fails before reporting: ERROR with metrics at 9
    sc = Scenario(193, "median", "poison", 5, 8, 2, False, 3)
    sim = run(sc)
    try:
        assert violations(sim, num_samples=5, may_abort=False) == []
    finally:
        sim.discard()


MEMBERS = {"m1": {"cpu": 2}, "m2": {"cpu": 2}}


def test_a_member_lost_during_a_decision_logs_no_row_twice() -> None:
    sc = Scenario(358, "median", "members", 4, 5, 2, False, -1)
    sim = run(sc, faults=Faults(member_loss=((2.035429924400942, "m1", -1.0),), trial_die_p=0.02), members=MEMBERS)
    try:
        assert violations(sim, num_samples=4, may_abort=False) == []
    finally:
        sim.discard()


def test_a_member_back_before_its_heartbeat_timeout_gets_no_trial_on_a_dead_actor() -> None:
    sc = Scenario(1435, "fifo", "members", 5, 7, 1, False, 3)
    sim = run(sc, faults=Faults(member_loss=((4.272223633906481, "m1", 5.0),), trial_die_p=0.02), members=MEMBERS)
    try:
        assert not sim.hung, sim.hang_reason
    finally:
        sim.discard()


def test_hyperband_restores_after_a_storage_failure_during_a_decision() -> None:
    """Seed 1867 (found by the sweep, an xfail until 2026-12-04): a storage failure while a RESULT
    reply is applied aborts with the table frozen before that decision, but the scheduler's state is
    saved after it. Restored, the table resumes a trial HyperBand had stopped; HyperBand now stops it
    when it is added again (before: never chosen, 'the scheduler chose no trial to run'), and the
    trial's last result is its rewound history's last row (before: the stale iteration 5)."""
    from tests._sim_scenarios import check

    assert check(Scenario(1867, "hyperband", "storage", 4, 5, 3, True, 3)) == []


@pytest.mark.parametrize("seed", [1467, 2412, 3546, 3924, 30384, 31329, 32337, 39204])
def test_a_pbt_clone_pending_when_its_trial_fails_is_applied_whole(seed: int) -> None:
    """PBT with poisoned messages (found by the sweep, an xfail until 2026-12-04; the seeds are the ones
    that failed in 2000-40000). Seed 1467: trial 2's exploit at iteration 6 is pending when its TrialStop
    cannot be delivered. The run's failure now ends it as the exploit's pause, as Ray 2.60's PBT applies
    the exploit at once and drops what the trial's actor does after: the clone's config, EXPLOIT mark and
    pbt_exploit row with the source's checkpoint (before: a retry from the source's checkpoint with the
    old config and no lineage, so the history jumped from 6 to 8)."""
    sc = scenario(seed)
    assert (sc.scheduler, sc.faults) == ("pbt", "poison")
    assert check(sc) == []


@pytest.mark.parametrize("seed", [2176, 10109, 11054])
def test_a_storage_failure_while_aborting_ends_the_run_with_the_state_saved_before(seed: int) -> None:
    """Found by the sweep over seeds 2000-40000 (2026-12-05). Seed 2176: a storage failure starting a trial
    aborts the run, and a second one fails the abort's snapshot of the table (``freeze``). That error
    escaped the core (before: ``simulate`` raised ``StorageError``; a real controller's handler crashed).
    The run now ends with both errors, and no later table is written, so the trials the abort halts are
    not saved as ended: the state saved before restores."""
    sc = scenario(seed)
    assert sc.faults == "storage"
    assert check(sc) == []


@pytest.mark.parametrize("seed", [2195, 6892, 20549])
def test_a_pbt_clone_that_dies_keeps_the_rows_it_committed(seed: int) -> None:
    """Found by the sweep over seeds 2000-40000 (2026-12-05). Seed 2195: trial 0 (history 1..6) clones a
    source's checkpoint at iteration 5; the clone's process dies after committing its checkpoints at 6 and
    7 (with their results), before its messages arrive. The rows it committed are recovered from their
    manifests and appended as the clone's lineage, 6 then 7 (before: read against the trial's own last
    row, 6, so only 7 was taken: the lineage lost its first row and its rows did not follow each other)."""
    sc = scenario(seed)
    assert sc.scheduler == "pbt"
    assert check(sc) == []


def test_a_retry_that_drops_all_of_a_clones_rows_keeps_the_trials_own_last_result() -> None:
    """Found by the sweep (seed 17224): trial 2 (history 1, 2) clones trial 0's checkpoint at iteration 4,
    reports 5 and fails; the retry restores that checkpoint and drops row 5. Its last result is its own row
    2 again, as when the clone started (before: the checkpoint's, trial 0's result at 4 with trial 0's id and
    config, which ``Result.metrics`` showed when the run was aborted right after)."""
    sc = scenario(17224)
    assert sc.scheduler == "pbt"
    assert check(sc) == []
    sim = run(sc)
    try:
        metrics = next(r.metrics for r in sim.results if r.trial_id.endswith("_00002"))
        assert metrics["trial_id"].endswith("_00002") and metrics["training_iteration"] == 2
    finally:
        sim.discard()


@pytest.mark.parametrize("seed", [1378, 1514])
def test_a_trial_stopped_while_saving_for_a_callback_does_not_hold_up_the_end(seed: int) -> None:
    """Found by the first sweep with driver callbacks (2026-12-05). Seed 1378: trial 4's callback asks for a
    checkpoint at its result 3, and while that save is on its way another trial's result makes the scheduler
    stop trial 4. Its held batch, already answered, was kept as waiting for the driver's answer, and the
    experiment never ended (a real ``fit()`` would hang the same way)."""
    sc = scenario(seed)
    sim = run(sc, callback_checkpoint_p=CALLBACK_CHECKPOINT_P)
    try:
        assert not sim.hung, sim.hang_reason
        assert violations(sim, num_samples=sc.num_samples, may_abort=sc.may_abort) == []
    finally:
        sim.discard()


def test_a_restore_fills_the_result_its_saved_checkpoint_came_with_when_it_was_never_logged() -> None:
    """Found by the sweep over seeds 40000-80000 (seed 50684): trial 3's result 7 arrives with its checkpoint,
    and writing the row fails (storage): the run aborts with a state naming that checkpoint, whose row storage
    never got. Restored, the trial's history is filled from the checkpoints' manifests (the row travels in
    the manifest of the checkpoint committed with it) before it goes on from 7 (before: it resumed from 7
    with no row 7, its history 1..6, 8, ...)."""
    sc = scenario(50684)
    assert sc.faults == "storage"
    assert check(sc) == []
