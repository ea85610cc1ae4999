"""Direct decisions (issue 16 part 2, actors/_engine/direct.py): a plugin that decides every result
answers each trial over the scheduler actor's socket, and the controller joins the replies with the
results' batches. Decisions must be the ones the slow path (every result through the controller)
makes: a STOP at the very result, a ``pause_trial()`` made inside ``on_trial_result`` paused at that
result (the Ray Tune hang), requests about other trials applied."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from actors import RunConfig, TuneConfig, Tuner, search
from actors._driver.config import CheckpointConfig
from actors._engine.direct import DecisionJoin
from actors._engine.reducer import Decision
from actors._engine.scheduler_endpoint import SchedulerEndpoint
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import (
    ActionKind,
    DecideResult,
    DirectDecision,
    HookKind,
    SchedulerAction,
    SchedulerCall,
    SchedulerFailed,
    SchedulerReply,
    SchedulerSetup,
)
from actors.schedulers import FIFOScheduler
from actors.stoppers import MaximumIterationStopper
from actors.testing import CurveTrainable, simulate

MAX_IT = 8
STOP_ABOVE = 0.15  # a trial with a loss above this at iteration 3 or later is stopped
_names = itertools.count()


def curve(config: dict[str, Any], i: int) -> dict[str, Any]:
    return {"loss": config["lr"] / i + 0.01 * i, "time_this_iter_s": config["step_s"]}


SPACE = {"lr": search.uniform(0.01, 1.0), "step_s": search.choice([0.5, 1.0, 1.5])}


class OwnDecisions(FIFOScheduler):
    """Decides every result, only about the trial reporting it: pauses a good trial from inside the
    hook at iteration 2 (``pause_trial(should_checkpoint=True)`` + NOOP) and stops a bad one at 3.
    ``log``: a file each hook call appends to, with the path it came by (direct or through the core)."""

    tolerates_batching = False

    def __init__(self, log: str = "") -> None:
        super().__init__()
        self.log = log

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        if self.log:
            import inspect

            direct = any(f.function == "decide" for f in inspect.stack()[1:6])
            with open(self.log, "a") as f:
                f.write("direct\n" if direct else "core\n")
        it, loss = result["training_iteration"], result["loss"]
        if it == 2 and loss < 0.3 and result["iterations_since_restore"] == 2:
            controller.pause_trial(trial, should_checkpoint=True)
            return Decision.NOOP
        return Decision.STOP if it >= 3 and loss > STOP_ABOVE else Decision.CONTINUE


def check_exact(histories: list[list[dict[str, Any]]]) -> int:
    """Every decision took effect at its result; returns how many trials were paused at iteration 2."""
    paused = 0
    for rows in histories:
        its = [r["training_iteration"] for r in rows]
        assert its == list(range(1, len(its) + 1)), its
        if len(rows) >= 2 and rows[1]["loss"] < 0.3:  # paused at 2: iteration 3 came from a new run
            paused += 1
            if len(rows) >= 3:
                assert rows[2]["iterations_since_restore"] == 1, \
                    f"the pause asked for at iteration 2 took effect at {rows[2]['training_iteration']} or later"
        stop_at = next((r["training_iteration"] for r in rows if r["training_iteration"] >= 3 and r["loss"] > 0.35),
                       None)
        if stop_at is not None:
            assert len(rows) == stop_at and rows[-1]["done"], f"STOP at {stop_at}, ran to {len(rows)}"
    return paused


# ------------------------------------------------------------------ the pure parts


def _reply(decision: Decision, *actions: SchedulerAction) -> SchedulerReply:
    return SchedulerReply(0, HookKind.RESULT, "t", decision, actions)


def test_join_waits_for_every_result_of_a_batch_and_merges_in_order() -> None:
    join = DecisionJoin()
    batch = ({"training_iteration": 4}, {"training_iteration": 5})
    join.add(DirectDecision("t", 1, 4, _reply(Decision.CONTINUE, SchedulerAction(ActionKind.STOP, "u"))))
    assert join.take("t", 1, batch) is None  # iteration 5 is not decided yet
    join.add(DirectDecision("t", 2, 5, _reply(Decision.STOP)))  # another run's: not this batch's
    assert join.take("t", 1, batch) is None
    join.add(DirectDecision("t", 1, 5, _reply(Decision.PAUSE, SchedulerAction(ActionKind.PAUSE, "t"))))
    merged = join.take("t", 1, batch)
    assert merged is not None and merged.decision is Decision.PAUSE
    assert [(a.kind, a.trial_id) for a in merged.actions] == [(ActionKind.STOP, "u"), (ActionKind.PAUSE, "t")]
    assert join.take("t", 1, batch) is None and len(join) == 1  # taken once; run 2's reply is kept
    join.forget("t")
    assert len(join) == 0


def _endpoint(plugin: Any) -> SchedulerEndpoint:
    import cloudpickle

    ep = SchedulerEndpoint()
    ep.setup(SchedulerSetup(cloudpickle.dumps(plugin), "loss", "min", None))
    snap = TrialSnapshot("t", {"lr": 0.1}, TrialStatus.RUNNING, {}, 0, 0)
    ep.call(SchedulerCall(1, HookKind.ADD, "t", (), (snap,)))
    return ep


@pytest.mark.parametrize("loss, it, go_on, decision, actions", [
    (0.5, 1, True, Decision.CONTINUE, []),  # a plain CONTINUE: the trial goes on at once
    (0.1, 2, False, Decision.NOOP, [ActionKind.PAUSE]),  # pause_trial() inside the hook: it must wait
    (0.5, 3, False, Decision.STOP, []),
])
def test_endpoint_lets_a_trial_go_on_only_after_a_plain_continue(loss: float, it: int, go_on: bool,
                                                                  decision: Decision, actions: list[Any]) -> None:
    ep = _endpoint(OwnDecisions())
    answer, reply = ep.decide(DecideResult("t", 1, {"training_iteration": it, "loss": loss,
                                                    "iterations_since_restore": it}))
    assert answer.go_on is go_on
    assert isinstance(reply, DirectDecision) and (reply.trial_id, reply.run_id, reply.iteration) == ("t", 1, it)
    assert reply.reply.decision is decision and [a.kind for a in reply.reply.actions] == actions


class SeesStatus(FIFOScheduler):
    tolerates_batching = False
    seen: list[str] = []

    def on_trial_result(self, controller: Any, trial: Any, result: dict[str, Any]) -> Any:
        SeesStatus.seen.append(str(trial.status))
        return Decision.CONTINUE


def test_the_hook_sees_the_reporting_trial_running_before_the_mirror_is_refreshed() -> None:
    """A trial asks as soon as it runs; the controller's update saying so may not have reached the
    scheduler's mirror yet (the slow path sends it with the RESULT call): still, it is RUNNING."""
    import cloudpickle

    ep = SchedulerEndpoint()
    ep.setup(SchedulerSetup(cloudpickle.dumps(SeesStatus()), "loss", "min", None))
    ep.call(SchedulerCall(1, HookKind.ADD, "t", (), (TrialSnapshot("t", {}, TrialStatus.PENDING, {}, 0, 0),)))
    SeesStatus.seen.clear()
    answer, _ = ep.decide(DecideResult("t", 1, {"training_iteration": 1, "loss": 0.5}))
    assert answer.go_on and SeesStatus.seen == ["RUNNING"]


