"""Bad locations fail early with a message that names the URL, the cause and what to do."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from storage import StorageContext, StorageError


class TestUrls:
    def test_default_is_home_results(self) -> None:
        ctx = StorageContext()
        assert ctx.url == ctx.root == os.path.expanduser("~/audition_results")
        assert ctx.is_local and not ctx.is_process_local

    def test_local_paths_become_absolute(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(tmp_path)
        assert StorageContext("rel/dir").root == str(tmp_path / "rel" / "dir")
        ctx = StorageContext(f"file://{tmp_path}/x/")
        assert (ctx.protocol, ctx.root, ctx.url) == ("file", f"{tmp_path}/x", f"{tmp_path}/x")
        assert ctx.is_local
        assert ctx.uri(ctx.join("a", "b.json")) == f"{tmp_path}/x/a/b.json"

    def test_memory_is_process_local(self) -> None:
        ctx = StorageContext("memory://somewhere/results")
        assert (ctx.is_process_local, ctx.is_local, ctx.root) == (True, False, "/somewhere/results")
        assert ctx.uri(ctx.join("e", "f")) == "memory://somewhere/results/e/f"

    def test_s3_url_shape(self) -> None:
        pytest.importorskip("s3fs")
        ctx = StorageContext("s3://bucket/pre/fix/", {"anon": True})
        assert (ctx.protocol, ctx.root, ctx.url) == ("s3", "bucket/pre/fix", "s3://bucket/pre/fix")
        assert not ctx.is_local and not ctx.is_process_local
        assert ctx.uri(ctx.join("e")) == "s3://bucket/pre/fix/e"
        with pytest.raises(StorageError, match="names no bucket"):
            StorageContext("s3://")

    def test_unknown_protocol_lists_known_ones(self) -> None:
        with pytest.raises(StorageError) as info:
            StorageContext("nosuchproto://bucket/x")
        message = str(info.value)
        assert "nosuchproto://bucket/x" in message and "'nosuchproto'" in message
        assert "s3" in message and "memory" in message

    def test_missing_s3fs_says_what_to_install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "s3fs", None)  # import s3fs -> ImportError, as if absent
        registry = sys.modules["fsspec.registry"]._registry  # classes already imported
        monkeypatch.delitem(registry, "s3", raising=False)
        monkeypatch.delitem(registry, "s3a", raising=False)
        with pytest.raises(StorageError, match=r"pip install 'audition\[s3\]'") as info:
            StorageContext("s3://bucket/results")
        assert "s3://bucket/results" in str(info.value)

    def test_bad_argument_types(self) -> None:
        with pytest.raises(StorageError, match="non-empty string"):
            StorageContext("   ")
        with pytest.raises(StorageError, match="must be a dict"):
            StorageContext("memory://x", options=["key"])  # type: ignore[arg-type]


class TestLocalProblems:
    def test_path_is_a_file(self, tmp_path: Path) -> None:
        target = tmp_path / "results"
        target.write_text("not a directory")
        with pytest.raises(StorageError, match="is a file") as info:
            StorageContext(str(target)).check_usable()
        assert str(target) in str(info.value)

    def test_parent_is_a_file(self, tmp_path: Path) -> None:
        (tmp_path / "blocker").write_text("x")
        with pytest.raises(StorageError, match="blocker is a file"):
            StorageContext(str(tmp_path / "blocker" / "results")).check_usable()

    def test_permission_denied(self, tmp_path: Path) -> None:
        if os.geteuid() == 0:
            target = f"/sys/audition-{uuid.uuid4().hex[:8]}"  # not writable even for root
        else:
            locked = tmp_path / "locked"
            locked.mkdir(mode=0o500)
            target = str(locked / "results")
        with pytest.raises(StorageError, match="permission denied") as info:
            StorageContext(target).check_usable()
        assert target in str(info.value)

    def test_creates_missing_directories(self, tmp_path: Path) -> None:
        ctx = StorageContext(str(tmp_path / "a" / "b"))
        ctx.check_usable()
        assert (tmp_path / "a" / "b").is_dir() and list((tmp_path / "a" / "b").iterdir()) == []


@pytest.mark.s3
class TestS3Problems:
    def test_missing_bucket(self, moto_server) -> None:
        url = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/results"
        with pytest.raises(StorageError, match="bucket does not exist") as info:
            StorageContext(url, moto_server.storage_options()).check_usable()
        assert url in str(info.value)

    def test_check_usable_never_creates_a_bucket(self, moto_server) -> None:
        name = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
        with pytest.raises(StorageError):
            StorageContext(f"s3://{name}", moto_server.storage_options()).check_usable()
        buckets = [b["Name"] for b in moto_server.client().list_buckets()["Buckets"]]
        assert name not in buckets

    @pytest.mark.parametrize("wrong", ["key", "secret"])
    def test_wrong_credentials(self, moto_auth_server, wrong: str) -> None:
        bucket = moto_auth_server.create_bucket()
        good = moto_auth_server.storage_options()
        StorageContext(f"s3://{bucket}/results", good).check_usable()
        bad = dict(good, **{wrong: "WRONG" + good[wrong][5:]})
        with pytest.raises(StorageError, match="credentials were rejected") as info:
            StorageContext(f"s3://{bucket}/results", bad).check_usable()
        assert f"s3://{bucket}/results" in str(info.value)

    def test_bad_endpoint_connection_refused(self) -> None:
        pytest.importorskip("s3fs")
        import socket

        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        options = {
            "key": "k", "secret": "s",
            "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"},
            "config_kwargs": {"retries": {"total_max_attempts": 1}},
        }
        with pytest.raises(StorageError, match=r"(?i)gave up after 5 attempts") as info:
            StorageContext("s3://bucket/results", options).check_usable()
        assert "s3://bucket/results" in str(info.value) and "endpoint" in str(info.value)
