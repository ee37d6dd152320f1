"""RECADriver, the cellular-automaton reservoir (Yilmaz 2014).

The automaton and the input encoding are checked against a numpy loop
written from the definition (Wolfram's rule numbering on a ring, the bits
written over the cells at the driver's places); the defaults against the
5-bit memory task with a 200-step distractor, which the literature uses for
these reservoirs (rule 90 solves it; rule 0, which carries nothing, does
not). The driver contract (jit, vmap, grad, dtypes) is in
``test_contract.py``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc._validation import replace_fields
from orc.drivers import RECADriver
from orc.embeddings import LinearEmbedding


def _numpy_reca(bits, positions, rule, generations, cells):
    x, states = np.zeros(cells, int), []
    for u in bits:
        x[positions] = np.tile(u, len(positions) // len(u))
        evo = []
        for _ in range(generations):
            x = (rule >> (4 * np.roll(x, 1) + 2 * x + np.roll(x, -1))) & 1
            evo.append(x)
        states.append(np.concatenate(evo))
    return np.array(states)


@pytest.mark.parametrize("rule", [90, 30, 110])
def test_automaton_and_encoding_against_numpy(rule):
    d = RECADriver(3, rule=rule, generations=4, permutations=3, expansion_size=10,
                   seed=2)  # fmt: skip
    positions = np.asarray(d.positions)
    # three distinct places in each block of ten
    for b in range(3):
        block = positions[3 * b : 3 * b + 3]
        assert len(set(block)) == 3 and all(10 * b <= p < 10 * b + 10 for p in block)
    bits = np.random.default_rng(0).integers(0, 2, (30, 3))
    states = np.asarray(d.advance_seq(jnp.asarray(bits, float), d.default_state()))
    np.testing.assert_array_equal(states, _numpy_reca(bits, positions, rule, 4, 30))


def _five_bit_task(distractor=200):
    """The 32 sequences of the 5-bit memory task: 5 bits (channels 0 and
    1), ``distractor`` steps of the distractor signal (channel 2), the cue
    (channel 3), then 5 steps in which to recall the bits; targets are the
    bit's two channels in the recall steps, the distractor's otherwise."""
    n = 5 + distractor + 1 + 5
    X, Y = np.zeros((32, n, 4)), np.zeros((32, n, 3))
    for k in range(32):
        bits = [(k >> i) & 1 for i in range(5)]
        X[k, :5, 0], X[k, :5, 1] = bits, [1 - b for b in bits]
        X[k, 5:, 2] = 1
        X[k, 5 + distractor, 2], X[k, 5 + distractor, 3] = 0, 1
        Y[k, :, 2] = 1
        for t, b in enumerate(bits):
            Y[k, 6 + distractor + t] = [b, 1 - b, 0]
    return X, Y


def _solved(rule):
    """How many of the 32 sequences a ridge readout recalls without error."""
    X, Y = _five_bit_task()
    reg = orc.regression.RCRegressorBase(
        driver=RECADriver(4, rule=rule, seed=0),
        readout=orc.readouts.LinearReadout(3, 2560),
        embedding=LinearEmbedding.from_matrices(np.eye(4)),
    )
    reg, _ = orc.regression.train_RCRegressor(
        reg, jnp.asarray(X), jnp.asarray(Y), beta=1e-8, multi_sequence=True
    )
    solved = 0
    for x, y in zip(X, Y, strict=True):
        pred = np.asarray(reg.predict(jnp.asarray(x), reg.driver.default_state()))
        solved += bool(np.all(pred.argmax(1) == y.argmax(1)))
    return solved


def test_defaults_solve_the_five_bit_memory_task():
    assert _solved(90) == 32
    assert _solved(0) == 0


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="RECADriver: rule must be <= 255"):
        RECADriver(2, rule=256, seed=0)
    with pytest.raises(ValueError, match="RECADriver: in_dim must be <= 40"):
        RECADriver(41, seed=0)
    d = RECADriver(2, generations=2, permutations=2, expansion_size=5, seed=0)
    assert d.res_dim == 20
    # a file's places outside their block, or twice in one, are refused (the
    # checks orc.load runs)
    with pytest.raises(ValueError, match=r"positions \(within each block\) must lie"):
        replace_fields(d, positions=jnp.asarray([0, 1, 2, 10], jnp.int32))
    with pytest.raises(ValueError, match="positions must be distinct within a block"):
        replace_fields(d, positions=jnp.asarray([0, 0, 5, 6], jnp.int32))
    with pytest.raises(ValueError, match=r"proj_vars must have shape \(2,\)"):
        d.advance(jnp.zeros(20), d.default_state())


def test_a_model_around_it_saves_and_loads(tmp_path):
    """The places are integers in the model file; the loaded model's
    predictions are the same bits."""
    X, Y = _five_bit_task(distractor=10)
    reg = orc.regression.RCRegressorBase(
        driver=RECADriver(4, generations=2, permutations=2, expansion_size=10, seed=1),
        readout=orc.readouts.LinearReadout(3, 40),
        embedding=LinearEmbedding.from_matrices(np.eye(4)),
    )
    reg, _ = orc.regression.train_RCRegressor(
        reg, jnp.asarray(X), jnp.asarray(Y), beta=1e-6, multi_sequence=True
    )
    orc.save(tmp_path / "reca.orc", reg)
    loaded = orc.load(tmp_path / "reca.orc")
    assert loaded.driver.positions.dtype == reg.driver.positions.dtype
    np.testing.assert_array_equal(loaded.driver.positions, reg.driver.positions)
    x = jnp.asarray(X[3])
    np.testing.assert_array_equal(
        loaded.predict(x, loaded.driver.default_state()),
        reg.predict(x, reg.driver.default_state()),
    )
