"""actors.testing.simulate: the simulated trial plays the real protocol; whole experiments run
deterministically on the real core; faults are injected and survived or reported."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from actors import ExperimentAnalysis, RunConfig, TuneConfig, search
from actors._driver.config import CheckpointConfig, FailureConfig
from actors.messages import (
    EndReason,
    RunTrial,
    SaveKind,
    TrialEnded,
    TrialProceed,
    TrialProcess,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)
from actors.schedulers import ASHAScheduler, FIFOScheduler
from actors.testing import CurveTrainable, Faults, SimTrial, SimWorld, simulate
from actors.testing.sim_trial import Crash
from storage import StorageContext, read_manifest


def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": config["lr"] / i + 0.01 * i}


def _run(window: int = 2, **kw: Any) -> RunTrial:
    base: dict[str, Any] = dict(
        trial_id="t1", run_id=1, config={"lr": 0.5}, trainable=b"", checkpoint=None, start_iteration=0,
        start_time_total_s=0.0, window=window, storage_url=f"memory://simtest-{threading.get_ident()}",
        storage_options={}, experiment_name="exp", next_checkpoint_index=0)
    base.update(kw)
    return RunTrial(**base)


def test_sim_trial_plays_the_trial_actor_protocol() -> None:
    t = SimTrial(curve, pid=42, max_iterations=5)
    out = t.receive(_run(window=2, checkpoint_frequency=3, checkpoint_at_end=True), 0.0)
    started = {"date": "1970-01-01_00-00-00", "timestamp": 0, "pid": 42, "hostname": "simulated",
               "node_ip": "127.0.0.1"}  # Ray's auto-filled keys at the run's start, as the real actor sends them
    assert out == [TrialProcess("t1", 1, 42, started)] and t.step_at == 1.0  # a step lasts 1 s by default
    (r1,) = t.step_done(1.0)  # a slow trainable's result is sent alone, at once
    assert isinstance(r1, TrialResults) and r1.seq == 1 and r1.results[0]["training_iteration"] == 1
    (r2,) = t.step_done(2.0)  # the window (2) is full: sent, and the worker blocks
    assert r2.seq == 2 and t.blocked and t.step_at is None
    assert t.receive(TrialProceed("t1", 1, 1), 2.5) == [] and t.step_at == 3.5  # one result released
    (r3,) = t.step_done(3.5)  # iteration 3 checkpoints (checkpoint_frequency=3), committed for real
    assert r3.checkpoint is not None and r3.checkpoint.iteration == 3 and r3.results[0]["time_this_iter_s"] == 1.0
    # (the step's reported 1 s, as CurveTrainable reports it in fit(): not the 1.5 s since the last report)
    ctx = StorageContext(_run().storage_url)
    assert read_manifest(ctx, r3.checkpoint.path)["metadata"]["iteration"] == 3
    assert t.blocked and t.receive(TrialProceed("t1", 1, 2), 3.6) == [] and t.step_at == 4.6
    assert t.receive(TrialSave("t1", 1, SaveKind.PAUSE), 3.7) == []  # computing: acted on at the next report
    assert t.receive(TrialProceed("t1", 2, 3), 3.8) == []  # another run's: ignored
    r4, saved = t.step_done(4.6)
    assert (r4.seq, saved.seq) == (4, 5) and isinstance(saved, TrialSaved) and saved.checkpoint.iteration == 4
    assert t.receive(TrialProceed("t1", 1, 3), 4.7) == [] and t.step_at == 5.7
    (r5,) = t.step_done(5.7)
    assert r5.results[0]["done"] is True and r5.seq == 6  # max_iterations: the last result says done
    assert t.blocked  # its window is full: the trainable returns only once a result is released
    (end,) = t.receive(TrialProceed("t1", 1, 4), 6.0)
    assert isinstance(end, TrialEnded) and end.seq == 7 and end.reason is EndReason.COMPLETED
    assert end.started == started  # (the end may overtake TrialProcess: it carries them too, as the real one)
    assert end.checkpoint is not None and end.checkpoint.index == 2  # checkpoint_at_end committed
    assert t.receive(TrialStop("t1", 1), 6.1) == []  # after the end: ignored


def test_sim_trial_stop_resume_and_death() -> None:
    t = SimTrial(curve, pid=7)
    t.receive(_run(window=1), 0.0)
    t.step_done(1.0)
    r = t.receive(TrialStop("t1", 1, save=True), 1.1)  # blocked on its window: stops at once, saving
    assert [type(m) for m in r] == [TrialEnded] and r[0].reason is EndReason.STOPPED and r[0].seq == 2
    assert r[0].checkpoint is not None and r[0].checkpoint.iteration == 1
    # a new run from that checkpoint continues at its iteration, numbering from 1 again
    t.receive(_run(window=1, run_id=2, checkpoint=r[0].checkpoint, start_iteration=1, start_time_total_s=1.0,
                   next_checkpoint_index=1, checkpoint_frequency=1), 2.0)
    (res,) = t.step_done(3.0)
    row = res.results[0]
    assert (res.seq, row["training_iteration"], row["iterations_since_restore"], row["time_total_s"]) == (1, 2, 1, 2.0)
    t.receive(TrialProceed("t1", 2, 1), 3.1)
    assert t.step_done(4.1, Crash.DIE) == [] and t.dead  # died after committing iteration 3, before sending
    ctx = StorageContext(_run().storage_url)
    manifest = read_manifest(ctx, t.commits.latest.path)
    assert [r["training_iteration"] for r in manifest["metadata"]["results"]] == [3]  # kept for recovery
    assert t.receive(TrialProceed("t1", 2, 2), 4.1) == []


def test_sim_trial_keeps_unacknowledged_results_in_a_manifest_as_the_worker_encodes_them() -> None:
    """The rows a checkpoint keeps for recovery are encoded as a real worker's (``CheckpointCommits``, as
    ``result.json``): a set metric as its ``str``, as Ray's ``SafeFallbackEncoder`` writes it."""
    t = SimTrial(lambda config, i: {"loss": 1.0 / i, "tags": {"a"}}, pid=7)
    t.receive(_run(window=4, checkpoint_frequency=2, storage_url=f"memory://simset-{threading.get_ident()}"), 0.0)
    t.step_done(1.0)
    t.step_done(2.0)  # iteration 2 commits a checkpoint holding iterations 1 and 2, neither acknowledged
    manifest = read_manifest(StorageContext(f"memory://simset-{threading.get_ident()}"), t.commits.latest.path)
    assert [(r["training_iteration"], r["tags"]) for r in manifest["metadata"]["results"]] == [(1, "{'a'}"),
                                                                                              (2, "{'a'}")]


