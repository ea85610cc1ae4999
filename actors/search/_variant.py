"""Grid and random search: the default searcher.

Variant ``i`` is a pure function of (space, base seed, ``i``): its grid point
comes from ``i`` and its random draws from a generator seeded with the base seed
and ``i``.  So the state to save is just a counter, and a restored generator
produces exactly the variants the original would have produced next.
"""

from __future__ import annotations

import math
import random
from typing import Any

from actors.search._domain import SearchSpaceError
from actors.search._searcher import Searcher, Suggestion, check_state
from actors.search._space import Path, find_grids, normalize, resolve, validate_param_space

_KIND = "BasicVariantGenerator"


def _check_num_samples(num_samples: Any) -> int:
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise SearchSpaceError(
            f"num_samples must be an integer >= 1, got {num_samples!r}; "
            "it is how many times each grid point is run (use 1 for a plain grid search)"
        )
    return num_samples


def _check_seed(seed: Any) -> int:
    if seed is None:
        return random.SystemRandom().getrandbits(63)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__} {seed!r}")
    return seed


class BasicVariantGenerator(Searcher):
    """Cartesian product of every ``grid_search`` times ``num_samples``, random domains sampled afresh.

    Order follows Ray Tune: the whole grid is swept once per sample, and within a
    sweep the grid keys are taken in the order of their sorted paths (``("B",)``
    before ``("a",)`` before ``("a", "x")`` before ``("b",)``), the first one changing
    fastest, whatever order the space was written in.  ``max_concurrent``
    > 0 makes :meth:`suggest` return ``None`` while that many trials are live.
    """

    def __init__(
        self,
        param_space: dict[str, Any] | None = None,
        num_samples: int = 1,
        seed: int | None = None,
        max_concurrent: int = 0,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__(metric, mode)
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) or max_concurrent < 0:
            raise ValueError(
                f"max_concurrent must be an integer >= 0 (0 = unlimited), got {max_concurrent!r}"
            )
        self._max_concurrent = max_concurrent
        self._seed = _check_seed(seed)
        self._space_given = param_space is not None
        # False only for a state saved before grid keys were sorted: it resumes in written order
        self._sorted_grid = True
        self._set_space({} if param_space is None else param_space, _check_num_samples(num_samples))
        self._next = 0
        self._live: set[str] = set()

    def _set_space(self, param_space: dict[str, Any], num_samples: int) -> None:
        validate_param_space(param_space)
        self._space: dict[str, Any] = normalize(param_space)
        grids = find_grids(self._space)
        if self._sorted_grid:
            # Ray's BasicVariantGenerator sorts its grid variables by path (parse_spec_vars);
            # paths are unique and siblings share a key type (dict keys are str, list indices int)
            grids.sort(key=lambda item: item[0])
        self._grid_paths: list[Path] = [path for path, _ in grids]
        self._grid_values: list[tuple[Any, ...]] = [grid.values for _, grid in grids]
        self._num_samples = num_samples

    @property
    def grid_size(self) -> int:
        """Number of grid points (1 when the space has no grid_search)."""
        return math.prod(len(v) for v in self._grid_values)

    @property
    def total_trials(self) -> int:
        """How many configs :meth:`suggest` hands out before returning FINISHED."""
        return self.grid_size * self._num_samples

    @property
    def num_samples(self) -> int:
        return self._num_samples

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Adopt the experiment's param_space and ``num_samples=`` unless built with a space.

        Refuses (``False``) a second space, a change after suggestions started, or a
        metric/mode clash.
        """
        if config and (self._space_given or self._next):
            return False
        if not self._set_metric_mode(metric, mode):
            return False
        if not self._space_given and not self._next:
            # Ray Tune's BasicVariantGenerator() takes the space and num_samples from the Tuner
            # (TuneConfig(num_samples=10) with no grid: 10 trials), also when the space is empty
            num_samples = spec.get("num_samples", self._num_samples)
            self._set_space(config or {}, _check_num_samples(num_samples))
            self._space_given = bool(config)
        return True

    def variant(self, index: int) -> dict[str, Any]:
        """The config of variant ``index`` (0-based), independent of what was suggested so far."""
        if not 0 <= index < self.total_trials:
            raise IndexError(f"variant index {index} out of range; there are {self.total_trials} variants")
        point = index % self.grid_size
        grid: dict[Path, Any] = {}
        for path, values in zip(self._grid_paths, self._grid_values, strict=True):
            point, pick = divmod(point, len(values))
            grid[path] = values[pick]
        config: dict[str, Any] = resolve(self._space, grid, random.Random(f"audition:{self._seed}:{index}"))
        return config

    def suggest(self, trial_id: str) -> Suggestion:
        if self._next >= self.total_trials:
            return Searcher.FINISHED
        if trial_id in self._live:
            raise ValueError(
                f"suggest(): trial_id {trial_id!r} is already live; every trial needs a fresh id"
            )
        if self._max_concurrent and len(self._live) >= self._max_concurrent:
            return None
        config = self.variant(self._next)
        self._next += 1
        self._live.add(trial_id)
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self._live.discard(trial_id)

    @property
    def is_finished(self) -> bool:
        return self._next >= self.total_trials

    def save(self) -> dict[str, Any]:
        """The counter, seed and space (the space may hold sample_from callables: pickle with cloudpickle)."""
        return {
            "kind": _KIND,
            **self._base_state(),
            "space": self._space,
            "space_given": self._space_given,
            "num_samples": self._num_samples,
            "seed": self._seed,
            "max_concurrent": self._max_concurrent,
            "next": self._next,
            "live": sorted(self._live),
            "grid_order": "sorted",
        }

    def restore(self, state: dict[str, Any]) -> None:
        check_state(_KIND, state, _KIND)
        self._restore_base(state)
        self._sorted_grid = state.get("grid_order") == "sorted"
        self._set_space(state["space"], state["num_samples"])
        self._space_given = state["space_given"]
        self._seed = state["seed"]
        self._max_concurrent = state["max_concurrent"]
        self._next = state["next"]
        self._live = set(state["live"])


def pending_trials_wanted(searcher: Any, free_slots: int, total_cpus: float) -> int:
    """How many PENDING trials the controller keeps ahead of the free slots.

    As in Ray Tune, the default generator's trials are all created up front (up to
    ``max(200, 1.1 x CPUs)`` waiting): HyperBand puts a trial into its bracket when it
    is *added*, and halves once every trial of the bracket waits, so adding them one
    slot at a time made brackets halve early, with only the first few in them. Other
    searchers learn from results, so they are asked one trial per free slot.
    """
    if isinstance(searcher, BasicVariantGenerator):
        return max(200, int(total_cpus * 1.1))
    return max(1, free_slots)
