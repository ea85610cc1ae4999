"""The search algorithm an experiment runs, built from ``TuneConfig`` and ``param_space`` as Ray Tune builds it.

The default generator gets the space, ``num_samples``, the seed and ``max_concurrent_trials``; a searcher
of the user's is given the metric, mode and space (or, if it brought its own space, the constants beside
it), and is wrapped in a ``ConcurrencyLimiter`` for ``max_concurrent_trials``, as Ray's ``tune.run`` does.
"""

from __future__ import annotations

import logging
from typing import Any

from actors._driver.config import TuneConfig, public_spec, samples
from actors._driver.errors import ConfigError
from actors.search import BasicVariantGenerator, Searcher
from actors.search._searcher import innermost
from actors.search._wrappers import ConcurrencyLimiter, ConstantsMerged

log = logging.getLogger("audition")


def experiment_searcher(tc: TuneConfig, param_space: dict[str, Any] | None,
                        spec: dict[str, Any] | None = None) -> tuple[Any, int]:
    """The searcher and the number of trials it is asked for (``num_samples``, or the grid times it).
    ``spec``: Ray's public spec (``config.public_spec``), which a searcher's ``set_search_properties`` gets."""
    if tc.search_alg is None:
        # as Ray: max_concurrent_trials caps the default generator's live trials, so it creates a
        # trial only when one can run (a run stopped early has only the trials it started)
        searcher: Any = BasicVariantGenerator(max_concurrent=tc.max_concurrent_trials or 0,
                                              param_space=param_space or {}, num_samples=samples(tc),
                                              seed=tc.seed)
        num_samples = searcher.total_trials
    else:
        searcher = tc.search_alg
        if not isinstance(searcher, Searcher):
            raise ConfigError("TuneConfig(search_alg=...) must be an actors.search.Searcher")
        inner = _default_generator(searcher)
        if inner is not None and inner is not searcher and not inner._space_set:
            # it would take param_space through the wrapper but not num_samples, and draw 1 config; Ray 2.60
            # refuses it too (ConcurrencyLimiter: RuntimeError; Repeater: AttributeError at fit, recorded)
            raise ConfigError(
                f"TuneConfig(search_alg={type(searcher).__name__}(BasicVariantGenerator(...))): the wrappers "
                "(ConcurrencyLimiter, Repeater) work with a Searcher that suggests configs (OptunaSearch, your "
                "own), not the default generator; for it set TuneConfig(max_concurrent_trials=N) (or "
                "BasicVariantGenerator(max_concurrent=N)) and num_samples=N, which runs each grid_search point "
                "N times")
        if isinstance(searcher, BasicVariantGenerator):  # as in Ray: num_samples x the grid
            searcher.set_search_properties(tc.metric, tc.mode, param_space or {}, num_samples=samples(tc))
            num_samples = searcher.total_trials
        else:
            # as Ray's: the experiment's public spec too (Experiment.PUBLIC_KEYS, recorded from Ray 2.60)
            took_space = bool(set_search_properties(searcher, tc.metric, tc.mode, param_space or {},
                                                    **(spec if spec is not None else public_spec(tc, None))))
            if not took_space and param_space:
                if domain_paths(param_space):  # Ray refuses unresolved values here too
                    raise ConfigError(
                        f"{type(searcher).__name__} was built with its own search space or objective, so "
                        "Tuner(param_space=...) may hold only constants beside it (it has search domains "
                        f"at {', '.join('/'.join(map(str, p)) for p in domain_paths(param_space))}); define "
                        "the space in one place and give the searcher a metric/mode that agrees with "
                        "TuneConfig's")
                own = searcher.metric if isinstance(searcher.metric, list) else [searcher.metric]
                if tc.metric is not None and searcher.metric is not None and tc.metric not in own:
                    raise ConfigError(
                        f"TuneConfig(metric={tc.metric!r}) but {type(searcher).__name__} searches "
                        f"{searcher.metric!r}: give the searcher a metric/mode that agrees with TuneConfig's")
            if param_space:  # as Ray: each suggestion is merged into the param_space (its constants join it)
                searcher = ConstantsMerged(searcher, param_space)
            num_samples = samples(tc)
            if tc.max_concurrent_trials:
                searcher = concurrency_limited(searcher, tc.max_concurrent_trials)
    return searcher, num_samples


def set_search_properties(plugin: Any, *args: Any, **spec: Any) -> Any:
    """``plugin.set_search_properties(*args, **spec)`` for a searcher (metric, mode, config) or a scheduler
    (metric, mode), and its answer; one written before Ray added ``**spec`` is called without it, with a
    warning, as Ray's ``_set_search_properties_backwards_compatible`` does (its ``TypeError`` names the keyword)."""
    try:
        return plugin.set_search_properties(*args, **spec)
    except TypeError as exc:
        if not spec or "set_search_properties() got an unexpected keyword argument" not in str(exc):
            raise
        log.warning("%s.set_search_properties() takes no **spec, so it is called without the experiment's "
                    "num_samples, stop and time_budget_s (as Ray does); add **spec to its parameters to get them",
                    type(plugin).__name__)
        return plugin.set_search_properties(*args)


