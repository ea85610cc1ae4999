"""Grid and random search: the default searcher (Ray Tune's ``BasicVariantGenerator``).

The trials form sweeps, as in Ray: first one per ``points_to_evaluate`` entry
(the space with the point's values in place), then one per remaining sample of
``num_samples``; each sweep runs its grid once.  Variant ``i`` is a pure
function of (space, points, base seed, ``i``): its grid point comes from ``i``
and its random draws from a generator seeded with the base seed and ``i`` (with
``constant_grid_search``, the draws that need no grid value are seeded by the
sweep instead, so the sweep shares them).  So the state to save is just a
counter, and a restored generator produces exactly the variants the original
would have produced next.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from actors.search._domain import SearchSpaceError
from actors.search._numpy_draws import (
    RayRng,
    is_numpy_rng,
    numpy_or_none,
    ray_sample,
    rng_from_state,
    rng_state,
    warn_without_numpy,
)
from actors.search._points import apply_point, check_points
from actors.search._random_state import seed_of
from actors.search._ray_order import copy_space, park_functions, ray_sweep
from actors.search._searcher import Searcher, Suggestion, check_state, ray_restore, ray_save
from actors.search._space import Path, _evaluate, find_grids, normalize, presample, resolve, validate_param_space

_KIND = "BasicVariantGenerator"


def _check_num_samples(num_samples: Any) -> int:
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 0:
        raise SearchSpaceError(
            f"num_samples must be an integer >= 1 (0 draws no trial), got {num_samples!r}; "
            "it is how many times each grid point is run (use 1 for a plain grid search)"
        )
    return num_samples


@dataclass(frozen=True)
class _Sweep:
    """One pass over a space's grid: its grid keys (in sweep order) and their values."""

    space: Any
    paths: tuple[Path, ...]
    values: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, space: Any, sort: bool = True) -> _Sweep:
        grids = find_grids(space)
        if sort:
            # Ray's BasicVariantGenerator sorts its grid variables by path (parse_spec_vars);
            # paths are unique and siblings share a key type (dict keys are str, list indices int)
            grids.sort(key=lambda item: item[0])
        return cls(space, tuple(p for p, _ in grids), tuple(g.values for _, g in grids))

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values)

    def grid(self, k: int) -> dict[Path, Any]:
        """Grid point ``k`` of the sweep: the first grid key changes fastest."""
        out: dict[Path, Any] = {}
        for path, values in zip(self.paths, self.values, strict=True):
            k, pick = divmod(k, len(values))
            out[path] = values[pick]
        return out


