"""``CloneWaits`` (actors/_engine/clones.py) alone, on a real TrialTable: a clone asked to wait for its
source's save in flight waits only while that save is in flight, and takes the checkpoint it commits; a
run failing while its exploit is pending ends with the clone applied whole, or (on a done result) not at all."""

from __future__ import annotations

from actors._engine.clones import CloneWaits
from actors._engine.effects import Phase
from actors._engine.lifecycle import TrialTable
from actors._engine.marks import MarkKind
from actors._engine.reducer import Decision
from actors._engine.trial import TrialStatus
from actors.messages import ActionKind, CheckpointRef, EndReason, SchedulerAction


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
    table.request(_clone("clone", "src"))  # as the core does: the table takes the CLONE, then the wait
    waits.note(_clone("clone", "src"))
    assert not waits.landed("other", None)[0], "another trial's save frees nobody"
    ckpt = CheckpointRef("mem://src/checkpoint_000003", 3, 3)
    assert waits.landed("src", ckpt)[0] and "clone" not in waits and waits.blocked() == 0
    assert table.get("clone").status is TrialStatus.PENDING and table.get("clone").checkpoint == ckpt


def _running_pair(done: bool = False) -> TrialTable:
    """``src`` and ``clone`` running, ``clone`` at iteration 6 with its own checkpoint there."""
    table = TrialTable(max_failures=3)
    table.add("src", {"lr": 5})
    table.add("clone", {"lr": 1})
    table.start("src")
    table.start("clone")
    own = CheckpointRef("mem://clone/checkpoint_000001", 1, 6)
    row = {"training_iteration": 6, **({"done": True} if done else {})}
    assert table.results("clone", 1, 1, (row,), own)
    return table


def _exploited_while_running(done: bool = False) -> tuple[TrialTable, CloneWaits]:
    """``clone`` at iteration 6 (its own checkpoint at 6), exploiting ``src`` whose save is in flight: the
    CLONE is taken as the core took it before 2026-12-07 (the table, then the wait, the table not told that
    the clone waits), so the exploit's pause is pending and the clone is applied when it lands."""
    table = _running_pair(done)
    table.get("src").saves_inflight = 1
    waits = CloneWaits(table)
    clone = SchedulerAction(ActionKind.CLONE, "clone", source_id="src", new_config={"lr": 4}, info={"k": 1},
                            wait_for_source=True, experiment_tag="1_lr=1@perturbed[lr=4]")
    table.request(clone, CheckpointRef("mem://src/checkpoint_000000", 0, 3))
    waits.note(clone)
    table.decided("clone", 1, 1, Decision.CONTINUE)  # the exploit's result: the pause acts (STOP sent)
    assert table.get("clone").phase is Phase.STOPPING and "clone" in waits
    return table, waits


def test_a_run_failing_while_its_exploit_is_pending_ends_as_the_exploit_s_pause() -> None:
    """Its TrialStop undeliverable (seed 1467 of the fault sweep), the run fails: it ends as the exploit's
    pause, whole, as Ray 2.60's PBT sets config, tag and checkpoint at once and drops what the trial's
    actor does after (``_schedule_trial_stop``): no failure counted, and the source's save landing later
    is the checkpoint the clone restarts from (before: a retry with the old config and no EXPLOIT mark
    from that checkpoint)."""
    table, waits = _exploited_while_running()
    table.ended("clone", 1, EndReason.FAILED, None, "could not handle TrialStop", "")
    rec = table.get("clone")
    assert rec.status is TrialStatus.PENDING, "the clone's resume goes on to PENDING"
    assert (rec.config, rec.tag, rec.extra_result) == ({"lr": 4}, "1_lr=1@perturbed[lr=4]", {"pbt_exploit": {"k": 1}})
    assert [(m.kind, m.source) for m in rec.marks] == [(MarkKind.EXPLOIT, "src")]
    assert (rec.num_failures, rec.error) == (0, None)
    saved = CheckpointRef("mem://src/checkpoint_000001", 1, 7)
    table.changed.clear()
    assert waits.landed("src", saved)[0] and rec.checkpoint == saved
    assert table.changed == {"clone"}, "the scheduler's view of the trial is sent the checkpoint it now has"
    table.start("clone")
    assert rec.cloned and rec.iteration == 7 and rec.config == {"lr": 4}


