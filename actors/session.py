"""Ray AIR's ``ray.air.session``, which Ray 2.0-2.6 scripts report through (``session.report({...})``).

Ray 2.60 still serves it in a Tune trial (recorded): ``report`` and ``get_checkpoint`` work as ``tune``'s,
``get_experiment_name``, ``get_trial_name``, ``get_trial_id``, ``get_trial_dir`` and ``get_trial_resources``
describe the trial, Ray Train's ranks and sizes are None, and so are ``get_metadata`` and ``get_run_id``
(where ``tune.get_context().get_metadata()`` raises). ``audition migrate`` maps ``from ray.air import
session`` here. Outside a trial they raise, as ``actors.get_context()``'s methods do.
"""

from __future__ import annotations

from typing import Any

from actors._worker.session import get_checkpoint, get_context, report


def get_experiment_name() -> str:
    return get_context().get_experiment_name()


def get_trial_name() -> str:
    return get_context().get_trial_name()


def get_trial_id() -> str:
    return get_context().get_trial_id()


def get_trial_dir() -> str:
    return get_context().get_trial_dir()


def get_trial_resources() -> Any:
    return get_context().get_trial_resources()


def _train_only() -> None:
    """Ray Train's, None in a Tune trial (as recorded); raises outside a trial."""
    get_context().get_trial_id()
    return None


def get_world_size() -> None:
    return _train_only()


def get_world_rank() -> None:
    return _train_only()


def get_local_rank() -> None:
    return _train_only()


def get_local_world_size() -> None:
    return _train_only()


def get_node_rank() -> None:
    return _train_only()


def get_metadata() -> None:
    return _train_only()


def get_run_id() -> None:
    return _train_only()


def get_dataset_shard(dataset_name: str | None = None) -> Any:
    """Ray Data's shards, which audition does not offer."""
    raise NotImplementedError("session.get_dataset_shard(): audition has no Ray Data datasets; pass the data to "
                              "the trainable with tune.with_parameters(train, data=...)")


__all__ = ["get_checkpoint", "get_dataset_shard", "get_experiment_name", "get_local_rank", "get_local_world_size",
           "get_metadata", "get_node_rank", "get_run_id", "get_trial_dir", "get_trial_id", "get_trial_name",
           "get_trial_resources", "get_world_rank", "get_world_size", "report"]