def concurrency_limited(searcher: Any, cap: int) -> Any:
    """Ray Tune's ``max_concurrent_trials`` for a searcher other than the default generator: the
    searcher wrapped in a ``ConcurrencyLimiter``, so it is asked for a new trial only while fewer than
    ``cap`` of its trials are live (PAUSED ones count), not merely while a slot is free."""
    inner = searcher
    while getattr(inner, "transparent", False):  # (ConstantsMerged: the Tuner's own wrapper)
        inner = inner.searcher
    if isinstance(inner, ConcurrencyLimiter):
        if inner.max_concurrent != cap:
            raise ConfigError(
                f"TuneConfig(max_concurrent_trials={cap}) but search_alg is already a ConcurrencyLimiter with "
                f"max_concurrent={inner.max_concurrent}: set max_concurrent_trials=None, or make them agree")
        log.warning("TuneConfig(max_concurrent_trials=%d): search_alg is already a ConcurrencyLimiter with "
                    "that limit, so max_concurrent_trials adds nothing", cap)
        return searcher
    wrapped = ConcurrencyLimiter(searcher, max_concurrent=cap)
    wrapped.transparent = True  # the Tuner's wrapper, not the user's: messages name the searcher inside
    return wrapped


def _default_generator(searcher: Any) -> BasicVariantGenerator | None:
    """The BasicVariantGenerator inside the searcher's wrappers, if that is what draws."""
    while not isinstance(searcher, BasicVariantGenerator) and hasattr(searcher, "searcher"):
        searcher = searcher.searcher
    return searcher if isinstance(searcher, BasicVariantGenerator) else None


def check_scheduler_takes_searcher(scheduler: Any, search_alg: Any) -> None:
    """Ray 2.60's ``PopulationBasedTraining.on_trial_add`` (PB2's too) refuses any search algorithm but the
    default generator (recorded: ``fit()`` raises ``ValueError``); refused here before anything runs, since
    PBT fills the mutated keys a config lacks only into the default generator's configs."""
    from actors.schedulers import PopulationBasedTraining

    if (isinstance(scheduler, PopulationBasedTraining) and search_alg is not None
            and not isinstance(search_alg, BasicVariantGenerator)):
        raise ConfigError(
            f"Search algorithms cannot be used with {type(scheduler).__name__} schedulers (as in Ray Tune). "
            f"Please remove TuneConfig(search_alg={type(search_alg).__name__}(...)): put the search space in "
            "param_space, and the scheduler explores from hyperparam_mutations")


def wire_global_draws(searcher: Any, scheduler: Any) -> None:
    """Ray's ASHA draws from numpy's global stream as each trial is added, between the generator's
    draws; the generator takes as many (``global_numpy_draws_on_add``) so its configs follow Ray's. Ray's
    PBT fills the mutated keys a config lacks there too (``Scheduler.config_fill``): the generator does."""
    generator = _default_generator(searcher)
    if generator is not None:
        generator.global_draws_per_trial = int(getattr(scheduler, "global_numpy_draws_on_add", 0))
        fill = getattr(scheduler, "config_fill", None)
        generator.fill_on_add = fill() if callable(fill) else None


def wire_trainable_kind(scheduler: Any, trainable: Any) -> None:
    """Tell a scheduler that asks for it (``saves_when_asked``, PBT's) whether the trainable makes a checkpoint
    when asked to save (a ``Trainable`` subclass) or only reports them (a function): Ray's PBT, waiting for a
    source's save, skips the exploit when that save resolves to no checkpoint."""
    import inspect

    from actors._driver.trainable import Trainable

    if trainable is not None and hasattr(scheduler, "saves_when_asked"):
        scheduler.saves_when_asked = inspect.isclass(trainable) and issubclass(trainable, Trainable)


def with_filled_keys(searched: Any, searcher: Any, param_space: dict[str, Any] | None) -> Any:
    """The tag paths with the keys the scheduler fills into every config: Ray adds them to a trial's
    ``evaluated_params`` (after the drawn ones), not to its ``experiment_tag``."""
    from actors._engine.trial import TagPaths

    generator = _default_generator(searcher)
    fill = None if generator is None else generator.fill_on_add
    missing = getattr(fill, "missing", None)
    keys = tuple(missing(param_space or {})) if callable(missing) else ()
    if searched is None or not keys:
        return searched
    if isinstance(searched, TagPaths):
        return TagPaths(searched.paths, searched.points, keys)
    return TagPaths(searched, (), keys)


def capture_driver_stream(searcher: Any) -> None:
    """At ``fit()``: the generator (or a searcher that draws from numpy's global stream, as ZOOpt's does)
    takes numpy's global state from the driver (``numpy.random.seed`` in the script), since it draws in the
    controller, which may be another process."""
    generator = _default_generator(searcher)
    if generator is not None:
        generator.capture_driver_stream()
        return
    inner = innermost(searcher)
    if callable(getattr(inner, "capture_driver_stream", None)):
        inner.capture_driver_stream()


