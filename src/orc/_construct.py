"""Reservoir construction as a pure JAX function of ``(key, n, density)``.

The host builder (:func:`orc._matrix.random_reservoir_matrices`) draws a bank
with numpy and cannot run under ``jax.jit``/``jax.vmap``. The functions here
build the same kind of bank in JAX alone (no callbacks), so that

* a population of models (many keys, many spectral radii) is built by one
  compiled program under ``jax.vmap``, and
* the build can run on the device next to the computation that uses it.

Same layout (ELL: ``values``/``columns`` of shape ``(chunks, n, k)`` with
``k = nonzeros_per_row(n, density)`` distinct uniform columns per row),
same distribution (standard normal values scaled to the requested spectral
radius), but a different random stream: for a given seed the matrices are not
bit-identical to the host builder's.

The public functions are ``jax.jit``-compiled with their size, density,
dtype and method arguments static (a direct call compiles once per
configuration, about 2 s on a CPU, then runs at the speed of the compiled
program); inside an outer ``jit`` or ``vmap`` they are inlined.

Nilpotent draws: every row holds ``k >= 1`` non-zeros, so the graph of the
matrix has a cycle and, for continuously distributed values, the spectral
radius is positive with probability one. A radius of zero (or NaN) can only
come from degenerate values; under ``jit`` it cannot raise a Python error
when the matrix is drawn, so it is reported with :func:`equinox.error_if`.

``jnp.linalg.eigvals`` (used for the small Hessenberg matrix of the Arnoldi
method and for the ``"dense"`` method) is implemented in JAX 0.10 on CPU
(LAPACK ``geev``) and on GPU (CUDA: cuSOLVER ``geev`` from cuSOLVER 11.7.1 on,
otherwise LAPACK on the host; ROCm: LAPACK on the host, or MAGMA if
configured), not on TPU.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from . import _errors, _strategy
from ._defaults import NUMERICS
from ._kernels import _gather_matvec
from ._matrix import _dense_one, nonzeros_per_row
from ._random import flat_draw
from ._validation import argument_array

__all__ = [
    "distinct_columns",
    "spectral_radius",
    "reservoir_bank",
    "unscaled_bank",
    "uniform_input_matrix",
]

_HIGHEST = jax.lax.Precision.HIGHEST

CONSTRUCTIONS = ("orc", "orc04", "jax")
#: ``construction`` of a driver whose matrices were given (``from_matrices``)
GIVEN = "given"


def check_construction(value, owner) -> str:
    """``construction``: ``"orc"`` (ours, drawn on the host), ``"orc04"``
    (ORC 0.4's exact draw) or ``"jax"`` (ours as a pure JAX function of a
    key, :mod:`orc._construct`: traceable, so models build under ``vmap``)."""
    if value not in CONSTRUCTIONS:
        raise ValueError(
            f"{owner}: construction must be one of {CONSTRUCTIONS}, got {value!r}"
        )
    return value


def _wide_float():
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


@functools.partial(jax.jit, static_argnames=("n_rows", "n_cols", "k"))
def distinct_columns(key, n_rows: int, n_cols: int, k: int) -> Int[Array, "n_rows k"]:
    """``k`` distinct uniformly random columns in ``[0, n_cols)`` for each row.

    Floyd's sampling algorithm vectorised over rows: step ``i`` draws ``t``
    uniform in ``[0, n_cols - k + i]`` and takes ``t``, or ``n_cols - k + i``
    if ``t`` is already taken. Each row is a uniform ``k``-subset; the order
    within a row carries no meaning. ``O(n_rows * k**2)`` comparisons, a
    ``lax.fori_loop`` over ``k`` (``n_rows``, ``n_cols``, ``k`` static; ``key``
    may be traced and mapped over).
    """
    n_rows, n_cols, k = int(n_rows), int(n_cols), int(k)
    if not 0 < k <= n_cols:
        raise ValueError(f"distinct_columns: need 0 < k <= n_cols, got k={k}")
    if n_cols > jnp.iinfo(jnp.int32).max:
        raise ValueError(f"distinct_columns: n_cols={n_cols} exceeds int32")
    top = jnp.arange(n_cols - k, n_cols, dtype=jnp.int32)  # j of each step
    draws = flat_draw(
        jax.random.randint, key, (n_rows, k), minval=0, maxval=top + 1, dtype=jnp.int32
    )

    def step(i, cols):
        t = draws[:, i]
        # unfilled slots hold -1, which no draw equals
        taken = jnp.any(cols == t[:, None], axis=1)
        return cols.at[:, i].set(jnp.where(taken, top[i], t))

    cols = jnp.full((n_rows, k), -1, jnp.int32)
    return jax.lax.fori_loop(0, k, step, cols)


def _block_ends(m: int, blocks: int) -> list[int]:
    """Static split of the ``m`` Arnoldi steps into ``blocks`` ranges; the
    steps of a range orthogonalise against the rows of the basis filled by
    its end only (about ``(1 + 1/blocks) / 2`` of the work of using all
    ``m + 1`` rows in every step)."""
    blocks = max(1, min(blocks, m))
    return [round(m * (b + 1) / blocks) for b in range(blocks)]


def _arnoldi(matvec, v0, m: int, *, blocks: int = 4):
    """``m`` Arnoldi steps from ``v0`` with classical Gram-Schmidt applied
    twice (CGS2), in static shapes.

    Returns the ``(m, m)`` upper Hessenberg ``H = Q^T A Q``. On breakdown (an
    invariant subspace, residual below ``eps**0.75`` of the largest ``|A q|``
    so far) the next basis vector is zero, and so is every later step: ``H``
    is then the exact restriction of ``A`` to the subspace found, padded
    with zeros, with no division by zero.
    """
    dtype = v0.dtype
    n = v0.shape[0]
    tol = float(jnp.finfo(dtype).eps) ** 0.75
    Q = jnp.zeros((m + 1, n), dtype)
    norm0 = jnp.linalg.norm(v0)
    Q = Q.at[0].set(jnp.where(norm0 > 0, v0 / jnp.where(norm0 > 0, norm0, 1), 0))
    Ht = jnp.zeros((m, m + 1), dtype)  # row j: column j of H
    scale = jnp.zeros((), dtype)
    start = 0
    for end in _block_ends(m, blocks):
        rows = end  # steps start..end-1 use q_0 .. q_{end-1} at most

        def body(j, state, rows=rows):
            Q, Ht, scale = state
            basis = Q[:rows]
            w = matvec(Q[j])
            scale = jnp.maximum(scale, jnp.linalg.norm(w))
            h = jnp.dot(basis, w, precision=_HIGHEST)
            w = w - jnp.dot(h, basis, precision=_HIGHEST)
            h2 = jnp.dot(basis, w, precision=_HIGHEST)
            w = w - jnp.dot(h2, basis, precision=_HIGHEST)
            beta = jnp.linalg.norm(w)
            ok = beta > tol * scale
            q = jnp.where(ok, w / jnp.where(ok, beta, 1), 0)
            col = jnp.zeros((m + 1,), dtype).at[:rows].set(h + h2)
            col = col.at[j + 1].set(jnp.where(ok, beta, 0))
            return Q.at[j + 1].set(q), Ht.at[j].set(col), scale

        Q, Ht, scale = jax.lax.fori_loop(start, end, body, (Q, Ht, scale))
        start = end
    return Ht[:, :m].T


@functools.partial(jax.jit, static_argnames=("method", "krylov_dim"))
def spectral_radius(
    values: Float[Array, "n k"],
    columns: Int[Array, "n k"],
    *,
    method: str = NUMERICS.radius_method,
    krylov_dim: int = 200,
    key=None,
) -> Float[Array, ""]:
    """Spectral radius of one ELL matrix (``W[i, columns[i, j]] += values[i, j]``).

    Pure JAX: ``jit``- and ``vmap``-able, in ``values``' dtype.

    ``method="dense"``: the largest ``|eigvals|`` of the dense ``(n, n)``
    matrix (``O(n**3)``; fine up to ``n ~ 1000`` on a CPU).

    ``method="arnoldi"``: the largest modulus of the Ritz values of an
    Arnoldi iteration of ``m = min(krylov_dim, n)`` steps (CGS2, static
    shapes, ``O(m**2 n)``) from a standard normal start vector drawn from
    ``key`` (default ``jax.random.key(0)``). For ``n <= krylov_dim`` the Krylov
    space is the whole cyclic subspace of the start vector and the result is
    exact up to rounding. Measured relative errors for reservoir matrices
    (density 0.02, float64) with ``krylov_dim=200``: ~1e-14 at n = 400,
    1e-11..1e-8 at n = 1000, 1e-7..1e-5 at n = 2000, 6e-5..4e-4 at n = 8000
    (as :func:`orc.utils.numerics.spectral_radius_np`, the host estimate of
    the same size). The error falls fast with the Krylov dimension: with
    ``krylov_dim=400``, ~1e-14 at n = 2000 (0.40 s instead of 0.14 s on two
    CPU cores) and ~2e-6 at n = 8000 (1.4-2.7 s instead of 0.5 s).
    Explicitly restarting with a polynomial filter of the unwanted Ritz values
    was tried and found erratic (sometimes worse than no restart).

    Note that rounding makes the Ritz values of a nilpotent matrix with long
    Jordan chains small but not zero (``eps**(1/length)``): only an exact
    invariant zero (e.g. all values zero) gives 0 here, whereas the
    ``"dense"`` method (LAPACK balances, which isolates a permuted triangular
    matrix) returns an exact 0 for structurally nilpotent matrices.

    ``eigvals`` runs on CPU and GPU, not TPU (see the module docstring).
    """
    values = jnp.asarray(values)
    columns = jnp.asarray(columns)
    if values.ndim != 2 or columns.shape != values.shape:
        raise ValueError(
            "spectral_radius: need values and columns of one shape (n, k), got "
            f"{values.shape} and {columns.shape}"
        )
    if not jnp.issubdtype(values.dtype, jnp.floating):
        values = values.astype(_wide_float())
    n = values.shape[0]
    if method == "dense":
        eigs = jnp.linalg.eigvals(_dense_one(values, columns))
        return jnp.max(jnp.abs(eigs)).astype(values.dtype)
    if method != "arnoldi":
        raise ValueError(
            f"spectral_radius: method must be 'arnoldi' or 'dense', got {method!r}"
        )
    m = min(int(krylov_dim), n)
    if m < 1:
        raise ValueError(f"spectral_radius: krylov_dim must be >= 1, got {krylov_dim}")
    if key is None:
        key = jax.random.key(0)
    v0 = jax.random.normal(key, (n,), values.dtype)
    # blocks cut the orthogonalisation work by up to ~2x where it dominates
    # (n = 8000: 0.47 s instead of 0.69 s), at ~0.3 s more compilation each
    blocks = 1 if m * n < 400_000 else 4
    H = _arnoldi(
        functools.partial(_gather_matvec, values, columns), v0, m, blocks=blocks
    )
    return _max_modulus(H).astype(values.dtype)


def _max_modulus_host(h: Array) -> Array:
    """The largest eigenvalue modulus of each ``(m, m)`` matrix of ``h``, by
    numpy's LAPACK ``geev`` on the host, in one call for the whole stack."""

    def host(a):
        a = np.asarray(a)
        return np.max(np.abs(np.linalg.eigvals(a)), axis=-1).astype(a.dtype)

    shape = jax.ShapeDtypeStruct(h.shape[:-2], h.dtype)
    return jax.pure_callback(host, shape, h, vmap_method="expand_dims")


