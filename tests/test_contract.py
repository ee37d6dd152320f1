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
from _helpers import block, count_compiles, lorenz_rk4, noisy_sinusoids
from orc import drivers, embeddings, readouts
from orc.forecaster import RCForecasterBase

LORENZ = lorenz_rk4(1400) / 10.0


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
    "custom_taylor": _custom_taylor,
    "custom_gru": _custom_gru,
}


def _series(model, n, offset=0):
    x = LORENZ[offset : offset + n]
    if model.in_dim == 6:
        x = np.concatenate([x, -x], axis=1)
    return jnp.asarray(x, dtype=model.dtype)


DTYPES = [jnp.float32, jnp.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(FORECASTERS))
def test_forecaster_contract(name, dtype):
    model = FORECASTERS[name](dtype)
    data1, data2 = _series(model, 400), _series(model, 400, offset=500)
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

    r0 = R[-1]
    out = block(trained.forecast(25, r0))
    assert out.shape == (25, model.out_dim) and out.dtype == dtype
    assert bool(jnp.all(jnp.isfinite(out)))
    r1 = R[-2]
    with count_compiles() as c:
        block(trained.forecast(25, r1))
    assert c["compiles"] == 0, "forecast recompiled"

    # jax.jit with the model as an explicit argument
    @functools.partial(jax.jit, static_argnums=1)
    def jf(m, n, r):
        return m.forecast(n, r)

    np.testing.assert_allclose(jf(trained, 25, r0), out, rtol=tol, atol=tol)

    # vmap over a batch of start states equals the loop
    starts = R[-4:]
    batched = jax.vmap(lambda r: trained.forecast(10, r))(starts)
    looped = jnp.stack([trained.forecast(10, r) for r in starts])
    np.testing.assert_allclose(batched, looped, rtol=tol, atol=tol)

    # forecast_from_IC starts from the default state
    from_ic = trained.forecast_from_IC(10, data1[-50:])
    states = trained.force(data1[-50:], trained.driver.default_state())
    np.testing.assert_allclose(
        from_ic, trained.forecast(10, states[-1]), rtol=tol, atol=tol
    )

    if dtype == jnp.float64:
        # grad through the closed loop: directional derivative vs central difference
        def loss(r):
            return jnp.sum(trained.forecast(8, r) ** 2)

        g = jax.grad(loss)(r0)
        assert bool(jnp.all(jnp.isfinite(g)))
        v = jax.random.normal(jax.random.key(0), r0.shape, dtype)
        eps = 1e-6
        fd = (loss(r0 + eps * v) - loss(r0 - eps * v)) / (2 * eps)
        np.testing.assert_allclose(jnp.vdot(g, v), fd, rtol=1e-5, atol=1e-7)
        # and with respect to the trained weights
        gw = eqx.filter_grad(lambda m: jnp.sum(m.forecast(8, r0) ** 2))(trained)
        assert all(
            bool(jnp.all(jnp.isfinite(x)))
            for x in jax.tree.leaves(eqx.filter(gw, eqx.is_inexact_array))
        )


