"""HybridESNForecaster: a reservoir joined to an imperfect model (Pathak et al. 2018).

The update and the closed loop are checked against numpy written from the
paper's equations; the point of the model against the paper's finding
(Fig. 2: with Lorenz63 equations whose rho is 5% off, the hybrid forecasts
far longer than the equations or a reservoir of the same size alone); files
and bad arguments as for every model. The contract (jit, vmap, grad, dtypes,
no recompilation) is in ``test_contract.py``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc.forecaster import HybridESNForecaster, train_RCForecaster

DT = 0.01
LYAPUNOV = 0.9056


def _lorenz(x, rho):
    return jnp.stack(
        [10.0 * (x[1] - x[0]), x[0] * (rho - x[2]) - x[1], x[0] * x[1] - 8 / 3 * x[2]]
    )


def wrong_rho_step(u):
    """One RK4 step of Lorenz63 with rho 5% too large: the imperfect model."""
    f = functools.partial(_lorenz, rho=28.0 * 1.05)
    k1 = f(u)
    k2 = f(u + DT / 2 * k1)
    k3 = f(u + DT / 2 * k2)
    k4 = f(u + DT * k3)
    return u + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def _knowledge_np(u):
    return np.asarray(wrong_rho_step(jnp.asarray(u)))


def test_states_and_forecast_are_the_papers_equations():
    """``r' = (1 - a) r + a tanh(W r + W_in [u; K(u)] + b)``, states
    ``[r'; K(u)]``, outputs ``W_out [r'; K(u)]``, the closed loop feeding each
    output back, all in numpy from the model's matrices."""
    U = lorenz_rk4(700)
    model = HybridESNForecaster(3, 20, wrong_rho_step, leak_rate=0.7, seed=3)
    model, R = train_RCForecaster(model, U[:600], spinup=50)
    res = model.driver.reservoir
    W = np.asarray(res.wr.todense()).reshape(20, 20)
    W_in = np.asarray(model.embedding.reservoir.win).reshape(20, 6)
    b = np.broadcast_to(np.asarray(res.bias), (20,))
    a = float(np.asarray(res.leak).ravel()[0])

    def step(r, u):
        k = _knowledge_np(u)
        r = (1 - a) * r + a * np.tanh(W @ r + W_in @ np.concatenate([u, k]) + b)
        return r, np.concatenate([r, k])

    r = np.zeros(20)
    states = []
    for u in U[:600]:
        r, s = step(r, u)
        states.append(s)
    assert R.shape == (600, 1, 23)  # a bank of one reservoir, as ESNForecaster's
    np.testing.assert_allclose(R[:, 0], np.stack(states), rtol=1e-10, atol=1e-12)

    W_out = np.asarray(model.readout.wout).reshape(3, 23)
    state, outputs = np.asarray(R[-1, 0]), []
    for _ in range(30):
        y = W_out @ state
        outputs.append(y)
        r, state = step(state[:20], y)
    np.testing.assert_allclose(model.forecast(30, R[-1]), np.stack(outputs), rtol=1e-8)


def test_hybrid_outlasts_the_model_and_the_reservoir():
    """Pathak et al. 2018, Fig. 2: the imperfect equations alone stay valid
    for about two Lyapunov times, a 100-node ESN for several, the hybrid of
    the two for twice as long (valid time: until the error exceeds 0.4 of the
    training data's RMS norm). Measured here: 1.9; 6.6 and 6.6; 12.9 and
    12.3 Lyapunov times (ESN and hybrid, seeds 0 and 1)."""
    U = lorenz_rk4(8001)
    train, truth = U[:6000], U[6000:8000]
    scale = float(np.sqrt(np.mean(np.sum(train**2, axis=1))))

    def valid_time(pred):
        return float(
            orc.metrics.valid_prediction_time(
                pred,
                truth,
                threshold=0.4,
                dt=DT,
                lyapunov_exponent=LYAPUNOV,
                scale=scale,
            )
        )

    def knowledge_only(u, _):
        u = wrong_rho_step(u)
        return u, u

    equations = valid_time(jax.lax.scan(knowledge_only, U[5999], length=2000)[1])
    hybrid, esn = [], []
    for seed in (0, 1):
        h, R = train_RCForecaster(
            HybridESNForecaster(3, 100, wrong_rho_step, seed=seed), train, spinup=200
        )
        hybrid.append(valid_time(h.forecast(2000, R[-1])))
        e, Re = train_RCForecaster(
            orc.forecaster.ESNForecaster(3, 100, seed=seed), train, spinup=200
        )
        esn.append(valid_time(e.forecast(2000, Re[-1])))
    assert equations < 2.5
    assert min(hybrid) > 5 * equations
    assert np.mean(hybrid) > 1.5 * np.mean(esn)


