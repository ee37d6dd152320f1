"""orc.conceptors (Jaeger 2014, "Controlling Recurrent Neural Networks by
Conceptors", arXiv:1403.3369).

The algebra is checked against numpy and against the paper's identities for
conceptors of one correlation matrix R (its Propositions): adapting the
aperture of C(R, a) by g gives C(R, a g); C(R, a) AND C(R, b) is C(R, (a^-2 +
b^-2)^-1/2) and OR is C(R, (a^2 + b^2)^1/2). Loading is checked by the
paper's first experiment: four patterns (two sines of periods 8.83 and 9.83,
two period-5 sequences) stored in one 100-unit reservoir and regenerated
from it alone, and a morph of the two sines that runs at a period between
theirs.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc import conceptors as K

N_PATTERN = np.arange(1, 1501)
RAND5 = np.array([0.16, 0.9, -0.9, -0.21, -0.55])
PERTURB5 = np.array([0.10, 0.9, -0.9, -0.65, -0.54])
PERIODS = (8.8342522, 9.8342522)


def _correlation(seed, n=12):
    A = np.random.default_rng(seed).standard_normal((200, n))
    return A.T @ A / 200


def _conceptor_np(R, a):
    return R @ np.linalg.inv(R + a**-2 * np.eye(len(R)))


def test_conceptor_and_its_spectrum():
    R = _correlation(0)
    C = np.asarray(K.conceptor(R, 3.0))
    np.testing.assert_allclose(C, _conceptor_np(R, 3.0), atol=1e-12)
    s = np.linalg.eigvalsh(C)
    assert s.min() >= 0 and s.max() < 1
    states = np.random.default_rng(1).standard_normal((50, 4))
    np.testing.assert_allclose(
        K.correlation(states), states.T @ states / 50, atol=1e-14
    )
    assert float(K.quota(C)) == pytest.approx(s.mean(), rel=1e-12)
    np.testing.assert_allclose(K.conceptor_not(C), np.eye(12) - C, atol=0)


def test_the_papers_identities():
    R = _correlation(2)
    Ca, Cb = K.conceptor(R, 2.0), K.conceptor(R, 5.0)
    np.testing.assert_allclose(
        K.adapt_aperture(Ca, 3.0), _conceptor_np(R, 6.0), atol=1e-11
    )
    both = (2.0**-2 + 5.0**-2) ** -0.5
    either = (2.0**2 + 5.0**2) ** 0.5
    np.testing.assert_allclose(
        K.conceptor_and(Ca, Cb), _conceptor_np(R, both), atol=1e-10
    )
    np.testing.assert_allclose(
        K.conceptor_or(Ca, Cb), _conceptor_np(R, either), atol=1e-10
    )


def test_and_of_commuting_conceptors_and_the_order_of_quotas():
    c, b = np.array([0.9, 0.5, 0.1, 0.7]), np.array([0.3, 0.8, 0.6, 0.7])
    np.testing.assert_allclose(
        np.diag(K.conceptor_and(np.diag(c), np.diag(b))),
        1 / (1 / c + 1 / b - 1),
        rtol=1e-12,
    )
    C, B = K.conceptor(_correlation(3), 4.0), K.conceptor(_correlation(4), 4.0)
    q = [float(K.quota(M)) for M in (K.conceptor_and(C, B), C, B, K.conceptor_or(C, B))]
    assert q[0] < min(q[1], q[2]) and max(q[1], q[2]) < q[3]


@functools.cache
def _loaded():
    patterns = np.stack([
        np.sin(2 * np.pi * N_PATTERN / PERIODS[0]),
        np.sin(2 * np.pi * N_PATTERN / PERIODS[1]),
        RAND5[N_PATTERN % 5],
        PERTURB5[N_PATTERN % 5],
    ])[..., None]  # fmt: skip
    esn = orc.forecaster.ESNForecaster(
        1, 100, leak_rate=1.0, bias=0.2, embedding_scaling=1.5,
        Wr_spectral_radius=1.5, Wr_density=0.1, seed=0,
    )  # fmt: skip
    return K.load_patterns(esn, patterns, names=["s1", "s2", "r3", "r4"]), patterns


def _period(y):
    spectrum = np.abs(np.fft.rfft(y - y.mean(), 2**16))
    return 2**16 / np.argmax(spectrum)


def test_loaded_patterns_are_regenerated():
    net, patterns = _loaded()
    x0 = 0.5 * jnp.asarray(np.random.default_rng(4).random(100))
    for j, name in enumerate(net.names):
        y = np.asarray(net.generate(500, name, x0, washout=200))[:, 0]
        if j < 2:  # the sines: their period and amplitude
            assert _period(y) == pytest.approx(PERIODS[j], rel=5e-3)
            assert (y.max() - y.min()) / 2 == pytest.approx(1.0, rel=0.02)
        else:  # the period-5 sequences, at the best of five phases
            ref = patterns[j, :5, 0]
            nrmse = min(
                np.sqrt(
                    np.mean((y - np.tile(np.roll(ref, -k), 100)) ** 2) / np.var(ref)
                )
                for k in range(5)
            )
            assert nrmse < 0.02
    halfway = np.asarray(
        net.generate(500, net.morph({"s1": 0.5, "s2": 0.5}), x0, washout=200)
    )
    assert PERIODS[0] + 0.1 < _period(halfway[:, 0]) < PERIODS[1] - 0.1


def test_network_is_a_value(tmp_path):
    net, _ = _loaded()
    np.testing.assert_array_equal(net.morph([0, 1, 0, 0]), net.conceptor("s2"))
    np.testing.assert_array_equal(net.conceptor(-1), net.conceptor("r4"))
    C = net.conceptor(0)
    direct = net.generate(20, C)
    np.testing.assert_allclose(
        jax.jit(lambda n, c: n.generate(20, c))(net, C), direct, rtol=1e-12
    )
    orc.save(tmp_path / "net.orc", net)
    loaded = orc.load(tmp_path / "net.orc")
    assert loaded.names == net.names
    np.testing.assert_array_equal(loaded.generate(20, "s1"), net.generate(20, "s1"))


def test_bad_arguments_are_named():
    net, patterns = _loaded()
    with pytest.raises(KeyError, match="no pattern named 'x'"):
        net.conceptor("x")
    with pytest.raises(ValueError, match="one weight per pattern"):
        net.morph([1.0, 0.0])
    with pytest.raises(ValueError, match="conceptor must be"):
        net.generate(5, jnp.eye(3))
    esn = orc.forecaster.ESNForecaster(1, 20, seed=0)
    with pytest.raises(ValueError, match="patterns must have 3 dimensions|patterns"):
        K.load_patterns(esn, patterns[0])
    with pytest.raises(ValueError, match="names must be 4 distinct strings"):
        K.load_patterns(esn, patterns, names=["a", "a", "b", "c"])
    with pytest.raises(TypeError, match="one ESN reservoir"):
        K.load_patterns(orc.forecaster.ESNForecaster(2, 20, chunks=2, seed=0), patterns)
    with pytest.raises(ValueError, match="aperture must lie in"):
        K.conceptor(np.eye(3), 0.0)
    with pytest.raises(ValueError, match="must be square"):
        K.conceptor(np.ones((2, 3)))
