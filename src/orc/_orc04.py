"""ORC 0.4's random construction, reproduced bit for bit in pure JAX.

ORC 0.4 (PyPI ``openreservoircomputing==0.4.0``) draws every random matrix with
``jax.random``; this library draws its own differently (numpy, a fixed count of
non-zeros per row). The functions here give, for the same ``seed``, exactly the
arrays ORC 0.4 builds, so that a notebook written for ORC 0.4 can be reproduced
number for number:

* :func:`orc04_reservoir`: the ``wr`` of ``ParallelESNDriver`` / ``ESNDriver``
  (and of ``ParallelTaylorDriver`` / ``TaylorDriver``, built the same way), a
  :class:`~jax.experimental.sparse.BCOO` of shape ``(chunks, res_dim, res_dim)``
  with ORC's ``data`` and ``indices`` in ORC's order;
* :func:`orc04_embedding` and :func:`orc04_ensemble_embedding`: the ``win`` of
  ``LinearEmbedding`` / ``ParallelLinearEmbedding`` and of
  ``EnsembleLinearEmbedding``;
* :func:`orc04_model_seeds` and :func:`orc04_components`: the seeds ORC's model
  classes hand to their components, and the resulting ``wr``, ``win``, ``wout``.

Recipe (ORC 0.4 on jax 0.10.2, the version of ORC's environment and ours):

1. Component keys. A component given ``seed`` uses
   ``jax.random.key(seed)`` (threefry2x32; for ``0 <= seed < 2**32`` the key
   data is ``[0, seed]``). A model given ``seed`` splits
   ``jax.random.PRNGKey(seed)`` into three keys, in the order driver, readout,
   embedding, and passes the *first 32-bit word* of each as the component's
   integer seed (``key_driver[0]``, ...).
2. Reservoir. ``_, wr_key = split(key)``; then ``sparse.random_bcoo`` with
   ``shape=(chunks, res_dim, res_dim)``, ``n_batch=1``, ``nse=density``,
   ``generator=jax.random.normal``: ``nse = ceil(density * res_dim**2)``
   (Python float arithmetic); ``keys = split(wr_key, chunks + 1)``; the values
   are ``normal(keys[0], (chunks, nse), dtype)``; for chunk ``c`` the flat
   positions are the first ``nse`` entries of ``permutation(keys[c + 1],
   res_dim**2)`` (jax's sort-based shuffle: ``ceil(3 ln n / ln(2**32 - 1))``
   rounds, each ``key, sub = split(key)`` then a stable sort of the values by
   ``bits(sub, (n,), uint32)``), unravelled to ``(row, col)`` = ``(p //
   res_dim, p % res_dim)``, indices in the default int dtype. No sorting, so
   ``indices_sorted`` and ``unique_indices`` are both ``False``.
3. Spectral radius. For ``res_dim < 100`` ORC always switches to the dense
   solver. Dense: ``max |eigvals(todense(wr[c]))|`` (LAPACK ``geev``). Sparse
   (``res_dim >= 100`` and ``use_sparse_eigs``): a *fixed* 200 Arnoldi steps
   per chunk (not capped at ``res_dim``), vmapped over the chunks, with modified
   Gram-Schmidt run as a masked sweep over all 201 basis columns, start vector
   ``normal(PRNGKey(0), (res_dim,))`` in the default float dtype (float64 under
   x64 even for a float32 reservoir, normalised, then cast), the sparse
   ``A @ q`` of BCOO, and the modulus of the eigenvalue of largest modulus of
   the 200 x 200 Hessenberg matrix. With ``eigenval_batch_size`` the chunks
   go through in consecutive batches of ``min(eigenval_batch_size, chunks)``.
   Finally ``data[c] * (spectral_radius / radius[c])``.
4. Input matrices. ``uniform(key(seed), (chunks, res_dim, in_dim // chunks +
   2 * locality), dtype, -scaling, scaling)`` (``LinearEmbedding``: ``chunks
   = 1``, ``locality = 0``); ``EnsembleLinearEmbedding``: shape ``(chunks,
   res_dim, in_dim)``. ORC's models never pass their ``dtype`` to the
   embedding or readout, so a model's ``win`` and ``wout`` are always in the
   default float dtype (float64 under x64), whatever the model ``dtype``.

Every function gives the same bits eagerly, under ``jax.jit`` and under
``jax.vmap`` over seeds (layouts are compiled once each). Optimisation barriers
stand where ORC runs separate eager operations: XLA would otherwise rewrite
across them (``x / sqrt(y)`` into ``x * rsqrt(y)``), changing last bits.

The draws force ``jax_threefry_partitionable=True`` (the default of jax 0.5 and
later, so of ORC's environment) and name the threefry2x32 implementation, so a
caller's other settings of these flags do not change the result. Bit-for-bit
equality holds on the CPU backend, on which the fixtures of the tests were
made; the random values themselves are backend independent up to the
floating-point evaluation of ``erf_inv`` (normal draws), and the eigen-solvers
(LAPACK on CPU, other libraries elsewhere) and the Arnoldi reductions may round
differently on other backends.
"""

