"""Runs for tests/test_shard.py, each in a process of its own (the number
of host devices is fixed before JAX is imported):

``python tests/_shard_worker.py single OUT_DIR``
    One process with 4 host devices, on the Kuramoto-Sivashinsky data in
    ``OUT_DIR/data.npz`` (``U``, written by the test, :func:`ks_data`): the
    unsharded training and forecast, the same on a mesh of 4 devices and of
    1 device, the compiled sharded forecast's HLO text, and a search
    population without a mesh and on 4 devices. Results in
    ``OUT_DIR/single.npz`` and ``OUT_DIR/hlo.txt``.

``python tests/_shard_worker.py distributed OUT_DIR PROCESS_ID PORT``
    One of two processes with 2 host devices each, joined by
    ``jax.distributed.initialize`` on loopback (CPU collectives through
    gloo): the sharded training and forecast of the same model on the mesh
    of all 4 devices, and the population on it. Process 0 writes
    ``OUT_DIR/distributed.npz``.

Float64 and strict dtype promotion as in tests/conftest.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MODE, OUT = sys.argv[1], Path(sys.argv[2])
DEVICES = {"single": 4, "distributed": 2}[MODE]
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={DEVICES}"
)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
if MODE == "distributed":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{sys.argv[4]}",
        num_processes=2,
        process_id=int(sys.argv[3]),
    )

import equinox as eqx  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402

import orc  # noqa: E402
from _helpers import lorenz_rk4  # noqa: E402
from orc import tune  # noqa: E402
from orc.forecaster import (  # noqa: E402
    EnsembleESNForecaster,
    ESNForecaster,
    train_RCForecaster,
)

NX, CHUNKS, RES, LOCALITY = 64, 8, 30, 3
TRAIN, SPINUP, HORIZON = 300, 50, 40
# the forecast length whose compiled program's HLO the test reads
HLO_STEPS = 5


def model() -> ESNForecaster:
    return ESNForecaster(
        NX, RES, chunks=CHUNKS, locality=LOCALITY, leak_rate=1.0, bias=0.5,
        Wr_spectral_radius=0.6, embedding_scaling=0.1, seed=3,
    )  # fmt: skip


def train_and_forecast(esn, U):
    esn, R = train_RCForecaster(esn, U[:TRAIN], spinup=SPINUP, beta=1e-4)
    return esn, R, esn.forecast(HORIZON, R[-1])


def population(mesh=None) -> np.ndarray:
    U = np.asarray(lorenz_rk4(1000))
    task = tune.Forecast(U[:600], U[600:], spinup=50, warmup=40, horizon=30,
                         windows=2, metric="nrmse")  # fmt: skip
    space = {"Wr_spectral_radius": tune.Uniform(0.3, 1.2),
             "embedding_scaling": tune.LogUniform(0.01, 1.0)}  # fmt: skip
    result = tune.search(ESNForecaster, space, task, draws=4,
                         fixed={"data_dim": 3, "res_dim": 20}, mesh=mesh)  # fmt: skip
    return result.scores()


def host(x) -> np.ndarray:
    """``x`` on this host, gathered from every process when it is not all here."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def sharding(x) -> str:
    """``x``'s partition spec (trailing ``None`` left out) and device count."""
    spec = list(x.sharding.spec)
    while spec and spec[-1] is None:
        spec.pop()
    return repr(tuple(spec)) + f" over {x.sharding.mesh.devices.size}"


def halo_drive(periodic: bool) -> tuple[np.ndarray, np.ndarray]:
    """A 64-input, 8-reservoir embedding's drive of random inputs: sharded
    over 4 devices (each device's HaloEmbedding, its halo by ppermute) and
    unsharded (orc.embeddings.ParallelLinearEmbedding)."""
    from jax.sharding import PartitionSpec as P

    from orc._shard import HaloEmbedding
    from orc._validation import from_fields

    emb = orc.embeddings.ParallelLinearEmbedding(
        NX, 6, 0.5, chunks=CHUNKS, locality=LOCALITY, periodic=periodic, seed=1
    )
    u = np.random.default_rng(1).standard_normal((20, NX))
    mesh = jax.make_mesh((4,), ("bank",), axis_types=(jax.sharding.AxisType.Auto,))

    def body(win, u):
        fields = dict(in_dim=NX // 4, res_dim=6, dtype=emb.dtype, chunks=CHUNKS // 4,
                      win=win, chunk_size=NX // CHUNKS, locality=LOCALITY,
                      periodic=periodic, axis="bank", devices=4)  # fmt: skip
        return from_fields(HaloEmbedding, fields).batch_embed(u)

    sharded = jax.jit(
        jax.shard_map(
            body,
            mesh=mesh,
            in_specs=(P("bank"), P(None, "bank")),
            out_specs=P(None, "bank"),
        )  # fmt: skip
    )(emb.win, u)
    # both compiled (eager operations round each product and sum on its own)
    return np.asarray(sharded), np.asarray(eqx.filter_jit(emb.batch_embed)(u))


