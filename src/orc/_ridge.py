"""The ridge-regression engine every ``train_*`` function runs on.

Training a readout means solving, for each chunk ``c``,

    W_c = argmin ||F_c W_c^T - Y_c||^2 + beta ||W_c||^2
        = (F_c^T F_c + beta I)^{-1} F_c^T Y_c   (transposed),

where ``F_c`` are the regression features (``prepare_train`` of the reservoir
states) and ``Y_c`` the targets. Only the sufficient statistics
``G = F^T F`` and ``B = F^T Y`` are needed, so they are accumulated over time
blocks: the transformed features never exist for the whole sequence at once,
and sequences (several trajectories, or data arriving later) simply add their
statistics. The solve is a Cholesky factorisation, with a fallback when the
factorisation fails, i.e. when ``G + beta I`` is not numerically positive
definite: on CPU a symmetric eigen-decomposition (the minimum-norm
solution); on a GPU or other device the Cholesky solution of
``G + (beta + delta) I`` with the smallest tried shift ``delta`` that
factorises (:func:`_shifted_solve`: an eigen-solver there reserves its large
workspace in every training program, taken or not). On CPU
both the Gram update and the factorisation run in place in one buffer (BLAS
``syrk`` and LAPACK ``potrf`` through :mod:`orc._native`), so a fit holds one
``F x F`` matrix.

Shapes: features ``(rows, F)`` and targets ``(rows, O)`` without chunks, or
``(rows, C, F)`` and ``(rows, C, O)`` with ``C`` chunks; the weights are
``(O, F)`` or ``(C, O, F)``.

Precision: a fit keeps float64 accuracy whatever the model's dtype. Features
in float64 accumulate ``G`` and ``B`` as above. Lower-precision features
(float32 models) accumulate in float64 when JAX's x64 is on (each block is
cast; the weights come back in the model's dtype). With x64 off no float64
array exists, and the normal equations in float32 fail (``cond(G)`` of a
reservoir far exceeds ``1/eps``: a float32 Lorenz63 ESN at N=1000 forecast
0.8 Lyapunov times instead of 11.4), so those statistics are kept in QR form
instead ("TSQR"): ``gram`` holds the triangular factor ``R`` of the rows seen
(``F^T F = R^T R``) and ``cross`` holds ``Q^T Y``, each block folded in by a
QR of ``[[R, Q^T Y], [F_b, Y_b]]``, and the solve is a QR of
``[[R, Q^T Y], [sqrt(beta) I, 0]]`` and a triangular solve: the error grows
with ``cond(F)``, not its square (that ESN: 10.3 Lyapunov times; float64
statistics of the same float32 states: 10.9). ``RidgeStats.form`` says which.

Every solve path (native kernel, XLA on CPU or elsewhere, the intercept
variant, chunks) reports how it went as a :class:`RESULTS` item:
:func:`solve_with_result` returns it and raises nothing, :func:`solve` raises
for ``nonfinite``/``failed`` and warns (:class:`IllConditionedRidgeWarning`)
for ``fallback``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _errors, _native, _strategy

__all__ = [
    "RidgeStats",
    "stats_update",
    "symmetric",
    "sequence_stats",
    "solve",
    "solve_with_result",
    "fit_nrmse",
    "RESULTS",
    "IllConditionedRidgeWarning",
    "DEFAULT_BLOCK",
    "STATS_GROUP",
    "GRAM_KERNEL_MIN_FEATURES",
    "SOLVE_PANEL",
]

DEFAULT_BLOCK = 2048

#: Rows per group of the ridge statistics on CPU. :func:`stats_update` folds
#: rows ``start:stop`` into the sums in consecutive groups of this many rows
#: counted from ``start`` (the last one may be shorter): each group's
#: products are computed whole, by a call whose sums do not depend on the
#: number of threads, and added to the sums in order. So the statistics are
#: the same bits on any number of CPUs, and a range split at multiples of
#: ``STATS_GROUP`` from its start gives the same bits as the range in one
#: call (the two state modes of a training fold the same groups,
#: :func:`orc._training.teacher_forced_stats`). It is the native Gram
#: kernel's block of steps (``kGramKc`` in ``gram.h``, which groups a
#: call's rows so itself); XLA's products take a group in parts of
#: :data:`XLA_PRODUCT_ROWS`.
STATS_GROUP = 256

#: The most rows one XLA product of the CPU's grouped update contracts: XLA's
#: CPU products split no contraction this short over threads, so they sum in
#: the same order on one thread or many. Measured on 1 and 2 CPUs: with jax
#: 0.10.2 up to 320 rows (384 already split); with jax 0.12.0 (which Python
#: 3.12 gets) up to 192 rows for 64 to 2003 features, while 256 rows split
#: from ~100 features on.
XLA_PRODUCT_ROWS = 128

#: From this many features on, the native statistics update and the fused
#: training fit (``esn_fit``) use orc's own Gram kernel, which groups the rows
#: by ``STATS_GROUP`` itself (``kGramMinFeatures`` in ``gram.h``). Below
#: it they call BLAS over whatever rows they are given (the fused fit in
#: blocks of 512 rows and two column panels), so :func:`stats_update` calls
#: the native update once per group there, and a training does not take the
#: fused fit.
GRAM_KERNEL_MIN_FEATURES = 64

#: Panel width of the Cholesky factorisation and the triangular solves of the
#: XLA solve on CPU (:func:`_cholesky_panels`, :func:`_cho_solve_panels`):
#: LAPACK's ``potrf`` and ``trsm`` in OpenBLAS split their sums by their
#: thread count from 128 rows on (measured: 96 not), while a factorisation
#: of a 64 x 64 block, a triangular solve with a 64 x 64 factor and products
#: over 64 terms (also with an output of a few columns, which Eigen splits
#: over the contraction from 128 terms on) give the same bits on one thread
#: or many.
SOLVE_PANEL = 64


class RESULTS(eqx.Enumeration):
    """How a ridge solve went (returned by :func:`solve_with_result`).

    ``successful``: Cholesky solve of ``G + beta I``. ``fallback``: the
    factorisation failed and the minimum-norm solution was used (a warning,
    :class:`IllConditionedRidgeWarning`, from :func:`solve`). ``nonfinite``:
    the statistics contain NaN/inf. ``failed``: the linear algebra gave no
    finite solution. The last two are errors in :func:`solve`. Over chunks the
    most severe wins: ``nonfinite`` > ``failed`` > ``fallback`` >
    ``successful``.
    """

    successful = ""
    fallback = (
        "ridge regression: the Cholesky factorisation of G + beta I failed, i.e. the "
        "regression features are numerically collinear for this ridge strength "
        "beta; the minimum-norm (pseudo-inverse) solution was used instead (on a "
        "CPU; on a GPU or other device the Cholesky solution with beta raised by "
        "the smallest shift that factorises, see orc._ridge._shifted_solve). For a "
        "well-posed fit use a larger ridge parameter `beta`, or fewer or less "
        "correlated features (e.g. a smaller reservoir or a feature map without "
        "redundant terms), or train in float64."
    )
    failed = (
        "ridge regression: the linear-algebra routine failed: neither the Cholesky "
        "factorisation of G + beta I nor the minimum-norm eigen-solve produced "
        "finite readout weights (the statistics may be too large for the "
        "floating-point type); no non-finite readout weights were produced."
    )
    nonfinite = (
        "ridge regression: the reservoir features or targets contain NaN/inf (check "
        "the training data and hyperparameters such as the spectral radius or input "
        "scaling, which can make the reservoir diverge); no non-finite readout "
        "weights were produced."
    )


class IllConditionedRidgeWarning(UserWarning):
    """:func:`solve` fell back to the minimum-norm solution because
    ``G + beta I`` was not numerically positive definite (collinear features
    for the ridge strength); the message names the remedy."""


# Internal codes, ordered by severity so that chunks combine with ``max``. The
# solvers themselves report the native kernel's per-problem status (0
# Cholesky, 1 fallback, -1 non-finite input, -2 failure); ``_severity`` maps it.
_SUCCESSFUL, _FALLBACK, _FAILED, _NONFINITE = 0, 1, 2, 3


def _severity(status: Array) -> Array:
    return jnp.where(
        status == -1, _NONFINITE, jnp.where(status == -2, _FAILED, status)
    ).astype(jnp.int32)


def _as_result(code: Array) -> RESULTS:
    """The :class:`RESULTS` item of a (scalar) severity code."""
    result = RESULTS.where(code == _FALLBACK, RESULTS.fallback, RESULTS.successful)
    result = RESULTS.where(code == _FAILED, RESULTS.failed, result)
    return RESULTS.where(code == _NONFINITE, RESULTS.nonfinite, result)


class RidgeStats(eqx.Module):
    """Sufficient statistics of a ridge regression.

    Attributes
    ----------
    gram : ``(F, F)`` or ``(C, F, F)``, the sum of ``f f^T`` over rows; only
        its upper triangle is kept up to date (:func:`symmetric` completes it).
    cross : ``(F, O)`` or ``(C, F, O)``, the sum of ``f y^T`` over rows.
    count : scalar, number of rows accumulated.
    """

    gram: Array
    cross: Array
    count: Array
    # "gram": gram/cross are F^T F and F^T Y; "qr": they are R and Q^T Y of
    # the rows seen (float32 features with x64 off, see the module docs).
    form: str = eqx.field(static=True, default="gram")
    # dtype of the weights solve() returns (the features'); None: gram's
    weights_dtype: object = eqx.field(static=True, default=None)

    @staticmethod
    def zeros(n_features: int, n_out: int, chunks: int | None, dtype) -> RidgeStats:
        """Empty statistics for features of ``dtype``, held in the precision
        and form :func:`accumulation` chooses for it."""
        lead = () if chunks is None else (chunks,)
        acc, form = accumulation(dtype)
        return RidgeStats(
            jnp.zeros(lead + (n_features, n_features), acc),
            jnp.zeros(lead + (n_features, n_out), acc),
            jnp.zeros((), acc),
            form=form,
            weights_dtype=jnp.dtype(dtype),
        )

    def __add__(self, other: RidgeStats) -> RidgeStats:
        if self.form != other.form:
            raise ValueError(
                f"RidgeStats: cannot add statistics in {self.form!r} form to "
                f"statistics in {other.form!r} form"
            )
        if self.form == "gram":
            return jax.tree.map(jnp.add, self, other)
        r, z = _fold_qr(self.gram, self.cross, other.gram, other.cross)
        return RidgeStats(
            r, z, self.count + other.count, form="qr", weights_dtype=self.weights_dtype
        )


def accumulation(dtype) -> tuple[np.dtype, str]:
    """Dtype and form (``"gram"`` or ``"qr"``) of the statistics of a fit
    whose features are ``dtype``: float64 normal equations for float64
    features, and for lower precisions when x64 is on; float32 QR form when
    x64 is off (see the module docs)."""
    dtype = jnp.dtype(dtype)
    if jnp.finfo(dtype).bits >= 64:
        return dtype, "gram"
    if jax.config.jax_enable_x64:
        return jnp.dtype(jnp.float64), "gram"
    return jnp.dtype(jnp.float32), "qr"


def _fold_qr(r: Array, z: Array, x: Array, y: Array) -> tuple[Array, Array]:
    """The triangular factor and ``Q^T Y`` of the rows behind ``(r, z)``
    followed by the rows ``x ([...,] rows, F)``, ``y ([...,] rows, O)``: the
    top of the R factor of ``[[r, z], [x, y]]`` (batched over leading axes)."""
    f = r.shape[-1]
    stacked = jnp.concatenate(
        [jnp.concatenate([r, z], -1), jnp.concatenate([x, y], -1)], -2
    )
    with _strategy.full_precision():  # the products of qr's derivative rule
        top = jnp.linalg.qr(stacked, mode="r")[..., :f, :]
    return top[..., :f], top[..., f:]


def _gram_xla(x: Array) -> Array:
    return jnp.einsum("...tf,...tg->...fg", x, x, precision="highest")


def _rows(a: Array, start: int, stop: int) -> Array:
    """Rows ``start:stop`` of the leading (time) axis, moved behind the chunk
    axis when there is one: ``(T, [C,] D) -> ([C,] rows, D)``."""
    a = a[start:stop]
    return jnp.moveaxis(a, 1, 0) if a.ndim == 3 else a


def _stats_update_xla(g, c, x, y, start, stop):
    """The update as two XLA products over all the rows (off CPU)."""
    xs, ys = _rows(x, start, stop), _rows(y, start, stop)
    return g + _gram_xla(xs), c + jnp.einsum(
        "...tf,...to->...fo", xs, ys, precision="highest"
    )


def _over_groups(update, carry, start: int, stop: int):
    """``update(carry, offset, size)`` over rows ``start:stop`` in groups of
    ``STATS_GROUP`` rows counted from ``start``, in order (the groups of
    equal size in one loop)."""
    n_full, tail = divmod(stop - start, STATS_GROUP)
    if n_full == 1:
        carry = update(carry, start, STATS_GROUP)
    elif n_full > 1:
        carry = jax.lax.fori_loop(
            0,
            n_full,
            lambda i, cr: update(cr, start + i * STATS_GROUP, STATS_GROUP),
            carry,
        )
    if tail:
        carry = update(carry, start + n_full * STATS_GROUP, tail)
    return carry


def _stats_update_grouped(g, c, x, y, start, stop):
    """The update by XLA on CPU, group by group (see ``STATS_GROUP``): each
    group's Gram and cross products are the Gram of the rows ``[X | Y]`` (a
    product with a small output dimension, such as ``X^T Y`` alone, is split
    over the contraction by Eigen's threads), in parts of at most
    ``XLA_PRODUCT_ROWS`` rows."""
    f = x.shape[-1]

    def group(gc, offset, size):
        xs = jax.lax.dynamic_slice_in_dim(x, offset, size, axis=0)
        ys = jax.lax.dynamic_slice_in_dim(y, offset, size, axis=0)
        z = jnp.concatenate([xs, ys], axis=-1)
        if z.ndim == 3:  # (rows, C, F + O) -> (C, rows, F + O)
            z = jnp.moveaxis(z, 1, 0)
        # the group's parts, summed in order (see XLA_PRODUCT_ROWS)
        parts = range(0, size, XLA_PRODUCT_ROWS)
        d = functools.reduce(
            operator.add,
            (_gram_xla(z[..., i : i + XLA_PRODUCT_ROWS, :]) for i in parts),
        )
        return gc[0] + d[..., :f, :f], gc[1] + d[..., :f, f:]

    return _over_groups(group, (g, c), start, stop)


def _stats_update_native(g, c, x, y, start, stop, target):
    """The same update as one XLA FFI call into orc's Gram kernel or SciPy's
    BLAS (see :mod:`orc._native`): no hand-over to Python, no copies of the
    rows, and the results alias ``g`` and ``c``. The Gram kernel (from
    ``GRAM_KERNEL_MIN_FEATURES`` features on) groups the rows by
    ``STATS_GROUP`` itself; below it each group of rows is one call."""
    call = jax.ffi.ffi_call(
        target,
        (
            jax.ShapeDtypeStruct(g.shape, g.dtype),
            jax.ShapeDtypeStruct(c.shape, c.dtype),
        ),
        vmap_method="broadcast_all",
        input_output_aliases={0: 0, 1: 1},
    )
    chunked = np.int64(x.ndim == 3)
    if x.shape[-1] >= GRAM_KERNEL_MIN_FEATURES:
        return call(
            g, c, x, y, start=np.int64(start), stop=np.int64(stop), chunked=chunked
        )

    def group(gc, offset, size):
        xs = jax.lax.dynamic_slice_in_dim(x, offset, size, axis=0)
        ys = jax.lax.dynamic_slice_in_dim(y, offset, size, axis=0)
        return call(
            *gc, xs, ys, start=np.int64(0), stop=np.int64(size), chunked=chunked
        )

    return _over_groups(group, (g, c), start, stop)


@functools.partial(jax.custom_jvp, nondiff_argnums=(4, 5, 6))
def _stats_update_cpu(g, c, x, y, start, stop, native):
    # backend "xla" (native False): XLA's products; "native": the FFI kernel,
    # or XLA's products where the kernels could not be built. (SciPy's BLAS
    # through a host callback, the earlier stand-in, summed in another order
    # on two threads than on one: OpenBLAS 0.3.30 on an AVX-512 Zen 4.) The
    # backend is an argument, never read here: a trace of this function
    # cached under one backend must not serve the other.
    target = _native.stats_update_target(g.dtype) if native else None
    if target is not None and x.dtype == y.dtype == g.dtype == c.dtype:
        return _stats_update_native(g, c, x, y, start, stop, target)
    return _stats_update_grouped(g, c, x, y, start, stop)


@_stats_update_cpu.defjvp
def _stats_update_cpu_jvp(start, stop, native, primals, tangents):
    (g, c, x, y), (dg, dc, dx, dy) = primals, tangents
    xs, ys = _rows(x, start, stop), _rows(y, start, stop)
    dxs, dys = _rows(dx, start, stop), _rows(dy, start, stop)
    d = jnp.einsum("...tf,...tg->...fg", dxs, xs, precision="highest")
    dcross = jnp.einsum(
        "...tf,...to->...fo", dxs, ys, precision="highest"
    ) + jnp.einsum("...tf,...to->...fo", xs, dys, precision="highest")
    return _stats_update_cpu(g, c, x, y, start, stop, native), (
        dg + d + jnp.swapaxes(d, -1, -2),
        dc + dcross,
    )


def stats_update(
    stats: RidgeStats,
    feats: Array,
    targets: Array,
    start: int = 0,
    stop: int | None = None,
) -> RidgeStats:
    """Add rows ``start:stop`` (static) of ``feats (T, [C,] F)`` and
    ``targets (T, [C,] O)`` to ``stats``.

    Only the upper triangle of the Gram is meaningful afterwards (the CPU path
    leaves the lower one stale); use :func:`symmetric` before reading it
    whole. On CPU the update runs in place on the sums, reading the rows
    where they are (a slice of a stored history is never copied out): orc's
    Gram kernel or BLAS ``syrk`` and ``gemm`` with the native backend, XLA's
    products with ``"xla"``; elsewhere it is XLA's. Derivatives go through
    XLA.

    On CPU the rows are folded in groups of ``STATS_GROUP`` counted from
    ``start``, each group's products added in order: the result is the same
    bits on any number of threads, and splitting ``start:stop`` at a multiple
    of ``STATS_GROUP`` from ``start`` into two calls gives the same bits as
    one call. (Off CPU the rows of a call are one product, and in the
    float32 QR form of the statistics one QR fold.)
    """
    stop = feats.shape[0] if stop is None else int(stop)
    start = int(start)
    if not 0 <= start <= stop <= feats.shape[0] or targets.shape[0] < stop:
        raise ValueError(
            f"stats_update: rows [{start}, {stop}) outside features of length "
            f"{feats.shape[0]} / targets of length {targets.shape[0]}"
        )
    if stats.form == "qr":
        r, z = _fold_qr(
            stats.gram,
            stats.cross,
            _rows(feats.astype(stats.gram.dtype), start, stop),
            _rows(targets.astype(stats.gram.dtype), start, stop),
        )
        return RidgeStats(
            r,
            z,
            stats.count + (stop - start),
            form="qr",
            weights_dtype=stats.weights_dtype,
        )
    if feats.dtype != stats.gram.dtype:  # wider statistics: cast the rows used
        feats = feats[start:stop].astype(stats.gram.dtype)
        targets, start, stop = targets[start:stop], 0, stop - start
    targets = targets.astype(feats.dtype)
    native = _strategy.native()
    gram, cross = _strategy.on_platform(
        stats.gram,
        stats.cross,
        feats,
        targets,
        cpu=lambda *a: _stats_update_cpu(*a, start, stop, native),
        default=lambda *a: _stats_update_xla(*a, start, stop),
    )
    return RidgeStats(
        gram,
        cross,
        stats.count + (stop - start),
        weights_dtype=stats.weights_dtype,
    )


def symmetric(g: Array) -> Array:
    """The symmetric matrix whose upper triangle is that of ``g``."""
    upper = jnp.triu(g)
    return upper + jnp.swapaxes(jnp.triu(g, 1), -1, -2)


def fit_nrmse(
    stats: RidgeStats, w: Array, beta, y_sq: Array, y_sum: Array, rows
) -> Array:
    """The training fit's NRMSE from the statistics alone, one per output of
    each chunk (``(O,)`` or ``(C, O)``), for ``w`` the ridge solution with
    ``beta``: its residual sum of squares over the rows the statistics hold
    is ``sum y^2 - 2 w . F^T y + w^T F^T F w``, and ``(F^T F + beta I) w =
    F^T y`` turns the last term into ``w . F^T y - beta |w|^2`` (in QR form
    ``F^T y = R^T (Q^T y)``); divided by ``rows`` and the targets' variance
    from their sums ``y_sq``, ``y_sum`` (shaped like the outputs). An output
    whose variance is rounding (below ``100 eps`` of its mean square: a
    constant) gives NaN. Elementwise work only (one ``R w`` product in QR
    form): the check adds next to nothing to a training program. For the
    minimum-norm fallback solution it is approximate (to the ``beta`` term)."""
    dtype = stats.gram.dtype
    w = jnp.swapaxes(w.astype(dtype), -1, -2)  # (..., F, O)
    if stats.form == "qr":
        fy = jnp.matmul(
            jnp.swapaxes(jnp.triu(stats.gram), -1, -2), stats.cross, precision="highest"
        )
    else:
        fy = stats.cross
    y_sq, y_sum = y_sq.astype(dtype), y_sum.astype(dtype)
    rows, beta = jnp.asarray(rows, dtype), jnp.asarray(beta, dtype)
    rss = y_sq - jnp.sum(w * (fy + beta * w), axis=-2)
    mean_sq = y_sq / rows
    var = mean_sq - (y_sum / rows) ** 2
    constant = var <= 100 * jnp.finfo(dtype).eps * mean_sq
    scale = jnp.where(constant, 1, var * rows)
    return jnp.where(constant, jnp.nan, jnp.sqrt(jnp.maximum(rss, 0) / scale))


def sequence_stats(
    states: Array,
    targets: Array,
    features: Callable[[Array], Array],
    prep_targets: Callable[[Array], Array],
    *,
    start: int = 0,
    block_size: int | None = None,
    stats: RidgeStats | None = None,
) -> RidgeStats:
    """Statistics of rows ``start:len(targets)`` of one sequence, in time blocks.

    Row ``i`` of ``states`` is paired with row ``i`` of ``targets``; ``states``
    may be longer than ``targets`` (extra rows are ignored). ``features`` maps a block of states ``(B, ...)`` to features and
    ``prep_targets`` a block of raw targets ``(B, out_dim)`` to regression
    targets; both must act row by row (``f(x)[i]`` depends on ``x[i]`` only).
    Blocks are sliced from ``states`` one at a time, so the features are never
    formed for the whole sequence. (Teacher-forced training does not come
    here: it accumulates while it forces, see :mod:`orc._training`.)
    """
    T = targets.shape[0]
    if states.shape[0] < T:
        raise ValueError(f"{states.shape[0]} states for {T} targets")
    n = T - start
    if n <= 0:
        raise ValueError(f"no rows left to fit: {T} rows with {start} discarded")
    block = int(min(block_size or DEFAULT_BLOCK, n))

    def block_stats(stats, offset, size):
        x = jax.lax.dynamic_slice_in_dim(states, offset, size, axis=0)
        y = jax.lax.dynamic_slice_in_dim(targets, offset, size, axis=0)
        return stats_update(stats, features(x), prep_targets(y))

    if stats is None:
        f_shape = jax.eval_shape(features, states[:1])
        y_shape = jax.eval_shape(prep_targets, targets[:1])
        chunks = f_shape.shape[1] if len(f_shape.shape) == 3 else None
        stats = RidgeStats.zeros(
            f_shape.shape[-1], y_shape.shape[-1], chunks, f_shape.dtype
        )

    n_full, tail = divmod(n, block)
    if n_full == 1:
        stats = block_stats(stats, start, block)
    elif n_full > 1:
        stats = jax.lax.fori_loop(
            0, n_full, lambda i, s: block_stats(s, start + i * block, block), stats
        )
    if tail:
        stats = block_stats(stats, start + n_full * block, tail)
    return stats


def _pinv_solve(xp, gram, cross, beta):
    """Minimum-norm solution of ``(G + beta I) x = cross`` (pinv) for ``G``
    given by its upper triangle, written once for both array modules (``xp``
    is ``jnp`` or ``np``)."""
    n = gram.shape[-1]
    lhs = xp.triu(gram) + xp.triu(gram, 1).T + beta * xp.eye(n, dtype=gram.dtype)
    w, V = xp.linalg.eigh(lhs)
    cutoff = xp.finfo(lhs.dtype).eps * n * xp.max(xp.abs(w))
    inv = xp.where(w > cutoff, 1.0 / xp.where(w > cutoff, w, 1.0), 0.0)
    # full precision in JAX on every device (TF32 is GPU float32's default)
    mm = np.matmul if xp is np else functools.partial(jnp.matmul, precision="highest")
    return mm(V, inv[:, None] * mm(V.T, cross))


def _min_norm_xla(gram: Array, cross: Array, beta) -> Array:
    return _pinv_solve(jnp, gram, cross, beta)


def _min_norm_host(gram: Array, cross: Array, beta) -> Array:
    """The minimum-norm solve in numpy, on the host (CPU without the native
    kernels)."""

    def host(g, b, bt):
        g, b, bt = np.asarray(g), np.asarray(b), np.asarray(bt)
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(b))):
            return np.full(b.shape, np.nan, b.dtype)  # solve() reports it
        return _pinv_solve(np, g, b, bt).astype(b.dtype)

    shape = jax.ShapeDtypeStruct(cross.shape, cross.dtype)
    return jax.pure_callback(host, shape, gram, cross, beta, vmap_method="sequential")


#: Shifts the device fallback tries: ``delta_0 * SHIFT_GROWTH**j`` for ``j <
#: SHIFT_TRIES``, from ``delta_0 = F eps max|diag(G + beta I)|`` (the level
#: below which the eigen-solve's cutoff discards directions) up to 1e14 times
#: that: a matrix that factorises at none of them has no finite solution.
SHIFT_TRIES = 8
SHIFT_GROWTH = 100.0


def _cholesky(a: Array) -> Array:
    """Lower Cholesky factor of the symmetric ``a`` (NaN where it fails),
    without symmetrising a copy first (our matrices are symmetric by
    construction, so ``(a + a^T) / 2`` would equal ``a`` bit for bit and only
    cost one more ``F x F`` buffer)."""
    return jax.lax.linalg.cholesky(a, symmetrize_input=False)


def _shift_for(lhs: Array) -> Array:
    """The smallest tried shift ``delta`` for which ``lhs + delta I``
    factorises (see ``SHIFT_TRIES``), as a scalar; NaN where none does."""
    n = lhs.shape[-1]
    eye = jnp.eye(n, dtype=lhs.dtype)
    scale = jnp.max(jnp.abs(jnp.diagonal(lhs)))
    delta0 = n * jnp.finfo(lhs.dtype).eps * jnp.where(scale > 0, scale, 1)
    growth = jnp.asarray(SHIFT_GROWTH, lhs.dtype)

    def untried(state):
        j, ok = state
        return ~ok & (j < SHIFT_TRIES - 1)

    def attempt(state):
        j = state[0] + 1
        factor = _cholesky(lhs + delta0 * growth ** j.astype(lhs.dtype) * eye)
        return j, jnp.all(jnp.isfinite(factor))

    first = jnp.all(jnp.isfinite(_cholesky(lhs + delta0 * eye)))
    j, ok = jax.lax.while_loop(untried, attempt, (jnp.int32(0), first))
    return jnp.where(ok, delta0 * growth ** j.astype(lhs.dtype), jnp.nan)


def _shifted_solve(gram: Array, cross: Array, beta) -> Array:
    """The fallback off CPU: ``(G + (beta + delta) I)^{-1} cross`` by
    Cholesky, ``delta`` the smallest tried shift that factorises
    (:func:`_shift_for`; held constant for derivatives).

    An eigen-decomposition (the minimum-norm solution the CPU computes) would
    make every training program on a GPU reserve cuSOLVER's ``syevd``
    workspace and eigenvector matrix, several times the Gram's size, whether
    the fallback runs or not: at 32000 features that no longer fits on an
    80 GB card. This fallback needs only what the Cholesky solve itself
    needs. It differs from the minimum-norm solution only in the directions
    the eigen-solve would discard (eigenvalues of ``G + beta I`` below the
    shift), which it damps by ``1 / (lambda + delta)`` instead of zeroing.
    """
    n = gram.shape[-1]
    lhs = symmetric(gram) + beta * jnp.eye(n, dtype=gram.dtype)
    delta = jax.lax.stop_gradient(_shift_for(lhs))
    factor = _cholesky(lhs + delta * jnp.eye(n, dtype=gram.dtype))
    return jax.scipy.linalg.cho_solve((factor, True), cross)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _min_norm(gram: Array, cross: Array, beta, native: bool) -> Array:
    # The fallback rarely runs, but a branch of lax.cond reserves its memory
    # whether taken or not: XLA's eigh would double the solve's footprint on
    # CPU (61 -> 122 MiB at 2000 features), so with the native backend it
    # runs in numpy on the host, only when needed; off CPU it is the shifted
    # Cholesky solve (_shifted_solve), which needs no eigen-solver workspace.
    # (`native`, the backend, is an argument: see _stats_update_cpu.)
    # The one result whose bits may depend on the number of CPUs: LAPACK's
    # syevd (OpenBLAS's threaded symv inside) summed in another order on two
    # threads than on one on an AVX-512 Zen 4 (~5e-16, both backends); the
    # fit warns (IllConditionedRidgeWarning) whenever this branch runs.
    on_cpu = _min_norm_host if native else _min_norm_xla
    return _strategy.on_platform(
        gram,
        cross,
        beta,
        cpu=lambda *a: on_cpu(*a),
        default=lambda *a: _shifted_solve(*a),
    )


@_min_norm.defjvp
def _min_norm_jvp(native, primals, tangents):
    def on_cpu(*args):
        return jax.jvp(_min_norm_xla, args[:3], args[3:])

    def elsewhere(*args):
        return jax.jvp(_shifted_solve, args[:3], args[3:])

    return _strategy.on_platform(*primals, *tangents, cpu=on_cpu, default=elsewhere)


#: Columns per block column of :func:`_cholesky_panels`: the trailing
#: matrix is updated once per block column, by one product over its columns
#: (at most 320 terms keep their order on any number of threads, see
#: ``STATS_GROUP``), its ``SOLVE_PANEL``-wide panels factorised inside it.
CHOLESKY_BLOCK = 4 * SOLVE_PANEL
#: Rows per stage of :func:`_cholesky_panels` (a multiple of
#: ``CHOLESKY_BLOCK``): the trailing matrix shrinks between stages (static
#: shapes) and keeps its shape within one (a loop over block columns).
CHOLESKY_STAGE = 2 * CHOLESKY_BLOCK


def _padded(a: Array, n: int) -> Array:
    """``a`` ``(m, m)`` as the leading block of an ``(n, n)`` matrix with
    the identity after it (its factor: ``a``'s, and the identity)."""
    m = a.shape[-1]
    if n == m:
        return a
    out = jnp.eye(n, dtype=a.dtype)
    return out.at[:m, :m].set(a)


def _cholesky_panels(a: Array) -> Array:
    """Lower Cholesky factor of the symmetric ``a`` ``(n, n)`` (its lower
    triangle is read; NaN where it fails), by block columns of
    ``CHOLESKY_BLOCK`` columns, right-looking: in each, panels of
    ``SOLVE_PANEL`` columns, each diagonal block factorised by LAPACK, the
    panel below it by a triangular solve with that block (``L21^T = L11^{-1}
    A21^T``) and the block column's next columns updated by a product over
    the panel's; then the trailing matrix updated by one product over the
    block column's columns. Each of these calls gives the same bits on one
    thread or many, so the factor does too (LAPACK's ``potrf`` of the whole
    matrix does not, see ``SOLVE_PANEL``). A failed block makes every later
    one NaN.

    The block columns run in a loop over a trailing matrix of fixed shape
    (the rows above the block column masked out), which shrinks by
    ``CHOLESKY_STAGE`` rows between stages: a few compiled loop bodies
    instead of one program per panel (7 s to compile at 2000 features)."""
    n = a.shape[-1]
    if n <= SOLVE_PANEL:
        return _cholesky(a)
    p, w = SOLVE_PANEL, CHOLESKY_BLOCK
    size = -(-n // w) * w
    rest = _padded(a, size)
    factor = jnp.zeros_like(rest)
    for top in range(0, size, CHOLESKY_STAGE):
        m = size - top
        width = min(CHOLESKY_STAGE, m)
        rows = jnp.arange(m)[:, None]

        def block_column(kb, carry, m=m, rows=rows):
            rest, cols = carry
            ob = kb * w

            def panel(q, bl):  # bl: (the block column, its factor columns)
                blk, lblk = bl
                o = ob + q * p
                l11 = _cholesky(jax.lax.dynamic_slice(blk, (o, q * p), (p, p)))
                col = jax.lax.dynamic_slice(blk, (0, q * p), (m, p))
                l21t = jax.lax.linalg.triangular_solve(
                    l11, col.T, left_side=True, lower=True
                )
                l21 = jnp.where(rows >= o + p, l21t.T, 0)
                diag = jax.lax.dynamic_update_slice(jnp.zeros_like(l21), l11, (o, 0))
                lblk = jax.lax.dynamic_update_slice(lblk, l21 + diag, (0, q * p))
                # the block column's next columns (rows ob + (q + 1) p on of l21)
                right = jax.lax.dynamic_slice(l21, (ob, 0), (w, p))
                update = jnp.matmul(l21, right.T, precision="highest")
                return blk - update, lblk

            blk = jax.lax.dynamic_slice(rest, (0, ob), (m, w))
            _, lblk = jax.lax.fori_loop(
                0, w // p, panel, (blk, jnp.zeros((m, w), rest.dtype))
            )
            cols = jax.lax.dynamic_update_slice(cols, lblk, (0, ob))
            below = jnp.where(rows >= ob + w, lblk, 0)
            rest = rest - jnp.matmul(below, below.T, precision="highest")
            return rest, cols

        cols = jnp.zeros((m, width), rest.dtype)
        rest, cols = jax.lax.fori_loop(0, width // w, block_column, (rest, cols))
        factor = factor.at[top:, top : top + width].set(cols)
        rest = rest[width:, width:]
    return factor[:n, :n]


def _cho_solve_panels(factor: Array, rhs: Array) -> Array:
    """``(L L^T)^{-1} rhs`` for the lower ``factor`` ``(n, n)`` of
    :func:`_cholesky_panels` and ``rhs`` ``(n, O)``: forward and back
    substitution by panels of ``SOLVE_PANEL`` rows (a triangular solve with
    each diagonal block, the rows after it, or before it, updated by a
    product over the panel's rows), so the solution is the same bits on any
    number of threads. One loop each, over arrays of fixed shape."""
    n = factor.shape[-1]
    if n <= SOLVE_PANEL:
        return jax.scipy.linalg.cho_solve((factor, True), rhs)
    p = SOLVE_PANEL
    size = -(-n // p) * p
    factor = _padded(factor, size)
    rhs = jnp.concatenate([rhs, jnp.zeros((size - n,) + rhs.shape[1:], rhs.dtype)])
    rows = jnp.arange(size)[:, None]
    o_cols = rhs.shape[-1]

    def diagonal(r, o, transpose_a):
        """``r`` with its panel at row ``o`` solved by the diagonal block
        (``L``, or ``L^T`` with ``transpose_a``), and that panel."""
        lkk = jax.lax.dynamic_slice(factor, (o, o), (p, p))
        x = jax.lax.linalg.triangular_solve(
            lkk,
            jax.lax.dynamic_slice(r, (o, 0), (p, o_cols)),
            left_side=True,
            lower=True,
            transpose_a=transpose_a,
        )
        return jax.lax.dynamic_update_slice(r, x, (o, 0)), x

    def forward(k, r):  # L z = rhs
        o = k * p
        r, z = diagonal(r, o, transpose_a=False)
        col = jax.lax.dynamic_slice(factor, (0, o), (size, p))
        update = jnp.matmul(col, z, precision="highest")
        return jnp.where(rows >= o + p, r - update, r)

    def backward(i, r):  # L^T x = z
        o = (size // p - 1 - i) * p
        r, x = diagonal(r, o, transpose_a=True)
        row = jax.lax.dynamic_slice(factor, (o, 0), (p, size))
        update = jnp.matmul(row.T, x, precision="highest")
        return jnp.where(rows < o, r - update, r)

    r = jax.lax.fori_loop(0, size // p, forward, rhs)
    r = jax.lax.fori_loop(0, size // p, backward, r)
    return r[:n]


def _solve_xla_status(
    gram: Array, cross: Array, beta, *, panels: bool = False, native: bool = False
) -> tuple[Array, Array]:
    """``(G + beta I)^{-1} cross`` (``(F, O)``) by XLA's Cholesky, with the
    minimum-norm fallback; returns the solution and the status of the
    branch taken (0 Cholesky, 1 fallback, as the native kernel's). With
    ``panels`` (on CPU) the factorisation and the substitutions run by
    panels (:func:`_cholesky_panels`): the same bits on any number of
    threads. ``native``: the backend, for the fallback's choice of path."""
    n = gram.shape[0]
    lhs = symmetric(gram) + beta * jnp.eye(n, dtype=gram.dtype)
    cholesky = _cholesky_panels if panels else _cholesky

    def by_cholesky(factor):
        if panels:
            return _cho_solve_panels(factor, cross), jnp.int32(0)
        return jax.scipy.linalg.cho_solve((factor, True), cross), jnp.int32(0)

    def by_eigh(_):
        return _min_norm(gram, cross, beta, native), jnp.int32(1)

    factor = cholesky(lhs)
    # the branch decides the status: no extra pass over the Gram
    return jax.lax.cond(jnp.all(jnp.isfinite(factor)), by_cholesky, by_eigh, factor)


def _solve_xla(gram: Array, cross: Array, beta, *, panels: bool = False) -> Array:
    """:func:`_solve_xla_status`'s solution alone."""
    return _solve_xla_status(gram, cross, beta, panels=panels)[0]


def _solve_native(gram, cross, beta, target) -> tuple[Array, Array]:
    """The same solve by LAPACK inside the Gram's buffer (:mod:`orc._native`),
    minimum-norm fallback included; returns the solution and the kernel's
    status (0 Cholesky, 1 fallback, -1 non-finite input, -2 failure)."""
    call = jax.ffi.ffi_call(
        target,
        (
            jax.ShapeDtypeStruct(gram.shape, gram.dtype),
            jax.ShapeDtypeStruct(cross.shape, cross.dtype),
            jax.ShapeDtypeStruct(gram.shape[:-2], jnp.int32),
        ),
        vmap_method="broadcast_all",
        input_output_aliases={0: 0},
    )
    _, x, status = call(gram, cross, beta)
    return x, status


def _over_stack(fn, gram):
    """``fn`` for one ``(F, F)`` problem, vmapped over ``gram``'s leading axes."""
    for _ in range(gram.ndim - 2):
        fn = jax.vmap(fn, (0, 0, None))
    return fn


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _solve_cpu(gram: Array, cross: Array, beta, native: bool) -> tuple[Array, Array]:
    # `native`, the backend, is an argument (see _stats_update_cpu): this
    # function is a branch of _strategy.on_platform, whose traces are cached.
    target = _native.ridge_solve_target(gram.dtype) if native else None
    if target is not None and cross.dtype == gram.dtype:
        return _solve_native(gram, cross, jnp.asarray(beta, gram.dtype), target)
    one = functools.partial(_solve_default, panels=True, native=native)
    return _over_stack(one, gram)(gram, cross, beta)


@_solve_cpu.defjvp
def _solve_cpu_jvp(native, primals, tangents):
    out = _solve_cpu(*primals, native)
    one = functools.partial(_solve_xla, panels=True)
    _, dx = jax.jvp(_over_stack(one, primals[0]), primals, tangents)
    return out, (dx, np.zeros(out[1].shape, jax.dtypes.float0))


def _solve_default(
    gram, cross, beta, *, panels: bool = False, native: bool = False
) -> tuple[Array, Array]:
    """:func:`_solve_xla_status` with the native kernel's status: -1
    (non-finite input) where the statistics or ``beta`` are not finite."""
    finite = (
        jnp.all(jnp.isfinite(gram)) & jnp.all(jnp.isfinite(cross)) & jnp.isfinite(beta)
    )
    x, status = _solve_xla_status(gram, cross, beta, panels=panels, native=native)
    return x, jnp.where(finite, status, -1).astype(jnp.int32)


def _solve_one(gram: Float[Array, "... F F"], cross: Float[Array, "... F O"], beta):
    """Weights ``(..., O, F)`` and the most severe code over the stack (see
    ``_SUCCESSFUL`` ... ``_NONFINITE``).

    Leading axes are solved together: the native kernel takes the stack as
    it is, and a stack of one must not be squeezed to ``(F, F)`` first (XLA
    then copies the Gram before the in-place solve: 32 MB at 2000 features).
    """
    native = _strategy.native()
    x, status = _strategy.on_platform(
        gram,
        cross,
        beta,
        cpu=lambda g, c, b: _solve_cpu(g, c, b, native),
        default=lambda g, c, b: _over_stack(_solve_default, g)(g, c, b),
    )
    return jnp.swapaxes(x, -1, -2), jnp.max(_severity(status))


def _solve_intercept(gram, cross, beta) -> tuple[Array, Array]:
    # Feature 0 is the constant 1: gram[0, 0] = n rows, gram[0, 1:] = sum f,
    # cross[0] = sum y. Ridge on the centred features leaves the intercept
    # unpenalised; b = mean(y) - W mean(f).
    n = jnp.maximum(gram[0, 0], 1)
    s, sy = gram[0, 1:], cross[0]
    gc = gram[1:, 1:] - jnp.outer(s, s) / n
    bc = cross[1:] - jnp.outer(s, sy) / n
    w, code = _solve_one(gc, bc, beta)  # (O, F - 1)
    b = (sy - jnp.matmul(w, s, precision="highest")) / n
    return jnp.concatenate([b[:, None], w], axis=1), code


def _qr_shifted_solve(r: Array, z: Array, tiny: Array) -> Array:
    """The QR form's fallback off CPU: ``argmin ||R x - z||^2 + tiny^2
    ||x||^2`` by one more QR fold and a triangular solve (``tiny``, one per
    problem of the stack, is the level below which ``lstsq`` on CPU discards
    singular values). An SVD there would reserve its workspace in every
    fit, as the eigen-solve would for the normal equations
    (:func:`_shifted_solve`); this needs only the QR's."""
    f = r.shape[-1]
    shift = jnp.asarray(tiny, r.dtype)[..., None, None] * jnp.eye(f, dtype=r.dtype)
    r3, z3 = _fold_qr(r, z, jnp.broadcast_to(shift, r.shape), jnp.zeros_like(z))
    return jax.scipy.linalg.solve_triangular(r3, z3, lower=False)


def _solve_qr(stats: RidgeStats, beta, intercept: bool) -> tuple[Array, Array]:
    """Weights ``([C,] O, F)`` and severity code from statistics in QR form:
    the R factor of ``[[R, Q^T Y], [sqrt(beta) D, 0]]`` (``D`` the identity,
    without its first entry with ``intercept``: an unpenalised bias) and a
    triangular solve. A numerically singular factor (``beta = 0`` and
    collinear features) gets the minimum-norm least-squares solution and the
    ``fallback`` code, as the normal-equation solvers."""
    r, z = stats.gram, stats.cross
    f = r.shape[-1]
    diag = jnp.ones(f, r.dtype)
    if intercept:
        diag = diag.at[0].set(0)
    pen = jnp.broadcast_to(jnp.sqrt(beta) * jnp.diag(diag), r.shape)
    r2, z2 = _fold_qr(r, z, pen, jnp.zeros(z.shape, z.dtype))
    finite = jnp.all(jnp.isfinite(r)) & jnp.all(jnp.isfinite(z)) & jnp.isfinite(beta)
    d = jnp.abs(jnp.diagonal(r2, axis1=-2, axis2=-1))
    # With beta > 0 the penalty rows keep every |R_ii| >= ~sqrt(beta) > 0 in
    # exact arithmetic, however collinear the features (the intercept's
    # constant column is never collinear with them): only a zero is
    # singular. Without a penalty, a rank test.
    tiny = jnp.finfo(r.dtype).eps * f * jnp.max(d, -1)
    floor = jnp.where(beta > 0, 0.0, tiny)
    singular = jnp.any(jnp.min(d, -1) <= floor) | ~jnp.all(jnp.isfinite(d))

    def triangular(_):
        return jax.scipy.linalg.solve_triangular(r2, z2, lower=False)

    def min_norm(_):
        a, b = r2.reshape((-1, f, f)), z2.reshape((-1,) + z2.shape[-2:])
        x = jax.vmap(lambda a, b: jnp.linalg.lstsq(a, b)[0])(a, b)
        return x.reshape(z2.shape)

    def fallback(_):
        return _strategy.on_platform(
            None, cpu=min_norm, default=lambda _: _qr_shifted_solve(r2, z2, tiny)
        )

    x = jax.lax.cond(singular & finite, fallback, triangular, None)
    code = jnp.where(~finite, _NONFINITE, jnp.where(singular, _FALLBACK, _SUCCESSFUL))
    return jnp.swapaxes(x, -1, -2), code.astype(jnp.int32)


def _solve_coded(
    stats: RidgeStats, beta, batch_size: int | None, intercept: bool
) -> tuple[Array, Array]:
    """Weights (in ``stats.weights_dtype``) and the combined severity code (a
    scalar int32)."""
    w, code = _solve_coded_wide(stats, beta, batch_size, intercept)
    if stats.weights_dtype is not None:
        w = w.astype(stats.weights_dtype)
    return w, code


def _solve_coded_wide(
    stats: RidgeStats, beta, batch_size: int | None, intercept: bool
) -> tuple[Array, Array]:
    # the derivative rules of cholesky, the triangular solves and eigh build
    # products of their own: at full precision like ours
    with _strategy.full_precision():
        return _solve_coded_unscoped(stats, beta, batch_size, intercept)


def _solve_coded_unscoped(
    stats: RidgeStats, beta, batch_size: int | None, intercept: bool
) -> tuple[Array, Array]:
    one = _solve_intercept if intercept else _solve_one
    beta = jnp.asarray(beta, stats.gram.dtype)
    if stats.form == "qr":
        w, code = _solve_qr(stats, beta, intercept)
        return w, jnp.where(
            (code < _FAILED) & ~jnp.all(jnp.isfinite(w)), _FAILED, code
        ).astype(jnp.int32)
    # Finiteness is reported by the solve (the native kernel checks while it
    # reads the Gram) and checked on the (small) weights, not with
    # eqx.error_if on the statistics: that copies what it guards, and the
    # Gram is the largest array of a fit.
    if stats.gram.ndim == 2:
        w, code = one(stats.gram, stats.cross, beta)
    elif stats.gram.shape[0] == 1 and not intercept:  # one chunk: no loop, no copy
        w, code = _solve_one(stats.gram, stats.cross, beta)
    elif stats.gram.shape[0] == 1:  # one chunk: a reshape, not a loop over slices
        w, code = one(stats.gram[0], stats.cross[0], beta)
        w = w[None]
    else:
        w, code = jax.lax.map(
            lambda gc: one(gc[0], gc[1], beta),
            (stats.gram, stats.cross),
            batch_size=batch_size,
        )
        code = jnp.max(code)
    # Finite statistics but weights that are not (overflow, a failed eigen-
    # solve in XLA, the intercept's correction): the linear algebra failed.
    return w, jnp.where(
        (code < _FAILED) & ~jnp.all(jnp.isfinite(w)), _FAILED, code
    ).astype(jnp.int32)


def solve_with_result(
    stats: RidgeStats,
    beta,
    *,
    batch_size: int | None = None,
    intercept: bool = False,
) -> tuple[Array, RESULTS]:
    """Ridge weights and how the solve went, raising and warning nothing.

    The same solve as :func:`solve` (same arguments and weights), for
    programmatic use: the second value is a :class:`RESULTS` item,
    ``successful``, ``fallback`` (minimum-norm solution: ``G + beta I`` was not
    numerically positive definite), ``nonfinite`` (NaN/inf statistics; the
    weights are then NaN) or ``failed``; over chunks, the most severe. Test it
    with ``result == RESULTS.successful``; ``RESULTS[result]`` is its message.
    """
    w, code = _solve_coded(stats, beta, batch_size, intercept)
    return w, _as_result(code)


def solve(
    stats: RidgeStats,
    beta,
    *,
    batch_size: int | None = None,
    intercept: bool = False,
) -> Array:
    """Ridge weights ``(O, F)`` or ``(C, O, F)`` from accumulated statistics.

    Chunks are solved one after another (``batch_size`` at a time), so the
    fallback branch only runs for the chunks that need it. With ``intercept``
    feature 0 must be the constant 1 (rows masked out contribute 0 to it); its
    weight, the output bias, is not penalised (ridge on centred features).

    Non-finite statistics, or a solve that gives no finite weights, raise
    (:func:`orc._errors.check`, also under ``jax.jit``); when ``G + beta I`` is not
    numerically positive definite the minimum-norm solution is returned and an
    :class:`IllConditionedRidgeWarning` is emitted when the computation runs.
    :func:`solve_with_result` returns the outcome instead.
    """
    w, code = _solve_coded(stats, beta, batch_size, intercept)
    _errors.warn(
        code == _FALLBACK, RESULTS[RESULTS.fallback], IllConditionedRidgeWarning
    )
    # the message is the result's own: `failed` or `nonfinite`
    w = _errors.check_index(
        w,
        code >= _FAILED,
        (code == _NONFINITE).astype(jnp.int32),
        (RESULTS[RESULTS.failed], RESULTS[RESULTS.nonfinite]),
    )
    return _errors.check(
        w,
        ~jnp.all(jnp.isfinite(w)),
        "ridge regression produced non-finite readout weights: the reservoir states "
        "or targets contain NaN/inf (check the training data and the model's "
        "hyperparameters, e.g. a spectral radius or input scaling that blows up).",
    )
