"""The trial a callback's hook gets: the controller's snapshot plus what Ray's ``Trial`` has beyond it in the
driver (its metric analysis, its error file's text)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from actors._engine.trial import TrialSnapshot


@dataclass(frozen=True, eq=False)
class CallbackTrial(TrialSnapshot):
    """A trial as callbacks get it: the snapshot, plus Ray's ``metric_analysis`` (each numeric result key's
    max, min, avg, last, last-5-avg, last-10-avg) and ``metric_n_steps`` (the last 5 and 10 values) over
    the results the trial reported before this hook, as Ray's ``Trial`` holds them then. After
    ``Tuner.restore``, a restored trial's count starts from its saved last result (Ray restores its
    whole analysis with the experiment state)."""

    metric_analysis: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    metric_n_steps: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)
    storage_options: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # (to read error.txt)

    def get_error(self) -> str | None:
        """Ray's: the text of the trial's error file (``error_file``), None without one. audition's holds the
        error and its traceback (Ray's: ``Failure # 1 (occurred at <date>)`` and Ray's own trace)."""
        path = self.error_file
        if path is None:
            return None
        import fsspec

        try:
            with fsspec.open(path, "r", encoding="utf-8", **self.storage_options) as f:
                return str(f.read())
        except FileNotFoundError:
            return None


SNAPSHOT_FIELDS = tuple(f.name for f in fields(TrialSnapshot))

__all__ = ["SNAPSHOT_FIELDS", "CallbackTrial"]