def test_a_late_question_of_a_run_the_controller_ended_is_not_decided() -> None:
    """A run's question that reaches the scheduler after the controller ended that run (a dead process's last
    words): no hook runs and nothing goes to the controller. It used to mark the trial RUNNING in the mirror
    for good, so FIFO's choose_trial_to_run never picked the waiting trial again (a seeded simulation, seed 2288
    with SILENT_DEATHS, ended "the scheduler chose no trial to run")."""
    import dataclasses

    import cloudpickle

    ep = SchedulerEndpoint()
    ep.setup(SchedulerSetup(cloudpickle.dumps(SeesStatus()), "loss", "min", None))
    running = TrialSnapshot("t", {}, TrialStatus.RUNNING, {}, 0, 0, run_id=3)
    ep.call(SchedulerCall(1, HookKind.ADD, "t", (), (running,)))
    ep.call(SchedulerCall(2, HookKind.SAVE, None, (), (dataclasses.replace(running, status=TrialStatus.PENDING),)))
    SeesStatus.seen.clear()
    for late_run in (2, 3):
        answer, reply = ep.decide(DecideResult("t", late_run, {"training_iteration": 5, "loss": 0.5}))
        assert not answer.go_on and reply is None
    assert SeesStatus.seen == []  # its hook never ran
    [choice] = ep.call(SchedulerCall(3, HookKind.CHOOSE, None, (), ()))
    assert isinstance(choice, SchedulerReply) and choice.chosen == "t"  # still waiting, so still chosen
    # its next run asks before the controller's update saying it runs: decided, and it runs
    answer, reply = ep.decide(DecideResult("t", 4, {"training_iteration": 5, "loss": 0.5}))
    assert answer.go_on and isinstance(reply, DirectDecision) and SeesStatus.seen == ["RUNNING"]


