"""Trajectories of benchmark dynamical systems, for training and testing reservoirs.

Every ODE system here is a vector field plus its parameters and a default initial
state; all of them are integrated by one shared diffrax routine. The defaults
(same as ORC 0.4) are the adaptive Runge-Kutta solver ``diffrax.Tsit5()``, a
``diffrax.PIDController(rtol=1e-7, atol=1e-9)``, first step ``dt0=dt``,
``max_steps=None`` and output saved on the grid ``jnp.arange(0, tN, dt)``. Any of
them can be replaced through ``**diffeqsolve_kwargs``, which are passed on to
``diffrax.diffeqsolve``. ``max_steps=None`` (given or not) bounds an adaptive
solve at ``4096 + 256 * n`` steps, ``n`` the number of output times rounded up
to a power of two (these systems take at most ~90
per ``dt = 1``), so that a trajectory that blows up or a NaN parameter ends in
diffrax's "maximum number of solver steps" error instead of a solve that never
returns; pass a larger ``max_steps`` for a longer one. The Kuramoto-Sivashinsky
PDE has its own fixed-step spectral solver (:func:`KS_1D`).

Conventions:

- Each function returns ``(us, ts)``: states ``(Nt, dim)`` and times ``(Nt,)``.
- dtype: the state is computed in the dtype of ``u0`` when ``u0`` is a float
  array, otherwise in JAX's default float dtype (float64 when
  ``jax_enable_x64`` is on, else float32). Parameters and times are cast to that
  dtype, so a float32 run stays float32.
- An ODE solve is compiled once per system, dtype and output length rounded up
  to a power of two (the grid is padded with ``tN``; the padded points change
  no bit of the others, and the output is cut back); later calls
  with new initial states or parameters reuse it. ``KS_1D`` compiles once per
  grid size and dtype (a new ``tN``, ``dt`` or domain reuses it). The functions also work on
  traced ``u0`` and parameters (inside ``jax.jit``, ``jax.vmap``, ``jax.jvp``);
  ``tN`` and ``dt`` must be concrete numbers because they fix the output length.
- Bad arguments raise ``ValueError`` (``TypeError`` for a wrong kind of object)
  naming the argument.

Differences from ORC 0.4's ``KS_1D``, which are corrections: ORC sets the mean
Fourier mode to zero after every step, although the KS equation conserves the
spatial mean (here it is kept); ORC's ETDRK4 update omits the factor 2 on the
middle stages of Kassam & Trefethen's scheme, which makes it inconsistent (it
integrates the nonlinear term with weight 2/3 instead of 1); ORC's time vector
``arange(0, tN, dt)`` can have a different length from its solution
(``int(tN / dt)`` rows), here ``t = arange(Nt) * dt``.
"""

# jaxtyping shape strings such as "time dim" are not forward references:
# ruff: noqa: F722
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from orc._validation import (
    check_float,
    check_int,
    default_float_dtype,
    ode_max_steps,
)
from orc.data._ks import ks_etdrk4

__all__ = [
    "lorenz63",
    "rossler",
    "sakaraya",
    "colpitts",
    "hyper_lorenz63",
    "hyper_xu",
    "double_pendulum",
    "lorenz96",
    "KS_1D",
]

# Keys that the shared solve sets itself and a caller may not pass on.
_RESERVED_KWARGS = ("terms", "t0", "t1", "y0", "args")


