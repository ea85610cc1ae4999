"""Multi-host runs on this machine: a leader (the driver) and worker systems as separate processes."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time

import pytest

from actors import FailureConfig, RunConfig, TuneConfig, Tuner
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from tests import _trainables as T
from tests._cluster import ROOT, Cluster, fit_in_thread, listening, wait_for
from tests._marked import left_behind, marked_env


def _fit_with_workers(cluster: Cluster, tuner: Tuner, workers: list[tuple[str, int]],
                      timeout_s: float = 120) -> dict:
    """``fit()`` as the leader; once it listens, start ``workers`` (name, cpus); wait for the end."""
    out: dict = {}
    thread = fit_in_thread(tuner, out)
    wait_for(lambda: listening(cluster.port), 20, "the leader to listen")
    for name, cpus in workers:
        cluster.start_worker(name, cpus=cpus)
    thread.join(timeout=timeout_s)
    assert not thread.is_alive(), "fit() did not finish"
    return out


def _intervals_overlap(spans: list[tuple[float, float]]) -> bool:
    spans = sorted(spans)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


def test_trials_land_on_every_member_and_respect_resources(cluster, storage_dir, no_leaks, capfd):
    tuner = Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), "steps": 5,
                                               "slow_save": 0.05},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="mh", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0))
    out = _fit_with_workers(cluster, tuner, [("a", 1), ("b", 1)], timeout_s=90)
    assert "error" not in out, out.get("error")
    grid = out["grid"]
    assert [r.status for r in grid] == [TrialStatus.TERMINATED] * 6
    for r in grid:
        assert [x["training_iteration"] for x in r.metrics_history] == [1, 2, 3, 4, 5]
    members = _members_of(grid)
    assert set(members) == {f"a-{cluster.tag}", f"b-{cluster.tag}"}
    for spans in members.values():  # 1 CPU each: never two trials at once on one member
        assert not _intervals_overlap(spans)
    cluster.stop()
    # the leader's actor system logs to this process's stderr: its shutdown race is not an error
    assert "Pending Actor create" not in capfd.readouterr().err


def test_shutdown_race_of_an_actor_create_is_not_logged_but_other_failures_are():
    import logging

    from actors._driver.admin_start import ShutdownNoise

    def record(code: int) -> logging.LogRecord:
        return logging.LogRecord("ControllerActor", logging.ERROR, __file__, 1,
                                 "Pending Actor create for %s failed (%s): %s", ("ActorAddr-(T|:1)", code, None),
                                 None)

    assert not ShutdownNoise().filter(record(0xE01))
    assert ShutdownNoise().filter(record(0xE05))  # ERROR_Import: a real problem, still shown
    assert ShutdownNoise().filter(logging.LogRecord("x", logging.ERROR, __file__, 1, "other", None, None))


@pytest.mark.slow
def test_sigkilled_worker_trials_finish_elsewhere(cluster, storage_dir, no_leaks):
    tuner = Tuner(T.fn_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": 30, "slow_save": 0.1},
                  tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.PerResultFIFO()),
                  run_config=RunConfig(name="loss", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0, heartbeat_timeout_s=3.0,
                                       failure_config=FailureConfig(max_failures=3)))
    out: dict = {}
    thread = fit_in_thread(tuner, out)
    wait_for(lambda: listening(cluster.port), 20, "the leader to listen")
    cluster.start_worker("a")
    cluster.start_worker("b")
    import glob
    import json

    def a_has_progress() -> bool:
        for f in glob.glob(f"{storage_dir}/loss/*/result.json"):
            rows = [json.loads(line) for line in open(f) if line.strip()]
            if sum(1 for r in rows if r.get("member") == f"a-{cluster.tag}") >= 5:
                return True
        return False

    wait_for(a_has_progress, 60, "trials on worker a to make progress")
    killed_at = time.time()
    cluster.kill_worker("a")
    thread.join(timeout=120)
    assert not thread.is_alive(), "fit() did not finish after the worker was killed"
    assert "error" not in out, out.get("error")
    grid = out["grid"]
    moved = [r for r in grid if r.num_failures]
    assert moved, "no trial was running on the killed worker"
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        assert [x["training_iteration"] for x in r.metrics_history] == list(range(1, 31))
    a, b = f"a-{cluster.tag}", f"b-{cluster.tag}"
    for r in moved:
        # (not split at killed_at: a's trial processes outlive the SIGKILLed command by up to seconds, as
        # designed, and a result they sent before they died is the lost run's; under load one came after it)
        members = [x["member"] for x in r.metrics_history]
        moved_at = members.index(b)  # the first row of the run elsewhere
        assert set(members[:moved_at]) == {a} and set(members[moved_at:]) == {b}, members
        after = r.metrics_history[moved_at:]
        assert after[0]["restored_from"] >= 4  # resumed from its checkpoint, not from scratch
        print(f"kill -> first result elsewhere: {after[0]['wall'] - killed_at:.2f}s")
        # fenced: the new run numbers its checkpoints past anything the lost run could still write
        assert r.checkpoint is not None and int(r.checkpoint.path.rstrip("/").rsplit("_", 1)[1]) >= 1024
    cluster.processes("a")  # nothing to stop: killed
    cluster.workers.pop("a")
    cluster.stop()


def test_non_loopback_leader_without_key_is_refused(monkeypatch):
    from actors._driver.errors import ConfigError
    from actors._driver.system import _start_authentication

    monkeypatch.delenv("AUDITION_CLUSTER_KEY", raising=False)
    monkeypatch.delenv("AUDITION_CLUSTER_KEY_FILE", raising=False)
    monkeypatch.delenv("AUDITION_ALLOW_UNAUTHENTICATED", raising=False)
    with pytest.raises(ConfigError, match="without a cluster key"):
        _start_authentication("10.20.30.40")
    _start_authentication("127.0.0.1")  # loopback-only clusters need no key


def test_cluster_status_lists_members_and_free_resources(cluster, storage_dir, no_leaks, tmp_path):
    import glob
    import json

    gate = tmp_path / "gate"  # (the trials run until the status is taken: a loaded machine is slow to ask)
    tuner = Tuner(T.gated_trainable, param_space={"x": grid_search([1.0, 2.0]), "gate": str(gate)},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="st", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0))
    out: dict = {}
    thread = fit_in_thread(tuner, out)
    try:
        wait_for(lambda: listening(cluster.port), 20, "the leader to listen")
        cluster.start_worker("a", cpus=2)
        wait_for(lambda: sum(1 for p in glob.glob(f"{storage_dir}/st/*/result.json") if os.path.getsize(p)) == 2,
                 30, "both trials to report")  # (each result.json is created empty at its trial's start, as Ray's)
        token, env = marked_env(PYTHONPATH=ROOT)
        res = subprocess.run([sys.executable, "-m", "actors._cli", "cluster", "status", "--leader",
                              f"127.0.0.1:{cluster.port}", "--json"], capture_output=True, text=True, timeout=60,
                             env=env)
    finally:
        gate.touch()
    assert not left_behind(token, within_s=0), "the status command left processes behind (a Thespian admin?)"
    assert res.returncode == 0, res.stderr[-2000:]
    status = json.loads(res.stdout)
    assert status["experiment"] == "st"
    (member,) = status["members"]
    assert member["member"] == f"a-{cluster.tag}" and member["resources"] == {"cpu": 2.0}
    assert member["free"] == {"cpu": 0.0} and len(member["trials"]) == 2 and not member["lost"]
    thread.join(timeout=60)
    assert "error" not in out, out.get("error")
    cluster.stop()
    token, env = marked_env(PYTHONPATH=ROOT)
    bad = subprocess.run([sys.executable, "-m", "actors._cli", "cluster", "status", "--leader",
                          f"127.0.0.1:{cluster.port}"], capture_output=True, text=True, timeout=60, env=env)
    assert not left_behind(token, within_s=0)
    assert bad.returncode == 2 and "no audition leader listens" in bad.stderr


def _members_of(grid: object) -> dict[str, list[tuple[float, float]]]:
    """member -> a span within each trial it ran (one member per trial: nothing was lost).

    The span is one the trial's code surely ran through: from the start of the ``slow_save`` sleep before its
    first report to its last report. Not from ``wall - time_this_iter_s``: that counts back from the run's
    clock reading in ``report()``, after ``Checkpoint.from_dict`` (8 ms on a fresh process's first call, more
    on a loaded machine), so it put a trial's start before its predecessor on the member had ended (CI, once).
    """
    members: dict[str, list[tuple[float, float]]] = {}
    for r in grid:  # type: ignore[attr-defined]
        h = r.metrics_history
        (member,) = {x["member"] for x in h}
        members.setdefault(member, []).append((h[0]["wall"] - r.config["slow_save"], h[-1]["wall"]))
    return members


@pytest.mark.slow
def test_leader_runs_trials_next_to_a_worker(cluster, storage_dir, no_leaks):
    """leader_runs_trials=True (the default): the driver's own system is a member too."""
    tuner = Tuner(T.fn_trainable, param_space={"x": grid_search([float(i) for i in range(1, 9)]), "steps": 15,
                                               "slow_save": 0.1},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="mh", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       verbose=0))
    out = _fit_with_workers(cluster, tuner, [("a", 1)])
    assert "error" not in out, out.get("error")
    assert [r.status for r in out["grid"]] == [TrialStatus.TERMINATED] * 8
    members = _members_of(out["grid"])
    assert set(members) == {"leader", f"a-{cluster.tag}"}, members
    assert not _intervals_overlap(members[f"a-{cluster.tag}"])  # the worker has 1 CPU
    cluster.stop()


