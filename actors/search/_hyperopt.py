"""HyperOpt-backed searcher (Tree-structured Parzen Estimators), an optional extra.

HyperOpt is imported only when a :class:`HyperOptSearch` is built. It drives HyperOpt as Ray Tune 2.60's
``HyperOptSearch`` does (one ``tpe.suggest`` per trial, seeded from a ``numpy`` ``RandomState``, the
experiment's space converted by ``_hyperopt_space``), so a script that passes the same seed gets the same
configurations as under Ray. Differences, on purpose: ``points_to_evaluate`` may give nested parameters
as nested dicts (Ray fails on them at its first TPE suggestion) and a bad argument is named in the error.
"""

from __future__ import annotations

import copy
import functools
import importlib
from typing import Any

from actors.search._hyperopt_space import convert_space, import_hyperopt, point_labels
from actors.search._searcher import (
    Searcher,
    Suggestion,
    ray_restore,
    ray_save,
)
from actors.search._space import has_domain, normalize, validate_param_space


def _identity(space: Any) -> Any:
    """HyperOpt's objective stand-in: the space itself (picklable, unlike a lambda)."""
    return space


def _no_space(why: str = "") -> RuntimeError:
    return RuntimeError(
        "HyperOptSearch has no search space: pass space= to HyperOptSearch, or a param_space with search domains "
        f"(uniform, choice, ...) to the Tuner{why}")


