"""Input → output regression, deep reservoirs and noise regularisation.

References are independent: numpy least squares on the states the model
produces, a hand-written layer-by-layer deep update, and the known effect of
state noise on a regression (it adds ``n σ²`` to the Gram's diagonal).
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc.drivers import DeepESNDriver, ESNDriver, StackedDriver
from orc.embeddings import LinearEmbedding
from orc.forecaster import DeepESNForecaster, ESNForecaster, train_RCForecaster
from orc.readouts import LinearReadout
from orc.regression import ESNRegressor, RCRegressorBase, train_RCRegressor

LORENZ = lorenz_rk4(7000)

# The data, slicing and references are numpy (the entry points take numpy):
# every eager jnp operation compiles a program of its own per shape. The
# model's own feature maps, used to build references, run in one jit each.


@eqx.filter_jit
def _prepare_train(readout, R):
    return readout.prepare_train(R)


@eqx.filter_jit
def _features(model, R, x):
    return model.features(R, x)


def nrmse(pred, truth):
    """orc.metrics.nrmse (its default "std" normalisation), in numpy: the
    RMSE over all entries over the standard deviation of all of ``truth``'s."""
    pred, truth = np.asarray(pred), np.asarray(truth)
    assert pred.shape == truth.shape, (pred.shape, truth.shape)
    return np.sqrt(np.mean((pred - truth) ** 2)) / np.std(truth)


def rsquare(pred, truth):
    """orc.metrics.rsquare of one feature, ``1 - SS_res / SS_tot``, in numpy."""
    pred, truth = np.asarray(pred), np.asarray(truth)
    assert pred.shape == truth.shape and pred.size == len(pred), (
        pred.shape,
        truth.shape,
    )
    return 1 - np.sum((truth - pred) ** 2) / np.sum((truth - truth.mean()) ** 2)


def _np_ridge_with_bias(F, Y, beta):
    """Ridge with an unpenalised intercept by centring (textbook)."""
    fm, ym = F.mean(0), Y.mean(0)
    Fc, Yc = F - fm, Y - ym
    W = np.linalg.solve(Fc.T @ Fc + beta * np.eye(F.shape[1]), Fc.T @ Yc).T
    return W, ym - W @ fm


@pytest.mark.parametrize("passthrough", [False, True])
def test_weights_match_numpy_ridge(passthrough):
    x = LORENZ[:600, :2] / 10
    y = LORENZ[:600, 2:] / 10
    model = ESNRegressor(2, 1, 40, input_passthrough=passthrough, quadratic=True)
    trained, states = train_RCRegressor(
        model, x, y, spinup=50, beta=1e-5, return_states=True
    )
    R = np.asarray(model.force(x))
    np.testing.assert_allclose(states, R, rtol=1e-12, atol=1e-12)
    phi = np.asarray(_prepare_train(model.readout, R))[:, 0]
    F = np.concatenate([x, phi], 1) if passthrough else phi
    W, b = _np_ridge_with_bias(F[50:], y[50:], 1e-5)
    # The weights are ill-conditioned (saturated nodes are nearly constant, so
    # they trade off against the bias); the one-pass sums lose a few digits
    # there, the fitted outputs do not.
    np.testing.assert_allclose(trained.b_out, b, rtol=1e-5)
    if passthrough:
        np.testing.assert_allclose(trained.w_input, W[:, :2], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(trained.readout.wout)[0], W[:, -40:], rtol=1e-4, atol=1e-5
    )
    pred = np.asarray(trained.predict(x))[50:]
    np.testing.assert_allclose(pred, F[50:] @ W.T + b, rtol=1e-7, atol=1e-8)


def test_without_bias_is_plain_ridge():
    x = LORENZ[:300, :1] / 10
    y = LORENZ[:300, 1:2] / 10
    model = ESNRegressor(1, 1, 30, readout_bias=False)
    trained, _ = train_RCRegressor(model, x, y, beta=1e-4)
    F = np.asarray(_prepare_train(model.readout, model.force(x)))[:, 0]
    A = F.T @ F + 1e-4 * np.eye(30)
    W = np.linalg.solve(A, F.T @ y).T
    assert trained.b_out is None
    # agreement to rounding amplified by the conditioning (7e7 here): another
    # order of the Gram's sums moves the solution by ~cond * eps
    tol = max(1e-9, 1e-14 * np.linalg.cond(A))
    wout = np.asarray(trained.readout.wout)[0]
    np.testing.assert_allclose(wout, W, rtol=tol, atol=1e-10)


