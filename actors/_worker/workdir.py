"""Each trial runs in a directory of its own, as in Ray Tune.

Ray Tune changes a trial process's working directory to the trial's own directory, so that trials on
one machine writing the same relative path (``torch.save(model, "model.pt")``, a TensorBoard writer's
``./runs``) do not overwrite each other or litter the directory the driver was started in; setting
``RAY_CHDIR_TO_TRIAL_DIR=0`` turns that off, and ``TUNE_ORIG_WORKING_DIR`` names the directory it left
(recorded from Ray 2.60: ``os.getcwd()`` in a trial is a per-trial directory, the driver's directory
stays clean). Only a trial in its own process can move: with ``system="simple"`` trials are threads of
the driver's process, whose directory is left alone.
"""

from __future__ import annotations

import os
import posixpath
import sys
import tempfile

CHDIR_VARIABLE = "RAY_CHDIR_TO_TRIAL_DIR"


def local_trial_dir(trial_dir: str, storage_is_local: bool, experiment_name: str) -> str:
    """A local directory of the trial's own: its directory in the experiment on local storage; with
    remote storage (Ray's case too) a scratch directory on this machine, which is not uploaded."""
    path = trial_dir if storage_is_local else os.path.join(
        tempfile.gettempdir(), "audition", experiment_name, posixpath.basename(trial_dir))
    os.makedirs(path, exist_ok=True)
    return str(path)


def chdir_wanted() -> bool:
    value = os.environ.get(CHDIR_VARIABLE, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"{CHDIR_VARIABLE}={value!r}: use 1 (each trial runs in its own directory, the default) "
                         "or 0 (trials run in the directory the experiment was started in)")
    return value == "1"


def enter_trial_dir(path: str) -> None:
    """Move this trial process into ``path``. The driver's directory stays importable: a ``''`` entry
    of ``sys.path`` (``python -c``, an interactive session) would otherwise now mean the trial's."""
    orig = os.environ.setdefault("TUNE_ORIG_WORKING_DIR", os.getcwd())
    sys.path[:] = [orig if p in ("", ".") else p for p in sys.path]
    os.chdir(path)


__all__ = ["CHDIR_VARIABLE", "chdir_wanted", "enter_trial_dir", "local_trial_dir"]
