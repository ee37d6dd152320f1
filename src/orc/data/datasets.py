"""Standard benchmark series of reservoir computing, under the names reservoirpy uses.

Everything is generated on the fly (nothing is downloaded). The functions:

============================  ==========================  ===========================
function                      kind                        returns
============================  ==========================  ===========================
:func:`mackey_glass`          delay differential eq.      ``x`` ``(n_timesteps, 1)``
:func:`narma`                 input-driven recursion      ``(u, y)``, each ``(n, 1)``
:func:`henon_map`             2-D map                     ``(n_timesteps, 2)``
:func:`logistic_map`          1-D map                     ``(n_timesteps, 1)``
:func:`mso`                   sum of sines                ``(n_timesteps, 1)``
:func:`double_scroll`         ODE                         ``(us, ts)``
:func:`multiscroll`           ODE                         ``(us, ts)``
============================  ==========================  ===========================

Conventions:

- Shapes: every series is ``(time, dim)``, also when ``dim == 1``.
- Times: the two ODE systems follow :mod:`orc.data.integrators` (same shared
  diffrax solve, same defaults and ``**diffeqsolve_kwargs``) and return
  ``(us, ts)`` with ``ts = arange(0, tN, dt)``. The other functions are sampled
  on a fixed grid and return only values: row ``i`` of :func:`mackey_glass` is
  ``x(i h)``; the maps, :func:`narma` and :func:`mso` are indexed by the integer
  step ``i`` (``mso`` evaluates its sines at ``t = i``). Row 0 is always the
  initial condition (``x0``) where there is one.
- dtype: an explicit ``dtype`` argument wins; otherwise the dtype of the initial
  condition (``x0``, ``u0``, ``history`` or ``u``) when it is a float array;
  otherwise JAX's default float (float64 when ``jax_enable_x64`` is on, else
  float32). Parameters are cast to that dtype, so float32 runs stay float32. The
  ODEs take their dtype from ``u0``, exactly as :mod:`orc.data.integrators`.
- Randomness: :func:`narma` (its input ``u``) and :func:`mackey_glass` (a random
  history, only when ``seed`` is given) draw with ``jax.random`` from ``seed``,
  an int or a JAX key (``jax.random.key``); the same seed gives the same series
  (for a given dtype). A key may be traced (e.g. ``jax.vmap`` over keys).
- jit: every function works inside ``jax.jit``. Arguments that set array sizes or
  loop lengths must be concrete (``static_argnames`` in ``jax.jit``):
  ``n_timesteps`` everywhere, ``tau``, ``h`` and ``substeps`` of
  :func:`mackey_glass`, ``order`` of :func:`narma`, ``n_components`` and
  ``normalize`` of :func:`mso`, ``tN`` and ``dt`` of the ODEs, ``dtype`` and an
  int ``seed``. Everything else (parameters such as ``a``, ``b``, ``r``,
  initial conditions, ``history``, ``u``, ``freqs``, a key ``seed``) may be a
  traced array. Each function compiles once per static configuration and dtype;
  new parameter values reuse the compiled code.
- Errors: wrong types, shapes or ranges raise ``TypeError``/``ValueError`` naming
  the argument; a traced value out of range raises at run time through
  ``eqx.error_if``.

Differences from reservoirpy 0.4 (``reservoirpy.datasets``), on purpose:

- ``mackey_glass`` integrates the delay equation with a true fourth-order
  Runge-Kutta scheme on a fine step ``h / substeps`` with an interpolated delay;
  reservoirpy takes one step of size ``h`` with the delayed value frozen, which
  is not a consistent RK4 step. Without ``seed`` and ``history`` the history is the
  constant ``x0`` (reservoirpy draws a random one from a global seed).
- ``narma`` has NARMA-10 defaults (``order=10, a1=0.3, a2=0.05, b=1.5, c=0.1``)
  and implements the textbook recursion (sum of ``y[t-order+1..t]``, input lag
  ``u[t-order+1]``); reservoirpy (defaults ``order=30``) sums ``y[t-order..t-1]``
  and uses ``u[t-order]``. Here ``u`` and ``y`` have the same length.
- The double-scroll circuit is named ``double_scroll`` (reservoirpy:
  ``doublescroll``); it and ``multiscroll`` take ``(tN, dt)`` like every ODE of
  :mod:`orc.data` instead of ``(n_timesteps, h)``.
- ``logistic_map`` requires ``0 < r <= 4`` (the map leaves ``(0, 1)`` for
  ``r > 4``); ``mso`` has the eight standard frequencies as default and selects
  the first ``n_components`` of them (``n_components=2`` is reservoirpy's
  ``mso2``, the default its ``mso8``).
"""

# jaxtyping shape strings such as "time dim" are not forward references:
# ruff: noqa: F722
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from orc._random import jax_key
from orc._validation import (
    check_dtype,
    check_float,
    check_int,
    check_static_int,
    default_float_dtype,
)
from orc.data.integrators import _solve, _state_dtype

__all__ = [
    "mackey_glass",
    "narma",
    "henon_map",
    "logistic_map",
    "double_scroll",
    "multiscroll",
    "rabinovich_fabrikant",
    "mso",
]