from __future__ import annotations

import functools
import math
import operator

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse

from ._defaults import ESN
from ._random import flat_draw

__all__ = [
    "ORC04_MODELS",
    "orc04_nse",
    "orc04_random_bcoo",
    "orc04_max_eig_arnoldi",
    "orc04_spectral_radii",
    "orc04_normalize",
    "orc04_reservoir",
    "orc04_embedding",
    "orc04_ensemble_embedding",
    "orc04_model_seeds",
    "orc04_components",
]

_PRNG_IMPL = "threefry2x32"
_ARNOLDI_STEPS = 200  # ORC's max_iters default, never capped at res_dim
_ARNOLDI_START_SEED = 0
_DENSE_BELOW = 100  # ORC switches to the dense eigen-solver for res_dim < 100
_SHUFFLE_EXPONENT = 3  # jax's heuristic for the number of sort rounds


# --------------------------------------------------------------------------- keys


def _barrier(x):
    """Stop XLA from rewriting across this value (e.g. ``a / sqrt(b)`` into
    ``a * rsqrt(b)``): it marks the places where ORC 0.4 runs separate eager
    operations, so that the result is the same inside or outside ``jax.jit``."""
    return jax.lax.optimization_barrier(x)


def _partitionable():
    """Context forcing ORC's environment's threefry bit layout (jax >= 0.5)."""
    return jax.threefry_partitionable(True)


def _key(seed):
    """``jax.random.key(seed)`` with the threefry2x32 implementation.

    ``seed`` may already be a typed key, which is returned as is.
    """
    if isinstance(seed, jax.Array) and jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
        return seed
    return jax.random.key(seed, impl=_PRNG_IMPL)


def orc04_model_seeds(seed) -> dict[str, jax.Array]:
    """The integer seeds ORC 0.4's models give their components.

    ``ESNForecaster``, ``CESNForecaster``, ``EnsembleESNForecaster``,
    ``ESNClassifier`` and ``ESNController`` split ``PRNGKey(seed)`` in three
    (driver, readout, embedding) and pass the first ``uint32`` word of each
    sub-key as that component's ``seed``. Works under ``jax.jit``/``vmap``.

    Returns
    -------
    dict
        ``{"driver": uint32[], "readout": uint32[], "embedding": uint32[]}``.
    """
    words = _split_words(_key(seed))
    return {"driver": words[0], "readout": words[1], "embedding": words[2]}


@jax.jit
def _split_words(key):
    with _partitionable():
        return jax.random.key_data(jax.random.split(key, 3))[:, 0]


# ----------------------------------------------------------------------- wr draw


def orc04_nse(res_dim: int, density: float | int) -> int:
    """Stored elements per chunk: ``random_bcoo``'s reading of ``nse=density``.

    A float strictly between 0 and 1 is a fraction of ``res_dim**2``, rounded
    up (Python float arithmetic, as jax does); an int is a count.
    """
    size = res_dim * res_dim
    if not 0 <= density < size:
        raise ValueError(f"density/nse must be in [0, {size}), got {density}")
    if 0 < density < 1:
        density = int(math.ceil(density * size))
    if isinstance(density, float):
        raise ValueError(
            "a float density must be strictly between 0 and 1 (ORC 0.4 fails on it)"
        )
    return operator.index(density)


def _first_of_permutation(key, n: int, count: int, index_dtype) -> jax.Array:
    """The first ``count`` entries of ``jax.random.permutation(key, n)``.

    jax shuffles ``arange(n)`` by stable sorts on fresh random 32-bit keys,
    ``ceil(3 ln n / ln(2**32 - 1))`` rounds of them.
    """
    # numpy float64, as jax computes it
    rounds = int(
        np.ceil(_SHUFFLE_EXPONENT * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max))
    )
    order = jnp.arange(n, dtype=jnp.asarray(0).dtype)  # jnp.arange(n)'s dtype
    for _ in range(rounds):
        key, sub = jax.random.split(key)
        sort_keys = jax.random.bits(sub, (n,), jnp.uint32)
        _, order = jax.lax.sort_key_val(sort_keys, order, 0, is_stable=True)
    return order[:count].astype(index_dtype)