def test_multi_sequence_and_streaming_continuation():
    x = (LORENZ[:800, :2] / 10).reshape(2, 400, 2)
    y = (LORENZ[:800, 2:] / 10).reshape(2, 400, 1)
    model = ESNRegressor(2, 1, 30, input_passthrough=True)
    trained, lasts = train_RCRegressor(model, x, y, spinup=30, multi_sequence=True)
    assert lasts.shape == (2, 30)
    lasts = np.asarray(lasts)
    F = []
    for i in range(2):
        R = model.force(x[i])
        F.append(np.asarray(_features(model, R, x[i]))[30:, 0, 1:])
        np.testing.assert_allclose(lasts[i], np.asarray(R)[-1], rtol=1e-12)
    Y = np.concatenate([y[0][30:], y[1][30:]])
    F = np.concatenate(F)
    W, b = _np_ridge_with_bias(F, Y, 1e-6)
    fitted = np.asarray(_features(trained, F[:, 2:], F[:, :2]))[:, 0]
    weights = np.concatenate(
        [
            np.asarray(trained.b_out)[:, None],
            np.asarray(trained.w_input),
            np.asarray(trained.readout.wout)[0],
        ],
        1,
    )
    np.testing.assert_allclose(fitted @ weights.T, F @ W.T + b, rtol=1e-7, atol=1e-8)
    # predicting from the last training state continues the stream
    whole = np.asarray(trained.predict(np.concatenate([x[0], x[1][:5]])))
    np.testing.assert_allclose(trained.predict(x[1][:5], lasts[0]), whole[-5:])


def test_observer_infers_lorenz_z_from_x_y():
    """Lu et al. 2017's reservoir observer: z(t) from the history of (x, y)."""
    u = LORENZ / 10
    x, z = u[:, :2], u[:, 2:]
    model = ESNRegressor(
        2,
        1,
        200,
        leak_rate=0.3,
        bias=0.2,
        Wr_spectral_radius=0.95,
        embedding_scaling=1.0,
        quadratic=True,
        seed=3,
    )
    trained, last = train_RCRegressor(model, x[:5000], z[:5000], spinup=200, beta=1e-8)
    pred = trained.predict(x[5000:], last)
    err = float(nrmse(pred, z[5000:]))
    assert err <= 2e-2, err


def _dense(layer) -> np.ndarray:
    """A plain ESN layer's ``W``, rebuilt from the stored ELL entries of its
    bank of one."""
    vals, cols = np.asarray(layer.wr.values)[0], np.asarray(layer.wr.columns)[0]
    W = np.zeros((vals.shape[0],) * 2)
    for row in range(vals.shape[0]):
        np.add.at(W[row], cols[row], vals[row])
    return W


def test_deep_driver_matches_layer_by_layer_update():
    d = DeepESNDriver(25, n_layers=3, coupling_scaling=0.4, seed=2)
    rng = np.random.default_rng(0)
    r = 0.3 * rng.standard_normal(75)
    p = 0.2 * rng.standard_normal(25)
    # one compiled step (called eagerly, each of its operations compiles
    # its own small program)
    advance = eqx.filter_jit(lambda d, p, r: d.advance(p, r))
    out = np.asarray(advance(d, p, r))
    drive, new = p, []
    for i, (layer, ri) in enumerate(zip(d.layers, np.split(r, 3), strict=True)):
        if i:
            drive = np.asarray(d.couplings[i - 1].win)[0] @ new[-1]
        W = _dense(layer)
        a, b = float(layer.leak), float(layer.bias)
        new.append((1 - a) * ri + a * np.tanh(W @ ri + drive + b))
    np.testing.assert_allclose(out, np.concatenate(new), rtol=1e-12, atol=1e-12)
    # the input reaches the top layer in the same step
    top = np.asarray(advance(d, p, np.zeros(75)))[50:]
    top0 = np.asarray(advance(d, np.zeros(25), np.zeros(75)))[50:]
    assert np.max(np.abs(top - top0)) > 1e-3