_MSO_FREQS = (0.2, 0.311, 0.42, 0.51, 0.63, 0.74, 0.85, 0.97)


# --------------------------------------------------------------------------- #
# Argument handling
# --------------------------------------------------------------------------- #
def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _run_dtype(owner: str, dtype, **candidates) -> np.dtype:
    """The dtype of a run: ``dtype`` if given, else the first float candidate's."""
    if dtype is not None:
        return check_dtype(dtype, owner)
    for name, value in candidates.items():
        value_dtype = getattr(value, "dtype", None)
        if value_dtype is None or not jnp.issubdtype(value_dtype, jnp.floating):
            continue
        value_dtype = jax.dtypes.canonicalize_dtype(value_dtype)
        if value_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(
                f"{owner}: {name} must be float32 or float64, got dtype {value_dtype}"
            )
        return value_dtype
    return default_float_dtype()


def _interval(low, high, low_open, high_open) -> str:
    lo = "-inf" if low is None else f"{low}"
    hi = "inf" if high is None else f"{high}"
    lb = "(" if low_open or low is None else "["
    hb = ")" if high_open or high is None else "]"
    return f"{lb}{lo}, {hi}{hb}"


def _scalar(
    owner: str,
    name: str,
    value,
    dtype,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> Array:
    """A real scalar parameter as a 0-d array of ``dtype``.

    Concrete values are checked now (``check_float``); traced ones at run time
    with ``eqx.error_if`` (finite and within the bounds).
    """
    if not _is_traced(value):
        v = check_float(
            name,
            value,
            owner,
            low=low,
            high=high,
            low_open=low_open,
            high_open=high_open,
        )
        return jnp.asarray(v, dtype=dtype)
    if value.shape != ():
        raise ValueError(f"{owner}: {name} must be a scalar, got shape {value.shape}")
    if not (
        jnp.issubdtype(value.dtype, jnp.floating)
        or jnp.issubdtype(value.dtype, jnp.integer)
    ):
        raise TypeError(f"{owner}: {name} must be a real number, got {value.dtype}")
    value = value.astype(dtype)
    bad = ~jnp.isfinite(value)
    if low is not None:
        bad = bad | ((value <= low) if low_open else (value < low))
    if high is not None:
        bad = bad | ((value >= high) if high_open else (value > high))
    where = _interval(low, high, low_open, high_open)
    return eqx.error_if(
        value, bad, f"{owner}: {name} must be finite and lie in {where}"
    )


def _static_positive(owner: str, name: str, value) -> float:
    """A concrete positive number that fixes sizes (refused when traced)."""
    if _is_traced(value):
        raise TypeError(
            f"{owner}: {name} must be a concrete number (it sets array sizes or "
            "the number of steps), but it is being traced; mark it static in jax.jit."
        )
    return check_float(name, value, owner, low=0.0, low_open=True)


def _array(owner: str, name: str, value, shapes: Sequence[tuple], dtype) -> Array:
    """A real array with one of ``shapes``, finite, cast to ``dtype``."""
    if not hasattr(value, "dtype"):
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"{owner}: {name} must be a real array, got {value!r}"
            ) from err
    if not (
        jnp.issubdtype(value.dtype, jnp.floating)
        or jnp.issubdtype(value.dtype, jnp.integer)
    ) or jnp.issubdtype(value.dtype, jnp.bool_):
        raise TypeError(
            f"{owner}: {name} must be a real numeric array, got dtype {value.dtype}"
        )
    if tuple(value.shape) not in [tuple(s) for s in shapes]:
        expect = " or ".join(str(tuple(s)) for s in shapes)
        raise ValueError(
            f"{owner}: {name} must have shape {expect}, got {tuple(value.shape)}"
        )
    if _is_traced(value):
        value = eqx.error_if(
            value, ~jnp.all(jnp.isfinite(value)), f"{owner}: {name} must be finite"
        )
    elif not np.all(np.isfinite(np.asarray(value))):
        raise ValueError(f"{owner}: {name} must be finite, but it contains NaN or inf")
    return jnp.asarray(value, dtype=dtype)


def _prng_key(owner: str, seed):
    """A JAX key from an int seed (ORC's convention) or a JAX key (may be traced)."""
    if isinstance(seed, jax.Array) and jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
        if seed.shape != ():
            raise ValueError(
                f"{owner}: seed must be a single JAX key, got key array of shape "
                f"{seed.shape}; use jax.vmap to map over several keys"
            )
        return seed
    if _is_traced(seed):
        raise TypeError(
            f"{owner}: seed is being traced; pass an int seed as a static argument "
            "or a JAX key made with jax.random.key"
        )
    return jax_key(seed, owner)


# --------------------------------------------------------------------------- #
# Mackey-Glass
# --------------------------------------------------------------------------- #
def _hermite_weights(theta: float) -> tuple[float, float, float, float]:
    """Cubic Hermite basis at ``theta`` in [0, 1]: weights of x0, dt*d0, x1, dt*d1."""
    t2, t3 = theta * theta, theta**3
    return (2 * t3 - 3 * t2 + 1, t3 - 2 * t2 + theta, -2 * t3 + 3 * t2, t3 - t2)


