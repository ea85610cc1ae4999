"""``Tuner.fit()`` on S3 (a real moto server) with the multi-process system.

Credentials and the endpoint reach every actor only through ``storage_options``:
the AWS_* variables and config files are hidden from this process (and from the
actors it forks), so a trial actor that did not get them could not write at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Checkpoint, RunConfig, TuneConfig, Tuner, get_checkpoint, report
from actors._driver.errors import TuneError
from actors._engine.trial import TrialStatus
from actors.search import grid_search
from storage import MANIFEST_NAME, ExperimentLayout, StorageContext, is_committed, manifest_path, read_results
from tests import _driver_script as D
from tests import _trainables as T

pytestmark = pytest.mark.s3


@pytest.fixture(autouse=True)
def _credentials_only_from_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _dir(r: Any) -> str:
    """The trial's directory name in the experiment (named as Ray names it)."""
    return str(r.path).rstrip("/").rpartition("/")[2]


def _fit(url: str, options: dict[str, Any], trainable: Any = T.fn_trainable, **tune: Any) -> Any:
    return Tuner(
        trainable, param_space={"x": grid_search([1.0, 2.0])},
        tune_config=TuneConfig(metric="loss", mode="min", **tune),
        run_config=RunConfig(name="exp", storage=url, storage_options=options, verbose=0,
                             controller_timeout_s=30),
    ).fit()


def _keys(url: str, options: dict[str, Any]) -> set[str]:
    ctx = StorageContext(url, options)
    ctx.fs.invalidate_cache()
    return {k[len(ctx.root) + 1:] for k in ctx.fs.find(ctx.root)}


def _iterations(result: Any) -> list[int]:
    return [h["training_iteration"] for h in result.metrics_history]


def _uncommitted(keys: set[str]) -> set[str]:
    dirs = {k.rsplit("/", 1)[0] for k in keys if "/checkpoint_" in k}
    return {d for d in dirs if manifest_path(d) not in keys}


def test_fit_on_s3_writes_every_file_and_resumes_from_s3(s3_location, no_leaks):
    url, options = s3_location
    grid = _fit(url, options, scheduler=T.PauseFromHook(at=2))
    assert grid.experiment_path == f"{url}/exp"
    keys = _keys(url, options)
    assert {"exp/tuner.pkl", "exp/experiment_state.json"} <= keys
    assert any(k.startswith("exp/.state/experiment_state-") for k in keys)
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        assert _iterations(r) == list(range(1, T.STEPS + 1))
        # paused at iteration 2, resumed in a new run from the checkpoint it committed to S3
        assert [h["restored_from"] for h in r.metrics_history][1:3] == [-1, 1]
        mine = {k for k in keys if k.startswith(f"exp/{_dir(r)}/")}
        for name in ("params.json", "result.json", "progress.csv"):
            assert f"exp/{_dir(r)}/{name}" in mine
        ckpts = {k.split("/")[2] for k in mine if "/checkpoint_" in k}
        assert len(ckpts) == T.STEPS  # one per report, all kept
        assert all(manifest_path(f"exp/{_dir(r)}/{c}") in mine for c in ckpts)
        # the user's files alone inside, as in Ray: the manifest is beside the directory
        assert not any(k.endswith(MANIFEST_NAME) for k in mine if "/checkpoint_" in k), mine
        assert r.checkpoint is not None and r.checkpoint.path.startswith(f"{url}/exp/{_dir(r)}/")
        assert r.checkpoint.to_dict() == {"step": T.STEPS - 1}
    assert not _uncommitted(keys)


