"""LIFDriver, the discrete-time spiking reservoir (reservoirpy's ``LIF``).

The update and the spikes are checked against a numpy loop written from the
equations; the weights against Dale's law and their spectral radius; the
spikes against reservoirpy 0.4.2's ``LIF`` itself when an environment with it
is at hand (``$ORC_RESERVOIRPY_PYTHON``, default the benchmarks'); the
defaults against a task (Mackey-Glass ten steps ahead) where a linear map of
the sample fails. The driver contract (jit, vmap, grad, dtypes) is in
``test_contract.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import driver_round_trip
from orc.drivers import LIFDriver
from orc.embeddings import LinearEmbedding

ROOT = Path(__file__).resolve().parents[1]
RESERVOIRPY = os.environ.get(
    "ORC_RESERVOIRPY_PYTHON", str(ROOT / "benchmarks/.venvs/rpy/bin/python")
)


def _dense(driver):
    return np.asarray(driver.reservoir.wr.todense()).reshape(driver.res_dim, -1)


def _numpy_lif(W, drive, leak, threshold, reset, bias):
    """Membrane potentials and spikes, step by step from the equations."""
    v = np.zeros(W.shape[0])
    states, spikes = [], []
    for p in drive:
        v = (1 - leak) * v
        z = (v > threshold).astype(float)
        v = np.where(z > 0, reset, v) + W @ z + p + bias
        states.append(v)
        spikes.append(z)
    return np.array(states), np.array(spikes)


def test_update_and_spikes_against_numpy():
    d = LIFDriver(40, leak=0.1, threshold=0.8, reset=-0.2, bias=0.1, seed=3)
    drive = np.random.default_rng(0).uniform(-1, 1.5, (200, 40))
    states = np.asarray(d.advance_seq(jnp.asarray(drive), d.default_state()))
    want, fired = _numpy_lif(_dense(d), drive, 0.1, 0.8, -0.2, 0.1)
    np.testing.assert_allclose(states, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(d.spikes(states)), fired)
    assert 0.05 < fired.mean() < 0.6  # the neurons do fire, and not always


def test_weights_obey_dales_law():
    """The first 80% of the neurons excite (their outgoing weights, the
    columns of ``W``, are positive), the rest inhibit; ``W`` has the
    spectral radius asked for."""
    d = LIFDriver(50, spectral_radius=0.7, seed=0)
    W = _dense(d)
    assert (W[:, :40] >= 0).all() and (W[:, 40:] <= 0).all()
    assert (W[:, :40] > 0).any() and (W[:, 40:] < 0).any()
    np.testing.assert_allclose(np.abs(np.linalg.eigvals(W)).max(), 0.7, rtol=1e-6)


def test_given_weights_are_taken_as_given():
    W = np.random.default_rng(1).uniform(0, 1, (20, 20)) * 0.2
    d = LIFDriver.from_matrices(W, leak=0.3, threshold=1.5)
    np.testing.assert_array_equal(_dense(d), W)
    drive = np.random.default_rng(2).uniform(0, 1, (50, 20))
    states = np.asarray(d.advance_seq(jnp.asarray(drive), d.default_state()))
    np.testing.assert_allclose(
        states, _numpy_lif(W, drive, 0.3, 1.5, 0.0, 0.0)[0], rtol=1e-12, atol=1e-12
    )


_RESERVOIRPY_LIF = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from reservoirpy.nodes import LIF
    data = json.load(open(sys.argv[1]))
    W, Win, x = (np.array(data[k]) for k in ("W", "Win", "x"))
    node = LIF(W=W, Win=Win, lr=data["leak"], threshold=data["threshold"])
    print(json.dumps(node.run(x).tolist()))
    """
)