@pytest.mark.slow
def test_with_resources_picks_the_member_big_enough(cluster, storage_dir, no_leaks):
    """2-CPU trials never go to the 1-CPU worker, and one at a time fills the 2-CPU one."""
    from actors import with_resources

    tuner = Tuner(with_resources(T.fn_trainable, {"cpu": 2}),
                  param_space={"x": grid_search([1.0, 2.0, 3.0]), "steps": 4, "slow_save": 0.05},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="mh", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0))
    out = _fit_with_workers(cluster, tuner, [("small", 1), ("big", 2)])
    assert "error" not in out, out.get("error")
    members = _members_of(out["grid"])
    assert set(members) == {f"big-{cluster.tag}"}, members
    assert not _intervals_overlap(members[f"big-{cluster.tag}"])
    cluster.stop()


def _cpus_by_x(config: dict) -> dict:
    return {"cpu": 2 if config["x"] >= 3.0 else 1}


@pytest.mark.slow
def test_each_trial_s_own_resources_pick_a_member_big_enough_for_it(cluster, storage_dir, no_leaks):
    """Resources from a function of the config (Ray's with_resources(train, fn)): a 2-CPU trial only on the 2-CPU
    worker, alone there; the 1-CPU trials anywhere, never more at once than a member's CPUs."""
    from actors import with_resources

    tuner = Tuner(with_resources(T.fn_trainable, _cpus_by_x),
                  param_space={"x": grid_search([1.0, 3.0, 2.0, 4.0, 1.5]), "steps": 4, "slow_save": 0.05},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="mh", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0))
    out = _fit_with_workers(cluster, tuner, [("small", 1), ("big", 2)])
    assert "error" not in out, out.get("error")
    grid = out["grid"]
    assert [r.status for r in grid] == [TrialStatus.TERMINATED] * 5
    big, small = f"big-{cluster.tag}", f"small-{cluster.tag}"
    where = {r.config["x"]: {x["member"] for x in r.metrics_history} for r in grid}
    assert where[3.0] == where[4.0] == {big}, where
    members = _members_of(grid)
    assert not _intervals_overlap(members.get(small, []))
    spans = {r.config["x"]: (r.metrics_history[0]["wall"] - r.config["slow_save"], r.metrics_history[-1]["wall"])
             for r in grid}
    for x in (3.0, 4.0):  # nothing beside a 2-CPU trial on the 2-CPU worker
        beside = [y for y in spans if y != x and where[y] == {big}]
        assert not any(spans[y][0] < spans[x][1] and spans[x][0] < spans[y][1] for y in beside), (x, spans, where)
    cluster.stop()


