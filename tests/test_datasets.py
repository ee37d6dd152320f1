"""Tests of orc.data.datasets: the reservoirpy-style benchmark series.

Expectations come from outside the code under test: plain-Python loops of the
recursions (NARMA, Hénon, logistic), numpy closed forms (MSO, the logistic
period-2 orbit, the Mackey-Glass fixed point ``(a/b - 1)^(1/n)`` and its Hopf
threshold from linear stability), an independent fixed-step Heun integration of
the Mackey-Glass delay equation and a numpy RK4 of the Chen system, the
published Mackey-Glass (tau=17) range, mean and quasi-period, the Hénon
attractor's extent, and the symmetries of the double-scroll and Chen fields.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc.data
from _helpers import RUNTIME_ERRORS, count_compiles
from orc.data import datasets as ds

PUBLIC = [
    "mackey_glass",
    "narma",
    "henon_map",
    "logistic_map",
    "double_scroll",
    "multiscroll",
    "rabinovich_fabrikant",
    "mso",
]


F32 = np.dtype(np.float32)


def dtypes(call):
    """The dtypes of what ``call()`` returns, from tracing it (the dtype is
    decided there): no program is compiled for a check of the dtype only."""
    return {leaf.dtype for leaf in jax.tree.leaves(jax.eval_shape(call))}


def test_exported_from_orc_data():
    for name in PUBLIC:
        assert getattr(orc.data, name) is getattr(ds, name)
        assert name in orc.data.__all__
        assert getattr(ds, name).__doc__


# --------------------------------------------------------------------------- #
# Mackey-Glass
# --------------------------------------------------------------------------- #
# Most Mackey-Glass tests share N samples (and 17-sample histories) so that they
# reuse compiled code: n_timesteps, tau, h and substeps are static.
N = 151


def mg_heun(T, tau, a=0.2, b=0.1, n=10, x0=1.2, h=1.0, dt=1e-3, history=None):
    """Fixed-step Heun (trapezoid) for the delay equation, tau/dt an integer so
    every delayed value is a grid value; the history is the piecewise-linear
    interpolant of the samples (constant x0 when None). Sampled every h."""
    D = round(tau / dt)
    assert abs(D - tau / dt) < 1e-6
    if history is None:
        xs = [x0] * D
    else:
        t_s = np.arange(-len(history), 1) * h
        xs = list(np.interp(np.arange(-D, 0) * dt, t_s, np.r_[history, x0]))
    xs.append(x0)  # xs[i] = x((i - D) dt)
    x, every, out = x0, round(h / dt), [x0]
    for k in range(round(T / dt)):
        xd0, xd1 = xs[k], xs[k + 1]
        f0 = a * xd0 / (1 + xd0**n) - b * x
        xp = x + dt * f0
        x = x + 0.5 * dt * (f0 + a * xd1 / (1 + xd1**n) - b * xp)
        xs.append(x)
        if (k + 1) % every == 0:
            out.append(x)
    return np.array(out)


def first_acf_peak(x):
    """Lag (samples) of the first maximum of the autocorrelation after its first
    zero crossing, and the Pearson correlation of x[t] and x[t + lag] there."""
    x = x - x.mean()
    acf = np.array([x[: len(x) - k] @ x[k:] for k in range(len(x) // 4)])
    zero = int(np.argmax(acf < 0))
    lag = zero + int(np.argmax(acf[zero : 4 * zero]))
    return lag, np.corrcoef(x[:-lag], x[lag:])[0, 1]


def test_mackey_glass_tau17_chaotic_statistics():
    x = ds.mackey_glass(6000)
    assert x.shape == (6000, 1) and x.dtype == jnp.float64
    x = np.asarray(x)  # the tests' own slicing in numpy (no eager programs)
    assert float(x[0, 0]) == 1.2
    x = x[1000:, 0]
    # Published shape of the tau=17 attractor: range ~[0.2, 1.4], mean ~0.9,
    # quasi-period ~50 time units.
    assert 0.2 < x.min() < 0.6 and 1.2 < x.max() < 1.4
    assert abs(x.mean() - 0.9) < 0.05
    lag, corr = first_acf_peak(x)
    assert 45 <= lag <= 55
    assert corr < 0.9  # not periodic


@pytest.mark.parametrize(
    ("tau", "use_history", "substeps", "tol"),
    [
        (17.0, False, 10, 1e-7),
        (17.0, True, 10, 1e-6),
        # tau/dt = 170.5: interpolated delay; the kink of x at t=tau falls inside a
        # step, which costs accuracy (documented), still far below the signal.
        (17.05, False, 10, 1e-4),
        (17.05, False, 20, 1e-7),  # tau/dt = 341
    ],
)
def test_mackey_glass_matches_independent_heun(tau, use_history, substeps, tol):
    history = None
    if use_history:
        history = 1.2 + 0.2 * (np.random.default_rng(3).random(17) - 0.5)
    ref = mg_heun(N - 1, tau, history=history)
    x = np.asarray(ds.mackey_glass(N, tau=tau, history=history, substeps=substeps))
    np.testing.assert_allclose(x[:, 0], ref, rtol=0, atol=tol)
    assert np.ptp(ref) > 0.3  # the comparison is not trivial


def test_mackey_glass_small_delay_converges_to_fixed_point():
    # Fixed point a x/(1 + x^n) = b x  =>  x* = (a/b - 1)^(1/n); stable for
    # tau = 2 (below the Hopf threshold) for both parameter sets.
    for a in (0.2, 0.3):
        x = np.asarray(ds.mackey_glass(1500, tau=2, a=a))[:, 0]
        expected = (a / 0.1 - 1) ** (1 / 10)
        np.testing.assert_allclose(x[-200:], expected, rtol=0, atol=1e-10)
        assert abs(x[0] - expected) > 0.1


def test_mackey_glass_tau5_settles_on_a_periodic_orbit():
    # Linearising at x* = 1 gives x' = -b x - c x(t - tau), c = 0.4: the fixed
    # point loses stability at tau_c = arccos(-b/c) / w, w = sqrt(c^2 - b^2)
    # (tau_c ~ 4.71), to an oscillation of period ~2 pi / w.
    b, c = 0.1, 0.4
    w = math.sqrt(c**2 - b**2)
    tau_c = math.acos(-b / c) / w
    assert tau_c < 5 < tau_c + 1
    x = np.asarray(ds.mackey_glass(6000, tau=5, h=0.5, substeps=5))[:, 0]
    early, late = x[3000:4500], x[4500:]
    assert np.ptp(late) > 0.1  # not the fixed point
    np.testing.assert_allclose(
        [late.min(), late.max()], [early.min(), early.max()], atol=1e-3
    )
    lag, corr = first_acf_peak(late)
    assert corr > 0.999
    assert abs(lag * 0.5 - 2 * math.pi / w) < 0.15 * 2 * math.pi / w


def test_mackey_glass_history_and_seeds():
    const = ds.mackey_glass(N)
    flat = ds.mackey_glass(N, history=np.full((17, 1), 1.2))
    np.testing.assert_allclose(flat, const, rtol=0, atol=1e-13)
    # only the last ceil(tau / h) = 17 history samples matter
    hist = 1.2 + 0.2 * (np.random.default_rng(5).random(25) - 0.5)
    np.testing.assert_array_equal(
        ds.mackey_glass(N, history=hist), ds.mackey_glass(N, history=hist[-17:])
    )

    s0 = np.asarray(ds.mackey_glass(N, seed=0))
    np.testing.assert_array_equal(s0, ds.mackey_glass(N, seed=0))
    s1 = np.asarray(ds.mackey_glass(N, seed=1))
    assert not np.allclose(s0, s1) and not np.allclose(s0, const)
    assert float(s0[0, 0]) == 1.2  # x0 stays the value at t = 0
    key = jax.random.key(7)
    np.testing.assert_array_equal(
        ds.mackey_glass(N, seed=key), ds.mackey_glass(N, seed=key)
    )
    # a random history near x0 leaves the attractor's range unchanged
    assert 0.2 < float(s1[:, 0].min()) and float(s1[:, 0].max()) < 1.4


def test_mackey_glass_dtype():
    x64 = ds.mackey_glass(N)
    x32 = ds.mackey_glass(N, dtype=jnp.float32)
    assert x32.dtype == jnp.float32
    np.testing.assert_allclose(x32, x64, atol=1e-4)
    assert dtypes(lambda: ds.mackey_glass(N, x0=np.float32(1.2))) == {F32}
    f32_history = np.ones(17, np.float32)
    assert dtypes(lambda: ds.mackey_glass(N, history=f32_history)) == {F32}


def test_mackey_glass_under_jit_compiles_once():
    f = jax.jit(ds.mackey_glass, static_argnames=("n_timesteps", "tau", "h"))
    a = f(N, a=jnp.asarray(0.2), b=jnp.asarray(0.1), x0=jnp.asarray(1.2))
    np.testing.assert_allclose(a, ds.mackey_glass(N), rtol=1e-13)
    with count_compiles() as c:
        b = f(N, a=jnp.asarray(0.25), b=jnp.asarray(0.12), x0=jnp.asarray(1.0))
        ds.mackey_glass(N, a=0.21, x0=1.1)  # the eager path reuses its compile too
    assert c["compiles"] == 0
    assert not np.allclose(a, b)


# --------------------------------------------------------------------------- #
# NARMA
# --------------------------------------------------------------------------- #
def narma_loop(u, order=10, a1=0.3, a2=0.05, b=1.5, c=0.1):
    u = [float(v) for v in np.ravel(u)]
    y = [0.0] * len(u)
    for t in range(order - 1, len(u) - 1):
        window = sum(y[t - i] for i in range(order))
        y[t + 1] = a1 * y[t] + a2 * y[t] * window + b * u[t - order + 1] * u[t] + c
    return np.array(y)


# The NARMA10 series of the tests are 200 samples long: one compiled program
# (n_timesteps and order are static; the input, drawn or given, is not).
def test_narma_matches_python_loop():
    u, y = ds.narma(200)
    assert u.shape == y.shape == (200, 1) and y.dtype == jnp.float64
    u, y = np.asarray(u), np.asarray(y)
    assert 0 <= u.min() and u.max() <= 0.5 and u.std() > 0.1
    np.testing.assert_allclose(y[:, 0], narma_loop(u), rtol=1e-12, atol=1e-14)

    # given input, other order and parameters
    u2 = np.random.default_rng(1).uniform(0, 0.5, 300)
    _, y2 = ds.narma(300, order=5, a1=0.2, a2=0.04, b=1.2, c=0.05, u=u2)
    expected = narma_loop(u2, 5, 0.2, 0.04, 1.2, 0.05)
    np.testing.assert_allclose(np.asarray(y2)[:, 0], expected, rtol=1e-12, atol=1e-14)


def test_narma_index_convention():
    u = np.random.default_rng(2).uniform(0, 0.5, 200)
    _, y = ds.narma(200, u=u[:, None])
    y = np.asarray(y)[:, 0]
    assert np.all(y[:10] == 0)
    assert y[10] == pytest.approx(1.5 * u[0] * u[9] + 0.1, rel=1e-14)


def test_narma_seeds_keys_and_vmap():
    u0, y0 = ds.narma(200, seed=0)
    np.testing.assert_array_equal(y0, ds.narma(200)[1])  # default seed is 0
    assert not np.allclose(u0, ds.narma(200, seed=1)[0])
    keys = jax.random.split(jax.random.key(0), 3)
    ys = jax.vmap(lambda k: ds.narma(200, seed=k)[1])(keys)
    assert ys.shape == (3, 200, 1)
    np.testing.assert_array_equal(np.asarray(ys)[1], ds.narma(200, seed=keys[1])[1])
    assert dtypes(lambda: ds.narma(200, dtype=jnp.float32)) == {F32}


def test_narma_divergence_is_reported():
    with pytest.raises(RUNTIME_ERRORS, match="diverged"):
        ds.narma(200, u=np.full(200, 2.0))


# --------------------------------------------------------------------------- #
# Maps
# --------------------------------------------------------------------------- #
def test_henon_map():
    xy = ds.henon_map(20000)
    assert xy.shape == (20000, 2) and xy.dtype == jnp.float64
    xy = np.asarray(xy)
    # plain loop for the first steps (before rounding differences can grow)
    x, y, ref = 0.0, 0.0, [(0.0, 0.0)]
    for _ in range(29):
        x, y = 1 - 1.4 * x * x + y, 0.3 * x
        ref.append((x, y))
    np.testing.assert_allclose(xy[:30], ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(xy[1:, 1], 0.3 * xy[:-1, 0], rtol=1e-15)
    att = xy[100:]
    # attractor extent: x in [-1.2854, 1.2730], y in [-0.3857, 0.3819]
    assert -1.29 < att[:, 0].min() < -1.25 and 1.25 < att[:, 0].max() < 1.28
    assert -0.39 < att[:, 1].min() < -0.37 and 0.37 < att[:, 1].max() < 0.39


def test_henon_map_traced_parameters_and_dtype():
    f = jax.jit(ds.henon_map, static_argnames="n_timesteps")
    np.testing.assert_allclose(
        f(50, a=jnp.asarray(1.2), b=jnp.asarray(0.2)),
        ds.henon_map(50, a=1.2, b=0.2),
        rtol=1e-14,
    )
    f32_x0 = np.zeros(2, np.float32)
    assert dtypes(lambda: ds.henon_map(10, x0=f32_x0)) == {F32}
    assert dtypes(lambda: ds.henon_map(10, dtype=jnp.float32)) == {F32}


def test_logistic_map():
    x = ds.logistic_map(2000)
    assert x.shape == (2000, 1) and x.dtype == jnp.float64
    x = np.asarray(x)[:, 0]
    assert np.all((x > 0) & (x < 1)) and np.ptp(x) > 0.8
    v, ref = 0.5, [0.5]
    for _ in range(19):
        v = 3.9 * v * (1 - v)
        ref.append(v)
    np.testing.assert_allclose(x[:20], ref, rtol=1e-9)

    r = 3.2
    # as many steps as above: the same compiled program (r and x0 are traced)
    orbit = np.asarray(ds.logistic_map(2000, r=r, x0=0.3))[-2:, 0]
    root = math.sqrt((r - 3) * (r + 1))
    expected = sorted([(r + 1 - root) / (2 * r), (r + 1 + root) / (2 * r)])
    np.testing.assert_allclose(sorted(orbit), expected, rtol=1e-12)
    assert ds.logistic_map(5, r=4.0).shape == (5, 1)  # r = 4 is allowed
    assert dtypes(lambda: ds.logistic_map(5, dtype=jnp.float32)) == {F32}


# --------------------------------------------------------------------------- #
# MSO
# --------------------------------------------------------------------------- #
def test_mso_closed_form():
    freqs = np.array([0.2, 0.311, 0.42, 0.51, 0.63, 0.74, 0.85, 0.97])
    t = np.arange(700.0)
    raw = np.sin(np.outer(t, freqs)).sum(axis=1)
    y = ds.mso(700, normalize=False)
    assert y.shape == (700, 1) and y.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(y)[:, 0], raw, rtol=0, atol=1e-11)
    yn = np.asarray(ds.mso(700))[:, 0]
    scaled = (2 * raw - raw.min() - raw.max()) / (raw.max() - raw.min())
    np.testing.assert_allclose(yn, scaled, rtol=0, atol=1e-12)
    assert yn.min() == pytest.approx(-1) and yn.max() == pytest.approx(1)
    two = np.sin(np.outer(t, freqs[:2])).sum(axis=1)
    np.testing.assert_allclose(
        np.asarray(ds.mso(700, n_components=2, normalize=False))[:, 0], two, atol=1e-11
    )
    f = jax.jit(ds.mso, static_argnames=("n_timesteps", "n_components"))
    np.testing.assert_allclose(
        np.asarray(f(700, jnp.asarray(freqs[:3])))[:, 0],
        np.asarray(ds.mso(700, freqs[:3]))[:, 0],
        atol=1e-12,
    )
    assert dtypes(lambda: ds.mso(10, dtype=jnp.float32)) == {F32}


# --------------------------------------------------------------------------- #
# ODEs
# --------------------------------------------------------------------------- #
def test_double_scroll_field_is_the_papers_and_odd():
    # Gauthier et al. 2021, with Ir = 2.25e-5 (the argument ir is 2 Ir).
    R1, R2, R4, Ir, beta = 1.2, 3.44, 0.193, 2.25e-5, 11.6
    rng = np.random.default_rng(0)
    args = tuple(jnp.asarray(p) for p in (R1, R2, R4, 2 * Ir, beta))
    # one program for the field (called eagerly, each of its operations
    # compiles a program of its own)
    vf = jax.jit(ds._double_scroll_vf)
    for u in rng.uniform(-2, 2, (5, 3)):
        v1, v2, i = u
        dv = v1 - v2
        expected = [
            v1 / R1 - dv / R2 - 2 * Ir * np.sinh(beta * dv),
            dv / R2 + 2 * Ir * np.sinh(beta * dv) - i,
            v2 - R4 * i,
        ]
        f = np.asarray(vf(0.0, u, args))
        np.testing.assert_allclose(f, expected, rtol=1e-13)
        f_neg = vf(0.0, -u, args)
        np.testing.assert_allclose(f_neg, -f, rtol=1e-15)


def test_double_scroll_trajectory_symmetric_and_bounded():
    u0 = np.array([0.37926545, 0.058339, -0.08167691])
    us, ts = ds.double_scroll(400.0, 0.25)
    assert us.shape == (1600, 3) and ts.shape == (1600,)
    us = np.asarray(us)  # the tests' own arithmetic in numpy
    np.testing.assert_allclose(ts, np.arange(0, 400.0, 0.25), atol=1e-12)
    np.testing.assert_allclose(us[0], u0, rtol=1e-15)
    mirrored, _ = ds.double_scroll(400.0, 0.25, u0=-u0)
    np.testing.assert_allclose(mirrored, -us, rtol=0, atol=1e-12)
    # attractor of the paper's Fig. 1: |V1| < ~2, |V2| < ~1.1, |I| < ~2.4
    assert np.all(np.abs(us) < [2.5, 1.5, 3.0])
    # both scrolls are visited
    assert us[:, 0].min() < -1.0 and us[:, 0].max() > 1.0


def rk4(f, u0, T, dt, every=10):
    """Classical RK4 of ``u' = f(u)`` with step ``dt`` to time ``T``, the
    state kept every ``every`` steps (and at 0)."""
    u, out = np.array(u0, float), [np.array(u0, float)]
    for k in range(round(T / dt)):
        k1 = f(u)
        k2 = f(u + dt / 2 * k1)
        k3 = f(u + dt / 2 * k2)
        k4 = f(u + dt * k3)
        u = u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if (k + 1) % every == 0:
            out.append(u)
    return np.array(out)


def chen_rk4(u0, T, dt, a=40.0, b=3.0, c=28.0):
    def f(u):
        x, y, z = u
        return np.array([a * (y - x), (c - a) * x - x * z + c * y, x * y - b * z])

    return rk4(f, u0, T, dt)


def test_multiscroll_reference_symmetry_and_sensitivity():
    u0 = np.array([-0.1, 0.5, -0.6])
    us, ts = ds.multiscroll(20.0, 0.01)
    assert us.shape == (2000, 3) and ts.shape == (2000,)
    us = np.asarray(us)  # the tests' own arithmetic in numpy
    ref = chen_rk4(u0, 1.0, 1e-3)  # samples every 0.01
    # agreement to the adaptive solver's tolerance (rtol 1e-7, amplified by the
    # fast growth, lambda ~2); values reach ~25
    np.testing.assert_allclose(us[: len(ref)], ref, rtol=0, atol=1e-4)
    assert np.abs(ref).max() > 20

    # (x, y, z) -> (-x, -y, z) maps solutions to solutions
    flip = np.array([-1.0, -1.0, 1.0])
    mirrored, _ = ds.multiscroll(20.0, 0.01, u0=u0 * flip)
    np.testing.assert_allclose(mirrored, us * flip, rtol=0, atol=1e-9)

    # sensitive dependence: a 1e-9 perturbation grows exponentially, then
    # saturates at the size of the (bounded) attractor
    near, _ = ds.multiscroll(20.0, 0.01, u0=u0 + np.array([1e-9, 0.0, 0.0]))
    dist = np.linalg.norm(np.asarray(near) - np.asarray(us), axis=1)
    t = np.asarray(ts)
    growing = (dist > 1e-7) & (dist < 1e-2)
    rate = np.polyfit(t[growing], np.log(dist[growing]), 1)[0]
    assert 0.5 < rate < 5.0
    assert growing.sum() > 200  # a long exponential stretch, not a jump
    assert dist[-500:].max() > 1.0
    assert np.abs(np.asarray(us)).max() < 60


def test_rabinovich_fabrikant_reference_symmetry_and_attractor():
    def f(u, alpha=1.1, gamma=0.87):
        x, y, z = u
        return np.array(
            [
                y * (z - 1 + x**2) + gamma * x,
                x * (3 * z + 1 - x**2) + gamma * y,
                -2 * z * (alpha + x * y),
            ]
        )

    u0 = np.array([-1.0, 0.0, 0.5])
    us, ts = ds.rabinovich_fabrikant(200.0, 0.05)
    assert us.shape == (4000, 3) and ts.shape == (4000,)
    us = np.asarray(us)
    ref = rk4(f, u0, 5.0, 1e-3, every=50)  # samples every 0.05
    # to the adaptive solver's tolerance (rtol 1e-7, amplified along the way)
    np.testing.assert_allclose(us[: len(ref)], ref, rtol=0, atol=1e-5)
    flip = np.array([-1.0, -1.0, 1.0])
    mirrored, _ = ds.rabinovich_fabrikant(200.0, 0.05, u0=u0 * flip)
    np.testing.assert_allclose(np.asarray(mirrored), us * flip, rtol=0, atol=1e-9)
    # the chaotic attractor: bounded (|x| < 2, |y| < 2.5, 0 <= z < 1.5), not
    # a fixed point or a cycle of few points
    assert np.all(np.abs(us[:, :2]) < [2.0, 2.5]) and np.all(us[:, 2] > -1e-9)
    assert (
        us[:, 2].max() < 1.5
        and np.unique(np.round(us[2000:], 3), axis=0).shape[0] > 1500
    )


# --------------------------------------------------------------------------- #
# Bad input
# --------------------------------------------------------------------------- #
BAD = [
    (ValueError, "n_timesteps", lambda: ds.mackey_glass(0)),
    (TypeError, "n_timesteps", lambda: ds.mackey_glass(10.5)),
    (TypeError, "n_timesteps", lambda: ds.mackey_glass(True)),
    (ValueError, "tau", lambda: ds.mackey_glass(10, tau=0)),
    (ValueError, "tau", lambda: ds.mackey_glass(10, tau=-3)),
    (ValueError, "h", lambda: ds.mackey_glass(10, h=0.0)),
    (ValueError, "substeps", lambda: ds.mackey_glass(10, substeps=0)),
    (ValueError, "history", lambda: ds.mackey_glass(10, history=np.ones(10))),
    (ValueError, "history", lambda: ds.mackey_glass(10, history=np.ones((20, 2)))),
    (ValueError, "history", lambda: ds.mackey_glass(10, history=np.full(20, np.nan))),
    (ValueError, "x0", lambda: ds.mackey_glass(10, x0=np.nan)),
    (TypeError, "a", lambda: ds.mackey_glass(10, a="big")),
    (TypeError, "dtype", lambda: ds.mackey_glass(10, dtype=jnp.int32)),
    (ValueError, "seed", lambda: ds.mackey_glass(10, seed=-1)),
    (ValueError, "order", lambda: ds.narma(100, order=0)),
    (ValueError, "n_timesteps", lambda: ds.narma(10, order=10)),
    (ValueError, "u", lambda: ds.narma(100, u=np.ones(99))),
    (ValueError, "u", lambda: ds.narma(100, u=np.full(100, np.inf))),
    (TypeError, "seed", lambda: ds.narma(100, seed="zero")),
    (ValueError, "c", lambda: ds.narma(100, c=np.inf)),
    (ValueError, "x0", lambda: ds.henon_map(10, x0=(0.0, 0.0, 0.0))),
    (ValueError, "a", lambda: ds.henon_map(10, a=np.nan)),
    (ValueError, "n_timesteps", lambda: ds.henon_map(-1)),
    (ValueError, "r", lambda: ds.logistic_map(10, r=0.0)),
    (ValueError, "r", lambda: ds.logistic_map(10, r=4.5)),
    (ValueError, "x0", lambda: ds.logistic_map(10, x0=0.0)),
    (ValueError, "x0", lambda: ds.logistic_map(10, x0=1.5)),
    (ValueError, "freqs", lambda: ds.mso(10, freqs=[])),
    (ValueError, "freqs", lambda: ds.mso(10, freqs=[[0.1, 0.2]])),
    (ValueError, "freqs", lambda: ds.mso(10, freqs=[0.1, np.nan])),
    (ValueError, "n_components", lambda: ds.mso(10, n_components=0)),
    (ValueError, "n_components", lambda: ds.mso(10, n_components=9)),
    (TypeError, "n_components", lambda: ds.mso(10, n_components=2.0)),
    (TypeError, "normalize", lambda: ds.mso(10, normalize="yes")),
    (ValueError, "r1", lambda: ds.double_scroll(1.0, 0.1, r1=0.0)),
    (ValueError, "u0", lambda: ds.double_scroll(1.0, 0.1, u0=np.zeros(2))),
    (ValueError, "tN", lambda: ds.double_scroll(-1.0, 0.1)),
    (ValueError, "dt", lambda: ds.multiscroll(1.0, 0.0)),
    (ValueError, "a", lambda: ds.multiscroll(1.0, 0.1, a=np.inf)),
    (ValueError, "gamma", lambda: ds.rabinovich_fabrikant(1.0, 0.1, gamma=np.nan)),
]


@pytest.mark.parametrize(
    ("error", "argument", "call"),
    BAD,
    ids=[f"{a}-{i}" for i, (_, a, _) in enumerate(BAD)],
)
def test_bad_input_names_the_argument(error, argument, call):
    with pytest.raises(error, match=rf"\b{argument}\b"):
        call()


def test_sizes_must_be_static_under_jit():
    with pytest.raises(TypeError, match="n_timesteps"):
        jax.jit(lambda n: ds.mackey_glass(n))(10)
    with pytest.raises(TypeError, match="tau"):
        jax.jit(lambda tau: ds.mackey_glass(10, tau=tau))(17.0)
    with pytest.raises(TypeError, match="order"):
        jax.jit(lambda k: ds.narma(100, order=k))(10)


def test_traced_values_out_of_range_raise_at_run_time():
    with pytest.raises(RUNTIME_ERRORS, match="r must be finite and lie in"):
        jax.block_until_ready(jax.jit(lambda r: ds.logistic_map(10, r=r))(5.0))
    with pytest.raises(RUNTIME_ERRORS, match="u must be finite"):
        u = np.full(100, np.nan)
        jax.block_until_ready(jax.jit(lambda u: ds.narma(100, u=u))(u))