def single() -> None:
    U = np.load(OUT / "data.npz")["U"]
    m1, R1, y1 = train_and_forecast(model(), U)
    mesh = jax.make_mesh((4,), ("bank",))
    m4, R4, y4 = train_and_forecast(orc.shard(model(), mesh), U)
    yo = orc.shard(m1, jax.make_mesh((1,), ("bank",))).forecast(HORIZON, R1[-1])

    noisy = {"input_noise": 1e-3, "state_noise": 1e-4, "noise_seed": 3}

    # an ensemble: every member reads the whole data, 2 members per device
    def ensemble():
        return EnsembleESNForecaster(NX, RES, chunks=CHUNKS, seed=0)

    e1, eR1, ey1 = train_and_forecast(ensemble(), U)
    e4, eR4, ey4 = train_and_forecast(orc.shard(ensemble(), mesh), U)
    en1, _ = train_RCForecaster(ensemble(), U[:TRAIN], spinup=SPINUP, beta=1e-4,
                                **noisy)  # fmt: skip
    en4, _ = train_RCForecaster(orc.shard(ensemble(), mesh), U[:TRAIN], spinup=SPINUP,
                                beta=1e-4, **noisy)  # fmt: skip
    # training noise: each device slices its share of the whole model's draw
    mn1, _ = train_RCForecaster(model(), U[:TRAIN], spinup=SPINUP, beta=1e-4, **noisy)
    mn4, _ = train_RCForecaster(
        orc.shard(model(), mesh), U[:TRAIN], spinup=SPINUP, beta=1e-4,
        return_states=False, **noisy,
    )  # fmt: skip
    # an entry point without a sharded program of its own: XLA partitions it
    fic1, fic4 = (m.forecast_from_IC(5, U[:60]) for m in (m1, m4))
    from orc._shard import _forecast_sharded, placement

    placed, axis = placement(m4)  # the mesh's devices, in automatic mode
    program = jax.jit(
        orc.capture_errors(
            lambda m, r: _forecast_sharded.__wrapped__(m, HLO_STEPS, r, placed, axis)
        )
    )
    (OUT / "hlo.txt").write_text(program.lower(m4, R4[-1]).compile().as_text())
    np.savez(
        OUT / "single.npz",
        wout1=m1.readout.wout, R1=R1, y1=y1, scale1=m1.readout.data_scale,
        wout4=m4.readout.wout, R4=R4, y4=y4, scale4=m4.readout.data_scale,
        y_one_device=yo, woutn1=mn1.readout.wout, woutn4=mn4.readout.wout,
        ens_wout1=e1.readout.wout, ens_wout4=e4.readout.wout, ens_R1=eR1, ens_R4=eR4,
        ens_y1=ey1, ens_y4=ey4, ens_noise1=en1.readout.wout, ens_noise4=en4.readout.wout, ens_spec=str(e4.readout.wout.sharding.spec), fic1=fic1, fic4=fic4, win=m4.embedding.win, values=m4.driver.wr.values,
        columns=m4.driver.wr.columns, bias=m4.driver.bias,
        shardings=np.array([sharding(a) for a in (
            m4.readout.wout, m4.driver.wr.values, m4.embedding.win,
            m4.driver.bias, R4, y4)]),
        pop1=population(), pop4=population(jax.make_mesh((4,), ("population",))),
        halo_periodic=np.stack(halo_drive(True)), halo_edges=np.stack(halo_drive(False)),
    )  # fmt: skip


def distributed() -> None:
    U = np.load(OUT / "data.npz")["U"]
    mesh = jax.make_mesh((4,), ("bank",))
    m, R, y = train_and_forecast(orc.shard(model(), mesh), U)
    pop = population(jax.make_mesh((4,), ("population",)))
    out = dict(wout=host(m.readout.wout), R=host(R), y=host(y), pop=pop,
               processes=jax.process_count(), devices=jax.device_count(),
               sharding=sharding(m.readout.wout))  # fmt: skip
    if jax.process_index() == 0:
        np.savez(OUT / "distributed.npz", **out)


if __name__ == "__main__":
    {"single": single, "distributed": distributed}[MODE]()