# --------------------------------------------------------------------------- #
# Argument handling shared by every system
# --------------------------------------------------------------------------- #
def _state_dtype(owner: str, u0) -> np.dtype:
    """dtype of the run: ``u0``'s own if it is a float array, else JAX's default."""
    dtype = getattr(u0, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        return default_float_dtype()
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{owner}: u0 must be float32 or float64, got dtype {dtype}")
    return dtype


def _check_horizon(owner: str, tN, dt) -> tuple[float, float]:
    """``tN`` and ``dt`` are concrete, finite, positive and ``dt <= tN``."""
    for name, value in (("tN", tN), ("dt", dt)):
        if isinstance(value, jax.core.Tracer):
            raise TypeError(
                f"{owner}: {name} must be a concrete number (it sets the number of "
                "output times), but it is being traced; mark it static in jax.jit."
            )
    tN = check_float("tN", tN, owner, low=0.0, low_open=True)
    dt = check_float("dt", dt, owner, low=0.0, low_open=True)
    if dt > tN:
        raise ValueError(f"{owner}: dt must be <= tN, got dt={dt} and tN={tN}")
    return tN, dt


def _as_state(owner: str, u0, shape: tuple[int, ...], dtype) -> Array:
    """``u0`` as a real array of the run dtype, with the expected shape."""
    if not hasattr(u0, "dtype"):
        u0 = np.asarray(u0)
    if jnp.issubdtype(u0.dtype, jnp.complexfloating):
        raise ValueError(f"{owner}: u0 must be real, got dtype {u0.dtype}")
    if not (
        jnp.issubdtype(u0.dtype, jnp.floating)
        or jnp.issubdtype(u0.dtype, jnp.integer)
        or jnp.issubdtype(u0.dtype, jnp.bool_)
    ):
        raise ValueError(f"{owner}: u0 must be a real numeric array, got {u0!r}")
    if tuple(u0.shape) != tuple(shape):
        raise ValueError(
            f"{owner}: u0 must have shape {tuple(shape)}, got {tuple(u0.shape)}"
        )
    if isinstance(u0, jax.core.Tracer):
        # Values unknown until run time: check them there.
        u0 = eqx.error_if(u0, ~jnp.all(jnp.isfinite(u0)), f"{owner}: u0 must be finite")
    elif not np.all(np.isfinite(np.asarray(u0))):
        raise ValueError(f"{owner}: u0 must be finite, but it contains NaN or inf")
    return jnp.asarray(u0, dtype=dtype)


@eqx.filter_jit
def _diffeqsolve(vector_field, y0, args, t0, t1, solve_kwargs):
    """Compiled ``diffrax.diffeqsolve``; arrays are traced, the rest is static."""
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        t0=t0,
        t1=t1,
        y0=y0,
        args=args,
        **solve_kwargs,
    )
    return solution.ys, solution.ts


def _solve(
    owner: str,
    vector_field: Callable,
    u0,
    dim: int,
    params: Sequence,
    tN,
    dt,
    diffeqsolve_kwargs: dict,
) -> tuple[Array, Array]:
    """Integrate ``du/dt = vector_field(t, u, params)`` from ``u(0) = u0`` to ``tN``.

    The one ODE path of this module: checks the arguments, fixes the dtype, fills
    in the default diffrax settings that ``diffeqsolve_kwargs`` leaves unset and
    runs the compiled solve. Returns ``(ys, ts)`` as produced by diffrax
    (``(Nt, dim)`` and ``(Nt,)`` on the default grid).
    """
    tN, dt = _check_horizon(owner, tN, dt)
    dtype = _state_dtype(owner, u0)
    y0 = _as_state(owner, u0, (dim,), dtype)
    args = tuple(jnp.asarray(p, dtype=dtype) for p in params)
    for key in _RESERVED_KWARGS:
        if key in diffeqsolve_kwargs:
            raise TypeError(
                f"{owner}: diffeqsolve_kwargs cannot set {key!r}; it is fixed by "
                "the system (use u0 and the parameters, and tN for the end time)"
            )
    solve_kwargs = dict(diffeqsolve_kwargs)
    solve_kwargs.setdefault("solver", diffrax.Tsit5())
    n_out, intervals = None, math.ceil(tN / dt)
    if "saveat" not in solve_kwargs:
        # The grid padded with the end time up to a power of two (from 64):
        # one compiled solve serves every length of its bucket, and the padded
        # points change nothing before them (the adaptive steps do not stop at
        # the saved times, each is interpolated in the step that covers it).
        grid = np.arange(0.0, tN, dt)
        n_out = len(grid)
        intervals = _bucket(max(n_out, intervals))
        padded = np.full(intervals, tN)
        padded[:n_out] = grid
        solve_kwargs["saveat"] = diffrax.SaveAt(ts=jax.device_put(padded.astype(dtype)))
    solve_kwargs.setdefault(
        "stepsize_controller", diffrax.PIDController(rtol=1e-7, atol=1e-9)
    )
    if "dt0" not in solve_kwargs:
        solve_kwargs["dt0"] = jnp.asarray(dt, dtype=dtype)
    # max_steps=None bounds an adaptive solve (orc._validation.ode_max_steps):
    # one whose vector field turns NaN (a NaN parameter, a blow-up) would
    # retry its step forever; reaching the bound raises diffrax's error
    controller = solve_kwargs["stepsize_controller"]
    adaptive = not isinstance(controller, (diffrax.ConstantStepSize, diffrax.StepTo))
    solve_kwargs["max_steps"] = ode_max_steps(
        solve_kwargs.get("max_steps"), intervals, adaptive
    )
    t0 = jax.device_put(np.zeros((), dtype=dtype))
    t1 = jax.device_put(np.asarray(tN, dtype=dtype))
    ys, ts = _diffeqsolve(vector_field, y0, args, t0, t1, solve_kwargs)
    if n_out is None:
        return ys, ts
    return _first(ys, ts, n_out)


