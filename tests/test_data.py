"""Tests of orc.data: contracts of every system and checks against known physics.

Expected values come from outside the code under test: the time grid from numpy,
the Lorenz-63 symmetry and Lyapunov exponent (0.9056, e.g. Sprott 2003), the
conservation laws of KS and of the double pendulum (energy formula written here),
and an independent high-order diffrax solve of the spectrally discretised KS
equation.
"""

import inspect
import logging
import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc.data
from orc.data import integrators

# name -> (function, state dimension)
ODES = {
    "lorenz63": (orc.data.lorenz63, 3),
    "rossler": (orc.data.rossler, 3),
    "sakaraya": (orc.data.sakaraya, 3),
    "colpitts": (orc.data.colpitts, 3),
    "hyper_lorenz63": (orc.data.hyper_lorenz63, 4),
    "hyper_xu": (orc.data.hyper_xu, 4),
    "double_pendulum": (orc.data.double_pendulum, 4),
    "lorenz96": (orc.data.lorenz96, 10),
}

# Shared horizon so most tests reuse one compiled solve per system and dtype
# (an ODE solve is compiled per system, dtype and output length: the double
# pendulum's energy tests run on this grid too). The tests read the results
# in numpy: each eager JAX index or operation on a new shape compiles.
TN, DT = 20.0, 0.01


def default_u0(name):
    if name == "lorenz96":
        return np.sin(np.arange(10.0))
    return np.asarray(inspect.signature(ODES[name][0]).parameters["u0"].default)


# --------------------------------------------------------------------------- #
# 0. Public surface: names and signatures of ORC 0.4
# --------------------------------------------------------------------------- #
SIGNATURES = {
    "lorenz63": [
        ("tN", None),
        ("dt", None),
        ("u0", (-10.0, 1.0, 10.0)),
        ("rho", 28.0),
        ("sigma", 10.0),
        ("beta", 8 / 3),
    ],
    "rossler": [
        ("tN", None),
        ("dt", None),
        ("u0", (1.0, 1.0, 1.0)),
        ("a", 0.1),
        ("b", 0.1),
        ("c", 14.0),
    ],
    "sakaraya": [
        ("tN", None),
        ("dt", None),
        ("u0", (-2.8976045, 3.8877978, 3.07465)),
        ("a", 1.0),
        ("b", 1.0),
        ("m", 1.0),
    ],
    "colpitts": [
        ("tN", None),
        ("dt", None),
        ("u0", (1.0, -1.0, 1.0)),
        ("alpha", 5.0),
        ("gamma", 0.0797),
        ("q", 0.6898),
        ("eta", 6.2723),
    ],
    "hyper_lorenz63": [
        ("tN", None),
        ("dt", None),
        ("u0", (-10.0, 6.0, 0.0, 10.0)),
        ("a", 10.0),
        ("b", 28.0),
        ("c", 8 / 3),
        ("d", -1.0),
    ],
    "hyper_xu": [
        ("tN", None),
        ("dt", None),
        ("u0", (-2.0, -1.0, -2.0, -10.0)),
        ("a", 10.0),
        ("b", 40.0),
        ("c", 2.5),
        ("d", 2.0),
        ("e", 16.0),
    ],
    "double_pendulum": [
        ("tN", None),
        ("dt", None),
        ("u0", (math.pi / 4, -1.0, math.pi / 2, 1.0)),
        ("m1", 1.0),
        ("m2", 1.0),
        ("L1", 1.0),
        ("L2", 1.0),
        ("g", 9.81),
        ("damping", 0.0),
    ],
    "lorenz96": [("tN", None), ("dt", None), ("u0", None), ("N", 10), ("F", 8.0)],
    "KS_1D": [
        ("tN", None),
        ("u0", None),
        ("dt", 0.25),
        ("domain", (0, 22)),
        ("Nx", 64),
    ],
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_public_names_and_signatures(name):
    fn = getattr(orc.data, name)
    assert getattr(orc.data.integrators, name) is fn
    assert name in orc.data.__all__
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    assert [p.name for p in params] == [n for n, _ in SIGNATURES[name]]
    for p, (_, default) in zip(params, SIGNATURES[name], strict=True):
        if default is None:
            assert p.default in (inspect.Parameter.empty, None)
        else:
            np.testing.assert_allclose(p.default, default, rtol=1e-15)
    takes_kwargs = any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        for p in inspect.signature(fn).parameters.values()
    )
    assert takes_kwargs == (name != "KS_1D")


