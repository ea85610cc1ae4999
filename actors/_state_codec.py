"""Trial configs and last results in the experiment state, kept exactly as Ray Tune's state keeps them.

The state is JSON, and its rows stay readable by what runs nothing (``audition status``, the dashboard):
a value JSON cannot hold is written as before (``storage``'s JSON fallback: a numpy value as a number or
list, anything else as its ``str``). Ray 2.60 cloudpickles such values into its state (``TuneFunctionEncoder``)
and a restore gets them back as they were (recorded: a function, a numpy array or ``float32``, a set, an
object of the user's class; a tuple comes back a list, as JSON has it). So a row whose config or last
result holds one also carries the whole dict cloudpickled (``config_pickled``, ``last_result_pickled``:
hex), which the driver's restore loads in place of the JSON view. The controller encodes when it writes a
row; a config or result JSON holds costs one walk, no copy.
"""

from __future__ import annotations

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


def _as_json_shapes(value: Any) -> Any:
    """Tuples as lists, as a JSON round trip leaves them (Ray's restored values); every other value as it is."""
    if isinstance(value, (list, tuple)) and not isinstance(value, _NATIVE):
        return [_as_json_shapes(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json_shapes(v) for k, v in value.items()}
    return value


def pickled(values: dict[str, Any]) -> str | None:
    """``values`` cloudpickled (hex) if JSON cannot hold all of it, else None (nothing to carry)."""
    if _plain(values):
        return None
    return bytes(cloudpickle.dumps(_as_json_shapes(values))).hex()


class UnreadableValues(Exception):
    """A row's pickled values could not be loaded (their class or module is gone): names the trial."""


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


__all__ = ["PICKLED", "UnreadableValues", "load_pickled", "pickled"]
