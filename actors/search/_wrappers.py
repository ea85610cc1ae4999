"""Searchers that wrap another searcher: concurrency limits and repeated evaluation."""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

from actors.search._domain import Domain
from actors.search._file_state import load_state, state_of
from actors.search._searcher import Searcher, Suggestion, check_state, ray_restore, ray_save

log = logging.getLogger("audition")


def _check_searcher(owner: str, searcher: Any) -> Searcher:
    if not isinstance(searcher, Searcher):
        raise TypeError(f"{owner}: searcher must be a Searcher instance, got {type(searcher).__name__}")
    return searcher


def _check_positive(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}")
    return value


class _Wrapper(Searcher):
    """Forwards metric/mode and search properties to the wrapped searcher."""

    # True for a wrapper the Tuner added (not the user's): messages name the searcher inside it
    transparent = False

    def __init__(self, searcher: Searcher) -> None:
        super().__init__()
        self.searcher = searcher

    @property
    def metric(self) -> str | list[str] | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | list[str] | None:
        return self.searcher.mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)


class ConcurrencyLimiter(_Wrapper):
    """Caps live trials at ``max_concurrent``: :meth:`suggest` returns ``None`` while at the cap.

    With ``batch=True`` results are held back and given to the inner searcher all
    at once when every trial of the current batch has finished, and no new trial
    starts before that: useful for searchers that update in rounds.
    """

    _limit = True  # (the default for one pickled before the flag existed)

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        super().__init__(_check_searcher("ConcurrencyLimiter", searcher))
        self.max_concurrent = _check_positive("ConcurrencyLimiter", "max_concurrent", max_concurrent)
        self.batch = bool(batch)
        self._live: list[str] = []
        self._held: list[tuple[str, dict[str, Any] | None, bool]] = []
        # False when the inner searcher limits its own concurrency (set_max_concurrency said so): then
        # every call passes straight through, as in Ray Tune
        self._limit = not self.searcher.set_max_concurrency(self.max_concurrent)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = _check_positive("ConcurrencyLimiter", "max_concurrent", max_concurrent)
        self._limit = not self.searcher.set_max_concurrency(self.max_concurrent)
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        self._limit = not self.searcher.set_max_concurrency(self.max_concurrent)
        return super().set_search_properties(metric, mode, config, **spec)

    @property
    def live_trials(self) -> list[str]:
        """Trials counted against the limit (in batch mode, finished ones until the batch ends)."""
        return list(self._live)

    def suggest(self, trial_id: str) -> Suggestion:
        if not self._limit:
            return self.searcher.suggest(trial_id)
        if len(self._live) >= self.max_concurrent or self._held:
            return None
        if trial_id in self._live:
            raise ValueError(
                f"suggest(): trial_id {trial_id!r} is already live; every trial needs a fresh id"
            )
        suggestion = self.searcher.suggest(trial_id)
        if isinstance(suggestion, dict):
            self._live.append(trial_id)
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if not self._limit:
            self.searcher.on_trial_result(trial_id, result)
        elif trial_id in self._live and all(held[0] != trial_id for held in self._held):
            self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if not self._limit:
            self.searcher.on_trial_complete(trial_id, result, error)
            return
        if trial_id not in self._live:
            return
        if not self.batch:
            self._live.remove(trial_id)
            self.searcher.on_trial_complete(trial_id, result, error)
            return
        if all(held[0] != trial_id for held in self._held):
            self._held.append((trial_id, result, error))
        if len(self._held) == len(self._live):
            held, self._held, self._live = self._held, [], []
            for held_id, held_result, held_error in held:
                self.searcher.on_trial_complete(held_id, held_result, held_error)

    def add_evaluated_point(self, parameters: dict[str, Any], value: Any, error: bool = False, pruned: bool = False,
                            intermediate_values: list[float] | None = None) -> None:
        """Passed to the searcher inside, as Ray's ``ConcurrencyLimiter`` does (a ``Repeater`` does not)."""
        self.searcher.add_evaluated_point(parameters, value, error, pruned, intermediate_values)

    def on_pause(self, trial_id: str) -> None:
        """Passed to the searcher inside, as Ray's (HyperBandForBOHB tells TuneBOHB of its pauses)."""
        self.searcher.on_pause(trial_id)  # type: ignore[attr-defined]

    def on_unpause(self, trial_id: str) -> None:
        """Passed to the searcher inside, as Ray's."""
        self.searcher.on_unpause(trial_id)  # type: ignore[attr-defined]

    @ray_save
    def save(self) -> dict[str, Any]:
        return {
            "kind": "ConcurrencyLimiter",
            "searcher": state_of(self.searcher),
            "live": list(self._live),
            "held": copy.deepcopy(self._held),
        }

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        check_state("ConcurrencyLimiter", state, "ConcurrencyLimiter")
        load_state(self.searcher, state["searcher"])
        self._limit = not self.searcher.set_max_concurrency(self.max_concurrent)
        self._live = list(state["live"])
        self._held = copy.deepcopy(state["held"])


