"""What a recorder compares of a trial's results: the keys a callback reported (not the ones Ray Tune and
audition fill in) and their values, rounded to 5 significant digits (the same seeded CPU training in both)."""

from __future__ import annotations

from typing import Any

AUTO = {"timestamp", "checkpoint_dir_name", "should_checkpoint", "done", "training_iteration", "trial_id", "date",
        "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip", "config", "time_since_restore",
        "iterations_since_restore", "experiment_tag"}


def reported_values(history: Any) -> tuple[list[str], dict[str, list[float]]]:
    """The reported columns of a trial's ``metrics_dataframe`` and their rounded values."""
    reported = sorted(c for c in history.columns if c not in AUTO and not c.startswith("config/"))
    return reported, {c: [float(f"{v:.5g}") for v in history[c]] for c in reported}