def test_a_clone_decided_on_a_done_result_is_dropped_when_the_run_fails() -> None:
    """A clone decided on the result that said done never parks the trial; if its run then fails, the retry
    is the trial's own, from its own checkpoint: the clone is not applied, not even its source's checkpoint
    when that save lands (before: the landing save replaced the retry's checkpoint)."""
    table, waits = _exploited_while_running(done=True)
    table.ended("clone", 1, EndReason.FAILED, None, "boom", "")
    rec = table.get("clone")
    assert rec.status is TrialStatus.PENDING and rec.num_failures == 1 and rec.config == {"lr": 1}
    assert [m.kind for m in rec.marks] == [MarkKind.FAIL]
    assert waits.landed("src", CheckpointRef("mem://src/checkpoint_000001", 1, 7))[0]
    assert rec.checkpoint is not None and rec.checkpoint.path == "mem://clone/checkpoint_000001"
    table.start("clone")
    assert not rec.cloned and rec.iteration == 6


def _waiting_clone() -> tuple[TrialTable, CloneWaits]:
    """``clone`` exploiting ``src`` whose save is in flight, taken as the core takes it since 2026-12-07: the
    table is told the clone waits, so it is applied when the save lands, not when the pause ends."""
    table = _running_pair()
    table.get("src").saves_inflight = 1
    waits = CloneWaits(table)
    clone = SchedulerAction(ActionKind.CLONE, "clone", source_id="src", new_config={"lr": 4}, info={"k": 1},
                            wait_for_source=True)
    table.request(clone, None, waiting=waits.would_wait(clone))
    waits.note(clone)
    table.decided("clone", 1, 1, Decision.CONTINUE)
    table.ended("clone", 1, EndReason.STOPPED)  # the exploit's pause lands before the source's save
    rec = table.get("clone")
    assert rec.status is TrialStatus.PENDING and "clone" in waits and waits.blocked() == 1
    assert rec.config == {"lr": 1} and rec.marks == [], "not applied while it waits"
    return table, waits


def test_a_waiting_clone_is_applied_when_its_sources_save_lands() -> None:
    table, waits = _waiting_clone()
    saved = CheckpointRef("mem://src/checkpoint_000002", 2, 9)
    waited, effects = waits.landed("src", saved)
    rec = table.get("clone")
    assert waited and [e.kind.name for e in effects] == ["CLONED"]
    assert (rec.config, rec.checkpoint, [m.kind for m in rec.marks]) == ({"lr": 4}, saved, [MarkKind.EXPLOIT])
    table.start("clone")
    assert rec.cloned and rec.iteration == 9


def test_a_waiting_clone_whose_source_gives_no_checkpoint_is_dropped() -> None:
    """The source's run ends without the save (it died with it, seen with silent deaths): the exploit is skipped,
    as Ray's PBT skips one whose source has no checkpoint. Before, the clone was applied with no checkpoint of its
    source: the trial went on from its own checkpoint with the source's perturbed config."""
    table, waits = _waiting_clone()
    waited, effects = waits.landed("src", None)
    rec = table.get("clone")
    assert waited and effects == [] and rec.clone is None
    assert (rec.config, rec.checkpoint.path, [m.kind for m in rec.marks]) == (
        {"lr": 1}, "mem://clone/checkpoint_000001", [MarkKind.PAUSE])
    table.start("clone")
    assert not rec.cloned and rec.iteration == 6


def test_a_trial_cloned_onto_itself_whose_save_gives_none_goes_on_with_its_config() -> None:
    """PBT replay changes a trial's config by cloning it onto itself after asking it to save: a save that gives
    none (a function trainable) does not drop that change."""
    table = TrialTable()
    table.add("t", {"lr": 1})
    table.start("t")
    table.get("t").saves_inflight = 1
    waits = CloneWaits(table)
    clone = SchedulerAction(ActionKind.CLONE, "t", source_id="t", new_config={"lr": 2}, wait_for_source=True)
    table.request(clone, None, waiting=waits.would_wait(clone))
    waits.note(clone)
    table.decided("t", 1, 1, Decision.CONTINUE)
    table.get("t").saves_inflight = 0
    waits.landed("t", None)
    table.ended("t", 1, EndReason.STOPPED)
    assert table.get("t").config == {"lr": 2}
