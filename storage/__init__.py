"""Persistence for audition: results, checkpoints and experiment state on any fsspec filesystem.

Everything takes a :class:`StorageContext` so local disk, ``memory://`` and object stores such as
S3 behave the same. Object stores have no rename and no append, so the design never needs either:
checkpoints become visible through a manifest written last, experiment state through a pointer
written after a complete new version. This package never imports the engine (``actors``).
"""

from __future__ import annotations

from storage._checkpoint import (
    CheckpointInfo,
    cleanup_uncommitted,
    commit_checkpoint,
    committed_after,
    delete_checkpoint,
    download_checkpoint,
    is_committed,
    latest_committed_checkpoint,
    list_checkpoints,
    read_manifest,
)
from storage._context import DEFAULT_URL, StorageContext
from storage._errors import StorageError
from storage._io import (
    download_file,
    dumps_result,
    exists,
    key_sorted,
    read_bytes,
    read_json,
    upload_file,
    write_bytes,
    write_json,
    write_text,
)
from storage._layout import (
    MANIFEST_NAME,
    PARAMS_NAME,
    PARAMS_PICKLE_NAME,
    RESULT_NAME,
    STATE_DIR_NAME,
    STATE_POINTER_NAME,
    TUNER_NAME,
    USER_METADATA_NAME,
    ExperimentLayout,
    manifest_path,
)
from storage._pbt_policy import GLOBAL_POLICY_NAME, log_pbt_exploit, policy_file_name
from storage._progress_csv import CsvWriter, flatten
from storage._results import JsonLinesWriter, ResultWriter, read_results
from storage._retention import checkpoint_score, checkpoints_to_delete, ray_keep_order, ray_survivors
from storage._retry import classify, retrying
from storage._state import (
    StateWriter,
    has_experiment_state,
    list_experiment,
    read_experiment_state,
    write_experiment_state,
)
from storage._user_metadata import encode_user_metadata, read_user_metadata, write_user_metadata

__all__ = [
    "DEFAULT_URL",
    "GLOBAL_POLICY_NAME",
    "MANIFEST_NAME",
    "PARAMS_NAME",
    "PARAMS_PICKLE_NAME",
    "RESULT_NAME",
    "STATE_DIR_NAME",
    "STATE_POINTER_NAME",
    "TUNER_NAME",
    "USER_METADATA_NAME",
    "CheckpointInfo",
    "CsvWriter",
    "ExperimentLayout",
    "JsonLinesWriter",
    "ResultWriter",
    "StateWriter",
    "StorageContext",
    "StorageError",
    "checkpoint_score",
    "checkpoints_to_delete",
    "policy_file_name",
    "ray_keep_order",
    "ray_survivors",
    "classify",
    "cleanup_uncommitted",
    "commit_checkpoint",
    "committed_after",
    "delete_checkpoint",
    "download_checkpoint",
    "download_file",
    "dumps_result",
    "encode_user_metadata",
    "exists",
    "flatten",
    "has_experiment_state",
    "is_committed",
    "latest_committed_checkpoint",
    "list_checkpoints",
    "list_experiment",
    "log_pbt_exploit",
    "read_experiment_state",
    "read_bytes",
    "read_json",
    "read_manifest",
    "read_results",
    "read_user_metadata",
    "retrying",
    "upload_file",
    "write_bytes",
    "write_experiment_state",
    "key_sorted",
    "write_json",
    "write_text",
    "write_user_metadata",
    "manifest_path",
]