def _max_modulus(h: Array) -> Array:
    """``max |eigvals(h)|`` of the small Arnoldi matrix: XLA's ``eigvals``
    (LAPACK) on CPU; elsewhere numpy on the host. cuSOLVER's ``geev`` takes
    ~65 ms for one 200 x 200 matrix on an H100 and runs one matrix at a time
    under ``vmap``, so it was most of a GPU build (N = 2000: 0.09 s alone,
    4.2 s for 64 reservoirs); the matrix is 320 kB, its copy to the host
    costs microseconds."""
    return _strategy.on_platform(
        h,
        cpu=lambda a: jnp.max(jnp.abs(jnp.linalg.eigvals(a))),
        default=_max_modulus_host,
    )


_radius = spectral_radius


NILPOTENT = (
    "reservoir matrix has spectral radius 0 (a nilpotent draw), so it cannot "
    "be scaled to the requested spectral radius; use another seed or a "
    "higher density"
)


def _scale_to_radius(values, rho, target):
    """``(values * (target / rho), bad)``: ``bad`` where ``rho`` is not a
    positive finite number (a nilpotent matrix cannot be scaled; its values
    are then returned unscaled, and the caller raises :data:`NILPOTENT`)."""
    wide = rho.dtype
    bad = ~(rho > 0) | ~jnp.isfinite(rho)
    factor = jnp.asarray(target, wide) / jnp.where(bad, jnp.ones((), wide), rho)
    return (values.astype(wide) * factor).astype(values.dtype), jnp.any(bad)


