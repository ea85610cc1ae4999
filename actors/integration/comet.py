"""Comet for audition: Ray Tune 2.60's ``ray.air.integrations.comet.CometLoggerCallback``.

As Ray's, the callback runs in the driver with one Comet experiment per trial (``OfflineExperiment`` with
``online=False``): named after the trial, tagged, its config as parameters; each result's values as metrics at
step ``training_iteration``, except ``done`` and ``should_checkpoint`` (left out), the trial's id as an "other",
its host, pid and date as system information, RLlib's episode histograms as curves, and the result's config as
parameters at that step; a checkpoint as a ``model`` artifact with ``save_checkpoints=True``; the experiment
ended with the trial. Recorded from Ray 2.60 with comet_ml 3.58 offline: ``tests/test_integration_comet.py``.
comet_ml is imported when the callback is built (``pip install 'audition[comet]'``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from actors._driver.loggers import LoggerCallback
from actors.integration._gbdt import needs
from actors.utils import flatten_dict


def _import_comet() -> Any:
    if "COMET_DISABLE_AUTO_LOGGING" not in os.environ:
        os.environ["COMET_DISABLE_AUTO_LOGGING"] = "1"  # (Ray's: before comet_ml is imported)
    try:
        import comet_ml
    except ImportError as exc:
        raise needs("comet_ml", __name__, extra="comet") from exc
    return comet_ml


class CometLoggerCallback(LoggerCallback):
    """Logs each trial to a Comet experiment (Ray's arguments: ``online``, ``tags``, ``save_checkpoints``, and
    ``comet_ml.Experiment``'s keyword arguments)."""

    _exclude_autolog = ["auto_output_logging", "log_git_metadata", "log_git_patch", "log_env_cpu", "log_env_gpu"]
    _exclude_results = ["done", "should_checkpoint"]
    _system_results = ["node_ip", "hostname", "pid", "date"]
    _other_results = ["trial_id", "experiment_id", "experiment_tag"]
    _episode_results = ["hist_stats/episode_reward", "hist_stats/episode_lengths"]

    def __init__(self, online: bool = True, tags: list[str] | None = None, save_checkpoints: bool = False,
                 **experiment_kwargs: Any) -> None:
        _import_comet()
        self.online, self.tags, self.save_checkpoints = online, tags, save_checkpoints
        self.experiment_kwargs = experiment_kwargs
        for option in self._exclude_autolog:  # (Ray's: these throttle Comet unless asked for)
            if not self.experiment_kwargs.get(option):
                self.experiment_kwargs[option] = False
        self._trial_experiments: dict[str, Any] = {}  # trial id -> its Comet experiment
        self._to_exclude = list(self._exclude_results)
        self._to_system = list(self._system_results)
        self._to_other = list(self._other_results)
        self._to_episodes = list(self._episode_results)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_trial_experiments"] = {}  # (the experiments stay with the driver)
        return state

    @staticmethod
    def _check_key_name(key: str, item: str) -> bool:
        return key.startswith(item + "/") or key == item

    def log_trial_start(self, trial: Any) -> None:
        from comet_ml import Experiment, OfflineExperiment
        from comet_ml.config import set_global_experiment

        if trial.trial_id not in self._trial_experiments:
            experiment = (Experiment if self.online else OfflineExperiment)(**self.experiment_kwargs)
            self._trial_experiments[trial.trial_id] = experiment
            set_global_experiment(None)  # (several at once: none is the global one)
        else:
            experiment = self._trial_experiments[trial.trial_id]
        experiment.set_name(str(trial))
        experiment.add_tags(self.tags)  # type: ignore[arg-type]  # (None too, as Ray: Comet ignores it)
        experiment.log_other("Created from", "Ray")  # (Ray's value: a Comet view filters on it)
        config = dict(trial.config)
        config.pop("callbacks", None)
        experiment.log_parameters(config)

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._trial_experiments:
            self.log_trial_start(trial)
        experiment = self._trial_experiments[trial.trial_id]
        step = result["training_iteration"]
        config_update = dict(result.get("config") or {})
        config_update.pop("callbacks", None)
        for k, v in config_update.items():
            if isinstance(v, dict):
                experiment.log_parameters(flatten_dict({k: v}, "/"), step=step)
            else:
                experiment.log_parameter(k, v, step=step)
        other: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        system: dict[str, Any] = {}
        episodes: dict[str, Any] = {}
        flat = {k: v for k, v in flatten_dict(result, delimiter="/").items()
                if k != "config" and not k.startswith("config/")}
        for k, v in flat.items():
            if any(self._check_key_name(k, item) for item in self._to_exclude):
                continue
            if any(self._check_key_name(k, item) for item in self._to_other):
                other[k] = v
            elif any(self._check_key_name(k, item) for item in self._to_system):
                system[k] = v
            elif any(self._check_key_name(k, item) for item in self._to_episodes):
                episodes[k] = v
            else:
                metrics[k] = v
        experiment.log_others(other)
        experiment.log_metrics(metrics, step=step)
        for k, v in system.items():
            experiment.log_system_info(k, v)
        for k, v in episodes.items():
            experiment.log_curve(k, x=range(len(v)), y=v, step=step)

    def log_trial_save(self, trial: Any) -> None:
        comet_ml = _import_comet()
        checkpoint = getattr(trial, "checkpoint", None)
        if self.save_checkpoints and checkpoint is not None and trial.trial_id in self._trial_experiments:
            experiment = self._trial_experiments[trial.trial_id]
            artifact = comet_ml.Artifact(name=f"checkpoint_{trial}", artifact_type="model")
            if "://" not in checkpoint.path:  # (Ray: a local checkpoint's files only)
                root = checkpoint.path
                for here, _dirs, files in os.walk(root):
                    rel = os.path.relpath(here, root)
                    for file in files:
                        logical = Path(rel, file).as_posix()
                        artifact.add(Path(root, rel, file).as_posix(),
                                     logical_path=logical[2:] if logical.startswith("./") else logical)
            experiment.log_artifact(artifact)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        experiment = self._trial_experiments.pop(trial.trial_id, None)
        if experiment is not None:
            experiment.end()

    def on_experiment_end(self, trials: list[Any], **info: Any) -> None:
        """Ends the experiments of trials the run ended without their end (Ray's ``__del__`` does)."""
        for experiment in self._trial_experiments.values():
            experiment.end()
        self._trial_experiments = {}
        super().on_experiment_end(trials, **info)


__all__ = ["CometLoggerCallback"]