def _bucket(n: int) -> int:
    """``n`` rounded up to a power of two, at least 64."""
    return max(64, 1 << (int(n) - 1).bit_length())


@functools.partial(jax.jit, static_argnums=2)
def _first(ys, ts, n: int):
    """The first ``n`` rows of a padded solve's output (one small program)."""
    return ys[:n], ts[:n]


# --------------------------------------------------------------------------- #
# Vector fields, each f(t, u, params) -> du/dt
# --------------------------------------------------------------------------- #
def _lorenz63_vf(t, u, args):
    rho, sigma, beta = args
    x, y, z = u
    return jnp.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])


def _rossler_vf(t, u, args):
    a, b, c = args
    x, y, z = u
    return jnp.stack([-y - z, x + a * y, b + z * (x - c)])


def _sakaraya_vf(t, u, args):
    a, b, m = args
    x, y, z = u
    return jnp.stack([a * x + y + y * z, (y - x) * z, b - z - m * x * y])


def _colpitts_vf(t, u, args):
    alpha, gamma, q, eta = args
    x, y, z = u
    return jnp.stack([alpha * y, -gamma * (x + z) - q * y, eta * (y + 1 - jnp.exp(-x))])


def _hyper_lorenz63_vf(t, u, args):
    a, b, c, d = args
    x, y, z, w = u
    return jnp.stack([a * (y - x) + w, x * (b - z) - y, x * y - c * z, d * w - y * z])


def _hyper_xu_vf(t, u, args):
    a, b, c, d, e = args
    x, y, z, w = u
    return jnp.stack(
        [a * (y - x) + w, b * x + e * x * z, -c * z - x * y, x * z - d * y]
    )


def _double_pendulum_vf(t, u, args):
    m1, m2, L1, L2, g, damping = args
    theta1, omega1, theta2, omega2 = u
    sin_d = jnp.sin(theta1 - theta2)
    cos_d = jnp.cos(theta1 - theta2)
    total = m1 + m2
    # Euler-Lagrange equations as a 2x2 linear system A @ (alpha1, alpha2) = r with
    # A = [[total*L1, m2*L2*cos_d], [L1*cos_d, L2]], solved by Cramer's rule.
    r1 = -m2 * L2 * omega2**2 * sin_d - total * g * jnp.sin(theta1)
    r2 = L1 * omega1**2 * sin_d - g * jnp.sin(theta2)
    det = L1 * L2 * (m1 + m2 * sin_d**2)
    alpha1 = L2 * (r1 - m2 * cos_d * r2) / det
    alpha2 = L1 * (total * r2 - cos_d * r1) / det
    alpha1 = alpha1 - damping * (omega1 - omega2) - damping * omega1
    alpha2 = alpha2 - damping * (omega2 - omega1)
    return jnp.stack([omega1, alpha1, omega2, alpha2])


def _lorenz96_vf(t, u, args):
    (F,) = args
    # jnp.roll(u, s)[i] == u[i - s], indices taken modulo N.
    return (jnp.roll(u, -1) - jnp.roll(u, 2)) * jnp.roll(u, 1) - u + F


# --------------------------------------------------------------------------- #
# Public systems
# --------------------------------------------------------------------------- #
_Trajectory = tuple[Float[Array, "time dim"], Float[Array, " time"]]