def seed_driver_stream(searcher: Any, seed: int) -> None:
    """A simulation's stand-in for ``capture_driver_stream`` when the scheduler fills configs (PBT, PB2): the
    global streams its fills draw from, as seeded by ``seed``. (Not otherwise: carrying the streams costs a
    simulated run about 7%, in the state writes, and a seeded generator draws its own values without them.)"""
    generator = _default_generator(searcher)
    if generator is not None and generator.fill_on_add is not None:
        generator.seed_driver_stream(seed)


def hand_back_driver_stream(searcher: Any, saved: Any, *, streams: bool) -> None:
    """After a run the searcher object the script holds takes the run's final saved state, as Ray's, which
    ran in the driver (``search_alg.save(path)`` after ``fit()`` saves what the run learned; audition's
    wrappers pass it on to the script's searcher). After a new run (``streams``) numpy's and Python's
    global ``random`` streams go on from where the default generator's draws left them (it drew in the
    controller, from the streams taken at ``fit()``), so a second ``Tuner`` after one
    ``numpy.random.seed(n)`` draws new configs, as in Ray. ``saved``: the searcher's state in the
    experiment's final state (``restore.saved_searcher``), None if it saved none."""
    import random

    from actors.search._file_state import load_state
    from actors.search._numpy_draws import numpy_or_none
    from actors.search._searcher import inner_state

    if searcher is None or saved is None:
        return
    try:
        load_state(searcher, saved)
    except Exception:  # a searcher of the user's whose restore() fails: the run's results stand
        log.warning("%s.restore() failed on the run's final state; the searcher object in this script keeps "
                    "the state it had before fit()", type(searcher).__name__, exc_info=True)
    if not streams:
        return
    if _default_generator(searcher) is None:  # a searcher that drew from numpy's stream taken at fit(): it goes on
        handed = getattr(innermost(searcher), "driver_stream", None)
        np = numpy_or_none()
        state = handed() if callable(handed) else None
        if state is not None and np is not None:
            np.random.set_state(state)
        return
    drawn = inner_state(saved, "BasicVariantGenerator")
    if drawn is None:
        return
    np = numpy_or_none()
    if drawn.get("global") is not None and np is not None:
        np.random.set_state(drawn["global"])
    if drawn.get("py_global") is not None:
        version, internal, gauss = drawn["py_global"]
        random.setstate((version, tuple(internal), gauss))


def domain_paths(space: Any, path: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], ...]:
    """Where ``space`` has a search domain or a grid (what Ray's variant generator "resolves")."""
    from actors.search._domain import Domain

    if isinstance(space, Domain) or (isinstance(space, dict) and set(space) == {"grid_search"}):
        return (path,)
    if isinstance(space, dict):
        return tuple(p for k, v in space.items() for p in domain_paths(v, (*path, k)))
    if isinstance(space, (list, tuple)):
        return tuple(p for i, v in enumerate(space) for p in domain_paths(v, (*path, i)))
    return ()


def tagged_paths(space: Any) -> tuple[tuple[Any, ...], ...]:
    """The paths Ray 2.60's variant generator lists in a trial's ``experiment_tag`` and
    ``evaluated_params`` (recorded): its drawn domains in the space's order, then its grids sorted by
    path; never a ``sample_from`` (``Function``), whose value is in the config only."""
    from actors.search._domain import Function, GridSearch

    def at(path: tuple[Any, ...]) -> Any:
        value = space
        for part in path:
            value = value[part]
        return value

    drawn: list[tuple[Any, ...]] = []
    grids: list[tuple[Any, ...]] = []
    for path in domain_paths(space):
        value = at(path)
        if isinstance(value, Function):
            continue
        (grids if isinstance(value, (dict, GridSearch)) else drawn).append(path)
    return (*drawn, *sorted(grids, key=lambda p: tuple((0, x, "") if isinstance(x, int) else (1, 0, str(x))
                                                        for x in p)))


def tag_paths(searcher: Any, space: dict[str, Any]) -> Any:
    """What the default generator's trials are tagged by (``experiment_tag``): the space's domain
    paths, or with ``points_to_evaluate`` a ``TagPaths`` that leaves each point's own values out."""
    import math

    from actors._engine.trial import TagPaths
    from actors.search._points import apply_point
    from actors.search._space import find_grids, normalize

    paths = tagged_paths(space)
    points = getattr(searcher, "points_to_evaluate", None)
    if not points or not space:  # (a generator given its own space tags by the Tuner's, as before)
        return paths
    applied = [apply_point(normalize(space), p, i) for i, p in enumerate(points)]
    return TagPaths(paths, tuple((math.prod(len(g.values) for _, g in find_grids(a)), tagged_paths(a))
                                 for a in applied))


__all__ = [
    "capture_driver_stream", "check_scheduler_takes_searcher", "concurrency_limited", "domain_paths",
    "experiment_searcher", "hand_back_driver_stream", "seed_driver_stream", "set_search_properties", "tag_paths",
    "wire_global_draws", "with_filled_keys",
]
