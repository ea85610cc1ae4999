"""Population Based Bandits (PB2): PBT whose explore step is Bayesian optimisation within bounds.

The population's scores at each perturbation point are kept as a history (trial, time, hyperparameters,
score); a trial in the bottom quantile clones a top trial as in PBT, and its new hyperparameters come from
a time-varying GP fitted to the reward changes (``_pb2_gp``), not from perturbing the source's. As Ray Tune
2.60's ``PB2``: same arguments, same fill of missing hyperparameters (uniform within the bounds, from the
script's ``numpy.random``), same choices for the same history and numpy stream. Its own numpy stream is
``seed``'s (``numpy.random.RandomState(seed)``: after ``numpy.random.seed(seed)`` Ray's draws the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from actors._engine.flat import flatten as _flatten
from actors._engine.flat import unflatten as _unflatten
from actors._engine.trial import TrialSnapshot
from actors.schedulers._common import lookup
from actors.schedulers._pb2_gp import Row, explore
from actors.schedulers._pbt import PopulationBasedTraining


class BoundsFill:
    """Ray's PB2 ``on_trial_add``: each bounded hyperparameter a new config lacks is drawn uniformly within its
    bounds from numpy's global stream (the driver's, in the default generator), nested dicts key by key."""

    def __init__(self, bounds: dict[str, Any]) -> None:
        self.bounds = bounds

    def missing(self, config: dict[str, Any]) -> list[tuple[str, ...]]:
        """The paths it fills, in the order Ray's ``evaluated_params`` lists them (flattened as Ray flattens)."""
        filled: dict[str, Any] = {}
        for path in _missing(config, self.bounds, ()):
            node = filled
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = True
        return [tuple(key.split("/")) for key in _flatten(filled)]

    def __call__(self, config: dict[str, Any]) -> None:
        import numpy as np

        def fill(node: dict[str, Any], bounds: dict[str, Any]) -> None:
            for name, spec in bounds.items():
                if isinstance(spec, dict):
                    fill(node.setdefault(name, {}), spec)
                elif isinstance(spec, (list, tuple)) and name not in node:
                    low, high = spec
                    node[name] = np.random.uniform(low, high)

        fill(config, self.bounds)


def _missing(config: Any, bounds: dict[str, Any], at: tuple[str, ...]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, spec in bounds.items():
        if isinstance(spec, dict):
            inner = config.get(name) if isinstance(config, dict) else None
            out += _missing(inner if isinstance(inner, dict) else {}, spec, (*at, name))
        elif not (isinstance(config, dict) and name in config):
            out.append((*at, name))
    return out


class PB2(PopulationBasedTraining):
    """Ray Tune's ``PB2``: ``hyperparam_bounds`` maps each searched key to ``[low, high]`` (nested dicts
    allowed); the rest is PBT's (``seed`` and ``wait_for_checkpoint`` are audition's, see PBT)."""

    _leaves_results = True  # its on_trial_result never changes the result (SchedulerHost.watch_results)

    _STATE: ClassVar[tuple[str, ...]] = (*PopulationBasedTraining._STATE, "_rows", "_last_exploration_time",
                                         "_running", "_np_rng")

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        hyperparam_bounds: dict[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        *,
        seed: int | None = None,
        wait_for_checkpoint: bool = False,
    ) -> None:
        try:
            import numpy as np
            import scipy  # noqa: F401
            import sklearn  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"PB2 needs scikit-learn, scipy and numpy ({exc}): pip install 'audition[pb2]'") \
                from exc
        if not hyperparam_bounds:
            raise ValueError("PB2: `hyperparam_bounds` must be specified to use PB2 scheduler (e.g. "
                             "{'lr': [1e-4, 1e-1]}); Ray raises TuneError here")
        if not isinstance(hyperparam_bounds, dict):
            raise TypeError(f"PB2: hyperparam_bounds must be a dict of [low, high] pairs, got {hyperparam_bounds!r}")
        flat = _flatten(hyperparam_bounds)
        for key, value in flat.items():
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise ValueError(f"`hyperparam_bounds` values must either be a list or tuple of size 2, but got "
                                 f"{value} instead for the param '{key}'")
            low, high = value
            if low > high:
                raise ValueError(f"`hyperparam_bounds` values must be of the form [low, high] where low <= high, "
                                 f"but got {value} instead for param '{key}'.")
        super().__init__(time_attr=time_attr, metric=metric, mode=mode, perturbation_interval=perturbation_interval,
                         hyperparam_mutations=hyperparam_bounds, quantile_fraction=quantile_fraction,
                         resample_probability=0, custom_explore_fn=custom_explore_fn, log_config=log_config,
                         require_attrs=require_attrs, synch=synch, seed=seed, wait_for_checkpoint=wait_for_checkpoint)
        self.hyperparam_bounds = hyperparam_bounds
        self._names = list(flat)
        self._bounds = [(v[0], v[1]) for v in flat.values()]
        self._rows: list[Row] = []
        self._last_exploration_time = 0.0
        self._running: Any = None  # the points chosen since the population's time last moved on (Ray's current)
        self._np_rng = np.random.RandomState(seed)

    def config_fill(self) -> BoundsFill:
        return BoundsFill(self.hyperparam_bounds)

    def _scored(self, trial: TrialSnapshot, result: dict[str, Any], score: float) -> None:
        flat = _flatten(dict(trial.config))
        missing = [name for name in self._names if name not in flat]
        if missing:  # (Ray: a bare KeyError) only another searcher than the default generator, which fills them
            raise ValueError(f"PB2: trial {trial.trial_id}'s config has no {', '.join(map(repr, missing))}, "
                             "which hyperparam_bounds names: give them in the param_space, or have the searcher "
                             "suggest them")
        values = tuple(flat[name] for name in self._names)
        # as reported (PBT checked it is a number): an int time sorts as an int column, as in Ray's frame
        t = lookup(result, self.time_attr, "PB2")
        self._rows.append((str(trial), t, values, score))

    def _new_config(self, trial: TrialSnapshot, source: TrialSnapshot, source_config: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        # (the row explore() adds is at the source's time, so the latest time is the same after it)
        latest = max((r[1] for r in self._rows), default=float("nan"))
        moved_on = latest > self._last_exploration_time
        new_flat, self._rows = explore(self._rows, self._names, self._bounds, None if moved_on else self._running,
                                       str(source), str(trial), _flatten(source_config), self._np_rng)
        new = np.array([new_flat[k] for k in self._names]).reshape(1, len(self._names))
        if moved_on:
            self._last_exploration_time, self._running = latest, new
        else:
            self._running = np.concatenate((self._running, new), axis=0)
        config = _unflatten(new_flat)
        if self.custom_explore_fn is not None:
            config = self.custom_explore_fn(config)
            if config is None:
                raise ValueError("PB2: custom_explore_fn returned None; it must return the new config")
        return config

    def debug_string(self) -> str:
        return f"PB2: {len(self._members)} trials, {len(self._exploits)} exploits, {len(self._rows)} observations"


__all__ = ["PB2"]
