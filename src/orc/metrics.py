"""Metrics: errors, valid prediction time, R², power spectra and memory capacity.

The error metrics take arrays shaped ``(time, features)`` (or ``(time,)``; JAX
or numpy). Each is one compiled program (``jax.jit``) per shape, dtype and
choice of its options (normalisation names, windows, flags: static arguments
that select the branch at trace time); numbers such as ``dt``, ``scale`` or
``threshold`` are traced, so a new value compiles nothing. (Called op by op,
a metric compiled 5 to 30 small programs for every new shape.) They work
inside the user's ``jax.jit``, ``vmap`` and ``grad``.
:func:`memory_capacity` measures a model's reservoir and runs its own small
regressions (one program); :func:`dominant_period` reads a concrete record
(it chooses a Python number from the data).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._defaults import SCORING

__all__ = [
    "mse",
    "mae",
    "rmse",
    "nrmse",
    "rsquare",
    "normalised_error",
    "valid_prediction_time",
    "smape",
    "power_spectrum",
    "power_spectrum_error",
    "dominant_period",
    "mutual_information_delay",
    "memory_capacity",
]


def _one_program(*static: str):
    """The metric compiled as one program, the arguments named in ``static``
    (strings, flags: hashable options) part of its identity."""
    return functools.partial(jax.jit, static_argnames=static)


_NORMS = ("std", "var", "range", "mean_norm", "total_var", "feature_std")


def _pair(pred, truth, owner):
    pred, truth = jnp.asarray(pred), jnp.asarray(truth)
    if pred.shape != truth.shape:
        raise ValueError(
            f"{owner}: pred and truth must have the same shape, got "
            f"{tuple(pred.shape)} and {tuple(truth.shape)}"
        )
    if pred.ndim == 1:
        pred, truth = pred[:, None], truth[:, None]
    if pred.ndim != 2:
        raise ValueError(f"{owner}: expected (time, features) arrays, got {pred.shape}")
    return pred, truth


@_one_program()
def mse(pred: ArrayLike, truth: ArrayLike) -> Float[Array, ""]:
    """Mean squared error over all entries (reservoirpy's ``mse``)."""
    pred, truth = _pair(pred, truth, "mse")
    return jnp.mean((pred - truth) ** 2)


@_one_program()
def mae(pred: ArrayLike, truth: ArrayLike) -> Float[Array, ""]:
    """Mean absolute error over all entries (reservoirpy's ``mae``)."""
    pred, truth = _pair(pred, truth, "mae")
    return jnp.mean(jnp.abs(pred - truth))


@_one_program()
def rmse(pred: ArrayLike, truth: ArrayLike) -> Float[Array, ""]:
    """Root mean squared error over all entries."""
    return jnp.sqrt(mse(*_pair(pred, truth, "rmse")))


@_one_program("normalization")
def nrmse(
    pred: ArrayLike, truth: ArrayLike, normalization: str = "std", scale=None
) -> Float[Array, ""]:
    """RMSE divided by a scale of ``truth``.

    ``normalization``:

    - ``"std"``: standard deviation of all entries of ``truth``;
    - ``"var"``: their variance (reservoirpy's ``norm="var"``);
    - ``"range"``: ``max - min`` of all entries (reservoirpy's ``"minmax"``);
    - ``"mean_norm"``: ``sqrt(mean_t ||truth_t||^2)``, the scale of the valid
      prediction time;
    - ``"total_var"``: ``sqrt(mean_t ||truth_t - mean(truth)||^2)``, the square
      root of the total variance (sum of the per-feature variances);
    - ``"feature_std"``: each feature's error divided by that feature's
      standard deviation, ``sqrt(mean_{t,i} (e_{t,i} / σ_i)^2)`` (as in
      Gauthier et al. 2021's NG-RC paper), so no feature dominates by its units.

    ``scale`` (a number, or one per feature with ``"feature_std"``) replaces the
    scale computed from ``truth``: pass the attractor's scale when scoring
    short windows, whose own spread says little (reservoirpy's ``norm_value``).
    """
    pred, truth = _pair(pred, truth, "nrmse")
    if normalization not in _NORMS:
        raise ValueError(
            f"nrmse: normalization must be one of {_NORMS}, got {normalization!r}"
        )
    if scale is not None:
        scale = jnp.asarray(scale, truth.dtype)
        if normalization == "feature_std":
            return rmse(pred / scale, truth / scale)
        return rmse(pred, truth) / scale
    scale = {
        "std": lambda: jnp.std(truth),
        "var": lambda: jnp.var(truth),
        "range": lambda: jnp.max(truth) - jnp.min(truth),
        "mean_norm": lambda: jnp.sqrt(jnp.mean(jnp.sum(truth**2, axis=1))),
        "total_var": lambda: jnp.sqrt(jnp.sum(jnp.var(truth, axis=0))),
        "feature_std": lambda: jnp.std(truth, axis=0),
    }[normalization]()
    if normalization == "feature_std":
        return rmse(pred / scale, truth / scale)
    return rmse(pred, truth) / scale


@_one_program("multioutput")
def rsquare(
    pred: ArrayLike, truth: ArrayLike, multioutput: str = "uniform"
) -> Float[Array, ""]:
    """Coefficient of determination ``R² = 1 - SS_res / SS_tot``.

    Per feature ``i``: ``1 - Σ_t (y_ti - ŷ_ti)² / Σ_t (y_ti - ȳ_i)²``.
    ``multioutput="uniform"`` averages the features' R² (scikit-learn's
    default); ``"variance_weighted"`` weights them by their variance, which
    equals one ratio of summed squares over all entries; ``"raw"`` returns one
    value per feature. For one feature all three agree (and equal
    reservoirpy's ``rsquare``).
    """
    pred, truth = _pair(pred, truth, "rsquare")
    if multioutput not in ("uniform", "variance_weighted", "raw"):
        raise ValueError(
            "rsquare: multioutput must be 'uniform', 'variance_weighted' or 'raw', "
            f"got {multioutput!r}"
        )
    ss_res = jnp.sum((truth - pred) ** 2, axis=0)
    ss_tot = jnp.sum((truth - jnp.mean(truth, axis=0)) ** 2, axis=0)
    if multioutput == "variance_weighted":
        return 1 - jnp.sum(ss_res) / jnp.sum(ss_tot)
    r2 = 1 - ss_res / ss_tot
    return r2 if multioutput == "raw" else jnp.mean(r2)


@_one_program("normalization")
def normalised_error(
    pred: ArrayLike,
    truth: ArrayLike,
    scale=None,
    normalization: str = SCORING.normalization,
) -> Float[Array, " time"]:
    """The error of each time step, normalised.

    ``normalization="mean_norm"`` (default): ``e(t) = ||pred_t - truth_t|| /
    scale`` with ``scale = sqrt(mean_t ||truth_t||^2)`` (Pathak et al. 2018,
    ORC). ``"feature_std"``: ``e(t) = sqrt(mean_i ((pred_ti - truth_ti) /
    σ_i)^2)``, each dimension divided by its standard deviation ``σ_i`` (the
    dysts benchmark's valid prediction time, Gilpin 2021), so no dimension
    dominates by its units. ``scale`` replaces the scale computed from
    ``truth`` (a number, or one ``σ_i`` per feature with ``"feature_std"``).
    """
    pred, truth = _pair(pred, truth, "normalised_error")
    if normalization == "mean_norm":
        if scale is None:
            scale = jnp.sqrt(jnp.mean(jnp.sum(truth**2, axis=1)))
        return jnp.linalg.norm(pred - truth, axis=1) / scale
    if normalization == "feature_std":
        sd = jnp.std(truth, axis=0) if scale is None else jnp.asarray(scale)
        if sd.ndim > 1 or (sd.ndim == 1 and sd.shape[0] != truth.shape[1]):
            raise ValueError(
                "normalised_error: scale must be a number or one standard deviation "
                f"per feature ({truth.shape[1]}), got shape {sd.shape}"
            )
        return jnp.sqrt(jnp.mean(((pred - truth) / sd) ** 2, axis=1))
    raise ValueError(
        "normalised_error: normalization must be 'mean_norm' or 'feature_std', "
        f"got {normalization!r}"
    )


@_one_program("normalization", "return_capped")
def valid_prediction_time(
    pred: ArrayLike,
    truth: ArrayLike,
    threshold: float = SCORING.threshold,
    dt: float = 1.0,
    lyapunov_exponent: float | None = None,
    scale=None,
    normalization: str = SCORING.normalization,
    return_capped: bool = False,
):
    """Time until the normalised error first exceeds ``threshold``.

    The error is :func:`normalised_error` (``normalization`` and ``scale`` as
    there): by default ``e(t) = ||pred_t - truth_t|| / scale``, ``scale``
    defaulting to ``sqrt(mean_t ||truth_t||^2)`` of *this window*, as ORC
    does. Scores of different windows are only comparable on one footing:
    pass the attractor's scale (e.g. of the training data) as ``scale``, as
    orc's command line and benchmarks do. ``normalization="feature_std"``
    divides each dimension by its own standard deviation (dysts' protocol;
    ``scale`` is then the attractor's per-dimension std).

    Returns ``steps * dt``, times the Lyapunov exponent when given (the result
    is then in Lyapunov times). A forecast that never crosses the threshold
    gets the whole window: the result is then only a lower bound, capped by the
    window; ``return_capped=True`` returns ``(vpt, capped)`` with ``capped``
    true in that case. A non-finite error (a NaN or inf in ``pred``) counts as
    crossing the threshold, so a forecast that diverged never scores as valid.

    Example
    -------
    >>> vpt = valid_prediction_time(U_pred, U_test, dt=0.01, lyapunov_exponent=0.906)
    >>> vpt, capped = valid_prediction_time(U_pred, U_test, return_capped=True)
    """
    err = normalised_error(pred, truth, scale, normalization)
    crossed = ~(err <= threshold)  # NaN compares false: it is a crossing
    capped = ~jnp.any(crossed)
    steps = jnp.where(capped, err.shape[0], jnp.argmax(crossed))
    t = steps.astype(err.dtype) * jnp.asarray(dt, err.dtype)
    t = t * lyapunov_exponent if lyapunov_exponent is not None else t
    return (t, capped) if return_capped else t


@_one_program()
def smape(pred: ArrayLike, truth: ArrayLike) -> Float[Array, ""]:
    """Symmetric mean absolute percentage error, in percent (0 to 200).

    ``100 * mean_{t,i} 2 |pred_ti - truth_ti| / (|pred_ti| + |truth_ti|)``,
    the definition of the dysts forecasting benchmark (Gilpin 2021); an entry
    where both are zero counts as no error.
    """
    pred, truth = _pair(pred, truth, "smape")
    den = jnp.abs(pred) + jnp.abs(truth)
    ratio = jnp.where(
        den > 0, 2 * jnp.abs(pred - truth) / jnp.where(den > 0, den, 1), 0
    )
    return 100 * jnp.mean(ratio)


@_one_program("axis", "window")
def power_spectrum(
    x: ArrayLike,
    dt: float = 1.0,
    axis: str = SCORING.spectrum_axis,
    window: str | None = None,
) -> tuple[Array, Array]:
    """One-sided power spectrum of ``x (time, features)``, averaged over the other axis.

    ``axis="time"``: the spectrum of each feature's time series (mean removed),
    averaged over features; ``axis="space"``: the spectrum of each snapshot
    (e.g. a Kuramoto-Sivashinsky field on a periodic grid), averaged over time,
    with ``dt`` the grid spacing. Without a window power is ``|FFT|² / n``, so
    for a sine of amplitude ``A`` on an exact bin it is ``n A² / 4`` at that
    bin. ``window="hann"`` multiplies each series by the periodic Hann window
    ``w`` first and divides by ``sum(w²)`` instead of ``n``: a non-periodic
    record (a time series cut anywhere) then leaks far less power from its
    peaks into distant bins.

    Returns
    -------
    (freqs, power) : frequencies (cycles per unit of ``dt``) and power, each
    ``(n // 2 + 1,)``.
    """
    x = jnp.asarray(x)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"power_spectrum: x must be (time, features), got {x.shape}")
    if axis not in ("time", "space"):
        raise ValueError(
            f"power_spectrum: axis must be 'time' or 'space', got {axis!r}"
        )
    if window not in (None, "hann"):
        raise ValueError(
            f"power_spectrum: window must be None or 'hann', got {window!r}"
        )
    if axis == "space":
        x = x.T
    n = x.shape[0]
    x = x - jnp.mean(x, axis=0) if axis == "time" else x
    if window == "hann":
        w = jnp.sin(jnp.pi / n * jnp.arange(n, dtype=x.dtype)) ** 2
        x, norm = x * w[:, None], jnp.sum(w**2)
    else:
        norm = n
    power = jnp.mean(jnp.abs(jnp.fft.rfft(x, axis=0)) ** 2, axis=1) / norm
    return jnp.fft.rfftfreq(n, d=dt), power


