"""PB2's Bayesian step, as Ray Tune 2.60 takes it: a time-varying GP over (time, reward, hyperparameters), UCB.

The population's history is a list of rows (trial name, time, hyperparameter values, score); from it the
reward change per unit of time is worked out for each run of unchanged hyperparameters, a Gaussian process
with a time-varying squared-exponential kernel is fitted to it (scikit-learn's regressor), and the
hyperparameters maximising an upper confidence bound, given the cloned trial's time and reward, are chosen
(L-BFGS-B from 10 random starts). The row order, the ties in the sorts (numpy's quicksort, as pandas' sort),
the normalisations and the quirks (UCB adds ``kappa`` times the *variance*; the values are cast to float32)
are Ray's, so the same history and random stream give Ray's values.

numpy, scipy and scikit-learn are imported when first used (``audition[pb2]``).
"""

from __future__ import annotations

import copy
import math
from typing import Any

Row = tuple[str, float, tuple[float, ...], float]  # (trial name, time, hyperparameter values, score)

_MIN_ROWS_FOR_CV = 200  # below it every row is used; from it the history length is chosen by likelihood
_ACQ_STARTS = 10


def _kernel_class() -> Any:
    from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

    class TimeVaryingSE(Kernel):  # type: ignore[misc]
        """Squared exponential over the hyperparameters, times ``(1 - epsilon) ** (|t - t'| / 2)`` over time
        (column 0): older observations count less (Bogunovic et al., TV-GP-UCB)."""

        def __init__(self, variance: float = 1.0, lengthscale: float = 1.0, epsilon: float = 0.1,
                     variance_bounds: tuple[float, float] = (1e-5, 1e5),
                     lengthscale_bounds: tuple[float, float] = (1e-5, 1e5),
                     epsilon_bounds: tuple[float, float] = (1e-5, 0.5)) -> None:
            self.variance, self.lengthscale, self.epsilon = variance, lengthscale, epsilon
            self.variance_bounds, self.lengthscale_bounds = variance_bounds, lengthscale_bounds
            self.epsilon_bounds = epsilon_bounds

        @property
        def hyperparameter_variance(self) -> Any:
            return Hyperparameter("variance", "numeric", self.variance_bounds)

        @property
        def hyperparameter_lengthscale(self) -> Any:
            return Hyperparameter("lengthscale", "numeric", self.lengthscale_bounds)

        @property
        def hyperparameter_epsilon(self) -> Any:
            return Hyperparameter("epsilon", "numeric", self.epsilon_bounds)

        def __call__(self, X: Any, Y: Any = None, eval_gradient: bool = False) -> Any:
            import numpy as np
            from sklearn.metrics import pairwise_distances
            from sklearn.metrics.pairwise import euclidean_distances

            X = np.atleast_2d(X)
            Y = X if Y is None else Y
            eps = np.clip(self.epsilon, 1e-5, 0.5)
            gaps = pairwise_distances(X[:, 0].reshape(-1, 1), Y[:, 0].reshape(-1, 1), "cityblock")
            sq = np.square(euclidean_distances(X[:, 1:], Y[:, 1:]))
            K = self.variance * np.exp(-sq / self.lengthscale) * (1 - eps) ** (0.5 * gaps)
            if not eval_gradient:
                return K
            # d/d log(theta): variance, lengthscale, epsilon
            return K, np.dstack([K, K * sq / self.lengthscale, -K * (gaps / 2) * eps / (1 - eps)])

        def diag(self, X: Any) -> Any:
            import numpy as np

            return np.full(X.shape[0], self.variance, dtype=np.float64)

        def is_stationary(self) -> bool:
            return False

        @property
        def theta(self) -> Any:
            import numpy as np

            return np.log([self.variance, self.lengthscale, self.epsilon])

        @theta.setter
        def theta(self, theta: Any) -> None:
            import numpy as np

            self.variance, self.lengthscale, self.epsilon = (np.exp(theta[0]), np.exp(theta[1]), np.exp(theta[2]))

        @property
        def bounds(self) -> Any:
            import numpy as np

            return np.log([list(self.variance_bounds), list(self.lengthscale_bounds), list(self.epsilon_bounds)])

    return TimeVaryingSE


