"""The worker thread's own pieces, without a trial running: ``CheckpointCommits`` (a run's
checkpoints committed to local storage) and ``Wakeup`` (the byte on the actor's watched pipe)."""

from __future__ import annotations

import os
from typing import Any

import pytest

import storage
from actors._driver.checkpoint import Checkpoint
from actors._engine.horizon import ResultWindow
from actors._worker.commits import CheckpointCommits
from actors._worker.wakeup import Wakeup
from storage import ExperimentLayout, StorageContext, StorageError, read_manifest


def _commits(tmp_path: Any) -> CheckpointCommits:
    ctx = StorageContext(str(tmp_path))
    return CheckpointCommits(ctx, ExperimentLayout(ctx, "exp"), "t1", next_index=3, latest=None, iteration=2)


def _row(i: int) -> dict[str, Any]:
    return {"training_iteration": i, "loss": 1.0 / i}


def test_commits_number_checkpoints_and_keep_the_unacknowledged_results_since_the_previous_one(tmp_path: Any) -> None:
    commits, window = _commits(tmp_path), ResultWindow(8)
    assert commits.next_name() == "checkpoint_000003" and not commits.saved_at(2)  # nothing committed yet
    for i in (3, 4):
        window.reported(_row(i))
    first = commits.commit(Checkpoint.from_dict({"w": 1}), _row(4), 4, 4.5, window)
    assert (first.index, first.iteration, first.time_total_s, first.metrics) == (3, 4, 4.5, _row(4))
    assert commits.latest == first and commits.saved_at(4) and not commits.saved_at(5)
    assert commits.next_name() == "checkpoint_000004"
    assert read_manifest(commits.ctx, first.path)["metadata"]["results"] == [_row(3), _row(4)]
    window.reported(_row(5))  # 3 and 4 are still unacknowledged, but the first checkpoint holds them
    second = commits.commit(Checkpoint.from_dict({"w": 2}), None, 5, 6.0, window)
    assert second.index == 4 and second.metrics == {} and commits.latest == second
    assert read_manifest(commits.ctx, second.path)["metadata"]["results"] == [_row(5)]
    assert Checkpoint(commits.ctx.uri(second.path)).to_dict() == {"w": 2}


def test_a_failed_commit_is_kept_and_leaves_the_latest_checkpoint(tmp_path: Any, monkeypatch: Any) -> None:
    commits = _commits(tmp_path)

    def fail(*args: Any, **kwargs: Any) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(storage, "commit_checkpoint", fail)
    with pytest.raises(StorageError):
        commits.commit(Checkpoint.from_dict({"w": 1}), _row(3), 3, 1.0, ResultWindow(1))
    assert commits.storage_failure == "disk full" and commits.latest is None and not commits.saved_at(3)
    assert commits.next_name() == "checkpoint_000004"  # the index is used up: never reused for other data


def test_wakeup_writes_for_urgent_events_and_for_the_first_other_one_only() -> None:
    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)

    def bytes_waiting() -> int:
        try:
            return len(os.read(rfd, 64))
        except BlockingIOError:
            return 0

    try:
        wake = Wakeup()
        wake.event(urgent=True)  # no pipe yet: nothing to write to
        wake.fd = wfd
        wake.event(urgent=False)
        wake.event(urgent=False)  # the actor has not asked again
        assert bytes_waiting() == 1 and not wake.wake_any
        wake.event(urgent=True)
        wake.output()
        assert bytes_waiting() == 2
    finally:
        os.close(rfd)
        os.close(wfd)


def test_a_dict_checkpoints_temp_dir_goes_when_committed_failed_or_dropped(tmp_path: Any, monkeypatch: Any) -> None:
    # from_dict writes a temp dir the user never sees: committed, it is removed at once; not committed (a
    # failed commit, a report() cut short by a stop), it goes with the object (else one leaks per such report)
    committed = Checkpoint.from_dict({"w": 1})
    _commits(tmp_path / "a").commit(committed, _row(3), 3, 1.0, ResultWindow(1))
    assert not os.path.exists(committed.path) and committed.to_dict() == {"w": 1}
    failed = Checkpoint.from_dict({"w": 2})
    path = failed.path

    def fail(*args: Any, **kwargs: Any) -> None:
        raise StorageError("disk full")

    monkeypatch.setattr(storage, "commit_checkpoint", fail)
    with pytest.raises(StorageError):
        _commits(tmp_path / "b").commit(failed, _row(3), 3, 1.0, ResultWindow(1))
    assert os.path.isdir(path)  # still the user's while the object lives
    del failed
    assert not os.path.exists(path)
    never_reported = Checkpoint.from_dict({"w": 3})
    path = never_reported.path
    del never_reported
    assert not os.path.exists(path)

