"""Random sparse reservoir matrices.

A reservoir matrix ``W`` (``n x n``) has exactly ``k = max(1, round(density * n))``
non-zeros in every row, at distinct uniformly random columns, with standard
normal values, scaled to the requested spectral radius. Storing a fixed number
of entries per row (ELL layout: ``values`` and ``columns`` of shape ``(n, k)``)
makes ``W @ x`` a gather and a row sum with no index bookkeeping, and it maps
with ``vmap`` over a bank of reservoirs unchanged. Components hold a bank:
``(chunks, n, k)``, one matrix per reservoir, ``chunks == 1`` for a single one
(as ORC 0.4's ``BCOO`` of shape ``(chunks, n, n)``: :class:`ReservoirMatrix`
is also a ``BCOO``, whose buffers are views of the ELL layout).

ORC draws ``density * n**2`` positions over the whole matrix instead, so its row
counts vary (binomially); both give the same expected density and, after
normalisation, the same spectral radius. The fixed count also rules out empty
rows, whose nodes would only see their input.

The passes that run these matrices (the reservoir's runs and forecasts, on
each platform) are :mod:`orc._kernels`'.

Matrices are drawn on the host with numpy (see :mod:`orc._random`), or
given by the user (the drivers' ``from_matrices``): dense, ``scipy.sparse``
or ``BCOO`` matrices are brought to the same layout (:func:`given_entries`,
:func:`ell_from_entries`).
"""

from __future__ import annotations

import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse
from jaxtyping import Array, Float, Int

from ._kernels import ell_matvec
from ._validation import check_dtype, check_index_bounds, device_array
from .utils.numerics import spectral_radius_np

__all__ = [
    "ReservoirMatrix",
    "random_reservoir_matrices",
    "distinct_columns",
    "scaling_radius",
    "ell_from_entries",
    "given_array",
    "given_dtype",
    "given_entries",
    "given_dense",
    "acyclic_pattern",
]


class _BCOOModuleMeta(type(eqx.Module), type(jsparse.BCOO)):
    """Metaclass of a class that is both an Equinox module and a ``BCOO``
    (the two bases' metaclasses combined; Python asks for one that derives
    from both)."""


