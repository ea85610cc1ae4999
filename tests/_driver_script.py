"""A driver in its own process, so tests can SIGKILL it in the middle of an experiment.

Usage: ``python tests/_driver_script.py STORAGE NAME SCENARIO [STORAGE_OPTIONS_JSON]``

The trainables live here so the test process can import the same ones for
``Tuner.restore`` (run as a script they are cloudpickled by value, imported
from ``tests._driver_script`` by reference: both work in trial actors).
``Run`` is the tests' side: it starts this script, polls its storage and kills it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":  # run as a script: make the checkout importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psutil

from actors import (
    Checkpoint,
    CheckpointConfig,
    RunConfig,
    TuneConfig,
    Tuner,
    get_checkpoint,
    report,
    with_resources,
)
from actors._driver.config import default_cpus
from actors._tempdirs import owned_tempdir
from actors.search import grid_search
from storage import ExperimentLayout, StorageContext, read_experiment_state

SCRIPT = os.path.abspath(__file__)
NAME = "exp"


def counter(config: dict[str, Any]) -> None:
    """``step`` always equals ``training_iteration - 1``: a resume from the wrong checkpoint shows."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    every = config.get("ckpt_every", 1)
    pause = config.get("sleep", 0.05) * (config["x"] if config.get("sleep_by_x") else 1)
    for step in range(start, config["steps"]):
        time.sleep(pause)
        saved = Checkpoint.from_dict({"step": step}) if (step + 1) % every == 0 else None
        report({"loss": config["x"] / (step + 1), "step": step, "restored_from": start - 1,
                "wall": time.time()}, checkpoint=saved)  # wall: Ray's timestamp is whole seconds


def shards(config: dict[str, Any]) -> None:
    """Checkpoints of many small files (``shard_files``); in the driver script the second one's
    upload never ends (``hold_second_upload``), so a test kills inside it every time, however
    fast the disk. A resumed run reports how many half uploads its trial directory held."""
    ckpt = get_checkpoint()
    start, half = 0, 0
    if ckpt is not None:
        half = uncommitted_beside(ckpt)  # before this run uploads anything of its own
        with ckpt.as_directory() as d, open(os.path.join(d, "step.txt")) as f:
            start = int(f.read()) + 1
    for step in range(start, config["steps"]):
        time.sleep(config.get("sleep", 0.0))
        d = owned_tempdir("shards")  # (the tests kill this process inside uploads: fit()'s end sweeps it)
        try:
            for i in range(config["files"]):
                with open(os.path.join(d, f"shard_{i:05d}.bin"), "wb") as f:
                    f.write(b"w" * 512)
            with open(os.path.join(d, "step.txt"), "w") as f:  # sorted last: uploaded late
                f.write(str(step))
            report({"loss": config["x"] / (step + 1), "step": step, "restored_from": start - 1,
                    "uncommitted_at_start": half, "wall": time.time()}, checkpoint=Checkpoint.from_directory(d))
        finally:
            shutil.rmtree(d, ignore_errors=True)


def uncommitted_beside(ckpt: Checkpoint) -> int:
    """Uncommitted checkpoint directories (half uploads) in the trial directory of ``ckpt``."""
    from storage import list_checkpoints

    ctx = StorageContext(ckpt.path.rstrip("/").rsplit("/", 1)[0], ckpt.storage_options)
    return sum(not c.committed for c in list_checkpoints(ctx, ctx.root))


def broken(config: dict[str, Any]) -> None:
    """Trial x=2 raises after checkpointing step 2 (iteration 3); the others finish 6 steps."""
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    for step in range(start, 6):
        report({"loss": config["x"] / (step + 1), "step": step, "restored_from": start - 1},
               checkpoint=Checkpoint.from_dict({"step": step}))
        if config.get("broken", True) and config["x"] == 2.0 and step == 2:
            raise RuntimeError("bug in the trainable")


def fixed(config: dict[str, Any]) -> None:
    """``broken`` with the bug fixed: what a user passes to ``Tuner.restore``."""
    broken({**config, "broken": False})