def _gp(X: Any, y: Any, alpha: float | None = 1e-10) -> Any:
    from sklearn.gaussian_process import GaussianProcessRegressor

    kernel = _kernel_class()(variance=1.0, lengthscale=1.0, epsilon=0.1)
    kwargs = {} if alpha is None else {"alpha": alpha}
    model = GaussianProcessRegressor(kernel=kernel, optimizer="fmin_l_bfgs_b", **kwargs)
    model.fit(X, y)
    return model


def _normalize(data: Any, wrt: Any) -> Any:
    import numpy as np

    low, high = np.min(wrt, axis=0), np.max(wrt, axis=0)
    return (data - low) / (high - low + 1e-8)


def _standardize(data: Any) -> Any:
    import numpy as np

    return np.clip((data - np.mean(data, axis=0)) / (np.std(data, axis=0) + 1e-8), -2, 2)


def _ucb(m: Any, m1: Any, x: Any, fixed: Any) -> Any:
    """``m``'s mean plus ``kappa`` times ``m1``'s variance (``m1`` also holds the running trials' points)."""
    import numpy as np

    kappa = np.sqrt(0.2 + max(0, np.log(0.4 * m.X_train_.shape[0])))
    point = np.concatenate((fixed.reshape(-1, 1), np.array(x).reshape(-1, 1))).T
    try:
        mean = m.predict(point)[0]
    except ValueError:
        mean = -9999
    try:
        _, std = m1.predict(point, return_std=True)
        var = std[0] ** 2
    except ValueError:
        var = 0
    return mean + kappa * var  # type: ignore[no-any-return]


def _best_point(m: Any, m1: Any, fixed: Any, num_f: int, rng: Any) -> Any:
    import numpy as np
    from scipy.optimize import minimize

    dims = m.X_train_.shape[1] - num_f
    best_value: Any = -999
    best = m1.X_train_[0, :]
    for _ in range(_ACQ_STARTS):
        start = rng.uniform(0, 1, dims)
        res = minimize(lambda x: -_ucb(m, m1, x, fixed), start, bounds=[(0, 1)] * dims, method="L-BFGS-B",
                       options={"maxiter": 200, "maxfun": 200})
        value = _ucb(m, m1, res.x, fixed)
        if value > best_value:
            best_value, best = value, res.x
    return np.clip(best, 0, 1)


def _limits(Xraw: Any, base_vals: Any, num_f: int) -> Any:
    import numpy as np

    old = Xraw[:, :num_f]
    old_lims = np.concatenate((np.max(old, axis=0), np.min(old, axis=0))).reshape(2, old.shape[1])
    return np.concatenate((old_lims, base_vals), axis=1)