def orc04_random_bcoo(
    key, chunks: int, res_dim: int, density: float, dtype=jnp.float64
) -> sparse.BCOO:
    """The un-normalised reservoirs: ORC's ``sparse.random_bcoo`` call, ported.

    Same result as ``jax.experimental.sparse.random_bcoo(key, (chunks, res_dim,
    res_dim), n_batch=1, nse=density, dtype=dtype, generator=jax.random.normal)``
    in jax 0.10.2 (ORC's environment), written out with ``jax.random``'s
    ``split``/``normal``/``bits`` and a stable sort, so that a later change to
    ``random_bcoo``, ``choice`` or ``permutation`` cannot change it. ``key``
    is the reservoir key (ORC's ``wr_key``), a typed key or an int seed.
    """
    nse = orc04_nse(res_dim, density)
    n = res_dim * res_dim
    index_dtype = jnp.asarray(0).dtype  # jax's default int dtype
    with _partitionable():
        keys = jax.random.split(_key(key), chunks + 1)
        values = _barrier(flat_draw(jax.random.normal, keys[0], (chunks, nse), dtype))
        flat = jax.vmap(lambda k: _first_of_permutation(k, n, nse, index_dtype))(
            keys[1:]
        )
    rows, cols = jnp.divmod(flat, jnp.asarray(res_dim, index_dtype))
    indices = jnp.stack([rows, cols], axis=-1)
    return sparse.BCOO(
        (values, indices),
        shape=(chunks, res_dim, res_dim),
        indices_sorted=False,
        unique_indices=False,
    )


# ------------------------------------------------------------- spectral radius


@functools.partial(jax.jit, static_argnames=("n_steps", "start_seed"))
def orc04_max_eig_arnoldi(
    mat, n_steps: int = _ARNOLDI_STEPS, start_seed: int = _ARNOLDI_START_SEED
):
    """ORC 0.4's Arnoldi estimate of the eigenvalue of largest modulus.

    ``mat`` is one square matrix (a 2-D BCOO or a dense array). Exactly
    ``n_steps`` Arnoldi steps are taken, even past ``mat.shape[0]`` (ORC does
    not cap them); each step orthogonalises ``mat @ q_k`` against all basis
    columns by modified Gram-Schmidt, as a masked sweep over the
    ``n_steps + 1`` columns. The start vector is ``normal(PRNGKey(start_seed),
    (m,))`` in the default float dtype, normalised and then cast to
    ``mat.dtype``. Returns the complex eigenvalue of largest modulus of the
    ``n_steps x n_steps`` Hessenberg matrix.

    Compiled as one unit, as ORC's jitted ``max_eig_arnoldi`` is: XLA's
    rewrites inside it (``v / norm(v)`` becomes a multiplication by a
    reciprocal square root) are part of ORC's numbers.
    """
    m = mat.shape[0]
    dtype = mat.dtype
    width = n_steps + 1
    with _partitionable():
        start = jax.random.normal(
            jax.random.key(start_seed, impl=_PRNG_IMPL), (m,), jnp.asarray(0.0).dtype
        )
    start = start / jnp.linalg.norm(start)
    basis0 = jnp.zeros((m, width), dtype).at[:, 0].set(start.astype(dtype))
    hess0 = jnp.zeros((width, n_steps), dtype)
    positions = jnp.arange(width)
    zero = jnp.zeros((), dtype)

    def step(state, k):
        mat_, basis, hess = state
        active = positions <= k

        def project(inner, j):
            vec, basis_, active_ = inner
            q = basis_[:, j]
            coef = jnp.where(active_[j], jnp.dot(q, vec), zero)
            vec = jnp.where(active_[j], vec - coef * q, vec)
            return (vec, basis_, active_), coef

        (vec, _, _), coefs = jax.lax.scan(
            project, (mat_ @ basis[:, k], basis, active), positions
        )
        size = jnp.linalg.norm(vec)
        column = jnp.where(active, coefs, hess[:, k]).at[k + 1].set(size)
        hess = hess.at[:, k].set(column)
        basis = basis.at[:, k + 1].set(vec / size)
        return (mat_, basis, hess), None

    (_, _, hess), _ = jax.lax.scan(step, (mat, basis0, hess0), jnp.arange(n_steps))
    eigs = jnp.linalg.eigvals(hess[:n_steps, :n_steps])
    return eigs[jnp.argmax(jnp.abs(eigs))]