# --------------------------------------------------------------------------- #
# 1. Contract of every ODE system
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("name", sorted(ODES))
def test_ode_contract(name):
    fn, dim = ODES[name]
    us, ts = fn(TN, DT)
    grid = np.arange(0, TN, DT)
    assert us.shape == (len(grid), dim) and ts.shape == (len(grid),)
    assert us.dtype == ts.dtype == jnp.float64
    us, ts = np.asarray(us), np.asarray(ts)
    np.testing.assert_allclose(ts, grid, rtol=0, atol=1e-12)
    np.testing.assert_allclose(us[0], default_u0(name), rtol=1e-12)
    assert np.all(np.isfinite(us))
    assert np.ptp(np.asarray(us), axis=0).max() > 1e-3  # it actually moves

    us_again, ts_again = fn(TN, DT)
    np.testing.assert_array_equal(us_again, us)
    np.testing.assert_array_equal(ts_again, ts)

    # float32 initial state -> float32 run (strict promotion catches any mixing)
    us32, ts32 = fn(TN, DT, u0=default_u0(name).astype(np.float32))
    assert us32.dtype == ts32.dtype == jnp.float32
    assert us32.shape == us.shape
    us32 = np.asarray(us32)
    assert np.all(np.isfinite(us32))
    # before chaos separates them, the float32 run follows the float64 one
    early = slice(0, 50)
    scale = np.abs(us).max()
    np.testing.assert_allclose(us32[early], us[early], rtol=0, atol=1e-3 * scale)


def test_no_recompile_on_new_initial_state_or_parameters():
    orc.data.lorenz63(TN, DT)  # warm
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Collect(level=logging.DEBUG)
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles(True):
            orc.data.lorenz63(TN, DT, u0=np.array([1.0, 2.0, 3.0]), rho=35.0)
            orc.data.lorenz63(TN, DT, u0=(4.0, 5.0, 6.0), sigma=9.0, beta=2.0)
    finally:
        logger.removeHandler(handler)
    assert not [m for m in messages if m.startswith("Compiling")]


def test_vmap_over_initial_states_matches_single_runs():
    u0s = np.array([[1.0, 1.0, 1.0], [-3.0, 2.0, 20.0]])
    batched = jax.vmap(lambda u: orc.data.lorenz63(TN, DT, u0=u)[0])(u0s)
    assert batched.shape == (2, len(np.arange(0, TN, DT)), 3)
    batched = np.asarray(batched)
    for i in range(2):
        single = np.asarray(orc.data.lorenz63(TN, DT, u0=u0s[i])[0])
        # same steps per member; chaos amplifies rounding, so compare t < 2
        np.testing.assert_allclose(batched[i, :200], single[:200], atol=1e-6)


# --------------------------------------------------------------------------- #
# 2-3. Lorenz 63: symmetry and largest Lyapunov exponent
# --------------------------------------------------------------------------- #
def test_lorenz63_symmetry():
    # (x, y, z) -> (-x, -y, z) maps solutions to solutions.
    x0, y0, z0 = 3.0, -7.0, 21.0
    us = np.asarray(orc.data.lorenz63(TN, DT, u0=(x0, y0, z0))[0])
    mirrored = np.asarray(orc.data.lorenz63(TN, DT, u0=(-x0, -y0, z0))[0])
    first_2 = slice(0, 200)  # t < 2
    flip = np.array([-1.0, -1.0, 1.0])
    np.testing.assert_allclose(mirrored[first_2], us[first_2] * flip, atol=1e-6)