def test_endpoint_refuses_a_trial_it_was_never_told_of() -> None:
    answer, reply = _endpoint(OwnDecisions()).decide(DecideResult("nobody", 1, {"training_iteration": 1}))
    assert not answer.go_on and isinstance(reply, SchedulerFailed) and "nobody" in reply.error


# ------------------------------------------------------------------ whole experiments, simulated


def _sim(seed: int, direct: bool, **kw: Any) -> Any:
    return simulate(curve, SPACE, TuneConfig(metric="loss", mode="min", num_samples=6, scheduler=OwnDecisions()),
                    kw.pop("run_config", None), max_iterations=MAX_IT, seed=seed, cpus=3,
                    direct_decisions=direct, **kw)


def _histories(grid: Any) -> list[list[dict[str, Any]]]:
    return [r.metrics_history for r in grid]


@pytest.mark.parametrize("seed", range(12))
def test_simulated_direct_decisions_are_the_core_path_decisions(seed: int) -> None:
    """Same seed, same table, with and without direct decisions; every decision exact."""
    tables = []
    for direct in (True, False):
        sim = _sim(seed, direct)
        try:
            assert not sim.hung and sim.error is None, sim.hang_reason or sim.error
            assert sim.world.core.orders.direct == ("simulated" if direct else "")
            check_exact(_histories(sim.results))
            tables.append([(r.config, r.status, [(h["training_iteration"], h["iterations_since_restore"])
                                                 for h in r.metrics_history]) for r in sim.results])
        finally:
            sim.discard()
    assert tables[0] == tables[1]


def test_the_pause_scenario_is_in_the_simulations() -> None:
    """The seeds above do pause trials inside the hook and stop others (else they prove nothing)."""
    paused = stopped = 0
    for seed in range(12):
        sim = _sim(seed, True)
        try:
            paused += check_exact(_histories(sim.results))
            stopped += sum(1 for r in sim.results if len(r.metrics_history) < MAX_IT)
        finally:
            sim.discard()
    assert paused >= 5 and stopped >= 5, (paused, stopped)


@pytest.mark.parametrize("extra", [
    {"stop": MaximumIterationStopper(5)},  # stop criteria need each result decided by the core
    {"checkpoint_config": CheckpointConfig(checkpoint_at_end=True)},  # the end checkpoint at the stopping result
], ids=["stopper", "checkpoint_at_end"])
def test_direct_decisions_are_off_where_the_core_must_decide(extra: dict[str, Any]) -> None:
    sim = _sim(0, True, run_config=RunConfig(**extra))
    try:
        assert sim.error is None and sim.world.core.orders.direct == ""
    finally:
        sim.discard()


