"""The contract every public model and component keeps (DESIGN §5).

For each model: training and inference compile on the first call and do not
recompile on a second call with new data of the same shapes; ``jax.jit`` works
with the model as an explicit argument and agrees with the eager call; ``vmap``
over a batch equals a Python loop; ``grad`` through the closed loop matches a
finite difference; float32 and float64 are honoured end to end (the suite runs
with strict dtype promotion, so any silent mixing raises); outputs are finite.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import block, count_compiles, lorenz_rk4, noisy_sinusoids, on_device
from orc import drivers, embeddings, readouts
from orc.forecaster import RCForecasterBase

LORENZ = lorenz_rk4(1400) / 10.0

# The tests' own inputs, reference values and checks are numpy (``_np``,
# ``_jx``, ``_finite``): an eager jnp operation compiles a program of its own
# for every shape and dtype, which was most of this file's compilations.
# Likewise derivatives and batch calls run inside one ``jax.jit`` each: run
# eagerly, each of their primitives (and a derivative's transpose) compiles
# a program of its own; the transformations checked are the same. The model
# is an argument of those jits, not a closed-over constant (XLA would fold
# its weights into the program, compiling far slower).
_RNG_SEED = 0


def _np(x):
    return np.asarray(x)


_jx = on_device  # a transfer: nothing compiled


def _normal(shape, dtype, seed=_RNG_SEED):
    return _jx(np.random.default_rng(seed).standard_normal(shape), dtype)


def _finite(x):
    return bool(np.all(np.isfinite(_np(x))))


def _custom_taylor(dtype):
    """A user-built model: Taylor driver + nonlinear readout on the base class."""
    key = jax.random.key(3)
    k1, k2 = jax.random.split(key)
    return RCForecasterBase(
        driver=drivers.ParallelTaylorDriver(3, 40, chunks=1, dtype=dtype, seed=k1),
        readout=readouts.ParallelNonlinearReadout(
            3, 40, [jnp.sin, jnp.square], chunks=1, dtype=dtype
        ),
        embedding=embeddings.ParallelLinearEmbedding(3, 40, 0.1, dtype=dtype, seed=k2),
        chunks=1,
        dtype=dtype,
    )


def _custom_gru(dtype):
    k1, k2 = jax.random.split(jax.random.key(4))
    return RCForecasterBase(
        driver=drivers.GRUDriver(30, input_rescaling=1.0, seed=k1, dtype=dtype),
        readout=readouts.LinearReadout(3, 30, dtype=dtype),
        embedding=embeddings.LinearEmbedding(3, 30, 0.1, dtype=dtype, seed=k2),
        dtype=dtype,
    )


def _damped_step(u):
    """A knowledge-based model for the hybrid: a crude damped step."""
    return 0.9 * u


FORECASTERS = {
    "esn": lambda dt: orc.forecaster.ESNForecaster(3, 60, dtype=dt),
    "esn_quadratic": lambda dt: orc.forecaster.ESNForecaster(
        3, 60, quadratic=True, dtype=dt
    ),
    "esn_parallel": lambda dt: orc.forecaster.ESNForecaster(
        6, 30, chunks=3, locality=1, dtype=dt
    ),
    "ensemble": lambda dt: orc.forecaster.EnsembleESNForecaster(
        3, 30, chunks=3, dtype=dt
    ),
    "deep_esn": lambda dt: orc.forecaster.DeepESNForecaster(
        3, 30, n_layers=3, quadratic=True, dtype=dt
    ),
    "hybrid": lambda dt: orc.forecaster.HybridESNForecaster(
        3, 30, _damped_step, dtype=dt
    ),
    "custom_taylor": _custom_taylor,
    "custom_gru": _custom_gru,
}


def _series(model, n, offset=0):
    """``(n, in_dim)`` Lorenz63 samples in the model's dtype, as numpy."""
    x = LORENZ[offset : offset + n]
    if model.in_dim == 6:
        x = np.concatenate([x, -x], axis=1)
    return x.astype(model.dtype)


