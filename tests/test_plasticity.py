"""orc.plasticity: intrinsic and local plasticity of the reservoir.

The rules are checked against numpy written from the papers' equations
(Schrauwen et al. 2008 for intrinsic plasticity; Oja, Hebb and BCM for the
local rules), on one reservoir and on a bank, the folded model against a
numpy run with the learnt gains, and intrinsic plasticity against what it
is for: the states' distribution reaches the Gaussian target.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc.classifier import ESNClassifier
from orc.control import ESNController
from orc.forecaster import CESNForecaster, ESNForecaster, NVARForecaster
from orc.plasticity import LOCAL_RULES, intrinsic_plasticity, local_plasticity
from orc.regression import ESNRegressor


def _parts(model):
    """Dense ``W`` ``(C, N, N)``, ``W_in`` ``(C, N, w)``, bias and leak
    ``(C, N)`` of a model's bank."""
    d, e = model.driver, model.embedding
    bank = d.bank_shape
    W = np.asarray(d.wr.todense()).reshape(bank[0], bank[1], bank[1])
    bias = np.broadcast_to(np.asarray(d.bias), bank)
    leak = np.broadcast_to(np.asarray(d.leak), bank)
    return W, np.asarray(e.win), bias, leak


def _inputs(win, u):
    """Each reservoir's drive ``W_in,c u_c`` (contiguous windows, locality 0)."""
    c, _, w = win.shape
    return np.einsum("cnw,cw->cn", win, u.reshape(c, w))


def _ip_reference(model, seqs, r0s, spinup, epochs, mu, sigma, eta):
    W, win, bias, leak = _parts(model)
    a, b = np.ones_like(bias), np.zeros_like(bias)
    for _ in range(epochs):
        for seq, r0 in zip(seqs, r0s, strict=True):
            r = r0.reshape(bias.shape)
            for t, u in enumerate(seq):
                x = np.einsum("cnm,cm->cn", W, r) + _inputs(win, u) + bias
                y = np.tanh(a * x + b)
                if t >= spinup:
                    s2 = sigma**2
                    db = -eta * (-mu / s2 + y / s2 * (2 * s2 + 1 - y**2 + mu * y))
                    a, b = a + eta / a + db * x, b + db
                r = (1 - leak) * r + leak * y
    return a, b