def _delay_stencil(delay_steps: float, c: float):
    """Where ``x(t_k + c dt - tau)`` lies relative to the current step ``k``.

    The position ``k + c - D`` (``D = tau / dt >= 1``) is written as a point of the
    interval ``[k + off, k + off + 1]`` with ``off + 1 = ceil(c - D) <= 0`` and
    ``theta in (0, 1]``; returns ``(off, Hermite weights at theta)``.
    """
    r = c - delay_steps
    off = math.ceil(r) - 1
    return off, _hermite_weights(r - off)


@eqx.filter_jit
def _mackey_glass_core(
    a, b, n, x0, h, history, key, *, n_timesteps, substeps, delay_steps, n_hist
):
    dtype = x0.dtype
    dt = h / substeps
    size = math.floor(delay_steps) + 2  # ring buffer: points k - size + 1 .. k
    stencils = [_delay_stencil(delay_steps, c) for c in (0.0, 0.5, 1.0)]

    # The buffer keeps, per fine point j (slot j mod size), the value x_j and two
    # slopes: d_right, used on the interval [j, j+1], and d_left, used on
    # [j-1, j]. They agree on the computed solution; on the piecewise-linear
    # history they are the slopes of its segments, so the history is reproduced
    # exactly, kinks included (sample times are fine points: h = substeps dt).
    j = np.arange(-(size - 1), 1)
    slots = j % size
    if history is None and key is None:
        hist_x = jnp.full(j.shape, x0)
        hist_dl = hist_dr = jnp.zeros(j.shape, dtype)
    else:
        if history is None:
            u = jax.random.uniform(key, (n_hist,), dtype=dtype)
            history = x0 + 0.2 * (u - 0.5)
        t_samples = jnp.arange(-n_hist, 1, dtype=dtype) * h
        values = jnp.concatenate([history, x0[None]])
        t_fine = jnp.asarray(j, dtype=dtype) * dt
        hist_x = jnp.interp(t_fine, t_samples, values)
        hist_dl = (hist_x - jnp.interp(t_fine - dt, t_samples, values)) / dt
        hist_dr = (jnp.interp(t_fine + dt, t_samples, values) - hist_x) / dt
    # Point 0 keeps its history-side slope d_left; the rest of it is the solution.
    buf_x = jnp.zeros(size, dtype).at[slots].set(hist_x)
    buf_dl = jnp.zeros(size, dtype).at[slots].set(hist_dl)
    buf_dr = jnp.zeros(size, dtype).at[slots].set(hist_dr)

    def field(x, x_tau):
        return a * x_tau / (1 + x_tau**n) - b * x

    def delayed(buffers, slot, stencil):
        buf_x, buf_dl, buf_dr = buffers
        off, (w0, w0d, w1, w1d) = stencil
        i0 = (slot + off) % size
        i1 = (slot + off + 1) % size
        return (
            w0 * buf_x[i0]
            + w0d * dt * buf_dr[i0]
            + w1 * buf_x[i1]
            + w1d * dt * buf_dl[i1]
        )

    def fine_step(_, carry):
        x, (buf_x, buf_dl, buf_dr), slot, first = carry
        k1 = field(x, delayed((buf_x, buf_dl, buf_dr), slot, stencils[0]))
        buffers = (
            buf_x.at[slot].set(x),
            buf_dl.at[slot].set(jnp.where(first, buf_dl[slot], k1)),
            buf_dr.at[slot].set(k1),
        )
        x_half = delayed(buffers, slot, stencils[1])
        x_full = delayed(buffers, slot, stencils[2])
        k2 = field(x + 0.5 * dt * k1, x_half)
        k3 = field(x + 0.5 * dt * k2, x_half)
        k4 = field(x + dt * k3, x_full)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return x, buffers, (slot + 1) % size, jnp.zeros((), bool)

    def sample_step(carry, _):
        carry = jax.lax.fori_loop(0, substeps, fine_step, carry)
        return carry, carry[0]

    init = (
        x0,
        (buf_x, buf_dl, buf_dr),
        jnp.zeros((), jnp.int32),
        jnp.ones((), bool),
    )
    _, xs = jax.lax.scan(sample_step, init, length=n_timesteps - 1)
    return jnp.concatenate([x0[None], xs])[:, None]


