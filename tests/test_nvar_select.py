"""``input_noise="auto"``: the NVAR's training noise chosen by closed-loop
validation on held-out data (``orc.forecaster.select_input_noise``)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import orc
from orc.forecaster import NVARForecaster, select_input_noise, train_NVARForecaster
from orc.forecaster.nvar import AUTO_NOISE_CANDIDATES


@functools.cache
def _lorenz(dt, tN=60.0):
    """Lorenz63 samples (numpy, read-only: shared by the tests)."""
    u = np.asarray(orc.data.lorenz63(tN=tN, dt=dt)[0])
    u.flags.writeable = False
    return u


@pytest.mark.parametrize("dt", [0.025])
def test_picks_the_noise_that_keeps_the_loop_bounded(dt):
    """The paper's quadratic NVAR on raw features without noise leaves the
    attractor within a Lyapunov time on accurately integrated Lorenz63 data
    (Zhang et al. 2024); with noise 1e-3 it does not. The selection sees it on
    the held-out windows alone."""
    model = NVARForecaster(3, k=2, s=1, order=2)
    chosen, scores = select_input_noise(
        model, _lorenz(dt), standardize=False, candidates=(0.0, 1e-3)
    )
    assert chosen == 1e-3
    (bounded0, valid0), (bounded1, valid1) = scores[0.0], scores[1e-3]
    assert bounded0 < bounded1 == 5
    assert valid1 > 5 * valid0

    # and the model the test windows then see: the noiseless one diverges
    u = _lorenz(dt, tN=80.0)
    split = int(60.0 / dt)
    with pytest.warns(orc.forecaster.DivergenceWarning):
        bad, _ = train_NVARForecaster(
            model, u[:split], standardize=False, input_noise=0
        )
        bad.forecast_from_IC(1000, u[split - 10 : split])


def test_auto_is_the_selected_fraction():
    """On data of unit standard deviation a fraction of the std is the noise
    itself: training with "auto" equals training with the chosen number."""
    u = _lorenz(0.02, tN=80.0)
    u = (u - u.mean(0)) / u.std(0)
    model = NVARForecaster(3)
    chosen, scores = select_input_noise(model, u)
    assert chosen in AUTO_NOISE_CANDIDATES
    assert set(scores) == set(AUTO_NOISE_CANDIDATES)
    best = max(scores.values())
    assert scores[chosen] == best
    assert all(c >= chosen for c, s in scores.items() if s == best)  # ties: smaller
    auto, _ = train_NVARForecaster(model, u)
    fixed, _ = train_NVARForecaster(model, u, input_noise=chosen)
    # the std of standardised data is 1 to rounding, which the nearly
    # unregularised fit amplifies to ~1e-5; another candidate moves it by far more
    np.testing.assert_allclose(auto.wout, fixed.wout, rtol=1e-3, atol=1e-6)
    other = max(c for c in AUTO_NOISE_CANDIDATES if c != chosen)
    moved, _ = train_NVARForecaster(model, u, input_noise=other)
    w_auto, w_fixed, w_moved = (np.asarray(m.wout) for m in (auto, fixed, moved))
    assert np.max(np.abs(w_moved - w_auto)) > 100 * np.max(np.abs(w_fixed - w_auto))


def _unit(u):
    return (u - u.mean(0)) / u.std(0)


def test_no_selection_where_it_cannot_validate():
    u = _lorenz(0.02, tN=80.0)
    model = NVARForecaster(3, s=1)
    # too short to hold out five windows of window + 20 samples
    head = _unit(u[:100])
    assert select_input_noise(model, head) == (None, {})
    short, _ = train_NVARForecaster(model, head)
    fixed, _ = train_NVARForecaster(model, head, input_noise=1e-3)
    np.testing.assert_allclose(short.wout, fixed.wout, rtol=1e-3, atol=1e-6)
    # several trajectories: the fixed fraction, 1e-3
    multi = _unit(u[:3000]).reshape(2, 1500, 3)
    a, _ = train_NVARForecaster(model, multi, multi_sequence=True)
    b, _ = train_NVARForecaster(model, multi, multi_sequence=True, input_noise=1e-3)
    np.testing.assert_allclose(a.wout, b.wout, rtol=1e-3, atol=1e-6)


def test_bad_arguments_are_named():
    u = _lorenz(0.02, tN=80.0)
    with pytest.raises(TypeError, match="select_input_noise: model must be an NVAR"):
        select_input_noise(orc.forecaster.ESNForecaster(3, 20), u)
    with pytest.raises(ValueError, match="select_input_noise: candidates must not"):
        select_input_noise(NVARForecaster(3), u, candidates=())
    with pytest.raises(ValueError, match="candidates must lie in"):
        select_input_noise(NVARForecaster(3), u, candidates=(1e-3, -1.0))
    with pytest.raises(ValueError, match="train_seq must"):
        select_input_noise(NVARForecaster(3), u[:, None, :])


def test_auto_selects_only_where_it_is_cheap_and_concrete(monkeypatch):
    """The selection runs for one concrete trajectory of a model with at most
    AUTO_SELECT_MAX_FEATURES features, and nowhere else."""
    import jax

    from orc.forecaster import nvar

    calls = []
    real = nvar._select

    def spy(*args, **kwargs):
        calls.append(args[1].n_features)
        return real(*args, **kwargs)

    monkeypatch.setattr(nvar, "_select", spy)
    # the data and model of test_auto_is_the_selected_fraction (its "auto"
    # stride is 1): the selection's and the training's programs are its
    u = _unit(_lorenz(0.02, tN=80.0))
    small = NVARForecaster(3, s=1)
    train_NVARForecaster(small, u)
    assert calls == [small.n_features]
    # 32 dimensions, k=2, quadratic: 2145 features > 2000
    wide = NVARForecaster(32, s=1, order=2)
    assert wide.n_features > nvar.AUTO_SELECT_MAX_FEATURES
    x = np.random.default_rng(0).normal(size=(300, 32))
    train_NVARForecaster(wide, x)
    train_NVARForecaster(small, u, target_seq=u)
    jax.jit(lambda v: train_NVARForecaster(small, v)[0].wout)(u)
    assert calls == [small.n_features]
