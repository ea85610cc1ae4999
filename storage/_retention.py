"""Which checkpoints to delete: pure logic over CheckpointInfo, so it is testable without storage."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

from storage._checkpoint import CheckpointInfo
from storage._io import is_finite_number

T = TypeVar("T")


def _lookup(mapping: dict[str, Any], key: str, missing: Any = None) -> Any:
    """``mapping[key]``, or for ``a/b`` the nested value, as Ray's ``flatten_dict(metrics)[key]``; ``missing``
    when it is not there (a value of ``None`` is returned as it is)."""
    if key in mapping:
        return mapping[key]
    value: Any = mapping
    for part in key.split("/"):
        if not isinstance(value, dict) or part not in value:
            return missing
        value = value[part]
    return value


def checkpoint_score(info: CheckpointInfo, score_attribute: str) -> float | None:
    """The score in the checkpoint's metadata, or in its ``metrics`` sub-dict (where the engine puts
    the reported result); nested keys may be written ``a/b``. None if absent or not a finite number.
    """
    value = _lookup(info.metadata, score_attribute)
    metrics = info.metadata.get("metrics")
    if value is None and isinstance(metrics, dict):
        value = _lookup(metrics, score_attribute)
    return float(value) if is_finite_number(value) else None


def checkpoints_to_delete(
    infos: Iterable[CheckpointInfo],
    num_to_keep: int | None,
    score_attribute: str | None,
    score_order: str = "max",
    protected: Iterable[str] = frozenset(),
) -> list[CheckpointInfo]:
    """Committed checkpoints beyond the ``num_to_keep`` that Ray Tune keeps (``ray_keep_order`` over
    each checkpoint's reported ``metrics``, in commit order), sorted by index.

    The latest committed checkpoint and any path in ``protected`` (e.g. the one a trial is restoring
    from) are always kept, so more than ``num_to_keep`` may survive. Uncommitted directories are not
    considered here.
    """
    if num_to_keep is not None and (not isinstance(num_to_keep, int) or num_to_keep < 1):
        raise ValueError(f"num_to_keep must be None or an int >= 1, got {num_to_keep!r}")
    if score_order not in ("max", "min"):
        raise ValueError(f"score_order must be 'max' or 'min', got {score_order!r}")
    committed = sorted((i for i in infos if i.committed), key=lambda i: i.index)
    if num_to_keep is None or not committed:
        return []
    pairs = [(info, info.metadata.get("metrics") or {}) for info in committed]
    keep = {committed[-1].path, *protected,
            *(info.path for info in ray_survivors(pairs, score_attribute, score_order, num_to_keep))}
    return [info for info in committed if info.path not in keep]


class _Unscorable(Exception):
    """Ray's ``order_factor * value`` raised ``TypeError``: the checkpoint is never registered."""


_ABSENT = object()


def ray_keep_order(items: Iterable[tuple[T, dict[str, Any]]], score_attribute: str | None,
                   score_order: str = "max", num_to_keep: int | None = None) -> list[tuple[T, dict[str, Any]]]:
    """Ray Tune 2.60's checkpoint bookkeeping (``_CheckpointManager.register_checkpoint``) over
    ``(checkpoint, metrics)`` pairs in commit order: worst first, best last; the last
    ``num_to_keep`` are the ones Ray keeps. A pair whose metrics have the score attribute as a key is
    inserted after every entry whose score is not higher (so among equal scores the newer is better;
    NaN is lowest, a missing value counts as -inf; ``min`` negates); one without that key (also a
    nested ``a/b`` attribute, which Ray looks for among the top-level keys) is appended, as if the
    newest were best. A score that is not a number (a string, ``None``, a list) makes Ray's insertion
    raise, so that checkpoint is left out (recorded: never listed, and its directory never deleted).
    (Ray lists it when it is the trial's first checkpoint, inserted without a comparison, and then
    fails every later scored insertion; that is not replayed.)"""
    sign = 1.0 if score_order == "max" else -1.0

    def score(metrics: dict[str, Any]) -> tuple[bool, float]:
        value = _lookup(metrics, score_attribute or "", _ABSENT)
        try:
            s = sign * (float("-inf") if value is _ABSENT else value)
        except TypeError:
            raise _Unscorable from None
        s = float(s)
        return (False, float("-inf")) if math.isnan(s) else (True, s)

    out: list[tuple[T, dict[str, Any]]] = []
    for item in items:
        if score_attribute is not None and score_attribute in item[1]:
            try:
                key = score(item[1])
            except _Unscorable:
                continue
            at = next((i for i, other in enumerate(out) if score(other[1]) > key), len(out))
            out.insert(at, item)
        else:
            out.append(item)
    return out if num_to_keep is None else out[-num_to_keep:]


def ray_survivors(items: Iterable[tuple[T, dict[str, Any]]], score_attribute: str | None,
                  score_order: str = "max", num_to_keep: int | None = None) -> list[T]:
    """The checkpoints Ray's bookkeeping keeps: the ``num_to_keep`` best it registered (``ray_keep_order``),
    then the ones it never registered (a score that is not a number), which Ray never deletes."""
    pairs = list(items)
    ordered = ray_keep_order(pairs, score_attribute, score_order)
    listed = {id(item[0]) for item in ordered}
    best = ordered if num_to_keep is None else ordered[-num_to_keep:]
    return [item[0] for item in best] + [item[0] for item in pairs if id(item[0]) not in listed]