def test_sim_trial_stopped_with_a_save_mid_step_reports_that_step_then_saves_it() -> None:
    """As TrialRunner.request_stop(save=True) for a class trainable: the step being computed is
    reported and the end checkpoint holds it (a plain stop unwinds at the step without reporting)."""
    for save, rows, ckpt_at in ((True, [2], 2), (False, [], 1)):
        t = SimTrial(curve, pid=7)
        t.receive(_run(window=4), 0.0)
        (_first,) = t.step_done(1.0)
        assert t.receive(TrialStop("t1", 1, save=save), 1.5) == []  # mid-step: nothing yet
        out = t.step_done(2.0)
        results = [row["training_iteration"] for m in out if isinstance(m, TrialResults) for row in m.results]
        (end,) = [m for m in out if isinstance(m, TrialEnded)]
        assert results == rows and end.reason is EndReason.STOPPED
        assert (end.checkpoint.iteration if end.checkpoint else 1) == ckpt_at


def test_sim_trial_results_carry_the_runners_keys() -> None:
    """The simulated result has exactly the keys a real TrialRunner's result has (class trainable)."""
    import cloudpickle

    from actors._worker.channel import Command, EventKind
    from actors._worker.runner import TrialRunner

    trainable = CurveTrainable.make(curve, 3)
    msg = _run(window=1, trainable=cloudpickle.dumps(trainable))
    runner = TrialRunner(msg)
    runner.start()
    try:
        ev = runner.events.get(timeout=10)
        assert ev.kind is EventKind.RESULT and ev.result is not None
    finally:
        runner.send_command(Command.STOP)
        runner.thread.join(10)
    sim = SimTrial(curve, pid=1, max_iterations=3)
    sim.receive(msg, 0.0)
    (batch,) = sim.step_done(1.0)
    assert set(batch.results[0]) == set(ev.result)