@pytest.mark.parametrize(
    "case",
    [
        dict(data_dim=2, kw=dict(leak_rate=1.0), spinup=0, epochs=1, multi=False),
        dict(
            data_dim=4,
            kw=dict(chunks=2, leak_rate=0.6, bias=0.4),
            spinup=3,
            epochs=2,
            multi=True,
        ),
    ],
    ids=["one-reservoir", "bank-multi-epochs"],
)
def test_intrinsic_plasticity_is_the_papers_rule(case):
    model = ESNForecaster(
        case["data_dim"],
        12,
        seed=2,
        Wr_density=0.3,
        embedding_scaling=0.7,
        **case["kw"],
    )
    rng = np.random.default_rng(0)
    lead = (2,) if case["multi"] else ()
    u = rng.uniform(-1, 1, lead + (25, case["data_dim"]))
    r0 = 0.3 * rng.standard_normal(lead + model.driver.state_shape)
    adapted = intrinsic_plasticity(
        model,
        u,
        mu=0.1,
        sigma=0.3,
        learning_rate=0.01,
        epochs=case["epochs"],
        spinup=case["spinup"],
        initial_res_state=r0,
        multi_sequence=case["multi"],
    )
    seqs, r0s = (u, r0) if case["multi"] else (u[None], r0[None])
    a, b = _ip_reference(
        model, seqs, r0s, case["spinup"], case["epochs"], 0.1, 0.3, 0.01
    )
    assert np.ptp(a) > 0.05 and np.ptp(b) > 0.05  # the rule moved them

    W, win, bias, leak = _parts(model)
    W2, win2, bias2, _ = _parts(adapted)
    np.testing.assert_allclose(W2, a[..., None] * W, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(win2, a[..., None] * win, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(bias2, a * bias + b, rtol=1e-10, atol=1e-13)
    assert adapted.driver.construction == "given"
    assert adapted.driver.spectral_radius is None and adapted.embedding.scaling is None

    # the folded model runs the reservoir with the learnt gains and biases
    r = r0s[0].reshape(bias.shape)
    expected = []
    for x_t in seqs[0]:
        x = np.einsum("cnm,cm->cn", W, r) + _inputs(win, x_t) + bias
        r = (1 - leak) * r + leak * np.tanh(a * x + b)
        expected.append(r.reshape(model.driver.state_shape))
    states = adapted.force(seqs[0], r0s[0])
    np.testing.assert_allclose(states, np.stack(expected), rtol=1e-10, atol=1e-12)


RESERVOIRPY = os.environ.get(
    "ORC_RESERVOIRPY_PYTHON",
    str(Path(__file__).parents[1] / "benchmarks/.venvs/rpy/bin/python"),
)

RPY_IP = """
import sys, numpy as np
from reservoirpy.nodes import IPReservoir
d = np.load(sys.argv[1])
res = IPReservoir(W=d["W"], Win=d["Win"], bias=d["bias"], lr=1.0, mu=0.1,
                  sigma=0.3, learning_rate=1e-3, epochs=1)
res.fit(d["u"])
np.savez(sys.argv[2], a=res.a, b=res.b)
"""


@pytest.mark.skipif(
    not Path(RESERVOIRPY).is_file(), reason="no reservoirpy 0.4.2 environment"
)
def test_intrinsic_plasticity_is_reservoirpys_on_the_same_matrices(tmp_path):
    """With leak 1 and one epoch, the gains and biases are reservoirpy's
    ``IPReservoir``'s, given the same ``W``, ``W_in`` and bias (run in the
    benchmarks' reservoirpy 0.4.2 environment, where one exists)."""
    model = ESNForecaster(
        1, 30, seed=3, leak_rate=1.0, bias=0.3, embedding_scaling=0.5,
        Wr_spectral_radius=0.9, Wr_density=0.2,
    )  # fmt: skip
    u = np.asarray(orc.data.narma(400, seed=1)[0])
    W, win, bias, _ = _parts(model)
    np.savez(tmp_path / "in.npz", u=u, W=W[0], Win=win[0], bias=bias[0])
    subprocess.run(
        [
            RESERVOIRPY,
            "-c",
            RPY_IP,
            str(tmp_path / "in.npz"),
            str(tmp_path / "out.npz"),
        ],
        check=True,
        timeout=300,
    )
    theirs = np.load(tmp_path / "out.npz")
    adapted = intrinsic_plasticity(model, u, mu=0.1, sigma=0.3, learning_rate=1e-3)
    gain = np.asarray(adapted.embedding.win / model.embedding.win)[0, :, 0]
    offset = np.asarray(adapted.driver.bias)[0] - gain * bias[0]
    assert np.ptp(theirs["a"]) > 0.05  # the rule moved the gains
    np.testing.assert_allclose(gain, theirs["a"], rtol=1e-12)
    np.testing.assert_allclose(offset, theirs["b"], rtol=1e-12, atol=1e-14)


def test_intrinsic_plasticity_reaches_the_target_distribution():
    """The point of the rule: each node's activity over the data becomes
    (nearly) Gaussian with the asked mean and spread, from a reservoir that
    starts saturated on one side (bias 1, mean state ~0.7, spread ~0.05)."""
    model = ESNRegressor(
        1, 1, 40, leak_rate=1.0, bias=1.0, embedding_scaling=0.5,
        Wr_spectral_radius=0.9, Wr_density=0.1, seed=1,
    )  # fmt: skip
    u = np.random.default_rng(0).uniform(-1, 1, (2000, 1))

    def moments(m):
        R = np.asarray(m.force(u, m.driver.default_state()))[100:]
        return R.mean(0), R.std(0)

    mean, std = moments(model)
    assert np.mean(np.abs(mean - 0.1)) > 0.4 and np.median(std) < 0.1
    adapted = intrinsic_plasticity(
        model, u, mu=0.1, sigma=0.3, learning_rate=1e-3, epochs=10, spinup=50
    )
    mean, std = moments(adapted)
    np.testing.assert_allclose(mean, 0.1, atol=0.1)
    assert np.median(std) == pytest.approx(0.3, rel=0.1)


def _local_reference(model, u, rule, eta, theta, normalize, spinup):
    W, win, bias, leak = _parts(model)
    W = W.copy()
    mask = W != 0
    r = np.zeros_like(bias)
    for t, x_t in enumerate(u):
        r_new = (1 - leak) * r + leak * np.tanh(
            np.einsum("cnm,cm->cn", W, r) + _inputs(win, x_t) + bias
        )
        if t >= spinup:
            post, pre = r_new[:, :, None], r[:, None, :]
            dw = {
                "oja": post * (pre - post * W),
                "anti-oja": -post * (pre - post * W),
                "hebbian": post * pre,
                "anti-hebbian": -post * pre,
                "bcm": post * (post - theta) * pre,
            }[rule]
            W = np.where(mask, W + eta * dw, 0)
            if normalize:
                norm = np.linalg.norm(W, axis=-1, keepdims=True)
                W = W / np.where(norm > 0, norm, 1)
        r = r_new
    return W


@pytest.mark.parametrize(
    "rule,normalize",
    [(rule, False) for rule in LOCAL_RULES] + [("oja", True)],
)
def test_local_rules_match_numpy_and_keep_the_pattern(rule, normalize):
    model = ESNForecaster(
        4, 10, chunks=2, seed=5, Wr_density=0.3, leak_rate=0.7, bias=0.3,
        embedding_scaling=0.8,
    )  # fmt: skip
    u = np.random.default_rng(1).uniform(-1, 1, (30, 4))
    adapted = local_plasticity(
        model, u, rule=rule, learning_rate=0.05, bcm_theta=0.2,
        normalize_rows=normalize, spinup=4,
    )  # fmt: skip
    expected = _local_reference(model, u, rule, 0.05, 0.2, normalize, 4)
    W, win, _, _ = _parts(model)
    W2, win2, _, _ = _parts(adapted)
    np.testing.assert_allclose(W2, expected, rtol=1e-10, atol=1e-13)
    assert np.abs(W2 - W).max() > 1e-3  # the rule moved the weights
    np.testing.assert_array_equal(W2 != 0, W != 0)  # no connection made or lost
    np.testing.assert_array_equal(win2, win)
    np.testing.assert_array_equal(adapted.driver.wr.columns, model.driver.wr.columns)


def test_adapted_models_jit_vmap_save_and_load(tmp_path):
    t = 0.1 * np.arange(200)[:, None]
    u = np.sin(t * np.array([1.0, 1.3, 2.1]) + np.array([0.0, 1.0, 2.0]))
    model = ESNForecaster(3, 30, seed=0, Wr_density=0.1)
    eager = intrinsic_plasticity(model, u, epochs=2)
    jitted = jax.jit(intrinsic_plasticity, static_argnames="epochs")(model, u, epochs=2)
    # the same rule; the fold may fuse differently in the user's program (1 ulp)
    for x, y in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-16)
    again = intrinsic_plasticity(model, u, epochs=2)  # same inputs, same bits
    for x, y in zip(jax.tree.leaves(eager), jax.tree.leaves(again), strict=True):
        np.testing.assert_array_equal(x, y)

    make = lambda s: ESNForecaster(3, 30, seed=s, Wr_density=0.1, construction="jax")  # noqa: E731
    population = eqx.filter_vmap(make)(jnp.arange(2))
    adapted = eqx.filter_vmap(lambda m: local_plasticity(m, u, rule="bcm"))(population)
    one = local_plasticity(make(1), u, rule="bcm")
    np.testing.assert_allclose(
        adapted.driver.wr.values[1], one.driver.wr.values, rtol=1e-12
    )

    trained, _ = orc.forecaster.train_RCForecaster(eager, u, spinup=20)
    orc.save(tmp_path / "ip.orc", trained)
    loaded = orc.load(tmp_path / "ip.orc")
    for x, y in zip(jax.tree.leaves(trained), jax.tree.leaves(loaded), strict=True):
        np.testing.assert_array_equal(x, y)
    assert loaded.driver.construction == "given"


def test_a_controller_adapts_on_data_and_controls_side_by_side():
    model = ESNController(2, 1, 20, seed=0)
    data = np.random.default_rng(0).uniform(-1, 1, (100, 3))
    adapted = intrinsic_plasticity(model, data)
    assert np.abs(np.asarray(adapted.embedding.win - model.embedding.win)).max() > 0
    with pytest.raises(ValueError, match=r"in_seq must have 3 .*control_seq"):
        intrinsic_plasticity(model, data[:, :2])


@pytest.mark.parametrize(
    "call,error,match",
    [
        (
            lambda m, u: intrinsic_plasticity(NVARForecaster(3), u),
            TypeError,
            "orc model",
        ),
        (
            lambda m, u: intrinsic_plasticity(CESNForecaster(3, 20), u),
            ValueError,
            "discrete time",
        ),
        (lambda m, u: intrinsic_plasticity(m, u, sigma=0.0), ValueError, "sigma"),
        (lambda m, u: intrinsic_plasticity(m, u, mu=1.0), ValueError, "mu"),
        (lambda m, u: intrinsic_plasticity(m, u, epochs=0), ValueError, "epochs"),
        (lambda m, u: intrinsic_plasticity(m, u, spinup=50), ValueError, "spinup"),
        (lambda m, u: intrinsic_plasticity(m, u[:, :2]), ValueError, "in_seq"),
        (
            lambda m, u: intrinsic_plasticity(m, u, multi_sequence=True),
            ValueError,
            "in_seq",
        ),
        (
            lambda m, u: intrinsic_plasticity(
                ESNClassifier(3, 2, 20, input_lags=(2,)), u[None], multi_sequence=True
            ),
            ValueError,
            "input_lags",
        ),
        (lambda m, u: local_plasticity(m, u, rule="stdp"), ValueError, "rule"),
        (
            lambda m, u: local_plasticity(m, u, learning_rate=-1),
            ValueError,
            "learning_rate",
        ),
        (
            lambda m, u: local_plasticity(m, u, normalize_rows=1),
            TypeError,
            "normalize_rows",
        ),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    model = ESNForecaster(3, 20, seed=0)
    u = np.random.default_rng(0).uniform(-1, 1, (50, 3))
    with pytest.raises(error, match=match):
        call(model, u)


def test_divergence_and_missing_data_are_reported():
    model = ESNForecaster(3, 20, seed=0)
    u = np.random.default_rng(0).uniform(-1, 1, (100, 3))
    with pytest.raises(eqx.EquinoxRuntimeError, match="gain stepped through zero"):
        intrinsic_plasticity(model, u, learning_rate=50.0)
    u[7, 1] = np.nan
    with pytest.raises(eqx.EquinoxRuntimeError, match="row 7"):
        local_plasticity(model, u)