def _history_length(Xraw: Any, yraw: Any, base_vals: Any, num_f: int) -> int:
    """All rows below 200; else the latest 200, 210, ... rows, whichever fits a GP most likely."""
    import numpy as np

    if Xraw.shape[0] < _MIN_ROWS_FOR_CV:
        return int(Xraw.shape[0])
    scores, length = [], _MIN_ROWS_FOR_CV - 10
    while length + 10 <= Xraw.shape[0]:
        length += 10
        X_len, y_len = Xraw[-length:, :], yraw[-length:]
        model = _gp(_normalize(X_len, _limits(X_len, base_vals, num_f)), _standardize(y_len).reshape(y_len.size, 1),
                    alpha=None)
        scores.append(model.log_marginal_likelihood_value_)
    return int((np.argmax(scores) + _MIN_ROWS_FOR_CV // 10) * 10)


def select_config(Xraw: Any, yraw: Any, current: Any, newpoint: Any, bounds: list[tuple[float, float]],
                  num_f: int, rng: Any) -> Any:
    """The next hyperparameters (float32, in the bounds' units) for a trial at ``newpoint`` (time, reward),
    given the history ``Xraw``/``yraw`` and the points ``current`` chosen since the population last moved on."""
    import numpy as np

    base_vals = np.array(bounds).T
    length = _history_length(Xraw, yraw, base_vals, num_f)
    Xraw, yraw = Xraw[-length:, :], yraw[-length:]
    X = _normalize(Xraw, _limits(Xraw, base_vals, num_f))
    y = _standardize(yraw).reshape(yraw.size, 1)
    fixed = _normalize(newpoint, Xraw[:, :num_f])
    try:
        m = _gp(X, y)
    except np.linalg.LinAlgError:
        X += np.eye(X.shape[0]) * 1e-3  # (Ray's jitter: it only fits when X is square, else numpy raises)
        m = _gp(X, y)
    if current is None:
        m1 = copy.deepcopy(m)
    else:
        running = np.hstack((np.array([fixed for _ in range(current.shape[0])]), _normalize(current, base_vals)))
        m1 = _gp(np.vstack((X, running)), np.vstack((y, np.zeros(running.shape[0]).reshape(-1, 1))))
    xt = _best_point(m, m1, fixed, num_f, rng)
    xt = xt * (np.max(base_vals, axis=0) - np.min(base_vals, axis=0)) + np.min(base_vals, axis=0)
    return xt.astype(np.float32)


def _pandas_order(values: list[float]) -> list[int]:
    """The row order pandas' ``sort_values`` gives (numpy's quicksort: ties are not kept in order)."""
    import numpy as np

    return [int(i) for i in np.asarray(values).argsort(kind="quicksort")]


def explore(rows: list[Row], names: list[str], bounds: list[tuple[float, float]], current: Any, base: str,
            old: str, config: dict[str, Any], rng: Any) -> tuple[dict[str, Any], list[Row]]:
    """The config ``old`` takes on cloning ``base`` (``config``: ``base``'s flattened config), and the history
    with a row for it (at ``base``'s last time and score: the reward change is then measured from the clone's
    weights). Unchanged, with the history as it was, while ``base`` has no measured change yet."""
    import numpy as np

    order = _pandas_order([r[1] for r in rows])
    df = [rows[i] for i in order]
    # per (trial, hyperparameters) run: reward and time change since that run's previous row
    last: dict[tuple[str, tuple[float, ...]], tuple[float, float]] = {}
    kept: list[tuple[str, float, tuple[float, ...], float, float, float]] = []  # + score, R_before, y
    for trial, t, values, score in df:
        key = (trial, values)
        prev = last.get(key)
        last[key] = (t, score)
        if prev is None or any(isinstance(v, float) and math.isnan(v) for v in values):
            continue  # (pandas' groupby leaves a row with a NaN key out of every group)
        dt, dy = t - prev[0], score - prev[1]
        if not dt > 0:
            continue
        y = dy / dt
        if math.isnan(y):
            continue
        kept.append((trial, t, values, score, score - dy, y))
    kept = [kept[i] for i in _pandas_order([k[1] for k in kept])][-1000:]
    mine = [k for k in kept if k[0] == base]
    if not mine:
        return dict(config), rows
    Xs = np.array([[k[1], k[4], *k[2]] for k in kept], dtype=np.float64)
    ys = np.array([k[5] for k in kept], dtype=np.float64)
    newpoint = np.array([mine[-1][1], mine[-1][4]], dtype=np.float64)
    new = select_config(Xs, ys, current, newpoint, bounds, num_f=2, rng=rng)
    out = dict(config)
    chosen = []
    for i, name in enumerate(names):
        value = type(config[name])(new[i])  # the source's type, as Ray: a float stays float, an int is truncated
        out[name] = value
        chosen.append(value)
    # the clone's row: at the source's last measured time and score (the reward change is then measured
    # from the cloned weights)
    t_base, score_base = mine[-1][1], mine[-1][3]
    return out, [*rows, (old, t_base, tuple(chosen), score_base)]


__all__ = ["Row", "explore", "select_config"]