def _asha(seed: int = 0, faults: Faults | None = None, samples: int = 12, **run: Any) -> Any:
    return simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                    TuneConfig(metric="loss", mode="min", num_samples=samples,
                               scheduler=ASHAScheduler(max_t=9, grace_period=1)),
                    RunConfig(**run), max_iterations=9, seed=seed, faults=faults, cpus=4)


def _table(sim: Any) -> list[tuple[Any, ...]]:
    return [(r.trial_id, r.status, r.metrics.get("training_iteration"), r.metrics.get("loss")) for r in sim.results]


def test_simulation_is_deterministic_per_seed() -> None:
    a, b, c = _asha(3), _asha(3), _asha(4)
    assert not a.hung and a.error is None and len(a.results) == 12
    assert _table(a) == _table(b) and a.deliveries == b.deliveries and a.simulated_time_s == b.simulated_time_s
    assert a.deliveries != c.deliveries
    for r in a.results:  # histories read back from storage: contiguous, as the last result says
        last = r.metrics["training_iteration"]
        assert [h["training_iteration"] for h in r.metrics_history] == list(range(1, last + 1))
    for sim in (a, b, c):
        sim.discard()


def test_a_simulation_used_as_a_context_manager_frees_its_files() -> None:
    """A sweep over many seeds must not keep every run's files in the process's memory store."""
    import fsspec

    store = fsspec.filesystem("memory").store
    with _asha(3) as sim:
        root = sim.storage_url.replace("memory://", "/").rstrip("/") + "/"
        assert sim.results.get_best_result().metrics["loss"] > 0
        assert any(p.startswith(root) for p in store)
    assert not any(p.startswith(root) for p in store)
    with pytest.raises(KeyError), _asha(3) as sim:  # and when the reading fails
        root = sim.storage_url.replace("memory://", "/").rstrip("/") + "/"
        raise KeyError("loss")
    assert not any(p.startswith(root) for p in store)


def test_stragglers_arrive_late_and_draw_nothing_when_off() -> None:
    """``Faults(straggler_p=)``: a message delayed by ``straggler_s`` on top of its latency; with none
    asked for, a latency is one draw as before, so every seed's interleaving is what it was."""
    for faults, draws in ((Faults(), 1), (Faults(straggler_p=0.5), 2)):
        world = SimWorld(None, curve, seed=7, faults=faults)
        expected = random.Random(7)
        for _ in range(draws):
            expected.random()
        world._latency()
        assert world.rng.getstate() == expected.getstate()
    plain = _asha(3)
    late = _asha(3, Faults(straggler_p=1.0, straggler_s=2.0))
    # every message 2 s late: a trial's step (1 s) and its decision round trip alone take >= 5 s more
    assert not late.hung and len(late.results) == 12
    assert late.simulated_time_s > plain.simulated_time_s + 5
    for sim in (plain, late):
        sim.discard()
    for bad in ({"straggler_p": 1.5}, {"straggler_s": -1.0}, {"straggler_s": float("inf")}):
        with pytest.raises(ValueError, match="straggler"):
            Faults(**bad)


