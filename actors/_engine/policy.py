"""The line PBT's policy log gets for one exploit, in Ray 2.60's format.

Ray writes ``json.dumps([target tag, source tag, target iteration, source iteration, source config,
new config])`` (its ``SafeFallbackEncoder``: numpy values as numbers, anything else JSON cannot hold
as its ``str``). The tags are Ray's ``experiment_tag`` of each trial as it was added, worked out here
because only the experiment knows which values were drawn (``ExperimentSpec.tag_paths``).
"""

from __future__ import annotations

import json
from typing import Any

from actors._engine.trial import Paths, TagPaths, tag_of
from actors.messages import SchedulerAction


def _fallback(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    return str(value)


def policy_line(action: SchedulerAction, tag_paths: Paths | TagPaths | None) -> str:
    """The JSON row (no newline) of a ``LOG_POLICY`` action (see ``SchedulerController.log_policy``)."""
    row = action.info or {}
    source_id = action.source_id or ""
    return json.dumps([
        tag_of(action.trial_id, dict(row.get("trial_tag_config") or {}), tag_paths)[0],
        tag_of(source_id, dict(row.get("source_tag_config") or {}), tag_paths)[0],
        row.get("trial_iteration", 0), row.get("source_iteration", 0),
        row.get("source_config"), row.get("new_config"),
    ], default=_fallback)


__all__ = ["policy_line"]