class BasicVariantGenerator(Searcher):
    """Cartesian product of every ``grid_search`` times ``num_samples``, random domains sampled afresh.

    Ray Tune 2.60's signature: ``points_to_evaluate`` are run first, each in place of
    one sample (a point that leaves grid keys out runs once per grid point);
    ``max_concurrent`` > 0 makes :meth:`suggest` return ``None`` while that many trials
    are live; ``constant_grid_search=True`` draws the random values once per sample and
    holds them across its grid; ``random_state`` (an int) makes the draws reproducible.
    Order follows Ray: within a sweep the grid keys are taken in the order of their
    sorted paths, the first one changing fastest.  ``param_space``, ``num_samples`` and
    ``seed`` (keyword-only, audition's) give the generator its own space; otherwise it
    takes the Tuner's.
    """

    def __init__(
        self,
        points_to_evaluate: list[dict[str, Any]] | None = None,
        max_concurrent: int = 0,
        constant_grid_search: bool = False,
        random_state: Any = None,
        *,
        param_space: dict[str, Any] | None = None,
        num_samples: int = 1,
        seed: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__(metric, mode)
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) or max_concurrent < 0:
            raise ValueError(
                f"max_concurrent must be an integer >= 0 (0 = unlimited), got {max_concurrent!r}"
            )
        if not isinstance(constant_grid_search, bool):
            raise TypeError(f"constant_grid_search must be True or False, got {constant_grid_search!r}")
        if seed is not None and random_state is not None:
            raise ValueError("give random_state or seed, not both (seed is audition's older name for it)")
        self._max_concurrent = max_concurrent
        self._constant = constant_grid_search
        self._points = check_points(points_to_evaluate)
        self._init_draws(random_state if seed is None else seed, "random_state" if seed is None else "seed")
        self._space_given = param_space is not None
        # the points are applied to a space once there is one: the Tuner gives it later
        self._space_set = self._space_given
        # False only for a state saved before grid keys were sorted: it resumes in written order
        self._sorted_grid = True
        self._set_space({} if param_space is None else param_space, _check_num_samples(num_samples))
        self._next = 0
        self._live: set[str] = set()

    def _init_draws(self, given: Any, name: str) -> None:
        """Ray's draws (numpy, ``random_state`` as Ray takes it) when numpy is there; else Python's.

        ``_rng`` is the Generator/RandomState the domains are drawn from (None: numpy's global
        stream); ``_global`` the driver's global stream, carried to wherever suggest() runs.
        """
        np = None if isinstance(given, random.Random) else numpy_or_none()
        self._numpy = np is not None
        self._rng: Any = None
        self._global: Any = None
        self._py_global: Any = None  # Python's global ``random`` state as the driver's script left it
        self._buffer: list[Any] = []
        #: numpy global-stream doubles the scheduler's on_trial_add takes after each trial (Ray's ASHA: 1)
        self.global_draws_per_trial = 0
        #: the scheduler's fill of each new config (``Scheduler.config_fill``: Ray's PBT on_trial_add), or None
        self.fill_on_add: Callable[[dict[str, Any]], None] | None = None
        if np is None:
            # (audition's own seed= has no Ray values to miss: only Ray's random_state is warned of)
            if given is not None and name == "random_state" and not isinstance(given, random.Random):
                warn_without_numpy(f"BasicVariantGenerator({name}=...)")
            self._seed = seed_of(given, name)
            return
        if given is None or is_numpy_rng(given):
            self._rng = given
            self._seed = random.SystemRandom().getrandbits(63)  # spec.random's seed only
        else:
            self._seed = seed_of(given, name)
            if self._seed < 0:
                raise ValueError(f"{name} must be an int >= 0 (numpy's default_rng, which Ray seeds with it, "
                                 f"takes no negative seed), got {given!r}")
            self._rng = np.random.default_rng(self._seed)

    def capture_driver_stream(self) -> None:
        """Take numpy's and Python's global ``random`` states as the user's script left them
        (``numpy.random.seed(n)``, ``random.seed(n)``), so draws from the global streams (the domains,
        a ``sample_from`` function calling ``random.random()``) follow them in whichever process
        suggest() runs, as in Ray, where they run in the driver."""
        if self._next != 0:
            return
        self._py_global = random.getstate()
        np = numpy_or_none()
        if self._numpy and np is not None:
            self._global = np.random.get_state()

    def seed_driver_stream(self, seed: int) -> None:
        """As ``capture_driver_stream`` after ``random.seed(seed)`` and ``numpy.random.seed(seed)`` in the
        script: a simulation's draws from the global streams (``sample_from`` functions, PBT's fills)
        follow its seed, not whatever state the process is in."""
        if self._next != 0:
            return
        self._py_global = random.Random(seed).getstate()
        np = numpy_or_none()
        if self._numpy and np is not None:
            self._global = np.random.RandomState(seed).get_state()

    @contextmanager
    def _driver_random(self) -> Iterator[None]:
        """Python's global ``random`` set to the driver's for a trial's config (and restored after it)."""
        if self._py_global is None:
            yield
            return
        saved = random.getstate()
        version, internal, gauss = self._py_global
        random.setstate((version, tuple(internal), gauss))  # (a list once stored as JSON)
        try:
            yield
        finally:
            self._py_global = random.getstate()
            random.setstate(saved)

    @contextmanager
    def _driver_stream(self) -> Iterator[Any]:
        """numpy's global stream set to the driver's for the draws (and restored after them)."""
        np = numpy_or_none()
        if self._global is None:
            yield np
            return
        saved = np.random.get_state()
        np.random.set_state(self._global)
        try:
            yield np
        finally:
            self._global = np.random.get_state()
            np.random.set_state(saved)

    def _set_space(self, param_space: dict[str, Any], num_samples: int) -> None:
        validate_param_space(param_space)
        self._space: dict[str, Any] = normalize(param_space)
        self._sweep = _Sweep.of(self._space, self._sorted_grid)
        self._point_sweeps = [
            _Sweep.of(apply_point(self._space, p, i) if self._space_set else p) for i, p in enumerate(self._points)
        ]
        self._num_samples = num_samples
        self._presampled: tuple[int, Any] | None = None

    @property
    def grid_size(self) -> int:
        """Number of grid points (1 when the space has no grid_search)."""
        return self._sweep.size

    @property
    def _plain_sweeps(self) -> int:
        """Samples left after the points, each a sweep of the whole grid (Ray: a point uses up a sample)."""
        return max(0, self._num_samples - len(self._points))

    @property
    def total_trials(self) -> int:
        """How many configs :meth:`suggest` hands out before returning FINISHED."""
        return sum(s.size for s in self._point_sweeps) + self._plain_sweeps * self.grid_size

    @property
    def num_samples(self) -> int:
        return self._num_samples

    @property
    def max_concurrent(self) -> int:
        return self._max_concurrent

    @property
    def points_to_evaluate(self) -> list[dict[str, Any]]:
        """The points, normalized (what names their trials' ``experiment_tag``)."""
        return list(self._points)

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: Any
    ) -> bool:
        """Adopt the experiment's param_space and ``num_samples=`` unless built with a space.

        Refuses (``False``) a second space, a change after suggestions started, or a
        metric/mode clash.  Raises if a point sets a key the space lacks.
        """
        if config and (self._space_given or self._next):
            return False
        if not self._set_metric_mode(metric, mode):
            return False
        if not self._space_given and not self._next:
            # Ray Tune's BasicVariantGenerator() takes the space and num_samples from the Tuner
            # (TuneConfig(num_samples=10) with no grid: 10 trials), also when the space is empty
            num_samples = spec.get("num_samples", self._num_samples)
            self._space_given, self._space_set = bool(config), True
            self._set_space(config or {}, _check_num_samples(num_samples))
        return True

    def _locate(self, index: int) -> tuple[int, _Sweep, int]:
        """(sweep number, sweep, grid point) of variant ``index``."""
        for number, sweep in enumerate(self._point_sweeps):
            if index < sweep.size:
                return number, sweep, index
            index -= sweep.size
        number, k = divmod(index, self.grid_size)
        return len(self._point_sweeps) + number, self._sweep, k

    def variant(self, index: int) -> dict[str, Any]:
        """The config of variant ``index`` (0-based), independent of what was suggested so far.

        Only for Python's draws (no numpy, or a ``random.Random``): Ray's numpy draws are one stream.
        """
        if not 0 <= index < self.total_trials:
            raise IndexError(f"variant index {index} out of range; there are {self.total_trials} variants")
        if self._numpy:
            raise RuntimeError("variant(i) is random access only for draws with Python's random (no numpy, "
                               "or random_state=random.Random(...)); with numpy the draws are Ray's single "
                               "stream: call suggest() in order")
        number, sweep, k = self._locate(index)
        space = sweep.space
        if self._constant:
            if self._presampled is None or self._presampled[0] != number:
                self._presampled = (number, presample(space, random.Random(f"audition:{self._seed}:sweep:{number}")))
            space = self._presampled[1]
        config: dict[str, Any] = resolve(space, sweep.grid(k), random.Random(f"audition:{self._seed}:{index}"))
        return config

    def _ray_variant(self, index: int) -> dict[str, Any]:
        """Variant ``index`` as Ray draws it: a sweep's grid points all at once, then per trial its
        ``sample_from`` functions and the scheduler's global-stream draws (Ray's ``add_trial``)."""
        _, sweep, k = self._locate(index)
        with self._driver_stream() as np:
            if np is None:
                raise RuntimeError("this search was saved drawing with numpy (Ray's draws), which is not "
                                   "installed here: pip install numpy to resume it")
            if k == 0 or not self._buffer:
                rng = RayRng(np, self._rng)
                self._buffer = ray_sweep(sweep.space, self._constant, lambda d: ray_sample(d, rng, 1)[0])
            config: dict[str, Any] = copy_space(self._buffer[k])
            _evaluate(config, park_functions(config), random.Random(f"audition:{self._seed}:{index}"), strict=True)
            for _ in range(self.global_draws_per_trial):
                np.random.random_sample()  # Ray's ASHA: np.random.choice(brackets, p=...) per added trial
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
        with self._driver_random():
            config = self._ray_variant(self._next) if self._numpy else self.variant(self._next)
            if self.fill_on_add is not None:  # (Ray's add_trial: after the trial's own draws)
                with self._driver_stream():
                    self.fill_on_add(config)
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

    @ray_save
    def save(self) -> dict[str, Any]:
        """The counter, seed, space and points (they may hold sample_from callables: pickle with cloudpickle)."""
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
            "points": self._points,
            "constant_grid_search": self._constant,
            "space_set": self._space_set,
            "draws": "numpy" if self._numpy else "python",
            "rng": rng_state(self._rng),
            "global": self._global,
            "py_global": self._py_global,
            "buffer": self._buffer,
            "global_draws_per_trial": self.global_draws_per_trial,
            "fill_on_add": self.fill_on_add,
        }

    @ray_restore
    def restore(self, state: dict[str, Any]) -> None:
        check_state(_KIND, state, _KIND)
        self._restore_base(state)
        self._sorted_grid = state.get("grid_order") == "sorted"
        # states saved before points_to_evaluate/constant_grid_search existed have neither
        self._points = state.get("points", [])
        self._constant = state.get("constant_grid_search", False)
        self._space_given = state["space_given"]
        self._space_set = state.get("space_set", True)
        self._set_space(state["space"], state["num_samples"])
        self._seed = state["seed"]
        self._max_concurrent = state["max_concurrent"]
        self._next = state["next"]
        self._live = set(state["live"])
        # states saved before Ray's numpy draws (2026-12-04) drew with Python's random
        self._numpy = state.get("draws") == "numpy"
        self._rng, self._global = rng_from_state(state.get("rng")), state.get("global")
        self._py_global = state.get("py_global")  # (absent from states saved before 2026-12-04)
        self._buffer = state.get("buffer", [])
        self.global_draws_per_trial = state.get("global_draws_per_trial", 0)
        self.fill_on_add = state.get("fill_on_add")


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
