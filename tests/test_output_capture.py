"""A trial's stdout/stderr land in ``stdout.txt``/``stderr.txt`` of its trial directory, across runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import traceback
from typing import Any

import pytest

from actors import Checkpoint, FailureConfig, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors._engine.trial import TrialStatus
from actors._worker import capture as _capture
from actors._worker.capture import OutputCapture
from actors.search import grid_search
from storage import StorageContext
from tests import _trainables as T


def printing_fn(config: dict[str, Any]) -> None:
    """Prints from each run; fails once after its first checkpoint so the retry appends."""
    ckpt = get_checkpoint()
    run = "retry" if ckpt else "first"
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    print(f"fn-out {run} start={start}")
    sys.stderr.write(f"fn-err {run}\n")
    for step in range(start, 3):
        print(f"fn-out step={step}", flush=True)
        report({"loss": 1.0 / (step + 1)}, checkpoint=Checkpoint.from_dict({"step": step}))
        if step == 0 and ckpt is None:
            try:
                raise KeyError("printed, not raised")
            except KeyError:
                traceback.print_exc()
            raise ValueError("fail once")


class PrintingClass(T.ClassTrainable):
    def setup(self, config: dict[str, Any]) -> None:
        super().setup(config)
        print("cls-out setup")
        print("cls-err setup", file=sys.stderr)

    def step(self) -> dict[str, Any]:
        out = super().step()
        print(f"cls-out step={self.step_no} restored_from={self.restored_from}")
        return out


def _leaked(seen: Any, words: tuple[str, ...]) -> list[str]:
    """Terminal lines holding one of ``words`` without the trial prefix of the echo
    (``RunConfig(log_to_driver)``): output that escaped the capture."""
    lines = (seen.out + seen.err).splitlines()
    return [x for x in lines if any(w in x for w in words) and not re.match(r"\(\S+ pid=\d+\) ", x)]


def _read(trial_dir: str, name: str) -> str:
    with open(os.path.join(trial_dir, name), encoding="utf-8") as f:
        return f.read()


def test_function_trial_output_is_captured_and_appended_by_the_retry(storage_dir, no_leaks, capfd) -> None:
    grid = Tuner(printing_fn, tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name="out_fn", storage=storage_dir, system="multiproc", verbose=0,
                                      failure_config=FailureConfig(max_failures=1))).fit()
    r = grid[0]
    assert r.status is TrialStatus.TERMINATED and r.num_failures == 1
    trial_dir = r.path
    out, err = _read(trial_dir, "stdout.txt"), _read(trial_dir, "stderr.txt")
    assert out.splitlines() == ["fn-out first start=0", "fn-out step=0",
                                "fn-out retry start=1", "fn-out step=1", "fn-out step=2"], out
    assert "fn-err first" in err and "fn-err retry" in err
    assert err.index("fn-err first") < err.index("fn-err retry")
    assert "KeyError: 'printed, not raised'" in err  # traceback.print_exc() goes to stderr
    assert "ValueError: fail once" in err  # so does the traceback of the failure itself
    seen = capfd.readouterr()
    assert not _leaked(seen, ("fn-out", "fn-err"))  # only the prefixed echo reached the terminal


@pytest.mark.parametrize("system", ["simple", "multiproc"])
def test_class_trial_output_is_appended_across_pause_and_resume(system, storage_dir, no_leaks, capfd) -> None:
    grid = Tuner(PrintingClass, param_space={"steps": 4},
                 tune_config=TuneConfig(metric="loss", mode="min", scheduler=T.PauseFromHook(at=2)),
                 run_config=RunConfig(name="out_cls", storage=storage_dir, system=system, verbose=0)).fit()
    r = grid[0]
    assert r.status is TrialStatus.TERMINATED
    assert r.metrics_history[2]["restored_from"] == 1  # it really paused and resumed
    trial_dir = r.path
    assert _read(trial_dir, "stdout.txt").splitlines() == [
        "cls-out setup", "cls-out step=1 restored_from=-1", "cls-out step=2 restored_from=-1",
        "cls-out setup", "cls-out step=3 restored_from=1", "cls-out step=4 restored_from=1",
    ]
    assert _read(trial_dir, "stderr.txt").splitlines() == ["cls-err setup", "cls-err setup"]
    seen = capfd.readouterr()
    assert not _leaked(seen, ("cls-out", "cls-err"))


def test_other_threads_pass_through_and_object_stores_are_rewritten_whole(capfd) -> None:
    ctx = StorageContext("memory://capture-test")
    paths = {"stdout": ctx.join("t", "stdout.txt"), "stderr": ctx.join("t", "stderr.txt")}
    ctx.fs.pipe_file(paths["stdout"], b"earlier run\n")
    cap = OutputCapture(ctx, paths)
    original = sys.stdout
    cap.start()
    try:
        other = threading.Thread(target=lambda: print("from another thread"))
        other.start()
        other.join()
        print("mine")
        cap.flush()
        print("more")
        cap.flush()
    finally:
        cap.stop()
    # restored, unless a trial thread of an earlier test in this process still captures
    assert sys.stdout is original or _capture._routes
    print("after stop")
    assert ctx.fs.cat_file(paths["stdout"]) == b"earlier run\nmine\nmore\n"
    assert not ctx.fs.exists(paths["stderr"])  # nothing written, no file
    seen = capfd.readouterr().out
    assert "from another thread" in seen and "after stop" in seen


def fd_writing_fn(config: dict[str, Any]) -> None:
    """Writes from a thread of its own, straight to fd 1/2, and from a subprocess, in that order."""
    tag = config["tag"]
    for step in range(3):
        print(f"main-{tag}-{step}")
        helper = threading.Thread(target=print, args=(f"thread-{tag}-{step}",))
        helper.start()
        helper.join()
        os.write(1, f"fd-one-{tag}-{step}\n".encode())
        os.write(2, f"fd-two-{tag}-{step}\n".encode())
        os.write(1, "é".encode()[:1])  # a character split across two writes
        os.write(1, "é".encode()[1:] + b"\n")
        subprocess.run([sys.executable, "-c", f"print('child-{tag}-{step}')"], check=True)
        report({"loss": float(step), "pid": os.getpid()})
    os.write(1, f"last-{tag}\n".encode())  # after the last report: saved by the end of the run
    if tag == "fails":
        os.write(2, b"fd-before-failure\n")
        raise RuntimeError("failing after fd writes")


def _expected_out(tag: str) -> list[str]:
    lines = []
    for step in range(3):
        lines += [f"main-{tag}-{step}", f"thread-{tag}-{step}", f"fd-one-{tag}-{step}", "é", f"child-{tag}-{step}"]
    return [*lines, f"last-{tag}"]


def _fd_fit(storage_dir: str, name: str, tags: list[str], concurrent: int) -> Any:
    return Tuner(fd_writing_fn, param_space={"tag": grid_search(tags)},
                 tune_config=TuneConfig(metric="loss", mode="min", max_concurrent_trials=concurrent,
                                        reuse_actors=True),
                 run_config=RunConfig(name=name, storage=storage_dir, system="multiproc", verbose=0,
                                      resources_per_trial={"cpu": 0.5})).fit()


def test_fd_level_output_of_concurrent_trials_lands_in_each_trials_files(storage_dir, no_leaks, capfd) -> None:
    grid = _fd_fit(storage_dir, "out_fd", ["a", "b"], concurrent=2)
    assert grid.num_errors == 0
    assert len({r.metrics["pid"] for r in grid}) == 2  # two actor processes side by side
    for r in grid:
        tag = r.config["tag"]
        trial_dir = r.path
        assert _read(trial_dir, "stdout.txt").splitlines() == _expected_out(tag)
        assert _read(trial_dir, "stderr.txt").splitlines() == [f"fd-two-{tag}-{s}" for s in range(3)]
    seen = capfd.readouterr()
    assert not _leaked(seen, ("thread-", "fd-one", "fd-two", "child-", "last-")), seen


def test_a_reused_actor_process_gives_each_trial_only_its_own_fd_output(storage_dir, no_leaks, capfd) -> None:
    grid = _fd_fit(storage_dir, "out_fd_reuse", ["p", "q", "r", "fails"], concurrent=1)
    by_tag = {r.config["tag"]: r for r in grid}
    assert len({r.metrics["pid"] for r in grid}) == 1  # one process ran them all, one after the other
    assert by_tag["fails"].status is TrialStatus.ERROR and grid.num_errors == 1
    for tag, r in by_tag.items():
        trial_dir = r.path
        assert _read(trial_dir, "stdout.txt").splitlines() == _expected_out(tag)
        err = _read(trial_dir, "stderr.txt")
        assert err.splitlines()[:3] == [f"fd-two-{tag}-{s}" for s in range(3)]
        if tag == "fails":  # the failure still reaches error.txt and the controller, after the fd line
            assert "RuntimeError: failing after fd writes" in _read(trial_dir, "error.txt")
            assert "failing after fd writes" in str(r.error)
            assert err.index("fd-before-failure") < err.index("RuntimeError: failing after fd writes")
        else:
            assert len(err.splitlines()) == 3, err
    seen = capfd.readouterr()
    assert not _leaked(seen, ("thread-", "fd-one", "fd-two", "child-", "last-", "fd-before")), seen
    for tag, r in by_tag.items():  # the echo names the trial that printed each line, also in one process
        echoed = [x for x in seen.out.splitlines() if f"fd-one-{tag}-" in x]
        # the prefix is Ray's trial name, ``<trainable>_<trial_id>``
        prefix = f"(fd_writing_fn_{r.trial_id} pid="
        assert len(echoed) == 3 and all(x.startswith(prefix) for x in echoed), (tag, echoed)


def _pump_child(root: str) -> None:
    """In a forked (non-main) process: more than a pipe's worth through fd 1, while Python prints."""
    before = os.fstat(1).st_ino
    ctx = StorageContext(root)
    paths = {"stdout": os.path.join(root, "stdout.txt"), "stderr": os.path.join(root, "stderr.txt")}
    cap = OutputCapture(ctx, paths, capture_fds=True)
    cap.start()
    assert os.fstat(1).st_ino != before  # fd 1 is the pipe now
    big = ("ü" * 40 + "\n").encode() * 4000  # 324 KB, multibyte characters split across reads
    writer = threading.Thread(target=os.write, args=(1, big))
    writer.start()
    for i in range(200):
        sys.stdout.write(f"py {i}\n")  # one write: lands whole, though maybe inside a line of ü
    writer.join()
    cap.flush()
    cap.stop()
    assert os.fstat(1).st_ino == before  # restored when the run ended
    print("after the run")  # not the trial's any more


