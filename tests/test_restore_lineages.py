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