class ReservoirMatrix(eqx.Module, jsparse.BCOO, metaclass=_BCOOModuleMeta):
    """Square sparse matrices with a fixed number of entries per row (ELL).

    A driver's ``wr`` is a bank, one matrix per reservoir: ``values`` and
    ``columns`` of shape ``(chunks, n, k)`` (``chunks == 1`` for a single
    reservoir); indexing a bank (``wr[c]``) gives one matrix, ``(n, k)``.

    It is also a ``jax.experimental.sparse.BCOO``, ORC 0.4's type for ``wr``
    (``isinstance(wr, BCOO)`` holds), whose buffers are views of the ELL
    layout: :attr:`shape` ``(chunks, n, n)`` (``n_batch=1``), :attr:`data`
    ``(chunks, nse)``, :attr:`indices` ``(chunks, nse, 2)``, :attr:`nse`
    ``n * k``, neither sorted nor unique (zeros padding a short row repeat
    column 0, as BCOO's duplicates they add up). So BCOO's methods and the
    ``sparse.bcoo_*`` functions take it as they take ORC's: ``sparse.BCOO.
    todense(wr)`` is the dense ``(chunks, n, n)`` stack, ``sparse.bcoo_
    dot_general``, ``bcoo_slice``, ``sparse.todense``, ``x @ wr``, ``wr * 2``
    work, and those that make a new matrix return a plain ``BCOO``. Its own
    :meth:`todense`, ``wr @ x`` and :meth:`matvec` use the ELL layout, and as
    a pytree it is its two leaves ``values`` and ``columns`` (jit, vmap,
    grad and save/load see those). :meth:`to_bcoo` copies it into a plain
    ``BCOO``.

    Attributes
    ----------
    values : Array, shape ``(chunks, n, k)`` (or ``(n, k)`` for one matrix)
        Entries of each row.
    columns : Array (int32), same shape
        Column of each entry (distinct within a row, unless padded with zeros).
    """

    values: Float[Array, "*chunks n k"]
    columns: Int[Array, "*chunks n k"]

    def __check_init__(self):
        owner = "ReservoirMatrix"
        values, columns = self.values, self.columns
        if not hasattr(values, "dtype") or not hasattr(columns, "dtype"):
            raise TypeError(f"{owner}: values and columns must be arrays")
        if not jnp.issubdtype(values.dtype, jnp.floating):
            raise TypeError(f"{owner}: values must be floating, got {values.dtype}")
        if jnp.dtype(columns.dtype) != jnp.dtype(jnp.int32):
            raise TypeError(f"{owner}: columns must be int32, got {columns.dtype}")
        if values.ndim not in (2, 3) or tuple(columns.shape) != tuple(values.shape):
            raise ValueError(
                f"{owner}: values and columns must share one shape (chunks, n, k) or "
                f"(n, k), got {tuple(values.shape)} and {tuple(columns.shape)}"
            )
        n, k = values.shape[-2:]
        if not 1 <= k <= n:
            raise ValueError(
                f"{owner}: need 1 <= k <= n entries per row, got {k}, n={n}"
            )
        # a column outside [0, n) would be read out of bounds (native path) or
        # clamped (XLA's gather): refuse it wherever the matrix is made
        check_index_bounds(owner, "columns", columns, n)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(chunks, n, n)`` for a bank (as ORC's ``BCOO``), ``(n, n)`` for one matrix."""
        n = self.values.shape[-2]
        return tuple(self.values.shape[:-2]) + (n, n)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nse(self) -> int:
        """Stored entries per matrix, ``n * k`` (BCOO's name)."""
        return self.values.shape[-2] * self.values.shape[-1]

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def data(self) -> Array:
        """Stored entries, ``(chunks, nse)``, row by row (BCOO's ``data``)."""
        shape = self.values.shape[:-2] + (self.nse,)
        if isinstance(self.values, jax.core.ShapedArray):
            # JAX's abstract evaluation of ``sparse.todense`` rebuilds the
            # matrix from abstract leaves and reads the abstract ``data``
            return self.values.update(shape=shape)
        return self.values.reshape(shape)

    @property
    def indices(self) -> Array:
        """``(row, column)`` of each entry of :attr:`data`, ``(chunks, nse, 2)``
        in JAX's default integer type (BCOO's ``indices``)."""
        rows = jnp.broadcast_to(
            jnp.arange(self.values.shape[-2], dtype=int)[:, None], self.columns.shape
        )
        pairs = jnp.stack([rows, self.columns.astype(rows.dtype)], axis=-1)
        return pairs.reshape(self.values.shape[:-2] + (self.nse, 2))

    @property
    def indices_sorted(self) -> bool:
        """``False`` (BCOO's flag): rows come in order, but a row's columns
        do not."""
        return False

    @property
    def unique_indices(self) -> bool:
        """``False`` (BCOO's flag): zeros padding a short row repeat column 0."""
        return False

    @classmethod
    def from_bcoo(cls, matrix) -> ReservoirMatrix:
        """The bank of a ``BCOO`` of shape ``(chunks, n, n)`` (``n_batch=1``),
        e.g. ORC 0.4's ``wr``, in ELL layout (:func:`ell_from_entries`: ``k``
        is the largest row count, shorter rows are padded with zeros, each row
        keeps the order of its entries; duplicate entries are summed by
        ``todense`` as by BCOO's). Runs on the host."""
        data = np.asarray(matrix.data)
        idx = np.asarray(matrix.indices)
        if data.ndim != 2 or idx.shape != data.shape + (2,):
            raise ValueError(
                "ReservoirMatrix.from_bcoo: need a BCOO of shape (chunks, n, n) with "
                f"one batch dimension, got data {data.shape} and indices {idx.shape}"
            )
        entries = [(i[:, 0], i[:, 1], d) for d, i in zip(data, idx, strict=True)]
        values, columns = ell_from_entries(entries, matrix.shape[-1])
        return cls(jnp.asarray(values), jnp.asarray(columns))

    def __getitem__(self, chunk) -> ReservoirMatrix:
        """Matrix ``chunk`` of a bank."""
        if self.values.ndim != 3:
            raise TypeError(
                "ReservoirMatrix: only a bank (chunks, n, n) can be indexed"
            )
        return ReservoirMatrix(self.values[chunk], self.columns[chunk])

    def matvec(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        """``W @ x`` for one matrix (inside the per-reservoir update, which is
        mapped over the bank)."""
        return ell_matvec(self.values, self.columns, x)

    def __matmul__(self, x):
        """``W @ x`` with ``numpy.matmul``'s broadcasting: for a bank, ``x``
        of shape ``(n,)``, ``(n, m)`` or ``(chunks, n, m)``."""
        x = jnp.asarray(x)
        if self.values.ndim == 3:
            in_axes = (0, 0, 0 if x.ndim == 3 else None)
            return jax.vmap(_matmul_one, in_axes=in_axes)(self.values, self.columns, x)
        return _matmul_one(self.values, self.columns, x)

    def todense(self) -> Array:
        """The dense matrices, ``(chunks, n, n)`` (``(n, n)`` for one)."""
        if self.values.ndim == 3:
            return jax.vmap(_dense_one)(self.values, self.columns)
        return _dense_one(self.values, self.columns)

    def to_bcoo(self) -> jsparse.BCOO:
        """The same matrices as a plain ``jax.experimental.sparse.BCOO`` (the
        same buffers and flags, without the ELL layout)."""
        return jsparse.BCOO(
            (self.data, self.indices),
            shape=self.shape,
            indices_sorted=self.indices_sorted,
            unique_indices=self.unique_indices,
        )


def _matmul_one(values, columns, x):
    if x.ndim == 1:
        return ell_matvec(values, columns, x)
    return jax.vmap(lambda v: ell_matvec(values, columns, v), 1, 1)(x)


def _dense_one(values, columns):
    n = values.shape[-2]
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], columns.shape)
    return jnp.zeros((n, n), values.dtype).at[rows, columns].add(values)


