"""Ray Tune's ``ray.tune.utils`` helpers a Tune script uses: ``validate_save_restore`` for a ``Trainable``
class, the result-dict helpers (``flatten_dict``, ``unflattened_lookup``, ``merge_dicts``, ``deep_update``),
``date_str`` and ``warn_if_slow``. Each behaves as Ray 2.60's (recorded: ``tests/test_utils.py``).

Not here: ``diagnose_serialization`` (audition checks a trainable pickles when the ``Tuner`` is built, naming
what does not), ``wait_for_gpu`` (audition places no GPU work) and ``UtilMonitor``.
"""

from __future__ import annotations

import copy
import datetime
import logging
import os
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

log = logging.getLogger("audition")
_clock = time.time  # (the tests replace it)
_IMPORTED = _clock()


def validate_save_restore(trainable_cls: type, config: dict[str, Any] | None = None, num_gpus: int = 0) -> bool:
    """Check that a ``Trainable`` class resumes where it saved: train one instance 3 steps, save it, restore
    a second from that save, and check the second reports iterations 4 and 5 (Ray's check, and only that:
    the iteration count is restored by the base class, so state ``load_checkpoint`` forgets passes too;
    here both instances run in this process). Raises ``AssertionError`` naming what failed; True otherwise."""
    first, second = trainable_cls(config=config), trainable_cls(config=config)
    try:
        for _ in range(3):
            result = first.train()
        assert result.get("training_iteration"), \
            "Validation will not pass because it requires `training_iteration` to be returned."
        second.restore(first.save())
        for expected in (4, 5):
            got = second.train()["training_iteration"]
            assert got == expected, (f"after restoring the save of iteration 3, the trainable reported iteration "
                                     f"{got}, not {expected}")
    finally:
        first.stop()
        second.stop()
    return True


def flatten_dict(dt: Mapping[str, Any], delimiter: str = "/", prevent_delimiter: bool = False,
                 flatten_list: bool = False) -> dict[str, Any]:
    """A one-level copy of ``dt``: nested keys joined by ``delimiter`` (lists too, by index, with
    ``flatten_list``), the flat keys first, then each nesting level's; ``dt`` is left alone.
    ``prevent_delimiter`` raises ``ValueError`` for a key that holds the delimiter."""
    def refuse() -> None:
        raise ValueError(f"Found delimiter `{delimiter}` in key when trying to flatten array. Please avoid using "
                         "the delimiter in your specification.")

    out = copy.copy(dt)
    if prevent_delimiter and any(delimiter in key for key in out):
        refuse()
    nested = (dict, list) if flatten_list else (dict,)
    while any(isinstance(v, nested) for v in out.values()):
        added: dict[str, Any] = {}
        gone = []
        for key, value in out.items():
            if isinstance(value, dict):
                for sub, v in value.items():
                    if prevent_delimiter and delimiter in sub:
                        refuse()
                    added[delimiter.join([key, str(sub)])] = v
                gone.append(key)
            elif flatten_list and isinstance(value, list):
                added.update((delimiter.join([key, str(i)]), v) for i, v in enumerate(value))
                gone.append(key)
        out.update(added)  # type: ignore[attr-defined]
        for key in gone:
            del out[key]  # type: ignore[attr-defined]
    return dict(out) if not isinstance(out, dict) else out


def unflattened_lookup(flat_key: str, lookup: Mapping[str, Any] | Sequence[Any], delimiter: str = "/",
                       **kwargs: Any) -> Any:
    """``lookup[flat_key]`` if present, else the nested value ``flat_key`` names (``"a/0/b"`` is
    ``lookup["a"][0]["b"]``); a missing one raises ``KeyError`` unless ``default=`` is given."""
    if flat_key in lookup:
        return lookup[flat_key]  # type: ignore[call-overload,index]
    base: Any = lookup
    for key in flat_key.split(delimiter):
        try:
            if isinstance(base, Mapping):
                base = base[key]
            elif isinstance(base, Sequence):
                base = base[int(key)]
            else:
                raise KeyError()  # (Ray's: an empty KeyError)
        except KeyError:
            if "default" in kwargs:
                return kwargs["default"]
            raise
    return base


def deep_update(original: dict[str, Any], new_dict: Mapping[str, Any], new_keys_allowed: bool = False,
                allow_new_subkey_list: Sequence[str] | None = None,
                override_all_if_type_changes: Sequence[str] | None = None,
                override_all_key_list: Sequence[str] | None = None) -> dict[str, Any]:
    """Update ``original`` from ``new_dict`` recursively and return it (Ray's rules: an unknown key raises
    unless ``new_keys_allowed``; the keys of ``allow_new_subkey_list`` take new subkeys; a dict under a key of
    ``override_all_if_type_changes`` is replaced when its ``"type"`` changes; the keys of
    ``override_all_key_list`` are replaced whole)."""
    subkeys_ok = allow_new_subkey_list or []
    type_switch = override_all_if_type_changes or []
    whole = override_all_key_list or []
    for k, value in new_dict.items():
        if k not in original and not new_keys_allowed:
            raise Exception(f"Unknown config parameter `{k}` ")
        old = original.get(k)
        if isinstance(old, dict) and isinstance(value, dict) and k not in whole:
            if k in type_switch and "type" in value and "type" in old and value["type"] != old["type"]:
                original[k] = value
            else:
                deep_update(old, value, True if k in subkeys_ok else new_keys_allowed, override_all_key_list=whole)
        else:
            original[k] = value
    return original


def merge_dicts(d1: dict[str, Any], d2: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``d1`` deep-updated with ``d2`` (new keys allowed)."""
    merged = copy.deepcopy(d1)
    deep_update(merged, d2, True, [])
    return merged


def date_str() -> str:
    """Now, local time, as Ray names things by date: ``2026-12-05_11-30-00``."""
    return datetime.datetime.today().strftime("%Y-%m-%d_%H-%M-%S")


class warn_if_slow:  # (Ray's name)
    """``with warn_if_slow("name"):`` logs a warning when the block takes longer than ``threshold`` seconds
    (``TUNE_WARN_THRESHOLD_S``, default 0.5), unless ``disable`` or within a minute of this module's import,
    as Ray's; ``too_slow`` tells afterwards."""

    DEFAULT_THRESHOLD = float(os.environ.get("TUNE_WARN_THRESHOLD_S", 0.5))
    DEFAULT_MESSAGE = "The `{name}` operation took {duration:.3f} s, which may be a performance bottleneck."

    def __init__(self, name: str, threshold: float | None = None, message: str | None = None,
                 disable: bool = False) -> None:
        self.name = name
        self.threshold = threshold or self.DEFAULT_THRESHOLD
        self.message = message or self.DEFAULT_MESSAGE
        self.too_slow = False
        self.disable = disable

    def __enter__(self) -> warn_if_slow:
        self.start = _clock()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        now = _clock()
        duration = now - self.start
        # as Ray's: never in the first minute after import (start-up is slow anyway)
        if not self.disable and duration > self.threshold and now - _IMPORTED > 60.0:
            self.too_slow = True
            log.warning(self.message.format(name=self.name, duration=duration))


__all__ = ["date_str", "deep_update", "flatten_dict", "merge_dicts", "unflattened_lookup", "validate_save_restore",
           "warn_if_slow"]
