"""A driver whose memory a forked process cannot use gets an actor system started by a fresh interpreter.

Thespian forks every actor from the process that starts the system; after TensorFlow (or JAX, polars
or joblib's process pool) has run in the driver, a forked trial's first ``tf.function`` waited forever
(the run hung). The scripts run as real processes; ``processes_with`` finds the helper and every actor
by the driver's command line, which the helper's carries after ``--``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from actors._driver.errors import ConfigError
from actors._driver.fresh_system import ENV, fork_unsafe_reason, native_thread_names
from tests._cluster import wait_for
from tests._driver_script import processes_with
from tests._lean import needs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _run(script: str, storage: str, method: str | None, timeout: float, *args: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop(ENV, None)
    if method is not None:
        env[ENV] = method
    try:
        done = subprocess.run([sys.executable, script, storage, *args], env=env, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        wait_for(lambda: not processes_with(script, storage), 20, "the actor system's processes to exit")
    assert done.returncode == 0, done.stderr[-3000:]
    *before, last = done.stdout.strip().splitlines() or [""]
    try:
        return dict(json.loads(last), printed=before)
    except json.JSONDecodeError:
        raise AssertionError(f"the driver's last line is not its JSON; stdout:\n{done.stdout[-3000:]}\n"
                             f"stderr:\n{done.stderr[-3000:]}") from None


def _fake_tensorflow(monkeypatch: pytest.MonkeyPatch, ran: bool) -> None:
    context = types.ModuleType("tensorflow.python.eager.context")
    handle = object() if ran else None
    context.context_safe = lambda: types.SimpleNamespace(_context_handle=handle)  # type: ignore[attr-defined]
    eager = types.ModuleType("tensorflow.python.eager")
    eager.context = context  # type: ignore[attr-defined]
    python = types.ModuleType("tensorflow.python")
    python.eager = eager  # type: ignore[attr-defined]
    tf = types.ModuleType("tensorflow")
    tf.python = python  # type: ignore[attr-defined]
    for name, module in [("tensorflow", tf), ("tensorflow.python", python), ("tensorflow.python.eager", eager),
                         ("tensorflow.python.eager.context", context)]:
        monkeypatch.setitem(sys.modules, name, module)


def _fake_jax(monkeypatch: pytest.MonkeyPatch, ran: bool | None) -> None:
    """``jax`` whose backends are initialized or not (``ran``), or (None) one that does not tell."""
    bridge = types.ModuleType("jax._src.xla_bridge")
    if ran is not None:
        bridge.backends_are_initialized = lambda: ran  # type: ignore[attr-defined]
    src = types.ModuleType("jax._src")
    src.xla_bridge = bridge  # type: ignore[attr-defined]
    jax = types.ModuleType("jax")
    jax._src = src  # type: ignore[attr-defined]
    for name, module in [("jax", jax), ("jax._src", src), ("jax._src.xla_bridge", bridge)]:
        monkeypatch.setitem(sys.modules, name, module)


def test_the_start_method_follows_whether_jax_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "auto")
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    assert fork_unsafe_reason() is None
    _fake_jax(monkeypatch, ran=False)  # imported, never run: forking is safe
    assert fork_unsafe_reason() is None
    _fake_jax(monkeypatch, ran=True)
    assert fork_unsafe_reason() == "JAX has run in this process"
    monkeypatch.setenv(ENV, "fork")
    assert fork_unsafe_reason() is None  # (told to fork: forks, whatever ran)
    monkeypatch.setenv(ENV, "auto")
    _fake_jax(monkeypatch, ran=None)  # a JAX whose state cannot be read: fresh, as Ray's workers, never a hang
    assert fork_unsafe_reason() == "JAX is loaded in this process (whether it ran could not be told)"


def _named_thread(name: str) -> tuple[threading.Thread, threading.Event]:
    """A thread the kernel knows as ``name`` (PR_SET_NAME, as a native library names its pool's threads)."""
    named, done = threading.Event(), threading.Event()

    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(15, name.encode(), 0, 0, 0) == 0  # PR_SET_NAME
        named.set()
        done.wait(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert named.wait(10)
    return thread, done


def test_the_start_method_follows_whether_polars_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "auto")
    for name in ("tensorflow", "jax"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setitem(sys.modules, "polars", types.ModuleType("polars"))
    assert fork_unsafe_reason() is None  # imported, never run: no pool yet, forking is safe
    thread, done = _named_thread("polars-0")
    try:
        assert "polars-0" in native_thread_names()
        assert fork_unsafe_reason() == "polars has run in this process (its thread pool exists)"
        monkeypatch.delitem(sys.modules, "polars")
        assert fork_unsafe_reason() is None  # (a thread of that name, but no polars: not its pool)
    finally:
        done.set()
        thread.join(10)


def test_the_start_method_follows_whether_joblibs_process_pool_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "auto")
    for name in ("tensorflow", "jax", "polars"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for name in ("joblib.externals.loky.reusable_executor", "loky.reusable_executor"):  # joblib's, loky's own
        pool = types.ModuleType(name)
        pool._executor = None  # type: ignore[attr-defined]  # imported (as joblib always does), never run
        monkeypatch.delitem(sys.modules, "joblib.externals.loky.reusable_executor", raising=False)
        monkeypatch.setitem(sys.modules, name, pool)
        assert fork_unsafe_reason() is None
        pool._executor = types.SimpleNamespace(_flags=types.SimpleNamespace(shutdown=False))  # type: ignore[attr-defined]
        assert fork_unsafe_reason() == "joblib's process pool (loky) has run in this process"
        pool._executor._flags.shutdown = True  # type: ignore[attr-defined]  # shut down: the child makes its own
        assert fork_unsafe_reason() is None
        pool._executor = object()  # type: ignore[attr-defined]  # a layout without the flag: taken as running
        assert fork_unsafe_reason() is not None
        monkeypatch.delitem(sys.modules, name)


def test_the_start_method_follows_the_setting_and_whether_tensorflow_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "fresh")
    assert fork_unsafe_reason() == f"${ENV}=fresh"
    _fake_tensorflow(monkeypatch, ran=True)
    monkeypatch.setenv(ENV, "fork")
    assert fork_unsafe_reason() is None  # (told to fork: forks, whatever ran)
    monkeypatch.setenv(ENV, "auto")
    assert fork_unsafe_reason() == "TensorFlow has run in this process"
    monkeypatch.delenv(ENV)
    assert fork_unsafe_reason() == "TensorFlow has run in this process"
    _fake_tensorflow(monkeypatch, ran=False)  # imported, never run: forking is safe
    assert fork_unsafe_reason() is None
    monkeypatch.setenv(ENV, "spawn")
    with pytest.raises(ConfigError, match=r"'spawn' is not one of auto, fork, fresh"):
        fork_unsafe_reason()


@pytest.mark.parametrize("method,key", [("fork", False), ("fresh", False), ("fork", True), ("fresh", True)],
                         ids=["fork", "fresh", "fork-with-a-key-given-in-code", "fresh-with-a-key-given-in-code"])
def test_objects_of_the_main_script_reach_the_trials_either_way(tmp_path: Path, method: str, key: bool) -> None:
    out = _run(os.path.join(HERE, "_fresh_driver.py"), str(tmp_path / "res"), method, 120, *(["key"] * key))
    assert out == {"errors": [], "scores": [3.0, 3.0], "iterations": [3, 3], "h": [0.5, 0.5],
                   "callback_results": 6,
                   # the cluster key the driver enabled in code signs the fresh system's frames too
                   "signed": [key] * 2,
                   # a module attribute the driver set at run time: a forked trial has it, a fresh one not (Ray's)
                   "marked": [method == "fork"] * 2,
                   # what an actor writes to its fd 1 reaches the driver's stdout either way (a C library's output)
                   "printed": ["written to fd 1 by the scheduler's process"] * 2}


def _train(config: dict[str, Any]) -> None:
    from actors import report

    report({"pid": os.getpid(), "x": config["x"]})


@pytest.mark.parametrize("system", ["multiproc", "tcp"])
def test_fit_in_a_long_lived_process_ends_its_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     system: str) -> None:
    import psutil

    from actors import RunConfig, Tuner
    from actors.search import grid_search
    from tests._ports import leader_port

    monkeypatch.setenv(ENV, "fresh")
    before = {p.pid for p in psutil.Process().children()}
    kind = system if system == "multiproc" else f"tcp://127.0.0.1:{leader_port()}"  # (a leader no member joins)
    grid = Tuner(_train, param_space={"x": grid_search([1, 2])},
                 run_config=RunConfig(storage_path=str(tmp_path), verbose=0, system=kind)).fit()
    assert sorted(r.metrics["x"] for r in grid) == [1, 2] and not grid.errors
    trial_pid = grid[0].metrics["pid"]
    assert trial_pid not in [p.pid for p in psutil.Process().children(recursive=True)]  # (not forked from here)
    assert [p.pid for p in psutil.Process().children() if p.pid not in before] == []  # the helper was reaped