def distinct_columns(
    rng: np.random.Generator, n_rows: int, n_cols: int, k: int
) -> np.ndarray:
    """``k`` distinct uniformly random columns in ``[0, n_cols)`` for each row.

    Floyd's sampling algorithm vectorised over rows: ``O(n_rows * k**2)`` work
    instead of sorting ``n_rows * n_cols`` random keys. Each row is a uniform
    ``k``-subset; the order within a row carries no meaning.
    """
    if not 0 < k <= n_cols:
        raise ValueError(f"distinct_columns: need 0 < k <= n_cols, got k={k}")
    cols = np.empty((n_rows, k), dtype=np.int32)
    for i in range(k):
        j = n_cols - k + i
        t = rng.integers(0, j + 1, size=n_rows)
        taken = (cols[:, :i] == t[:, None]).any(axis=1)
        cols[:, i] = np.where(taken, j, t)
    return cols


def nonzeros_per_row(n: int, density: float) -> int:
    return int(min(n, max(1, round(density * n))))


def scaling_radius(values, columns, use_sparse_eigs: bool = True) -> float:
    """The spectral radius one ELL matrix ``(n, k)`` is scaled by, on the host:
    an Arnoldi estimate when ``use_sparse_eigs`` (exact for ``n <= 200``),
    else the dense eigenvalues' largest modulus.

    The estimate's last bits depend on how BLAS splits Arnoldi's dot
    products and LAPACK's eigvals over threads (OPENBLAS_NUM_THREADS=1 and
    the default gave different matrices on an AMD EPYC); rounded to float32
    (relative 6e-8, below the estimate's own error of 1e-11 .. 1e-5 at
    n >= 1000), the same matrix is scaled to the same bits in every process.
    """
    method = "arnoldi" if use_sparse_eigs else "dense"
    return float(np.float32(spectral_radius_np(values, columns, method=method)))