# One forecast length throughout a test (its checks of jit, vmap, the loop,
# forecast_from_IC and grad): each distinct length is a compiled program.
N_FC = 10


DTYPES = [jnp.float32, jnp.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(FORECASTERS))
def test_forecaster_contract(name, dtype):
    model = FORECASTERS[name](dtype)
    x1, x2 = _series(model, 400), _series(model, 400, offset=500)
    data1, data2 = _jx(x1), _jx(x2)
    tol = 1e-4 if dtype == jnp.float32 else 1e-9

    # training compiles once and is reused
    trained, R = block(orc.forecaster.train_RCForecaster(model, data1, spinup=20))
    with count_compiles() as c:
        block(orc.forecaster.train_RCForecaster(model, data2, spinup=20))
    assert c["compiles"] == 0, f"training recompiled {c}"
    assert R.shape == (400,) + model.driver.default_state().shape
    assert R.dtype == dtype
    leaves = jax.tree.leaves(eqx.filter(trained, eqx.is_inexact_array))
    assert all(leaf.dtype == dtype for leaf in leaves)

    Rn = _np(R)
    r0 = _jx(Rn[-1])
    out = block(trained.forecast(N_FC, r0))
    assert out.shape == (N_FC, model.out_dim) and out.dtype == dtype
    assert _finite(out)
    with count_compiles() as c:
        block(trained.forecast(N_FC, _jx(Rn[-2])))
    assert c["compiles"] == 0, "forecast recompiled"

    # jax.jit with the model as an explicit argument
    @functools.partial(jax.jit, static_argnums=1)
    def jf(m, n, r):
        return m.forecast(n, r)

    np.testing.assert_allclose(jf(trained, N_FC, r0), out, rtol=tol, atol=tol)

    # vmap over a batch of start states equals the loop
    vf = jax.jit(jax.vmap(lambda m, r: m.forecast(N_FC, r), in_axes=(None, 0)))
    batched = vf(trained, _jx(Rn[-4:]))
    looped = np.stack([_np(trained.forecast(N_FC, _jx(r))) for r in Rn[-4:]])
    np.testing.assert_allclose(batched, looped, rtol=tol, atol=tol)

    # forecast_from_IC starts from the default state
    warm = _jx(x1[-50:])
    from_ic = trained.forecast_from_IC(N_FC, warm)
    states = _np(trained.force(warm, trained.driver.default_state()))
    np.testing.assert_allclose(
        from_ic, trained.forecast(N_FC, _jx(states[-1])), rtol=tol, atol=tol
    )

    if dtype == jnp.float64:
        # grad through the closed loop, with respect to the start state and
        # the trained weights in one call: the start state's directional
        # derivative vs a central difference, the weights' finite
        def loss(m, r):
            return jnp.sum(m.forecast(N_FC, r) ** 2)

        # traced in one jit: run eagerly, the derivative compiles its
        # forward, its transpose and every eager op of the loss apart
        gw, g = eqx.filter_jit(eqx.filter_grad(lambda mr: loss(*mr)))((trained, r0))
        assert _finite(g)
        assert all(
            _finite(x) for x in jax.tree.leaves(eqx.filter(gw, eqx.is_inexact_array))
        )
        v = np.random.default_rng(0).standard_normal(r0.shape)
        eps = 1e-6

        def loss_np(r):
            return np.sum(_np(trained.forecast(N_FC, _jx(r))) ** 2)

        fd = (loss_np(Rn[-1] + eps * v) - loss_np(Rn[-1] - eps * v)) / (2 * eps)
        np.testing.assert_allclose(np.vdot(_np(g), v), fd, rtol=1e-5, atol=1e-7)