class Repeater(_Wrapper):
    """Runs every config the inner searcher suggests ``repeat`` times, to average out noise.

    The inner searcher sees one trial per group (the group's first trial id) and,
    once all ``repeat`` trials finished, one result: the mean of the group's
    ``metric`` over the trials that reported it (``error=True`` if none did).
    With ``set_index`` each config gets ``__trial_index__`` = its position in the group.
    """

    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True) -> None:
        super().__init__(_check_searcher("Repeater", searcher))
        self.repeat = _check_positive("Repeater", "repeat", repeat)
        self.set_index = bool(set_index)
        # group id (= its first trial id) -> {"config": ..., "members": {trial_id: index},
        # "scores": {trial_id: score}}
        self._groups: dict[str, dict[str, Any]] = {}
        self._trial_group: dict[str, str] = {}
        self._open: str | None = None

    def _config_for(self, group_id: str, trial_id: str) -> dict[str, Any]:
        group = self._groups[group_id]
        index = len(group["members"])
        group["members"][trial_id] = index
        self._trial_group[trial_id] = group_id
        self._open = group_id if index + 1 < self.repeat else None
        config: dict[str, Any] = copy.deepcopy(group["config"])
        if self.set_index:
            config["__trial_index__"] = index
        return config

    def suggest(self, trial_id: str) -> Suggestion:
        if trial_id in self._trial_group:
            raise ValueError(
                f"suggest(): trial_id {trial_id!r} was already used; every trial needs a fresh id"
            )
        if self._open is None:
            if self.metric is None:
                raise ValueError(
                    "Repeater needs a metric to average: pass metric= to the inner searcher or to TuneConfig"
                )
            suggestion = self.searcher.suggest(trial_id)
            if not isinstance(suggestion, dict):
                return suggestion
            self._groups[trial_id] = {"config": copy.deepcopy(suggestion), "members": {}, "scores": {}}
            self._open = trial_id
        return self._config_for(self._open, trial_id)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        group_id = self._trial_group.pop(trial_id, None)
        if group_id is None:
            return
        group = self._groups[group_id]
        metrics = self.metric if isinstance(self.metric, list) else [self.metric or ""]
        group["scores"][trial_id] = None if error or not result else [result.get(m) for m in metrics]
        if len(group["scores"]) < self.repeat:
            return
        del self._groups[group_id]
        means = {}
        for i, metric in enumerate(metrics):
            values = [float(s[i]) for s in group["scores"].values()
                      if s is not None and s[i] is not None and not math.isnan(float(s[i]))]
            if values:
                means[metric] = sum(values) / len(values)
        if self.metric is not None and len(means) == len(metrics):
            self.searcher.on_trial_complete(group_id, means)
        else:
            self.searcher.on_trial_complete(group_id, None, error=True)

    @ray_save
    def save(self) -> dict[str, Any]:
        return {
            "kind": "Repeater",
            "searcher": state_of(self.searcher),
            "groups": copy.deepcopy(self._groups),
            "trial_group": dict(self._trial_group),
            "open": self._open,
        }

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        check_state("Repeater", state, "Repeater")
        load_state(self.searcher, state["searcher"])
        self._groups = copy.deepcopy(state["groups"])
        self._trial_group = dict(state["trial_group"])
        self._open = state["open"]


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` updated with ``over``, nested dicts merged key by key (Ray's ``merge_dicts``).

    A searcher that names its parameters by flat paths (``"w/0"``) suggests ``{"w": {"0": ...}}`` for a
    param_space key ``0``: such a string key goes to ``base``'s key of the same text, so the trainable reads
    the value under the key it gave (Ray 2.60's path-naming searchers raise ``TypeError`` on an int key)."""
    out = copy.deepcopy(base)
    aliases = {str(k): k for k in out if not isinstance(k, str)}
    for key, value in over.items():
        if aliases and isinstance(key, str) and key not in out:
            key = aliases.get(key, key)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _without_domains(config: dict[str, Any], path: tuple[str, ...], left: list[str]) -> dict[str, Any]:
    """``config`` without the search domains still in it (their paths go to ``left``)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Domain):
            left.append("/".join((*path, str(key))))
        else:
            out[key] = _without_domains(value, (*path, str(key)), left) if isinstance(value, dict) else value
    return out


class ConstantsMerged(_Wrapper):
    """Each suggestion merged into the ``Tuner(param_space=...)``, as Ray Tune's ``SearchGenerator`` merges it.

    The Tuner wraps every searcher but the default generator in this. Ray keeps the param_space's keys in
    their order and their constants, and the searcher's values win: a searcher of the user's that returns
    only the values it searched gets the constants beside them, and one with its own space (``OptunaSearch
    (space=...)``) runs beside a constants-only param_space. A search domain the searcher gave no value
    for is left out of the config, with a warning (Ray hands the trainable the domain object itself).
    """

    transparent = True  # the Tuner's wrapper, not the user's: messages name the searcher inside

    def __init__(self, searcher: Searcher, constants: dict[str, Any]) -> None:
        super().__init__(_check_searcher("ConstantsMerged", searcher))
        self.constants = copy.deepcopy(constants)
        self._warned: set[str] = set()

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """The searcher inside answers (a ``ConcurrencyLimiter`` outside then leaves the limit to it, as Ray's)."""
        return self.searcher.set_max_concurrency(max_concurrent)

    def on_pause(self, trial_id: str) -> None:
        """Passed to the searcher inside (HyperBandForBOHB tells TuneBOHB of its pauses)."""
        self.searcher.on_pause(trial_id)  # type: ignore[attr-defined]

    def on_unpause(self, trial_id: str) -> None:
        self.searcher.on_unpause(trial_id)  # type: ignore[attr-defined]

    def suggest(self, trial_id: str) -> Suggestion:
        suggestion = self.searcher.suggest(trial_id)
        if not isinstance(suggestion, dict):
            return suggestion
        left: list[str] = []
        config = _without_domains(_merged(self.constants, suggestion), (), left)
        new = [p for p in left if p not in self._warned]
        if new:
            self._warned.update(new)
            log.warning("%s suggested no value for %s, a search domain of the Tuner's param_space: the trial's "
                        "config leaves it out (Ray Tune hands the trainable the unresolved domain object); have "
                        "the searcher suggest it, or make it a constant", type(self.searcher).__name__,
                        ", ".join(repr(p) for p in new))
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self.searcher.on_trial_complete(trial_id, result, error)

    @ray_save
    def save(self) -> dict[str, Any]:
        return {"kind": "ConstantsMerged", "searcher": state_of(self.searcher),
                "constants": copy.deepcopy(self.constants)}

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        if isinstance(state, dict) and state.get("kind") != "ConstantsMerged":
            load_state(self.searcher, state)  # saved before the Tuner wrapped this searcher (2026-12-05)
            return
        check_state("ConstantsMerged", state, "ConstantsMerged")
        load_state(self.searcher, state["searcher"])