def test_lorenz63_largest_lyapunov_exponent():
    """Benettin: push a tangent vector with the solver's Jacobian, renormalise."""
    tau, n_transient, n_intervals = 1.0, 20, 1000
    end_only = dict(
        saveat=diffrax.SaveAt(t1=True),
        adjoint=diffrax.ForwardMode(),  # forward-mode autodiff through the solve
    )

    def flow(u):
        return orc.data.lorenz63(tau, tau, u0=u, **end_only)[0][-1]

    def interval(carry, _):
        u, w = carry
        u_next, w_next = jax.jvp(flow, (u,), (w,))
        growth = jnp.linalg.norm(w_next)
        return (u_next, w_next / growth), jnp.log(growth)

    @jax.jit
    def run(u):
        w = jnp.ones(3) / jnp.sqrt(3.0)
        carry, _ = jax.lax.scan(interval, (u, w), None, length=n_transient)
        _, logs = jax.lax.scan(interval, carry, None, length=n_intervals)
        return jnp.sum(logs) / (n_intervals * tau)

    exponent = float(run(jax.device_put(np.array([1.0, 1.0, 20.0]))))
    assert abs(exponent - 0.9056) < 0.05, exponent


# --------------------------------------------------------------------------- #
# 4. Kuramoto-Sivashinsky
# --------------------------------------------------------------------------- #
KS_L, KS_NX = 22.0, 64
KS_X = np.linspace(0.0, KS_L, KS_NX)
KS_GENERIC = np.cos(2 * np.pi * KS_X / KS_L) * (1 + np.sin(2 * np.pi * KS_X / KS_L))


def test_ks_conventions():
    # KS_1D compiles its last step (stacking the rows) per number of rows:
    # the lengths here are those of the float64 runs below (80 rows) and of
    # test_ks_matches_independent_solver's first (8 rows)
    U, t = orc.data.KS_1D(20.0)
    assert U.shape == (80, 64) and t.shape == (80,)
    assert U.dtype == t.dtype == jnp.float64
    U, t = np.asarray(U), np.asarray(t)
    np.testing.assert_allclose(t, 0.25 * np.arange(80), atol=1e-12)
    np.testing.assert_array_equal(U[:, -1], U[:, 0])
    np.testing.assert_allclose(U[0], np.sin((32 / 22) * np.pi * KS_X), atol=1e-12)
    # Nt = int(tN / dt) rows and t = arange(Nt) * dt, even when tN / dt is
    # fractional (arange(0, 2.5, 0.3) would have 9 entries)
    U, t = orc.data.KS_1D(2.5, dt=0.3)
    assert U.shape == (8, 64)
    np.testing.assert_allclose(t, 0.3 * np.arange(8), atol=1e-12)
    # a user u0 has Nx entries, the last one being the periodic duplicate
    u0 = np.sin(2 * np.pi * np.linspace(-5, 25, 64) / 30)
    U = np.asarray(orc.data.KS_1D(4.0, u0=u0, dt=0.5, domain=(-5, 25), Nx=64)[0])
    assert U.shape == (8, 64)
    np.testing.assert_array_equal(U[0, :-1], u0[:-1])
    assert U[0, -1] == u0[0]
    # float32
    U32, t32 = orc.data.KS_1D(20.0, u0=KS_GENERIC.astype(np.float32))
    U64, _ = orc.data.KS_1D(20.0, u0=KS_GENERIC)
    assert U32.dtype == t32.dtype == jnp.float32
    U32, U64 = np.asarray(U32), np.asarray(U64)
    assert np.all(np.isfinite(U32))
    np.testing.assert_allclose(U32[:20], U64[:20], atol=1e-3)
    # deterministic
    np.testing.assert_array_equal(orc.data.KS_1D(20.0, u0=KS_GENERIC)[0], U64)


