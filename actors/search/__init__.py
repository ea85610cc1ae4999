"""Search spaces and search algorithms (Ray Tune-compatible names and semantics).

Importing this package is cheap (no thespian, no optuna): trial and scheduler
actors import it to resolve configs.  Optuna is loaded only when an
:class:`OptunaSearch` is created,
HyperOpt only when a :class:`HyperOptSearch` is, bayes_opt when a :class:`BayesOptSearch` is, zoopt when a
:class:`ZOOptSearch` is, nevergrad when a :class:`NevergradSearch` is, hpbandster and ConfigSpace when a
:class:`TuneBOHB` is.
"""

from __future__ import annotations

from actors.search._bayesopt import BayesOptSearch
from actors.search._bohb import TuneBOHB
from actors.search._constructors import (
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)
from actors.search._domain import Categorical, Domain, Float, Function, GridSearch, Integer, Normal, SearchSpaceError
from actors.search._hyperopt import HyperOptSearch
from actors.search._nevergrad import NevergradSearch
from actors.search._optuna import OptunaSearch
from actors.search._registry import create_searcher
from actors.search._searcher import Searcher, SearcherSignal
from actors.search._space import ConfigView, Spec, validate_param_space
from actors.search._variant import BasicVariantGenerator
from actors.search._wrappers import ConcurrencyLimiter, Repeater
from actors.search._zoopt import ZOOptSearch

__all__ = [
    "BasicVariantGenerator",
    "BayesOptSearch",
    "Categorical",
    "ConcurrencyLimiter",
    "ConfigView",
    "Domain",
    "Float",
    "Function",
    "GridSearch",
    "HyperOptSearch",
    "Integer",
    "Normal",
    "OptunaSearch",
    "Repeater",
    "SearchSpaceError",
    "Searcher",
    "SearcherSignal",
    "Spec",
    "TuneBOHB",
    "ZOOptSearch",
    "NevergradSearch",
    "choice",
    "create_searcher",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
    "validate_param_space",
]
