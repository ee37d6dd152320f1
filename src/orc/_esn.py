"""The embedding, driver and readout of the ESN models, built in one place.

Every ESN model (forecasters, classifier, controller) is this pipeline with a
layout: ``"single"`` (one reservoir, shown without the bank axis), ``"parallel"`` (local
patches of the input, one reservoir each) or ``"ensemble"`` (every reservoir
sees the whole input, outputs averaged). Hyperparameters are checked under the
names the models expose; the models hand their arguments on here as they
are, and what a model does not take has its default from :mod:`orc._defaults`.
"""

from __future__ import annotations

import equinox as eqx
import jax

from ._construct import check_construction
from ._defaults import ESN
from ._random import prng_key, spawn
from ._validation import (
    check_dtype,
    check_esn_arguments,
    check_float,
    check_int,
    default_float_dtype,
)
from .drivers import DeepESNDriver, ESNDriver, ParallelESNDriver
from .embeddings import (
    EnsembleLinearEmbedding,
    LinearEmbedding,
    ParallelLinearEmbedding,
)
from .readouts import (
    EnsembleLinearReadout,
    LinearReadout,
    ParallelLinearReadout,
    ParallelQuadraticReadout,
    QuadraticReadout,
)

__all__ = ["esn_components"]


def _as_orc04_model(embedding, construction: str, seed, scaling):
    """The embedding as an ORC 0.4 *model* holds it, for ``construction=
    "orc04"``: ORC's models never pass their dtype to the embedding, so its
    ``win`` is drawn in the default float dtype whatever the model's (float64
    under x64), where orc's components draw in their own dtype as ORC's
    components do. A float32 model's ``win`` is thus ORC's float64 draw
    rounded to float32 (drawn in float32 it would be other numbers)."""
    drawn = default_float_dtype()
    if construction != "orc04" or embedding.dtype == drawn:
        return embedding
    from ._orc04 import orc04_uniform

    draw = orc04_uniform(seed, embedding.win.shape, float(scaling), drawn)
    return eqx.tree_at(lambda e: e.win, embedding, draw.astype(embedding.dtype))


def esn_components(
    owner: str,
    *,
    layout: str,
    in_dim: int,
    out_dim: int,
    res_dim: int,
    embedding_scaling,
    Wr_density,
    Wr_spectral_radius,
    bias,
    dtype,
    seed,
    use_sparse_eigs: bool = ESN.use_sparse_eigs,
    leak_rate=ESN.leak_rate,
    mode: str = ESN.mode,
    time_const=ESN.time_const,
    chunks: int = ESN.chunks,
    locality: int = ESN.locality,
    periodic: bool = ESN.periodic,
    quadratic: bool = ESN.quadratic,
    n_layers: int | None = None,
    coupling_scaling=ESN.coupling_scaling,
    construction: str = ESN.construction,
):
    """``(embedding, driver, readout, dtype)`` of an ESN model.

    ``n_layers`` (an int, single layout, discrete mode) stacks that many
    reservoirs (:class:`orc.drivers.DeepESNDriver`, also for one layer, so a
    deep model keeps one driver type); the readout reads all layers.
    ``None`` (the default) builds the plain drivers.
    """
    check_int("in_dim", in_dim, owner, minimum=1)
    check_int("out_dim", out_dim, owner, minimum=1)
    check_esn_arguments(
        owner,
        res_dim=res_dim,
        Wr_density=Wr_density,
        Wr_spectral_radius=Wr_spectral_radius,
        embedding_scaling=embedding_scaling,
        bias=bias,
        leak_rate=leak_rate if mode == "discrete" else None,
        time_const=time_const if mode == "continuous" else None,
    )
    dtype = check_dtype(dtype, owner)
    check_construction(construction, owner)
    if construction == "orc04":
        # ORC 0.4's models hand their components the first word of each of
        # three keys split from PRNGKey(seed) (orc._orc04.orc04_model_seeds)
        from ._orc04 import orc04_model_seeds

        seeds = orc04_model_seeds(seed)
        k_driver, k_embed = seeds["driver"], seeds["embedding"]
    elif construction == "jax":  # keys split in JAX: seed may be traced
        k_driver, _, k_embed = jax.random.split(prng_key(seed, owner), 3)
    else:
        k_driver, _, k_embed = spawn(seed, 3, owner)
    driver_args = dict(
        res_dim=res_dim,
        leak=leak_rate,
        spectral_radius=Wr_spectral_radius,
        density=Wr_density,
        bias=bias,
        dtype=dtype,
        mode=mode,
        time_const=time_const,
        seed=k_driver,
        use_sparse_eigs=use_sparse_eigs,
        construction=construction,
    )
    deep = n_layers is not None
    if deep:
        n_layers = check_int("n_layers", n_layers, owner, minimum=1)
        if layout != "single" or mode != "discrete":
            raise ValueError(
                f"{owner}: n_layers needs a single discrete-time reservoir stack"
            )
    if layout == "single":
        embedding = LinearEmbedding(
            in_dim,
            res_dim,
            embedding_scaling,
            dtype,
            seed=k_embed,
            construction=construction,
        )
        if deep:
            check_float("coupling_scaling", coupling_scaling, owner)
            if construction != "orc":
                raise ValueError(
                    f"{owner}: deep (n_layers) reservoirs are built with "
                    f"construction='orc' only, got {construction!r}"
                )
            del driver_args["mode"], driver_args["time_const"]
            del driver_args["construction"]
            driver = DeepESNDriver(
                n_layers=n_layers, coupling_scaling=coupling_scaling, **driver_args
            )
        else:
            driver = ESNDriver(**driver_args)
        readout_cls = QuadraticReadout if quadratic else LinearReadout
        embedding = _as_orc04_model(embedding, construction, k_embed, embedding_scaling)
        return embedding, driver, readout_cls(out_dim, driver.res_dim, dtype), dtype
    chunks = check_int("chunks", chunks, owner, minimum=1)
    driver = ParallelESNDriver(chunks=chunks, **driver_args)
    if layout == "ensemble":
        embedding = EnsembleLinearEmbedding(
            in_dim,
            res_dim,
            embedding_scaling,
            chunks,
            dtype,
            seed=k_embed,
            construction=construction,
        )
        readout = EnsembleLinearReadout(out_dim, res_dim, chunks, dtype)
        embedding = _as_orc04_model(embedding, construction, k_embed, embedding_scaling)
        return embedding, driver, readout, dtype
    if layout != "parallel":
        raise ValueError(f"{owner}: unknown layout {layout!r}")
    if in_dim % chunks:
        raise ValueError(
            f"{owner}: chunks ({chunks}) must evenly divide data_dim ({in_dim})"
        )
    embedding = ParallelLinearEmbedding(
        in_dim,
        res_dim,
        embedding_scaling,
        dtype,
        chunks=chunks,
        locality=locality,
        periodic=periodic,
        seed=k_embed,
        construction=construction,
    )
    readout_cls = ParallelQuadraticReadout if quadratic else ParallelLinearReadout
    embedding = _as_orc04_model(embedding, construction, k_embed, embedding_scaling)
    return embedding, driver, readout_cls(out_dim, res_dim, chunks, dtype), dtype