@pytest.mark.slow
def test_a_resource_changing_scheduler_resizes_trials_from_the_members_totals(cluster, storage_dir, no_leaks):
    """Two 2-CPU workers: the cluster's 4 CPUs (the members' totals the scheduler is told) are shared, each trial
    grows from 1 CPU to 2 after its first result, restarts from its checkpoint, and a 2-CPU trial runs alone on
    its member."""
    from actors.schedulers import FIFOScheduler, ResourceChangingScheduler

    tuner = Tuner(T.sized_trainable, param_space={"x": grid_search([1.0, 2.0]), "steps": 5, "slow_save": 0.2},
                  tune_config=TuneConfig(metric="loss", mode="min", scheduler=ResourceChangingScheduler(
                      FIFOScheduler(), T.AtMostTwoCpus())),
                  run_config=RunConfig(name="mh", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0))
    out = _fit_with_workers(cluster, tuner, [("a", 2), ("b", 2)])
    assert "error" not in out, out.get("error")
    grid = out["grid"]
    assert [r.status for r in grid] == [TrialStatus.TERMINATED] * 2
    for r in grid:
        h = r.metrics_history
        assert [x["training_iteration"] for x in h] == [1, 2, 3, 4, 5] and h[0]["cpus"] == 1.0, h
        assert {x["cpus"] for x in h[1:]} == {2.0}, [(x["training_iteration"], x["cpus"]) for x in h]
    # at 2 CPUs, each on a member of its own whenever both ran
    runs = {r.config["x"]: [(x["wall"] - 0.2, x["wall"], x["member"]) for x in r.metrics_history[1:]] for r in grid}
    clash = [(a, b) for a in runs[1.0] for b in runs[2.0] if a[2] == b[2] and a[0] < b[1] and b[0] < a[1]]
    assert not clash, clash
    cluster.stop()