def mackey_glass(
    n_timesteps: int,
    tau: float = 17,
    a: float = 0.2,
    b: float = 0.1,
    n: float = 10,
    x0: float = 1.2,
    h: float = 1.0,
    seed=None,
    history: Float[ArrayLike, " T"] | None = None,
    *,
    substeps: int = 10,
    dtype=None,
) -> Float[Array, "n_timesteps 1"]:
    """Mackey-Glass delay differential equation, sampled every ``h``.

    Equation (Mackey & Glass 1977)::

        dx/dt = a x(t - tau) / (1 + x(t - tau)^n) - b x(t)

    Integrated by the classical fourth-order Runge-Kutta scheme with the fine
    step ``dt = h / substeps`` (``substeps`` is raised to ``ceil(h / tau)`` if
    needed so that ``dt <= tau``). Delayed values come from a ring buffer of the
    past solution and its derivative on the fine grid; between grid points they
    are cubic Hermite interpolants, so ``tau / dt`` need not be an integer and the
    half-step stages see a fourth-order delayed value. When ``tau / dt`` is an
    integer the kinks of the solution (at ``t = 0, tau, 2 tau, ...``) fall on
    step boundaries and the result agrees with a fine reference integration to
    ~1e-8 (defaults); otherwise the kink at ``t = tau`` falls inside a step and
    the error is ~1e-5 (``tau = 17.05``, ``h = 1``, ``substeps = 10``). Choose
    ``substeps`` so that ``tau * substeps / h`` is an integer for full accuracy.

    The history (the solution on ``[-tau, 0)``) is

    - the constant ``x0`` when ``seed`` and ``history`` are both None (no
      randomness);
    - ``ceil(tau / h)`` uniform samples in ``[x0 - 0.1, x0 + 0.1]`` (reservoirpy's
      choice) drawn from ``seed``, at times ``-ceil(tau / h) h, ..., -h``;
    - the last ``ceil(tau / h)`` entries of ``history``, the last one at time
      ``-h``.

    Samples are joined by straight lines to each other and to ``x0`` at ``t = 0``
    (constant before the first sample); the scheme reproduces this piecewise
    linear history exactly, kinks included. With the defaults (``tau = 17``) the
    series is chaotic, within about ``[0.2, 1.4]``, mean about 0.9, with a
    quasi-period near 50. For ``tau`` below about 4.7 (with the other defaults)
    it converges to the fixed point ``(a / b - 1)^(1 / n) = 1``.

    Parameters
    ----------
    n_timesteps : int
        Number of samples (>= 1). Static under ``jax.jit``.
    tau : float
        Delay (> 0), default 17. Static under ``jax.jit``.
    a : float
        Production rate, default 0.2.
    b : float
        Decay rate, default 0.1.
    n : float
        Exponent of the nonlinearity, default 10.
    x0 : float
        Value at ``t = 0`` (the first sample), default 1.2.
    h : float
        Sampling interval (> 0), default 1. Static under ``jax.jit``.
    seed : int or JAX key, optional
        Draws a random history when given (ignored when ``history`` is given).
    history : array of shape (T,) or (T, 1), optional
        Past samples at spacing ``h``, oldest first, ``T >= ceil(tau / h)``.
    substeps : int
        Runge-Kutta steps per sample (>= 1), default 10. Static under ``jax.jit``.
    dtype : jnp.float32 or jnp.float64, optional
        Dtype of the series; default that of ``x0`` or ``history`` when they are
        float arrays, else JAX's default float.

    Returns
    -------
    x : Array of shape (n_timesteps, 1)
        ``x[i] = x(i h)``; ``x[0] = x0``.

    Examples
    --------
    >>> x = orc.data.mackey_glass(2000)  # x.shape == (2000, 1)
    >>> x = orc.data.mackey_glass(2000, tau=30, seed=0)
    """
    owner = "mackey_glass"
    n_timesteps = check_static_int("n_timesteps", n_timesteps, owner, minimum=1)
    tau = _static_positive(owner, "tau", tau)
    h = _static_positive(owner, "h", h)
    substeps = check_static_int("substeps", substeps, owner, minimum=1)
    substeps = max(substeps, math.ceil(h / tau))
    delay_steps = tau * substeps / h
    if abs(delay_steps - round(delay_steps)) <= 1e-9 * delay_steps:
        delay_steps = float(round(delay_steps))
    delay_steps = max(delay_steps, 1.0)
    n_hist = math.ceil(tau / h - 1e-9)

    dtype = _run_dtype(owner, dtype, x0=x0, history=history)
    params = [
        _scalar(owner, name, v, dtype) for name, v in (("a", a), ("b", b), ("n", n))
    ]
    x0 = _scalar(owner, "x0", x0, dtype)
    key = None
    if history is not None:
        shape = tuple(np.shape(history))
        if len(shape) not in (1, 2) or shape[1:] not in ((), (1,)) or shape[0] < n_hist:
            raise ValueError(
                f"{owner}: history must have shape (T,) or (T, 1) with "
                f"T >= ceil(tau / h) = {n_hist}, got {shape}"
            )
        history = _array(owner, "history", history, [shape], dtype)
        history = history.reshape(shape[0])[-n_hist:]
    elif seed is not None:
        key = _prng_key(owner, seed)
    return _mackey_glass_core(
        *params,
        x0,
        jnp.asarray(h, dtype=dtype),
        history,
        key,
        n_timesteps=n_timesteps,
        substeps=substeps,
        delay_steps=delay_steps,
        n_hist=n_hist,
    )