fixed.__name__ = "broken"  # a fix keeps the name: Tuner.restore refuses another, as Ray 2.60


def errored_run(storage: str, system: str) -> Any:
    """Run ``broken`` in this process to the end: one trial ERROR, one TERMINATED."""
    grid = Tuner(broken, param_space={"x": grid_search([1.0, 2.0])},
                 tune_config=TuneConfig(metric="loss", mode="min"),
                 run_config=RunConfig(name=NAME, storage=storage, system=system, verbose=0)).fit()
    assert grid.num_errors == 1
    return grid


def shard_files(storage: str) -> int:
    """Files per ``shards`` checkpoint: 600 on disk; 50 on S3, where each is a request to moto."""
    return 50 if storage.startswith("s3://") else 600


def tuner(storage: str, name: str, scenario: str, options: dict[str, Any] | None = None) -> Tuner:
    """The experiment of each scenario (also used by tests that need no driver process)."""
    from actors.schedulers import ASHAScheduler, FIFOScheduler

    scheduler: Any = None
    keep = None
    samples, seed = 1, None
    trainable: Any = counter
    if scenario == "random":  # seeded random search: a restore must continue the same sequence
        from actors.search import uniform

        space = {"x": uniform(1.0, 6.0), "steps": 6, "sleep": 0.1, "ckpt_every": 2}
        samples, seed = 8, 7
    elif scenario in ("fifo", "fifo1", "fifo_slow", "fifo1_slow"):
        if scenario in ("fifo1", "fifo1_slow"):  # FIFO deciding every result before the next step (window 1)
            scheduler = FIFOScheduler()
            scheduler.tolerates_batching = False
        # fifo_slow: a run of about 8 s, so an abort sent as its first trials run cannot arrive after its end,
        # even on a loaded machine (with "fifo"'s 4 s it once did, in a CI dry run with the suite in 2 processes)
        # fifo1_slow: about 10 s, for a storage whose state writes are seconds apart (S3: a state write there
        # rewrites each trial's histories and comes no sooner than 20x its cost after the last)
        sleep = {"fifo_slow": 0.25, "fifo1_slow": 0.35}.get(scenario, 0.12)
        space = {"x": grid_search([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), "steps": 10, "sleep": sleep, "ckpt_every": 2}
    elif scenario == "asha":
        # each trial is worse than all before it: only x=1 and x=2 pass rung 2 (iteration 2);
        # steps take 0.06 s * x, so x=1, 2 have finished well before the last trials start
        space = {"x": grid_search([float(i) for i in range(1, 9)]), "steps": 8, "sleep": 0.06,
                 "sleep_by_x": True}
        scheduler = ASHAScheduler(max_t=8, grace_period=2, reduction_factor=2)
    elif scenario == "pbt":  # exploits recorded before the kill must survive the restore
        from actors.schedulers import PopulationBasedTraining

        space = {"x": grid_search([1.0, 2.0, 3.0, 4.0]), "steps": 12, "sleep": 0.08}
        scheduler = PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3,
                                            hyperparam_mutations={"x": [1.0, 2.0, 3.0, 4.0]},
                                            quantile_fraction=0.5, seed=0)
    elif scenario == "hyperband":
        # max_t=3, rf=3: bracket s=1 takes x=1, 2, 25 (milestones 1 and 3), bracket s=0 takes
        # x=3, 4 (milestone 3). x=1 and x=2 are parked at iteration 1 two seconds before x=25
        # (2 s a step) gets there, so a state is written in between (one a second at least);
        # then only x=1 goes on to 3. Steps run past max_t: HyperBand stops the trials.
        from actors.schedulers import HyperBandScheduler

        space = {"x": grid_search([1.0, 2.0, 25.0, 3.0, 4.0]), "steps": 6, "sleep": 0.08, "sleep_by_x": True}
        scheduler = HyperBandScheduler(max_t=3, reduction_factor=3)
    elif scenario == "shards":
        space = {"x": grid_search([1.0, 2.0]), "steps": 4, "files": shard_files(storage), "sleep": 0.1}
        trainable, keep = shards, 2
    else:
        raise SystemExit(f"unknown scenario {scenario!r}: use fifo, fifo1, fifo_slow, fifo1_slow, asha, pbt, "
                         "hyperband, shards or random")
    # two trials at a time on any machine, every trial created up front (max_concurrent_trials=2 would
    # also make the generator create them only as they can run, as Ray's does: no PENDING trials)
    return Tuner(
        with_resources(trainable, {"cpu": default_cpus() / 2}),
        param_space=space,
        tune_config=TuneConfig(metric="loss", mode="min", scheduler=scheduler, num_samples=samples, seed=seed),
        run_config=RunConfig(name=name, storage=storage, storage_options=options, verbose=0,
                             checkpoint_config=CheckpointConfig(num_to_keep=keep)),
    )