@pytest.mark.slow
def test_trial_no_member_can_ever_hold_fails_the_experiment(cluster, storage_dir, no_leaks):
    """A GPU trial on a CPU-only cluster: a clear error after placement_timeout_s, not a hang."""
    from actors import with_resources
    from actors._driver.errors import TuneError

    tuner = Tuner(with_resources(T.fn_trainable, {"cpu": 1, "gpu": 1}), param_space={"x": 1.0, "steps": 2},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="mh", storage=storage_dir, system=f"tcp://127.0.0.1:{cluster.port}",
                                       leader_runs_trials=False, verbose=0, placement_timeout_s=2.0))
    out = _fit_with_workers(cluster, tuner, [("a", 1)], timeout_s=60)  # fails if fit() hangs
    err = out.get("error")
    assert isinstance(err, TuneError), out
    assert "no member can ever run a trial needing" in str(err) and "gpu" in str(err), err
    cluster.stop()


def test_local_storage_with_a_remote_leader_warns(tmp_path, caplog):
    import logging

    with caplog.at_level(logging.WARNING, logger="audition"):
        Tuner(T.fn_trainable, run_config=RunConfig(storage=str(tmp_path), system="tcp://10.9.8.7:1900"))
    assert any("is a local path" in r.getMessage() and "s3://" in r.getMessage() for r in caplog.records)
    with caplog.at_level(logging.WARNING, logger="audition"):
        caplog.clear()
        Tuner(T.fn_trainable, run_config=RunConfig(storage=str(tmp_path), system="tcp://127.0.0.1:1900"))
    assert not any("is a local path" in r.getMessage() for r in caplog.records)


def test_placement_timeout_must_be_positive():
    from actors._driver.errors import ConfigError

    for bad in (0, -1.0, "30", True):
        with pytest.raises(ConfigError, match="placement_timeout_s"):
            RunConfig(placement_timeout_s=bad)  # type: ignore[arg-type]


_ENDED_RACE = """
import socket, sys
import actors._cluster.join as join
from actors._cluster.member import cluster_status
from actors._driver.errors import ConfigError

port = int(sys.argv[1])
leader = socket.socket()
leader.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
leader.bind(("127.0.0.1", port))
leader.listen()

def check_leader(*args, **kwargs):  # the experiment ends right after the command found its leader listening
    leader.close()

join.check_leader = check_leader
try:
    print("STATUS", cluster_status(f"127.0.0.1:{port}"))
except ConfigError as exc:
    print("REFUSED", exc)
"""


def test_cluster_status_never_starts_an_admin_of_its_own_when_the_experiment_just_ended(tmp_path) -> None:
    """Found under load: `audition cluster status` started just as the experiment ended found the port listening,
    then Thespian, finding no admin there, started one of its own on the leader's port (a detached process left
    running, holding the command's output open) and the command printed an empty status from it."""
    from tests._ports import leader_port

    port = leader_port()
    script = tmp_path / "race.py"
    script.write_text(_ENDED_RACE)
    token, env = marked_env(PYTHONPATH=ROOT)
    try:
        res = subprocess.run([sys.executable, str(script), str(port)], capture_output=True, text=True, timeout=60,
                             env=env)
    finally:
        left = left_behind(token, within_s=0)  # (the broken command's admin, killed so it leaves nothing behind)
    assert not left, "the command left a process behind (a Thespian admin on the leader's port)"
    assert res.returncode == 0, res.stderr[-2000:]
    assert "REFUSED the experiment on the leader at 127.0.0.1:" in res.stdout, res.stdout
    assert "ended while this command connected" in res.stdout
    assert not listening(port)