@pytest.fixture
def proxied(moto_server: Any, s3_proxy: Any) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(url, options, proxy): a fresh bucket reached only through the fault-injecting proxy."""
    url = f"s3://{moto_server.create_bucket()}/results"
    options = moto_server.storage_options(client_kwargs={"endpoint_url": s3_proxy.endpoint})
    yield url, options, s3_proxy


def test_transient_resets_during_the_run_are_survived(proxied, no_leaks):
    """Connections reset under the driver, the controller and the trial actors alike."""
    url, options, proxy = proxied
    proxy.reset_after(8_000, times=8)  # one reset per 8 kB sent, eight in all
    try:
        grid = _fit(url, options, scheduler=T.PauseFromHook(at=2))
    finally:
        proxy.pass_through()
    assert proxy.resets >= 4
    assert grid.num_errors == 0
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        assert _iterations(r) == list(range(1, T.STEPS + 1))
        assert [h["restored_from"] for h in r.metrics_history][2] == 1
    assert not _uncommitted(_keys(url, options))


STALL_S = 3.0  # longer than one request's read timeout below, far shorter than the retry budget
STALL_AT = 2  # the step whose checkpointed report goes out while S3 is stalled
_FLAG_WAIT_S = 60.0


def _wait_until(predicate: Callable[[], bool], timeout: float, poll: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def stalls_midway(config: dict[str, Any]) -> None:
    """Checkpoints every step. At ``STALL_AT`` it says so (``reached-<x>``) and waits until the test
    has stalled S3 (``stalled``), so its next report and checkpoint commit go out into the stall.
    Each row carries when the previous report returned (``time.monotonic``, system-wide on Linux)."""
    flags = Path(config["flags"])
    ckpt = get_checkpoint()
    start = ckpt.to_dict()["step"] + 1 if ckpt else 0
    returned: float | None = None
    for step in range(start, config["steps"]):
        if step == STALL_AT:
            (flags / f"reached-{config['x']}").touch()
            if not _wait_until((flags / "stalled").exists, _FLAG_WAIT_S):
                raise TimeoutError(f"the test did not stall S3 within {_FLAG_WAIT_S}s")
        report({"loss": config["x"] / (step + 1), "step": step, "prev_returned": returned},
               checkpoint=Checkpoint.from_dict({"step": step}))
        returned = time.monotonic()


@pytest.mark.slow  # ~6 s: a real fit plus a 3 s stall
def test_transient_stall_during_the_run_is_survived_with_nothing_lost(
    moto_server: Any, proxied: tuple[str, dict[str, Any], Any], tmp_path: Path, no_leaks: None
) -> None:
    """S3 stops answering (connections held open, nothing forwarded) for a few seconds while trials
    report and commit checkpoints, then recovers: every result and checkpoint arrives exactly once.

    A request's read timeout (1 s) is shorter than the stall, so requests time out and are retried
    (s3fs's loop, and storage/_retry.py's five attempts around each upload's overall deadline of
    2 x read_timeout from storage/_io.py); botocore's own retries are off. The whole budget (~11 s
    for an upload) is longer than the stall.
    """
    url, options, proxy = proxied
    options = dict(options, config_kwargs={"connect_timeout": 1, "read_timeout": 1,
                                           "retries": {"total_max_attempts": 1}})
    flags = tmp_path / "flags"
    flags.mkdir()
    steps = T.STEPS
    timeline: dict[str, float] = {}
    problems: list[str] = []
    blocked: list[bool] = []

    def stall_once() -> None:
        try:
            if not _wait_until(lambda: any(flags.glob("reached-*")), _FLAG_WAIT_S):
                problems.append("no trial reached the stall step")
                return
            proxy.stall()
            timeline["stalled"] = time.monotonic()
            (flags / "stalled").touch()
            if not _wait_until(lambda: proxy.held_bytes > 0, 20):
                problems.append("nothing tried to reach S3 during the stall")
                return
            timeline["held"] = time.monotonic()
            time.sleep(STALL_S)  # the length of the fault, not a synchronisation
            timeline["held_bytes"] = proxy.held_bytes
        finally:
            timeline["lifted"] = time.monotonic()  # taken first: nothing can pass before this
            proxy.pass_through()
            (flags / "stalled").touch()  # never leave a trainable waiting

    staller = threading.Thread(target=stall_once, name="stall-s3", daemon=True)
    staller.start()
    started = time.monotonic()
    try:
        grid = Tuner(stalls_midway,
                     param_space={"x": grid_search([1.0, 2.0]), "steps": steps, "flags": str(flags)},
                     tune_config=TuneConfig(metric="loss", mode="min"),
                     run_config=RunConfig(name="exp", storage=url, storage_options=options, verbose=0,
                                          controller_timeout_s=30)).fit()
    finally:
        staller.join(_FLAG_WAIT_S)
        proxy.pass_through()
    elapsed = time.monotonic() - started
    assert not staller.is_alive() and not problems, problems

    # the stall was real: S3 traffic was held for STALL_S, and the run waited it out
    assert timeline["held_bytes"] > 0 and proxy.held_connections >= 1
    assert timeline["lifted"] - timeline["held"] >= STALL_S
    assert elapsed >= STALL_S

    assert grid.num_errors == 0
    direct = StorageContext(url, moto_server.storage_options())
    layout = ExperimentLayout(direct, "exp")
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        layout.set_dirname(r.trial_id, _dir(r))
        rows = read_results(direct, layout, r.trial_id)
        assert [row["training_iteration"] for row in rows] == list(range(1, steps + 1)), r.trial_id
        assert [row["step"] for row in rows] == list(range(steps))
        assert _iterations(r) == list(range(1, steps + 1))
        # the checkpointed report sent out into the stall returned only after it was lifted
        blocked.append(rows[STALL_AT + 1]["prev_returned"] >= timeline["lifted"])
        assert r.checkpoint is not None and r.checkpoint.path.startswith(f"{url}/exp/{_dir(r)}/")
        assert is_committed(direct, direct.fs._strip_protocol(r.checkpoint.path))
        assert r.checkpoint.to_dict() == {"step": steps - 1}
    assert any(blocked)
    keys = _keys(url, moto_server.storage_options())
    assert not _uncommitted(keys)
    for r in grid:
        ckpts = {k.split("/")[2] for k in keys if k.startswith(f"exp/{_dir(r)}/checkpoint_")}
        assert len(ckpts) == steps  # one per report, every one committed


def test_missing_bucket_fails_fit_at_once_naming_the_url(moto_server, no_leaks):
    url = "s3://audition-no-such-bucket/results"
    started = time.monotonic()
    with pytest.raises(TuneError, match=r"s3://audition-no-such-bucket/results.*bucket does not exist"):
        _fit(url, moto_server.storage_options())
    assert time.monotonic() - started < 15


@pytest.mark.slow
def test_storage_lost_mid_run_fails_fit_clearly(proxied, no_leaks):
    """S3 becomes unreachable for good after the run started: fit() raises, it does not hang."""
    url, options, proxy = proxied
    options = dict(options, config_kwargs={"connect_timeout": 2, "read_timeout": 2,
                                           "retries": {"total_max_attempts": 2}})

    def cut() -> None:
        # cut only once the run is writing its trials (so start-up checks passed first)
        ctx = StorageContext(url, options)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ctx.fs.invalidate_cache()
            if ctx.fs.glob(f"{ctx.root}/exp/*/params.json"):
                break
            time.sleep(0.05)
        proxy.reset_connections(None)  # every connection, from now on

    cutter = threading.Thread(target=cut, daemon=True)
    cutter.start()
    started = time.monotonic()
    try:
        with pytest.raises(TuneError, match=r"s3://.*/results") as info:
            Tuner(D.counter, param_space={"x": grid_search([1.0, 2.0]), "steps": 200, "sleep": 0.02},
                  tune_config=TuneConfig(metric="loss", mode="min"),
                  run_config=RunConfig(name="exp", storage=url, storage_options=options, verbose=0,
                                       controller_timeout_s=30)).fit()
    finally:
        cutter.join(5)
        proxy.pass_through()
    assert time.monotonic() - started < 60
    assert "Gave up after" in str(info.value)  # says why and what to check


@pytest.mark.slow
def test_restore_from_s3_after_the_driver_was_killed(s3_location, tmp_path, no_leaks):
    url, options = s3_location
    # (fifo1's 4 s run once ended, on a loaded machine, before a state showing a running trial was written)
    with D.Run(tmp_path, "fifo1_slow", storage=url, options=options) as run:
        run.wait_for("a running trial with a checkpoint", D.when_state(run, lambda st: any(
            r["status"] == "RUNNING" and r["checkpoint"] and r["checkpoint"]["iteration"] >= 2
            for r in st["trials"])))
        run.kill()
    state = run.state()
    assert state is not None
    assert Tuner.can_restore(run.path, options)
    grid = Tuner.restore(run.path, D.counter, storage_options=options).fit()
    assert len(grid) == 6
    by_id = {r.trial_id: r for r in grid}
    for r in grid:
        assert r.status is TrialStatus.TERMINATED
        its = _iterations(r)
        assert its == list(range(1, 11)), (r.trial_id, its)
        assert [h["step"] for h in r.metrics_history] == [i - 1 for i in its]
    for row in state["trials"]:
        if row["status"] == "RUNNING" and row["checkpoint"]:
            it = row["checkpoint"]["iteration"]
            # resumed from the saved checkpoint or a newer one committed before the kill
            D.assert_resumed_at_or_after(by_id[row["trial_id"]].metrics_history, it, row["trial_id"], run.killed_at)
    assert not _uncommitted(_keys(url, options))