def _concrete(x, owner: str, result: str) -> np.ndarray:
    """``x`` as a numpy array, refusing a traced value: the data-analysis
    helpers return a Python number chosen from the data (``result`` says
    which)."""
    if isinstance(x, jax.core.Tracer):
        raise TypeError(
            f"{owner}: x must be a concrete array ({result} chosen from the data), "
            "not a traced value"
        )
    return np.asarray(x)


def _check_finite(arr: np.ndarray, owner: str) -> None:
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{owner}: x contains NaN or inf")


def dominant_period(
    x: ArrayLike, dt: float = 1.0, max_period: float | None = None
) -> float:
    """Period of the strongest oscillation of ``x (time, features)``.

    The peak of :func:`power_spectrum` along time (each feature's mean removed,
    powers averaged over features), searched among periods of at most
    ``max_period``; returned as ``n * dt / k`` for the peak bin ``k`` (in units
    of ``dt``: samples with the default ``dt=1``). The zero-frequency bin is
    never the answer. ``max_period`` defaults to a tenth of the record,
    ``n * dt / 10``: a slower "period" is seen fewer than ten times, and in
    practice it is a drift or a slow modulation (its power sits in the lowest
    bins) rather than the oscillation of the dynamics.

    A data-analysis helper, not traceable: ``x`` must be concrete and the
    result is a Python float. :func:`orc.forecaster.nvar_stride` uses it to
    choose an NVAR's delay stride from the data's sampling.
    """
    owner = "dominant_period"
    arr = _concrete(x, owner, "the period is a Python float")
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] < 4:
        raise ValueError(
            f"{owner}: x must be (time, features) with at least 4 samples, got "
            f"shape {np.shape(x)}"
        )
    _check_finite(arr, owner)
    dt = float(dt)
    if not dt > 0:
        raise ValueError(f"{owner}: dt must be positive, got {dt}")
    n = arr.shape[0]
    if max_period is None:
        max_period = n * dt / 10
    max_period = float(max_period)
    if not max_period >= 2 * dt:
        raise ValueError(
            f"{owner}: max_period must be at least 2 * dt = {2 * dt:g} (the "
            f"shortest period a sampled series shows), got {max_period:g}"
        )
    with jax.ensure_compile_time_eval():  # concrete even inside a user's jit
        _, power = power_spectrum(np.asarray(arr, dtype=np.float64), dt=1.0)
    power = np.asarray(power)
    k_min = max(1, math.ceil(n * dt / max_period - 1e-9))
    if k_min >= power.shape[0]:
        raise ValueError(
            f"{owner}: no frequency bin of a {n}-sample record has a period of at "
            f"most max_period={max_period:g}"
        )
    k = k_min + int(np.argmax(power[k_min:]))
    return n * dt / k


