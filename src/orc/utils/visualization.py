"""Plotting helpers for reservoir-computing experiments.

Every function here draws into a new (or a given) matplotlib figure made through
:mod:`matplotlib.pyplot`, which leaves it the current figure (``plt.gcf()``), so the
caller decides whether to show it, save it or close it. The new plots return the
:class:`matplotlib.figure.Figure`; ORC 0.4's two return ``None`` as ORC's do (a
Jupyter cell that ends with the call shows the figure once, not twice): use
``plt.gcf()`` after them (``plt.gcf().savefig("series.png")``). Nothing here selects
a backend or touches matplotlib's global settings; figures use constrained layout per
figure.

Inputs may be NumPy or JAX arrays; they are copied to NumPy before plotting, so the
functions also work under ``jax_numpy_dtype_promotion="strict"``.

The first two functions, :func:`plot_time_series` and :func:`imshow_1D_spatiotemp`,
keep the call signature, return value (``None``) and resolution (the image at 200
dpi) of ORC 0.4 so existing scripts and notebooks show the same. The others
(:func:`plot_attractor`, :func:`plot_forecast`, :func:`plot_spatiotemporal_forecast`,
:func:`plot_confusion_matrix`) are new, as is the plain :func:`confusion_matrix`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
from matplotlib.figure import Figure

from .._defaults import SCORING

__all__ = [
    "confusion_matrix",
    "imshow_1D_spatiotemp",
    "plot_attractor",
    "plot_confusion_matrix",
    "plot_forecast",
    "plot_search",
    "plot_spatiotemporal_forecast",
    "plot_time_series",
]

LYAPUNOV_X_LABEL = r"Lyapunov times $\Lambda t$"
TIME_LABEL = r"$t$"
IMSHOW_DPI = 200
"""Resolution of :func:`imshow_1D_spatiotemp`'s figure (ORC 0.4's)."""

_TRUTH_STYLE = {"color": "black", "linestyle": "-", "linewidth": 1.6}
_FORECAST_STYLE = {"color": "tab:red", "linestyle": "--", "linewidth": 1.6}
_VPT_STYLE = {"color": "tab:green", "linestyle": ":", "linewidth": 2.0}
_WARMUP_STYLE = {"color": "0.6", "linestyle": "-", "linewidth": 1.4}
_FIELD_CMAP = "RdBu_r"
_ERROR_CMAP = "PuOr_r"


# --------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------


def _is_array(x: Any) -> bool:
    return isinstance(x, np.ndarray | jax.Array)


def _to_numpy(name: str, x: Any) -> np.ndarray:
    """Convert a NumPy/JAX array to a real floating NumPy array or raise TypeError."""
    if not _is_array(x):
        raise TypeError(f"{name} must be a NumPy or JAX array, got {type(x).__name__}.")
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    return arr.astype(np.float64, copy=False)


def _is_real_scalar(x: Any) -> bool:
    if isinstance(x, bool | np.bool_):
        return False
    if isinstance(x, int | float | np.integer | np.floating):
        return True
    return (
        _is_array(x)
        and np.ndim(x) == 0
        and np.issubdtype(np.asarray(x).dtype, np.number)
        and not np.issubdtype(np.asarray(x).dtype, np.complexfloating)
        and np.asarray(x).dtype != np.bool_
    )


def _real_scalar(name: str, x: Any, *, positive: bool = False) -> float:
    if not _is_real_scalar(x):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}.")
    value = float(x)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}.")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value}.")
    return value


def _string_list(name: str, value: Any, length: int, what: str) -> list[str]:
    """Check that ``value`` is a list/tuple of ``length`` entries and return a list."""
    if not isinstance(value, list | tuple):
        raise TypeError(
            f"{name} must be a list of strings, got {type(value).__name__}."
        )
    if len(value) != length:
        raise ValueError(
            f"{name} has {len(value)} entries but there are {length} {what}."
        )
    return [str(v) for v in value]


def _time_vector(name: str, t: Any, n_steps: int) -> np.ndarray:
    arr = _to_numpy(name, t)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}.")
    if arr.shape[0] != n_steps:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but the data have {n_steps} time steps."
        )
    return arr


def _symmetric_limit(*arrays: np.ndarray) -> float:
    """Largest finite absolute value over ``arrays`` (1.0 if there is none)."""
    vmax = 0.0
    for a in arrays:
        finite = np.abs(a[np.isfinite(a)])
        if finite.size:
            vmax = max(vmax, float(finite.max()))
    return vmax if vmax > 0 else 1.0


def _root_figure(ax: Any) -> Figure:
    try:
        return ax.get_figure(root=True)
    except TypeError:  # matplotlib < 3.10 has no ``root`` keyword
        return ax.figure


# --------------------------------------------------------------------------------------
# ORC 0.4 compatible plots
# --------------------------------------------------------------------------------------


def plot_time_series(
    U_lst,
    t=None,
    time_series_labels=None,
    line_formats=None,
    state_var_names=None,
    t_lim=None,
    figsize=(20, 8),
    x_label=TIME_LABEL,
    title=None,
    **plot_kwargs,
) -> None:
    """Draw one or several multivariate time series, one panel per state variable.

    All panels share the time axis. Several series (for example a reference
    trajectory and a forecast) are overlaid in every panel.

    Args:
        U_lst: Array of shape ``(T, d)`` or a list of such arrays, all of the same
            shape. NumPy or JAX.
        t: Times, array of shape ``(T,)``. Default ``None`` uses the step index
            ``0, 1, ..., T-1``.
        time_series_labels: List with one legend label per series. Default ``None``
            draws no legend.
        line_formats: List with one matplotlib format string (e.g. ``"-"``, ``"--r"``)
            per series. Default ``None`` draws solid lines.
        state_var_names: List of ``d`` names used as the y-axis labels. Default
            ``None`` leaves the y axes unlabelled.
        t_lim: Right end of the time axis (a number). Default ``None`` shows the
            whole series; the left end is always the first time.
        figsize: Figure size in inches. Default ``(20, 8)``.
        x_label: Label of the shared time axis. Default ``r"$t$"``.
        title: Title above the top panel. Default ``None``.
        **plot_kwargs: Passed to :meth:`matplotlib.axes.Axes.plot` for every line
            (``linewidth`` defaults to 2).

    Returns:
        ``None``, as in ORC 0.4: the new figure (``d`` axes) is pyplot's current
        figure, ``plt.gcf()``.

    Raises:
        TypeError: ``U_lst``, ``t``, a list argument or ``t_lim`` has the wrong type
            (or ``U_lst``/``t`` the wrong number of dimensions).
        ValueError: Shapes or list lengths do not match.

    Example:
        >>> U = np.random.randn(500, 3)
        >>> plot_time_series([U, U + 0.1], time_series_labels=["truth", "pred"],
        ...                  state_var_names=["x", "y", "z"])
        >>> plt.gcf().savefig("series.png")
    """
    if isinstance(U_lst, list | tuple):
        if len(U_lst) == 0 or not all(_is_array(U) and U.ndim == 2 for U in U_lst):
            raise TypeError(
                "U_lst must be a 2-D NumPy/JAX array or a non-empty list of them."
            )
        series = [_to_numpy("U_lst", U) for U in U_lst]
        if any(U.shape != series[0].shape for U in series):
            shapes = [U.shape for U in series]
            raise ValueError(f"All arrays in U_lst must share one shape, got {shapes}.")
    else:
        if not _is_array(U_lst) or U_lst.ndim != 2:
            raise TypeError(
                "U_lst must be a 2-D NumPy/JAX array or a non-empty list of them."
            )
        series = [_to_numpy("U_lst", U_lst)]
    n_steps, n_vars = series[0].shape
    n_series = len(series)

    if t is not None:
        if not _is_array(t) or t.ndim != 1:
            raise TypeError("t must be a 1-D NumPy or JAX array.")
        if t.shape[0] != n_steps:
            raise ValueError(
                f"t has {t.shape[0]} entries but U_lst has {n_steps} time points."
            )
        t = _to_numpy("t", t)
    else:
        t = np.arange(n_steps, dtype=np.float64)

    if time_series_labels is not None:
        time_series_labels = _string_list(
            "time_series_labels", time_series_labels, n_series, "time series"
        )
    if line_formats is not None:
        line_formats = _string_list("line_formats", line_formats, n_series, "series")
    if state_var_names is not None:
        state_var_names = _string_list(
            "state_var_names", state_var_names, n_vars, "state variables"
        )
    if t_lim is not None:
        if not _is_real_scalar(t_lim):
            raise TypeError(f"t_lim must be a number, got {type(t_lim).__name__}.")
        t_lim = float(t_lim)
    else:
        t_lim = float(t[-1])

    plot_kwargs.setdefault("linewidth", 2)
    labels = time_series_labels or [None] * n_series
    formats = line_formats or ["-"] * n_series

    fig, axs = plt.subplots(
        n_vars, 1, figsize=figsize, sharex=True, squeeze=False, layout="constrained"
    )
    axs = axs[:, 0]
    for i, ax in enumerate(axs):
        for U, fmt, label in zip(series, formats, labels, strict=True):
            ax.plot(t, U[:, i], fmt, label=label, **plot_kwargs)
        if state_var_names is not None:
            ax.set_ylabel(state_var_names[i])
    left = float(t[0])
    if t_lim != left:
        axs[0].set_xlim(left, t_lim)
    if time_series_labels is not None:
        axs[0].legend(loc="upper right")
    axs[-1].set_xlabel(x_label)
    if title is not None:
        axs[0].set_title(title, fontsize=14)
    return None


def imshow_1D_spatiotemp(
    U,
    tN,
    domain=(0, 1),
    figsize=(20, 6),
    title=None,
    x_label=TIME_LABEL,
    **imshow_kwargs,
) -> None:
    """Show a field on a 1-D spatial domain as a time-space image.

    Time runs along the horizontal axis from 0 to ``tN``, space along the vertical
    axis over ``domain``; a colour bar labelled :math:`u` gives the values.

    Args:
        U: Array of shape ``(T, Nx)``: ``T`` snapshots of ``Nx`` grid values.
        tN: Final time (a number); the image spans ``[0, tN]`` in time.
        domain: ``(x_min, x_max)`` of the spatial grid. Default ``(0, 1)``.
        figsize: Figure size in inches. Default ``(20, 6)``.
        title: Axes title. Default ``None``.
        x_label: Label of the time axis. Default ``r"$t$"``.
        **imshow_kwargs: Passed to :meth:`matplotlib.axes.Axes.imshow`; defaults are
            ``aspect="auto"``, ``origin="lower"``, ``cmap="RdGy"`` and the extent
            given by ``tN`` and ``domain``.

    The figure is drawn at 200 dpi, as ORC 0.4 draws it.

    Returns:
        ``None``, as in ORC 0.4: the new figure (image axes plus colour bar axes)
        is pyplot's current figure, ``plt.gcf()``.

    Raises:
        TypeError: ``U`` is not a 2-D array, ``tN`` is not a number, or ``domain``
            is not a pair of numbers.

    Example:
        >>> x = np.linspace(0, 22, 64)
        >>> U = np.sin(x[None, :] - 0.5 * np.arange(200)[:, None] * 0.1)
        >>> imshow_1D_spatiotemp(U, tN=20.0, domain=(0, 22))
    """
    if not _is_array(U) or U.ndim != 2:
        raise TypeError("U must be a 2-D NumPy or JAX array of shape (T, Nx).")
    U = _to_numpy("U", U)
    if not _is_real_scalar(tN):
        raise TypeError(f"tN must be a number, got {type(tN).__name__}.")
    if not isinstance(domain, tuple | list) or len(domain) != 2:
        raise TypeError("domain must be a tuple (x_min, x_max) of length 2.")
    if not all(_is_real_scalar(v) for v in domain):
        raise TypeError("Both entries of domain must be numbers.")

    imshow_kwargs.setdefault("aspect", "auto")
    imshow_kwargs.setdefault("origin", "lower")
    imshow_kwargs.setdefault("cmap", "RdGy")
    imshow_kwargs.setdefault(
        "extent", [0.0, float(tN), float(domain[0]), float(domain[1])]
    )

    fig, ax = plt.subplots(figsize=figsize, dpi=IMSHOW_DPI, layout="constrained")
    im = ax.imshow(U.T, **imshow_kwargs)
    ax.set_xlabel(x_label)
    ax.set_ylabel(r"$x$")
    if title is not None:
        ax.set_title(title)
    fig.colorbar(im, ax=ax, pad=0.01, label=r"$u$")
    return None


# --------------------------------------------------------------------------------------
# new plots
# --------------------------------------------------------------------------------------


def plot_attractor(
    U, labels=None, title=None, ax=None, state_var_names=None, **plot_kwargs
) -> Figure:
    """Draw a 3-D phase portrait from the first three state variables.

    Args:
        U: Trajectory of shape ``(T, d)`` with ``d >= 3``, or a list of such arrays
            (lengths ``T`` may differ), e.g. ``[truth, forecast]``. Only columns
            0, 1, 2 are drawn.
        labels: A legend label per trajectory (list of strings; a single string is
            accepted for a single trajectory). Default ``None``: no legend.
        title: Axes title. Default ``None``.
        ax: Existing 3-D axes (``projection="3d"``) to draw into. Default ``None``
            creates a new 8x7-inch figure.
        state_var_names: Names of the three plotted variables for the axis labels.
            Default ``None`` uses ``x``, ``y``, ``z``.
        **plot_kwargs: Passed to :meth:`Axes3D.plot` for every trajectory
            (``linewidth`` defaults to 0.8).

    Returns:
        The :class:`matplotlib.figure.Figure` holding the axes.

    Raises:
        TypeError: ``U`` is not an array or list of arrays, ``labels`` or
            ``state_var_names`` is not a list, or ``ax`` is not a 3-D axes.
        ValueError: An array is not 2-D with at least three columns, or a list has
            the wrong length.

    Example:
        >>> fig = plot_attractor([truth, forecast], labels=["truth", "forecast"])
        >>> fig.savefig("attractor.png")
    """
    if isinstance(U, list | tuple):
        if len(U) == 0:
            raise ValueError("U must hold at least one trajectory.")
        trajectories = [_to_numpy(f"U[{i}]", u) for i, u in enumerate(U)]
        names = [f"U[{i}]" for i in range(len(U))]
    else:
        trajectories = [_to_numpy("U", U)]
        names = ["U"]
    for name, traj in zip(names, trajectories, strict=True):
        if traj.ndim != 2 or traj.shape[1] < 3 or traj.shape[0] == 0:
            raise ValueError(
                f"{name} must have shape (T, d) with T >= 1 and d >= 3, "
                f"got {traj.shape}."
            )
    if labels is not None:
        if isinstance(labels, str) and len(trajectories) == 1:
            labels = [labels]
        labels = _string_list("labels", labels, len(trajectories), "trajectories")
    if state_var_names is None:
        axis_names = [r"$x$", r"$y$", r"$z$"]
    else:
        if not isinstance(state_var_names, list | tuple):
            raise TypeError("state_var_names must be a list of strings.")
        if len(state_var_names) < 3:
            raise ValueError(
                "state_var_names must name at least the three plotted variables, "
                f"got {len(state_var_names)}."
            )
        axis_names = [str(s) for s in state_var_names[:3]]

    if ax is None:
        fig = plt.figure(figsize=(8, 7), layout="constrained")
        ax = fig.add_subplot(projection="3d")
    else:
        if getattr(ax, "name", None) != "3d":
            raise TypeError("ax must be a 3-D axes created with projection='3d'.")
        fig = _root_figure(ax)

    plot_kwargs.setdefault("linewidth", 0.8)
    for i, traj in enumerate(trajectories):
        label = labels[i] if labels is not None else None
        ax.plot(traj[:, 0], traj[:, 1], traj[:, 2], label=label, **plot_kwargs)
    ax.set_xlabel(axis_names[0])
    ax.set_ylabel(axis_names[1])
    ax.set_zlabel(axis_names[2])
    if labels is not None:
        ax.legend(loc="upper left")
    if title is not None:
        ax.set_title(title)
    return fig


def _normalised_error(truth: np.ndarray, forecast: np.ndarray) -> np.ndarray:
    """e(t) = ||forecast(t) - truth(t)|| / sqrt(mean_t ||truth(t)||^2)."""
    scale = np.sqrt(np.mean(np.sum(truth**2, axis=1)))
    if not np.isfinite(scale) or scale == 0.0:
        raise ValueError(
            "truth must be finite and not identically zero: the normalised error "
            "divides by its root-mean-square norm."
        )
    return np.linalg.norm(forecast - truth, axis=1) / scale


def _first_exceedance(error: np.ndarray, threshold: float) -> int | None:
    """Index of the first error above ``threshold`` (NaN counts as above), or None."""
    above = ~(error <= threshold)
    return int(np.argmax(above)) if above.any() else None


def _forecast_axis(
    n_steps: int, t: Any, dt: Any, lyapunov_exponent: Any
) -> tuple[np.ndarray, str, str]:
    """Return x values, x-axis label and unit symbol for the VPT label."""
    if t is not None and dt is not None:
        raise ValueError("Give either t or dt, not both.")
    if t is not None:
        time = _time_vector("t", t, n_steps)
    elif dt is not None:
        time = np.arange(n_steps, dtype=np.float64) * _real_scalar(
            "dt", dt, positive=True
        )
    else:
        time = None
    if lyapunov_exponent is not None:
        lam = _real_scalar("lyapunov_exponent", lyapunov_exponent, positive=True)
        if time is None:
            raise ValueError(
                "lyapunov_exponent needs the time step: pass t or dt as well."
            )
        return time * lam, LYAPUNOV_X_LABEL, " Λt"
    if time is None:
        return np.arange(n_steps, dtype=np.float64), "time step", " steps"
    return time, r"$t$", ""


def _warmup_axis(
    x: np.ndarray, n_warmup: int, t: Any, dt: Any, lyapunov_exponent: Any
) -> np.ndarray:
    """x values of ``n_warmup`` samples just before ``x[0]``, one sampling step apart."""
    scale = 1.0 if lyapunov_exponent is None else float(lyapunov_exponent)
    if dt is not None:
        step = float(dt) * scale
    elif x.shape[0] > 1:
        step = float(x[1] - x[0])
    elif t is None:
        step = scale  # one time step
    else:
        raise ValueError(
            "warmup with a one-sample t needs the sampling step: pass dt instead of t."
        )
    return x[0] - step * np.arange(n_warmup, 0, -1, dtype=np.float64)


def plot_forecast(
    truth,
    forecast,
    t=None,
    dt=None,
    lyapunov_exponent=None,
    threshold=SCORING.threshold,
    state_var_names=None,
    title=None,
    warmup=None,
) -> Figure:
    """Compare a forecast with the truth and mark the valid prediction time.

    One panel per state variable shows the truth (solid) and the forecast (dashed).
    A bottom panel shows the normalised error

    .. math:: e(t) = \\frac{\\lVert \\hat u(t) - u(t) \\rVert}
                          {\\sqrt{\\langle \\lVert u \\rVert^2 \\rangle_t}},

    the ``threshold`` as a horizontal line, and the valid prediction time (VPT), the
    first time with ``e(t) > threshold`` (a non-finite error counts as above), as a
    vertical line in every panel. If the error never exceeds the threshold the line
    sits at the end of the window and the legend reads "VPT ≥ ...".

    The x axis is in Lyapunov times :math:`\\Lambda t` when ``lyapunov_exponent`` is
    given (this needs ``t`` or ``dt``), else in time units (``t`` or ``dt``), else
    in time steps. The VPT in the legend is measured from the first sample.

    ``warmup``, the data the model was driven with before it forecast, is drawn
    before the forecast's first sample in a muted grey (legend "warm-up"), its
    last row one sampling step before the first forecast step: with ``dt`` (the
    forecast then starts at 0) it lies at negative times. ``truth=None`` draws
    the forecast (and warm-up) alone, without error panel or VPT.

    Args:
        truth: Reference trajectory, shape ``(T, d)`` (or ``(T,)`` for ``d = 1``),
            or ``None`` when there is none.
        forecast: Predicted trajectory, same shape as ``truth``.
        t: Times of the samples, shape ``(T,)``. Default ``None``.
        dt: Time step (positive number), used when ``t`` is not given; the times are
            then ``0, dt, 2 dt, ...``. Default ``None``. Give ``t`` or ``dt``, not
            both.
        lyapunov_exponent: Largest Lyapunov exponent (positive). Default ``None``.
        threshold: Error level that ends the valid prediction. Default ``0.4``.
        state_var_names: ``d`` names for the y axes. Default ``None`` gives
            ``u_0, u_1, ...``.
        title: Figure title. Default ``None``.
        warmup: Warm-up data, shape ``(W, d)`` (or ``(W,)`` for ``d = 1``), drawn
            at the ``W`` sampling steps before the forecast (spacing ``dt``, else
            that of ``t``, else one step). Default ``None`` draws none.

    Returns:
        The new :class:`matplotlib.figure.Figure` with ``d + 1`` axes (the error
        panel last), or ``d`` without ``truth``. The top panel's legend has the
        entries warm-up (when given), truth, forecast and the VPT marker.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: Shapes disagree, a number is out of range, ``t`` and ``dt`` are
            both given, ``lyapunov_exponent`` is given without ``t``/``dt``, or
            ``truth`` is identically zero.

    Example:
        >>> fig = plot_forecast(truth, forecast, dt=0.01, lyapunov_exponent=0.9,
        ...                     state_var_names=["x", "y", "z"], warmup=U[-200:])
        >>> fig.savefig("forecast.png")
    """
    forecast_arr = _to_numpy("forecast", forecast)
    if forecast_arr.ndim == 1:
        forecast_arr = forecast_arr[:, None]
    if truth is None:
        if forecast_arr.ndim != 2 or forecast_arr.shape[0] == 0:
            raise ValueError(
                f"forecast must have shape (T, d) with T >= 1, got {np.shape(forecast)}."
            )
        truth_arr = None
    else:
        truth_arr = _to_numpy("truth", truth)
        if truth_arr.ndim == 1:
            truth_arr = truth_arr[:, None]
        if truth_arr.ndim != 2 or truth_arr.shape[0] == 0:
            raise ValueError(
                f"truth must have shape (T, d) with T >= 1, got {np.shape(truth)}."
            )
        if forecast_arr.shape != truth_arr.shape:
            raise ValueError(
                f"forecast has shape {np.shape(forecast)} but truth has shape "
                f"{np.shape(truth)}; they must match."
            )
    n_steps, n_vars = forecast_arr.shape
    x, x_label, unit = _forecast_axis(n_steps, t, dt, lyapunov_exponent)
    threshold = _real_scalar("threshold", threshold, positive=True)
    if state_var_names is None:
        names = [rf"$u_{{{i}}}$" for i in range(n_vars)]
    else:
        names = _string_list(
            "state_var_names", state_var_names, n_vars, "state variables"
        )
    warm_arr = x_warm = None
    if warmup is not None:
        warm_arr = _to_numpy("warmup", warmup)
        if warm_arr.ndim == 1:
            warm_arr = warm_arr[:, None]
        if warm_arr.ndim != 2 or warm_arr.shape[0] == 0 or warm_arr.shape[1] != n_vars:
            raise ValueError(
                f"warmup must have shape (W, {n_vars}) with W >= 1 (the forecast's "
                f"{n_vars} variables), got {np.shape(warmup)}."
            )
        x_warm = _warmup_axis(x, warm_arr.shape[0], t, dt, lyapunov_exponent)

    if truth_arr is not None:
        error = _normalised_error(truth_arr, forecast_arr)
        k = _first_exceedance(error, threshold)
        if k is None:
            x_vpt = float(x[-1])
            vpt_label = f"VPT ≥ {x_vpt - x[0]:.3g}{unit}"
        else:
            x_vpt = float(x[k])
            vpt_label = f"VPT = {x_vpt - x[0]:.3g}{unit}"

    n_axes = n_vars + (truth_arr is not None)
    height = min(2.0 * n_axes + 0.6, 16.0)
    fig, axs = plt.subplots(
        n_axes, 1, figsize=(11, height), sharex=True, layout="constrained"
    )
    axs = np.atleast_1d(axs)
    for i in range(n_vars):
        ax = axs[i]
        if warm_arr is not None:
            ax.plot(
                x_warm, warm_arr[:, i], label="warm-up", gid="warmup", **_WARMUP_STYLE
            )
        if truth_arr is not None:
            ax.plot(x, truth_arr[:, i], label="truth", **_TRUTH_STYLE)
        ax.plot(x, forecast_arr[:, i], label="forecast", **_FORECAST_STYLE)
        if truth_arr is not None:
            ax.axvline(
                x_vpt,
                label=vpt_label if i == 0 else "_nolegend_",
                gid="vpt",
                **_VPT_STYLE,
            )
        ax.set_ylabel(names[i])
    # Legends sit just above their panels so they never hide the curves.
    above = {"loc": "lower left", "bbox_to_anchor": (0.0, 1.0), "borderaxespad": 0.2}
    axs[0].legend(ncols=4, fontsize="small", frameon=False, **above)
    left = float(x_warm[0]) if x_warm is not None else float(x[0])
    right = float(x[-1]) if n_steps > 1 or x_warm is not None else float(x[0]) + 1.0
    if truth_arr is None:
        axs[-1].set_xlabel(x_label)
        axs[-1].set_xlim(left, right)
        if title is not None:
            fig.suptitle(title)
        return fig

    ax_err = axs[-1]
    ax_err.plot(x, error, color="tab:blue", linewidth=1.6, label=r"error $e(t)$")
    ax_err.axhline(
        threshold,
        color="gray",
        linestyle="--",
        linewidth=1.2,
        label=f"threshold = {threshold:g}",
        gid="threshold",
    )
    ax_err.axvline(x_vpt, label="_nolegend_", gid="vpt", **_VPT_STYLE)
    ax_err.set_ylabel("normalised error")
    finite = error[np.isfinite(error)]
    top = float(finite.max()) * 1.05 if finite.size else 0.0
    upper = max(top, 1.5 * threshold)
    ax_err.set_ylim(-0.02 * upper, upper)  # keep an error of ~0 visible off the spine
    ax_err.legend(ncols=2, fontsize="small", frameon=False, **above)
    ax_err.set_xlabel(x_label)
    ax_err.set_xlim(left, right)
    if title is not None:
        fig.suptitle(title)
    return fig


def plot_spatiotemporal_forecast(
    truth, forecast, t=None, domain=(0, 1), lyapunov_exponent=None, title=None
) -> Figure:
    """Show truth, forecast and their difference for a field on a 1-D domain.

    Three stacked time-space images share the time axis: the truth, the forecast
    (both on one symmetric colour scale ``[-m, m]`` with ``m`` the largest absolute
    value of either, one colour bar) and the error ``forecast - truth`` on its own
    symmetric diverging scale with its own colour bar.

    Args:
        truth: Reference field, shape ``(T, Nx)``.
        forecast: Predicted field, same shape.
        t: Times, shape ``(T,)``. Default ``None`` uses the step index.
        domain: ``(x_min, x_max)`` of the spatial grid. Default ``(0, 1)``.
        lyapunov_exponent: Largest Lyapunov exponent (positive); the time axis then
            shows ``t * lyapunov_exponent`` in Lyapunov times (needs ``t``).
            Default ``None``.
        title: Figure title. Default ``None``.

    Returns:
        The new :class:`matplotlib.figure.Figure`: three image axes followed by two
        colour bar axes.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: Shapes disagree, ``domain`` is empty, or ``lyapunov_exponent`` is
            given without ``t``.

    Example:
        >>> fig = plot_spatiotemporal_forecast(U_true, U_pred, t=t, domain=(0, 22),
        ...                                    lyapunov_exponent=0.043)
    """
    truth_arr = _to_numpy("truth", truth)
    forecast_arr = _to_numpy("forecast", forecast)
    if truth_arr.ndim != 2 or min(truth_arr.shape) == 0:
        raise ValueError(f"truth must have shape (T, Nx), got {truth_arr.shape}.")
    if forecast_arr.shape != truth_arr.shape:
        raise ValueError(
            f"forecast has shape {forecast_arr.shape} but truth has shape "
            f"{truth_arr.shape}; they must match."
        )
    n_steps = truth_arr.shape[0]
    if not isinstance(domain, tuple | list) or len(domain) != 2:
        raise TypeError("domain must be a pair (x_min, x_max).")
    if not all(_is_real_scalar(v) for v in domain):
        raise TypeError("Both entries of domain must be numbers.")
    x_min, x_max = float(domain[0]), float(domain[1])
    if x_max <= x_min:
        raise ValueError(f"domain must satisfy x_min < x_max, got {tuple(domain)}.")

    if t is not None:
        time = _time_vector("t", t, n_steps)
    else:
        time = None
    if lyapunov_exponent is not None:
        lam = _real_scalar("lyapunov_exponent", lyapunov_exponent, positive=True)
        if time is None:
            raise ValueError("lyapunov_exponent needs the times: pass t as well.")
        x_axis, x_label = time * lam, LYAPUNOV_X_LABEL
    elif time is not None:
        x_axis, x_label = time, TIME_LABEL
    else:
        x_axis, x_label = np.arange(n_steps, dtype=np.float64), "time step"
    x_right = float(x_axis[-1]) if n_steps > 1 else float(x_axis[0]) + 1.0
    extent = [float(x_axis[0]), x_right, x_min, x_max]

    error = forecast_arr - truth_arr
    vmax = _symmetric_limit(truth_arr, forecast_arr)
    emax = _symmetric_limit(error)

    fig, axs = plt.subplots(
        3, 1, figsize=(12, 8), sharex=True, sharey=True, layout="constrained"
    )
    common = {"aspect": "auto", "origin": "lower", "extent": extent}
    im_truth = axs[0].imshow(
        truth_arr.T, cmap=_FIELD_CMAP, vmin=-vmax, vmax=vmax, **common
    )
    axs[1].imshow(forecast_arr.T, cmap=_FIELD_CMAP, vmin=-vmax, vmax=vmax, **common)
    im_err = axs[2].imshow(error.T, cmap=_ERROR_CMAP, vmin=-emax, vmax=emax, **common)
    panel_names = ["truth", "forecast", "error (forecast − truth)"]
    for ax, name in zip(axs, panel_names, strict=True):
        ax.set_title(name, loc="left", fontsize="medium")
        ax.set_ylabel(r"$x$")
    axs[-1].set_xlabel(x_label)
    fig.colorbar(im_truth, ax=list(axs[:2]), pad=0.01, label=r"$u$")
    fig.colorbar(im_err, ax=axs[2], pad=0.01, label=r"$\hat u - u$")
    if title is not None:
        fig.suptitle(title)
    return fig


def _label_vector(name: str, labels: Any) -> np.ndarray:
    if isinstance(labels, str) or labels is None:
        raise TypeError(f"{name} must be a 1-D array or sequence of integer labels.")
    if not _is_array(labels):
        if not isinstance(labels, Sequence):
            raise TypeError(
                f"{name} must be a 1-D array or sequence of integer labels, "
                f"got {type(labels).__name__}."
            )
        labels = np.asarray(labels)
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}.")
    if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(
            f"{name} must hold integer class labels, got dtype {arr.dtype}."
        )
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative, found {int(arr.min())}.")
    return arr


def confusion_matrix(true_labels, pred_labels, n_classes=None) -> np.ndarray:
    """Count how often each true class is predicted as each class.

    Args:
        true_labels: Integer class labels in ``0 .. n_classes-1``, shape ``(N,)``
            (NumPy/JAX array or sequence).
        pred_labels: Predicted labels, same shape and range.
        n_classes: Number of classes. Default ``None`` uses one more than the largest
            label found in either input.

    Returns:
        ``int64`` NumPy array ``C`` of shape ``(n_classes, n_classes)`` where
        ``C[i, j]`` is the number of samples of true class ``i`` predicted as ``j``.

    Raises:
        TypeError: Labels are not integers or ``n_classes`` is not an integer.
        ValueError: Shapes differ, labels are negative or ``>= n_classes``, or no
            labels are given and ``n_classes`` is ``None``.

    Example:
        >>> confusion_matrix([0, 1, 1, 2], [0, 1, 2, 2])
        array([[1, 0, 0],
               [0, 1, 1],
               [0, 0, 1]])
    """
    y_true = _label_vector("true_labels", true_labels)
    y_pred = _label_vector("pred_labels", pred_labels)
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"pred_labels has shape {y_pred.shape} but true_labels has shape "
            f"{y_true.shape}; they must match."
        )
    if n_classes is None:
        if y_true.size == 0:
            raise ValueError("n_classes must be given when there are no labels.")
        n = int(max(y_true.max(), y_pred.max())) + 1
    else:
        if isinstance(n_classes, bool | np.bool_) or not isinstance(
            n_classes, int | np.integer
        ):
            raise TypeError(
                f"n_classes must be an integer, got {type(n_classes).__name__}."
            )
        n = int(n_classes)
        if n < 1:
            raise ValueError(f"n_classes must be at least 1, got {n}.")
        for name, arr in (("true_labels", y_true), ("pred_labels", y_pred)):
            if arr.size and arr.max() >= n:
                raise ValueError(
                    f"{name} contains label {int(arr.max())} but n_classes is {n}."
                )
    counts = np.bincount(y_true * n + y_pred, minlength=n * n)
    return counts.reshape(n, n).astype(np.int64)


def plot_confusion_matrix(
    true_labels,
    pred_labels,
    n_classes=None,
    class_names=None,
    normalize=False,
    title=None,
) -> Figure:
    """Draw the confusion matrix as an annotated heat map.

    Rows are true classes, columns predicted classes. Each cell shows the count or,
    with ``normalize=True``, the fraction of its row (the per-class recall on the
    diagonal). Cells are annotated for up to 25 classes.

    Args:
        true_labels: Integer class labels, shape ``(N,)``.
        pred_labels: Predicted labels, shape ``(N,)``.
        n_classes: Number of classes. Default ``None``: inferred from the labels.
        class_names: ``n_classes`` names for the ticks. Default ``None`` uses
            ``0, 1, ...``.
        normalize: Divide each row by its total (empty rows stay 0). Default
            ``False``.
        title: Axes title. Default ``None``.

    Returns:
        The new :class:`matplotlib.figure.Figure` (heat map axes plus colour bar).

    Raises:
        TypeError, ValueError: As :func:`confusion_matrix`, and for a wrong
            ``class_names`` or a non-boolean ``normalize``.

    Example:
        >>> fig = plot_confusion_matrix(y_true, y_pred, class_names=["a", "b", "c"],
        ...                             normalize=True)
    """
    if not isinstance(normalize, bool | np.bool_):
        raise TypeError(
            f"normalize must be True or False, got {type(normalize).__name__}."
        )
    counts = confusion_matrix(true_labels, pred_labels, n_classes)
    n = counts.shape[0]
    if class_names is None:
        names = [str(i) for i in range(n)]
    else:
        names = _string_list("class_names", class_names, n, "classes")

    if normalize:
        totals = counts.sum(axis=1, keepdims=True)
        values = np.divide(
            counts,
            totals,
            out=np.zeros(counts.shape, dtype=np.float64),
            where=totals > 0,
        )
        vmax, cbar_label = 1.0, "fraction of true class"
    else:
        values = counts.astype(np.float64)
        vmax, cbar_label = max(float(values.max()), 1.0), "count"

    side = min(max(4.0, 0.55 * n + 2.5), 14.0)
    fig, ax = plt.subplots(figsize=(side + 1.2, side), layout="constrained")
    im = ax.imshow(values, cmap="Blues", vmin=0.0, vmax=vmax)
    fig.colorbar(im, ax=ax, label=cbar_label, shrink=0.85)
    ax.set_xticks(np.arange(n), labels=names)
    ax.set_yticks(np.arange(n), labels=names)
    if max(len(s) for s in names) > 3:
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    if n <= 25:
        fontsize = 10 if n <= 10 else 7
        for i in range(n):
            for j in range(n):
                v = values[i, j]
                text = f"{v:.2f}" if normalize else f"{int(counts[i, j])}"
                r, g, b, _ = im.cmap(im.norm(v))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=fontsize,
                    color="white" if dark else "black",
                )
    if title is not None:
        ax.set_title(title)
    return fig


# --------------------------------------------------------------------------------------
# hyperparameter search
# --------------------------------------------------------------------------------------


def _one_two_three_five(value: float, _position=None) -> str:
    """A log axis's tick label: ``value`` as a plain number where it is 1, 2,
    3 or 5 times a power of ten, else none."""
    if not value > 0:
        return ""
    mantissa = value / 10 ** np.floor(np.log10(value))
    return f"{value:g}" if np.isclose(mantissa, (1, 2, 3, 5)).any() else ""


def plot_search(result, path=None) -> Figure | None:
    """A search's report (:meth:`orc.tune.SearchResult.plot`): the score of
    every candidate against each hyperparameter that varied (log axes for the
    ridge strength and the log-uniform ones; failed candidates as red crosses on
    the lower edge) and the best score so far against the candidates tried.

    With ``path`` the figure is saved there (200 dpi), closed and ``None``
    returned; else it is returned (the current pyplot figure).
    """
    rows = result.rows
    fixed = {
        "id",
        "trial",
        "trajectory",
        "seed",
        "score",
        "status",
        "reason",
        "seconds",
    }
    names = [c for c in result.columns if c not in fixed and c != result.metric]
    # a panel per hyperparameter that took more than one value (a fixed
    # ridge strength or a one-value choice says nothing against the score)
    names = [
        n
        for n in names
        if isinstance(rows[0][n], (int, float)) and len({r[n] for r in rows}) > 1
    ]
    n_panels = len(names) + 1
    cols = min(n_panels, 3)
    lines = -(-n_panels // cols)
    fig, axes = plt.subplots(
        lines, cols, figsize=(4.2 * cols, 3.3 * lines), layout="constrained",
        squeeze=False,
    )  # fmt: skip
    axes = axes.ravel()
    ok = np.array([r["status"] == "ok" for r in rows])
    scores = np.array([r["score"] for r in rows], float)
    finite = scores[ok & np.isfinite(scores)]
    low = float(finite.min()) if finite.size else 0.0
    label = result.metric.upper()
    for ax, name in zip(axes[: len(names)], names, strict=True):
        x = np.array([r[name] for r in rows], float)
        ax.scatter(x[ok], scores[ok], s=12, alpha=0.7, color="tab:blue")
        if (~ok).any():
            ax.scatter(x[~ok], np.full((~ok).sum(), low), marker="x", s=18,
                       color="tab:red", label="failed")  # fmt: skip
            ax.legend(loc="best", fontsize="small")
        if name in getattr(result, "log_scaled", ()) and np.all(x > 0):
            ax.set_xscale("log")
            if x.max() < 10 * x.min():
                # within a decade matplotlib labels the minor ticks too, as
                # 5x10^-1: plain numbers, and only 1, 2, 3 and 5 times a
                # power of ten (the ticks crowd towards the decade's end)
                plain = mticker.FuncFormatter(_one_two_three_five)
                ax.xaxis.set_major_formatter(plain)
                ax.xaxis.set_minor_formatter(plain)
        ax.set_xlabel(name)
        ax.set_ylabel(label)
        if result.best is not None:
            ax.axvline(result.best[name], color="tab:green", linestyle=":")
    ax = axes[len(names)]
    ax.plot(np.arange(1, len(rows) + 1), result.best_so_far(), color="black")
    ax.set_xlabel("candidates tried")
    ax.set_ylabel(f"best {label} so far")
    for extra in axes[n_panels:]:
        extra.set_visible(False)
    best = result.best
    title = f"{len(rows)} candidates, {int(ok.sum())} ok"
    if best is not None:
        title += f"; best {label} {best['score']:.3g}"
    fig.suptitle(title)
    if path is None:
        return fig
    fig.savefig(path, dpi=IMSHOW_DPI)
    plt.close(fig)
    return None