def test_files_name_the_knowledge_model(tmp_path):
    """A hybrid saves its knowledge model by name; loading rebuilds it only
    when allowed, then forecasts to the same bits."""
    U = lorenz_rk4(400)
    model, R = train_RCForecaster(HybridESNForecaster(3, 20, wrong_rho_step), U)
    path = tmp_path / "hybrid.orc"
    orc.save(path, model)
    with pytest.raises(orc.io.ModelFileError, match="wrong_rho_step"):
        orc.load(path)
    loaded = orc.load(path, allow=[wrong_rho_step])
    assert loaded.embedding.knowledge is wrong_rho_step
    np.testing.assert_array_equal(loaded.forecast(50, R[-1]), model.forecast(50, R[-1]))


@pytest.mark.parametrize(
    "knowledge, match",
    [
        (3, "be a function"),
        (lambda u: jnp.sum(u), r"return one non-empty vector \(k,\)"),
        (
            lambda u: u @ jnp.ones((4, 2)),
            r"map one sample of shape \(3,\).*dot_general",
        ),
        (lambda u: (u > 0).astype(jnp.int32), "return floating values"),
    ],
)
def test_bad_knowledge_is_named(knowledge, match):
    with pytest.raises(TypeError, match=f"HybridESNForecaster: knowledge must {match}"):
        HybridESNForecaster(3, 10, knowledge)


def shifted_decay(u):
    """A crude 'model' of a travelling pattern: shift by one point, damp."""
    return 0.9 * jnp.roll(u, 1)


