"""Weights & Biases for audition: Ray Tune 2.60's ``ray.air.integrations.wandb`` (``WandbLoggerCallback``,
``setup_wandb``).

As Ray's, the callback runs in the driver and gives each trial a logging process of its own (W&B keeps one run
per process), fed through a queue: ``wandb.init`` with the trial's id, name, group (the experiment's name
unless ``group=``), project and config, each result cleaned and split Ray's way (``done`` and
``should_checkpoint`` left out, the config's keys too unless ``log_config=True``, the trial's id, host, pid and
date into the run's config, values W&B cannot chart skipped) and logged at step ``training_iteration``, a
checkpoint uploaded as an artifact with ``upload_checkpoints=True``, ``wandb.finish()`` at the trial's end.
Recorded from Ray 2.60 with wandb 0.31 in offline mode: ``tests/test_integration_wandb.py``. wandb is imported
when the callback is built (``pip install 'audition[wandb]'``).
"""

from __future__ import annotations

import logging
import os
import pickle
import posixpath
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from numbers import Number
from typing import Any

from actors._driver.loggers import LoggerCallback
from actors.integration._gbdt import needs
from actors.integration._wandb_process import CHECKPOINT, END, RESULT
from actors.utils import flatten_dict

log = logging.getLogger("audition")

WANDB_ENV_VAR = "WANDB_API_KEY"
WANDB_PROJECT_ENV_VAR = "WANDB_PROJECT_NAME"
WANDB_GROUP_ENV_VAR = "WANDB_GROUP_NAME"
WANDB_MODE_ENV_VAR = "WANDB_MODE"
WANDB_SETUP_API_KEY_HOOK = "WANDB_SETUP_API_KEY_HOOK"
WANDB_POPULATE_RUN_LOCATION_HOOK = "WANDB_POPULATE_RUN_LOCATION_HOOK"
WANDB_PROCESS_RUN_INFO_HOOK = "WANDB_PROCESS_RUN_INFO_HOOK"
DEFAULT_SYNC_TIMEOUT = 1800  # Ray's upload timeout at the experiment's end, in seconds


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as exc:
        raise needs("wandb", __name__) from exc
    return wandb


def _load_hook(path: str) -> Any:
    """``module.attr`` as Ray's ``load_class`` reads an external hook's path."""
    import importlib

    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _is_allowed_type(obj: Any) -> bool:
    """What W&B charts: a number (or a one-element array of one), a W&B value, a list of images or videos."""
    import numpy as np
    from wandb.sdk.data_types.base_types.wb_value import WBValue
    from wandb.sdk.data_types.image import Image
    from wandb.sdk.data_types.video import Video

    if isinstance(obj, np.ndarray) and obj.size == 1:
        return isinstance(obj.item(), Number)
    if isinstance(obj, Sequence) and len(obj) > 0:
        return isinstance(obj[0], Image | Video | WBValue)
    return isinstance(obj, Number | WBValue)