def test_cesn_contract():
    dt = jnp.float64
    model = orc.forecaster.CESNForecaster(3, 30, max_steps=4096, dtype=dt)
    t = _jx(np.arange(300) * 0.01, np.float64)
    data = _jx(LORENZ[:300])
    data2 = _jx(LORENZ[:300] * 1.01)
    trained, R = orc.forecaster.train_CESNForecaster(model, data, t)
    assert R.shape == (300, 1, 30)
    with count_compiles() as c:
        block(orc.forecaster.train_CESNForecaster(model, data2, t))
    assert c["compiles"] == 0
    Rn = _np(R)
    r0 = _jx(Rn[-1])
    ts = _jx(np.arange(20) * 0.01, np.float64)
    out = trained.forecast(ts, r0)
    assert out.shape == (20, 3) and _finite(out)
    np.testing.assert_allclose(_np(out)[0], trained.readout.readout(r0), rtol=1e-10)
    jf = jax.jit(lambda m, ts, r: m.forecast(ts, r))
    np.testing.assert_allclose(jf(trained, ts, r0), out, rtol=1e-9, atol=1e-9)
    g = jax.jit(jax.grad(lambda r, m: jnp.sum(m.forecast(ts, r) ** 2)))(r0, trained)
    assert _finite(g)
    vf = jax.jit(jax.vmap(lambda m, r: m.forecast(ts, r), in_axes=(None, 0)))
    batched = vf(trained, _jx(Rn[-3:]))
    np.testing.assert_allclose(
        _np(batched)[1], trained.forecast(ts, _jx(Rn[-2])), rtol=1e-8, atol=1e-9
    )


@functools.cache
def _sinusoids():
    """The classification data, drawn once (eager draws compile per call)."""
    seqs, labels = noisy_sinusoids(jax.random.key(0), 6, seq_len=60)
    return np.asarray(seqs), labels


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("state_repr", ["final", "mean"])
def test_classifier_contract(dtype, state_repr):
    seqs_np, labels = _sinusoids()
    seqs_np = seqs_np.astype(dtype)
    seqs = _jx(seqs_np)
    clf = orc.classifier.ESNClassifier(3, 3, 50, dtype=dtype, state_repr=state_repr)
    trained = block(orc.classifier.train_RCClassifier(clf, seqs, labels, spinup=5))
    seqs2 = _jx(seqs_np * dtype(1.01))
    with count_compiles() as c:
        block(orc.classifier.train_RCClassifier(clf, seqs2, labels, spinup=5))
    assert c["compiles"] == 0
    s0, s1, s3 = (_jx(seqs_np[i]) for i in (0, 1, 3))
    p = trained.classify(s0)
    assert p.shape == (3,) and p.dtype == dtype
    np.testing.assert_allclose(np.sum(_np(p)), 1.0, rtol=1e-5)
    with count_compiles() as c:
        block(trained.classify(s1))
    assert c["compiles"] == 0
    probs = jax.jit(jax.vmap(lambda m, s: m.classify(s), in_axes=(None, 0)))(
        trained, seqs
    )
    # float32: the batched and the single run round the states differently
    # (~1e-7), and the readout fitted to 6 sequences with 50 features nearly
    # interpolates (|W| ~ 770, the same weights as float64's since the fit
    # keeps float64 accuracy), so outputs agree to ~1e-4, not 1e-7.
    tol = 1e-3 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(_np(probs)[3], trained.classify(s3), rtol=tol, atol=tol)
    jc = jax.jit(lambda m, s: m.classify(s))
    np.testing.assert_allclose(jc(trained, s0), p, rtol=tol, atol=tol)
    if dtype == jnp.float64:
        g = jax.jit(jax.grad(lambda s, m: m.classify(s)[0]))(s0, trained)
        assert _finite(g)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_controller_contract(dtype):
    # the plant and its data in numpy: a stable linear system driven by noise
    u = 0.3 * np.random.default_rng(1).standard_normal((300, 1))
    A = np.array([[0.95, 0.1], [-0.1, 0.95]])
    B = np.array([[0.1], [0.0]])
    y = np.empty((300, 2))
    x = np.zeros(2)
    for k in range(300):
        x = A @ x + B @ u[k]
        y[k] = x
    y, u = y.astype(dtype), u.astype(dtype)
    ctrl = orc.control.ESNController(2, 1, 50, dtype=dtype)
    trained, R = block(orc.control.train_RCController(ctrl, _jx(y[:-1]), _jx(u[1:])))
    assert R.shape == (299, 50) and R.dtype == dtype
    with count_compiles() as c:
        block(orc.control.train_RCController(ctrl, _jx(1.01 * y[:-1]), _jx(u[1:])))
    assert c["compiles"] == 0
    r0 = _jx(_np(R)[-1])
    cs_np = np.zeros((20, 1), dtype)
    cs = _jx(cs_np)
    out = trained.apply_control(cs, r0)
    assert out.shape == (20, 2) and out.dtype == dtype
    jf = jax.jit(lambda m, c, r: m.apply_control(c, r))
    tol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(jf(trained, cs, r0), out, rtol=tol, atol=tol)
    vf = jax.jit(jax.vmap(lambda m, c: m.apply_control(c, r0), in_axes=(None, 0)))
    batched = vf(trained, _jx(np.stack([cs_np, cs_np + dtype(0.1)])))
    # batched products sum in another order: in float32 the 20 closed-loop
    # steps grow that to ~1e-4 relative on some CPUs (AVX-512 Zen 4)
    vtol = 5e-4 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(
        _np(batched)[1],
        trained.apply_control(_jx(cs_np + dtype(0.1)), r0),
        rtol=vtol,
        atol=vtol,
    )
    if dtype == jnp.float64:
        ref = _jx(np.ones((20, 2), dtype))

        def pen(c, m=trained):
            return m.compute_penalty(c, r0, ref)

        c0 = cs_np + 0.05
        g = jax.jit(jax.grad(pen))(_jx(c0), trained)
        v = np.random.default_rng(2).standard_normal(cs_np.shape)
        eps = 1e-6
        fd = (float(pen(_jx(c0 + eps * v))) - float(pen(_jx(c0 - eps * v)))) / (2 * eps)
        np.testing.assert_allclose(np.vdot(_np(g), v), fd, rtol=1e-6)