def test_a_death_after_an_unsent_checkpoint_is_recovered() -> None:
    """Trial 0 dies right after committing iteration 4 (never sent); its exit notice is lost, so the
    core finds the dead process through CheckProcesses, recovers the checkpoint and its result from
    the manifest, and the retry continues from it: history 1..9 exactly once."""
    sim = simulate(curve, {"lr": 0.5}, TuneConfig(metric="loss", mode="min", scheduler=FIFOScheduler()),
                   RunConfig(checkpoint_config=CheckpointConfig(checkpoint_frequency=2),
                             failure_config=FailureConfig(max_failures=1)),
                   max_iterations=9, faults=Faults(die_at=((0, 4),), lost_exit_p=1.0), cpus=1)
    assert not sim.hung and sim.error is None
    (r,) = sim.results
    assert r.num_failures == 1 and r.metrics["training_iteration"] == 9
    history = r.metrics_history
    assert [h["training_iteration"] for h in history] == list(range(1, 10))
    assert history[4]["iterations_since_restore"] == 1  # iteration 5 came from the run resumed at 4
    sim.discard()


@pytest.mark.parametrize("faults, expect", [
    (Faults(trial_fail_p=0.05, trial_die_p=0.05, lost_exit_p=0.5, poison_p=0.01), None),
    (Faults(scheduler_error_p=0.02), "simulated scheduler failure"),
    (Faults(storage_fail_at=(("on_results", 5),)), "simulated storage failure in on_results"),
    (Faults(checkpoint_error_p=0.2), "could not write its checkpoint"),
    (Faults(abort_at_s=3.0), "simulated abort"),
])
def test_faults_end_the_experiment_never_hang(faults: Faults, expect: str | None) -> None:
    for seed in range(3):
        sim = _asha(seed, faults, checkpoint_config=CheckpointConfig(checkpoint_frequency=1),
                    failure_config=FailureConfig(max_failures=-1))
        assert not sim.hung, sim.hang_reason
        assert sim.results is not None and len(sim.results) == 12
        if expect is None:
            assert sim.error is None and sum(r.num_failures for r in sim.results) > 0  # and they were retried
        else:
            assert sim.error is not None and expect in sim.error
        sim.discard()


def test_member_loss_and_return() -> None:
    sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                   TuneConfig(metric="loss", mode="min", num_samples=6, scheduler=FIFOScheduler()),
                   RunConfig(failure_config=FailureConfig(max_failures=-1)), max_iterations=20, seed=1,
                   members={"m1": {"cpu": 2}, "m2": {"cpu": 2}},
                   faults=Faults(member_loss=((5.0, "m1", 20.0),), member_left_p=0.0))
    assert not sim.hung, sim.hang_reason
    assert sim.error is None and {r.metrics["training_iteration"] for r in sim.results} == {20}
    assert any(r.num_failures for r in sim.results)  # the trials on m1 were lost (no heartbeats) and retried
    from actors._engine.signals import ActorKind

    assert any(at > 25.0 and s.kind is ActorKind.TRIAL and s.member == "m1" for at, s in sim.world.spawned)
    sim.discard()


def _remote_deaths(seed: int) -> Any:
    """Trial processes on two members die, and Thespian never tells the controller (every exit notice lost)."""
    return simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                    TuneConfig(metric="loss", mode="min", num_samples=6, scheduler=FIFOScheduler()),
                    RunConfig(failure_config=FailureConfig(max_failures=-1),
                              checkpoint_config=CheckpointConfig(checkpoint_frequency=1)),  # (a retry goes on)
                    max_iterations=10, seed=seed, members={"m1": {"cpu": 2}, "m2": {"cpu": 2}},
                    faults=Faults(die_at=((0, 3), (3, 5)), lost_exit_p=1.0))