# ---------------------------------------------------------------------------------- test harness
def run_processes(storage: str) -> list[psutil.Process]:
    """The driver and every process its actor system forked (they share its command line)."""
    return processes_with(SCRIPT, storage)


def end_driver(proc: subprocess.Popen[str], script: str, storage: str) -> None:
    """Kill what is left of a driver run of ``script`` on ``storage`` (its processes, then itself)."""
    for p in [*processes_with(script, storage)]:
        try:
            p.kill()
        except Exception:
            pass
    proc.kill()
    proc.communicate(timeout=10)


def processes_with(script: str, storage: str) -> list[psutil.Process]:
    """Live processes whose command line names both ``script`` and ``storage``."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            cmd = p.info["cmdline"] or []
            if script in cmd and storage in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def assert_resumed_at_or_after(history: list[dict[str, Any]], it: int, trial_id: str, killed_at: float) -> None:
    """Not rerun from scratch: the rows up to the saved checkpoint ``it`` are the killed run's; rows
    past it come from a run restored from ``it`` or a newer checkpoint, or from the killed run itself
    (restored_from -1) when a newer checkpoint's manifest carried them."""
    assert all(h["wall"] < killed_at for h in history[:it]), (trial_id, it)
    resumed = [h["restored_from"] for h in history[it:] if h["wall"] >= killed_at]
    assert all(r >= it - 1 for r in resumed), (trial_id, it, resumed)


def kill_run(driver: subprocess.Popen[bytes], storage: str) -> None:
    """SIGKILL the driver and its whole actor system at once, and wait until all are gone.

    Thespian's admin runs in a session of its own: killing that process group first stops
    every actor at the same instant, so none goes on writing, or notices the dead driver
    and writes a final state, after the driver died. Then the driver itself.
    """
    mine = os.getpgid(0)
    deadline = time.monotonic() + 10.0
    while True:
        left = run_processes(storage)
        for p in left:
            try:
                group = os.getpgid(p.pid)
                if group != mine:
                    os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if driver.poll() is None:
            os.kill(driver.pid, signal.SIGKILL)
        for p in left:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(left, timeout=0.5)
        if not left or time.monotonic() > deadline:
            break
    driver.wait(10)
    assert not run_processes(storage), "processes of the killed run are still alive"


def _pgid(p: psutil.Process) -> int:
    try:
        return os.getpgid(p.pid)
    except ProcessLookupError:
        return 0