def _binned_mutual_information(codes: np.ndarray, bins: int, lag: int) -> float:
    """Mutual information (nats) between ``codes[t]`` and ``codes[t + lag]``,
    integer bin codes in ``[0, bins)``, by their joint histogram."""
    a, b = codes[: codes.size - lag], codes[lag:]
    joint = np.bincount(a * bins + b, minlength=bins * bins).reshape(bins, bins)
    joint = joint / a.size
    outer = np.outer(joint.sum(axis=1), joint.sum(axis=0))
    live = joint > 0
    return float(np.sum(joint[live] * np.log(joint[live] / outer[live])))


def mutual_information_delay(
    x: ArrayLike, max_lag: int | None = None, bins: int | None = None
) -> int | None:
    """The delay-embedding lag of a scalar series: the first minimum of its
    average mutual information (Fraser & Swinney 1986), or ``None``.

    ``I(tau)``, the mutual information between ``x_t`` and ``x_{t+tau}``, is
    estimated from a joint histogram of equal-count bins (ranks, so any
    monotone rescaling of ``x`` gives the same lag; ``bins`` defaults to
    ``min(16, max(4, int(sqrt(n / 5))))``), smoothed over three neighbouring
    lags, and the answer is the first lag ``tau >= 2`` where the smoothed
    curve has a local minimum after falling to half of ``I(0)`` (the binned
    series' entropy). That is the usual delay for reconstructing an attractor
    from one observed coordinate: later samples say as little as they will
    for a while about the current one, yet are not unrelated to it (about a
    quarter of the oscillation: 11 samples for Mackey-Glass at unit step, 18
    for Lorenz63's ``x`` at ``dt = 0.01``). ``None`` where ``I`` never falls
    to half of ``I(0)`` with a minimum within ``max_lag`` (default a tenth of
    the record): a trend or a pure tone, whose future is a function of the
    present at every lag.

    A data-analysis helper, not traceable: ``x`` (``(time,)`` or
    ``(time, 1)``) must be concrete. :func:`orc.forecaster.nvar_stride` uses
    it for the delay stride of an NVAR on a scalar series.
    """
    from ._validation import check_int

    owner = "mutual_information_delay"
    arr = _concrete(x, owner, "the lag is a Python int")
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1 or arr.shape[0] < 20:
        raise ValueError(
            f"{owner}: x must be a scalar series, (time,) or (time, 1), with at "
            f"least 20 samples; got shape {np.shape(x)}"
        )
    _check_finite(arr, owner)
    n = arr.shape[0]
    if bins is None:
        bins = min(16, max(4, int(math.sqrt(n / 5))))
    bins = check_int("bins", bins, owner, minimum=2)
    if max_lag is None:
        max_lag = max(2, n // 10)
    max_lag = check_int("max_lag", max_lag, owner, minimum=2)
    if n - (max_lag + 1) < 2 * bins:  # the search reads lags up to max_lag + 1
        raise ValueError(
            f"{owner}: max_lag={max_lag} leaves fewer than {2 * bins} sample "
            f"pairs of a {n}-sample series"
        )
    ranks = np.empty(n, dtype=np.int64)
    ranks[np.argsort(arr, kind="stable")] = np.arange(n)
    codes = ranks * bins // n
    info = [_binned_mutual_information(codes, bins, lag) for lag in range(4)]
    half = info[0] / 2

    def smooth(lag):  # 1 <= lag, info known up to lag + 1
        return sum(info[lag - 1 : lag + 2]) / 3

    for lag in range(2, max_lag):  # info is known up to lag + 1, add lag + 2
        info.append(_binned_mutual_information(codes, bins, lag + 2))
        here = smooth(lag)
        if here <= half and here < smooth(lag - 1) and here <= smooth(lag + 1):
            return lag
    return None


@_one_program("axis", "normalize", "window")
def power_spectrum_error(
    pred: ArrayLike,
    truth: ArrayLike,
    axis: str = SCORING.spectrum_axis,
    normalize: bool = True,
    floor: float = 1e-12,
    window: str | None = "auto",
) -> Float[Array, ""]:
    """RMS difference of the log10 power spectra of ``pred`` and ``truth``.

    ``sqrt(mean_f (log10 P_pred(f) - log10 P_truth(f))²)`` over the
    frequencies of :func:`power_spectrum` (``axis`` as there), i.e. the typical
    factor (in decades) by which the forecast's spectrum is off: it checks the
    *climate* of a forecast (which frequencies carry energy) long after the
    trajectory itself has diverged. With ``normalize`` each spectrum is divided
    by its total power first (shape only); powers below ``floor`` times the
    true spectrum's maximum are clipped to that level so numerically empty
    bins do not dominate. Along time the zero-frequency bin (empty once the
    mean is removed) is left out; along space it is kept (the spatial mean).

    ``window="auto"`` (default) uses the Hann window along time, where a
    forecast window cut anywhere is not periodic and an unwindowed spectrum
    would leak (the error of one Lorenz forecast changed from 0.22 to 1.17
    between 15900 and 16000 steps), and none along space, where the fields of
    interest are periodic. ``None`` or ``"hann"`` choose explicitly.
    """
    pred, truth = _pair(pred, truth, "power_spectrum_error")
    if window == "auto":
        window = "hann" if axis == "time" else None
    # both spectra by one batched computation: equal records give equal
    # spectra to the bit, so a perfect forecast scores exactly 0
    _, pq = jax.vmap(lambda x: power_spectrum(x, axis=axis, window=window))(
        jnp.stack([pred, truth])
    )
    if axis == "time":  # the mean is removed: the zero-frequency bin is empty
        pq = pq[:, 1:]
    if normalize:
        pq = pq / jnp.sum(pq, axis=1, keepdims=True)
    clipped = jnp.maximum(pq, floor * jnp.max(pq[1]))
    # log10 of the ratio, not a difference of logs: in one compiled program
    # XLA's fused logarithms left ~2e-16 between equal spectra
    diff = jnp.log10(clipped[0] / clipped[1])
    return jnp.sqrt(jnp.mean(diff**2))


def memory_capacity(
    model,
    k_max: int,
    series: ArrayLike | None = None,
    test_size: float | int = 0.2,
    beta: float = 1e-4,
    seed=0,
    as_list: bool = False,
):
    """Short-term memory capacity of a model's reservoir (Jaeger 2001).

    The reservoir is driven by a scalar series ``u`` (default: ``10 * k_max``
    i.i.d. samples of ``U(-0.8, 0.8)`` drawn with ``seed``); for each delay
    ``k = 1..k_max`` a linear readout with bias (ridge ``beta``, bias not
    penalised) is trained to output ``u(t - k)`` from the state after
    ``u(t)``, on the first part of the series after a warm-up of ``k_max``
    steps, and scored on the last ``test_size`` part (a fraction, or a number
    of steps) by the squared correlation ``MC_k = corr(u(t-k), ŷ_k(t))²``.
    ``MC = Σ_k MC_k`` is at most ``k_max`` and, for a linear reservoir, at
    most the number of nodes. The protocol follows reservoirpy's
    ``memory_capacity`` (same default series and split).

    Parameters
    ----------
    model
        Any model with one input (``in_dim == 1``), a ``driver`` and a
        ``force(in_seq, res_state)`` method: regressors, forecasters.
    k_max : int
        Largest delay.
    series : array, optional
        ``(T,)`` or ``(T, 1)`` input series instead of the random one.
    test_size : float or int, default 0.2
    beta : float, default 1e-4
    seed : int, default 0
    as_list : bool, default False
        Return the ``(k_max,)`` per-delay capacities instead of their sum.

    Example
    -------
    >>> reg = ESNRegressor(1, 1, 100, Wr_spectral_radius=1.0, leak_rate=1.0, bias=0.0,
    ...                    embedding_scaling=1.0, Wr_density=0.1)
    >>> memory_capacity(reg, k_max=50)
    """
    from ._random import numpy_rng
    from ._validation import check_float, check_int

    owner = "memory_capacity"
    k_max = check_int("k_max", k_max, owner, minimum=1)
    check_float("beta", beta, owner, low=0.0)
    if getattr(model, "in_dim", None) != 1 or not hasattr(model, "force"):
        raise ValueError(
            f"{owner}: model must have one input (in_dim == 1) and a force method, "
            f"got {type(model).__name__} with in_dim={getattr(model, 'in_dim', None)}"
        )
    if series is None:
        series = numpy_rng(seed, owner).uniform(-0.8, 0.8, size=10 * k_max)
    u = jnp.asarray(series, model.dtype).reshape(-1)
    n = u.shape[0]
    if isinstance(test_size, float) and 0 < test_size < 1:
        n_test = int(round(n * test_size))
    elif isinstance(test_size, int) and not isinstance(test_size, bool):
        n_test = test_size
    else:
        raise ValueError(
            f"{owner}: test_size must be a fraction in (0, 1) or a number of steps, "
            f"got {test_size!r}"
        )
    if not 2 <= n_test <= n - 2 * k_max - 2:
        raise ValueError(
            f"{owner}: series of length {n} is too short for k_max={k_max} and "
            f"test_size={test_size!r} (need a warm-up of k_max steps, a training "
            f"part longer than k_max and at least 2 test steps)"
        )
    states = model.force(u[:, None], model.driver.default_state())
    return _delay_capacities(states.reshape(n, -1), u, beta, k_max, n_test, as_list)


@functools.partial(jax.jit, static_argnames=("k_max", "n_test", "as_list"))
def _delay_capacities(states, u, beta, k_max: int, n_test: int, as_list: bool):
    """:func:`memory_capacity`'s regressions of ``u(t - k)`` on the states
    (with a bias column), ``k = 1..k_max``, scored on the last ``n_test``
    rows (their squared correlations, or their sum): one program."""
    from ._ridge import RidgeStats, solve, stats_update

    n = states.shape[0]
    feats = jnp.concatenate([jnp.ones((n, 1), states.dtype), states], axis=1)
    # Row t targets u[t-1], ..., u[t-k_max]; rows before k_max are warm-up.
    idx = np.arange(n)[:, None] - np.arange(1, k_max + 1)[None, :]
    targets = u[np.maximum(idx, 0)]
    train = slice(k_max, n - n_test)
    stats = RidgeStats.zeros(feats.shape[1], k_max, None, feats.dtype)
    stats = stats_update(stats, feats[train], targets[train])
    w = solve(stats, jnp.asarray(beta, feats.dtype), intercept=True)
    pred = jnp.matmul(feats[n - n_test :], w.T, precision="highest")
    truth = targets[n - n_test :]
    pc, tc = pred - pred.mean(axis=0), truth - truth.mean(axis=0)
    corr2 = jnp.sum(pc * tc, axis=0) ** 2 / (
        jnp.sum(pc**2, axis=0) * jnp.sum(tc**2, axis=0)
    )
    return corr2 if as_list else jnp.sum(corr2)