def orc04_spectral_radii(
    wr: sparse.BCOO,
    *,
    use_sparse_eigs: bool = True,
    eigenval_batch_size: int | None = None,
) -> jax.Array:
    """Per-chunk spectral radius as ORC 0.4 measures it (no dense switch here).

    ``use_sparse_eigs``: Arnoldi (:func:`orc04_max_eig_arnoldi`, vmapped over
    the chunks); otherwise the largest ``|eigvals|`` of the dense chunks.
    ``eigenval_batch_size``: chunks in consecutive batches of that many.
    """
    chunks = wr.shape[0]

    def radii(part: sparse.BCOO) -> jax.Array:
        if use_sparse_eigs:
            return _barrier(jnp.abs(_barrier(jax.vmap(orc04_max_eig_arnoldi)(part))))
        dense = _barrier(sparse.bcoo_todense(part))
        return _barrier(jnp.max(jnp.abs(jnp.linalg.eigvals(dense)), axis=1))

    if eigenval_batch_size is None:
        return radii(wr)
    size = min(eigenval_batch_size, chunks)
    parts = [
        radii(
            sparse.BCOO(
                (wr.data[lo : lo + size], wr.indices[lo : lo + size]),
                shape=(min(lo + size, chunks) - lo, *wr.shape[1:]),
                indices_sorted=wr.indices_sorted,
                unique_indices=wr.unique_indices,
            )
        )
        for lo in range(0, chunks, size)
    ]
    return jnp.concatenate(parts, axis=0)


def orc04_normalize(
    wr: sparse.BCOO,
    spectral_radius,
    *,
    use_sparse_eigs: bool = True,
    eigenval_batch_size: int | None = None,
) -> sparse.BCOO:
    """Scale each chunk to ``spectral_radius``: ``data * (rho / radius)``.

    Applies ORC's switch to the dense eigen-solver for ``res_dim < 100``.
    """
    if wr.shape[-1] < _DENSE_BELOW:
        use_sparse_eigs = False
    radius = orc04_spectral_radii(
        wr, use_sparse_eigs=use_sparse_eigs, eigenval_batch_size=eigenval_batch_size
    )
    if isinstance(spectral_radius, (int, float)):
        factor = spectral_radius / radius  # weak Python scalar, as in ORC
    else:
        factor = jnp.asarray(spectral_radius, radius.dtype) / radius
    return sparse.BCOO(
        (_barrier(wr.data) * _barrier(factor)[:, None], wr.indices),
        shape=wr.shape,
        indices_sorted=wr.indices_sorted,
        unique_indices=wr.unique_indices,
    )


def orc04_reservoir(
    seed,
    res_dim: int,
    density: float = ESN.Wr_density,
    spectral_radius: float = ESN.Wr_spectral_radius,
    chunks: int = ESN.chunks,
    dtype=jnp.float64,
    *,
    use_sparse_eigs: bool = True,
    eigenval_batch_size: int | None = None,
) -> sparse.BCOO:
    """ORC 0.4's ``wr`` for a ``ParallelESNDriver``/``ParallelTaylorDriver``.

    ``ESNDriver``/``TaylorDriver`` are ``chunks=1``. Defaults are ORC's driver
    defaults. ``seed`` is the driver's ``seed`` (an int, or an integer array,
    possibly traced: the function is pure and works under ``jax.jit`` with the
    other arguments static, and under ``jax.vmap`` over seeds). Integer seeds
    should be non-negative: a traced negative int32 seed is keyed differently
    from the same Python int (jax's own rule).

    Returns
    -------
    BCOO
        Shape ``(chunks, res_dim, res_dim)``, ``n_batch=1``, ``data`` of shape
        ``(chunks, nse)`` and ``indices`` of shape ``(chunks, nse, 2)`` as ORC
        stores them (``nse = ceil(density * res_dim**2)``).
    """
    if not isinstance(res_dim, int):
        raise TypeError("res_dim must be an int")
    if isinstance(spectral_radius, (int, float)) and spectral_radius <= 0:
        raise ValueError("spectral_radius must be positive")
    if not 0 <= density <= 1:
        raise ValueError("density must satisfy 0 <= density <= 1")
    return _reservoir(
        _key(seed),
        spectral_radius,
        res_dim=res_dim,
        density=density,
        chunks=chunks,
        dtype=jnp.dtype(dtype),
        use_sparse_eigs=bool(use_sparse_eigs),
        eigenval_batch_size=eigenval_batch_size,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "res_dim",
        "density",
        "chunks",
        "dtype",
        "use_sparse_eigs",
        "eigenval_batch_size",
    ),
)
def _reservoir(
    key,
    spectral_radius,
    *,
    res_dim,
    density,
    chunks,
    dtype,
    use_sparse_eigs,
    eigenval_batch_size,
):
    """Compiled once per layout: a key (not an int seed) keeps one signature
    for all seed dtypes. Inlined when called inside the caller's own jit."""
    with _partitionable():
        _, wr_key = jax.random.split(key)
    wr = orc04_random_bcoo(wr_key, chunks, res_dim, density, dtype)
    return orc04_normalize(
        wr,
        spectral_radius,
        use_sparse_eigs=use_sparse_eigs,
        eigenval_batch_size=eigenval_batch_size,
    )