# ----------------------------------------------------------------- components


# Built on demand, only the driver a test checks. The GRU has the size of
# _custom_gru's (30): its cell's random initialisation compiles a program per
# weight shape and dtype, which the two then share.
_DRIVERS = {
    "esn": lambda dt: drivers.ESNDriver(40, dtype=dt, seed=0),
    "esn_parallel": lambda dt: drivers.ParallelESNDriver(
        40, chunks=3, dtype=dt, seed=0
    ),
    "esn_continuous": lambda dt: drivers.ESNDriver(
        40, mode="continuous", dtype=dt, seed=0
    ),
    "taylor": lambda dt: drivers.TaylorDriver(3, 40, dtype=dt, seed=0),
    "taylor_parallel": lambda dt: drivers.ParallelTaylorDriver(
        2, 40, chunks=2, dtype=dt, seed=0
    ),
    "gru": lambda dt: drivers.GRUDriver(30, seed=0, dtype=dt),
    "es2n": lambda dt: drivers.ES2NDriver(40, dtype=dt, seed=0),
    "mrnn": lambda dt: drivers.MRNNDriver(40, dtype=dt, seed=0),
    "eusn": lambda dt: drivers.EuSNDriver(40, dtype=dt, seed=0),
    "resesn": lambda dt: drivers.ResESNDriver(40, dtype=dt, seed=0),
    "rmn": lambda dt: drivers.RMNDriver(40, 15, dtype=dt, seed=0),
    "lif": lambda dt: drivers.LIFDriver(40, dtype=dt, seed=0),
    "eiesn": lambda dt: drivers.EIESNDriver(40, dtype=dt, seed=0),
    "state_delay": lambda dt: drivers.StateDelayDriver(
        drivers.ESNDriver(20, dtype=dt, seed=0), num_delays=2
    ),
    "input_delay": lambda dt: drivers.InputDelayDriver(
        drivers.ESNDriver(20, dtype=dt, seed=0), num_delays=2
    ),
    "reca": lambda dt: drivers.RECADriver(
        3, generations=2, permutations=2, expansion_size=8, dtype=dt, seed=0
    ),
    "deep_esn": lambda dt: drivers.DeepESNDriver(20, n_layers=2, dtype=dt, seed=0),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(_DRIVERS))