# --------------------------------------------------------------------------- #
# NARMA
# --------------------------------------------------------------------------- #
@eqx.filter_jit
def _narma_core(u, key, a1, a2, b, c, *, n_timesteps, order, dtype):
    if u is None:
        u = 0.5 * jax.random.uniform(key, (n_timesteps,), dtype=dtype)
    u_now = u[order - 1 : n_timesteps - 1]
    u_lag = u[: n_timesteps - order]

    def step(window, inputs):
        # window = y[t - order + 1 .. t]; emits y[t + 1]
        ut, ul = inputs
        yt = window[-1]
        y_next = a1 * yt + a2 * yt * jnp.sum(window) + b * ul * ut + c
        return jnp.concatenate([window[1:], y_next[None]]), y_next

    _, ys = jax.lax.scan(step, jnp.zeros(order, dtype), (u_now, u_lag))
    y = jnp.concatenate([jnp.zeros(order, dtype), ys])
    y = eqx.error_if(
        y,
        ~jnp.all(jnp.isfinite(y)),
        "narma: the recursion diverged (y is not finite); NARMA is only stable for "
        "small inputs (u in [0, 0.5] with the default parameters)",
    )
    return u[:, None], y[:, None]


def narma(
    n_timesteps: int,
    order: int = 10,
    a1: float = 0.3,
    a2: float = 0.05,
    b: float = 1.5,
    c: float = 0.1,
    seed=0,
    u: Float[ArrayLike, " n_timesteps"] | None = None,
    *,
    dtype=None,
) -> tuple[Float[Array, "n_timesteps 1"], Float[Array, "n_timesteps 1"]]:
    """Nonlinear autoregressive moving average (NARMA) task of order ``order``.

    Recursion (Atiya & Parlos 2000; NARMA-10 with the defaults)::

        y[t+1] = a1 y[t] + a2 y[t] (y[t] + y[t-1] + ... + y[t-order+1])
                 + b u[t-order+1] u[t] + c

    Index convention: ``y[0] = ... = y[order-1] = 0`` (zero initial condition),
    and the recursion gives ``y[t+1]`` for ``t = order-1, ..., n_timesteps-2``,
    so it only uses samples that exist. ``y[t]`` is the target for a model that
    has seen ``u[0..t-1]``; discard the first ``order`` (or more) samples as a
    warm-up. By default ``u[t]`` is uniform in ``[0, 0.5]``.

    Parameters
    ----------
    n_timesteps : int
        Length of ``u`` and ``y`` (> ``order``). Static under ``jax.jit``.
    order : int
        Memory of the system (>= 1), default 10. Static under ``jax.jit``.
    a1 : float
        Weight of ``y[t]``, default 0.3.
    a2 : float
        Weight of ``y[t]`` times the window sum, default 0.05.
    b : float
        Weight of the input product, default 1.5.
    c : float
        Constant, default 0.1.
    seed : int or JAX key
        Seed of the random input, default 0 (ignored when ``u`` is given).
    u : array of shape (n_timesteps,) or (n_timesteps, 1), optional
        Input sequence to use instead of a random one.
    dtype : jnp.float32 or jnp.float64, optional
        Dtype of the output; default that of ``u`` when it is a float array, else
        JAX's default float.

    Returns
    -------
    u : Array of shape (n_timesteps, 1)
        The input.
    y : Array of shape (n_timesteps, 1)
        The NARMA output. If it is not finite (inputs too large) an error is
        raised.

    Examples
    --------
    >>> u, y = orc.data.narma(2000)  # train on u[:t] -> y[t], skip the first 10
    """
    owner = "narma"
    n_timesteps = check_static_int("n_timesteps", n_timesteps, owner, minimum=1)
    order = check_static_int("order", order, owner, minimum=1)
    if n_timesteps <= order:
        raise ValueError(
            f"{owner}: n_timesteps must be > order (the first order samples of y "
            f"are the zero initial condition), got n_timesteps={n_timesteps} and "
            f"order={order}"
        )
    dtype = _run_dtype(owner, dtype, u=u)
    params = [
        _scalar(owner, name, v, dtype)
        for name, v in (("a1", a1), ("a2", a2), ("b", b), ("c", c))
    ]
    key = None
    if u is not None:
        u = _array(owner, "u", u, [(n_timesteps,), (n_timesteps, 1)], dtype)
        u = u.reshape(n_timesteps)
    else:
        key = _prng_key(owner, seed)
    return _narma_core(
        u, key, *params, n_timesteps=n_timesteps, order=order, dtype=dtype
    )


# --------------------------------------------------------------------------- #
# Maps
# --------------------------------------------------------------------------- #
@eqx.filter_jit
def _iterate_map(step, x0, params, *, n_timesteps):
    """``[x0, F(x0), F(F(x0)), ...]`` (``n_timesteps`` rows) with ``F = step``."""

    def body(x, _):
        x = step(x, params)
        return x, x

    _, xs = jax.lax.scan(body, x0, length=n_timesteps - 1)
    return jnp.concatenate([x0[None], xs])


def _henon_step(state, params):
    a, b = params
    x, y = state
    return jnp.stack([1 - a * x * x + y, b * x])


def _logistic_step(state, params):
    (r,) = params
    return r * state * (1 - state)