# ------------------------------------------------------------------ a real multi-process run


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.slow
def test_multiprocess_run_decides_directly_and_exactly(tmp_path: Path) -> None:
    """The default system asks the scheduler actor over its socket; the decisions are exact and the
    same as with system="simple" (which decides through the core)."""
    log = str(tmp_path / "hooks.log")
    space = {"lr": search.grid_search([0.05, 0.2, 0.5, 0.9]), "step_s": 0.0}
    tables = {}
    for system in ("multiproc", "simple"):
        if os.path.exists(log):
            os.remove(log)
        grid = Tuner(CurveTrainable.make(curve, MAX_IT), param_space=space,
                     tune_config=TuneConfig(metric="loss", mode="min", scheduler=OwnDecisions(log)),
                     run_config=RunConfig(system=system, verbose=0, storage=str(tmp_path / system),
                                          name="direct")).fit()
        assert not grid.errors
        histories = _histories(grid)
        assert check_exact(histories) >= 1
        tables[system] = sorted((r.config["lr"], str(r.status), [h["training_iteration"] for h in r.metrics_history],
                                 [h["iterations_since_restore"] for h in r.metrics_history]) for r in grid)
        paths = Path(log).read_text().split()
        assert paths and set(paths) == ({"direct"} if system == "multiproc" else {"core"}), set(paths)
    assert tables["multiproc"] == tables["simple"]


# ------------------------------------------------------------------ the socket between worker and scheduler actor


def test_frames_are_split_however_the_stream_cuts_them() -> None:
    from actors._worker.decide import FrameReader, frame
    from actors.messages import ResultDecided

    data = frame(ResultDecided(True)) + frame(DecideResult("t", 3, {"a": 1})) + frame(ResultDecided(False))
    for cut in range(1, len(data)):
        reader = FrameReader()
        got = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert got == [ResultDecided(True), DecideResult("t", 3, {"a": 1}), ResultDecided(False)]
        assert not reader.buf


def _serve(server: Any, answer: bool, stop: Any, asked: list[Any], swallow: int = 0) -> None:
    """A scheduler actor's loop: decide each new request (the first ``swallow`` are read and lost)."""
    import select

    from actors.messages import ResultDecided

    while not stop.is_set():
        ready, _, _ = select.select(server.filenos(), [], [], 0.05)
        for conn, req in server.ready(ready):
            asked.append(req)
            if len(asked) <= swallow:
                continue
            server.answer(conn, req, ResultDecided(answer, req.seq))


@pytest.mark.parametrize("answer", [True, False])
def test_a_worker_asks_the_scheduler_actor_over_its_socket(answer: bool) -> None:
    import threading

    from actors._shell.decision_server import DecisionServer
    from actors._worker.decide import DecisionClient

    server, stop, asked = DecisionServer(), threading.Event(), []
    thread = threading.Thread(target=_serve, args=(server, answer, stop, asked))
    thread.start()
    try:
        client = DecisionClient(server.address, lambda: False)
        for i in range(1, 4):
            assert client.ask(DecideResult("t", 1, {"training_iteration": i})) is answer
        assert [r.result["training_iteration"] for r in asked] == [1, 2, 3]
        client.close()
    finally:
        stop.set()
        thread.join()
        server.close()


def test_a_worker_whose_scheduler_actor_is_gone_holds_instead_of_hanging() -> None:
    """No answer can come: the worker waits for the controller (whose abort stops the run)."""
    from actors._shell.decision_server import DecisionServer
    from actors._worker.decide import DecisionClient

    server = DecisionServer()
    address = server.address
    server.close()
    client = DecisionClient(address, lambda: False)
    assert client.ask(DecideResult("t", 1, {"training_iteration": 1})) is False and client.broken
    assert client.ask(DecideResult("t", 1, {"training_iteration": 2})) is False  # at once, for good


