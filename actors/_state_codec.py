"""Trial configs and last results in the experiment state, kept exactly as Ray Tune's state keeps them.

The state is JSON, and its rows stay readable by what runs nothing (``audition status``, the dashboard):
a value JSON cannot hold is written as before (``storage``'s JSON fallback: a numpy value as a number or
list, anything else as its ``str``). Ray 2.60 cloudpickles such values into its state (``TuneFunctionEncoder``)
and a restore gets them back as they were (recorded: a function, a numpy array or ``float32``, a set, an
object of the user's class; a tuple comes back a list, as JSON has it). So a row whose config or last
result holds one also carries the whole dict cloudpickled (``config_pickled``, ``last_result_pickled``:
hex), which the driver's restore loads in place of the JSON view, shaped as Ray's JSON round trip shapes what
JSON holds (a tuple as a list, ``numpy.float64`` as a float). The controller encodes when it writes a row; a
config or result JSON holds costs one walk, no copy. A checkpoint's manifest carries its metrics the same way
(``metrics_pickled``), unshaped: Ray pickles a trial's checkpoint results whole.
"""

from __future__ import annotations

import json
from typing import Any

import cloudpickle

_NATIVE = (str, int, float, bool, type(None))
_EXACT = frozenset(_NATIVE)  # (a type lookup first: a row of numbers is walked at ~0.1 us a value)
PICKLED = ("config", "last_result")  # the row keys whose exact values may ride along as "<key>_pickled"


def _plain(value: Any) -> bool:
    """Whether JSON holds ``value`` natively (its keys too: JSON makes a number key a string, as in Ray)."""
    if type(value) in _EXACT:
        return True
    if isinstance(value, dict):
        return all(type(v) in _EXACT or _plain(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(type(v) in _EXACT or _plain(v) for v in value)
    return isinstance(value, _NATIVE)  # (as json's encoder: np.float64 is a float)


def _json_key(key: Any) -> Any:
    """A dict key as a JSON round trip gives it back (json's encoder: ``1`` -> ``"1"``, ``True`` -> ``"true"``);
    a key JSON refuses stays as it is (Ray's encoder fails on it; the row's JSON view says what it wrote)."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return json.dumps(float(key))
    return key


def _as_json_shapes(value: Any) -> Any:
    """``value`` as Ray's restore gives it back: what JSON holds as a JSON round trip leaves it (a tuple as a
    list, an ``IntEnum`` as its int, ``numpy.float64`` as a float, a ``str`` subclass as a str, an
    ``OrderedDict`` as a dict, number keys as strings), every other value (Ray's cloudpickle fallback) as it is."""
    kind = type(value)
    if kind in _EXACT:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # (bool is in _EXACT, and cannot be subclassed)
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_as_json_shapes(v) for v in value]
    if isinstance(value, dict):
        return {_json_key(k): _as_json_shapes(v) for k, v in value.items()}
    return value


def _json_exact(value: Any) -> bool:
    """Whether a JSON round trip gives ``value`` back as it is: the same types, a tuple not made a list."""
    kind = type(value)
    if kind in _EXACT:
        return True
    if kind is dict:
        return all(type(k) is str and _json_exact(v) for k, v in value.items())
    if kind is list:
        return all(_json_exact(v) for v in value)
    return False


def pickled(values: dict[str, Any]) -> str | None:
    """``values`` cloudpickled (hex) if JSON cannot hold all of it, else None (nothing to carry)."""
    if _plain(values):
        return None
    return bytes(cloudpickle.dumps(_as_json_shapes(values))).hex()


class UnreadableValues(Exception):
    """A row's pickled values could not be loaded (their class or module is gone): names the trial."""


def pickled_exactly(values: dict[str, Any]) -> str | None:
    """``values`` cloudpickled as they are (hex) unless JSON gives them back unchanged (then None).

    For a checkpoint's metrics: Ray keeps a trial's checkpoint results pickled whole, so its
    ``best_checkpoints`` give a tuple, a ``float32`` or an ``IntEnum`` back as reported, also after a restore.
    """
    if _json_exact(values):
        return None
    return bytes(cloudpickle.dumps(values)).hex()


def load_metrics(metadata: dict[str, Any], where: str) -> dict[str, Any]:
    """A checkpoint manifest's metrics: the exact ones when it carries them (``metrics_pickled``), else its
    JSON view. ``where`` names the checkpoint in the error when they no longer load."""
    text = metadata.get("metrics_pickled")
    if text is None:
        return dict(metadata.get("metrics") or {})
    try:
        values: dict[str, Any] = cloudpickle.loads(bytes.fromhex(text))
    except Exception as exc:
        raise UnreadableValues(
            f"the metrics of checkpoint {where} hold a value saved by cloudpickle that cannot be loaded here "
            f"({type(exc).__name__}: {exc}); make the module that defines it importable (as when the trial "
            "ran) and read them again") from exc
    return values


def load_pickled(state: dict[str, Any]) -> None:
    """Put each row's exact values in place of their JSON views, in a state read for a restore (in place)."""
    for row in state.get("trials") or ():
        for key in PICKLED:
            text = row.pop(f"{key}_pickled", None)
            if text is None:
                continue
            try:
                row[key] = cloudpickle.loads(bytes.fromhex(text))
            except Exception as exc:
                raise UnreadableValues(
                    f"trial {row.get('trial_id')}'s {key} holds a value saved by cloudpickle that cannot be "
                    f"loaded here ({type(exc).__name__}: {exc}); make the module that defines it importable "
                    "(as when the experiment ran) and restore again") from exc


__all__ = ["PICKLED", "UnreadableValues", "load_metrics", "load_pickled", "pickled", "pickled_exactly"]
