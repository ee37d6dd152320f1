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
    np.testing.assert_allclose(R, np.stack(states), rtol=1e-10, atol=1e-12)

    W_out = np.asarray(model.readout.wout).reshape(3, 23)
    state, outputs = np.asarray(R[-1]), []
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