def test_fd_pump_drains_more_than_a_pipe_and_restores_fd_1(tmp_path, capfd) -> None:
    import multiprocessing

    child = multiprocessing.get_context("fork").Process(target=_pump_child, args=(str(tmp_path),))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    out = (tmp_path / "stdout.txt").read_text(encoding="utf-8")
    assert re.findall(r"py \d+\n", out) == [f"py {i}\n" for i in range(200)]
    assert re.sub(r"py \d+\n", "", out) == ("ü" * 40 + "\n") * 4000  # nothing lost, nothing garbled
    assert "after the run" in capfd.readouterr().out


def test_a_forked_actor_process_inherits_no_routes_and_the_test_kit_ends_its_threads(tmp_path) -> None:
    """A route left in a parent (a trial thread of an in-process system) must not follow a fork:
    thread idents are reused, and the child's first new thread could get that ident."""
    import multiprocessing

    from actors._shell.trial_actor import TrialActor
    from actors.messages import TrialResults
    from actors.testing import ActorTestKit
    from tests.test_actor_units import _run_trial

    stale = OutputCapture(StorageContext(str(tmp_path)), {"stdout": str(tmp_path / "o"), "stderr": str(tmp_path / "e")})
    _capture._routes[-1] = stale  # what a leaked in-process trial thread would leave behind
    try:
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        child = ctx.Process(target=lambda: q.put(len(_capture._routes)))
        child.start()
        assert q.get(timeout=10) == 0
        child.join(timeout=10)
    finally:
        _capture._routes.pop(-1, None)
    # and the test kit no longer leaves one: its close() makes a blocked trial thread end
    with ActorTestKit() as kit:
        actor = kit.create(TrialActor)
        kit.send(actor, _run_trial(str(tmp_path)))  # window 1: blocks after its first result
        kit.wait_for(TrialResults)
    for t in [t for t in threading.enumerate() if t.name == "trial-t1"]:
        t.join(timeout=5.0)  # it was told to stop; before the fix it waited for a decision forever
        assert not t.is_alive()
    assert not _capture._routes