def test_a_remote_trial_process_gone_without_notice_is_found_through_its_members_probe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller cannot read another machine's /proc: each liveness check asks the members' probes
    (``ProbeCheck``) which of their trial processes are gone, so the dead runs are retried and the experiment
    ends (before, it waited for ever: found by a seeded sweep with member faults and lost exit notices)."""
    from actors._engine.cluster import Cluster

    for seed in (0, 1, 2):
        sim = _remote_deaths(seed)
        try:
            assert not sim.hung, sim.hang_reason
            assert sim.error is None and {r.metrics["training_iteration"] for r in sim.results} == {10}
            assert sum(r.num_failures for r in sim.results) == 2
        finally:
            sim.discard()
    local_only = Cluster.ask_processes

    def without_probes(self: Cluster) -> list[Any]:
        return [c for c in local_only(self) if type(getattr(c, "msg", None)).__name__ != "ProbeCheck"]

    monkeypatch.setattr(Cluster, "ask_processes", without_probes)
    sim = _remote_deaths(0)
    try:
        assert sim.hung, "without the probes' checks a remote death without notice goes unseen"
    finally:
        sim.discard()


@pytest.mark.parametrize("hook, hangs", [(None, True), ("save", True), ("choose", False)])
def test_only_timers_and_periodic_state_saves_are_not_progress(hook: str | None, hangs: bool) -> None:
    """A core that only re-arms its tick (and, per tick, asks the scheduler for its state) is hung after
    ``idle_limit_s``; one whose ticks make other scheduler calls is progressing (it runs to the cap)."""
    import cloudpickle

    from actors._engine.signals import ActorKind, Send, Spawn, Tick, Wake, WakeAfter
    from actors.messages import HookKind, SchedulerCall, SchedulerSetup

    class Ticking:
        seq = 0

        def handle(self, event: Any, now: float) -> list[Any]:
            if isinstance(event, Wake) or event == "start":
                out: list[Any] = [WakeAfter(1.0, Tick.PERIODIC)]
                if event == "start":
                    out += [Spawn(1, ActorKind.SCHEDULER),
                            Send(1, SchedulerSetup(cloudpickle.dumps(FIFOScheduler()), "loss", "min"))]
                elif hook is not None:
                    self.seq += 1
                    out.append(Send(1, SchedulerCall(self.seq, HookKind.SAVE if hook == "save" else HookKind.CHOOSE)))
                return out
            return []

    world = SimWorld(Ticking(), curve, idle_limit_s=30.0, max_time_s=200.0)
    world.run("start")
    assert world.hung
    if hangs:
        assert "only timers" in (world.hang_reason or "") and world.now < 33.0, world.hang_reason
    else:
        assert "cap exceeded" in (world.hang_reason or "") and world.now > 200.0, world.hang_reason


def test_hang_is_flagged() -> None:
    class Silent:
        def handle(self, event: Any, now: float) -> list[Any]:
            return []

    world = SimWorld(Silent(), curve)
    world.run(object())
    assert world.hung and "no event left" in (world.hang_reason or "")


# ---------------------------------------------------------------------------------- idle ticks
def _long_steps(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": config["lr"] / i + 0.01 * i, "time_this_iter_s": config["step_s"]}


def _outcome(sim: Any) -> tuple[Any, ...]:
    """Everything a simulation produced, but the count of deliveries."""
    histories = [r.metrics_history for r in sim.results] if sim.results is not None else None
    where = sim.storage_url.split("://", 1)[-1]  # (each simulation has its own; paths name it too)

    def text(x: Any) -> str:
        return repr(x).replace(where, "<storage>")

    return (sim.hung, text(sim.error), sim.simulated_time_s, text(sim.world.driver),
            [(t, text(s)) for t, s in sim.world.spawned], text(histories))


_SWEEP_FAULTS = Faults(trial_fail_p=0.02, trial_die_p=0.02, lost_exit_p=0.5)


def _swept(seed: int) -> tuple[Any, ...]:
    with _asha(seed, _SWEEP_FAULTS, failure_config=FailureConfig(max_failures=-1)) as sim:
        return (sim.deliveries, *_outcome(sim))


def test_a_seed_gives_the_same_experiment_in_a_forked_worker_in_any_order() -> None:
    """docs/testing.md's sweep: seeds run in a fork pool, out of order, after other runs in this process,
    are the experiments this process runs for them (nothing of a run depends on the process's history)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    seeds = list(range(6))
    here = [_swept(seed) for seed in seeds]
    assert len({h[0] for h in here}) > 1  # (different seeds, different experiments)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        there = list(pool.map(_swept, reversed(seeds)))
    assert list(reversed(there)) == here


@pytest.mark.parametrize("kind", ["trials", "lost_exits", "poison", "scheduler", "storage", "checkpoint",
                                  "abort", "latency"])
def test_skipping_idle_ticks_changes_no_outcome(kind: str) -> None:
    """Ticks skipped while the core says they can do nothing (steps of 3-12 simulated s, so most
    seconds are idle): every message to the driver, spawn, history and the simulated time are the
    same as with every tick delivered, under each kind of fault and scheduler."""
    import random

    from tests._sim_scenarios import draw_faults, scheduler

    skipped = 0
    for seed in range(5):
        sched = ("fifo", "asha", "hyperband", "median", "pbt")[seed]
        faults, _ = draw_faults(kind, random.Random(seed))
        space = {"lr": search.uniform(0.01, 1.0), "step_s": search.choice([3.0, 7.5, 12.0])}
        sims = [simulate(_long_steps, space,
                         TuneConfig(metric="loss", mode="min", num_samples=5, scheduler=scheduler(sched, 6)),
                         RunConfig(checkpoint_config=CheckpointConfig(checkpoint_frequency=2),
                                   failure_config=FailureConfig(max_failures=3)),
                         max_iterations=6, seed=seed, faults=faults, cpus=2, skip_idle_ticks=skip)
                for skip in (False, True)]
        try:
            every, fewer = sims
            assert _outcome(fewer) == _outcome(every), (kind, seed, sched)
            assert fewer.deliveries <= every.deliveries
            skipped += every.deliveries - fewer.deliveries
        finally:
            for sim in sims:
                sim.discard()
    assert skipped > 0, "the steps are long: ticks must have been skipped"


class _StopsEveryone(FIFOScheduler):
    """At a trial's second result, stops it and every other running trial: the others are mid-step,
    do not halt within the 2 s grace, and the core kills them at their deadline."""

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        if result["training_iteration"] == 2:
            for other in controller.get_trials():
                if other.trial_id != trial.trial_id and other.status.value == "RUNNING":
                    controller.stop_trial(other)
            return self.STOP
        return super().on_trial_result(controller, trial, result)


def test_a_tick_due_to_kill_a_trial_that_did_not_halt_is_not_skipped() -> None:
    """A stop sent to a trial in a long step (30 s) arms its halt deadline: the ticks up to it are
    not idle although nothing else happens until that step would end, so the kill lands at the same
    tick as when every tick is delivered."""
    space = {"lr": 0.5, "step_s": search.grid_search([1.0, 30.0])}
    every, fewer = sims = [
        simulate(_long_steps, space, TuneConfig(metric="loss", mode="min", scheduler=_StopsEveryone()),
                 RunConfig(trial_stop_grace_s=2.0), max_iterations=5, seed=3, cpus=2, skip_idle_ticks=skip)
        for skip in (False, True)]
    try:
        assert _outcome(fewer) == _outcome(every)
        slow = next(t for t in every.finished.trials if t.config["step_s"] == 30.0)
        assert slow.last_result.get("training_iteration", 0) == 0 and every.simulated_time_s < 10, \
            "the slow trial was killed at its deadline, long before its first step ended"
    finally:
        for sim in sims:
            sim.discard()


def test_driver_callbacks_hold_each_batch_and_their_checkpoints_are_saved_and_logged() -> None:
    """simulate(callback_checkpoint_p=...): a driver Callback answers every held result batch (the core's
    gate, as fit() with a Callback); each answer asking a checkpoint gives a save at that result and the
    row says should_checkpoint, as Ray logs the result after its callbacks changed it."""
    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": config["lr"] / i, "time_this_iter_s": 1.0}

    answers: list[bool] = []
    orig = SimWorld._answer

    def spy(self: SimWorld, msg: Any) -> None:
        answers.extend(True for ev in msg.events if ev.answer_batch)
        orig(self, msg)

    SimWorld._answer = spy  # type: ignore[method-assign]
    try:
        sim = simulate(curve, {"lr": search.uniform(0.1, 1.0)}, TuneConfig(num_samples=3), max_iterations=6,
                       seed=4, callback_checkpoint_p=0.5)
    finally:
        SimWorld._answer = orig  # type: ignore[method-assign]
    try:
        assert not sim.hung and sim.results is not None
        rows = [h for r in sim.results for h in r.metrics_history]
        assert len(answers) == len(rows) == 18  # every result batch (one result each) was held and answered
        asked = [h["training_iteration"] for h in rows if h.get("should_checkpoint")]
        assert 0 < len(asked) < 18
        saved = {(r.trial_id, m["training_iteration"]) for r in sim.results for _, m in r.best_checkpoints}
        assert {(r.trial_id, h["training_iteration"]) for r in sim.results for h in r.metrics_history
                if h.get("should_checkpoint")} <= saved
    finally:
        sim.discard()
    with pytest.raises(ValueError, match="a probability"):
        simulate(curve, {"lr": 0.5}, callback_checkpoint_p=1.5)


def test_a_curves_numpy_values_reach_storage_as_numbers() -> None:
    """``marshal`` writes anything with a buffer (a numpy scalar) as bytes: the simulator's cheap copies of
    histories, params and states must not take such values (they showed as "b'...'" strings, and a restored
    experiment's configs were strings)."""
    np = pytest.importorskip("numpy")

    def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
        return {"loss": np.float64(config["x"] / i), "n": np.int64(i), "time_this_iter_s": 1.0}

    sim = simulate(curve, {"x": search.uniform(0.0, 1.0), "k": np.float64(0.5)},
                   TuneConfig(metric="loss", mode="min", num_samples=2), max_iterations=3, cpus=2, seed=1)
    try:
        assert sim.results is not None
        for r in sim.results:
            assert [type(h["loss"]) for h in r.metrics_history] == [float] * 3
            assert [h["n"] for h in r.metrics_history] == [1, 2, 3]
            assert r.metrics_history[-1]["loss"] == pytest.approx(r.config["x"] / 3)
        frame = sim.results.get_dataframe()
        assert frame["loss"].dtype.kind == "f"
        assert ExperimentAnalysis(sim.experiment_path).get_all_configs()  # the state reads back
        assert all(type(c["k"]) is float for c in ExperimentAnalysis(sim.experiment_path).get_all_configs().values())
    finally:
        sim.discard()


def test_an_ended_run_leaves_nothing_in_the_watchdog_and_records_have_no_instance_dict() -> None:
    """What the controller keeps for every trial stays small (benchmarks/bench_memory.py): a run's
    process, clock and deadline are forgotten once it ends, and a TrialRecord has slots."""
    from actors._engine.record import TrialRecord

    sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                   TuneConfig(metric="loss", mode="min", num_samples=6,
                              scheduler=ASHAScheduler(max_t=9, grace_period=1)),
                   max_iterations=9, seed=3, cpus=2)
    try:
        assert sim.results is not None and len(sim.results) == 6 and not sim.hung
        watch = sim.world.core.watch
        assert watch.procs == {} and watch.clocks == {} and watch.halt_by == {}
    finally:
        sim.discard()
    assert not hasattr(TrialRecord("t", {}), "__dict__")