def henon_map(
    n_timesteps: int,
    a: float = 1.4,
    b: float = 0.3,
    x0: Float[ArrayLike, " 2"] = (0.0, 0.0),
    *,
    dtype=None,
) -> Float[Array, "n_timesteps 2"]:
    """Hénon (1976) map, a two-dimensional map with a strange attractor.

    Map::

        x[i+1] = 1 - a x[i]^2 + y[i]
        y[i+1] = b x[i]

    With the defaults, after a short transient the orbit lies on the attractor,
    within about ``x in [-1.285, 1.273]`` and ``y in [-0.386, 0.382]``.

    Parameters
    ----------
    n_timesteps : int
        Number of rows (>= 1), row 0 being ``x0``. Static under ``jax.jit``.
    a : float
        Parameter ``a``, default 1.4.
    b : float
        Parameter ``b``, default 0.3.
    x0 : array of shape (2,)
        Initial ``(x, y)``, default ``(0, 0)``.
    dtype : jnp.float32 or jnp.float64, optional
        Dtype of the output; default that of ``x0`` when it is a float array,
        else JAX's default float.

    Returns
    -------
    states : Array of shape (n_timesteps, 2)
        Columns ``x`` and ``y``.

    Examples
    --------
    >>> xy = orc.data.henon_map(5000)
    """
    owner = "henon_map"
    n_timesteps = check_static_int("n_timesteps", n_timesteps, owner, minimum=1)
    dtype = _run_dtype(owner, dtype, x0=x0)
    params = (_scalar(owner, "a", a, dtype), _scalar(owner, "b", b, dtype))
    x0 = _array(owner, "x0", x0, [(2,)], dtype)
    return _iterate_map(_henon_step, x0, params, n_timesteps=n_timesteps)


def logistic_map(
    n_timesteps: int,
    r: float = 3.9,
    x0: float = 0.5,
    *,
    dtype=None,
) -> Float[Array, "n_timesteps 1"]:
    """Logistic map (May 1976).

    Map::

        x[i+1] = r x[i] (1 - x[i])

    For ``0 < r <= 4`` and ``0 < x0 < 1`` the orbit stays in ``[0, 1]``. It is
    chaotic for most ``r`` above about 3.57 (default 3.9); for ``3 < r < 1 +
    sqrt(6)`` it settles on a period-2 orbit
    ``(r + 1 +- sqrt((r - 3)(r + 1))) / (2 r)``.

    Parameters
    ----------
    n_timesteps : int
        Number of rows (>= 1), row 0 being ``x0``. Static under ``jax.jit``.
    r : float
        Growth rate, ``0 < r <= 4``, default 3.9.
    x0 : float
        Initial value, ``0 < x0 < 1``, default 0.5.
    dtype : jnp.float32 or jnp.float64, optional
        Dtype of the output; default that of ``x0`` when it is a float array,
        else JAX's default float.

    Returns
    -------
    x : Array of shape (n_timesteps, 1)
        The orbit.

    Examples
    --------
    >>> x = orc.data.logistic_map(1000, r=3.8)
    """
    owner = "logistic_map"
    n_timesteps = check_static_int("n_timesteps", n_timesteps, owner, minimum=1)
    dtype = _run_dtype(owner, dtype, x0=x0)
    r = _scalar(owner, "r", r, dtype, low=0.0, high=4.0, low_open=True)
    x0 = _scalar(
        owner, "x0", x0, dtype, low=0.0, high=1.0, low_open=True, high_open=True
    )
    x = _iterate_map(_logistic_step, x0, (r,), n_timesteps=n_timesteps)
    return x[:, None]


# --------------------------------------------------------------------------- #
# Multiple superimposed oscillators
# --------------------------------------------------------------------------- #
@eqx.filter_jit
def _mso_core(freqs, *, n_timesteps, normalize):
    t = jnp.arange(n_timesteps, dtype=freqs.dtype)
    y = jnp.sum(jnp.sin(t[:, None] * freqs[None, :]), axis=1, keepdims=True)
    if normalize:
        lo, hi = jnp.min(y), jnp.max(y)
        span = hi - lo
        safe = jnp.where(span > 0, span, jnp.ones_like(span))
        y = jnp.where(span > 0, (2 * y - lo - hi) / safe, jnp.zeros_like(y))
    return y