class Run:
    """This script running ``scenario`` under ``storage`` in a process; killed (with its actor
    system) when the ``with`` block ends."""

    def __init__(self, tmp_path: Any, scenario: str, storage: str | None = None,
                 options: dict[str, Any] | None = None) -> None:
        self.storage = storage or str(tmp_path / "results")
        self.options = options
        self.ctx = StorageContext(self.storage, options)
        self.layout = ExperimentLayout(self.ctx, NAME)
        self.log = tmp_path / "driver.log"
        args = [sys.executable, SCRIPT, self.storage, NAME, scenario]
        if options is not None:
            args.append(json.dumps(options))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.groups: set[int] = set()  # the actor system's process group, found while waiting
        self.killed_at = float("inf")  # time.time() just before kill(): later rows come from a restore

    @property
    def path(self) -> str:
        return self.ctx.uri(self.layout.experiment_dir)

    def state(self) -> dict[str, Any] | None:
        """The newest saved state; its trials' directory names are registered on ``layout``."""
        state = read_experiment_state(self.ctx, self.layout)
        for row in (state or {}).get("trials", []):
            self.layout.set_dirname(row["trial_id"], row.get("dirname"))
        return state

    def wait_for(self, what: str, cond: Callable[[], Any], timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        scanned = 0.0
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            if self.proc.poll() is not None:
                break
            if not self.groups and time.monotonic() - scanned > 0.2:  # so kill() needs no scan
                scanned = time.monotonic()
                self.groups = {g for g in map(_pgid, run_processes(self.storage)) if g not in (0, os.getpgid(0))}
            time.sleep(0.01)
        raise AssertionError(f"driver never reached {what!r} (exit code {self.proc.poll()}):\n"
                             f"{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        self.killed_at = min(self.killed_at, time.time())
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        kill_run(self.proc, self.storage)

    def kill_driver_only(self, timeout: float = 20.0) -> None:
        """SIGKILL just the driver; its orphaned actor system must notice and shut itself down."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        deadline = time.monotonic() + timeout
        while run_processes(self.storage) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p.pid for p in run_processes(self.storage)]
        self.kill()
        assert not left, f"the orphaned actor system did not shut itself down within {timeout}s: {left}"

    def interrupt(self, timeout: float = 30.0) -> int:
        """SIGTERM, as from Ctrl-C or a job scheduler: the driver aborts the run and exits."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def statuses(state: dict[str, Any] | None) -> list[str]:
    return [row["status"] for row in (state or {}).get("trials", [])]


def when_state(run: Run, test: Callable[[dict[str, Any]], bool]) -> Callable[[], Any]:
    def check() -> Any:
        st = run.state()
        return st if st is not None and test(st) else None
    return check


_NEVER = threading.Event()  # never set: a held upload waits until its process is killed


def _held(lpath: str) -> bool:
    """True for ``step.txt`` of step 1 (the last file of the second checkpoint)."""
    if os.path.basename(lpath) != "step.txt":
        return False
    with open(lpath) as f:
        return f.read() == "1"


def hold_second_upload(storage: str) -> None:
    """A store that hangs: uploading ``step.txt`` of step 1 blocks until the process is killed.

    Patched in the driver before its actor system forks, so every trial process inherits it;
    the test process (which restores) keeps the real filesystem. On ``s3://`` the patched
    method is s3fs's coroutine ``_put_file``, which every s3fs/fsspec release routes uploads
    through (the generated sync ``put_file`` differs between releases).
    """
    if storage.startswith("s3://"):
        import asyncio

        import s3fs

        real_async = s3fs.S3FileSystem._put_file

        async def s3_put_file(self: Any, lpath: str, rpath: str, *args: Any, **kwargs: Any) -> Any:
            if _held(lpath):
                await asyncio.Event().wait()  # never set: the upload hangs until the process dies
            return await real_async(self, lpath, rpath, *args, **kwargs)

        s3fs.S3FileSystem._put_file = s3_put_file
        # instances made before the patch hold sync wrappers bound to the real coroutine (older fsspec)
        s3fs.S3FileSystem.clear_instance_cache()
        return
    from fsspec.implementations.local import LocalFileSystem

    real = LocalFileSystem.put_file

    def put_file(self: Any, lpath: str, rpath: str, *args: Any, **kwargs: Any) -> Any:
        if _held(lpath):
            _NEVER.wait()
        return real(self, lpath, rpath, *args, **kwargs)

    LocalFileSystem.put_file = put_file  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    if len(argv) not in (3, 4):
        raise SystemExit(__doc__)
    options = json.loads(argv[3]) if len(argv) == 4 else None
    if argv[2] == "shards":
        hold_second_upload(argv[0])
    tuner(argv[0], argv[1], argv[2], options).fit()


if __name__ == "__main__":
    main(sys.argv[1:])
