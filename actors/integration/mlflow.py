"""MLflow for audition: Ray Tune 2.60's ``ray.air.integrations.mlflow`` (``MLflowLoggerCallback``, ``setup_mlflow``).

``MLflowLoggerCallback`` runs in the driver, as Ray's: one MLflow run per trial (named after it, tagged
``trial_name``), the trial's config as parameters, every result's numeric values as metrics at step
``timesteps_total`` or ``training_iteration``, the run ended FINISHED or FAILED. ``setup_mlflow(config)``,
called in a trainable, starts the trial's own active run and returns the ``mlflow`` module. The calls are
Ray's, so the runs, parameters, metric histories and tags are Ray's (recorded:
``tests/test_integration_mlflow.py``). mlflow is imported when one of them is used (``pip install
'audition[mlflow]'``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from actors._driver.loggers import LoggerCallback
from actors.integration._gbdt import needs
from actors.utils import flatten_dict

log = logging.getLogger("audition")


def _import_mlflow() -> Any:
    try:
        import mlflow
    except ImportError as exc:
        raise needs("mlflow", __name__) from exc
    return mlflow


class _MLflowLoggerUtil:
    """The MLflow calls Ray's integration makes (its ``_MLflowLoggerUtil``), shared by the callback and
    ``setup_mlflow``."""

    def __init__(self) -> None:
        self._mlflow = _import_mlflow()
        self.experiment_id: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"experiment_id": self.experiment_id}  # (the module is imported again where it is unpickled)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._mlflow = _import_mlflow()
        self.experiment_id = state["experiment_id"]

    def setup_mlflow(self, tracking_uri: str | None = None, registry_uri: str | None = None,
                     experiment_id: str | None = None, experiment_name: str | None = None,
                     tracking_token: str | None = None, artifact_location: str | None = None,
                     create_experiment_if_not_exists: bool = True) -> None:
        """The tracking and registry URIs, and the experiment: by id (or ``MLFLOW_EXPERIMENT_ID``) if it exists,
        else by name (or ``MLFLOW_EXPERIMENT_NAME``), created if allowed; else Ray's ``ValueError``."""
        if tracking_token:
            os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
        self._mlflow.set_tracking_uri(tracking_uri)
        self._mlflow.set_registry_uri(registry_uri)
        experiment_id = experiment_id if experiment_id is not None else os.environ.get("MLFLOW_EXPERIMENT_ID")
        if experiment_id is not None:
            from mlflow.exceptions import MlflowException

            try:
                self._mlflow.get_experiment(experiment_id=experiment_id)
                self.experiment_id = experiment_id
                return
            except MlflowException:
                pass
        experiment_name = experiment_name if experiment_name is not None else os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if experiment_name is not None:
            existing = self._mlflow.get_experiment_by_name(name=experiment_name)
            if existing:
                self.experiment_id = existing.experiment_id
                return
        if experiment_name and create_experiment_if_not_exists:
            self.experiment_id = self._mlflow.create_experiment(name=experiment_name,
                                                                artifact_location=artifact_location)
            return
        if create_experiment_if_not_exists:
            raise ValueError(f"Experiment with the provided experiment_id: {experiment_id} does not exist and no "
                             "experiment_name provided. At least one of these has to be provided.")
        raise ValueError(f"Experiment with the provided experiment_id: {experiment_id} or experiment_name: "
                         f"{experiment_name} does not exist. Please create an MLflow experiment and provide either "
                         "its id or name.")

    @staticmethod
    def _as_floats(values: dict[str, Any]) -> dict[str, float]:
        """MLflow's metrics are floats: each value ``float()`` takes, the others left out (as Ray's)."""
        out = {}
        for key, value in values.items():
            try:
                out[key] = float(value)
            except (ValueError, TypeError):
                continue
        return out

    def start_run(self, run_name: str | None = None, tags: dict[str, Any] | None = None,
                  set_active: bool = False) -> Any:
        tags = {} if tags is None else tags
        if set_active:
            active = self._mlflow.active_run()
            if active:
                return active
            return self._mlflow.start_run(run_name=run_name, experiment_id=self.experiment_id, tags=tags)
        return self._client().create_run(run_name=run_name, experiment_id=self.experiment_id, tags=tags)

    def _run_exists(self, run_id: str) -> bool:
        from mlflow.exceptions import MlflowException

        try:
            self._mlflow.get_run(run_id=run_id)
            return True
        except MlflowException:
            return False

    def _client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self._mlflow.get_tracking_uri(), registry_uri=self._mlflow.get_registry_uri())

    def log_params(self, params_to_log: dict[str, Any], run_id: str | None = None) -> None:
        params = flatten_dict(params_to_log)
        if run_id and self._run_exists(run_id):
            client = self._client()
            for key, value in params.items():
                client.log_param(run_id=run_id, key=key, value=value)
        else:
            for key, value in params.items():
                self._mlflow.log_param(key=key, value=value)

    def log_metrics(self, step: int, metrics_to_log: dict[str, Any], run_id: str | None = None) -> None:
        metrics = self._as_floats(flatten_dict(metrics_to_log))
        if run_id and self._run_exists(run_id):
            client = self._client()
            for key, value in metrics.items():
                client.log_metric(run_id=run_id, key=key, value=value, step=step)
        else:
            for key, value in metrics.items():
                self._mlflow.log_metric(key=key, value=value, step=step)

    def save_artifacts(self, dir: str, run_id: str | None = None) -> None:
        if run_id and self._run_exists(run_id):
            self._client().log_artifacts(run_id=run_id, local_dir=dir)
        else:
            self._mlflow.log_artifacts(local_dir=dir)

    def end_run(self, status: str | None = None, run_id: str | None = None) -> None:
        active = self._mlflow.active_run()
        if run_id and self._run_exists(run_id) and not (active and active.info.run_id == run_id):
            self._client().set_terminated(run_id=run_id, status=status)
        else:
            self._mlflow.end_run(status=status)


