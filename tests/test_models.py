"""End-to-end behaviour of forecasters, classifiers and controllers.

Each check compares against an independent expectation: the truth of a
numerically integrated system, an exactly learnable linear system, a
hand-built regression, or the zero-control baseline.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4, noisy_sinusoids, valid_prediction_steps
from orc._ridge import RidgeStats, solve, stats_update

LYAP = 0.906
DT = 0.01
LORENZ = lorenz_rk4(8000, dt=DT)

# The entry points take numpy data, and the tests' slicing, references and
# comparisons are numpy: every eager jnp operation (a slice, ``jnp.asarray``
# of numpy) compiles a program of its own per shape. Components called on
# their own (readouts, the hand-built regression) run in one jax.jit each.


@functools.partial(jax.jit, static_argnums=2)
def _ridge(X, Y, beta):
    """The hand-built regression: ridge stats of X onto Y, solved."""
    zeros = RidgeStats.zeros(X.shape[1], Y.shape[1], None, jnp.float64)
    return solve(stats_update(zeros, X, Y), beta)


@jax.jit
def _batch_readout(model, R):
    return model.readout.batch_readout(R)


@pytest.fixture(scope="module")
def trained_esn():
    esn = orc.forecaster.ESNForecaster(data_dim=3, res_dim=500, seed=0)
    return orc.forecaster.train_RCForecaster(esn, LORENZ[:5000], spinup=100)


def test_lorenz_forecast_five_lyapunov_times(trained_esn):
    """ORC defaults on Lorenz63: normalised error < 0.4 for >= 5 Lyapunov times.

    Mean valid prediction time over six test windows (each warmed up on the 200
    samples before it) at least 5 Lyapunov times, and no window below 3.
    """
    esn, _ = trained_esn
    scale = np.sqrt(np.mean(np.sum(LORENZ**2, axis=1)))
    vpts = []
    for start in range(5200, 7100, 300):
        pred = esn.forecast_from_IC(900, LORENZ[start - 200 : start])
        steps = valid_prediction_steps(pred, LORENZ[start : start + 900], 0.4, scale)
        vpts.append(steps * DT * LYAP)
    assert np.mean(vpts) >= 5.0 and min(vpts) >= 3.0, vpts


def test_forecast_alignment(trained_esn):
    """forecast(n, R[-1])[0] is readout(R[-1]), the prediction of the next sample."""
    esn, R = trained_esn
    assert R.shape == (5000, 1, 500)
    R = np.asarray(R)
    out = np.asarray(esn.forecast(5, R[-1]))

    # the components' steps, in one program
    @jax.jit
    def steps(m, r_last, o0, r9, u10):
        r1 = m.driver.advance(m.embedding.embed(o0), r_last)
        r10 = m.driver.advance(m.embedding.embed(u10), r9)
        return m.readout.readout(r_last), m.readout.readout(r1), r10

    y0, y1, r = steps(esn, R[-1], out[0], R[9], LORENZ[10])
    np.testing.assert_allclose(out[0], y0, rtol=1e-12)
    # and the next output follows from feeding out[0] back
    np.testing.assert_allclose(out[1], y1, rtol=1e-12)
    np.testing.assert_allclose(out[0], LORENZ[5000], atol=0.05)
    # the states are the teacher-forced ones: R[t] follows from R[t-1] and u_t
    np.testing.assert_allclose(r, R[10], rtol=1e-12)


def test_training_equals_explicit_regression(trained_esn):
    """The trained readout is the ridge fit of states[t] onto u[t+1] after spinup."""
    esn, R = trained_esn
    X = np.asarray(R)[100:-1, 0, :]
    Y = LORENZ[101:5000]
    W = np.asarray(_ridge(X, Y, 8e-8))
    # beta=8e-8 leaves the weights ill-conditioned; compare what they predict
    wout = np.asarray(esn.readout.wout)[0]
    np.testing.assert_allclose(X @ wout.T, X @ W.T, atol=1e-6)
    np.testing.assert_allclose(X @ W.T, Y, atol=0.05)


def test_target_seq_and_multi_sequence_semantics():
    esn = orc.forecaster.ESNForecaster(3, 80, seed=1)
    U = LORENZ[:600]
    # an explicit target equal to the default one gives the same readout
    a, Ra = orc.forecaster.train_RCForecaster(esn, U[:-1], target_seq=U[1:])
    b, Rb = orc.forecaster.train_RCForecaster(esn, U)
    np.testing.assert_allclose(Ra, Rb, rtol=1e-12)
    pa, pb = _batch_readout(a, Ra), _batch_readout(b, Rb)
    np.testing.assert_allclose(pa, pb, atol=1e-6)
    # two trajectories in one fit = a fit on both state sets
    V = LORENZ[1000:1600]
    m, Rm = orc.forecaster.train_RCForecaster(
        esn, np.stack([U, V]), spinup=50, multi_sequence=True
    )
    assert Rm.shape == (2, 600, 1, 80)
    Rm = np.asarray(Rm)
    X = np.concatenate([Rm[0, 50:-1, 0], Rm[1, 50:-1, 0]])
    Y = np.concatenate([U[51:], V[51:]])
    W = np.asarray(_ridge(X, Y, 8e-8))
    wout = np.asarray(m.readout.wout)[0]
    np.testing.assert_allclose(X @ wout.T, X @ W.T, atol=1e-6)


def test_linear_system_learned_exactly():
    """A linear reservoir (Taylor order 1, no bias) learns a linear map exactly."""
    rng = np.random.default_rng(0)
    A = np.array([[0.9, 0.2], [-0.2, 0.9]])
    u = np.zeros((400, 2))
    u[0] = [1.0, 0.0]
    noise = 0.1 * rng.standard_normal((400, 2))
    for t in range(399):
        u[t + 1] = A @ u[t] + noise[t]
    model = orc.forecaster.RCForecasterBase(
        driver=orc.drivers.ParallelTaylorDriver(
            1, 40, bias=0.0, spectral_radius=0.5, seed=0
        ),
        readout=orc.readouts.ParallelLinearReadout(2, 40),
        embedding=orc.embeddings.ParallelLinearEmbedding(2, 40, 0.5, seed=1),
    )
    # targets: A u_t, which is linear in the (linear) reservoir state history
    trained, R = orc.forecaster.train_RCForecaster(
        model, u, target_seq=u @ A.T, spinup=60, beta=1e-12
    )
    pred = _batch_readout(trained, np.asarray(R)[100:-1])
    np.testing.assert_allclose(pred, u[100:] @ A.T, atol=1e-6)


def _lorenz96_rk4(n, dt=DT, N=8, F=8.0):
    """Lorenz96 by a fixed-step RK4 in numpy from ``sin(arange(N))`` (as
    ``orc.data.lorenz96``'s default start; independent of orc.data, and no
    program of its own to compile)."""
    ip1, im1, im2 = (np.roll(np.arange(N), shift) for shift in (-1, 1, 2))

    def f(x):
        return (x[ip1] - x[im2]) * x[im1] - x + F

    x = np.sin(np.arange(N, dtype=float))
    out = np.empty((n, N))
    out[0] = x
    for t in range(1, n):
        k1 = f(x)
        k2 = f(x + dt / 2 * k1)
        k3 = f(x + dt / 2 * k2)
        k4 = f(x + dt * k3)
        x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out[t] = x
    return out


def test_parallel_reservoirs_on_lorenz96():
    """Chunks + locality on Lorenz96 (8 sites, 4 chunks): short-term forecast skill."""
    U = _lorenz96_rk4(12000)[1000:]
    esn = orc.forecaster.ESNForecaster(8, 200, chunks=4, locality=2, seed=0)
    esn, R = orc.forecaster.train_RCForecaster(esn, U[:8000], spinup=100)
    assert R.shape == (8000, 4, 200)
    pred = esn.forecast(300, np.asarray(R)[-1])
    truth = U[8000:8300]
    # Lorenz96 F=8 has lambda_1 ~ 1.7: demand half a Lyapunov time (~30 steps)
    assert valid_prediction_steps(pred, truth, 0.4) >= 30


def test_ensemble_forecaster_on_lorenz():
    ens = orc.forecaster.EnsembleESNForecaster(3, 200, chunks=3, seed=0)
    ens, R = orc.forecaster.train_RCForecaster(ens, LORENZ[:5000], spinup=100)
    assert R.shape == (5000, 3, 200)
    pred = ens.forecast(300, np.asarray(R)[-1])
    assert valid_prediction_steps(pred, LORENZ[5000:5300], 0.4) * DT * LYAP >= 1.0


def test_cesn_forecasts_lorenz():
    U = LORENZ[:3000]
    t = np.arange(3000.0) * DT
    cesn = orc.forecaster.CESNForecaster(3, 300, seed=0)
    cesn, R = orc.forecaster.train_CESNForecaster(cesn, U, t, spinup=100)
    pred = cesn.forecast(np.arange(200.0) * DT, np.asarray(R)[-1])
    assert valid_prediction_steps(pred, LORENZ[3000:3200], 0.4) * DT * LYAP >= 0.5


def test_classifier_accuracy():
    train, labels = noisy_sinusoids(jax.random.key(0), 20, noise=0.3)
    test, test_labels = noisy_sinusoids(jax.random.key(1), 30, noise=0.3)
    for repr_ in ("final", "mean"):
        clf = orc.classifier.ESNClassifier(3, 3, 300, state_repr=repr_, seed=0)
        clf = orc.classifier.train_RCClassifier(clf, train, labels, spinup=10)
        # jitted: an eager vmap compiles every operation on its own
        probs = jax.jit(jax.vmap(lambda s, c=clf: c.classify(s, spinup=10)))(test)
        acc = float(
            np.mean(np.argmax(np.asarray(probs), axis=1) == np.asarray(test_labels))
        )
        assert acc >= 0.95, (repr_, acc)


def test_classifier_mean_feature_is_mean_of_forced_states():
    # the task's default length: the programs of test_classifier_accuracy's data
    seqs, _ = noisy_sinusoids(jax.random.key(0), 1)
    seq = np.asarray(seqs)[0]
    clf = orc.classifier.ESNClassifier(3, 3, 50, state_repr="mean")
    R = np.asarray(clf.force(seq, clf.driver.default_state()))
    np.testing.assert_allclose(clf.features(seq, spinup=7), R[7:].mean(0), rtol=1e-12)
    final = orc.classifier.ESNClassifier(3, 3, 50, state_repr="final")
    np.testing.assert_allclose(final.features(seq), R[-1], rtol=1e-12)


# ------------------------------------------------------------------- control


def _simulate_linear(u, x0):
    A = np.array([[0.95, 0.1], [-0.1, 0.95]])
    B = np.array([[0.1], [0.0]])
    xs, x = [], np.asarray(x0, float)
    for c in np.asarray(u):
        x = A @ x + B @ c
        xs.append(x)
    return np.array(xs)


def test_controller_tracks_linear_plant():
    rng = np.random.default_rng(0)
    u = 0.5 * rng.standard_normal((1500, 1))
    y = _simulate_linear(u, [0.0, 0.0])
    ctrl = orc.control.ESNController(2, 1, 300, seed=0, alpha_2=0.01, alpha_3=0.01)
    ctrl, R = orc.control.train_RCController(ctrl, y[:-1], u[1:])
    # y[t+1] = A y[t] + B u[t+1]; the state after (y[-2], u[-1]) predicts y[-1]
    horizon = 30
    ref = np.tile([0.5, 0.0], (horizon, 1))
    res = ctrl.compute_control(
        np.zeros((horizon, 1)), np.asarray(R)[-1], ref, return_info=True
    )
    assert bool(res.success)
    assert float(res.penalty) < float(res.initial_penalty)
    # the TRUE plant driven by the optimised control tracks better than with none
    # (apply_control's out[k] is the output after control k, starting from y[-1])
    x_ctrl = _simulate_linear(np.asarray(res.control), y[-1])
    x_zero = _simulate_linear(np.zeros((horizon, 1)), y[-1])
    err_ctrl = np.sum((x_ctrl - ref) ** 2)
    err_zero = np.sum((x_zero - ref) ** 2)
    assert err_ctrl < 0.5 * err_zero, (err_ctrl, err_zero)


def _lorenz_controlled(x0, controls, dt=DT):
    """Lorenz63 with additive forcing on all three equations, RK4, control held per step."""

    def f(x, c):
        return (
            np.array(
                [
                    10.0 * (x[1] - x[0]),
                    x[0] * (28.0 - x[2]) - x[1],
                    x[0] * x[1] - 8 / 3 * x[2],
                ]
            )
            + c
        )

    x, out, h = np.asarray(x0, float), [], dt / 5
    for c in np.asarray(controls):
        for _ in range(5):
            k1 = f(x, c)
            k2 = f(x + h / 2 * k1, c)
            k3 = f(x + h / 2 * k2, c)
            k4 = f(x + h * k3, c)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(x)
    return np.array(out)


def test_controller_tracks_lorenz():
    rng = np.random.default_rng(1)
    n = 6000
    # smooth random forcing (piecewise constant over 10 steps), scaled data
    c = np.repeat(rng.standard_normal((n // 10, 3)) * 20.0, 10, axis=0)
    y = _lorenz_controlled(LORENZ[0], c)
    s = 10.0
    ctrl = orc.control.ESNController(
        3, 3, 500, seed=0, embedding_scaling=0.1, alpha_2=1e-4, alpha_3=1e-4
    )
    ctrl, R = orc.control.train_RCController(ctrl, y[:-1] / s, c[1:] / 20.0, spinup=100)
    horizon = 20
    ref = np.tile(y[-1], (horizon, 1))  # hold the current state
    res = ctrl.compute_control(
        np.zeros((horizon, 3)),
        np.asarray(R)[-1],
        ref / s,
        throw=False,
        return_info=True,
        max_steps=300,
    )
    assert float(res.penalty) < float(res.initial_penalty)
    x_ctrl = _lorenz_controlled(y[-1], np.asarray(res.control) * 20.0)
    x_zero = _lorenz_controlled(y[-1], np.zeros((horizon, 3)))
    err_ctrl = np.sum((x_ctrl - ref) ** 2)
    err_zero = np.sum((x_zero - ref) ** 2)
    assert err_ctrl < 0.5 * err_zero, (err_ctrl, err_zero)
