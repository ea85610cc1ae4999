"""A trial process that dies outside Python is a trial failure within seconds, retried per max_failures.

Thespian installs a Python-level handler for every signal in its actor processes: a real segfault
then re-ran the faulting instruction forever and the experiment never ended (issue 13 item 2).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

import pytest

from actors import Checkpoint, FailureConfig, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors._engine.trial import TrialStatus
from actors._process.children import describe_exit
from actors.search import grid_search


def _die(how: str) -> None:
    if how == "segfault":
        ctypes.string_at(0)
    elif how == "abort":
        os.abort()
    elif how == "exit":
        os._exit(3)
    elif how == "sigkill":  # what the kernel's OOM killer does
        os.kill(os.getpid(), signal.SIGKILL)


def crashing(config: dict) -> None:
    """Reports steps 0..4 with a checkpoint each; dies after step 2 ("once") or in every run ("always")."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    crash_at = max(2, start) if config["mode"] == "always" else (2 if ckpt is None else -1)
    for step in range(start, 5):
        report({"step": step, "restored_from": start - 1}, checkpoint=Checkpoint.from_dict({"step": step}))
        if step == crash_at:
            time.sleep(0.2)  # let the checkpointed result reach the controller first
            _die(config["how"])


EXPECTED = {"segfault": "killed by SIGSEGV", "abort": "killed by SIGABRT", "exit": "exited with code 3",
            "sigkill": "killed by SIGKILL"}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", list(EXPECTED))
def test_native_death_is_a_failure_retried_from_checkpoint(how, storage_dir, no_leaks):
    t0 = time.monotonic()
    grid = Tuner(crashing, param_space={"how": how, "mode": grid_search(["once", "always"])},
                 tune_config=TuneConfig(max_concurrent_trials=2),
                 run_config=RunConfig(name=how, storage=storage_dir, verbose=0,
                                      failure_config=FailureConfig(max_failures=1))).fit()
    elapsed = time.monotonic() - t0
    by_mode = {r.config["mode"]: r for r in grid}
    once, always = by_mode["once"], by_mode["always"]
    # one crash, then resumed from the checkpoint of step 2: steps 0..4 exactly once
    assert once.status is TrialStatus.TERMINATED and once.num_failures == 1
    assert [m["step"] for m in once.metrics_history] == [0, 1, 2, 3, 4]
    assert once.metrics["restored_from"] == 2
    # crashed in both runs: ERROR, and the error says how the process died
    assert always.status is TrialStatus.ERROR and always.num_failures == 2
    assert EXPECTED[how] in str(always.error), always.error
    print(f"{how}: experiment over in {elapsed:.1f}s")


def test_describe_exit():
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV (a segmentation fault)"
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(None) == "exited (how is unknown)"