@pytest.mark.parametrize(
    "profile", [np.sin((32 / KS_L) * np.pi * KS_X), KS_GENERIC], ids=["orc", "generic"]
)
def test_ks_conserves_mean_and_stays_bounded(profile):
    u0 = 0.3 + profile
    U, _ = orc.data.KS_1D(200.0, u0=u0)
    U = np.asarray(U)
    assert U.shape == (800, 64)
    assert np.all(np.isfinite(U)) and np.abs(U).max() < 10
    np.testing.assert_array_equal(U[:, -1], U[:, 0])
    means = U[:, :-1].mean(axis=1)
    np.testing.assert_allclose(means, u0[:-1].mean(), rtol=0, atol=1e-10)


def test_ks_matches_independent_solver():
    """ETDRK4 converges to a tight Dopri8 solve of the same spectral ODE system."""
    n = KS_NX - 1
    m = np.fft.fftfreq(n, 1.0 / n)
    k = 2 * np.pi * m / KS_L
    dealias = 3 * np.abs(m) < n
    lin = jax.device_put((k**2 - k**4).astype(np.complex128))
    ik = jax.device_put(1j * k * dealias)

    def rhs(t, u, args):  # u_t = -u_xx - u_xxxx - (u^2 / 2)_x
        return jnp.real(
            jnp.fft.ifft(lin * jnp.fft.fft(u) - 0.5 * ik * jnp.fft.fft(u * u))
        )

    u0 = 0.3 + KS_GENERIC
    t_out = 0.25 * np.arange(9)  # up to t = 2
    reference = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs),
        diffrax.Dopri8(),
        0.0,
        2.0,
        1e-4,
        jax.device_put(u0[:-1]),
        saveat=diffrax.SaveAt(ts=jax.device_put(t_out)),
        stepsize_controller=diffrax.PIDController(rtol=1e-11, atol=1e-11),
        max_steps=20_000,
    ).ys
    reference = np.asarray(reference)

    errors = []
    for dt in (0.25, 0.125, 0.0625, 0.03125):
        U, t = map(np.asarray, orc.data.KS_1D(2.0 + dt / 2, u0=u0, dt=dt))
        stride = round(0.25 / dt)
        np.testing.assert_allclose(t[::stride], t_out[: len(t[::stride])], atol=1e-12)
        errors.append(np.abs(U[::stride, :-1] - reference[: len(U[::stride])]).max())
    assert errors[-1] < 1e-6, errors
    # high order: each halving of dt divides the error by well over 2**2
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all(ratios > 6), errors


def test_ks_is_chaotic():
    """Nearby initial states separate by orders of magnitude, the flow stays bounded."""
    bump = 1e-8 * np.sin(4 * np.pi * KS_X / KS_L)
    U1 = np.asarray(orc.data.KS_1D(300.0, u0=KS_GENERIC)[0])
    U2 = np.asarray(orc.data.KS_1D(300.0, u0=KS_GENERIC + bump)[0])
    separation = np.linalg.norm((U1 - U2)[:, :-1], axis=1)
    assert separation.max() / separation[0] > 1e3
    assert np.abs(U1).max() < 10
    assert np.std(U1[600:]) > 0.5  # not decayed to a flat state


# --------------------------------------------------------------------------- #
# 5. Double pendulum energy
# --------------------------------------------------------------------------- #
def pendulum_energy(us, m1=1.0, m2=1.0, L1=1.0, L2=1.0, g=9.81):
    th1, w1, th2, w2 = np.asarray(us).T
    kinetic = (
        0.5 * (m1 + m2) * L1**2 * w1**2
        + 0.5 * m2 * L2**2 * w2**2
        + m2 * L1 * L2 * w1 * w2 * np.cos(th1 - th2)
    )
    potential = -(m1 + m2) * g * L1 * np.cos(th1) - m2 * g * L2 * np.cos(th2)
    return kinetic + potential


