"""Restoring a PBT trial whose history holds a clone's lineage (its rows go on from its source's
checkpoint after the trial's own, as in Ray): the restore resumes from the clone's newest checkpoint,
not from the last checkpoint before the clone (found by the sweep over seeds 2000-40000, seed 27304)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from actors._shell.restore_storage import lineage_reach
from tests._sim_scenarios import check, scenario


def _rows(*its: tuple[int, int] | tuple[int, int, bool]) -> list[dict[str, Any]]:
    """Rows of (training_iteration, iterations_since_restore[, the clone's first: pbt_exploit])."""
    out = []
    for it, isr, *exploit in its:
        row: dict[str, Any] = {"training_iteration": it, "iterations_since_restore": isr}
        if exploit and exploit[0]:
            row["pbt_exploit"] = {"source": "t0"}
        out.append(row)
    return out


def _its(rows: list[dict[str, Any]]) -> list[int]:
    return [r["training_iteration"] for r in rows]


def test_a_history_without_clones_reaches_its_first_gap() -> None:
    assert lineage_reach(_rows((1, 1), (2, 2), (3, 3)), cloned=False)[0] == 3
    reach, rows = lineage_reach(_rows((1, 1), (2, 2), (4, 1), (5, 2)), cloned=False)
    assert (reach, _its(rows)) == (2, [1, 2])  # a restart past a lost row 3 is a gap, not a lineage


def test_a_clones_lineage_is_followed_forward_and_back() -> None:
    # the source's checkpoint was ahead (4 after the trial's own 2) or behind (3 after its own 5)
    reach, rows = lineage_reach(_rows((1, 1), (2, 2), (5, 1, True), (6, 2)), cloned=False)
    assert (reach, _its(rows)) == (6, [5, 6])
    reach, rows = lineage_reach(_rows((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (4, 1, True), (5, 2)), cloned=False)
    assert (reach, _its(rows)) == (5, [4, 5])


def test_a_clones_first_row_redone_by_a_retry_starts_the_lineage_in_a_cloned_trial() -> None:
    # the retry rewound the row that said pbt_exploit; the trial's EXPLOIT mark tells it was cloned
    history = _rows((1, 1), (2, 2), (4, 1), (5, 2))
    assert lineage_reach(history, cloned=True)[0] == 5
    assert lineage_reach(history, cloned=False)[0] == 2
    # a gap inside the lineage still ends it
    assert lineage_reach(_rows((1, 1), (2, 2), (4, 1, True), (6, 3)), cloned=True)[0] == 4


def test_a_restored_pbt_trial_keeps_its_clones_rows() -> None:
    """Seed 27304: trial 3 (rows 1, 2) clones trial 0's checkpoint at 3 and reports 4, checkpointed; the
    scheduler fails and the run aborts with that checkpoint newer than the saved state. Restored, the
    trial resumes from it (before: the history's gap-free prefix ended at 2, so the checkpoint at 4 was
    deleted, the clone's row dropped and iteration 3 redone with the clone's config)."""
    logging.getLogger("audition").setLevel(logging.ERROR)
    sc = scenario(27304)
    assert (sc.scheduler, sc.faults) == ("pbt", "scheduler")
    assert check(sc) == []


@pytest.fixture(autouse=True)
def _restore_log_level() -> Any:
    logger = logging.getLogger("audition")
    level = logger.level
    yield
    logger.setLevel(level)


# ---------------------------------------------------------------- rewinds of a clone's run (storage's rule)

def test_a_rewind_drops_a_clones_rows_back_to_its_lineage_start_at_most() -> None:
    from storage._trial_file import rewound_length

    assert rewound_length([1, 2, 3, 4], 2) == 2  # no clone: the trailing rows past the checkpoint
    # own 1..5, a clone of a source's checkpoint at 3 reported 4, 5: a retry from that checkpoint (3) drops
    # the clone's rows, never the trial's own 4, 5 (before: 4 rows dropped)
    assert rewound_length([1, 2, 3, 4, 5, 4, 5], 3) == 5
    assert rewound_length([1, 2, 3, 4, 5, 4, 5], 4) == 6
    # the source's checkpoint ahead of the trial (at 6 after its own 2): rows past 7 only
    assert rewound_length([1, 2, 7, 8, 9], 7) == 3
    # lineage_only: trailing rows past the point are dropped only when they begin a lineage of their own
    assert rewound_length([1, 2, 3, 4, 5], 3, lineage_only=True) == 5
    assert rewound_length([1, 2, 3, 4, 5, 4], 3, lineage_only=True) == 5


def test_a_retry_of_a_clone_that_reported_nothing_keeps_the_trials_own_rows() -> None:
    """Seed 49417 (the sweep over seeds 40000-80000): trial 2 reports 3 from its own checkpoint at 2, clones
    a source's checkpoint at 2, and that run fails before reporting; its retry restores the same
    checkpoint. Nothing of the clone's lineage is rewound (before: the trial's own row 3 was dropped and its
    last result was a row the history no longer had)."""
    sc = scenario(49417)
    assert sc.scheduler == "pbt"
    assert check(sc) == []


def test_a_restore_keeps_the_trials_own_rows_behind_a_clone_that_had_logged_none(tmp_path: Any) -> None:
    """A state saved while a PBT clone of the source's checkpoint at 2 had reported nothing (the trial's own
    history 1..4 and last result 4): the restore resumes from that checkpoint and keeps rows 1..4; rows the
    clone wrote after the state (3 and 4 again) are dropped. Before: every row past 2 was dropped."""
    from actors._engine.store import RestoreMark
    from actors._shell.restore_storage import _prepare_trial
    from storage import ExperimentLayout, ResultWriter, StorageContext, commit_checkpoint, read_results

    ctx = StorageContext(str(tmp_path))
    layout = ExperimentLayout(ctx, "exp")
    source_ckpt = {"path": f"{tmp_path}/exp/t0/checkpoint_000001", "index": 1, "iteration": 2,
                   "time_total_s": 2.0, "metrics": {"training_iteration": 2, "trial_id": "t0"}}

    (tmp_path / "empty").mkdir()
    commit_checkpoint(ctx, source_ckpt["path"], str(tmp_path / "empty"), {"iteration": 2, "index": 1})

    def row(logged: int) -> dict[str, Any]:
        return {"trial_id": "t1", "config": {}, "status": "PENDING", "restore": RestoreMark.RESUME,
                "last_result": {"training_iteration": 4, "trial_id": "t1"}, "num_failures": 0,
                "checkpoint": dict(source_ckpt), "max_index": -1, "saved_logged_iteration": logged,
                "logged_iteration": 10**12}

    def history(*its: int) -> list[int]:
        w = ResultWriter(ctx, layout, "t1")
        w.truncate(0)
        w.append([{"training_iteration": i, "trial_id": "t1"} for i in its])
        w.close()
        r = row(2)
        _prepare_trial(ctx, layout, r)
        return [x["training_iteration"] for x in read_results(ctx, layout, "t1")]

    assert history(1, 2, 3, 4) == [1, 2, 3, 4]
    assert history(1, 2, 3, 4, 3, 4) == [1, 2, 3, 4]