def random_reservoir_matrices(
    rng: np.random.Generator,
    n: int,
    density: float,
    spectral_radius: float,
    dtype,
    *,
    chunks: int = 1,
    use_sparse_eigs: bool = True,
) -> ReservoirMatrix:
    """A bank of ``chunks`` matrices, each scaled to ``spectral_radius``
    (Arnoldi estimate when ``use_sparse_eigs``, else exact)."""
    k = nonzeros_per_row(n, density)
    vals, cols = [], []
    for _ in range(chunks):
        c = distinct_columns(rng, n, n, k)
        v = rng.standard_normal((n, k))
        rho = scaling_radius(v, c, use_sparse_eigs)
        if not rho > 0:
            raise ValueError(
                "reservoir matrix has spectral radius 0 (a nilpotent draw); use another "
                "seed or a higher density"
            )
        vals.append(v * (spectral_radius / rho))
        cols.append(c)
    return ReservoirMatrix(
        device_array(np.stack(vals), dtype), device_array(np.stack(cols), np.int32)
    )


# --------------------------------------------------------------------------- #
# Matrices given by the user (the components' ``from_matrices``)
# --------------------------------------------------------------------------- #


def ell_from_entries(entries, n: int, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """The ELL layout ``(values, columns)``, each ``(len(entries), n, k)``, of
    a bank of ``n x n`` matrices given by their stored entries.

    ``entries`` holds one ``(rows, columns, values)`` per matrix (1-D arrays
    of one length, any order). ``k`` is the largest row count (at least 1);
    shorter rows are padded with zeros, which add nothing to a product; each
    row keeps the order of its entries; a position stored twice stays two
    entries, which add up in every product. ``dtype`` defaults to the values'.
    Runs on the host.
    """
    rows = [np.asarray(r, np.intp) for r, _, _ in entries]
    for r in rows:
        if r.size and (r.min() < 0 or r.max() >= n):
            raise ValueError(f"ell_from_entries: a row index lies outside [0, {n})")
    counts = np.stack([np.bincount(r, minlength=n) for r in rows])
    k = max(int(counts.max()), 1)
    if dtype is None:
        dtype = np.result_type(*(np.asarray(v) for _, _, v in entries))
    values = np.zeros((len(entries), n, k), dtype)
    columns = np.zeros((len(entries), n, k), np.int32)
    for c, (r, (_, cols, vals)) in enumerate(zip(rows, entries, strict=True)):
        order = np.argsort(r, kind="stable")
        slot = np.arange(r.size) - np.repeat(
            np.concatenate([[0], np.cumsum(counts[c])[:-1]]), counts[c]
        )
        values[c, r[order], slot] = np.asarray(vals)[order]
        columns[c, r[order], slot] = np.asarray(cols)[order]
    return values, columns


def _refuse_traced(owner: str, name: str, x) -> None:
    """A ``TypeError`` naming ``name`` where ``x`` (any pytree) holds a
    traced value: given matrices are read on the host."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
        raise TypeError(
            f"{owner}: {name} must be a concrete array, got a traced value: given "
            "matrices are checked and converted on the host, so build the "
            "component outside jax.jit/vmap"
        )


def acyclic_pattern(values, columns) -> bool:
    """Whether the ELL matrix ``(n, k)`` is nilpotent by its pattern alone:
    the directed graph of its non-zero entries has no cycle (its nodes can be
    ordered so that the matrix is strictly triangular), so ``W^n = 0``
    whatever the values. Runs on the host."""
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    values, columns = np.asarray(values), np.asarray(columns)
    n = values.shape[0]
    stored = values.ravel() != 0
    rows = np.repeat(np.arange(n), values.shape[1])[stored]
    cols = columns.ravel()[stored]
    if np.any(rows == cols):
        return False
    graph = coo_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    return connected_components(graph, directed=True, connection="strong")[0] == n


def given_array(owner: str, name: str, x) -> np.ndarray:
    """``x`` (a NumPy or JAX array, a nested sequence, a number) as a NumPy
    array of real numbers, every one finite; the errors name ``name``."""
    _refuse_traced(owner, name, x)
    try:
        arr = np.asarray(x)
    except Exception as err:  # noqa: BLE001 - whatever numpy refuses
        raise TypeError(
            f"{owner}: {name} must be an array of real numbers ({err})"
        ) from err
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(
            f"{owner}: {name} must be real, got dtype {arr.dtype} (pass its real "
            "part if the imaginary part is zero)"
        )
    if not (
        jnp.issubdtype(arr.dtype, jnp.floating)
        or jnp.issubdtype(arr.dtype, jnp.integer)
        or arr.dtype == np.bool_
    ):
        raise TypeError(
            f"{owner}: {name} must hold real numbers, got dtype {arr.dtype}"
        )
    finite = np.isfinite(arr if arr.dtype.kind == "f" else arr.astype(np.float64))
    if not finite.all():
        raise ValueError(
            f"{owner}: {name} contains {int(finite.size - finite.sum())} NaN or "
            "inf entries; every entry must be finite"
        )
    return arr


def given_dtype(owner: str, dtype, *dtypes):
    """The dtype of a component built from given arrays of dtypes ``dtypes``.

    ``dtype`` when given; else float32 where every floating one of ``dtypes``
    is float32 (or narrower), float64 otherwise (also where none is
    floating: integers). Resolved as every constructor's ``dtype`` is
    (:func:`orc._validation.check_dtype`: float64 while JAX's x64 is off
    warns and gives float32).
    """
    if dtype is None:
        floats = [np.dtype(d) for d in dtypes if jnp.issubdtype(d, jnp.floating)]
        narrow = floats and all(d.itemsize <= 4 for d in floats)
        dtype = jnp.float32 if narrow else jnp.float64
    return check_dtype(dtype, owner)


def _sparse_kind(x) -> str | None:
    """``"scipy"``, ``"bcoo"`` or ``"ell"`` for the sparse matrix types a
    user may give, ``None`` for anything else. A scipy or BCOO matrix can
    only exist once its module is imported, so neither is imported here."""
    if isinstance(x, ReservoirMatrix):
        return "ell"
    scipy_sparse = sys.modules.get("scipy.sparse")
    if scipy_sparse is not None and scipy_sparse.issparse(x):
        return "scipy"
    jax_sparse = sys.modules.get("jax.experimental.sparse")
    if jax_sparse is not None and isinstance(x, jax_sparse.BCOO):
        return "bcoo"
    return None


def given_entries(owner: str, W, name: str = "W"):
    """``(entries, n, bank)`` of the square matrix, or bank of matrices, ``W``:
    the stored entries of each matrix (``(rows, columns, values)``, as
    :func:`ell_from_entries` takes them), its size ``n`` and whether ``W`` had
    a bank axis.

    ``W`` may be dense (a NumPy or JAX array or nested lists, ``(n, n)`` or
    ``(chunks, n, n)``: its non-zero entries are kept), a ``scipy.sparse``
    matrix or array ``(n, n)``, a ``jax.experimental.sparse.BCOO`` ``(n, n)``
    or ``(chunks, n, n)`` (entries outside the matrix, BCOO's padding, are
    dropped), a :class:`ReservoirMatrix` (kept entry for entry), or a list
    of ``(n, n)`` matrices of these kinds (a bank). Values must be real and
    finite.
    """
    _refuse_traced(owner, name, W)
    kind = _sparse_kind(W)
    if kind is None and isinstance(W, (list, tuple)) and any(map(_sparse_kind, W)):
        parts = [given_entries(owner, w, f"{name}[{i}]") for i, w in enumerate(W)]
        for i, (_, n_i, bank_i) in enumerate(parts):
            if bank_i or n_i != parts[0][1]:
                raise ValueError(
                    f"{owner}: a list {name} must hold matrices of one shape (N, N); "
                    f"{name}[{i}] differs from {name}[0]"
                )
        return [e for entries, _, _ in parts for e in entries], parts[0][1], True
    dense = given_array(owner, name, W) if kind is None else None
    shape = tuple(W.shape if dense is None else dense.shape)
    if len(shape) not in (2, 3) or shape[-1] != shape[-2] or 0 in shape:
        raise ValueError(
            f"{owner}: {name} must be a square matrix (N, N) or a bank of them "
            f"(chunks, N, N), got shape {shape}"
        )
    if kind == "scipy" and len(shape) != 2:
        raise ValueError(
            f"{owner}: a scipy.sparse {name} must be 2-D (N, N); give a bank as a "
            f"list of matrices, got shape {shape}"
        )
    n, bank = shape[-1], len(shape) == 3
    if kind == "ell":
        values = np.asarray(W.values).reshape((-1,) + W.values.shape[-2:])
        columns = np.asarray(W.columns).reshape(values.shape)
        rows = np.repeat(np.arange(n), values.shape[-1])
        mats = [
            (rows, c.ravel(), v.ravel()) for v, c in zip(values, columns, strict=True)
        ]
    elif kind == "scipy":
        coo = W.tocoo()
        mats = [(coo.row, coo.col, coo.data)]
    elif kind == "bcoo":
        if W.n_dense:
            from jax.experimental import sparse

            W = sparse.bcoo_update_layout(W, n_dense=0, on_inefficient=None)
        # one list of entries (nse, ndim): each batch's entries in their
        # order, led by the batch's position (padding keeps its indices
        # outside the matrix)
        nb = W.n_batch
        batch = tuple(shape[:nb])
        data = np.broadcast_to(np.asarray(W.data), batch + W.data.shape[nb:])
        idx = np.asarray(W.indices)
        idx = np.broadcast_to(idx, batch + idx.shape[nb:])
        where = np.moveaxis(np.indices(batch, dtype=idx.dtype), 0, -1)[..., None, :]
        where = np.broadcast_to(where, idx.shape[:-1] + (nb,))
        idx = np.concatenate([where, idx], axis=-1).reshape(-1, len(shape))
        data = data.reshape(-1)
        inside = np.all((idx >= 0) & (idx < np.asarray(shape)), axis=-1)
        chunk = idx[:, 0] if bank else np.zeros(len(idx), np.intp)
        mats = []
        for c in range(shape[0] if bank else 1):
            m = inside & (chunk == c)
            mats.append((idx[m, -2], idx[m, -1], data[m]))
    else:
        mats = []
        for m in dense.reshape((-1, n, n)):
            r, c = np.nonzero(m)
            mats.append((r, c, m[r, c]))
    if kind is not None:  # a dense W was checked whole
        for i, (_, _, v) in enumerate(mats):
            given_array(owner, f"{name}[{i}]" if bank else name, v)
    return mats, n, bank


def given_dense(owner: str, name: str, x) -> np.ndarray:
    """The dense matrix, or bank of matrices, ``x`` as :func:`given_array`
    checks it, where ``x`` may also be a ``scipy.sparse`` matrix or array, a
    ``jax.experimental.sparse.BCOO`` (duplicate entries summed), or a list of
    matrices some of which are sparse: sparse ones are made dense."""
    _refuse_traced(owner, name, x)

    def dense(m):
        kind = _sparse_kind(m)
        if kind == "ell":
            raise TypeError(
                f"{owner}: {name} must be a dense array, a scipy.sparse matrix or "
                "a BCOO, got a ReservoirMatrix (a reservoir's square W)"
            )
        if kind == "scipy":
            return m.toarray()
        return np.asarray(m.todense()) if kind == "bcoo" else m

    if isinstance(x, (list, tuple)) and any(map(_sparse_kind, x)):
        x = [dense(m) for m in x]
    return given_array(owner, name, dense(x))