def _chunk_keys(key, chunks: int):
    """Per chunk: keys of the columns, the values and the Arnoldi start vector."""
    return jax.vmap(lambda k: jax.random.split(k, 3))(jax.random.split(key, chunks))


def _check_sizes(n, chunks, owner):
    n, chunks = int(n), int(chunks)
    if n < 1 or chunks < 1:
        raise ValueError(f"{owner}: need n >= 1 and chunks >= 1, got {n}, {chunks}")
    return n, chunks


@functools.partial(jax.jit, static_argnames=("n", "density", "chunks", "dtype"))
def unscaled_bank(
    key, n: int, density: float, *, chunks: int = 1, dtype=jnp.float64
) -> tuple[Float[Array, "chunks n k"], Int[Array, "chunks n k"]]:
    """The draw of :func:`reservoir_bank` before scaling: per chunk, ``k =
    nonzeros_per_row(n, density)`` distinct uniform columns per row and
    standard normal values in ``dtype``; ``(values, columns)``, ``(chunks, n,
    k)`` each. :func:`reservoir_bank` with the same ``key`` returns these
    values times one factor per chunk (and the same columns)."""
    n, chunks = _check_sizes(n, chunks, "unscaled_bank")
    k = nonzeros_per_row(n, density)
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    keys = _chunk_keys(key, chunks)
    columns = jax.vmap(lambda kk: distinct_columns(kk, n, n, k))(keys[:, 0])
    values = jax.vmap(lambda kk: flat_draw(jax.random.normal, kk, (n, k), dtype))(
        keys[:, 1]
    )
    return values, columns