# ------------------------------------------------------------------------ win


def orc04_uniform(seed, shape, scaling, dtype) -> jax.Array:
    """ORC 0.4's draw of an input matrix: ``uniform(key(seed), shape, dtype,
    -scaling, scaling)`` (what :func:`orc04_embedding` and
    :func:`orc04_ensemble_embedding` return for their shapes)."""
    return _uniform(seed, shape, scaling, dtype)


def _uniform(seed, shape, scaling, dtype) -> jax.Array:
    return _uniform_key(_key(seed), scaling, shape=tuple(shape), dtype=jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _uniform_key(key, scaling, *, shape, dtype) -> jax.Array:
    with _partitionable():
        return flat_draw(
            jax.random.uniform, key, shape, dtype, minval=-scaling, maxval=scaling
        )


def orc04_embedding(
    seed,
    in_dim: int,
    res_dim: int,
    scaling: float,
    dtype=jnp.float64,
    chunks: int = ESN.chunks,
    locality: int = ESN.locality,
) -> jax.Array:
    """ORC 0.4's ``win`` of ``ParallelLinearEmbedding`` (``LinearEmbedding``:
    ``chunks=1, locality=0``).

    Shape ``(chunks, res_dim, in_dim // chunks + 2 * locality)``, uniform in
    ``[-scaling, scaling)`` from ``jax.random.key(seed)``. Pure in ``seed``.
    """
    if in_dim % chunks:
        raise ValueError(f"chunks {chunks} must evenly divide in_dim {in_dim}")
    width = int(in_dim / chunks) + 2 * locality
    return _uniform(seed, (chunks, res_dim, width), scaling, dtype)


def orc04_ensemble_embedding(
    seed,
    in_dim: int,
    res_dim: int,
    scaling: float,
    chunks: int = ESN.ensemble_chunks,
    dtype=jnp.float64,
) -> jax.Array:
    """ORC 0.4's ``win`` of ``EnsembleLinearEmbedding``: ``(chunks, res_dim,
    in_dim)``, uniform in ``[-scaling, scaling)`` from ``jax.random.key(seed)``."""
    return _uniform(seed, (chunks, res_dim, in_dim), scaling, dtype)


# ---------------------------------------------------------------------- models


# model name -> its positional constructor arguments
ORC04_MODELS: dict[str, tuple[str, ...]] = {
    "ESNForecaster": ("data_dim", "res_dim"),
    "CESNForecaster": ("data_dim", "res_dim"),
    "EnsembleESNForecaster": ("data_dim", "res_dim"),
    "ESNClassifier": ("data_dim", "n_classes", "res_dim"),
    "ESNController": ("data_dim", "control_dim", "res_dim"),
}

# hyper-parameters each model accepts that do not affect wr/win/wout
_INERT = {
    "ESNForecaster": {"leak_rate", "bias", "quadratic", "periodic"},
    "CESNForecaster": {
        "time_const",
        "bias",
        "quadratic",
        "periodic",
        "solver",
        "stepsize_controller",
        "adjoint",
        "max_steps",
    },
    "EnsembleESNForecaster": {"leak_rate", "bias"},
    "ESNClassifier": {"leak_rate", "bias", "quadratic", "state_repr"},
    "ESNController": {
        "leak_rate",
        "bias",
        "quadratic",
        "alpha_1",
        "alpha_2",
        "alpha_3",
    },
}
_SHARED = {
    "embedding_scaling",
    "Wr_density",
    "Wr_spectral_radius",
    "dtype",
    "use_sparse_eigs",
}
_CHUNKED = {
    "ESNForecaster": {"chunks", "locality"},
    "CESNForecaster": {"chunks", "locality"},
    "EnsembleESNForecaster": {"chunks"},
    "ESNClassifier": set(),
    "ESNController": set(),
}


def orc04_components(model_name: str, *args, seed=ESN.seed, **hyperparameters) -> dict:
    """ORC 0.4's random matrices for a whole model, from the model's ``seed``.

    ``model_name`` is one of ``ESNForecaster``, ``CESNForecaster``,
    ``EnsembleESNForecaster``, ``ESNClassifier``, ``ESNController``;
    ``args``/``hyperparameters`` are that class's constructor arguments (the
    positional ones, :data:`ORC04_MODELS`, may be given either way). Arguments
    that do not shape the matrices (leak, bias, solver, ...) are accepted and
    ignored.

    Returns
    -------
    dict
        ``wr``: BCOO ``(chunks, res_dim, res_dim)`` in the model ``dtype``;
        ``win``: ``(chunks, res_dim, in_dim // chunks + 2 * locality)`` (or
        ``(chunks, res_dim, data_dim)`` for the ensemble) in the default float
        dtype; ``wout``: ORC's zero readout, ``(chunks, out_dim // chunks,
        res_dim)`` (ensemble: ``(chunks, out_dim, res_dim)``), default float
        dtype; ``seeds``: :func:`orc04_model_seeds`.
    """
    if model_name not in ORC04_MODELS:
        raise ValueError(
            f"unknown ORC 0.4 model {model_name!r}; expected one of "
            f"{sorted(ORC04_MODELS)}"
        )
    names = ORC04_MODELS[model_name]
    if len(args) > len(names):
        raise TypeError(f"{model_name} takes at most {len(names)} positional args")
    hyper = dict(hyperparameters)
    for name, value in zip(names[: len(args)], args, strict=True):
        if name in hyper:
            raise TypeError(f"{model_name}: {name} given twice")
        hyper[name] = value
    missing = [n for n in names if n not in hyper]
    if missing:
        raise TypeError(f"{model_name}: missing {missing}")
    allowed = set(names) | _SHARED | _INERT[model_name] | _CHUNKED[model_name]
    unknown = sorted(set(hyper) - allowed)
    if unknown:
        raise TypeError(f"{model_name}: unexpected arguments {unknown}")

    data_dim, res_dim = hyper["data_dim"], hyper["res_dim"]
    chunks = hyper.get("chunks", ESN.chunks)
    locality = hyper.get("locality", ESN.locality)
    scaling = hyper.get("embedding_scaling", ESN.embedding_scaling)
    dtype = hyper.get("dtype", jnp.float64)
    default_float = jnp.asarray(0.0).dtype  # what ORC's models leave to defaults

    if model_name == "ESNClassifier":
        in_dim, out_dim = data_dim, hyper["n_classes"]
    elif model_name == "ESNController":
        in_dim, out_dim = data_dim + hyper["control_dim"], data_dim
    else:
        in_dim, out_dim = data_dim, data_dim

    seeds = orc04_model_seeds(seed)
    wr = orc04_reservoir(
        seeds["driver"],
        res_dim,
        density=hyper.get("Wr_density", ESN.Wr_density),
        spectral_radius=hyper.get("Wr_spectral_radius", ESN.Wr_spectral_radius),
        chunks=chunks,
        dtype=dtype,
        use_sparse_eigs=hyper.get("use_sparse_eigs", ESN.use_sparse_eigs),
    )
    if model_name == "EnsembleESNForecaster":
        win = orc04_ensemble_embedding(
            seeds["embedding"], in_dim, res_dim, scaling, chunks, default_float
        )
        wout = jnp.zeros((chunks, out_dim, res_dim), default_float)
    else:
        win = orc04_embedding(
            seeds["embedding"],
            in_dim,
            res_dim,
            scaling,
            default_float,
            chunks,
            locality,
        )
        wout = jnp.zeros((chunks, int(out_dim / chunks), res_dim), default_float)
    return {"wr": wr, "win": win, "wout": wout, "seeds": seeds}
