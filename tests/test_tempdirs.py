"""Temp directories left by killed trial processes are swept (``actors/_tempdirs.py``).

Every test points the temp dir at its own ``tmp_path`` (``tempfile.tempdir`` and ``$TMPDIR``), so no
sweep here ever looks at the machine's real temp dir while other tests run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import pytest

from actors import Checkpoint, RunConfig, Tuner
from actors._tempdirs import _where, owned_tempdir, sweep

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def tmpdir_here(tmp_path: Any, monkeypatch: Any) -> str:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.setenv("TMPDIR", str(root))
    return str(root)


def _child(root: str) -> tuple[subprocess.Popen[str], str]:
    """A process that makes its own directory in ``root`` and runs until its stdin closes."""
    code = ("import sys; from actors._tempdirs import owned_tempdir; print(owned_tempdir('ckpt'), flush=True); "
            "sys.stdin.read()")
    env = {**os.environ, "TMPDIR": root, "PYTHONPATH": ROOT}
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env)
    assert p.stdout is not None
    return p, p.stdout.readline().strip()


def test_a_live_process_directory_is_kept_and_swept_once_it_is_gone(tmpdir_here: str) -> None:
    p, made = _child(tmpdir_here)
    try:
        assert os.path.dirname(made) == tmpdir_here and os.path.basename(made).startswith(f"audition-{p.pid}-")
        assert sweep() == [] and os.path.isdir(made)  # its process runs
        mine = owned_tempdir("save")
        assert sweep() == [] and os.path.isdir(mine)  # this process's own
    finally:
        assert p.stdin is not None
        p.stdin.close()
        p.wait(timeout=30)
    assert sweep() == [made] and not os.path.exists(made)
    assert os.path.isdir(mine)


def test_only_our_directories_are_touched(tmpdir_here: str) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    here = _where()
    other = "0" * 8 if here != "0" * 8 else "1" * 8
    kept = [f"audition-objects-{os.getuid()}", "audition-decide-abc", f"audition-{dead.pid}", "audition_ckpt_x",
            f"other-{dead.pid}-{here}-ckpt-x", f"audition-{dead.pid}-{other}-ckpt-x",  # another machine's
            f"audition-{dead.pid}-{here}"]
    for name in kept:
        os.mkdir(os.path.join(tmpdir_here, name))
    with open(os.path.join(tmpdir_here, f"audition-{dead.pid}-{here}-file-x"), "w"):
        pass
    target = os.path.join(tmpdir_here, "target")
    os.mkdir(target)
    os.symlink(target, os.path.join(tmpdir_here, f"audition-{dead.pid}-{here}-link-x"))
    gone = os.path.join(tmpdir_here, f"audition-{dead.pid}-{here}-ckpt-x")
    os.makedirs(os.path.join(gone, "inner"))
    assert sweep(tmpdir_here) == [gone]
    assert sorted(os.listdir(tmpdir_here)) == sorted([*kept, f"audition-{dead.pid}-{here}-file-x", "target",
                                                      f"audition-{dead.pid}-{here}-link-x"])


def _killed(config: dict[str, Any]) -> None:
    ckpt = Checkpoint.from_dict({"a": 1})  # a temp dir of this trial process's, removed when it goes
    with open(config["note"], "w") as f:
        f.write(f"{os.getpid()} {ckpt.path}")
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_trial_process_leaves_no_temp_dir(tmpdir_here: str, tmp_path: Any, no_leaks: Any) -> None:
    note = str(tmp_path / "note")
    started = time.monotonic()
    grid = Tuner(_killed, param_space={"note": note},
                 run_config=RunConfig(name="e", storage_path=str(tmp_path / "results"), verbose=0)).fit()
    took = time.monotonic() - started
    assert grid[0].error is not None  # the trial was killed
    pid, made = open(note).read().split(" ", 1)
    assert int(pid) != os.getpid() and os.path.basename(made).startswith(f"audition-{pid}-")
    assert os.path.dirname(made) == tmpdir_here
    assert not os.path.exists(made)
    assert took < 10, took


def test_audition_worker_sweeps_once_its_system_is_down(tmpdir_here: str, monkeypatch: Any) -> None:
    """``audition worker``'s end (its trial processes forked from its admin): the sweep follows the shutdown."""
    import threading

    import actors._cluster.member as member

    p, made = _child(tmpdir_here)
    assert p.stdin is not None
    p.stdin.close()
    p.wait(timeout=30)
    at_shutdown: list[bool] = []

    class FakeSystem:
        def shutdown(self) -> None:
            at_shutdown.append(os.path.isdir(made))

    monkeypatch.setattr(member, "start_multiproc", lambda *a, **k: FakeSystem())
    for name in ("_patch_transport", "_authenticate", "watch_owner", "record_child_exits", "_check_bind"):
        monkeypatch.setattr(member, name, lambda *a, **k: None)
    monkeypatch.setattr(member, "_listen_and_advertise", lambda *a, **k: "127.0.0.1")
    monkeypatch.setattr("actors._cluster.join.check_leader", lambda *a, **k: None)
    monkeypatch.setattr(member.signal, "signal", lambda *a, **k: None)  # (this process's handlers stay)
    monkeypatch.setenv("THESPIAN_BASE_IPADDR", "127.0.0.1")
    stop = threading.Event()
    stop.set()
    assert member.run_worker("127.0.0.1:1", port=1, stop=stop) == 0
    assert at_shutdown == [True] and not os.path.exists(made)
