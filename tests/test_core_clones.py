"""``CloneWaits`` (actors/_engine/clones.py) alone, on a real TrialTable: a clone asked to wait for its
source's save in flight waits only while that save is in flight, and takes the checkpoint it commits."""

from __future__ import annotations

from actors._engine.clones import CloneWaits
from actors._engine.lifecycle import TrialTable
from actors._engine.trial import TrialStatus
from actors.messages import ActionKind, CheckpointRef, SchedulerAction


def _clone(target: str, source: str, wait: bool = True) -> SchedulerAction:
    return SchedulerAction(ActionKind.CLONE, target, source_id=source, wait_for_source=wait)


def test_a_clone_waits_only_for_a_running_source_with_a_save_in_flight() -> None:
    table = TrialTable()
    table.add("src", {})
    table.add("clone", {})
    table.start("src")
    waits = CloneWaits(table)
    waits.note(_clone("clone", "src"))
    assert "clone" not in waits, "no save in flight: the clone takes the newest checkpoint at once"
    table.get("src").saves_inflight = 1
    waits.note(_clone("clone", "src", wait=False))
    assert "clone" not in waits, "wait_for_checkpoint=False never waits"
    waits.note(_clone("clone", "src"))
    assert "clone" in waits and waits.blocked() == 1


def test_the_clone_takes_the_checkpoint_its_source_s_save_commits() -> None:
    table = TrialTable()
    for t in ("src", "clone", "other"):
        table.add(t, {})
    table.start("src")
    table.get("src").saves_inflight = 1
    waits = CloneWaits(table)
    waits.note(_clone("clone", "src"))
    assert not waits.landed("other", None), "another trial's save frees nobody"
    ckpt = CheckpointRef("mem://src/checkpoint_000003", 3, 3)
    assert waits.landed("src", ckpt) and "clone" not in waits and waits.blocked() == 0
    assert table.get("clone").status is TrialStatus.PENDING and table.get("clone").checkpoint == ckpt