def test_deep_forecaster_trains_and_forecasts_lorenz():
    u = LORENZ[:3000] / 10
    deep = DeepESNForecaster(3, 150, n_layers=2, seed=1)
    assert deep.driver.default_state().shape == (300,)
    trained, R = train_RCForecaster(deep, u[:2500], spinup=100)
    assert R.shape == (2500, 300)
    pred = np.asarray(trained.forecast(50, np.asarray(R)[-1]))
    # a short closed-loop forecast follows the attractor
    assert float(nrmse(pred[:20], u[2500:2520])) < 0.1


def test_one_layer_deep_forecaster_is_an_esn_of_one_layer():
    """``n_layers=1`` builds a deep model of one layer (it raised a chunk
    mismatch before): its step is the ESN update of that layer, and it
    trains and forecasts; the regressor's one layer stays the plain driver."""
    deep = DeepESNForecaster(3, 30, n_layers=1, seed=4)
    assert isinstance(deep.driver, DeepESNDriver) and deep.n_layers == 1
    (layer,) = deep.driver.layers
    rng = np.random.default_rng(0)
    rn, pn = 0.3 * rng.standard_normal(30), 0.2 * rng.standard_normal(30)
    a, b = float(layer.leak), float(layer.bias)
    expected = (1 - a) * rn + a * np.tanh(_dense(layer) @ rn + pn + b)
    step = eqx.filter_jit(
        lambda d, p, r: d.advance(p, r)
    )  # one program, not one per op
    got = np.asarray(step(deep.driver, pn, rn))
    np.testing.assert_allclose(got, expected, 1e-12)
    u = LORENZ[:1200] / 10
    trained, R = train_RCForecaster(deep, u[:1000], spinup=100)
    assert R.shape == (1000, 30)
    pred = np.asarray(trained.forecast(20, np.asarray(R)[-1]))
    assert pred.shape == (20, 3) and bool(np.all(np.isfinite(pred)))
    assert type(ESNRegressor(2, 1, 20, n_layers=1).driver) is ESNDriver
    assert isinstance(ESNRegressor(2, 1, 20, n_layers=2).driver, DeepESNDriver)


def test_stacked_driver_validates_its_pieces():
    a, b = ESNDriver(20, seed=0), ESNDriver(10, seed=1)
    with pytest.raises(ValueError, match="couplings must have len"):
        StackedDriver([a, b], [])
    with pytest.raises(ValueError, match=r"couplings\[0\] must map 20 -> 10"):
        StackedDriver([a, b], [LinearEmbedding(10, 20, 0.1, seed=0)])
    with pytest.raises(ValueError, match="discrete mode"):
        StackedDriver(
            [a, ESNDriver(10, mode="continuous", seed=1)],
            [LinearEmbedding(20, 10, 0.1, seed=0)],
        )
    with pytest.raises(ValueError, match="n_layers"):
        DeepESNForecaster(3, 20, n_layers=0)
    d = StackedDriver([a, b], [LinearEmbedding(20, 10, 0.1, seed=0)])
    with pytest.raises(ValueError, match=r"proj_vars must have shape \(20,\)"):
        d.advance(np.zeros(30), d.default_state())


def test_state_noise_acts_like_ridge():
    """E[(F+E)^T (F+E)] = F^T F + n σ² I: state noise of σ on n rows is close
    to a ridge penalty of n σ² (Bishop 1995)."""
    u = LORENZ[:4001] / 10
    model = ESNForecaster(3, 40, seed=0)
    sigma, n = 0.01, 4000
    noisy, _ = train_RCForecaster(model, u, state_noise=sigma, noise_seed=1)
    ridge, _ = train_RCForecaster(model, u, beta=n * sigma**2)
    plain, _ = train_RCForecaster(model, u, beta=1e-10)
    w_noise, w_ridge, w_plain = (
        np.asarray(m.readout.wout) for m in (noisy, ridge, plain)
    )
    rel = float(np.linalg.norm(w_noise - w_ridge) / np.linalg.norm(w_ridge))
    far = float(np.linalg.norm(w_plain - w_ridge) / np.linalg.norm(w_ridge))
    assert rel < 0.2 and far > 1, (rel, far)