def mso(
    n_timesteps: int,
    freqs: Float[ArrayLike, " K"] = _MSO_FREQS,
    n_components: int | None = None,
    normalize: bool = True,
    *,
    dtype=None,
) -> Float[Array, "n_timesteps 1"]:
    """Multiple superimposed oscillators (MSO), a multi-frequency forecasting task.

    Signal (Jaeger 2004; eight frequencies as in Roeschies & Igel 2010)::

        y[t] = sin(f_1 t) + ... + sin(f_K t),   t = 0, 1, ..., n_timesteps - 1

    using the first ``K = n_components`` of ``freqs``. With ``normalize`` the
    series is mapped affinely onto ``[-1, 1]``:
    ``(2 y - min(y) - max(y)) / (max(y) - min(y))`` (reservoirpy's convention;
    a constant series gives zeros).

    Parameters
    ----------
    n_timesteps : int
        Number of samples (>= 1). Static under ``jax.jit``.
    freqs : array of shape (K,)
        Angular frequencies, default ``(0.2, 0.311, 0.42, 0.51, 0.63, 0.74,
        0.85, 0.97)``.
    n_components : int, optional
        Use only the first ``n_components`` frequencies (``1 <= n_components <=
        K``); default all. ``n_components=2`` is the classic MSO2. Static.
    normalize : bool
        Rescale to ``[-1, 1]`` as above, default True. Static.
    dtype : jnp.float32 or jnp.float64, optional
        Dtype of the output; default that of ``freqs`` when it is a float array,
        else JAX's default float.

    Returns
    -------
    y : Array of shape (n_timesteps, 1)
        The signal.

    Examples
    --------
    >>> y = orc.data.mso(1000, n_components=5)  # MSO5
    """
    owner = "mso"
    n_timesteps = check_static_int("n_timesteps", n_timesteps, owner, minimum=1)
    if not isinstance(normalize, (bool, np.bool_)):
        raise TypeError(f"{owner}: normalize must be True or False, got {normalize!r}")
    dtype = _run_dtype(owner, dtype, freqs=freqs)
    n_freqs = np.shape(freqs)
    if len(n_freqs) != 1 or n_freqs[0] < 1:
        raise ValueError(
            f"{owner}: freqs must be a non-empty 1-D sequence, got shape {n_freqs}"
        )
    freqs = _array(owner, "freqs", freqs, [n_freqs], dtype)
    if n_components is not None:
        if not isinstance(n_components, numbers.Integral) or isinstance(
            n_components, bool
        ):
            raise TypeError(
                f"{owner}: n_components must be an int or None, got {n_components!r}"
            )
        n_components = check_int("n_components", n_components, owner, minimum=1)
        if n_components > n_freqs[0]:
            raise ValueError(
                f"{owner}: n_components must be <= len(freqs) = {n_freqs[0]}, "
                f"got {n_components}"
            )
        freqs = freqs[:n_components]
    return _mso_core(freqs, n_timesteps=n_timesteps, normalize=bool(normalize))


# --------------------------------------------------------------------------- #
# ODEs through the shared diffrax routine of orc.data.integrators
# --------------------------------------------------------------------------- #
_Trajectory = tuple[Float[Array, "time dim"], Float[Array, " time"]]


def _double_scroll_vf(t, u, args):
    r1, r2, r4, ir, beta = args
    v1, v2, i = u
    dv = v1 - v2
    current = dv / r2 + ir * jnp.sinh(beta * dv)  # through R2 and the diodes
    return jnp.stack([v1 / r1 - current, current - i, v2 - r4 * i])


def _multiscroll_vf(t, u, args):
    a, b, c = args
    x, y, z = u
    return jnp.stack([a * (y - x), (c - a) * x - x * z + c * y, x * y - b * z])


def _rabinovich_fabrikant_vf(t, u, args):
    alpha, gamma = args
    x, y, z = u
    return jnp.stack(
        [
            y * (z - 1 + x**2) + gamma * x,
            x * (3 * z + 1 - x**2) + gamma * y,
            -2 * z * (alpha + x * y),
        ]
    )