def test_cesn_contract():
    dt = jnp.float64
    model = orc.forecaster.CESNForecaster(3, 30, max_steps=4096, dtype=dt)
    t = jnp.arange(300, dtype=dt) * 0.01
    data = jnp.asarray(LORENZ[:300])
    data2 = data * 1.01
    trained, R = orc.forecaster.train_CESNForecaster(model, data, t)
    assert R.shape == (300, 1, 30)
    with count_compiles() as c:
        block(orc.forecaster.train_CESNForecaster(model, data2, t))
    assert c["compiles"] == 0
    ts = jnp.arange(20, dtype=dt) * 0.01
    out = trained.forecast(ts, R[-1])
    assert out.shape == (20, 3) and bool(jnp.all(jnp.isfinite(out)))
    np.testing.assert_allclose(out[0], trained.readout.readout(R[-1]), rtol=1e-10)
    jf = jax.jit(lambda m, ts, r: m.forecast(ts, r))
    np.testing.assert_allclose(jf(trained, ts, R[-1]), out, rtol=1e-9, atol=1e-9)
    g = jax.grad(lambda r: jnp.sum(trained.forecast(ts, r) ** 2))(R[-1])
    assert bool(jnp.all(jnp.isfinite(g)))
    batched = jax.vmap(lambda r: trained.forecast(ts, r))(R[-3:])
    np.testing.assert_allclose(
        batched[1], trained.forecast(ts, R[-2]), rtol=1e-8, atol=1e-9
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("state_repr", ["final", "mean"])
def test_classifier_contract(dtype, state_repr):
    seqs, labels = noisy_sinusoids(jax.random.key(0), 6, seq_len=60)
    seqs = seqs.astype(dtype)
    clf = orc.classifier.ESNClassifier(3, 3, 50, dtype=dtype, state_repr=state_repr)
    trained = block(orc.classifier.train_RCClassifier(clf, seqs, labels, spinup=5))
    seqs2 = seqs * 1.01
    with count_compiles() as c:
        block(orc.classifier.train_RCClassifier(clf, seqs2, labels, spinup=5))
    assert c["compiles"] == 0
    p = trained.classify(seqs[0])
    assert p.shape == (3,) and p.dtype == dtype
    np.testing.assert_allclose(jnp.sum(p), 1.0, rtol=1e-5)
    with count_compiles() as c:
        block(trained.classify(seqs[1]))
    assert c["compiles"] == 0
    probs = jax.vmap(trained.classify)(seqs)
    # float32: the batched and the single run round the states differently
    # (~1e-7), and the readout fitted to 6 sequences with 50 features nearly
    # interpolates (|W| ~ 770, the same weights as float64's since the fit
    # keeps float64 accuracy), so outputs agree to ~1e-4, not 1e-7.
    tol = 1e-3 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(probs[3], trained.classify(seqs[3]), rtol=tol, atol=tol)
    jc = jax.jit(lambda m, s: m.classify(s))
    np.testing.assert_allclose(jc(trained, seqs[0]), p, rtol=tol, atol=tol)
    if dtype == jnp.float64:
        g = jax.grad(lambda s: trained.classify(s)[0])(seqs[0])
        assert bool(jnp.all(jnp.isfinite(g)))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_controller_contract(dtype):
    key = jax.random.key(1)
    u = 0.3 * jax.random.normal(key, (300, 1), dtype)
    A = jnp.array([[0.95, 0.1], [-0.1, 0.95]], dtype)
    B = jnp.array([[0.1], [0.0]], dtype)

    def step(x, c):
        x = A @ x + B @ c
        return x, x

    y = jax.lax.scan(step, jnp.zeros(2, dtype), u)[1]
    ctrl = orc.control.ESNController(2, 1, 50, dtype=dtype)
    trained, R = block(orc.control.train_RCController(ctrl, y[:-1], u[1:]))
    assert R.shape == (299, 50) and R.dtype == dtype
    y2, u2 = 1.01 * y[:-1], u[1:]
    with count_compiles() as c:
        block(orc.control.train_RCController(ctrl, y2, u2))
    assert c["compiles"] == 0
    cs = jnp.zeros((20, 1), dtype)
    out = trained.apply_control(cs, R[-1])
    assert out.shape == (20, 2) and out.dtype == dtype
    jf = jax.jit(lambda m, c, r: m.apply_control(c, r))
    tol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(jf(trained, cs, R[-1]), out, rtol=tol, atol=tol)
    batched = jax.vmap(lambda c: trained.apply_control(c, R[-1]))(
        jnp.stack([cs, cs + 0.1])
    )
    np.testing.assert_allclose(
        batched[1], trained.apply_control(cs + 0.1, R[-1]), rtol=tol, atol=tol
    )
    if dtype == jnp.float64:
        ref = jnp.ones((20, 2), dtype)

        def pen(c):
            return trained.compute_penalty(c, R[-1], ref)

        g = jax.grad(pen)(cs + 0.05)
        v = jax.random.normal(jax.random.key(2), cs.shape, dtype)
        eps = 1e-6
        fd = (pen(cs + 0.05 + eps * v) - pen(cs + 0.05 - eps * v)) / (2 * eps)
        np.testing.assert_allclose(jnp.vdot(g, v), fd, rtol=1e-6)


# ----------------------------------------------------------------- components


def _drivers(dtype):
    return {
        "esn": drivers.ESNDriver(40, dtype=dtype, seed=0),
        "esn_parallel": drivers.ParallelESNDriver(40, chunks=3, dtype=dtype, seed=0),
        "esn_continuous": drivers.ESNDriver(40, mode="continuous", dtype=dtype, seed=0),
        "taylor": drivers.TaylorDriver(3, 40, dtype=dtype, seed=0),
        "taylor_parallel": drivers.ParallelTaylorDriver(
            2, 40, chunks=2, dtype=dtype, seed=0
        ),
        "gru": drivers.GRUDriver(40, seed=0, dtype=dtype),
        "deep_esn": drivers.DeepESNDriver(20, n_layers=2, dtype=dtype, seed=0),
    }


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize(
    "name",
    [
        "esn",
        "esn_parallel",
        "esn_continuous",
        "taylor",
        "taylor_parallel",
        "gru",
        "deep_esn",
    ],
)
def test_driver_contract(name, dtype):
    d = _drivers(dtype)[name]
    shape = d.default_state().shape
    # the drive has the first layer's size for stacked drivers
    p_shape = (d.sizes[0],) if isinstance(d, drivers.StackedDriver) else shape
    assert d.default_state().dtype == dtype
    p = 0.1 * jax.random.normal(jax.random.key(0), p_shape, dtype)
    r = 0.1 * jax.random.normal(jax.random.key(1), shape, dtype)
    out = d.advance(p, r)
    assert (
        out.shape == shape and out.dtype == dtype and bool(jnp.all(jnp.isfinite(out)))
    )
    np.testing.assert_allclose(
        jax.jit(lambda d, p, r: d.advance(p, r))(d, p, r), out, rtol=1e-5
    )
    batch = jax.vmap(d.advance)(jnp.stack([p, 2 * p]), jnp.stack([r, r]))
    np.testing.assert_allclose(batch[1], d.advance(2 * p, r), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        d(jnp.stack([p, 2 * p]), jnp.stack([r, r])), batch, rtol=1e-6
    )
    g = jax.grad(lambda r: jnp.sum(d.advance(p, r)))(r)
    assert g.dtype == dtype and bool(jnp.all(jnp.isfinite(g)))


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
    u = jnp.arange(4, dtype=dtype) / 4
    for emb, shape in items:
        out = emb.embed(u)
        assert out.shape == shape and out.dtype == dtype
        seq = jnp.stack([u, 2 * u])
        np.testing.assert_allclose(emb(seq)[1], emb.embed(2 * u), rtol=1e-5, atol=1e-6)
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
        ro = ro.set_wout(jax.random.normal(jax.random.key(0), ro.wout.shape, dtype))
        r = jax.random.normal(jax.random.key(1), shape, dtype)
        y = ro.readout(r)
        assert y.shape == (4,) and y.dtype == dtype
        np.testing.assert_allclose(ro(jnp.stack([r, r]))[0], y, rtol=1e-5)
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
    x = jnp.asarray(LORENZ[:400, :2], dtype)
    y = jnp.asarray(LORENZ[:400, 2:], dtype)
    tol = 1e-4 if dtype == jnp.float32 else 1e-9
    trained, last = block(train_RCRegressor(model, x, y, spinup=20))
    x2 = block(2 * x)
    with count_compiles() as c:
        block(train_RCRegressor(model, x2, y, spinup=20))
    assert c["compiles"] == 0, f"training recompiled {c}"
    leaves = jax.tree.leaves(eqx.filter(trained, eqx.is_inexact_array))
    assert all(leaf.dtype == dtype for leaf in leaves)
    assert last.shape == model.driver.default_state().shape

    out = block(trained.predict(x[:50]))
    assert out.shape == (50, 1) and out.dtype == dtype
    with count_compiles() as c:
        block(trained.predict(x2[:50]))
    assert c["compiles"] == 0, "predict recompiled"
    jitted = jax.jit(lambda m, u: m.predict(u))(trained, x[:50])
    np.testing.assert_allclose(jitted, out, rtol=tol, atol=tol)
    batch = jax.vmap(trained.predict)(jnp.stack([x[:50], x[50:100]]))
    np.testing.assert_allclose(batch[1], trained.predict(x[50:100]), rtol=tol, atol=tol)
    if dtype == jnp.float64:

        def loss(u):
            return jnp.sum(trained.predict(u) ** 2)

        u0 = x[:20]
        g = jax.grad(loss)(u0)
        v = jax.random.normal(jax.random.key(0), u0.shape, dtype)
        eps = 1e-6
        fd = (loss(u0 + eps * v) - loss(u0 - eps * v)) / (2 * eps)
        np.testing.assert_allclose(jnp.vdot(g, v), fd, rtol=1e-5, atol=1e-7)