def test_double_pendulum_conserves_energy():
    us, _ = orc.data.double_pendulum(TN, DT)  # t up to 20
    energy = pendulum_energy(us)
    assert np.abs(energy - energy[0]).max() / abs(energy[0]) < 1e-6
    # other masses and lengths, a livelier start
    params = dict(m1=1.5, m2=0.7, L1=0.8, L2=1.3)
    us, _ = orc.data.double_pendulum(TN, DT, u0=(2.0, 0.0, -2.5, 1.0), **params)
    energy = pendulum_energy(us, **params)
    assert np.abs(energy - energy[0]).max() / abs(energy[0]) < 1e-5


def test_double_pendulum_damping_dissipates_energy():
    us, _ = orc.data.double_pendulum(TN, DT, damping=0.2)
    energy = pendulum_energy(us)
    assert np.all(np.diff(energy) < 1e-8)
    assert energy[-1] < energy[0] - 5.0


# --------------------------------------------------------------------------- #
# 6. diffeqsolve_kwargs
# --------------------------------------------------------------------------- #
def test_diffeqsolve_kwargs_override():
    us = np.asarray(orc.data.lorenz63(TN, DT)[0])
    # custom output times: same adaptive steps, only the interpolation points change
    times = jax.device_put(np.array([0.0, 0.5, 1.25]))
    sub, sub_ts = orc.data.lorenz63(TN, DT, saveat=diffrax.SaveAt(ts=times))
    assert sub.shape == (3, 3)
    np.testing.assert_array_equal(sub_ts, times)
    np.testing.assert_allclose(sub, us[[0, 50, 125]], rtol=1e-9, atol=1e-9)
    # another solver and step-size controller: fixed-step Euler
    fixed, _ = orc.data.lorenz63(
        1.0, DT, solver=diffrax.Euler(), stepsize_controller=diffrax.ConstantStepSize()
    )
    x, y, z = -10.0, 1.0, 10.0  # one explicit Euler step by hand
    step = np.array([10 * (y - x), x * (28 - z) - y, x * y - 8 / 3 * z])
    np.testing.assert_allclose(
        np.asarray(fixed)[1], np.array([x, y, z]) + DT * step, rtol=1e-12
    )
    with pytest.raises(TypeError, match="t0"):
        orc.data.lorenz63(TN, DT, t0=1.0)


# --------------------------------------------------------------------------- #
# 7. Bad input
# --------------------------------------------------------------------------- #
BAD_CALLS = [
    ("tN", lambda: orc.data.lorenz63(0.0, 0.1)),
    ("tN", lambda: orc.data.lorenz63(-1.0, 0.1)),
    ("tN", lambda: orc.data.rossler(float("nan"), 0.1)),
    ("dt", lambda: orc.data.lorenz63(1.0, 0.0)),
    ("dt", lambda: orc.data.lorenz63(1.0, -0.01)),
    ("dt", lambda: orc.data.colpitts(1.0, 2.0)),
    ("u0", lambda: orc.data.lorenz63(1.0, 0.1, u0=(1.0, 2.0))),
    ("u0", lambda: orc.data.lorenz63(1.0, 0.1, u0=np.ones((1, 3)))),
    ("u0", lambda: orc.data.hyper_xu(1.0, 0.1, u0=(1.0, np.nan, 0.0, 0.0))),
    ("u0", lambda: orc.data.double_pendulum(1.0, 0.1, u0=(np.inf, 0.0, 0.0, 0.0))),
    ("u0", lambda: orc.data.lorenz96(1.0, 0.1, u0=np.zeros(5))),
    ("N", lambda: orc.data.lorenz96(1.0, 0.1, N=3)),
    ("tN", lambda: orc.data.KS_1D(0.0)),
    ("dt", lambda: orc.data.KS_1D(1.0, dt=0.0)),
    ("dt", lambda: orc.data.KS_1D(1.0, dt=2.0)),
    ("Nx", lambda: orc.data.KS_1D(10.0, Nx=7)),
    ("domain", lambda: orc.data.KS_1D(10.0, domain=(22.0, 0.0))),
    ("domain", lambda: orc.data.KS_1D(10.0, domain=(0.0, 0.0))),
    ("u0", lambda: orc.data.KS_1D(10.0, u0=np.zeros(10))),
    ("u0", lambda: orc.data.KS_1D(10.0, u0=np.full(64, np.nan))),
]


