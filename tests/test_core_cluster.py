"""``Cluster`` (actors/_engine/cluster.py) alone: a real TrialTable, Membership, ActorPool and Watchdog,
no core. What it returns (commands, ``RunLost`` notices) is the whole of its interface to the core."""

from __future__ import annotations

from typing import Any

from actors._engine.cluster import Cluster, RunLost
from actors._engine.lifecycle import TrialTable
from actors._engine.members import Membership
from actors._engine.pool import ActorPool
from actors._engine.signals import (
    ActorKind,
    CheckProcesses,
    KillProcess,
    MemberJoined,
    MemberLeft,
    ProcessesChecked,
    Retire,
    Send,
    Spawn,
)
from actors._engine.trial import TrialStatus
from actors._engine.watch import Watchdog
from actors.messages import ClusterStatus, ProbeCheck, ProbeChecked, ProbeKill, ProbeStart
from tests._core_harness import make_spec


def _cluster(multi_host: bool = False, **over: Any) -> Cluster:
    spec = make_spec(num_samples=3, max_concurrent=3, actor_processes=True, multi_host=multi_host,
                     driver_pid=11, **over)
    table = TrialTable()
    return Cluster(spec, table, Membership(spec), ActorPool(keep_idle=2), Watchdog(10.0), controller_pid=10)


def _running(c: Cluster, trial_id: str, member: str, pid: int | None = None) -> int:
    """A trial started on ``member`` (with its process ``pid``): its actor's handle."""
    c.table.add(trial_id, {})
    c.table.start(trial_id)
    rec = c.table.get(trial_id)
    handle = c.pool.new_handle()
    c.members.place(trial_id, member)
    c.pool.assign(trial_id, handle, rec.run_id)
    if pid is not None:
        c.watch.process(trial_id, rec.run_id, pid)
    return handle


def test_local_processes_are_checked_and_a_process_gone_twice_is_a_lost_run() -> None:
    c = _cluster()
    h1 = _running(c, "a", "local", pid=501)
    _running(c, "b", "local", pid=10)  # the controller's own pid ("simple" in-process): never checked
    run = c.table.get("a").run_id
    assert c.ask_processes() == [CheckProcesses((("a", run, 501),), always_answer=False)]
    gone = ((("a", run, -9),))
    assert list(c.processes_gone(ProcessesChecked(gone))) == []  # once: its exit notice may still come
    # the next check must be answered (even with nothing left to ask about): it confirms the loss
    assert c.ask_processes() == [CheckProcesses((("a", run, 501),), always_answer=True)]
    lost = list(c.processes_gone(ProcessesChecked(gone)))
    assert [(x.trial_id, x.run_id) for x in lost] == [("a", run)] and "SIGKILL" in lost[0].error
    assert c.pool.actor_of.get("a") is None and h1 not in c.pool.trial_of and c.watch.pid("a", run) is None


def test_a_stale_run_found_gone_is_not_lost() -> None:
    c = _cluster()
    _running(c, "a", "local", pid=501)
    old = c.table.get("a").run_id - 1
    for _ in range(2):
        assert list(c.processes_gone(ProcessesChecked((("a", old, 1),)))) == []
    assert "a" in c.pool.actor_of


def test_kill_kills_a_local_process_and_retires_its_actor() -> None:
    c = _cluster()
    handle = _running(c, "a", "local", pid=501)
    assert c.kill("a", c.table.get("a").run_id) == [KillProcess(501), Retire(handle)]
    assert "a" not in c.pool.actor_of and c.watch.pid("a", c.table.get("a").run_id) is None


def test_kill_on_another_member_goes_through_its_probe() -> None:
    c = _cluster(multi_host=True)
    c.join(MemberJoined("w1", {"cpu": 2}, "addr-1"), now=0.0)
    probe = c.members.probes["w1"]
    handle = _running(c, "a", "w1", pid=501)
    assert c.kill("a", c.table.get("a").run_id) == [Send(probe, ProbeKill(501)), Retire(handle)]


