"""Pure parts of the storage layer: names, retention, error classification and the retry loop."""

from __future__ import annotations

import errno
import pickle

import pytest

from storage import (
    CheckpointInfo,
    ExperimentLayout,
    StorageContext,
    StorageError,
    checkpoint_score,
    checkpoints_to_delete,
    classify,
    retrying,
)


def _client_error(code: str, status: int = 400) -> Exception:
    botocore_exceptions = pytest.importorskip("botocore.exceptions")
    return botocore_exceptions.ClientError(
        {
            "Error": {"Code": code, "Message": f"{code} happened"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "PutObject",
    )


class TestLayout:
    def test_names(self, tmp_path) -> None:
        ctx = StorageContext(str(tmp_path))
        layout = ExperimentLayout(ctx, "my_exp")
        trial = f"{tmp_path}/my_exp/t_0001"
        assert layout.experiment_dir == f"{tmp_path}/my_exp"
        assert layout.state_pointer == f"{tmp_path}/my_exp/experiment_state.json"
        assert layout.state_dir == f"{tmp_path}/my_exp/.state"
        assert layout.tuner_file == f"{tmp_path}/my_exp/tuner.pkl"
        assert layout.trial_dir("t_0001") == trial
        assert layout.params_file("t_0001") == f"{trial}/params.json"
        assert layout.result_file("t_0001") == f"{trial}/result.json"
        assert layout.progress_file("t_0001") == f"{trial}/progress.csv"
        assert layout.error_file("t_0001") == f"{trial}/error.txt"
        assert layout.stdout_file("t_0001") == f"{trial}/stdout.txt"
        assert layout.stderr_file("t_0001") == f"{trial}/stderr.txt"
        assert layout.checkpoint_dir("t_0001", 12) == f"{trial}/checkpoint_000012"
        state = f"{tmp_path}/my_exp/.state/experiment_state-000003-beef.json"
        assert layout.state_version(3, "beef") == state

    @pytest.mark.parametrize(
        ("path", "index"),
        [
            ("s3://b/exp/t/checkpoint_000012", 12),
            ("/x/checkpoint_000000/", 0),
            ("checkpoint_1234567", 1234567),
            ("checkpoint_12", None),
            ("checkpoint_000012.tmp", None),
            ("/x/params.json", None),
        ],
    )
    def test_parse_checkpoint_index(self, path: str, index: int | None) -> None:
        assert ExperimentLayout.parse_checkpoint_index(path) == index

    def test_round_trip_of_state_version_names(self, tmp_path) -> None:
        layout = ExperimentLayout(StorageContext(str(tmp_path)), "e")
        assert ExperimentLayout.parse_state_version(layout.state_version(42, "00ff")) == 42
        assert ExperimentLayout.parse_state_version(layout.state_pointer) is None

    @pytest.mark.parametrize("bad", ["", "a/b", ".state", "..", "x\\y", None, 3])
    def test_bad_names_are_refused(self, tmp_path, bad: object) -> None:
        ctx = StorageContext(str(tmp_path))
        with pytest.raises(ValueError, match="trial id"):
            ExperimentLayout(ctx, "e").trial_dir(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="experiment name"):
            ExperimentLayout(ctx, bad)  # type: ignore[arg-type]

    @pytest.mark.parametrize("bad", [-1, 1.5, True])
    def test_bad_checkpoint_index(self, tmp_path, bad: object) -> None:
        with pytest.raises(ValueError, match="checkpoint index"):
            ExperimentLayout(StorageContext(str(tmp_path)), "e").checkpoint_dir("t", bad)  # type: ignore[arg-type]


def infos(*scores: float | None, committed: bool = True) -> list[CheckpointInfo]:
    return [
        CheckpointInfo(i, f"ckpt/{i}", committed, {} if s is None else {"metrics": {"acc": s}, "loss": -s})
        for i, s in enumerate(scores)
    ]


class TestRetention:
    def test_keep_all_when_unlimited(self) -> None:
        assert checkpoints_to_delete(infos(1, 2, 3), None, "acc") == []

    def test_newest_without_attribute(self) -> None:
        assert [i.index for i in checkpoints_to_delete(infos(1, 2, 3, 4), 2, None)] == [0, 1]

    def test_best_by_max_and_min_and_latest_always_kept(self) -> None:
        ckpts = infos(0.9, 0.1, 0.5, 0.2)
        assert [i.index for i in checkpoints_to_delete(ckpts, 1, "acc", "max")] == [1, 2]
        assert [i.index for i in checkpoints_to_delete(ckpts, 1, "acc", "min")] == [0, 2]
        # Ray's rules: of equal scores the newer is kept; a result without the attribute (a top-level
        # key of the reported metrics) counts as the newest-best
        assert [i.index for i in checkpoints_to_delete(infos(0.5, 0.5, 0.1, 0.1), 1, "acc")] == [0, 2]
        assert [i.index for i in checkpoints_to_delete(infos(0.9, None, 0.1), 1, "acc")] == [0]

    def test_protected_and_uncommitted_are_never_returned(self) -> None:
        ckpts = [*infos(0.9, 0.1, 0.5, 0.2), CheckpointInfo(9, "ckpt/9", False, {})]
        doomed = checkpoints_to_delete(ckpts, 1, "acc", protected={"ckpt/1"})
        assert [i.index for i in doomed] == [2]  # 0 best, 1 protected, 3 latest committed

    def test_unscored_count_as_newest_best_as_in_ray(self) -> None:
        ckpts = infos(None, 0.3, None, 0.1, None)
        # Ray appends a result without the attribute after everything it has: the newest two
        # unscored are the best two here
        assert [i.index for i in checkpoints_to_delete(ckpts, 2, "acc")] == [0, 1, 3]
        assert checkpoint_score(ckpts[1], "acc") == 0.3
        assert checkpoint_score(CheckpointInfo(0, "p", True, {"a": {"b": 2}}), "a/b") == 2.0
        assert checkpoint_score(CheckpointInfo(0, "p", True, {"acc": float("nan")}), "acc") is None

    @pytest.mark.parametrize(("keep", "order"), [(0, "max"), (-1, "max"), (1, "best")])
    def test_bad_arguments(self, keep: int, order: str) -> None:
        with pytest.raises(ValueError):
            checkpoints_to_delete(infos(1), keep, "acc", order)


class TestClassify:
    @pytest.mark.parametrize(
        "exc",
        [ConnectionResetError(), TimeoutError(), ConnectionRefusedError(), OSError(errno.ECONNRESET, "x")],
    )
    def test_transient_builtin(self, exc: Exception) -> None:
        assert classify(exc) == "transient"

    @pytest.mark.parametrize(
        ("code", "status", "kind"),
        [
            ("SlowDown", 503, "transient"),
            ("InternalError", 500, "transient"),
            ("NoSuchBucket", 404, "permanent"),
            ("AccessDenied", 403, "permanent"),
            ("InvalidAccessKeyId", 403, "permanent"),
            ("SignatureDoesNotMatch", 403, "permanent"),
        ],
    )
    def test_s3_codes_raw_and_translated_by_s3fs(self, code: str, status: int, kind: str) -> None:
        raw = _client_error(code, status)
        assert classify(raw) == kind
        errors = pytest.importorskip("s3fs.errors")
        assert classify(errors.translate_boto_error(raw)) == kind

    def test_botocore_connection_errors(self) -> None:
        botocore_exceptions = pytest.importorskip("botocore.exceptions")
        assert classify(botocore_exceptions.EndpointConnectionError(endpoint_url="http://x")) == "transient"
        assert classify(botocore_exceptions.ReadTimeoutError(endpoint_url="http://x")) == "transient"
        assert classify(botocore_exceptions.NoCredentialsError()) == "permanent"

    def test_missing_key_and_bugs_pass_through(self) -> None:
        assert classify(FileNotFoundError("bucket/key")) == "missing"
        assert classify(TypeError("bad arg")) == "bug"
        assert classify(PermissionError(13, "denied")) == "permanent"
        assert classify(NotADirectoryError(20, "not a dir")) == "permanent"


class TestRetrying:
    def test_transient_then_success_with_backoff(self) -> None:
        delays: list[float] = []
        outcomes: list[Exception | str] = [ConnectionResetError(), TimeoutError(), "ok"]

        def fn() -> str:
            item = outcomes.pop(0)
            if isinstance(item, Exception):
                raise item
            return item

        assert retrying(fn, what="upload", url="s3://b/k", sleep=delays.append, base_delay=0.1) == "ok"
        assert delays == [0.1, 0.2]

    def test_gives_up_with_a_clear_error(self) -> None:
        delays: list[float] = []

        def fn() -> None:
            raise ConnectionResetError("peer reset")

        with pytest.raises(StorageError) as info:
            retrying(fn, what="upload", url="s3://b/k", attempts=4, sleep=delays.append, max_delay=0.15)
        assert delays == [0.05, 0.1, 0.15]
        message = str(info.value)
        assert "s3://b/k" in message and "ConnectionResetError" in message and "Gave up after 4" in message
        assert info.value.url == "s3://b/k"

    def test_permanent_is_not_retried(self) -> None:
        calls: list[int] = []

        def fn() -> None:
            calls.append(1)
            raise _client_error("NoSuchBucket", 404)

        with pytest.raises(StorageError, match="bucket does not exist"):
            retrying(fn, what="write", url="s3://nope/x", sleep=lambda _: None)
        assert calls == [1]

    def test_missing_and_bugs_are_reraised_unchanged(self) -> None:
        def missing() -> None:
            raise FileNotFoundError("b/k")

        def bug() -> None:
            raise KeyError("oops")

        with pytest.raises(FileNotFoundError):
            retrying(missing, what="read", url="u", sleep=lambda _: None)
        with pytest.raises(KeyError):
            retrying(bug, what="read", url="u", sleep=lambda _: None)

    def test_storage_error_is_picklable(self) -> None:
        err = pickle.loads(pickle.dumps(StorageError("boom at s3://b", url="s3://b")))
        assert (str(err), err.url) == ("boom at s3://b", "s3://b")