def test_a_stop_ends_the_wait_for_an_answer_that_never_comes() -> None:
    import time

    from actors._shell.decision_server import DecisionServer
    from actors._worker.decide import DecisionClient

    server = DecisionServer()  # accepts (the kernel's backlog) but never answers
    try:
        stopping = {"now": False}
        client = DecisionClient(server.address, lambda: stopping["now"], poll_s=0.05)
        started = time.monotonic()
        stopping["now"] = True
        assert client.ask(DecideResult("t", 1, {"training_iteration": 1})) is False and client.broken
        assert time.monotonic() - started < 5.0
    finally:
        server.close()


def test_a_lost_request_is_sent_again_and_decided_once() -> None:
    """A frame lost on the socket costs ``resend_after_s``, never a decision or a hang; a request
    that arrives twice is answered from the record, not decided twice."""
    import threading

    from actors._shell.decision_server import DecisionServer
    from actors._worker.decide import DecisionClient

    server, stop, asked = DecisionServer(), threading.Event(), []
    thread = threading.Thread(target=_serve, args=(server, True, stop, asked, 1))
    thread.start()
    try:
        client = DecisionClient(server.address, lambda: False, poll_s=0.02, resend_after_s=0.2)
        assert client.ask(DecideResult("t", 1, {"training_iteration": 1})) is True  # asked twice
        assert client.ask(DecideResult("t", 1, {"training_iteration": 2})) is True
        assert client.resent == 1
        assert [(r.result["training_iteration"], r.seq) for r in asked] == [(1, 1), (1, 1), (2, 2)]
        # the same request again (an answer lost on the way back): answered, not decided again
        assert client.sock is not None
        from actors._worker.decide import frame

        client.sock.sendall(frame(DecideResult("t", 1, {"training_iteration": 2}, 2)))
        assert client._wait(2) is not None and server.repeats == 1 and len(asked) == 3
        client.close()
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.mark.timeout(30)
def test_a_stale_wake_up_neither_blocks_nor_drops_a_connection() -> None:
    """Thespian may wake the actor for a descriptor that is no longer readable (often: see
    benchmarks/probe_thespian_watch.py) or already closed: ``ready`` must return at once, keeping
    the connection."""
    import socket
    import threading

    from actors._shell.decision_server import DecisionServer
    from actors._worker.decide import DecisionClient, frame
    from actors.messages import ResultDecided

    server = DecisionServer()
    try:
        client = DecisionClient(server.address, lambda: False)
        client.sock = socket.socket(socket.AF_UNIX)
        client.sock.connect(server.address)
        assert server.ready([server.listener.fileno()]) == [] and len(server.conns) == 1  # accepted
        (fd,) = server.conns
        done = threading.Event()
        result: list[Any] = []

        def stale() -> None:
            result.append((server.ready([fd]), server.ready([server.listener.fileno()]), server.ready([9999])))
            done.set()

        t = threading.Thread(target=stale, daemon=True)
        t.start()
        assert done.wait(5), "ready() blocked on a descriptor with nothing to read"
        assert result == [([], [], [])] and fd in server.conns
        client.sock.sendall(frame(DecideResult("t", 1, {"training_iteration": 1}, 1)))
        (conn, req), = server.ready([fd])
        server.answer(conn, req, ResultDecided(True, 1))
        assert client._wait(1) == ResultDecided(True, 1)
        client.close()
        t.join()
    finally:
        server.close()


@pytest.mark.parametrize("batching, horizon, hooks, offered", [
    (False, None, frozenset(HookKind), True),  # decides every result
    (True, None, frozenset(HookKind), False),  # tolerates batching: runs ahead instead
    (False, "training_iteration", frozenset(HookKind), False),  # horizons: waits only at them
    (False, None, frozenset({HookKind.CHOOSE, HookKind.SAVE}), False),  # no on_trial_result: nothing to ask
])
def test_direct_decisions_are_offered_only_to_a_plugin_that_decides_every_result(
        batching: bool, horizon: str | None, hooks: frozenset[HookKind], offered: bool) -> None:
    from actors._engine.scheduler_endpoint import decides_every_result
    from actors.messages import SchedulerReady

    assert decides_every_result(SchedulerReady(batching, "P", hooks, horizon)) is offered