@pytest.mark.parametrize(
    ("argument", "call"),
    BAD_CALLS,
    ids=[f"{a}-{i}" for i, (a, _) in enumerate(BAD_CALLS)],
)
def test_bad_input_raises_value_error_naming_argument(argument, call):
    with pytest.raises(ValueError, match=argument):
        call()


@pytest.mark.parametrize("name", sorted(ODES))
def test_wrong_u0_shape_message(name):
    fn, dim = ODES[name]
    expected = rf"{name}: u0 must have shape \({dim},\), got \({dim + 1},\)"
    if name == "lorenz96":
        expected = (
            rf"lorenz96: u0 must have shape \(N,\) = \({dim},\), got \({dim + 1},\)"
        )
    with pytest.raises(ValueError, match=expected):
        fn(1.0, 0.1, u0=np.zeros(dim + 1))


def test_traced_tN_is_refused():
    with pytest.raises(TypeError, match="tN"):
        jax.jit(lambda tN: orc.data.lorenz63(tN, 0.1))(1.0)


def test_integrators_module_is_exposed():
    assert orc.data.integrators is integrators
    assert callable(integrators.KS_1D)


def test_output_lengths_of_one_bucket_share_one_solve_and_keep_their_bits(
    monkeypatch,
):
    """Lengths up to the next power of two share one compiled solve (the
    grid is padded with tN); each output equals, bit for bit, diffrax's own
    solve saving on the exact grid (the adaptive steps do not depend on the
    saved times), and has exactly the length of ``arange(0, tN, dt)``."""
    solve = diffrax.diffeqsolve

    def direct(tN, dt):
        grid = np.arange(0.0, tN, dt)
        sol = solve(
            diffrax.ODETerm(integrators._rossler_vf),
            diffrax.Tsit5(),
            0.0,
            tN,
            dt,
            jax.device_put(np.array([1.0, 1.0, 1.0])),
            args=tuple(jax.device_put(np.float64(p)) for p in (0.1, 0.1, 14.0)),
            saveat=diffrax.SaveAt(ts=jax.device_put(grid)),
            stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9),
            max_steps=100_000,
        )
        return np.asarray(sol.ys), np.asarray(sol.ts)

    traced = []  # orc's solves traced (a cached program is not)
    monkeypatch.setattr(
        integrators.diffrax,
        "diffeqsolve",
        lambda *a, **k: traced.append(1) or solve(*a, **k),
    )
    counts = []
    # 1025, 2000 and 2048 samples: bucket 2048, that of the shared horizon
    # (TN, DT), whose float64 solve test_ode_contract[rossler] compiled
    # (then no length here traces one)
    for tN in (10.25, TN, 20.48):
        before = len(traced)
        us, ts = orc.data.rossler(tN=tN, dt=DT, u0=(1.0, 1.0, 1.0))
        counts.append(len(traced) - before)
        ref_u, ref_t = direct(tN, DT)
        assert us.shape == (len(np.arange(0.0, tN, DT)), 3)
        np.testing.assert_array_equal(np.asarray(us), ref_u)
        np.testing.assert_array_equal(np.asarray(ts), ref_t)
    assert counts[1:] == [0, 0], counts  # one solve for the three lengths
    assert integrators._bucket(1025) == integrators._bucket(2048) == 2048
    assert integrators._bucket(137) == integrators._bucket(256) == 256
    assert integrators._bucket(257) == 512 and integrators._bucket(3) == 64
