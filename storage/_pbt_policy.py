"""Ray Tune's PBT policy log: ``pbt_global.txt`` and ``pbt_policy_<trial id>.txt`` in the experiment directory.

Ray 2.60's ``PopulationBasedTraining(log_config=True)`` writes one JSON line per exploit, ``[target tag,
source tag, target iteration, source iteration, source config, new config]``: appended to ``pbt_global.txt``,
and to the target's own file, after that file was replaced by a copy of the source's if the source has one
(so a trial's file holds the chain of exploits that made its config). ``PopulationBasedTrainingReplay`` reads
a trial's file. Most remote stores cannot append: each file is read and written whole (a line per exploit).
"""

from __future__ import annotations

import posixpath

from storage._context import StorageContext
from storage._io import exists, read_bytes, write_bytes

GLOBAL_POLICY_NAME = "pbt_global.txt"


def policy_file_name(trial_id: str) -> str:
    """The name of a trial's policy file, as Ray names it."""
    return f"pbt_policy_{trial_id}.txt"


def _read(ctx: StorageContext, path: str) -> bytes:
    try:
        return read_bytes(ctx, path, what="reading the PBT policy log")
    except FileNotFoundError:
        return b""


def log_pbt_exploit(ctx: StorageContext, experiment_dir: str, trial_id: str, source_id: str, line: str) -> None:
    """Record one exploit of ``source_id`` by ``trial_id``; ``line`` is the JSON row, without a newline."""
    row = (line + "\n").encode("utf-8")
    glob = posixpath.join(experiment_dir, GLOBAL_POLICY_NAME)
    write_bytes(ctx, glob, _read(ctx, glob) + row, what="writing the PBT policy log")
    own = posixpath.join(experiment_dir, policy_file_name(trial_id))
    source = posixpath.join(experiment_dir, policy_file_name(source_id))
    # as Ray: the source's file replaces the trial's when there is one, else the trial's own grows
    inherited = _read(ctx, source) if exists(ctx, source) else _read(ctx, own)
    write_bytes(ctx, own, inherited + row, what="writing the PBT policy log")


__all__ = ["GLOBAL_POLICY_NAME", "log_pbt_exploit", "policy_file_name"]