def test_input_noise_is_seeded_and_only_perturbs_the_forcing():
    # the model and data of test_state_noise_acts_like_ridge: the clean
    # training is its program
    u = LORENZ[:4001] / 10
    model = ESNForecaster(3, 40, seed=0)
    clean, R0 = train_RCForecaster(model, u)
    a, Ra = train_RCForecaster(model, u, input_noise=0.05, noise_seed=4)
    b, Rb = train_RCForecaster(model, u, input_noise=0.05, noise_seed=4)
    c, Rc = train_RCForecaster(model, u, input_noise=0.05, noise_seed=5)
    zero, Rz = train_RCForecaster(model, u, input_noise=0.0, noise_seed=5)
    np.testing.assert_array_equal(Ra, Rb)
    np.testing.assert_array_equal(a.readout.wout, b.readout.wout)
    assert not np.allclose(Ra, Rc)
    np.testing.assert_array_equal(Rz, R0)
    # states are those of a forcing that differs from the data by ~σ: the
    # deviation grows with σ
    R0 = np.asarray(R0)
    d1 = float(np.std(np.asarray(Ra) - R0))
    _, R2 = train_RCForecaster(model, u, input_noise=0.2, noise_seed=4)
    assert 0 < d1 < float(np.std(np.asarray(R2) - R0))


def test_noise_and_regression_bad_inputs():
    u = LORENZ[:200] / 10
    model = ESNForecaster(3, 20)
    with pytest.raises(ValueError, match="input_noise"):
        train_RCForecaster(model, u, input_noise=-1.0)
    with pytest.raises(ValueError, match="state_noise"):
        train_RCForecaster(model, u, state_noise=float("nan"))
    with pytest.raises(TypeError, match="train_ESNForecaster: unexpected"):
        orc.forecaster.train_ESNForecaster(model, u, noise=1.0)

    reg = ESNRegressor(2, 1, 20)
    x, y = u[:, :2], u[:, 2:]
    with pytest.raises(ValueError, match="in_seq must have 2 features"):
        train_RCRegressor(reg, u, y)
    with pytest.raises(ValueError, match="target_seq must have 1 features"):
        train_RCRegressor(reg, x, u)
    with pytest.raises(ValueError, match="same length as in_seq"):
        train_RCRegressor(reg, x, y[:-1])
    with pytest.raises(ValueError, match="spinup"):
        train_RCRegressor(reg, x, y, spinup=200)
    with pytest.raises(ValueError, match="initial_res_state must have shape"):
        train_RCRegressor(reg, x, y, initial_res_state=np.zeros(3))
    with pytest.raises(ValueError, match="beta"):
        train_RCRegressor(reg, x, y, beta=-1.0)
    with pytest.raises(TypeError, match="RCRegressorBase"):
        train_RCRegressor(model, x, y)
    x_nan = x.copy()
    x_nan[5, 0] = np.nan
    with pytest.raises(Exception, match="in_seq contains NaN"):
        jax.block_until_ready(train_RCRegressor(reg, x_nan, y))
    with pytest.raises(ValueError, match=r"in_seq must have 2 columns \(in_dim\)"):
        reg.predict(u)
    with pytest.raises(ValueError, match="one reservoir"):
        RCRegressorBase(
            orc.drivers.ParallelESNDriver(10, chunks=2, seed=0),
            orc.readouts.ParallelLinearReadout(2, 10, chunks=2),
            orc.embeddings.ParallelLinearEmbedding(2, 10, 0.1, chunks=2, seed=0),
        )
    # a custom regressor on the base class, from components
    custom = RCRegressorBase(
        ESNDriver(10, seed=0),
        LinearReadout(1, 10),
        LinearEmbedding(2, 10, 0.1, seed=1),
        input_passthrough=True,
    )
    fitted, _ = train_RCRegressor(custom, x, y)
    assert fitted.predict(x).shape == (200, 1)


def test_regressor_save_load_round_trip(tmp_path):
    x = LORENZ[:300, :2] / 10
    y = LORENZ[:300, 2:] / 10
    reg, _ = train_RCRegressor(
        ESNRegressor(2, 1, 20, n_layers=2, input_passthrough=True), x, y
    )
    orc.save(tmp_path / "reg.orc", reg)
    back = orc.load(tmp_path / "reg.orc")
    np.testing.assert_array_equal(back.predict(x), reg.predict(x))
    assert type(back.driver) is DeepESNDriver