class HyperOptSearch(Searcher):
    """Searcher driven by HyperOpt's TPE, with Ray Tune's arguments and defaults.

    ``n_initial_points`` random configurations come first (after ``points_to_evaluate``, in the given order);
    ``gamma`` is TPE's quantile of good trials. A trial's last result's ``metric`` is its loss (negated for
    ``mode="max"``); a failed trial is told HyperOpt as an error, one ended without a result never counts.
    ``save()`` pickles HyperOpt's trials and the random state, so a restored searcher suggests what the
    original would have.
    """

    def __init__(
        self,
        space: dict[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        n_initial_points: int | None = 20,
        random_state_seed: int | None = None,
        gamma: float | None = 0.25,
    ) -> None:
        super().__init__(metric, mode)
        self._hpo = import_hyperopt()
        import numpy as np

        if space is not None and not isinstance(space, dict):
            raise TypeError(f"HyperOptSearch: space must be a dict of parameters, got {type(space).__name__}")
        if points_to_evaluate is not None and (not isinstance(points_to_evaluate, list | tuple)
                                               or not all(isinstance(p, dict) for p in points_to_evaluate)):
            raise ValueError("HyperOptSearch: points_to_evaluate must be a list of config dicts")
        if n_initial_points is not None and (isinstance(n_initial_points, bool) or not isinstance(n_initial_points, int)
                                             or n_initial_points < 0):
            raise ValueError(f"HyperOptSearch: n_initial_points must be an int >= 0 (or None: HyperOpt's 20), got "
                             f"{n_initial_points!r}")
        if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0 < gamma < 1):
            raise ValueError(f"HyperOptSearch: gamma must be a number between 0 and 1 (TPE's quantile of good "
                             f"trials), got {gamma!r}")
        if random_state_seed is not None and (isinstance(random_state_seed, bool)
                                              or not isinstance(random_state_seed, int)):
            raise TypeError(f"HyperOptSearch: random_state_seed must be an int or None, got {random_state_seed!r}")
        self._n_initial_points = n_initial_points
        self._gamma = gamma
        self._points = copy.deepcopy(list(points_to_evaluate or []))
        self._rstate = np.random.RandomState(random_state_seed)
        self._space: dict[str, Any] | None = None  # normalized: the order trial configs keep
        self._converted: dict[str, Any] | None = None
        self._trials: Any = None  # hyperopt.Trials
        self._domain: Any = None  # hyperopt.Domain
        self._unused_points = 0  # points_to_evaluate not suggested yet (hyperopt holds them last first)
        self._live: dict[str, int] = {}  # trial id -> HyperOpt's trial number
        if space:
            self._set_space(space)

    # ------------------------------------------------------------------ the space
    def _set_space(self, space: dict[str, Any]) -> None:
        validate_param_space(space)
        normalized = normalize(space)
        if not has_domain(normalized) and not self._holds_expression(normalized):
            raise _no_space(" (HyperOpt cannot search constants alone; run them without a searcher)")
        converted = convert_space(self._hpo, normalized)
        points = [point_labels(self._hpo, p, converted) for p in self._points]
        if points:  # HyperOpt takes its trials to calculate last first: reversed, they run in the given order
            fmin = importlib.import_module("hyperopt.fmin")  # (hyperopt.fmin is also the function's name)
            self._trials = fmin.generate_trials_to_calculate(list(reversed(points)))
            self._trials.refresh()
        else:
            self._trials = self._hpo.Trials()
        self._unused_points = len(points)
        try:
            domain = self._hpo.Domain(_identity, converted)
        except self._hpo.exceptions.DuplicateLabel as exc:
            raise ValueError(
                f"HyperOptSearch: two search domains are both labelled {str(exc)!r}: as in Ray Tune, a domain inside "
                "a choice's dict category is labelled by the choice's key and its own, so categories that share a key "
                "clash; give those keys different names (e.g. {'u1': ...} and {'u2': ...})") from None
        self._space, self._converted, self._domain = normalized, converted, domain
        self._adopt_properties(None, None, has_space=True)  # (a mode alone: Ray's "_metric")

    @staticmethod
    def convert_search_space(spec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        """Ray's: ``spec`` with its search domains as HyperOpt expressions labelled by path (constants kept);
        ``{}`` when it has no domain."""
        validate_param_space(spec)
        normalized = normalize(spec)
        if not has_domain(normalized):
            return {}
        converted: dict[str, Any] = convert_space(import_hyperopt(), normalized, prefix)
        return converted

    def _holds_expression(self, space: Any) -> bool:
        """Whether a space written in HyperOpt's own terms (``hp.uniform(...)``) has something to draw."""
        if isinstance(space, self._hpo.pyll.Apply):
            return True
        if isinstance(space, dict):
            return any(self._holds_expression(v) for v in space.values())
        return isinstance(space, list | tuple) and any(self._holds_expression(v) for v in space)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Take the experiment's space, metric and mode, as Ray's: ``False`` for a space when the searcher
        already has one (its own, or an earlier call's). With a space, TuneConfig's metric and mode win over
        the searcher's, as in Ray."""
        if not self._adopt_properties(metric, mode, has_space=self._domain is not None):
            return not config  # (the Tuner merges a constants-only param_space into each suggestion)
        self._set_space(config or {})
        return True

    # ------------------------------------------------------------------ suggest / complete
    def _algo(self) -> Any:
        algo = self._hpo.tpe.suggest
        if self._n_initial_points is not None:
            algo = functools.partial(algo, n_startup_jobs=self._n_initial_points)
        if self._gamma is not None:
            algo = functools.partial(algo, gamma=self._gamma)
        return algo

    def suggest(self, trial_id: str) -> Suggestion:
        hpo = self._hpo
        if self._domain is None:
            raise _no_space()
        self._check_metric_mode()
        if trial_id in self._live:
            raise ValueError(f"suggest(): trial_id {trial_id!r} is already live; every trial needs a fresh id")
        trials = self._trials
        point = self._unused_points > 0
        if point:
            self._unused_points -= 1
            doc = trials.trials[self._unused_points]
        else:
            ids = trials.new_trial_ids(1)
            trials.refresh()
            docs = self._algo()(ids, self._domain, trials, self._rstate.randint(2**31 - 1))
            trials.insert_trial_docs(docs)
            trials.refresh()
            doc = docs[0]
        self._live[trial_id] = doc["tid"]
        ctrl = hpo.base.Ctrl(trials, current_trial=doc)
        memo = self._domain.memo_from_config(hpo.base.spec_from_misc(doc["misc"]))
        hpo.utils.use_obj_for_literal_in_memo(self._domain.expr, ctrl, hpo.base.Ctrl, memo)
        try:
            value = hpo.pyll.rec_eval(self._domain.expr, memo=memo,
                                      print_node_on_error=self._domain.rec_eval_print_node_on_error)
        except (AssertionError, TypeError) as exc:
            if not point:
                raise
            raise ValueError(
                "HyperOptSearch: a point of points_to_evaluate lacks a searched parameter (HyperOpt needs a value for "
                f"each one the point's choices use); the point has {sorted(hpo.base.spec_from_misc(doc['misc']))}"
            ) from exc
        # HyperOpt's dicts, keys sorted, as Ray's searcher returns them: the Tuner merges them into the
        # param_space (ConstantsMerged), whose key order the trial's config then has, as in Ray
        return copy.deepcopy(value)

    def _doc(self, trial_id: str) -> dict[str, Any] | None:
        tid = self._live.get(trial_id)
        if tid is None:
            return None
        return next((t for t in self._trials.trials if t["tid"] == tid), None)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        doc = self._doc(trial_id)
        if doc is None:
            return
        base = self._hpo.base
        doc["refresh_time"] = self._hpo.utils.coarse_utcnow()
        if error:
            doc["state"] = base.JOB_STATE_ERROR
            doc["misc"]["error"] = ("TuneError", "the trial failed")
            self._trials.refresh()
        elif result:
            if self._metric not in result:
                raise RuntimeError(
                    f"HyperOptSearch: trial {trial_id}'s last result has no {self._metric!r} (its keys: "
                    f"{', '.join(sorted(map(str, result))[:12])}); report it from the trainable, or give the "
                    "searcher the metric it reports")
            sign = -1.0 if self._mode == "max" else 1.0  # HyperOpt minimizes
            doc["state"] = base.JOB_STATE_DONE
            doc["result"] = {"loss": sign * result[self._metric], "status": base.STATUS_OK}
            self._trials.refresh()
        del self._live[trial_id]

    # ------------------------------------------------------------------ state
    @ray_save
    def save(self) -> dict[str, Any]:
        """Snapshot as pickled bytes (HyperOpt's trials, the random state, the converted space)."""
        payload = {
            "space": self._space, "converted": self._converted, "trials": self._trials,
            "rstate": self._rstate.get_state(), "unused_points": self._unused_points, "live": dict(self._live),
            "points": self._points, "n_initial_points": self._n_initial_points, "gamma": self._gamma,
        }
        return self._pickled_state("HyperOptSearch", payload)

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        payload = self._unpickled_payload("HyperOptSearch", state)
        self._space, self._converted, self._trials = payload["space"], payload["converted"], payload["trials"]
        self._rstate.set_state(payload["rstate"])
        self._unused_points, self._live = payload["unused_points"], dict(payload["live"])
        self._points, self._n_initial_points, self._gamma = (payload["points"], payload["n_initial_points"],
                                                             payload["gamma"])
        self._domain = None if self._converted is None else self._hpo.Domain(_identity, self._converted)