@functools.partial(
    jax.jit, static_argnames=("n", "density", "chunks", "dtype", "method")
)
def reservoir_bank(
    key,
    n: int,
    density: float,
    spectral_radius,
    *,
    chunks: int = 1,
    dtype=jnp.float64,
    method: str = NUMERICS.radius_method,
) -> tuple[Float[Array, "chunks n k"], Int[Array, "chunks n k"]]:
    """A bank of ``chunks`` random sparse reservoir matrices, in JAX.

    Each chunk has its own key (from ``jax.random.split(key, chunks)``), ``k
    = nonzeros_per_row(n, density)`` distinct uniform columns per row
    (:func:`distinct_columns`) and standard normal values in ``dtype`` (the
    draw is :func:`unscaled_bank`), scaled so that its spectral radius
    (computed by :func:`spectral_radius` with ``method``, in float64 when x64
    is on) equals ``spectral_radius``.

    ``n``, ``density``, ``chunks``, ``dtype`` and ``method`` are static (give
    them as ``static_argnames`` to ``jax.jit``); ``key`` and
    ``spectral_radius`` (a scalar) are data and may be traced, so both can be
    mapped over with ``jax.vmap``. A radius-zero draw (impossible with
    probability one, see the module docstring) raises through
    :func:`equinox.error_if`.

    Returns ``(values, columns)``, ``(chunks, n, k)`` each, ``columns`` int32:
    the fields of :class:`orc._matrix.ReservoirMatrix`. Not the host builder's
    random stream (same distribution).
    """
    values, columns, bad = _bank(
        key, n, density, spectral_radius, chunks, dtype, method
    )
    return eqx.error_if(values, bad, NILPOTENT), columns


def _bank(key, n, density, spectral_radius, chunks, dtype, method):
    """:func:`reservoir_bank`'s computation: ``(values, columns, bad)``,
    ``bad`` whether a chunk could not be scaled (the caller reports it: as
    :func:`equinox.error_if` under a user's ``jit``, as a result code of
    the program in orc's constructors, :func:`built_bank`)."""
    n, chunks = _check_sizes(n, chunks, "reservoir_bank")
    if method not in ("arnoldi", "dense"):
        raise ValueError(
            f"reservoir_bank: method must be 'arnoldi' or 'dense', got {method!r}"
        )
    if jnp.ndim(spectral_radius) != 0:
        raise ValueError(
            "reservoir_bank: spectral_radius must be a scalar (vmap over a batch), "
            f"got shape {jnp.shape(spectral_radius)}"
        )
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    values, columns = unscaled_bank(key, n, density, chunks=chunks, dtype=dtype)
    wide = _wide_float() if jnp.finfo(dtype).bits <= 64 else dtype
    rho = jax.vmap(lambda v, c, kk: _radius(v.astype(wide), c, method=method, key=kk))(
        values, columns, _chunk_keys(key, chunks)[:, 2]
    )
    values, bad = _scale_to_radius(values, rho[:, None, None], spectral_radius)
    return values, columns, bad


def built_bank(key, n, density, spectral_radius, *, chunks, dtype, method):
    """:func:`reservoir_bank` as orc's constructors build it (``construction=
    "jax"``): one compiled entry point whose check is a result code of the
    program, raised when it returns (:mod:`orc._errors`), not a host
    callback, so that the program can be kept in JAX's persistent
    compilation cache (the command line's). The radius is an argument of the
    program, as in :func:`reservoir_bank`, not part of its identity."""
    radius = argument_array(spectral_radius, _wide_float())
    return _built_bank(key, n, density, radius, chunks, dtype, method)


@_strategy.compiled
def _built_bank(key, n, density, spectral_radius, chunks, dtype, method):
    values, columns, bad = _bank(
        key, n, density, spectral_radius, chunks, dtype, method
    )
    return _errors.check(values, bad, NILPOTENT), columns


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def uniform_input_matrix(key, shape, scale, dtype=jnp.float64) -> Array:
    """Entries uniform in ``[-scale, scale]`` (the input matrices'
    distribution), ``scale`` possibly traced."""
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    u = flat_draw(jax.random.uniform, key, shape, dtype, -1.0, 1.0)
    return u * jnp.asarray(scale, dtype)
