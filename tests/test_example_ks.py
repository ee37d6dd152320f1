"""The parallel-reservoir Kuramoto-Sivashinsky example (examples/ks_parallel.py).

Runs the example's small configuration (8 reservoirs of 400 nodes, 8000
training samples, 3 test windows) once, then checks that its forecasts are
valid for a useful time and far longer than persistence, and that the model
has the chunk/locality structure the example describes.
"""

import importlib.util
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ks_parallel.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("ks_parallel_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return _load_example()


@pytest.fixture(scope="module")
def small_run(example):
    return example.run_experiment(example.SMALL)


def test_small_run_forecasts_beyond_half_a_lyapunov_time(example, small_run):
    vpts = small_run.vpts
    assert vpts.shape == (example.SMALL.n_windows,) == (3,)
    assert np.all(np.isfinite(vpts))
    # The forecasts stay within 40 % of the attractor's size for, on average,
    # at least half a Lyapunov time (about 12 time units of KS at L = 22).
    assert vpts.mean() >= 0.5
    # A Lyapunov time is 1 / 0.043 time units; the window cap follows from it.
    cap = example.SMALL.horizon * example.DT * example.LYAPUNOV
    assert np.all(vpts <= cap + 1e-12)


def test_small_run_beats_persistence(small_run):
    # Same windows, same scale and threshold; the baseline holds the last
    # warm-up sample constant. A trained model must do clearly better.
    vpts, persistence = small_run.vpts, small_run.persistence_vpts
    assert np.all(vpts > persistence)
    assert vpts.mean() >= 2.0 * persistence.mean()


def test_errors_start_small_and_cross_threshold_where_vpt_says(example, small_run):
    # The first forecast step is a one-step prediction: it must be accurate.
    assert np.all(small_run.errors[:, 0] < 0.05)
    # Recompute each VPT from the stored error curves, independently of
    # orc.metrics.valid_prediction_time.
    for err, vpt in zip(small_run.errors, small_run.vpts, strict=True):
        above = np.nonzero(err > example.THRESHOLD)[0]
        steps = above[0] if above.size else err.shape[0]
        assert vpt == pytest.approx(steps * example.DT * example.LYAPUNOV)


def test_parallel_structure(example, small_run):
    esn = small_run.esn
    chunks, loc, nx, res = example.CHUNKS, example.LOCALITY, example.NX, 400
    assert chunks >= 8 and loc >= 3
    size = nx // chunks
    assert esn.chunks == chunks and esn.res_dim == res
    # One input matrix per reservoir, over its patch plus `loc` points each side.
    assert esn.embedding.win.shape == (chunks, res, size + 2 * loc)
    assert esn.readout.wout.shape == (chunks, size, res)

    # The window of chunk c is u[c*size - loc : (c+1)*size + loc], wrapped
    # around the periodic grid.
    # inputs and perturbations are made in numpy (eager scatters would each
    # be a program of their own)
    u_np = np.random.default_rng(1).standard_normal(nx)
    u = jnp.asarray(u_np)
    windows = np.asarray(esn.embedding.localize(u))
    for c in range(chunks):
        idx = np.arange(c * size - loc, (c + 1) * size + loc) % nx
        np.testing.assert_array_equal(windows[c], u_np[idx])

    # Behaviour: moving the grid point just inside chunk 0's left overlap
    # (index -loc, i.e. nx - loc) changes chunk 0's drive; the point one further
    # left does not.
    drive = np.asarray(esn.embedding.embed(u))
    bumped = np.repeat(u_np[None], 2, axis=0)
    bumped[0, nx - loc] += 1.0
    bumped[1, nx - loc - 1] += 1.0
    inside = np.asarray(esn.embedding.embed(jnp.asarray(bumped[0])))
    outside = np.asarray(esn.embedding.embed(jnp.asarray(bumped[1])))
    assert not np.allclose(inside[0], drive[0])
    np.testing.assert_array_equal(outside[0], drive[0])

    # Each reservoir's readout predicts only its own patch.
    states = np.asarray(esn.force(jnp.asarray(u_np[None]), esn.driver.default_state()))
    assert states.shape == (1, chunks, res)
    r_pert = states[0].copy()
    r_pert[3] += 0.1
    y = np.asarray(esn.readout.readout(jnp.asarray(states[0])))
    y_pert = np.asarray(esn.readout.readout(jnp.asarray(r_pert)))
    changed = np.nonzero(~np.isclose(y_pert, y, rtol=0, atol=1e-12))[0]
    assert changed.size > 0
    assert set(changed) <= set(range(3 * size, 4 * size))


def test_main_prints_and_writes_figures(
    example, small_run, tmp_path, monkeypatch, capsys
):
    # Reuse the run above: main's own work is the report and the figures.
    monkeypatch.setattr(example, "run_experiment", lambda cfg: small_run)
    vpts = example.main(small=True, out_dir=tmp_path)
    np.testing.assert_array_equal(vpts, small_run.vpts)
    out = capsys.readouterr().out
    assert f"mean {small_run.vpts.mean():.2f}" in out
    for name in ("ks_parallel_forecast.png", "ks_parallel_vpt.png"):
        png = tmp_path / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000
