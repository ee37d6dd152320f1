"""Reservoir banks and search populations across devices and hosts (issue 46).

The multi-device runs need the host device count fixed before JAX is
imported, so they run in subprocesses (tests/_shard_worker.py): one
process with 4 host devices, and two processes of 2 devices each joined by
``jax.distributed.initialize`` on loopback (gloo). Each test reads what
they wrote and compares with an expectation computed another way: the
unsharded model, a NumPy ridge solve and closed loop, the population
searched without a mesh.

Equality: training sharded over 4 devices (and over 2 processes) gives the
unsharded training's bits (every reservoir runs the same kernels on the same
numbers). The sharded forecast gives the same bits on 1 and 4 devices and
across processes; against the unsharded ``forecast``, whose native kernel
runs the whole closed loop in one call with its own ``tanh``, it agrees to
rounding (1e-12 relative over the first steps, before the closed loop
amplifies rounding).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import orc
from _helpers import hlo_loops, hlo_text
from orc._shard import HaloEmbedding
from orc._validation import from_fields
from orc.forecaster import CESNForecaster, ESNForecaster

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "_shard_worker.py")
TIMEOUT = 300
NX, CHUNKS, RES, LOCALITY, TRAIN, SPINUP, BETA = 64, 8, 30, 3, 300, 50, 1e-4
HORIZON = 40


def ks_data(n: int, nx: int = 64, length: float = 44.0, dt: float = 0.25) -> np.ndarray:
    """``(n, nx)`` samples of Kuramoto-Sivashinsky ``u_t = -u u_x - u_xx - u_xxxx``
    on a periodic domain, ETDRK4 (Kassam & Trefethen 2005) in NumPy, after
    200 samples of transient: test data made without compiling anything."""
    rng = np.random.default_rng(2018)
    u = 0.5 * rng.standard_normal(nx)
    v = np.fft.rfft(u - u.mean())
    k = 2 * np.pi / length * np.arange(nx // 2 + 1)
    lin = k**2 - k**4
    e, e2 = np.exp(dt * lin), np.exp(dt * lin / 2)
    roots = np.exp(1j * np.pi * (np.arange(1, 17) - 0.5) / 16)
    lr = dt * lin[:, None] + roots[None, :]
    q = dt * np.real(np.mean((np.exp(lr / 2) - 1) / lr, axis=1))
    f1 = dt * np.real(
        np.mean((-4 - lr + np.exp(lr) * (4 - 3 * lr + lr**2)) / lr**3, axis=1)
    )
    f2 = dt * np.real(np.mean((2 + lr + np.exp(lr) * (-2 + lr)) / lr**3, axis=1))
    f3 = dt * np.real(
        np.mean((-4 - 3 * lr - lr**2 + np.exp(lr) * (4 - lr)) / lr**3, axis=1)
    )
    g = -0.5j * k

    def nonlinear(v):
        return g * np.fft.rfft(np.fft.irfft(v, nx) ** 2)

    out = []
    for step in range(200 + n):
        nv = nonlinear(v)
        a = e2 * v + q * nv
        na = nonlinear(a)
        b = e2 * v + q * na
        nb = nonlinear(b)
        c = e2 * a + q * (2 * nb - nv)
        nc = nonlinear(c)
        v = e * v + nv * f1 + 2 * (na + nb) * f2 + nc * f3
        if step >= 200:
            out.append(np.fft.irfft(v, nx))
    return np.array(out)


def _run(args, tmp, name):
    env = dict(os.environ, PYTHONPATH=str(HERE))
    with open(tmp / f"{name}.err", "w") as err:
        return subprocess.Popen(
            [sys.executable, WORKER, *args], cwd=HERE, env=env,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip


def _wait(proc, tmp, name):
    proc.wait(timeout=TIMEOUT)
    return proc.returncode, (tmp / f"{name}.err").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shard")
    U = ks_data(TRAIN + HORIZON)
    np.savez(tmp / "data.npz", U=U)
    # the three processes side by side (each mostly compiles, on one core)
    port = str(_free_port())
    first = _run(["single", str(tmp)], tmp, "single")
    procs = [
        _run(["distributed", str(tmp), str(i), port], tmp, f"d{i}") for i in (0, 1)
    ]
    code, err = _wait(first, tmp, "single")
    results = [_wait(p, tmp, f"d{i}") for i, p in enumerate(procs)]
    assert code == 0, err[-4000:]
    single = dict(np.load(tmp / "single.npz"))
    single["hlo"] = (tmp / "hlo.txt").read_text()
    single["U"] = U
    dist = None
    if all(code == 0 for code, _ in results):
        dist = dict(np.load(tmp / "distributed.npz"))
    else:
        text = "\n".join(err for _, err in results)
        low = text.lower()
        words = (
            "unknown",
            "unsupported",
            "not supported",
            "not available",
            "not built",
        )
        if "gloo" in low and any(w in low for w in words):
            # the one failure that is the platform's, not orc's
            reason = "this platform's jaxlib has no CPU collectives (gloo): "
            dist = reason + text[-300:]
        else:
            raise AssertionError(f"the distributed run failed:\n{text[-6000:]}")
    return single, dist


def test_sharded_training_equals_the_unsharded_bits(runs):
    r, _ = runs
    # bit for bit: each reservoir runs the same kernels on the same numbers
    np.testing.assert_array_equal(r["wout4"], r["wout1"])
    np.testing.assert_array_equal(r["R4"], r["R1"])
    np.testing.assert_array_equal(r["scale4"], r["scale1"])
    # and the weights are the ridge solution of each reservoir's own patch
    # (an independent NumPy solve from the returned states)
    U, R = r["U"], r["R4"]
    size = NX // CHUNKS
    for c in range(CHUNKS):
        X = R[SPINUP : TRAIN - 1, c]
        Y = U[SPINUP + 1 : TRAIN, c * size : (c + 1) * size]
        w = np.linalg.solve(X.T @ X + BETA * np.eye(RES), X.T @ Y).T
        np.testing.assert_allclose(r["wout4"][c], w, rtol=1e-6, atol=1e-8)


def test_sharded_arrays_carry_the_named_sharding(runs):
    r, _ = runs
    wout, values, win, bias, states, forecast = (str(s) for s in r["shardings"])
    assert wout == "('bank',) over 4"  # trained weights stay placed
    assert values == "('bank',) over 4" and win == "('bank',) over 4"  # the bank
    assert bias == "() over 4"  # scalars replicated
    assert states == "(None, 'bank') over 4"  # history: bank axis placed
    assert forecast == "() over 4"  # outputs gathered once, after the loop


def _numpy_closed_loop(r, steps):
    """The first ``steps`` outputs of the trained model's closed loop from
    the last training state, in NumPy from its arrays (leak rate 1)."""
    size, width = NX // CHUNKS, NX // CHUNKS + 2 * LOCALITY
    window = (np.arange(CHUNKS)[:, None] * size - LOCALITY + np.arange(width)) % NX
    wout, win, values, columns = r["wout4"], r["win"], r["values"], r["columns"]
    state = r["R4"][-1]
    out = []
    for _ in range(steps):
        y = np.einsum("con,cn->co", wout, state).reshape(-1)
        out.append(y)
        drive = np.einsum("cnw,cw->cn", win, y[window])
        recurrent = np.stack([np.sum(values[c] * state[c][columns[c]], axis=-1)
                              for c in range(CHUNKS)])  # fmt: skip
        state = np.tanh(recurrent + drive + r["bias"])
    return np.array(out)


def test_sharded_forecast_equals_one_device_and_the_unsharded_model(runs):
    r, _ = runs
    # the same program on 1 and on 4 devices: the same bits
    np.testing.assert_array_equal(r["y4"], r["y_one_device"])
    # the unsharded forecast (the native one-call kernel): equal to rounding
    # over the first steps; the closed loop then amplifies rounding
    scale = np.abs(r["y1"]).max()
    err = np.abs(r["y4"] - r["y1"]).max(axis=1) / scale
    assert err[:10].max() < 1e-12, err[:10]
    # the closed loop computed in NumPy from the model's arrays
    np.testing.assert_allclose(r["y4"][:10], _numpy_closed_loop(r, 10), rtol=0,
                               atol=1e-10 * scale)  # fmt: skip


def test_other_entry_points_of_a_placed_model_run_partitioned_by_xla(runs):
    r, _ = runs
    # forecast_from_IC has no sharded program of its own: XLA partitions the
    # unplaced one (the mesh's axes are placed in automatic mode)
    np.testing.assert_array_equal(r["fic4"], r["fic1"])


@pytest.mark.parametrize("case", ["halo_periodic", "halo_edges"])
def test_sharded_drive_equals_the_parallel_embedding(runs, case):
    # each of 4 devices embeds its 2 reservoirs' windows from its own inputs
    # and its neighbours' halo; the outer edges of a non-periodic input
    # repeat its boundary values on the first and last device
    r, _ = runs
    sharded, unsharded = r[case]
    np.testing.assert_array_equal(sharded, unsharded)


def test_compiled_forecast_exchanges_halos_by_collective_permutes(runs):
    r, _ = runs
    loops = hlo_loops(r["hlo"])
    assert loops, "no while loop in the compiled forecast"
    loop = hlo_text(*loops.values())
    permutes = [line for line in loop.splitlines() if "collective-permute(" in line]
    # one permute per side per step, each of the locality columns only
    assert len(permutes) == 2, permutes
    for line in permutes:
        assert re.search(rf"f64\[1,{LOCALITY}\]", line), line
        assert "source_target_pairs={{0,1},{1,2},{2,3},{3,0}}" in line or (
            "source_target_pairs={{0,3},{1,0},{2,1},{3,2}}" in line
        )
    assert "all-gather" not in loop and "all-reduce" not in loop
    # the native sparse product runs per device inside the loop
    assert re.search(r"custom_call_target=\"orc_ell_matvec_f64\"", loop)


def test_population_on_4_devices_equals_one_device(runs):
    r, _ = runs
    assert np.isfinite(r["pop1"]).sum() >= 2
    np.testing.assert_array_equal(r["pop4"], r["pop1"])


def test_two_processes_equal_one_process(runs):
    r, dist = runs
    if isinstance(dist, str):
        pytest.skip(dist)
    assert int(dist["processes"]) == 2 and int(dist["devices"]) == 4
    assert str(dist["sharding"]) == "('bank',) over 4"
    np.testing.assert_array_equal(dist["wout"], r["wout1"])
    np.testing.assert_array_equal(dist["R"], r["R1"])
    np.testing.assert_array_equal(dist["y"], r["y4"])
    np.testing.assert_array_equal(dist["pop"], r["pop1"])


@pytest.mark.parametrize("periodic", [True, False])
def test_halo_embedding_unsharded_is_the_parallel_embedding(periodic):
    # on one device the halo is the bank's own wrap (or edge values): the
    # same drive, bit for bit, as the embedding it stands for
    emb = orc.embeddings.ParallelLinearEmbedding(
        16, 5, 0.5, chunks=4, locality=3, periodic=periodic, seed=1
    )
    fields = dict(
        in_dim=16,
        res_dim=5,
        dtype=emb.dtype,
        chunks=4,
        win=emb.win,
        chunk_size=4,
        locality=3,
        periodic=periodic,
        axis=None,
        devices=1,
    )
    halo = from_fields(HaloEmbedding, fields)  # fmt: skip
    u = np.random.default_rng(0).standard_normal((7, 16))
    np.testing.assert_array_equal(halo.batch_embed(u), emb.batch_embed(u))
    np.testing.assert_array_equal(halo.embed(u[0]), emb.embed(u[0]))


def test_shard_refuses_what_it_cannot_place():
    mesh = jax.make_mesh((1,), ("bank",))
    esn = ESNForecaster(8, 10, chunks=2, locality=1, seed=0)
    with pytest.raises(TypeError, match="mesh must be a jax.sharding.Mesh"):
        orc.shard(esn, "bank")
    with pytest.raises(ValueError, match="axis 'x' is not an axis"):
        orc.shard(esn, mesh, axis="x")
    with pytest.raises(TypeError, match="discrete-time forecaster"):
        orc.shard(CESNForecaster(8, 10, chunks=2, seed=0), mesh)
    placed = orc.shard(esn, mesh)
    assert placed.readout.wout.sharding.spec == jax.sharding.PartitionSpec("bank")


def test_placed_ensemble_trains_to_the_bits_and_forecasts_the_mean(runs):
    # each device holds 2 of the 8 members; every member reads the whole data
    r, _ = runs
    assert "bank" in str(r["ens_spec"])
    np.testing.assert_array_equal(r["ens_wout4"], r["ens_wout1"])
    np.testing.assert_array_equal(r["ens_R4"], r["ens_R1"])
    # the members' mean: each device's, then across devices (one psum per
    # step), the unplaced model's to rounding
    np.testing.assert_allclose(r["ens_y4"], r["ens_y1"], rtol=1e-12, atol=1e-12)
    # with training noise: the whole input's noise on every device, each
    # device's members' state noise
    np.testing.assert_array_equal(r["ens_noise4"], r["ens_noise1"])
    assert not np.array_equal(r["ens_noise1"], r["ens_wout1"])
    assert np.isfinite(r["ens_y4"]).all() and r["ens_y4"].shape == (HORIZON, NX)


def test_placed_training_with_noise_equals_the_unplaced_bits(runs):
    # input and state noise: each device's share of the whole model's draw
    # (the placed model streams its states, the unplaced one keeps them)
    r, _ = runs
    np.testing.assert_array_equal(r["woutn4"], r["woutn1"])
    assert not np.array_equal(r["woutn1"], r["wout1"])  # the noise is in the fit
