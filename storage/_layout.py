"""Every file and directory name the engine writes, in one place; pure string logic, no I/O.

Layout below the storage root::

    <name>/experiment_state.json              pointer to the newest complete state version
    <name>/tuner.pkl                          what Tuner.restore needs (written by the engine)
    <name>/.state/experiment_state-<seq>-<token>.json
    <name>/<trial>/params.json | result.json | progress.csv | error.txt | stdout.txt | stderr.txt
    <name>/<trial>/checkpoint_000003/...   the user's files only
    <name>/<trial>/.checkpoint_000003.audition_manifest.json   written last: the commit

``<trial>`` is the name the engine gives the trial's directory (``set_dirname``: Ray's
``<trainable>_<trial id>_<tag>_<date>``, or the user's), else the trial id.
"""

from __future__ import annotations

import posixpath
import re

from storage._context import StorageContext

# A checkpoint's manifest sits beside its directory (``.checkpoint_000003.audition_manifest.json``), so
# the directory holds only the user's files, as Ray's do. Checkpoints committed before that have it
# inside, under MANIFEST_NAME: still read, and never a name a user's file is uploaded under.
MANIFEST_NAME = ".audition_manifest.json"
# a checkpoint's user metadata (Checkpoint.set_metadata): Ray Train's file name, so a checkpoint
# directory moved between Ray and audition keeps it; never the manifest's name
USER_METADATA_NAME = ".metadata.json"
STATE_POINTER_NAME = "experiment_state.json"
STATE_DIR_NAME = ".state"
TUNER_NAME = "tuner.pkl"
PARAMS_NAME = "params.json"
PARAMS_PICKLE_NAME = "params.pkl"  # the config cloudpickled, as Ray's JSON logger writes it
RESULT_NAME = "result.json"
PROGRESS_NAME = "progress.csv"
ERROR_NAME = "error.txt"
STDOUT_NAME = "stdout.txt"
STDERR_NAME = "stderr.txt"

_CHECKPOINT_RE = re.compile(r"^checkpoint_(\d{6,})$")
_MANIFEST_RE = re.compile(r"^\.(checkpoint_\d{6,})" + re.escape(MANIFEST_NAME) + "$")
_STATE_VERSION_RE = re.compile(r"^experiment_state-(\d{6,})-([0-9a-f]+)\.json$")


def _check_component(value: object, kind: str) -> str:
    """Names become path components: refuse anything that would escape or collide with internals."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    if "/" in value or "\\" in value or "\0" in value:
        raise ValueError(f"{kind} {value!r} must not contain '/', '\\' or NUL: pick a plain name")
    if value.startswith("."):
        raise ValueError(f"{kind} {value!r} must not start with '.' (reserved for internal files)")
    return value


RESERVED_NAMES = frozenset({STATE_POINTER_NAME, TUNER_NAME})


def check_dirname(value: object, kind: str) -> str:
    """A trial directory's name: one plain path component that is not one of the experiment's files."""
    name = _check_component(value, kind)
    if name in RESERVED_NAMES or name in (".", ".."):
        raise ValueError(f"{kind} {name!r} is the name of one of the experiment's own files: pick another")
    return name


class ExperimentLayout:
    """Paths (within ``ctx.fs``, no protocol) of one experiment's files."""

    def __init__(self, ctx: StorageContext, name: str) -> None:
        self.ctx = ctx
        self.name = _check_component(name, "experiment name")
        self.experiment_dir = ctx.join(self.name)
        self.state_dir = posixpath.join(self.experiment_dir, STATE_DIR_NAME)
        self.state_pointer = posixpath.join(self.experiment_dir, STATE_POINTER_NAME)
        self.tuner_file = posixpath.join(self.experiment_dir, TUNER_NAME)
        # trial id -> its directory's name (named trials; the others' is their id)
        self.dirnames: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"ExperimentLayout({self.ctx.uri(self.experiment_dir)!r})"

    # -- experiment state versions ------------------------------------------------------------
    def state_version(self, seq: int, token: str) -> str:
        if seq < 0 or not re.fullmatch(r"[0-9a-f]+", token):
            raise ValueError(f"bad state version seq={seq!r} token={token!r}")
        return posixpath.join(self.state_dir, f"experiment_state-{seq:06d}-{token}.json")

    @staticmethod
    def parse_state_version(path: str) -> int | None:
        """Sequence number of a state version file, or None for anything else."""
        match = _STATE_VERSION_RE.match(posixpath.basename(path.rstrip("/")))
        return int(match.group(1)) if match else None

    # -- trials --------------------------------------------------------------------------------
    def trial_dir(self, trial_id: str) -> str:
        name = self.dirnames.get(trial_id)
        if name is not None:
            return posixpath.join(self.experiment_dir, name)
        return posixpath.join(self.experiment_dir, _check_component(trial_id, "trial id"))

    def set_dirname(self, trial_id: str, dirname: str | None) -> None:
        """Name ``trial_id``'s directory ``dirname`` (None or "": the trial id, as earlier versions named it)."""
        if dirname:
            self.dirnames[trial_id] = check_dirname(dirname, "trial directory name")
        else:
            self.dirnames.pop(trial_id, None)

    def params_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), PARAMS_NAME)

    def params_pickle_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), PARAMS_PICKLE_NAME)

    def result_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), RESULT_NAME)

    def progress_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), PROGRESS_NAME)

    def error_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), ERROR_NAME)

    def stdout_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), STDOUT_NAME)

    def stderr_file(self, trial_id: str) -> str:
        return posixpath.join(self.trial_dir(trial_id), STDERR_NAME)

    def checkpoint_dir(self, trial_id: str, index: int) -> str:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"checkpoint index must be an int >= 0, got {index!r}")
        return posixpath.join(self.trial_dir(trial_id), f"checkpoint_{index:06d}")

    @staticmethod
    def parse_checkpoint_index(path: str) -> int | None:
        """Index of a ``checkpoint_NNNNNN`` directory, or None for anything else."""
        match = _CHECKPOINT_RE.match(posixpath.basename(path.rstrip("/")))
        return int(match.group(1)) if match else None


def manifest_path(ckpt_dir: str) -> str:
    """Where a checkpoint's manifest is written: beside its directory, not in it."""
    parent, name = posixpath.split(ckpt_dir.rstrip("/"))
    return posixpath.join(parent, f".{name}{MANIFEST_NAME}")


def legacy_manifest_path(ckpt_dir: str) -> str:
    """Where checkpoints committed by earlier versions keep their manifest: inside the directory."""
    return posixpath.join(ckpt_dir.rstrip("/"), MANIFEST_NAME)


def manifest_dir_name(path: str) -> str | None:
    """The checkpoint directory's name a manifest beside it belongs to, or None for anything else."""
    match = _MANIFEST_RE.match(posixpath.basename(path.rstrip("/")))
    return match.group(1) if match else None