def test_mackey_glass_one_step_r2():
    """Mackey-Glass τ = 17, one-step prediction with 100 units: R² ≥ 0.9999."""
    x = np.asarray(orc.data.mackey_glass(5000))
    for seed in range(2):
        reg = ESNRegressor(
            1,
            1,
            100,
            leak_rate=0.5,
            bias=0.2,
            embedding_scaling=1.0,
            Wr_spectral_radius=1.0,
            Wr_density=0.1,
            quadratic=True,
            input_passthrough=True,
            seed=seed,
        )
        reg, last = train_RCRegressor(reg, x[:3999], x[1:4000], spinup=100, beta=1e-8)
        pred = reg.predict(x[4000:-1], last)
        r2 = float(rsquare(pred, x[4001:]))
        assert r2 >= 0.9999, (seed, r2)


def test_narma10_beats_a_linear_filter_of_the_last_ten_inputs():
    u, y = (np.asarray(a) for a in orc.data.narma(6000, order=10, seed=0))
    reg = ESNRegressor(
        1,
        1,
        300,
        leak_rate=1.0,
        bias=0.0,
        embedding_scaling=0.5,
        Wr_spectral_radius=0.95,
        Wr_density=0.1,
        quadratic=True,
        input_passthrough=True,
    )
    reg, last = train_RCRegressor(reg, u[:4000], y[:4000], spinup=200, beta=1e-8)
    err = float(nrmse(reg.predict(u[4000:], last), y[4000:]))
    # independent baseline: least squares on [1, u_t, ..., u_{t-9}]
    un, yn = u[:, 0], y[:, 0]
    lags = np.stack([np.roll(un, k) for k in range(10)], 1)
    X = np.concatenate([np.ones((6000, 1)), lags], 1)
    w = np.linalg.lstsq(X[200:4000], yn[200:4000], rcond=None)[0]
    base = float(nrmse(X[4000:] @ w, yn[4000:]))
    print(f"NARMA10 NRMSE (std): reservoir {err:.3f}, linear filter {base:.3f}")
    assert err < 0.6 * base and err < 0.3, (err, base)


def test_defaults_learn_narma10_and_lorenz_z_from_raw_x():
    """The regressor's own defaults, against ORC's forecasting scales it once
    took. NARMA10: within 0.4 of a linear filter's error (the forecasting
    scales do no better than the filter). Lorenz63's z from raw x alone: the
    small default bias breaks the reservoir's odd symmetry; with no bias the
    states for -x are minus those for x, so the prediction is odd about the
    readout bias and cannot follow z, which the Lorenz symmetry
    (x, y, z) -> (-x, -y, z) leaves even."""
    u, y = (np.asarray(a) for a in orc.data.narma(6000, order=10, seed=0))
    lags = np.stack([np.roll(u[:, 0], k) for k in range(10)], 1)
    X = np.concatenate([np.ones((6000, 1)), lags], 1)
    w = np.linalg.lstsq(X[200:4000], y[200:4000, 0], rcond=None)[0]
    base = float(nrmse(X[4000:] @ w, y[4000:, 0]))

    def narma10(**kw):
        reg, last = train_RCRegressor(
            ESNRegressor(1, 1, 200, **kw), u[:4000], y[:4000], spinup=200
        )
        return float(nrmse(reg.predict(u[4000:], last), y[4000:]))

    forecasting = dict(leak_rate=0.6, bias=1.6, embedding_scaling=0.08,
                       Wr_spectral_radius=0.8)  # fmt: skip
    err, old = narma10(), narma10(**forecasting)
    assert err < 0.4 * base and old > 0.9 * base, (err, old, base)

    x, z = LORENZ[:, :1], LORENZ[:, 2:]
    errs = {}
    for bias in (None, 0.0):
        kw = {} if bias is None else {"bias": bias}
        reg, last = train_RCRegressor(
            ESNRegressor(1, 1, 200, **kw), x[:5000], z[:5000], spinup=200
        )
        errs[bias] = float(nrmse(reg.predict(x[5000:], last), z[5000:]))
        if bias == 0.0:  # odd about the readout bias, to rounding
            start = reg.driver.default_state()
            odd = reg.predict(x[5000:], start) + reg.predict(-x[5000:], start)
            np.testing.assert_allclose(odd[:, 0], 2 * float(reg.b_out[0]), atol=1e-9)
    assert errs[None] < 0.15 and errs[0.0] > 0.9, errs