def double_scroll(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (0.37926545, 0.058339, -0.08167691),
    r1: float = 1.2,
    r2: float = 3.44,
    r4: float = 0.193,
    ir: float = 2 * 2.25e-5,
    beta: float = 11.6,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Double-scroll electronic circuit (Chang et al. 1998; Gauthier et al. 2021).

    The chaotic circuit of the next-generation reservoir computing paper
    (Gauthier, Bollt, Griffith & Barbosa, Nat. Commun. 12, 5564, 2021), in
    dimensionless form, with ``dV = V1 - V2``::

        V1' = V1 / R1 - dV / R2 - 2 Ir sinh(beta dV)
        V2' = dV / R2 + 2 Ir sinh(beta dV) - I
        I'  = V2 - R4 I

    The paper's values are ``R1 = 1.2, R2 = 3.44, R4 = 0.193, beta = 11.6,
    Ir = 2.25e-5``. The argument ``ir`` is the whole coefficient ``2 Ir`` of the
    sinh (default ``2 * 2.25e-5``, as reservoirpy's ``doublescroll``). The field
    is odd, ``f(-u) = -f(u)``, so ``-u0`` gives the mirrored trajectory. The paper
    samples it with ``dt = 0.25``.

    Parameters
    ----------
    tN : float
        Final time (> 0).
    dt : float
        Spacing of the output grid (0 < dt <= tN); also the first step.
    u0 : array of shape (3,)
        Initial ``(V1, V2, I)``, default ``(0.37926545, 0.058339, -0.08167691)``.
    r1 : float
        ``R1``, default 1.2 (> 0).
    r2 : float
        ``R2``, default 3.44 (> 0).
    r4 : float
        ``R4``, default 0.193.
    ir : float
        ``2 Ir``, default 4.5e-5.
    beta : float
        Diode exponent, default 11.6.
    **diffeqsolve_kwargs
        Passed to ``diffrax.diffeqsolve``, replacing the defaults of
        :mod:`orc.data.integrators` (``Tsit5``, ``PIDController(rtol=1e-7,
        atol=1e-9)``, output on ``arange(0, tN, dt)``).

    Returns
    -------
    us : Array of shape (Nt, 3)
        States ``(V1, V2, I)``.
    ts : Array of shape (Nt,)
        Times ``arange(0, tN, dt)``.

    Examples
    --------
    >>> us, ts = orc.data.double_scroll(tN=500.0, dt=0.25)  # us.shape == (2000, 3)
    """
    owner = "double_scroll"
    dtype = _state_dtype(owner, u0)
    params = (
        _scalar(owner, "r1", r1, dtype, low=0.0, low_open=True),
        _scalar(owner, "r2", r2, dtype, low=0.0, low_open=True),
        _scalar(owner, "r4", r4, dtype),
        _scalar(owner, "ir", ir, dtype),
        _scalar(owner, "beta", beta, dtype),
    )
    return _solve(owner, _double_scroll_vf, u0, 3, params, tN, dt, diffeqsolve_kwargs)


def multiscroll(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (-0.1, 0.5, -0.6),
    a: float = 40.0,
    b: float = 3.0,
    c: float = 28.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Chen attractor, the multiscroll system of reservoirpy's ``multiscroll``.

    Equations (G. Chen & T. Ueta, "Yet another chaotic attractor", Int. J.
    Bifurcation Chaos 9(7), 1465-1466, 1999)::

        x' = a (y - x)
        y' = (c - a) x - x z + c y
        z' = x y - b z

    Defaults ``a = 40, b = 3, c = 28`` and ``u0 = (-0.1, 0.5, -0.6)`` are
    reservoirpy's (Chen's original ``a`` is 35). The system is symmetric under
    ``(x, y, z) -> (-x, -y, z)``. reservoirpy samples it with ``dt = 0.01``.

    Parameters
    ----------
    tN : float
        Final time (> 0).
    dt : float
        Spacing of the output grid (0 < dt <= tN); also the first step.
    u0 : array of shape (3,)
        Initial state, default ``(-0.1, 0.5, -0.6)``.
    a : float
        Parameter ``a``, default 40.
    b : float
        Parameter ``b``, default 3.
    c : float
        Parameter ``c``, default 28.
    **diffeqsolve_kwargs
        Passed to ``diffrax.diffeqsolve``, replacing the defaults of
        :mod:`orc.data.integrators`.

    Returns
    -------
    us : Array of shape (Nt, 3)
        States ``(x, y, z)``.
    ts : Array of shape (Nt,)
        Times ``arange(0, tN, dt)``.

    Examples
    --------
    >>> us, ts = orc.data.multiscroll(tN=50.0, dt=0.01)
    """
    owner = "multiscroll"
    dtype = _state_dtype(owner, u0)
    params = tuple(
        _scalar(owner, k, v, dtype) for k, v in (("a", a), ("b", b), ("c", c))
    )
    return _solve(owner, _multiscroll_vf, u0, 3, params, tN, dt, diffeqsolve_kwargs)


def rabinovich_fabrikant(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (-1.0, 0.0, 0.5),
    alpha: float = 1.1,
    gamma: float = 0.87,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """The Rabinovich-Fabrikant system, reservoirpy's ``rabinovich_fabrikant``.

    Equations (M. I. Rabinovich & A. L. Fabrikant, "Stochastic
    self-modulation of waves in nonequilibrium media", Sov. Phys. JETP 50,
    311-317, 1979)::

        x' = y (z - 1 + x^2) + gamma x
        y' = x (3 z + 1 - x^2) + gamma y
        z' = -2 z (alpha + x y)

    ``alpha`` and ``u0`` are reservoirpy's defaults, which samples the
    system every 0.05 time units (its ``h``); ``gamma`` is the classic 0.87
    of the chaotic attractor. reservoirpy's ``gamma=0.89`` leaves it: its own
    default series grows to ``y ~ 660`` by ``t = 125``, and a solve to this
    module's tolerances runs out of steps there. The system is symmetric
    under ``(x, y, z) -> (-x, -y, z)``.

    ``tN``, ``dt``, ``u0``, ``**diffeqsolve_kwargs`` and the returned
    ``(us, ts)`` (states ``(Nt, 3)``, times ``arange(0, tN, dt)``) are as for
    :func:`multiscroll`; ``alpha`` and ``gamma`` are the system's parameters.

    Examples
    --------
    >>> us, ts = orc.data.rabinovich_fabrikant(tN=125.0, dt=0.05)  # 2500 samples
    """
    owner = "rabinovich_fabrikant"
    dtype = _state_dtype(owner, u0)
    params = tuple(
        _scalar(owner, k, v, dtype) for k, v in (("alpha", alpha), ("gamma", gamma))
    )
    return _solve(
        owner, _rabinovich_fabrikant_vf, u0, 3, params, tN, dt, diffeqsolve_kwargs
    )
