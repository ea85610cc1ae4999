"""The line PBT's policy log gets for one exploit, in Ray 2.60's format.

Ray writes ``json.dumps([target tag, source tag, target iteration, source iteration, source config,
new config])`` (its ``SafeFallbackEncoder``: numpy values as numbers, anything else JSON cannot hold
as its ``str``). The tags are Ray's ``experiment_tag`` of each trial as the scheduler was told of it
(PBT's ``orig_tag``: after a retry, its perturbed tag), as PBT gives them; for a row giving the configs
instead they are worked out here, where the drawn values are known (``ExperimentSpec.tag_paths``).
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

    def tag(key: str, trial_id: str) -> str:
        given = row.get(f"{key}_tag")
        return given if isinstance(given, str) and given else tag_of(
            trial_id, dict(row.get(f"{key}_tag_config") or {}), tag_paths)[0]

    return json.dumps([
        tag("trial", action.trial_id), tag("source", source_id),
        row.get("trial_iteration", 0), row.get("source_iteration", 0),
        row.get("source_config"), row.get("new_config"),
    ], default=_fallback)


__all__ = ["policy_line"]