def _train_with(config: dict[str, Any], data: Any) -> None:
    from actors import report

    report({"total": float(sum(data)) * config["x"]})


def test_with_parameters_objects_reach_a_fresh_system_by_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (a forked trial inherits them; a fresh interpreter inherits nothing: they are written to the machine's
    # object area, and removed when fit() ends)
    from actors import RunConfig, Tuner, with_parameters
    from actors._driver.parameters import OBJECTS_DIR_ENV
    from actors.search import grid_search

    monkeypatch.setenv(ENV, "fresh")
    monkeypatch.setenv(OBJECTS_DIR_ENV, str(tmp_path / "objects"))
    grid = Tuner(with_parameters(_train_with, data=list(range(10))), param_space={"x": grid_search([1, 2])},
                 run_config=RunConfig(storage_path=str(tmp_path / "res"), verbose=0)).fit()
    assert not grid.errors and sorted(r.metrics["total"] for r in grid) == [45.0, 90.0]
    assert not [p for p in (tmp_path / "objects").iterdir() if not p.name.endswith(".lock")]
    assert not (tmp_path / "res" / grid.experiment_path.rsplit("/", 1)[-1] / ".objects").exists()  # (not uploaded)


def test_a_system_the_fresh_interpreter_cannot_start_is_a_clear_error(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    from actors import RunConfig, Tuner

    monkeypatch.setenv(ENV, "fresh")
    before = {p.pid for p in psutil.Process().children()}
    with pytest.raises(ConfigError, match=r"^the actor system did not start: refusing to listen on 192\.0\.2\.1 "
                                          r"without a cluster key"):
        Tuner(_train, param_space={"x": 1},
              run_config=RunConfig(storage_path=str(tmp_path), verbose=0, system="tcp://192.0.2.1:45678")).fit()
    assert [p.pid for p in psutil.Process().children() if p.pid not in before] == []


@contextlib.contextmanager
def _long_run(tmp_path: Path, **popen: Any) -> Iterator[tuple[subprocess.Popen[Any], str, str]]:
    """``_long_driver.py`` in a fresh actor system; it and every process of its system killed at the end."""
    script, storage = os.path.join(HERE, "_long_driver.py"), str(tmp_path / "res")
    env = dict(os.environ, PYTHONPATH=ROOT, **{ENV: "fresh"})
    proc = subprocess.Popen([sys.executable, script, storage], env=env, **popen)
    try:
        yield proc, script, storage
    finally:
        for p in [proc, *processes_with(script, storage)]:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                p.kill()
        proc.wait(timeout=10)


def test_ctrl_c_ends_a_fresh_system_and_fit_returns(tmp_path: Path) -> None:
    with _long_run(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as (proc, script, storage):
        wait_for(lambda: len(list(Path(storage).glob("long/*/result.json"))) == 2
                 and all(p.stat().st_size for p in Path(storage).glob("long/*/result.json")), 60,
                 "the first results of both trials")
        family = processes_with(script, storage)  # (the driver's, the helper's and the actors' command lines)
        assert [p.ppid() for p in family if "-c" in p.cmdline()].count(proc.pid) == 1  # the helper
        assert len([p for p in family if "-c" in p.cmdline()]) > 3  # and the admin, the logger, the actors
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out.strip()) == (0, "fit returned"), err[-2000:]
        wait_for(lambda: not processes_with(script, storage), 20, "the actor system's processes to exit")


@pytest.mark.slow
def test_a_sigkilled_driver_leaves_no_fresh_system_behind(tmp_path: Path) -> None:
    with _long_run(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as (proc, script, storage):
        wait_for(lambda: any(Path(storage).glob("long/*/result.json")), 60, "a first result")
        proc.kill()
        proc.wait(timeout=10)
        wait_for(lambda: not processes_with(script, storage), 45, "the orphaned actor system to shut itself down")
        from actors import Tuner

        assert Tuner.can_restore(f"{storage}/long")


@pytest.mark.slow
def test_a_driver_that_ran_tensorflow_gets_trials_that_train(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    out = _run(os.path.join(HERE, "_tf_driver.py"), str(tmp_path / "res"), None, timeout=150)
    assert out["errors"] == [] and out["iterations"] == [2] and out["printed"] == []
    assert 0 < out["losses"][0] < 100


@pytest.mark.slow
def test_a_driver_that_ran_a_parallel_pytorch_op_still_forks_what_computes_with_torch(tmp_path: Path) -> None:
    # (forked as always: PyTorch's OpenMP pool is the thread's that ran the op; a trainable runs on a thread of
    # its own, and so do the search algorithm and the scheduler once OpenMP is loaded: on the forked main thread
    # their parallel ops waited forever)
    pytest.importorskip("torch")
    out = _run(os.path.join(HERE, "_torch_driver.py"), str(tmp_path / "res"), None, 150)
    assert out == {"fresh": None, "errors": [], "iterations": [3, 3], "printed": []}


@pytest.mark.slow
def test_every_built_in_searcher_suggests_the_same_after_a_fresh_unpickle() -> None:
    for library in ("optuna", "hyperopt", "bayes_opt", "nevergrad", "zoopt", "hpbandster"):
        pytest.importorskip(library)
    import cloudpickle

    from tests._fresh_searchers import drive, searchers

    blob = cloudpickle.dumps(searchers())
    want = {name: drive(s) for name, s in searchers().items()}
    done = subprocess.run([sys.executable, os.path.join(HERE, "_fresh_searchers.py")], input=blob,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    got = json.loads(done.stdout)
    assert got == want and all(sum(isinstance(c, dict) for c in v) >= 4 for v in got.values())  # (zoopt: then None)


def test_no_interpreter_to_start_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors import RunConfig, Tuner

    monkeypatch.setenv(ENV, "fresh")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(ConfigError, match=r"could not start a fresh interpreter .*no-python.*METHOD=fork"):
        Tuner(_train, param_space={"x": 1}, run_config=RunConfig(storage_path=str(tmp_path), verbose=0)).fit()


@pytest.mark.slow
@needs("jax")
def test_a_driver_that_ran_jax_gets_trials_that_train(tmp_path: Path) -> None:
    out = _run(os.path.join(HERE, "_jax_driver.py"), str(tmp_path / "res"), None, timeout=90)
    assert out == {"errors": [], "iterations": [2], "totals": [200 * 200 * 200 * 0.25], "printed": []}


@pytest.mark.slow
@needs("polars")
def test_a_driver_that_ran_polars_gets_trials_that_train(tmp_path: Path) -> None:
    out = _run(os.path.join(HERE, "_polars_driver.py"), str(tmp_path / "res"), None, timeout=90)
    assert out == {"errors": [], "iterations": [2], "totals": [sum(range(100_000))], "printed": []}


@pytest.mark.slow
@needs("joblib")
def test_a_driver_that_ran_joblibs_process_pool_gets_trials_that_train(tmp_path: Path) -> None:
    out = _run(os.path.join(HERE, "_joblib_driver.py"), str(tmp_path / "res"), None, timeout=90)
    assert out == {"errors": [], "iterations": [2], "totals": [sum(i * i for i in range(20))], "printed": []}