def lorenz63(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (-10.0, 1.0, 10.0),
    rho: float = 28.0,
    sigma: float = 10.0,
    beta: float = 8.0 / 3.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Lorenz (1963) convection model, the classic chaotic attractor.

    Equations::

        x' = sigma (y - x)
        y' = x (rho - z) - y
        z' = x y - beta z

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state ``(x, y, z)``, default ``(-10, 1, 10)``.
        rho, sigma, beta: parameters, default 28, 10, 8/3 (largest Lyapunov
            exponent about 0.906).
        **diffeqsolve_kwargs: passed to ``diffrax.diffeqsolve``; they replace the
            defaults ``solver=Tsit5()``, ``saveat=SaveAt(ts=arange(0, tN, dt))``,
            ``stepsize_controller=PIDController(rtol=1e-7, atol=1e-9)``,
            ``dt0=dt``, ``max_steps=None`` (a bound of ``4096 + 256 *
            n`` steps, ``n`` the output length rounded up to a power of
            two; see the module doc).

    Returns:
        ``(us, ts)``: states ``(Nt, 3)`` and times ``(Nt,)``, ``Nt = len(arange(0,
        tN, dt))`` on the default grid.

    Example:
        >>> us, ts = orc.data.lorenz63(tN=30.0, dt=0.01)  # us.shape == (3000, 3)
    """
    return _solve(
        "lorenz63", _lorenz63_vf, u0, 3, (rho, sigma, beta), tN, dt, diffeqsolve_kwargs
    )


def rossler(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (1.0, 1.0, 1.0),
    a: float = 0.1,
    b: float = 0.1,
    c: float = 14.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Rössler (1976) system, a chaotic band attractor with one nonlinear term.

    Equations::

        x' = -y - z
        y' = x + a y
        z' = b + z (x - c)

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state, default ``(1, 1, 1)``.
        a, b, c: parameters, default 0.1, 0.1, 14.
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, 3)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.rossler(tN=100.0, dt=0.1)
    """
    return _solve("rossler", _rossler_vf, u0, 3, (a, b, c), tN, dt, diffeqsolve_kwargs)


def sakaraya(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (-2.8976045, 3.8877978, 3.07465),
    a: float = 1.0,
    b: float = 1.0,
    m: float = 1.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Sakarya chaotic system (spelled ``sakaraya`` as in ORC).

    Equations::

        x' = a x + y + y z
        y' = -x z + y z
        z' = -z - m x y + b

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state, default ``(-2.8976045, 3.8877978, 3.07465)``.
        a, b, m: parameters, default 1, 1, 1.
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, 3)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.sakaraya(tN=50.0, dt=0.01)
    """
    return _solve(
        "sakaraya", _sakaraya_vf, u0, 3, (a, b, m), tN, dt, diffeqsolve_kwargs
    )


def colpitts(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 3"] = (1.0, -1.0, 1.0),
    alpha: float = 5.0,
    gamma: float = 0.0797,
    q: float = 0.6898,
    eta: float = 6.2723,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Colpitts oscillator, a chaotic electronic circuit in dimensionless form.

    Equations::

        x' = alpha y
        y' = -gamma (x + z) - q y
        z' = eta (y + 1 - exp(-x))

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state, default ``(1, -1, 1)``.
        alpha, gamma, q, eta: parameters, default 5, 0.0797, 0.6898, 6.2723
            (values used by Platt et al., 2020).
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, 3)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.colpitts(tN=200.0, dt=0.1)
    """
    params = (alpha, gamma, q, eta)
    return _solve("colpitts", _colpitts_vf, u0, 3, params, tN, dt, diffeqsolve_kwargs)


def hyper_lorenz63(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 4"] = (-10.0, 6.0, 0.0, 10.0),
    a: float = 10.0,
    b: float = 28.0,
    c: float = 8.0 / 3.0,
    d: float = -1.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Four-dimensional (hyper-chaotic) extension of the Lorenz system.

    Equations::

        x' = a (y - x) + w
        y' = x (b - z) - y
        z' = x y - c z
        w' = d w - y z

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state ``(x, y, z, w)``, default ``(-10, 6, 0, 10)``.
        a, b, c, d: parameters, default 10, 28, 8/3, -1.
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, 4)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.hyper_lorenz63(tN=50.0, dt=0.01)
    """
    params = (a, b, c, d)
    return _solve(
        "hyper_lorenz63", _hyper_lorenz63_vf, u0, 4, params, tN, dt, diffeqsolve_kwargs
    )


def hyper_xu(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 4"] = (-2.0, -1.0, -2.0, -10.0),
    a: float = 10.0,
    b: float = 40.0,
    c: float = 2.5,
    d: float = 2.0,
    e: float = 16.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Hyper-chaotic Xu system (four dimensions).

    Equations::

        x' = a (y - x) + w
        y' = b x + e x z
        z' = -c z - x y
        w' = x z - d y

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state ``(x, y, z, w)``, default ``(-2, -1, -2, -10)``.
        a, b, c, d, e: parameters, default 10, 40, 2.5, 2, 16.
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, 4)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.hyper_xu(tN=50.0, dt=0.01)
    """
    return _solve(
        "hyper_xu", _hyper_xu_vf, u0, 4, (a, b, c, d, e), tN, dt, diffeqsolve_kwargs
    )


def double_pendulum(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " 4"] = (math.pi / 4, -1.0, math.pi / 2, 1.0),
    m1: float = 1.0,
    m2: float = 1.0,
    L1: float = 1.0,
    L2: float = 1.0,
    g: float = 9.81,
    damping: float = 0.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Planar double pendulum: two point masses on massless rigid rods.

    State ``(theta1, omega1, theta2, omega2)``: angles from the downward vertical
    and their rates. With ``d = theta1 - theta2`` and ``M = m1 + m2``, the
    Euler-Lagrange equations of ``T - V``, where

        T = M L1^2 omega1^2 / 2 + m2 L2^2 omega2^2 / 2
            + m2 L1 L2 omega1 omega2 cos d
        V = -M g L1 cos theta1 - m2 g L2 cos theta2,

    are solved for the angular accelerations::

        M L1 omega1' + m2 L2 cos(d) omega2' = -m2 L2 omega2^2 sin d - M g sin theta1
        L1 cos(d) omega1' + L2 omega2'     =  L1 omega1^2 sin d - g sin theta2

    and damping adds ``-damping (omega1 - omega2) - damping omega1`` to
    ``omega1'`` and ``-damping (omega2 - omega1)`` to ``omega2'`` (ORC's model).
    Without damping ``T + V`` is conserved.

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state, default ``(pi/4, -1, pi/2, 1)``.
        m1, m2: masses, default 1, 1.
        L1, L2: rod lengths, default 1, 1.
        g: gravitational acceleration, default 9.81.
        damping: damping coefficient, default 0.
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, 4)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.double_pendulum(tN=20.0, dt=0.01, damping=0.1)
    """
    params = (m1, m2, L1, L2, g, damping)
    return _solve(
        "double_pendulum",
        _double_pendulum_vf,
        u0,
        4,
        params,
        tN,
        dt,
        diffeqsolve_kwargs,
    )


def lorenz96(
    tN: float,
    dt: float,
    u0: Float[ArrayLike, " N"] | None = None,
    N: int = 10,
    F: float = 8.0,
    **diffeqsolve_kwargs,
) -> _Trajectory:
    """Lorenz (1996) model: ``N`` variables on a ring with advection and forcing.

    Equations, indices modulo ``N``::

        u_i' = (u_{i+1} - u_{i-2}) u_{i-1} - u_i + F

    Args:
        tN: final time (> 0).
        dt: spacing of the output grid (0 < dt <= tN); also the first step.
        u0: initial state ``(N,)``; default ``sin(arange(N))``.
        N: number of variables (>= 4), default 10.
        F: forcing, default 8 (chaotic).
        **diffeqsolve_kwargs: override the diffrax defaults (see :func:`lorenz63`).

    Returns:
        ``(us, ts)``: states ``(Nt, N)`` and times ``(Nt,)``.

    Example:
        >>> us, ts = orc.data.lorenz96(tN=50.0, dt=0.05, N=40)
    """
    N = check_int("N", N, "lorenz96", minimum=4)
    if u0 is None:
        u0 = jnp.sin(jnp.arange(N, dtype=default_float_dtype()))
    elif (shape := tuple(np.shape(u0))) != (N,):
        raise ValueError(
            f"lorenz96: u0 must have shape (N,) = ({N},), got {shape}; "
            "set N to the length of u0"
        )
    return _solve("lorenz96", _lorenz96_vf, u0, N, (F,), tN, dt, diffeqsolve_kwargs)


def KS_1D(
    tN: float,
    u0: Float[ArrayLike, " Nx"] | None = None,
    dt: float = 0.25,
    domain: tuple[float, float] = (0, 22),
    Nx: int = 64,
) -> tuple[Float[Array, "time Nx"], Float[Array, " time"]]:
    """Kuramoto-Sivashinsky equation on a periodic interval, pseudo-spectral ETDRK4.

    Equation::

        u_t + u u_x + u_xx + u_xxxx = 0,   x in [domain[0], domain[1]), periodic

    Solved in Fourier space with fixed step ``dt``: the linear part exactly, the
    nonlinear part with the fourth-order ETDRK4 scheme (Kassam & Trefethen 2005,
    coefficients by contour integrals), 2/3-rule dealiasing. The spatial mean of
    ``u`` is conserved, as it is by the PDE (ORC 0.4 instead forces it to zero).

    The grid has ``Nx`` points including the duplicated periodic end point
    (ORC's convention): the solver works on the ``Nx - 1`` distinct points
    ``linspace(domain[0], domain[1], Nx)[:-1]`` and the last output column repeats
    the first.

    Args:
        tN: final time (> 0); ``Nt = int(tN / dt)`` rows are returned.
        u0: initial profile ``(Nx,)`` on ``linspace(domain[0], domain[1], Nx)``;
            its last entry (the periodic duplicate) is ignored. Default
            ``sin((32 / domain[1]) * pi * x)``, ORC's choice. On the default
            domain and grid this is a single, linearly damped Fourier mode: the
            solution collapses to ~0 and only becomes chaotic once rounding noise
            has grown (t ~ 150). Pass a generic ``u0`` for chaotic data.
        dt: time step and output spacing, default 0.25.
        domain: ``(x_min, x_max)``, increasing, default ``(0, 22)``.
        Nx: number of grid points including the duplicate (>= 8), default 64.

    Returns:
        ``(U, t)``: ``U`` of shape ``(Nt, Nx)`` with ``U[:, -1] == U[:, 0]``, and
        ``t = arange(Nt) * dt`` of shape ``(Nt,)``.

    Example:
        >>> U, t = orc.data.KS_1D(tN=100.0, dt=0.25)  # U.shape == (400, 64)
    """
    owner = "KS_1D"
    tN, dt = _check_horizon(owner, tN, dt)
    Nx = check_int("Nx", Nx, owner, minimum=8)
    try:
        x_min, x_max = (float(np.asarray(v)) for v in domain)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{owner}: domain must be a pair of numbers (x_min, x_max), got {domain!r}"
        ) from err
    if not (np.isfinite(x_min) and np.isfinite(x_max) and x_max > x_min):
        raise ValueError(
            f"{owner}: domain must be finite and increasing (x_min < x_max), "
            f"got {domain!r}"
        )
    if u0 is None:
        if x_max == 0:
            raise ValueError(
                f"{owner}: the default u0 = sin((32 / domain[1]) pi x) needs "
                f"domain[1] != 0, got domain={domain!r}; pass u0"
            )
        dtype = default_float_dtype()
        x = np.linspace(x_min, x_max, Nx, endpoint=True)
        u0 = jnp.asarray(np.sin((32.0 / x_max) * np.pi * x), dtype=dtype)
    else:
        dtype = _state_dtype(owner, u0)
    u0 = _as_state(owner, u0, (Nx,), dtype)
    n_steps = int(tN / dt)
    U = ks_etdrk4(
        u0[:-1],
        jnp.asarray(dt, dtype=dtype),
        jnp.asarray(x_max - x_min, dtype=dtype),
        n_steps=n_steps,
    )
    t = jnp.asarray(np.arange(n_steps) * dt, dtype=dtype)
    return U, t