def test_a_large_state_write_gives_its_passing_memory_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state of many trials is megabytes of text freed right after its write; glibc kept it for the
    process (bench_memory.py's controller: 6.6 KB a finished trial, 5.4 KB with it returned). Small
    states (every simulation's) skip the call."""
    from actors._shell import experiment_io
    from actors._shell.heap import release_free_heap

    assert release_free_heap() is True  # glibc here: malloc_trim found and called
    calls: list[int] = []
    monkeypatch.setattr(experiment_io, "release_free_heap", lambda: calls.append(1) or True)
    for n, trims in ((experiment_io.TRIM_AFTER_ROWS - 1, False), (experiment_io.TRIM_AFTER_ROWS, True)):
        calls.clear()
        sim = simulate(curve, {"lr": search.uniform(0.01, 1.0)},
                       TuneConfig(metric="loss", mode="min", num_samples=n), max_iterations=1, seed=1, cpus=8)
        try:
            assert sim.results is not None and len(sim.results) == n and not sim.hung
        finally:
            sim.discard()
        assert bool(calls) is trims, (n, len(calls))


def test_a_retried_trial_goes_to_the_end_of_the_queue_as_rays() -> None:
    """Ray 2.60's ``_requeue_trial`` moves a trial whose run failed to the end of the trial list: the trials
    waiting run before its retry (one at a time here), and results list it last."""
    sim = simulate(curve, {"lr": search.grid_search([0.1, 0.2, 0.3])},
                   TuneConfig(scheduler=FIFOScheduler()), RunConfig(failure_config=FailureConfig(max_failures=1)),
                   max_iterations=3, cpus=1, faults=Faults(fail_at=((0, 2),)))  # (the retry fails there too)
    assert not sim.hung and [r.config["lr"] for r in sim.results] == [0.2, 0.3, 0.1]
    last = {r.config["lr"]: r.metrics_history[-1]["timestamp"] for r in sim.results}
    assert last[0.2] <= last[0.3] <= last[0.1]  # (its retry's first row: after the others ran)
    assert sim.results[2].error is not None


def test_a_restored_experiment_runs_a_requeued_trial_after_the_others_as_it_was_listed() -> None:
    """After ``Tuner.restore`` the scheduler lists the trials as the saved table does (Ray restores its trial list
    in that order), not by id: the requeued trial still comes after the trials that were waiting."""
    space = {"lr": search.grid_search([0.1, 0.2, 0.3])}
    tc, rc = TuneConfig(scheduler=FIFOScheduler()), RunConfig(failure_config=FailureConfig(max_failures=1))
    first = simulate(curve, space, tc, rc, max_iterations=3, cpus=1,
                     faults=Faults(fail_at=((0, 2),), abort_at_s=3.5))  # (during 0.2's run, 0.1 requeued)
    assert first.error is not None and [r.config["lr"] for r in first.results] == [0.2, 0.3, 0.1]
    again = simulate(curve, space, tc, rc, max_iterations=3, cpus=1, restore=first.experiment_path)
    assert again.error is None and not again.hung and [r.config["lr"] for r in again.results] == [0.2, 0.3, 0.1]
    last = {r.config["lr"]: r.metrics_history[-1]["timestamp"] for r in again.results}
    assert last[0.2] <= last[0.3] <= last[0.1]


@pytest.mark.parametrize("machine", [{"cpus": 1}, {"members": {"m1": {"cpu": 1}, "m2": {"cpu": 2}}}])
def test_the_invariants_restore_an_aborted_simulation_on_the_machine_it_ran_on(machine: dict[str, Any]) -> None:
    """``restore_violations`` continues the aborted run on the first run's simulated CPUs or members, not on the
    cores of the machine running the test: the restored outcome is the same on a laptop and on CI."""
    from actors.testing.invariants import restore_violations

    space = {"lr": search.grid_search([0.1, 0.2, 0.3, 0.4])}
    first = simulate(curve, space, TuneConfig(scheduler=FIFOScheduler()), max_iterations=4,
                     faults=Faults(abort_at_s=2.5), **machine)
    assert first.error is not None and "simulated abort" in first.error
    found, again = restore_violations(first, curve, max_iterations=4, num_samples=4)
    assert found == [] and again is not None and again.error is None
    assert (again.cpus, again.members) == (machine.get("cpus"), machine.get("members"))
    spec = again.world.core.spec
    if "cpus" in machine:
        assert (spec.total_resources, spec.max_concurrent) == ({"cpu": 1.0}, 1)
    else:
        assert spec.multi_host and sorted(again.world.members) == ["m1", "m2"]
    first.discard()
    again.discard()