class _NoopModule:
    """What ``setup_mlflow`` returns where it must not log (Ray's): every attribute and call does nothing."""

    def __getattr__(self, item: str) -> Any:
        return _NoopModule()

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


def setup_mlflow(config: dict[str, Any] | None = None, tracking_uri: str | None = None,
                 registry_uri: str | None = None, experiment_id: str | None = None,
                 experiment_name: str | None = None, tracking_token: str | None = None,
                 artifact_location: str | None = None, run_name: str | None = None,
                 create_experiment_if_not_exists: bool = False, tags: dict[str, Any] | None = None,
                 rank_zero_only: bool = True) -> Any:
    """In a trainable: an active MLflow run for this trial, its ``config`` logged as parameters; returns the
    ``mlflow`` module to log with. As Ray's: the experiment id and name default to the trial's id and name,
    the run is named after the experiment unless ``run_name`` is given, and it is not ended for you."""
    from actors._driver.errors import TuneError
    from actors._worker.session import get_context

    _import_mlflow()
    default_id: str | None
    default_name: str | None
    try:
        default_id, default_name = get_context().get_trial_id(), get_context().get_trial_name()
    except (RuntimeError, TuneError):  # outside a trial (Ray: outside a Tune session, or its RuntimeError)
        default_id = default_name = None
    util = _MLflowLoggerUtil()
    name = experiment_name or default_name
    util.setup_mlflow(tracking_uri=tracking_uri, registry_uri=registry_uri, experiment_id=experiment_id or default_id,
                      experiment_name=name, tracking_token=tracking_token, artifact_location=artifact_location,
                      create_experiment_if_not_exists=create_experiment_if_not_exists)
    util.start_run(run_name=run_name or name, tags=tags, set_active=True)
    util.log_params(dict(config) if config else {})
    return util._mlflow


class MLflowLoggerCallback(LoggerCallback):
    """Logs each trial to MLflow from the driver (Ray's arguments: ``tracking_uri``, ``registry_uri``,
    ``experiment_name``, ``tags``, ``tracking_token``, ``save_artifact``, ``log_params_on_trial_end``)."""

    def __init__(self, tracking_uri: str | None = None, *, registry_uri: str | None = None,
                 experiment_name: str | None = None, tags: dict[str, Any] | None = None,
                 tracking_token: str | None = None, save_artifact: bool = False,
                 log_params_on_trial_end: bool = False) -> None:
        self.tracking_uri, self.registry_uri, self.experiment_name = tracking_uri, registry_uri, experiment_name
        self.tags, self.tracking_token = tags, tracking_token
        self.should_save_artifact, self.log_params_on_trial_end = save_artifact, log_params_on_trial_end
        self.mlflow_util = _MLflowLoggerUtil()
        self._trial_runs: dict[str, str] = {}  # trial id -> its MLflow run's id

    def setup(self, *args: Any, **kwargs: Any) -> None:
        self.mlflow_util.setup_mlflow(tracking_uri=self.tracking_uri, registry_uri=self.registry_uri,
                                      experiment_name=self.experiment_name, tracking_token=self.tracking_token)
        if self.tags is None:
            self.tags = {}
        self._trial_runs = {}

    def log_trial_start(self, trial: Any) -> None:
        if trial.trial_id not in self._trial_runs:  # a retried or resumed trial goes on in its run
            tags = dict(self.tags or {})
            tags["trial_name"] = str(trial)
            run = self.mlflow_util.start_run(tags=tags, run_name=str(trial))
            self._trial_runs[trial.trial_id] = run.info.run_id
        if not self.log_params_on_trial_end:
            self.mlflow_util.log_params(run_id=self._trial_runs[trial.trial_id], params_to_log=dict(trial.config))

    def log_trial_result(self, iteration: int, trial: Any, result: dict[str, Any]) -> None:
        step = result.get("timesteps_total") or result["training_iteration"]
        self.mlflow_util.log_metrics(run_id=self._trial_runs[trial.trial_id], metrics_to_log=result, step=step)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        run_id = self._trial_runs[trial.trial_id]
        if self.should_save_artifact:
            if trial.local_path is not None:
                self.mlflow_util.save_artifacts(run_id=run_id, dir=trial.local_path)
            else:  # (Ray uploads its driver's staging copy; audition's trial files are only in remote storage)
                log.warning("MLflowLoggerCallback(save_artifact=True): trial %s's directory is in remote storage, "
                            "so its files are not saved to MLflow", trial)
        if self.log_params_on_trial_end:
            self.mlflow_util.log_params(run_id=run_id, params_to_log=dict(trial.config))
        self.mlflow_util.end_run(run_id=run_id, status="FAILED" if failed else "FINISHED")


__all__ = ["MLflowLoggerCallback", "setup_mlflow"]