def _zombie(action) -> int:
    pid = os.fork()
    if pid == 0:
        action()
        os._exit(0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return pid
        time.sleep(0.01)
    raise AssertionError("the child never became a zombie")


def test_process_exit_reads_how_an_unreaped_child_died():
    """The controller's fallback when Thespian's ChildActorExited never comes (two trial processes
    dying at once lost one notice, and the run waited forever): read /proc, zombie's exit code."""
    from actors._process.children import process_exit

    for action, code in ((lambda: os._exit(3), 3), (lambda: os.kill(os.getpid(), signal.SIGKILL), -signal.SIGKILL)):
        pid = _zombie(action)
        try:
            assert process_exit(pid) == (True, code)
        finally:
            os.waitpid(pid, 0)
        assert process_exit(pid) == (True, None)  # reaped: gone, how unknown
    assert process_exit(os.getpid()) == (False, None)


def _sleep_then_exit(seconds: float) -> None:
    time.sleep(seconds)
    os._exit(0)


def test_a_child_found_dead_while_another_ones_exit_is_handled_is_reported_too():
    """Thespian 4.0.1: two trial processes dying together. Handling the first one's ChildActorExited,
    ``_childExited`` dropped every dead child from its list, so the second one's SIGCHLD found
    nobody to report: its run was found 2 s later by the liveness check, and the controller's exit
    (so the whole shutdown) waited 10 s for a child it still counted. ``record_child_exits``
    reports the dropped ones."""
    import multiprocessing

    from thespian.actors import ChildActorExited
    from thespian.system.multiprocCommon import ChildInfo, MultiProcReplicator

    from actors._process.children import exit_status_of, record_child_exits

    record_child_exits()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_sleep_then_exit, args=(s,)) for s in (0.0, 0.0, 30.0)]
    for p in procs:
        p.start()
    try:
        deadline = time.monotonic() + 10
        while any(p.exitcode is None for p in procs[:2]) and time.monotonic() < deadline:
            for p in procs[:2]:
                p.join(0.05)
        # the first two are dead: "a" is the one whose ChildActorExited is being handled, "b" died meanwhile

        class Transport:
            myAddress = "controller"
            sent: list = []

            def scheduleTransmit(self, _addr, intent):
                self.sent.append(intent)

        class Replicator:
            transport = Transport()
            _checkChildLiveness = staticmethod(MultiProcReplicator._checkChildLiveness)
            _child_procs = [ChildInfo(name, "TrialActor", p, i) for i, (name, p) in enumerate(zip("abc", procs))]

        rep = Replicator()
        MultiProcReplicator._childExited(rep, "a")
        assert [c.childAddr for c in rep._child_procs] == ["c"]  # the live one is kept
        notices = [(i.targetAddr, i.message) for i in rep.transport.sent]
        assert len(notices) == 1 and notices[0][0] == "controller"
        assert isinstance(notices[0][1], ChildActorExited) and notices[0][1].childAddress == "b"
        assert exit_status_of("b") == 0
    finally:
        procs[2].kill()
        procs[2].join(5)


class _Started(Exception):
    pass


@pytest.mark.parametrize("where", ["driver", "worker", "leader"])
def test_the_admin_of_every_multi_process_system_forks_with_child_deaths_reported(where, monkeypatch):
    """The admin forks from the process that starts the system, and a member's admin reaps the trial
    processes it runs (the controller cannot): ``record_child_exits`` must be in place before it forks,
    in the driver and in ``audition worker``."""
    import thespian.actors
    from thespian.system.multiprocCommon import MultiProcReplicator

    import actors._cluster.member as member
    import actors._driver.system as system
    import actors._process.owner as owner

    def unpatched(self, child_addr):
        raise AssertionError("Thespian's own _childExited")

    monkeypatch.setattr(MultiProcReplicator, "_audition_exits", False, raising=False)
    monkeypatch.setattr(MultiProcReplicator, "_childExited", unpatched)
    monkeypatch.setattr(MultiProcReplicator, "_checkChildLiveness",
                        staticmethod(MultiProcReplicator._checkChildLiveness))
    seen: list[bool] = []

    def actor_system(*args, **kwargs):
        seen.append(MultiProcReplicator._childExited is not unpatched)
        raise _Started

    monkeypatch.setattr(thespian.actors, "ActorSystem", actor_system)
    for module in (system, member):
        for name in ("_patch_transport", "_start_authentication", "watch_owner"):
            monkeypatch.setattr(module, name, lambda *a, **k: None)
    monkeypatch.setattr(owner, "watch_owner", lambda *a, **k: None)
    monkeypatch.setattr(member, "_authenticate", lambda *a, **k: None)
    monkeypatch.setattr(member, "_listen_and_advertise", lambda *a, **k: "127.0.0.1")
    monkeypatch.setattr("actors._cluster.join.check_leader", lambda *a, **k: None)
    with pytest.raises((_Started, system.ConfigError)):
        if where == "driver":
            system._start("multiproc", None)
        elif where == "leader":
            system._start("tcp://127.0.0.1:1", None)
        else:
            member.run_worker("127.0.0.1:1")
    assert seen == [True]
