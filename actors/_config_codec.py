"""Trial configs in the experiment state, as Ray Tune's ``TuneFunctionEncoder``/``TuneFunctionDecoder`` keep them.

The state is JSON. A config value JSON holds natively (a string, number, bool, None, or a list, tuple or
dict of them; a tuple reads back as a list, as in Ray) is written as it is. Any other value (a function, a
numpy array or ``float32``, a set, an object of the user's class) is cloudpickled under Ray's marker,
``{"_type": "CLOUDPICKLE_FALLBACK", "value": <hex>}``, so a restored trial gets the value itself, as Ray's
does (recorded from Ray 2.60); before, it got ``str(value)``. The controller encodes when it writes a
state; the driver decodes when it restores one. Readers that run nothing (``audition status``, the
dashboard) never decode: they show the marker as stored.
"""

from __future__ import annotations

from typing import Any

import cloudpickle

FALLBACK = "CLOUDPICKLE_FALLBACK"  # Ray's _CLOUDPICKLE_FALLBACK_TYPE
_NATIVE = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    if isinstance(value, _NATIVE):  # (isinstance, as json's encoder: np.float64 is a float)
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values()) and not _is_marker(value)
    return False


def _is_marker(value: Any) -> bool:
    return isinstance(value, dict) and value.get("_type") == FALLBACK and len(value) == 2 and "value" in value


def encode(config: Any) -> Any:
    """``config`` as the state stores it: the same object when JSON holds all of it (the common case, so a
    state write copies nothing), else a copy whose other values are cloudpickled under Ray's marker."""
    if _plain(config):
        return config
    return _encode(config)


def _encode(value: Any) -> Any:
    if isinstance(value, _NATIVE):
        return value
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, dict) and not _is_marker(value):
        return {k: _encode(v) for k, v in value.items()}
    return {"_type": FALLBACK, "value": cloudpickle.dumps(value).hex()}


def decode(config: Any) -> Any:
    """A stored config with every marker's value unpickled (a config stored without markers: itself)."""
    if _is_marker(config):
        return cloudpickle.loads(bytes.fromhex(config["value"]))
    if isinstance(config, list):
        return [decode(v) for v in config]
    if isinstance(config, dict):
        return {k: decode(v) for k, v in config.items()}
    return config


class UnreadableConfig(Exception):
    """A stored config value could not be unpickled (its class or module is gone): names the trial."""


def decode_trials(state: dict[str, Any]) -> None:
    """Decode every trial row's config of a state read for a restore, in place."""
    for row in state.get("trials") or ():
        if "config" in row:
            try:
                row["config"] = decode(row["config"])
            except Exception as exc:
                raise UnreadableConfig(
                    f"trial {row.get('trial_id')}'s config holds a value saved by cloudpickle that cannot be "
                    f"loaded here ({type(exc).__name__}: {exc}); make the module that defines it importable "
                    "(as when the experiment ran) and restore again") from exc


__all__ = ["FALLBACK", "UnreadableConfig", "decode", "decode_trials", "encode"]