def _clean_log(obj: Any, *, video_kwargs: dict[str, Any] | None = None,
               image_kwargs: dict[str, Any] | None = None) -> Any:
    """Ray's: arrays of 3, 4 and 5 dimensions as W&B images and videos, what W&B can serialise kept, the rest
    as its ``str`` (read back as an int or float where it is one)."""
    import numpy as np
    from wandb import Image, Video
    from wandb.util import json_dumps_safer

    video_kwargs, image_kwargs = video_kwargs or {}, image_kwargs or {}

    def again(v: Any) -> Any:
        return _clean_log(v, video_kwargs=video_kwargs, image_kwargs=image_kwargs)

    if isinstance(obj, dict):
        return {k: again(v) for k, v in obj.items()}
    if isinstance(obj, list | set):
        return [again(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(again(v) for v in obj)
    if isinstance(obj, np.ndarray) and obj.ndim == 3:
        return Image(obj, **image_kwargs)
    if isinstance(obj, np.ndarray) and obj.ndim == 4:
        return again([Image(v, **image_kwargs) for v in obj]) if obj.shape[0] > 1 else Image(obj[0], **image_kwargs)
    if isinstance(obj, np.ndarray) and obj.ndim == 5:
        return again([Video(v, **video_kwargs) for v in obj]) if obj.shape[0] > 1 else Video(obj[0], **video_kwargs)
    if _is_allowed_type(obj):
        return obj
    try:
        json_dumps_safer(obj)
        pickle.dumps(obj)
        return obj
    except Exception:
        fallback: Any = str(obj)
        for cast in (int, float):
            try:
                return cast(fallback)
            except ValueError:
                pass
        return fallback


def _get_wandb_project(project: str | None = None) -> str | None:
    if (not project and not os.environ.get(WANDB_PROJECT_ENV_VAR)
            and os.environ.get(WANDB_POPULATE_RUN_LOCATION_HOOK)):
        try:
            _load_hook(os.environ[WANDB_POPULATE_RUN_LOCATION_HOOK])()
        except Exception as exc:
            log.exception("Error executing %s to populate %s and %s: %s", WANDB_POPULATE_RUN_LOCATION_HOOK,
                          WANDB_PROJECT_ENV_VAR, WANDB_GROUP_ENV_VAR, exc)
    if not project and os.environ.get(WANDB_PROJECT_ENV_VAR):
        project = os.environ.get(WANDB_PROJECT_ENV_VAR)
    return project


def _set_api_key(api_key_file: str | None = None, api_key: str | None = None) -> None:
    """Ray's order: the arguments, ``WANDB_API_KEY``, an existing ``wandb login``, the external hook."""
    if os.environ.get(WANDB_MODE_ENV_VAR) in {"offline", "disabled"}:
        return
    if api_key_file:
        if api_key:
            raise ValueError("Both WandB `api_key_file` and `api_key` set.")
        with open(api_key_file) as fp:
            api_key = fp.readline().strip()
    if not api_key and not os.environ.get(WANDB_ENV_VAR):
        wandb = _import_wandb()
        try:
            wandb.ensure_configured()
            if wandb.api.api_key:
                return
        except AttributeError:
            pass
        if WANDB_SETUP_API_KEY_HOOK in os.environ:
            try:
                api_key = _load_hook(os.environ[WANDB_SETUP_API_KEY_HOOK])()
            except Exception as exc:
                log.exception("Error executing %s to setup API key: %s", WANDB_SETUP_API_KEY_HOOK, exc)
    if api_key:
        os.environ[WANDB_ENV_VAR] = api_key
    elif not os.environ.get(WANDB_ENV_VAR):
        raise ValueError(f"No WandB API key found. Either set the {WANDB_ENV_VAR} environment variable, pass "
                         "`api_key` or `api_key_file` to the `WandbLoggerCallback` class as arguments, or run "
                         "`wandb login` from the command line")


def _handle_result(result: dict[str, Any], exclude: set[str], to_config: set[str]) -> tuple[dict[str, Any],
                                                                                            dict[str, Any]]:
    """Ray's split of a result into what is logged and what updates the run's config."""
    config_update = dict(result.get("config", {}))
    logged = {}
    for k, v in flatten_dict(result, delimiter="/").items():
        if any(k.startswith(item + "/") or k == item for item in exclude):
            continue
        if any(k.startswith(item + "/") or k == item for item in to_config):
            config_update[k] = v
        elif _is_allowed_type(v):
            logged[k] = v
    config_update.pop("callbacks", None)
    return logged, config_update


def setup_wandb(config: dict[str, Any] | None = None, api_key: str | None = None, api_key_file: str | None = None,
                rank_zero_only: bool = True, **kwargs: Any) -> Any:
    """In a trainable: a W&B run for this trial (``wandb.init`` with the trial's id and name, the experiment's name
    as its group, ``resume=True``, the cleaned ``config``), returned to log with. As Ray's, it is not finished for
    you: call ``run.finish()`` when the trial is done, or the process's exit finishes it."""
    from actors._driver.errors import TuneError
    from actors._worker.session import get_context

    wandb = kwargs.pop("_wandb", None) or _import_wandb()
    try:  # (in a Tune trial; Ray Train's non-zero ranks, which rank_zero_only silences, do not exist here)
        context = get_context()
        defaults: dict[str, Any] = {"trial_id": context.get_trial_id(), "trial_name": context.get_trial_name(),
                                    "group": context.get_experiment_name()}
    except (RuntimeError, TuneError):
        defaults = {"trial_id": None, "trial_name": None, "group": None}
    init: dict[str, Any] = {k: kwargs.get(k) or v for k, v in defaults.items()}
    init.update(kwargs)
    trial_id, trial_name = init.pop("trial_id"), init.pop("trial_name")
    if api_key_file:
        api_key_file = os.path.expanduser(api_key_file)
    _set_api_key(api_key_file, api_key)
    project = _get_wandb_project(init.pop("project", None))
    group = init.pop("group", os.environ.get(WANDB_GROUP_ENV_VAR))
    init_kwargs = dict(id=trial_id, name=trial_name, resume=True, reinit=True, allow_val_change=True,
                       config=_clean_log(dict(config) if config else {}), project=project, group=group)
    init_kwargs.update(init)
    os.environ["WANDB_START_METHOD"] = "thread" if os.name == "nt" else "fork"
    run = wandb.init(**init_kwargs)
    if WANDB_PROCESS_RUN_INFO_HOOK in os.environ:
        try:
            _load_hook(os.environ[WANDB_PROCESS_RUN_INFO_HOOK])(run)
        except Exception as exc:
            log.exception("Error calling %s: %s", WANDB_PROCESS_RUN_INFO_HOOK, exc)
    return run


class WandbLoggerCallback(LoggerCallback):
    """Logs each trial to a W&B run from a process of its own (Ray's arguments: ``project``, ``group``,
    ``api_key_file``, ``api_key``, ``excludes``, ``log_config``, ``upload_checkpoints``, ``save_checkpoints``,
    ``upload_timeout``, ``video_kwargs``, ``image_kwargs``, and ``wandb.init``'s keyword arguments)."""

    _exclude_results = ["done", "should_checkpoint"]
    AUTO_CONFIG_KEYS = ["trial_id", "experiment_tag", "node_ip", "experiment_id", "hostname", "pid", "date"]

    def __init__(self, project: str | None = None, group: str | None = None, api_key_file: str | None = None,
                 api_key: str | None = None, excludes: list[str] | None = None, log_config: bool = False,
                 upload_checkpoints: bool = False, save_checkpoints: bool = False,
                 upload_timeout: int = DEFAULT_SYNC_TIMEOUT, video_kwargs: dict[str, Any] | None = None,
                 image_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        _import_wandb()
        if save_checkpoints:
            warnings.warn("`save_checkpoints` is deprecated. Use `upload_checkpoints` instead.", DeprecationWarning,
                          stacklevel=2)
            upload_checkpoints = save_checkpoints
        self.project, self.group = project, group
        self.api_key_path, self.api_key = api_key_file, api_key
        self.excludes = excludes or []
        self.log_config, self.upload_checkpoints = log_config, upload_checkpoints
        self._upload_timeout = upload_timeout
        self.video_kwargs, self.image_kwargs = video_kwargs or {}, image_kwargs or {}
        self.kwargs = kwargs
        self._processes: dict[str, subprocess.Popen[bytes]] = {}  # trial id -> its logging process, until reaped

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_processes"] = {}  # (the run's processes stay with the driver)
        return state

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self.api_key_file = os.path.expanduser(self.api_key_path) if self.api_key_path else None
        _set_api_key(self.api_key_file, self.api_key)
        self.project = _get_wandb_project(self.project)
        if not self.project:
            raise ValueError(f"Please pass the project name as argument or through the {WANDB_PROJECT_ENV_VAR} "
                             "environment variable.")
        if not self.group and os.environ.get(WANDB_GROUP_ENV_VAR):
            self.group = os.environ.get(WANDB_GROUP_ENV_VAR)

    def log_trial_start(self, trial: Any) -> None:
        config = dict(trial.config)
        config.pop("callbacks", None)
        exclude_results = [*self._exclude_results, *self.excludes]
        if not self.log_config:
            exclude_results.append("config")
        experiment = posixpath.basename(posixpath.dirname((trial.path or "").rstrip("/")))
        config = _clean_log(config)
        config = {k: v for k, v in config.items() if k not in self.excludes}
        init_kwargs = dict(id=trial.trial_id, name=str(trial), resume=False, reinit=True, allow_val_change=True,
                           group=self.group or experiment, project=self.project, config=config)
        init_kwargs.update(self.kwargs)
        self._start(trial, exclude_results, init_kwargs)

    def _start(self, trial: Any, exclude_results: list[str], init_kwargs: dict[str, Any]) -> None:
        if trial.trial_id in self._processes:  # a retried or resumed trial goes on in its run, as Ray's
            return
        logdir = trial.local_path
        if logdir is None:  # remote storage: W&B's files (and offline runs) in a local scratch directory
            logdir = tempfile.mkdtemp(prefix=f"audition-wandb-{trial.trial_id}-")
        process = subprocess.Popen([sys.executable, "-m", "actors.integration._wandb_process"], stdin=subprocess.PIPE,
                                   start_new_session=False)
        self._processes[trial.trial_id] = process
        self._send(trial.trial_id, (logdir, exclude_results, list(self.AUTO_CONFIG_KEYS), init_kwargs))

    def _send(self, trial_id: str, item: Any) -> None:
        from actors.integration._wandb_process import write_frame

        process = self._processes.get(trial_id)
        if process is None or process.stdin is None or process.stdin.closed:
            return
        try:
            write_frame(process.stdin, item)
        except (BrokenPipeError, OSError) as exc:
            log.warning("W&B logging for trial %s has stopped (%s); its results are no longer logged", trial_id, exc)

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._processes:
            self.log_trial_start(trial)
        cleaned = _clean_log(result, video_kwargs=self.video_kwargs, image_kwargs=self.image_kwargs)
        self._send(trial.trial_id, (RESULT, cleaned))

    def log_trial_save(self, trial: Any) -> None:
        checkpoint = getattr(trial, "checkpoint", None)
        if self.upload_checkpoints and checkpoint is not None and "://" not in checkpoint.path:
            self._send(trial.trial_id, (CHECKPOINT, checkpoint.path))  # (Ray: a local checkpoint only)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        self._end(trial.trial_id)
        self._reap(timeout=0)

    def _end(self, trial_id: str) -> None:
        process = self._processes.get(trial_id)
        if process is not None and process.stdin is not None and not process.stdin.closed:
            self._send(trial_id, (END, None))
            try:
                process.stdin.close()
            except OSError:
                pass

    def _reap(self, timeout: float, kill: bool = False) -> None:
        """Forget the logging processes that have finished (waiting up to ``timeout`` for them); ``kill`` the
        others."""
        import time

        deadline = time.monotonic() + timeout
        for trial_id, process in list(self._processes.items()):
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                if not kill:
                    continue
                log.warning("W&B logging for trial %s did not finish within %s s; stopped", trial_id, timeout)
                process.kill()
                process.wait(5)
            del self._processes[trial_id]

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        """Wait for the runs' ``wandb.finish`` (uploads included), up to ``upload_timeout``, as Ray's."""
        for trial_id in list(self._processes):  # (a trial the run ended without its end: its W&B run ends too)
            self._end(trial_id)
        self._reap(timeout=self._upload_timeout, kill=True)
        super().on_experiment_end(trials, **info)


__all__ = ["WandbLoggerCallback", "setup_wandb"]
