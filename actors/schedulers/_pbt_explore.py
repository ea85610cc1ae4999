"""PBT's explore step: perturb a config copied from a better trial.

``hyperparam_mutations`` maps config keys to how they may change:

* a list/tuple of values (or a search ``choice`` domain): move to a
  neighbouring value, or with ``resample_probability`` pick any value;
* a search domain, i.e. any object with a ``sample(rng: random.Random)``
  method (``actors.search`` domains qualify): numbers are multiplied by a
  random ``perturbation_factor`` (ints are rounded; the result is clipped to the
  domain's ``low``/``high`` or ``lower``/``upper`` when it has them), or with
  ``resample_probability`` drawn afresh from the domain;
* a zero-argument callable (or a ``sample_from`` domain): like a domain, with
  the function's return value as the fresh draw (it does not see the seeded
  RNG, so prefer lists or domains when runs must be reproducible);
* a dict: the same rules applied inside the nested config dict.

Keys missing from the config are drawn afresh.  All randomness comes from the
``random.Random`` passed in, so a seeded scheduler explores reproducibly.
``ConfigFill`` (a trial's first values of the keys its config lacks) draws from the
global streams instead, as Ray does: the default generator sets them to the driver's.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from numbers import Real
from typing import Any

_MISSING = object()

ExploreFn = Callable[[dict[str, Any]], dict[str, Any]]


def _categories(spec: Any) -> Sequence[Any] | None:
    """The value list of a list spec or a categorical domain, else None."""
    if isinstance(spec, list | tuple):
        return spec
    cats = getattr(spec, "categories", None)
    if isinstance(cats, list | tuple) and callable(getattr(spec, "sample", None)):
        return cats
    return None


def validate_mutations(mutations: Any, owner: str, path: str = "hyperparam_mutations") -> None:
    """Raise a clear error for a mutation spec explore() could not apply."""
    if not isinstance(mutations, dict):
        raise TypeError(
            f"{owner}: {path} must be a dict of config key -> mutation, got {type(mutations).__name__}"
        )
    for key, spec in mutations.items():
        where = f"{path}[{key!r}]"
        if isinstance(spec, dict):
            validate_mutations(spec, owner, where)
            continue
        cats = _categories(spec)
        if cats is not None:
            if len(cats) == 0:
                raise ValueError(f"{owner}: {where} is an empty list; give at least one value")
            continue
        if callable(getattr(spec, "sample", None)) or callable(spec):
            continue
        raise TypeError(
            f"{owner}: {where} must be a list of values, a search domain (e.g. tune.uniform(0, 1)), "
            f"a zero-argument function or a nested dict, got {type(spec).__name__} {spec!r}"
        )


def _draw(spec: Any, rng: random.Random) -> Any:
    if callable(getattr(spec, "fn", None)) and callable(getattr(spec, "call", None)):
        return spec.call(None)  # a sample_from() domain: its function is the fresh draw
    sample = getattr(spec, "sample", None)
    if callable(sample):
        return sample(rng)
    return spec()


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _clip(spec: Any, value: float) -> float:
    for lo_name, hi_name in (("low", "high"), ("lower", "upper")):
        lo, hi = getattr(spec, lo_name, None), getattr(spec, hi_name, None)
        if lo is not None and hi is not None and _is_number(lo) and _is_number(hi):
            return min(max(value, float(lo)), float(hi))
    return value


def _mutate(
    config: dict[str, Any],
    mutations: dict[str, Any],
    rng: random.Random,
    resample_probability: float,
    factors: Sequence[float],
    owner: str,
    path: str,
    clip: bool = True,
) -> None:
    for key, spec in mutations.items():
        current = config.get(key, _MISSING)
        if isinstance(spec, dict):
            if current is _MISSING:
                config[key] = current = {}
            if not isinstance(current, dict):
                raise TypeError(
                    f"{owner}: config{path}[{key!r}] is {current!r}, but hyperparam_mutations gives a nested "
                    "dict for it; make the config value a dict or the mutation a list/domain"
                )
            _mutate(current, spec, rng, resample_probability, factors, owner, f"{path}[{key!r}]", clip)
            continue
        cats = _categories(spec)
        if cats is not None:
            # Ray Tune's order of draws (random() first), so a seeded run explores as Ray's does
            if current is _MISSING or rng.random() < resample_probability or current not in cats:
                config[key] = cats[rng.randrange(len(cats))]
            else:
                i = list(cats).index(current) + rng.choice((-1, 1))
                config[key] = cats[min(max(i, 0), len(cats) - 1)]
            continue
        if current is _MISSING or not _is_number(current) or rng.random() < resample_probability:
            config[key] = _draw(spec, rng)
            continue
        value = current * rng.choice(factors)
        value = _clip(spec, value) if clip else value
        config[key] = round(value) if isinstance(current, int) else float(value)


def explore(
    config: dict[str, Any],
    mutations: dict[str, Any] | None,
    rng: random.Random,
    resample_probability: float,
    perturbation_factors: Sequence[float],
    custom_explore_fn: ExploreFn | None = None,
    owner: str = "PopulationBasedTraining",
    clip: bool = True,
) -> dict[str, Any]:
    """A perturbed deep copy of ``config`` (the input is never modified)."""
    new = copy.deepcopy(config)
    if mutations:
        _mutate(new, mutations, rng, resample_probability, perturbation_factors, owner, "", clip)
    if custom_explore_fn is not None:
        out = custom_explore_fn(new)
        if not isinstance(out, dict):
            raise TypeError(
                f"{owner}: custom_explore_fn must return the new config dict, got {type(out).__name__}"
            )
        new = out
    return new


class ConfigFill:
    """Ray's PBT ``on_trial_add``: a mutated top-level key a new trial's config lacks gets a first value.

    Called by the default generator for each trial it creates, right after the trial's own draws and in
    the controller's process, with Python's and numpy's global streams set to the driver's (Ray fills in
    the driver, from those streams): a list picks with ``random.choice``, a search domain draws with its
    ``sample()`` (numpy's global stream, as Ray's ``Domain.sample(None)``), a function is called, and a
    dict is filled whole, key by key.
    """

    def __init__(self, mutations: dict[str, Any]) -> None:
        self.mutations = mutations

    def missing(self, config: dict[str, Any]) -> list[tuple[str, ...]]:
        """What a config with these keys gets filled, as the paths its ``evaluated_params`` name (Ray's order)."""
        return [(k,) for k in self.mutations if k not in config]

    def __call__(self, config: dict[str, Any]) -> None:
        for (key,) in self.missing(config):
            _fill(config, key, self.mutations[key])


def _fill(config: dict[str, Any], key: str, spec: Any) -> None:
    if isinstance(spec, dict):
        config[key] = {}
        for k, v in spec.items():
            _fill(config[key], k, v)
    elif isinstance(spec, (list, tuple)):
        config[key] = random.choice(spec)  # (the global stream, set to the driver's: Ray draws from it)
    elif callable(getattr(spec, "sample", None)):
        config[key] = spec.sample(None)
    elif callable(spec):
        config[key] = spec()


__all__ = ["ConfigFill", "ExploreFn", "explore", "validate_mutations"]