@pytest.mark.skipif(
    not Path(RESERVOIRPY).is_file(), reason="no reservoirpy environment"
)
def test_spikes_are_reservoirpys(tmp_path):
    """reservoirpy 0.4.2's ``LIF`` with the same ``W`` and ``Win`` fires the
    same spikes, step for step."""
    rng = np.random.default_rng(5)
    W = rng.uniform(0, 1, (60, 60)) * (rng.random((60, 60)) < 0.1)
    W[:, :12] *= -1
    Win = rng.uniform(0, 1, (60, 2))
    x = rng.uniform(-1, 1, (300, 2))
    (tmp_path / "in.json").write_text(json.dumps(dict(
        W=W.tolist(), Win=Win.tolist(), x=x.tolist(), leak=0.2, threshold=1.0
    )))  # fmt: skip
    proc = subprocess.run(
        [RESERVOIRPY, "-c", _RESERVOIRPY_LIF, str(tmp_path / "in.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0 and "No module named" in proc.stderr:
        pytest.skip(f"{RESERVOIRPY} has no reservoirpy")
    assert proc.returncode == 0, proc.stderr[-2000:]
    theirs = np.array(json.loads(proc.stdout))
    d = LIFDriver.from_matrices(W, leak=0.2, threshold=1.0)
    states = d.advance_seq(jnp.asarray(x @ Win.T), d.default_state())
    ours = np.asarray(d.spikes(states))
    assert theirs.sum() > 100  # they fire
    np.testing.assert_array_equal(ours, theirs)


def test_defaults_predict_mackey_glass_ten_steps_ahead():
    """100 neurons at the defaults (input scaling 1): NRMSE 0.245 ten steps
    ahead on Mackey-Glass (orc's ESN of 100 at its defaults: 0.24), where a
    linear map of the current sample scores 0.97."""
    mg = np.asarray(orc.data.mackey_glass(3000)).reshape(-1)
    mg = (mg - mg.mean()) / mg.std()

    def ten_ahead(features):
        X, y = features[:-10], mg[10:]
        F = np.hstack([np.ones((len(y), 1)), X])
        A, b = F[100:-500], y[100:-500]
        w = np.linalg.solve(A.T @ A + 1e-6 * np.diag(np.r_[0, np.ones(X.shape[1])]),
                            A.T @ b)  # fmt: skip
        return np.sqrt(np.mean((F[-500:] @ w - y[-500:]) ** 2)) / np.std(y[-500:])

    d = LIFDriver(100, seed=0)
    drive = LinearEmbedding(1, 100, 1.0, seed=1)(jnp.asarray(mg)[:, None])
    states = np.asarray(d.advance_seq(drive, d.default_state()))
    assert ten_ahead(mg[:, None]) > 0.9
    assert ten_ahead(states) < 0.3


def test_arguments_are_checked_and_traceable():
    with pytest.raises(ValueError, match="LIFDriver: leak must lie in"):
        LIFDriver(10, leak=1.5, seed=0)
    with pytest.raises(ValueError, match="LIFDriver: reset must lie in"):
        LIFDriver(10, threshold=1.0, reset=1.0, seed=0)
    with pytest.raises(ValueError, match="LIFDriver: excitatory_fraction must lie in"):
        LIFDriver(10, excitatory_fraction=1.0, seed=0)
    d = LIFDriver(10, seed=0)
    r, p = jnp.full(10, 1.05), jnp.zeros(10)

    def step(leak, threshold):
        return eqx.tree_at(
            lambda m: (m.leak, m.threshold), d, (leak, threshold)
        ).advance(p, r)

    out = jax.jit(jax.vmap(step))(jnp.stack([d.leak, 0.0]), jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(out[0], d.advance(p, r), rtol=1e-14)
    # no leak and a threshold above every potential: nothing fires, v stays
    np.testing.assert_allclose(out[1], r, rtol=1e-14)


def test_a_forecaster_around_it_trains_and_round_trips(tmp_path):
    driver_round_trip(LIFDriver(40, seed=0), tmp_path / "model.orc")
