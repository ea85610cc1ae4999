"""Network faults between us and S3 (a TCP proxy in front of moto): retried or reported, never half-done.

botocore's and s3fs's own retries are turned off so that the storage layer's retries are what is
tested; aiohttp may still silently resend an idempotent request once, so each scenario injects
more faults than that.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from storage import (
    StorageContext,
    StorageError,
    cleanup_uncommitted,
    commit_checkpoint,
    download_checkpoint,
    is_committed,
    list_checkpoints,
    read_manifest,
)

pytestmark = pytest.mark.s3

FILES = {f"part-{i}.bin": os.urandom(200_000) for i in range(4)}


def through_proxy(
    url: str, options: dict[str, Any], proxy: Any, timeout: float | None = None
) -> StorageContext:
    config: dict[str, Any] = {"retries": {"total_max_attempts": 1}}
    if timeout is not None:
        config.update(connect_timeout=timeout, read_timeout=timeout)
    proxied = dict(options, client_kwargs={"endpoint_url": proxy.endpoint}, config_kwargs=config)
    ctx = StorageContext(url, proxied)
    ctx.fs.retries = 1  # s3fs's own retry loop: off
    return ctx


def local_checkpoint(tmp_path: Path, files: dict[str, bytes] = FILES) -> str:
    root = tmp_path / "ckpt"
    (root / "sub").mkdir(parents=True)
    for name, data in files.items():
        (root / "sub" / name).write_bytes(data)
    return str(root)


def test_transient_resets_during_commit_are_retried(
    s3_location: tuple[str, dict[str, Any]], s3_proxy: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, options = s3_location
    ctx = through_proxy(url, options, s3_proxy)
    direct = StorageContext(url, options)
    dest = ctx.join("exp", "t", "checkpoint_000000")
    # One big file, so every cut hits the same upload and some must get past aiohttp's single resend.
    files = {"model.bin": os.urandom(600_000)}
    s3_proxy.reset_after(150_000, times=4)  # cut the upload mid-body, four times
    with caplog.at_level(logging.INFO, logger="storage"):
        manifest = commit_checkpoint(ctx, dest, local_checkpoint(tmp_path, files), {"step": 1})
    assert s3_proxy.resets == 4
    assert "transient" in caplog.text  # our retry layer did the work
    assert is_committed(direct, dest)
    assert read_manifest(direct, dest) == manifest
    out = tmp_path / "out"
    assert download_checkpoint(direct, dest, str(out)) == {"step": 1}
    assert {p.name: p.read_bytes() for p in (out / "sub").iterdir()} == files


def test_reset_connections_then_recovery(
    s3_location: tuple[str, dict[str, Any]], s3_proxy: Any, tmp_path: Path
) -> None:
    url, options = s3_location
    ctx = through_proxy(url, options, s3_proxy)
    dest = ctx.join("exp", "t", "checkpoint_000001")
    s3_proxy.reset_connections(3)
    commit_checkpoint(ctx, dest, local_checkpoint(tmp_path), {})
    assert s3_proxy.resets == 3
    assert is_committed(StorageContext(url, options), dest)


def test_permanent_resets_leave_no_committed_checkpoint(
    s3_location: tuple[str, dict[str, Any]], s3_proxy: Any, tmp_path: Path
) -> None:
    url, options = s3_location
    ctx = through_proxy(url, options, s3_proxy)
    direct = StorageContext(url, options)
    trial = ctx.join("exp", "t")
    dest = ctx.join("exp", "t", "checkpoint_000002")
    s3_proxy.reset_after(450_000, times=None)  # some files get through, then the network is gone
    with pytest.raises(StorageError, match=r"(?i)gave up after 5 attempts") as info:
        commit_checkpoint(ctx, dest, local_checkpoint(tmp_path), {})
    assert url in str(info.value)
    s3_proxy.pass_through()
    assert not is_committed(direct, dest)
    assert all(not i.committed for i in list_checkpoints(direct, trial))
    cleanup_uncommitted(direct, trial)
    assert list_checkpoints(direct, trial) == []


@pytest.mark.slow  # ~5 s: five attempts that each wait out a short deadline
def test_stalled_network_times_out_with_a_clear_error(
    s3_location: tuple[str, dict[str, Any]], s3_proxy: Any, tmp_path: Path
) -> None:
    url, options = s3_location
    ctx = through_proxy(url, options, s3_proxy, timeout=0.3)
    direct = StorageContext(url, options)
    local = local_checkpoint(tmp_path)
    commit_checkpoint(ctx, ctx.join("exp", "t", "checkpoint_000000"), local, {})  # warm pooled connections
    dest = ctx.join("exp", "t", "checkpoint_000001")
    s3_proxy.stall()
    started = time.monotonic()
    with pytest.raises(StorageError, match=r"(?i)gave up after 5 attempts") as info:
        commit_checkpoint(ctx, dest, local, {})
    assert time.monotonic() - started < 30
    assert "Timeout" in str(info.value)
    s3_proxy.pass_through()
    assert not is_committed(direct, dest)
    infos = list_checkpoints(direct, ctx.join("exp", "t"))
    assert (infos[0].index, infos[0].committed) == (0, True)
    assert not any(i.committed for i in infos[1:])