def test_parallel_states_see_their_patch_of_data_and_model():
    """With chunks, reservoir ``c`` is driven by the samples and the model's
    predictions of its points plus ``locality`` neighbours each side
    (wrapped), ``W_in,c`` taking them point by point ``[u_j, K_j]``, and
    carries the predictions of its own points: numpy from the matrices."""
    d, chunks, loc, n = 8, 4, 1, 6
    model = HybridESNForecaster(
        d, n, shifted_decay, chunks=chunks, locality=loc, leak_rate=0.8, seed=1
    )
    U = np.random.default_rng(0).standard_normal((30, d))
    R = np.asarray(model.force(U, model.driver.default_state()))
    res = model.driver.reservoir
    W = np.asarray(res.wr.todense())  # (chunks, n, n)
    W_in = np.asarray(model.embedding.reservoir.win)  # (chunks, n, 2 (s + 2 loc))
    b = np.broadcast_to(np.asarray(res.bias), (chunks, n))
    s = d // chunks
    r = np.zeros((chunks, n))
    for t, u in enumerate(U):
        k = 0.9 * np.roll(u, 1)
        for c in range(chunks):
            points = np.arange(c * s - loc, (c + 1) * s + loc) % d
            window = np.stack([u[points], k[points]], axis=-1).reshape(-1)
            act = np.tanh(W[c] @ r[c] + W_in[c] @ window + b[c])
            r[c] = 0.2 * r[c] + 0.8 * act
            np.testing.assert_allclose(R[t, c, :n], r[c], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(R[t, c, n:], k[c * s : (c + 1) * s], rtol=1e-12)


def test_parallel_hybrid_outlasts_on_kuramoto_sivashinsky():
    """Wikner et al. 2020: on KS (L = 22, 64 points) 8 local reservoirs of
    100 nodes joined to a KS model whose domain is 5% too long forecast
    longer than the reservoirs or the model alone. Measured here (5 windows,
    Lyapunov times): hybrid mean 2.3, reservoirs alone 0.64, model 0.45."""
    from orc.data._ks import _advance, _operators

    L, nx, dt, lyapunov = 22.0, 64, 0.25, 0.043
    operators = _operators(jnp.asarray(dt), jnp.asarray(L * 1.05), n=nx)

    def wrong_length_step(u):
        return _advance(jnp.fft.rfft(u), operators, n=nx, n_steps=1)[1][0]

    u0 = 0.5 * np.random.default_rng(2018).standard_normal(nx + 1)
    u0 -= u0[:nx].mean()
    windows, warm, horizon = 5, 100, 600
    n_samples = 500 + 6000 + windows * (warm + horizon)
    U, _ = orc.data.KS_1D(tN=n_samples * dt, u0=u0, dt=dt, domain=(0, L), Nx=nx + 1)
    U = np.asarray(U)[500:, :nx]
    train, test = U[:6000], U[6000:]
    scale = float(np.sqrt(np.mean(np.sum(train**2, axis=1))))
    kw = dict(
        chunks=8, locality=6, leak_rate=1.0, Wr_spectral_radius=0.6,
        embedding_scaling=0.1, bias=0.5,
    )  # fmt: skip
    fit = dict(spinup=100, beta=1e-6, input_noise=3e-4, noise_seed=0)

    def mean_valid_time(forecast):
        times = []
        for w in range(windows):
            start = w * (warm + horizon)
            warmup = test[start : start + warm]
            truth = test[start + warm : start + warm + horizon]
            vpt = orc.metrics.valid_prediction_time(
                forecast(warmup), truth, 0.4, dt, lyapunov, scale=scale
            )
            times.append(float(vpt))
        return np.mean(times)

    hybrid, _ = train_RCForecaster(
        HybridESNForecaster(nx, 100, wrong_length_step, **kw), train, **fit
    )
    esn, _ = train_RCForecaster(
        orc.forecaster.ESNForecaster(nx, 100, **kw), train, **fit
    )

    @jax.jit
    def model_alone(u0):
        def step(u, _):
            u = wrong_length_step(u)
            return u, u

        return jax.lax.scan(step, u0, length=horizon)[1]

    hybrid_time = mean_valid_time(lambda w: hybrid.forecast_from_IC(horizon, w))
    esn_time = mean_valid_time(lambda w: esn.forecast_from_IC(horizon, w))
    model_time = mean_valid_time(lambda w: model_alone(jnp.asarray(w[-1])))
    assert hybrid_time > 2 * esn_time
    assert hybrid_time > 2 * model_time


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(chunks=2, knowledge=lambda u: u[:2]), "must predict the whole state"),
        (dict(locality=1), "locality .* needs chunks > 1 and periodic=True"),
        (dict(chunks=2, locality=1, periodic=False), "needs chunks > 1 and periodic"),
    ],
)
def test_bad_layouts_are_named(kwargs, match):
    kwargs = {"knowledge": shifted_decay, **kwargs}
    with pytest.raises(ValueError, match=f"HybridESNForecaster: .*{match}"):
        HybridESNForecaster(4, 10, **kwargs)


def test_a_knowledge_embedding_windows_whole_points():
    """Built by hand, the embedding's windows must hold whole [u_j, K_j]
    pairs: an odd locality would split them."""
    odd = orc.embeddings.ParallelLinearEmbedding(
        8, 5, 0.1, chunks=2, locality=1, seed=0
    )
    with pytest.raises(ValueError, match=r"locality \(1\) must count whole points"):
        orc.forecaster.KnowledgeEmbedding(4, odd, shifted_decay)
    even = orc.embeddings.ParallelLinearEmbedding(
        8, 5, 0.1, chunks=2, locality=2, seed=0
    )
    assert orc.forecaster.KnowledgeEmbedding(4, even, shifted_decay).res_dim == 7