def test_driver_contract(name, dtype):
    d = _DRIVERS[name](dtype)
    shape = d.default_state().shape
    # the drive has the first layer's size for stacked drivers, the wrapped
    # driver's for delayed states
    p_shape = shape
    if isinstance(d, drivers.StackedDriver):
        p_shape = (d.sizes[0],)
    elif isinstance(d, drivers.StateDelayDriver):
        p_shape = d.driver.state_shape
    elif isinstance(d, drivers.RECADriver):
        p_shape = (d.in_dim,)
    assert d.default_state().dtype == dtype
    p_np = (0.1 * np.random.default_rng(0).standard_normal(p_shape)).astype(dtype)
    r_np = (0.1 * np.random.default_rng(1).standard_normal(shape)).astype(dtype)
    p, r = _jx(p_np), _jx(r_np)
    out = d.advance(p, r)
    assert out.shape == shape and out.dtype == dtype and _finite(out)
    np.testing.assert_allclose(
        jax.jit(lambda d, p, r: d.advance(p, r))(d, p, r), out, rtol=1e-5
    )
    ps, rs = _jx(np.stack([p_np, 2 * p_np])), _jx(np.stack([r_np, r_np]))
    # vmap and grad are traced inside one jax.jit each: run eagerly they
    # compile every primitive of the driver (and of its derivative) as a
    # program of its own; the transformations are the same
    batch = jax.jit(jax.vmap(lambda d, p, r: d.advance(p, r), in_axes=(None, 0, 0)))(
        d, ps, rs
    )
    np.testing.assert_allclose(
        _np(batch)[1], d.advance(_jx(2 * p_np), r), rtol=1e-5, atol=1e-6
    )
    # the batch call in one jit too (it dispatches on shapes alone, so it
    # takes the same batch path as run eagerly)
    np.testing.assert_allclose(
        jax.jit(lambda d, p, r: d(p, r))(d, ps, rs), batch, rtol=1e-6
    )
    g = jax.jit(jax.grad(lambda r, d: jnp.sum(d.advance(p, r))))(r, d)
    assert g.dtype == dtype and _finite(g)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_embedding_and_readout_contract(dtype):
    items = [
        (embeddings.LinearEmbedding(4, 20, 0.1, dtype=dtype, seed=0), (20,)),
        (
            embeddings.ParallelLinearEmbedding(
                4, 20, 0.1, dtype=dtype, chunks=2, locality=1, seed=0
            ),
            (2, 20),
        ),
        (
            embeddings.EnsembleLinearEmbedding(
                4, 20, 0.1, chunks=3, dtype=dtype, seed=0
            ),
            (3, 20),
        ),
    ]
    u_np = (np.arange(4) / 4).astype(dtype)
    u, seq, u2 = _jx(u_np), _jx(np.stack([u_np, 2 * u_np])), _jx(2 * u_np)
    for emb, shape in items:
        out = emb.embed(u)
        assert out.shape == shape and out.dtype == dtype
        np.testing.assert_allclose(
            _np(jax.jit(lambda e, x: e(x))(emb, seq))[1],
            emb.embed(u2),
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            jax.jit(lambda e, x: e.embed(x))(emb, u), out, rtol=1e-6
        )
    outs = [
        (readouts.LinearReadout(4, 20, dtype=dtype), (20,)),
        (readouts.QuadraticReadout(4, 20, dtype=dtype), (20,)),
        (readouts.NonlinearReadout(4, 20, [jnp.tanh], dtype=dtype), (20,)),
        (readouts.ParallelLinearReadout(4, 20, chunks=2, dtype=dtype), (2, 20)),
        (readouts.ParallelQuadraticReadout(4, 20, chunks=2, dtype=dtype), (2, 20)),
        (readouts.EnsembleLinearReadout(4, 20, chunks=3, dtype=dtype), (3, 20)),
    ]
    for ro, shape in outs:
        ro = ro.set_wout(_normal(ro.wout.shape, dtype, seed=0))
        r_np = np.random.default_rng(1).standard_normal(shape).astype(dtype)
        r = _jx(r_np)
        y = ro.readout(r)
        assert y.shape == (4,) and y.dtype == dtype
        np.testing.assert_allclose(
            _np(jax.jit(lambda m, x: m(x))(ro, _jx(np.stack([r_np, r_np]))))[0],
            y,
            rtol=1e-5,
        )
        np.testing.assert_allclose(
            jax.jit(lambda m, x: m.readout(x))(ro, r), y, rtol=1e-5
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("n_layers", [1, 2])
def test_regressor_contract(dtype, n_layers):
    from orc.regression import ESNRegressor, train_RCRegressor

    model = ESNRegressor(
        2, 1, 30, n_layers=n_layers, input_passthrough=True, dtype=dtype, seed=1
    )
    x_np = LORENZ[:400, :2].astype(dtype)
    x = _jx(x_np)
    y = _jx(LORENZ[:400, 2:], dtype)
    tol = 1e-4 if dtype == jnp.float32 else 1e-9
    trained, last = block(train_RCRegressor(model, x, y, spinup=20))
    x2_np = 2 * x_np
    x2 = _jx(x2_np)
    with count_compiles() as c:
        block(train_RCRegressor(model, x2, y, spinup=20))
    assert c["compiles"] == 0, f"training recompiled {c}"
    leaves = jax.tree.leaves(eqx.filter(trained, eqx.is_inexact_array))
    assert all(leaf.dtype == dtype for leaf in leaves)
    assert last.shape == model.driver.default_state().shape

    xa, xb = _jx(x_np[:50]), _jx(x_np[50:100])
    out = block(trained.predict(xa))
    assert out.shape == (50, 1) and out.dtype == dtype
    with count_compiles() as c:
        block(trained.predict(_jx(x2_np[:50])))
    assert c["compiles"] == 0, "predict recompiled"
    jitted = jax.jit(lambda m, u: m.predict(u))(trained, xa)
    np.testing.assert_allclose(jitted, out, rtol=tol, atol=tol)
    batch = jax.jit(jax.vmap(lambda m, u: m.predict(u), in_axes=(None, 0)))(
        trained, _jx(np.stack([x_np[:50], x_np[50:100]]))
    )
    np.testing.assert_allclose(_np(batch)[1], trained.predict(xb), rtol=tol, atol=tol)
    if dtype == jnp.float64:
        # the gradient's forward length is the same 50 samples as predict's
        # (one compiled predict program for the finite differences)
        def loss(u, m):
            return jnp.sum(m.predict(u) ** 2)

        def loss_np(u):
            return float(np.sum(_np(trained.predict(_jx(u))) ** 2))

        u0 = x_np[:50]
        g = jax.jit(jax.grad(loss))(_jx(u0), trained)
        v = np.random.default_rng(0).standard_normal(u0.shape)
        eps = 1e-6
        fd = (loss_np(u0 + eps * v) - loss_np(u0 - eps * v)) / (2 * eps)
        np.testing.assert_allclose(np.vdot(_np(g), v), fd, rtol=1e-5, atol=1e-7)
