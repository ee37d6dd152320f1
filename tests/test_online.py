"""Online readout learning (orc.online): RLS, LMS, teacher-forced streams, FORCE.

References are independent of the code under test: numpy ridge / weighted
ridge solutions, the batch ridge trainer, known ground-truth weights, and the
target signal itself for FORCE.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _helpers import RUNTIME_ERRORS, count_compiles, lorenz_rk4
from orc import online
from orc.forecaster import CESNForecaster, ESNForecaster, train_RCForecaster

RNG = np.random.default_rng(42)


def _weighted_ridge(X, Y, delta, lam):
    """argmin sum_i lam^(n-i) ||y_i - W x_i||^2 + delta lam^n ||W||^2, in numpy."""
    n, F = X.shape
    w = lam ** np.arange(n - 1, -1, -1)
    G = (X * w[:, None]).T @ X + delta * lam**n * np.eye(F)
    return np.linalg.solve(G, (X * w[:, None]).T @ Y).T


@pytest.fixture(scope="module")
def lorenz():
    """In numpy (orc takes it): the tests' slicing and arithmetic compile
    nothing."""
    U = lorenz_rk4(2600)
    return (U - U.mean(0)) / U.std(0)


@pytest.fixture(scope="module")
def esn():
    return ESNForecaster(3, 100, seed=1)


# --------------------------------------------------------------------------
# Low level: RLS on features
# --------------------------------------------------------------------------


def test_rls_equals_ridge_and_weighted_ridge():
    X = RNG.standard_normal((80, 8))
    Y = X @ RNG.standard_normal((8, 2)) + 0.3 * RNG.standard_normal((80, 2))
    for delta in (1e-3, 0.5, 20.0):
        s = online.rls_fit(online.rls_init(8, 2, delta=delta), X, Y)
        ridge = np.linalg.solve(X.T @ X + delta * np.eye(8), X.T @ Y).T
        np.testing.assert_allclose(s.W, ridge, rtol=1e-9, atol=1e-11)
        # P is the inverse of the regularised Gram
        np.testing.assert_allclose(
            s.P, np.linalg.inv(X.T @ X + delta * np.eye(8)), rtol=1e-8, atol=1e-12
        )
        assert int(s.count) == 80
    # forgetting: exponentially weighted ridge with a fading regulariser
    for lam in (0.97, 0.995):
        s = online.rls_fit(online.rls_init(8, 2, delta=0.5, forgetting=lam), X, Y)
        np.testing.assert_allclose(
            s.W, _weighted_ridge(X, Y, 0.5, lam), rtol=1e-8, atol=1e-10
        )


def test_rls_chunks_are_independent_ridges_and_errors_are_a_priori():
    C, F, O, n = 3, 6, 2, 50
    X = RNG.standard_normal((n, C, F))
    Y = RNG.standard_normal((n, C, O))
    s, err = online.rls_fit(
        online.rls_init(F, O, delta=0.2, chunks=C), X, Y, return_errors=True
    )
    assert s.W.shape == (C, O, F) and s.P.shape == (C, F, F) and err.shape == Y.shape
    for c in range(C):
        Xc, Yc = X[:, c], Y[:, c]
        ridge = np.linalg.solve(Xc.T @ Xc + 0.2 * np.eye(F), Xc.T @ Yc).T
        np.testing.assert_allclose(s.W[c], ridge, rtol=1e-9, atol=1e-11)
        # a-priori error of row i uses the ridge solution of rows < i
        i = 30
        Wi = np.linalg.solve(Xc[:i].T @ Xc[:i] + 0.2 * np.eye(F), Xc[:i].T @ Yc[:i]).T
        np.testing.assert_allclose(err[i, c], Yc[i] - Wi @ Xc[i], rtol=1e-8)


def test_rls_update_matches_textbook_step_and_fit_in_pieces():
    # one row against the textbook (non-Joseph) RLS formulas, in numpy
    F, O, lam, delta = 5, 3, 0.9, 0.7
    X = RNG.standard_normal((40, F))
    Y = RNG.standard_normal((40, O))
    init = online.rls_init(F, O, delta=delta, forgetting=lam)
    s = online.rls_fit(init, X[:20], Y[:20])
    P, W = np.asarray(s.P), np.asarray(s.W)
    f, y = X[20], Y[20]
    k = P @ f
    P_ref = (P - np.outer(k, k) / (lam + f @ k)) / lam
    W_ref = W + np.outer(y - W @ f, P_ref @ f)
    s1, e = online.rls_update(s, f, y, return_error=True)
    np.testing.assert_allclose(s1.P, P_ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(s1.W, W_ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(e, y - W @ f, rtol=1e-12)
    np.linalg.cholesky(np.asarray(s1.P))  # positive definite
    # two pieces = one fit
    whole = online.rls_fit(init, X, Y)
    rest = online.rls_fit(s, X[20:], Y[20:])
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(rest), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_rls_float32_on_ill_conditioned_features_matches_float64_ridge():
    # collinear features around an offset, like saturated reservoir states;
    # singular values over 4 decades, tiny delta. The square-root update keeps
    # float32 at rounding level; the textbook P update loses ~3 more digits here.
    n, F, delta = 600, 40, 1e-6
    Q, _ = np.linalg.qr(RNG.standard_normal((n, F)))
    V, _ = np.linalg.qr(RNG.standard_normal((F, F)))
    X = 0.9 + (Q * np.logspace(0, -4, F) * np.sqrt(n)) @ V.T
    Y = X @ RNG.standard_normal((2, F)).T + 1e-3 * RNG.standard_normal((n, 2))
    ridge = np.linalg.solve(X.T @ X + delta * np.eye(F), X.T @ Y).T
    s = online.rls_fit(
        online.rls_init(F, 2, delta=delta, dtype=jnp.float32),
        X.astype(np.float32),
        Y.astype(np.float32),
    )
    assert s.W.dtype == jnp.float32 and s.S.dtype == jnp.float32
    pred_err = np.sqrt(np.mean((X @ np.asarray(s.W, np.float64).T - X @ ridge.T) ** 2))
    assert pred_err < 1e-5 * np.sqrt(np.mean(Y**2)), pred_err


def test_rls_forgetting_tracks_a_switched_linear_map():
    F, O, n = 5, 3, 2000
    X = RNG.standard_normal((n, F))
    A1, A2 = RNG.standard_normal((O, F)), RNG.standard_normal((O, F))
    noise = 0.01 * RNG.standard_normal((n, O))
    half = n // 2
    Y = np.concatenate([X[:half] @ A1.T, X[half:] @ A2.T]) + noise

    def window_mse(lam, lo, hi):
        _, err = online.rls_fit(
            online.rls_init(F, O, delta=1e-3, forgetting=lam), X, Y, return_errors=True
        )
        return float(np.mean(np.asarray(err[lo:hi]) ** 2))

    noise_var = 1e-4
    # before the switch both fit (after a short transient)
    assert window_mse(0.98, 100, half) < 2 * noise_var
    assert window_mse(1.0, 100, half) < 2 * noise_var
    # 300 rows after the switch forgetting has recovered (the old map's weight
    # is 0.98^300 < 0.3%) ...
    tracked = window_mse(0.98, half + 300, n)
    assert tracked < 2 * noise_var, tracked
    # ... while without forgetting the old map still weighs half the data
    stuck = window_mse(1.0, half + 300, n)
    assert stuck > 100 * noise_var, stuck
    # and the gap is the switch: the mean squared change of the map is O(1)
    assert stuck > 0.01 * np.mean(((A2 - A1) @ X[half:].T) ** 2)


# --------------------------------------------------------------------------
# Low level: LMS
# --------------------------------------------------------------------------


def test_lms_converges_to_known_weights():
    F, O, n = 4, 2, 3000
    W_true = RNG.standard_normal((O, F))
    X = RNG.standard_normal((n, F))
    Y = X @ W_true.T + 1e-3 * RNG.standard_normal((n, O))
    # plain LMS, mu well below 2 / trace(E[f f^T]) = 0.5
    s = online.lms_fit(online.lms_init(F, O, learning_rate=0.05), X, Y)
    np.testing.assert_allclose(s.W, W_true, atol=5e-3)
    # one step is numpy's gradient step
    W0 = np.asarray(s.W)
    s1, e = online.lms_update(s, X[0], Y[0] + 1.0, return_error=True)
    e_ref = Y[0] + 1.0 - W0 @ X[0]
    np.testing.assert_allclose(e, e_ref, rtol=1e-12)
    np.testing.assert_allclose(s1.W, W0 + 0.05 * np.outer(e_ref, X[0]), rtol=1e-12)
    # normalised LMS with mu in (0, 2), features scaled by 100: same result
    s = online.lms_fit(
        online.lms_init(F, O, learning_rate=0.5, normalized=True), 100 * X, Y
    )
    np.testing.assert_allclose(100 * np.asarray(s.W), W_true, atol=5e-3)
    # too large a step diverges, and says so instead of returning inf weights
    with pytest.raises(RUNTIME_ERRORS, match="non-finite readout weights"):
        online.lms_fit(online.lms_init(F, O, learning_rate=2.0), X, Y)


# --------------------------------------------------------------------------
# High level: teacher-forced online training of forecasters
# --------------------------------------------------------------------------

N_STREAM = 601  # samples of the streaming runs; calls share compilations


@pytest.fixture(scope="module")
def whole(esn, lorenz):
    """RLS on ``lorenz[:N_STREAM]`` in one call."""
    U = lorenz[:N_STREAM]
    return online.train_online(esn, U, spinup=30, delta=1e-3, return_errors=True)


def _one_step_mse(model, res_state, U_test):
    states = model.force(U_test[:-1], res_state)
    pred = np.asarray(model.readout.batch_readout(states))
    return float(np.mean((pred[:-1] - U_test[1:-1]) ** 2))


def test_train_online_rls_matches_batch_ridge(esn, lorenz):
    U_train, U_test = lorenz[:2000], lorenz[2000:]
    for beta in (1e-6, 1e-4):
        batch, R = train_RCForecaster(esn, U_train, spinup=100, beta=beta)
        R = np.asarray(R)
        model, learner, r, err = online.train_online(
            esn, U_train, spinup=100, delta=beta, return_errors=True
        )
        # same reservoir run: the last states agree
        np.testing.assert_allclose(r, R[-1], rtol=1e-12, atol=1e-12)
        ref = _one_step_mse(batch, R[-1], U_test)
        got = _one_step_mse(model, r, U_test)
        assert abs(got - ref) <= 0.1 * ref, (beta, got, ref)
        assert int(learner.count) == 2000 - 1 - 100
        assert err.shape == (2000 - 1, 3)
    # well regularised: the weights themselves agree (alignment of the pairs)
    np.testing.assert_allclose(
        model.readout.wout, batch.readout.wout, rtol=1e-6, atol=1e-6
    )


def test_train_online_chunked_model_matches_batch(lorenz):
    U = lorenz[:N_STREAM]
    esn3 = ESNForecaster(3, 50, chunks=3, seed=2)
    batch, _ = train_RCForecaster(esn3, U, spinup=20, beta=1e-3)
    model, learner, _, _ = online.train_online(
        esn3, U, spinup=20, delta=1e-3, return_errors=True
    )
    assert learner.W.shape == (3, 1, 50) and learner.P.shape == (3, 50, 50)
    np.testing.assert_allclose(
        model.readout.wout, batch.readout.wout, rtol=1e-6, atol=1e-8
    )


def _assert_same(a, b, rtol=1e-9, atol=1e-9):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def test_streaming_in_pieces_equals_one_run(esn, lorenz, whole):
    U = lorenz[:N_STREAM]
    cut = 301
    model_w, learner_w, r_w, err_w = whole
    n_pairs = N_STREAM - 1
    assert err_w.shape == (n_pairs, 3) and int(learner_w.count) == n_pairs - 30
    # teacher forcing, RLS: piece 2 continues from piece 1's learner and state
    m1, s1, r1, e1 = online.train_online(
        esn, U[:cut], spinup=30, delta=1e-3, return_errors=True
    )
    m2, s2, r2, e2 = online.train_online(
        m1, U[cut:], state=s1, initial_res_state=r1, return_errors=True
    )
    _assert_same(s2, learner_w)
    _assert_same(m2.readout.wout, model_w.readout.wout)
    np.testing.assert_allclose(r2, r_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.concatenate([e1, e2]), err_w, rtol=1e-9, atol=1e-9)
    # with target_seq = next sample: the same pairs, so the same learner and
    # errors, also when split (no pair straddles the pieces then)
    X, Y = U[:-1], U[1:]
    half = n_pairs // 2
    t1 = online.train_online(
        esn, X[:half], Y[:half], spinup=30, delta=1e-3, return_errors=True
    )
    t2 = online.train_online(
        esn, X[half:], Y[half:], state=t1[1], initial_res_state=t1[2],
        return_errors=True,
    )  # fmt: skip
    _assert_same(t2[1], learner_w)
    _assert_same(t2[0].readout.wout, model_w.readout.wout)
    np.testing.assert_allclose(np.concatenate([t1[3], t2[3]]), err_w, rtol=1e-9)
    # the target_seq run stops after X[-1] (no extra step on Y[-1])
    states = np.asarray(esn.force(X, esn.driver.default_state()))
    np.testing.assert_allclose(t2[2], states[-1])


def test_force_streaming_in_pieces_equals_one_run(esn, lorenz):
    U = lorenz[:N_STREAM]
    whole = online.train_force(esn, U, spinup=30, delta=1e-3, return_errors=True)
    m1, s1, r1, e1 = online.train_force(
        esn, U[:301], spinup=30, delta=1e-3, return_errors=True
    )
    m2, s2, r2, e2 = online.train_force(
        m1, U[301:], state=s1, initial_res_state=r1, return_errors=True
    )
    _assert_same((m2.readout.wout, s2, r2), (whole[0].readout.wout, *whole[1:3]))
    np.testing.assert_allclose(np.concatenate([e1, e2]), whole[3], rtol=1e-9, atol=1e-9)


def test_lms_on_a_model_learns(esn, lorenz):
    U = lorenz[:N_STREAM]
    model, learner, r, err = online.train_online(
        esn, U, method="lms", learning_rate=1.0, return_errors=True
    )
    assert isinstance(learner, online.LMSState) and learner.normalized
    assert learner.W.shape == (1, 3, 100)
    # normalised LMS converges slowly on correlated reservoir states, but it
    # learns: the error falls, to < 1% of the signal's power (zero readout: 100%)
    err = np.asarray(err)
    first = float(np.mean(err[:50] ** 2))
    last = float(np.mean(err[-100:] ** 2))
    assert last < 0.5 * first and last < 0.01 * float(np.mean(U**2)), (first, last)
    np.testing.assert_allclose(model.readout.wout, learner.W)


# --------------------------------------------------------------------------
# FORCE
# --------------------------------------------------------------------------


def test_force_learns_two_sinusoids_in_closed_loop():
    n_train, n_test = 3000, 500  # 10 periods of the slow component after training
    t = np.arange(n_train + n_test, dtype=float)
    s = 0.6 * np.sin(2 * np.pi * t / 50) + 0.4 * np.sin(2 * np.pi * t / 25 + 1.0)
    S = s[:, None]
    esn = ESNForecaster(
        1, 200, seed=0, bias=0.5, Wr_spectral_radius=1.2, embedding_scaling=0.5,
        Wr_density=0.1,
    )  # fmt: skip
    model, learner, r, err = online.train_force(esn, S[:n_train], return_errors=True)
    # during training the closed-loop output converges onto the target
    err = np.asarray(err)
    early = float(np.max(np.abs(err[:50])))
    late = float(np.max(np.abs(err[-500:])))
    assert late < 0.05 and late < 0.1 * early, (early, late)
    # afterwards the loop runs on its own and keeps tracking the continuation
    pred = np.asarray(model.forecast(n_test, r))[:, 0]
    fc_err = np.max(np.abs(pred - s[n_train:]))
    assert fc_err < 0.1, fc_err


def _numpy_force(model, target, delta, posterior):
    """FORCE written out in numpy for a one-input ESN forecaster: the first
    sample starts the run, then at every step the textbook RLS update on
    ``(r_k, target[k])`` and the output before (prior) or after (posterior)
    it fed back as the next input."""
    d = model.driver
    W = np.asarray(d.wr.todense())[0]
    w_in = np.asarray(model.embedding.win)[0, :, 0]
    leak, bias = float(d.leak), float(d.bias)
    n = W.shape[0]
    r, P, w = np.zeros(n), np.eye(n) / delta, np.zeros(n)
    for k, y in enumerate(target[:, 0]):
        x = y
        if k >= 1:
            prior = w @ r
            gain = P @ r / (1.0 + r @ P @ r)
            w = w + (y - prior) * gain
            P = P - np.outer(gain, r @ P)
            x = w @ r if posterior else prior
        r = (1 - leak) * r + leak * np.tanh(W @ r + w_in * x + bias)
    return w, r


@pytest.mark.parametrize("feedback", ["posterior", "prior"])
def test_force_feedback_is_the_numpy_loop(feedback):
    t = np.arange(60.0)
    target = (0.6 * np.sin(2 * np.pi * t / 20))[:, None]
    esn = ESNForecaster(
        1, 20, seed=2, bias=0.5, Wr_spectral_radius=1.2, embedding_scaling=0.5,
        Wr_density=0.2,
    )  # fmt: skip
    model, _, r = online.train_force(esn, target, delta=1e-2, feedback=feedback)
    w, r_ref = _numpy_force(esn, target, 1e-2, feedback == "posterior")
    np.testing.assert_allclose(
        np.asarray(model.readout.wout)[0, 0], w, rtol=1e-7, atol=1e-9
    )
    np.testing.assert_allclose(np.asarray(r).reshape(-1), r_ref, rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------
# jit / vmap
# --------------------------------------------------------------------------


def test_jit_with_explicit_model_and_no_retrace(esn, lorenz, whole):
    U = lorenz[:N_STREAM]
    jitted = jax.jit(
        online.train_online, static_argnames=("method", "spinup", "return_errors")
    )
    out = jitted(esn, U, spinup=30, forgetting=1.0, delta=1e-3, return_errors=True)
    _assert_same(out[1:], whole[1:], rtol=1e-10, atol=1e-10)
    _assert_same(out[0].readout.wout, whole[0].readout.wout, rtol=1e-10, atol=1e-10)
    with count_compiles() as c:
        jax.block_until_ready(
            jitted(esn, U, spinup=30, forgetting=0.98, delta=1e-2, return_errors=True)
        )
    assert c["compiles"] == 0
    # the eqx.filter_jit path: hyperparameters (and spinup) are array leaves
    with count_compiles() as c:
        jax.block_until_ready(
            online.train_online(
                esn, U, spinup=7, forgetting=0.97, delta=1e-2, return_errors=True
            )
        )
    assert c["compiles"] == 0


def test_vmap_over_independent_learners(esn, lorenz, whole):
    X = RNG.standard_normal((60, 6))
    Y = RNG.standard_normal((60, 2))
    lams = np.array([1.0, 0.999, 0.9])

    # the vmaps are traced inside one jax.jit each, the data and the model its
    # arguments: run eagerly, vmap compiles every operation outside the
    # library's own programs apart; the transformations are the same
    @jax.jit
    def fit_each(lams, X, Y):
        states = jax.vmap(lambda lam: online.rls_init(6, 2, delta=0.1, forgetting=lam))(
            lams
        )
        return jax.vmap(lambda s: online.rls_fit(s, X, Y))(states)

    fitted = fit_each(lams, X, Y)
    for i, lam in enumerate(lams):
        np.testing.assert_allclose(
            np.asarray(fitted.W)[i],
            _weighted_ridge(X, Y, 0.1, lam),
            rtol=1e-8,
            atol=1e-10,
        )
    # whole online trainings mapped over the forgetting factor (kept near 1:
    # with a memory shorter than n_features rows P winds up and rounding
    # differences between the batched and single programs are amplified)
    U = lorenz[:N_STREAM]

    def train(lam, model=esn, U=U):
        out = online.train_online(
            model, U, spinup=30, forgetting=lam, delta=0.1, return_errors=True
        )
        return out[0].readout.wout

    W = np.asarray(jax.jit(jax.vmap(train, in_axes=(0, None, None)))(lams[:2], esn, U))
    for i in range(2):
        single = train(float(lams[i]))
        np.testing.assert_allclose(W[i], single, rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------

_X = RNG.standard_normal((20, 5))
_Y = RNG.standard_normal((20, 2))
_U = RNG.standard_normal((40, 3))  # numpy: its slices compile nothing


@pytest.fixture(scope="module")
def small_esn():
    return ESNForecaster(3, 20)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda m: online.rls_init(5, 2, forgetting=0.0), ValueError, "forgetting"),
        (lambda m: online.rls_init(5, 2, forgetting=1.5), ValueError, "forgetting"),
        (lambda m: online.rls_init(5, 2, delta=0.0), ValueError, "delta"),
        (lambda m: online.rls_init(5, 2, delta=-1.0), ValueError, "delta"),
        (lambda m: online.rls_init(0, 2), ValueError, "n_features"),
        (lambda m: online.rls_init(5, 2, chunks=0), ValueError, "chunks"),
        (
            lambda m: online.lms_init(5, 2, learning_rate=0.0),
            ValueError,
            "learning_rate",
        ),
        (
            lambda m: online.lms_init(5, 2, learning_rate=2.5, normalized=True),
            ValueError,
            "learning_rate",
        ),
        (
            lambda m: online.rls_fit(online.rls_init(5, 2), _X[:, :4], _Y),
            ValueError,
            "feats",
        ),
        (
            lambda m: online.rls_fit(online.rls_init(5, 2), _X, _Y[:, :1]),
            ValueError,
            "targets",
        ),
        (
            lambda m: online.rls_fit(online.rls_init(5, 2), _X, _Y[:10]),
            ValueError,
            "same number of rows",
        ),
        (
            lambda m: online.rls_update(online.rls_init(5, 2), _X, _Y),
            ValueError,
            "f must be 1-D",
        ),
        (
            lambda m: online.rls_fit(online.lms_init(5, 2, 0.1), _X, _Y),
            TypeError,
            "state must be an RLSState",
        ),
        (lambda m: online.train_online(m, _U, method="newton"), ValueError, "method"),
        (lambda m: online.train_online(m, _U[:, :2]), ValueError, "train_seq"),
        (lambda m: online.train_online(m, _U[0]), ValueError, "train_seq"),
        (lambda m: online.train_online(m, _U, _U[:-1]), ValueError, "target_seq"),
        (lambda m: online.train_online(m, _U, spinup=39), ValueError, "spinup"),
        (lambda m: online.train_online(m, _U, spinup=-1), ValueError, "spinup"),
        (
            lambda m: online.train_online(m, _U, initial_res_state=jnp.zeros(5)),
            ValueError,
            "initial_res_state",
        ),
        (
            lambda m: online.train_online(m, _U, forgetting=2.0),
            ValueError,
            "forgetting",
        ),
        (lambda m: online.train_online(m, _U, delta=0.0), ValueError, "delta"),
        (
            lambda m: online.train_online(m, _U, method="lms", normalized=False),
            ValueError,
            "learning_rate is required",
        ),
        (
            lambda m: online.train_online(m, _U, method="lms", delta=1.0),
            ValueError,
            "delta",
        ),
        (
            lambda m: online.train_online(m, _U, state=online.lms_init(20, 3, 0.1)),
            TypeError,
            "state must be an RLSState",
        ),
        (
            lambda m: online.train_online(m, _U, state=online.rls_init(20, 3)),
            ValueError,
            "state.W must have shape",
        ),
        (
            lambda m: online.train_online(
                m, _U, state=online.rls_init(20, 3, chunks=1), delta=1.0
            ),
            ValueError,
            "delta",
        ),
        (lambda m: online.train_force(m, _U, delta=-1.0), ValueError, "delta"),
        (lambda m: online.train_force(m, _U[:1]), ValueError, "spinup"),
        (lambda m: online.train_force(m, _U, feedback="after"), ValueError, "feedback"),
        (
            lambda m: online.train_online(CESNForecaster(3, 10), _U),
            TypeError,
            "discrete-time",
        ),
    ],
)
def test_bad_inputs_name_the_argument(small_esn, call, exc, match):
    with pytest.raises(exc, match=match):
        call(small_esn)


def test_nan_data_and_traced_values_raise_at_run_time(esn, lorenz, whole):
    U = lorenz[:N_STREAM]  # shapes of the runs above: no new compilation
    bad = U.copy()
    bad[7, 1] = np.nan
    with pytest.raises(RUNTIME_ERRORS, match="train_seq contains NaN"):
        online.train_online(esn, bad, spinup=30, delta=1e-3, return_errors=True)
    with pytest.raises(RUNTIME_ERRORS, match="target_seq contains NaN"):
        online.train_online(esn, U[:300], bad[:300], return_errors=True)
    with pytest.raises(RUNTIME_ERRORS, match="target_seq contains NaN"):
        online.train_force(esn, bad, return_errors=True)
    with pytest.raises(RUNTIME_ERRORS, match="feats contains NaN"):
        online.rls_fit(online.rls_init(5, 2), _X * np.nan, _Y)
    # a forgetting factor that was set by hand is checked before fitting
    broken = eqx.tree_at(lambda s: s.forgetting, online.rls_init(5, 2), jnp.array(0.0))
    with pytest.raises(RUNTIME_ERRORS, match="forgetting factor must lie in"):
        online.rls_fit(broken, _X, _Y)
    # a traced forgetting factor outside (0, 1] is caught under jax.jit
    with pytest.raises(RUNTIME_ERRORS, match="forgetting must lie in"):
        jax.block_until_ready(
            jax.jit(lambda lam: online.rls_init(3, 1, forgetting=lam))(1.5)
        )