def test_other_members_processes_are_checked_through_their_probes_each_on_its_own() -> None:
    """A trial process on another member is looked up by that member's probe (``ProbeCheck``); found gone by
    two of its answers in a row, the run is lost, whatever the other machines' checks said in between."""
    c = _cluster(multi_host=True)
    for member in ("w1", "w2"):
        c.join(MemberJoined(member, {"cpu": 2}, f"addr-{member}"), now=0.0)
    p1, p2 = c.members.probes["w1"], c.members.probes["w2"]
    _running(c, "a", "w1", pid=501)
    _running(c, "b", "w2", pid=502)
    _running(c, "c", "w1")  # its process not known yet: not asked about
    ra, rb = c.table.get("a").run_id, c.table.get("b").run_id
    assert c.ask_processes() == [Send(p1, ProbeCheck((("a", ra, 501),))), Send(p2, ProbeCheck((("b", rb, 502),)))]
    gone = (("a", ra, -11),)
    assert list(c.processes_gone(ProbeChecked("w1", gone))) == []  # once: its exit notice may still come
    assert list(c.processes_gone(ProbeChecked("w2", ()))) == []  # another member's answer changes nothing
    assert list(c.processes_gone(ProcessesChecked(()))) == []  # nor this machine's
    lost = list(c.processes_gone(ProbeChecked("w1", gone)))
    assert [(x.trial_id, x.run_id) for x in lost] == [("a", ra)] and "SIGSEGV" in lost[0].error
    assert c.ask_processes() == [Send(p2, ProbeCheck((("b", rb, 502),)))]
    assert list(c.processes_gone(ProbeChecked("w2", (("b", rb, None),)))) == []
    assert list(c.processes_gone(ProbeChecked("w2", ()))) == []  # it was only slow: forgotten
    assert list(c.processes_gone(ProbeChecked("w2", (("b", rb, None),)))) == []


def test_a_member_joining_gets_a_probe_and_an_old_registration_leaving_changes_nothing() -> None:
    c = _cluster(multi_host=True, heartbeat_interval_s=2.0)
    out = c.join(MemberJoined("w1", {"cpu": 2}, "addr-1"), now=0.0)
    probe = c.members.probes["w1"]
    assert out == [Spawn(probe, ActorKind.PROBE, "w1"), Send(probe, ProbeStart("w1", 2.0))]
    assert not c.left(MemberLeft("w1", "addr-0")) and c.left(MemberLeft("w1", "addr-1"))


def test_losing_a_member_retires_its_actors_and_loses_only_its_running_runs() -> None:
    c = _cluster(multi_host=True)
    c.join(MemberJoined("w1", {"cpu": 3}, "addr-1"), now=0.0)
    idle = c.pool.new_handle()
    c.pool.park(idle, "w1")
    ha = _running(c, "a", "w1")
    hb = _running(c, "b", "w1")
    c.table.set_status(c.table.get("b"), TrialStatus.PAUSED)  # (ended meanwhile: nothing to fail)
    got = c.lose("w1", "no heartbeat")
    assert got is not None
    items = list(got)
    assert items == [Retire(idle), Retire(ha), RunLost("a", c.table.get("a").run_id,
                                                          "lost contact with member 'w1' (no heartbeat)",
                                                          "host lost\n"), Retire(hb)]
    assert c.members.where("a") is None and c.pool.idle == []
    assert c.lose("w1", "again") is None  # lost already


def test_status_counts_trials_per_status() -> None:
    c = _cluster()
    _running(c, "a", "local")
    c.table.add("b", {})
    reply = c.status().msg
    assert isinstance(reply, ClusterStatus) and reply.trials == {"RUNNING": 1, "PENDING": 1}


def test_a_trial_no_member_can_hold_is_a_problem_only_after_the_grace() -> None:
    c = _cluster(multi_host=True, placement_grace_s=30.0, resources_per_trial={"cpu": 8})
    c.join(MemberJoined("small", {"cpu": 2}, "a1"), now=0.0)
    c.table.add("a", {})
    assert c.unplaceable(0.0) is None and c.unplaceable(30.0) is None
    problem = c.unplaceable(31.0)
    assert problem is not None and "no member can ever run a trial needing {'cpu': 8.0}" in problem
