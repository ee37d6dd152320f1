"""The ridge solve's result code (:class:`orc._ridge.RESULTS`).

Every solve path (the native LAPACK kernel, XLA on CPU, XLA's default-platform
branch, the intercept variant, chunks solved one by one and a stack of one)
reports the same code for the same situation: ``successful`` (Cholesky),
``fallback`` (``G + beta I`` not numerically positive definite: minimum-norm
solution, and :func:`solve` warns), ``nonfinite`` and ``failed`` (errors in
:func:`solve`). Expectations are numpy's (``solve``, ``pinv``) or finite
differences, never another orc path.
"""

from __future__ import annotations

import functools
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import ON_CPU, RUNTIME_ERRORS, assert_fallback_solution
from orc import _ridge
from orc._ridge import (
    RESULTS,
    IllConditionedRidgeWarning,
    RidgeStats,
    solve,
    solve_with_result,
)

BACKENDS = ("native", "xla")
F, O = 9, 3


@pytest.fixture(params=BACKENDS)
def backend(request):
    with orc.use_backend(request.param):
        yield request.param


def _rng(seed):
    return np.random.default_rng(seed)


def _stats(x, y, seed=0):
    """Statistics (numpy) of features ``x`` and targets ``y``; the Gram's
    lower triangle is junk, as the Gram update leaves it."""
    g = x.T @ x
    g = np.triu(g) + np.tril(_rng(seed).standard_normal(g.shape), -1)
    return RidgeStats(g, x.T @ y, np.asarray(float(len(x))))


def _with(stats, field, index, value):
    """``stats`` with one entry of ``field`` ("gram" or "cross") set."""
    a = getattr(stats, field).copy()
    a[index] = value
    return eqx.tree_at(lambda s: getattr(s, field), stats, a)


def _problem(seed, rows=60, f=F, intercept=False):
    """A well-conditioned problem: features ``(rows, f)``, targets ``(rows, O)``;
    with ``intercept`` feature 0 is the constant 1."""
    rng = _rng(seed)
    x = rng.standard_normal((rows, f))
    if intercept:
        x[:, 0] = 1.0
    return x, rng.standard_normal((rows, O)) + 0.5


def _collinear(seed, rows=40, f=F):
    """Exactly collinear features: 4 independent columns and copies of them."""
    rng = _rng(seed)
    base = rng.standard_normal((rows, 4))
    x = base[:, np.arange(f) % 4]
    return x, rng.standard_normal((rows, O))


def _stack(stats_list):
    return jax.tree.map(lambda *a: np.stack(a), *stats_list)


_FUNCTIONS = {"solve": solve, "solve_with_result": solve_with_result}


def _jitted(backend, name, *, vmap=False, batch_size=None, intercept=False):
    """:func:`solve` or :func:`solve_with_result` (``name``) of statistics and
    ``beta``, jitted once per backend and keyword arguments (a function of
    its own per backend, traced under it), so that the tests of one shape
    share its program: called eagerly, every operation of the solve compiled
    a program of its own."""
    # the defaults filled in: a cache keyed on the keywords as written made
    # _jitted(b, n) and _jitted(b, n, intercept=False) two functions, each
    # compiling the same programs
    return _jitted_once(backend, name, vmap, batch_size, intercept)


@functools.cache
def _jitted_once(backend, name, vmap, batch_size, intercept):
    fn = functools.partial(_FUNCTIONS[name], batch_size=batch_size, intercept=intercept)
    if vmap:
        fn = jax.vmap(fn, in_axes=(0, None))
    return jax.jit(fn)


def _ridge_ref(x, y, beta, intercept=False):
    """numpy: ``(G + beta D)^{-1} B`` transposed, ``D = I`` or, with an
    intercept, ``I`` without its first diagonal entry (bias not penalised)."""
    d = np.eye(x.shape[1])
    if intercept:
        d[0, 0] = 0.0
    return np.linalg.solve(x.T @ x + beta * d, x.T @ y).T


def _pinv_ref(x, y):
    """numpy's minimum-norm least-squares solution (beta = 0), transposed."""
    return (np.linalg.pinv(x.T @ x) @ (x.T @ y)).T


def _is(result, member):
    return bool(np.all(np.asarray(result == member)))


def _fallback_warnings(record):
    return [w for w in record if issubclass(w.category, IllConditionedRidgeWarning)]


def _run(fn, *args, **kwargs):
    """Call ``fn`` and wait for the computation and its callbacks."""
    out = jax.block_until_ready(fn(*args, **kwargs))
    jax.effects_barrier()
    return out


# --------------------------------------------------------------------------- #
# successful
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("chunks", [None, 1, 3])
@pytest.mark.parametrize("intercept", [False, True])
def test_well_conditioned_is_successful(backend, chunks, intercept):
    beta = 1e-2
    problems = [_problem(10 + c, intercept=intercept) for c in range(chunks or 1)]
    refs = np.stack([_ridge_ref(x, y, beta, intercept) for x, y in problems])
    if chunks is None:
        stats, refs = _stats(*problems[0]), refs[0]
    else:
        stats = _stack([_stats(x, y, seed=i) for i, (x, y) in enumerate(problems)])
    kwargs = dict(intercept=intercept, batch_size=2 if chunks == 3 else None)
    w, result = _jitted(backend, "solve_with_result", **kwargs)(stats, beta)
    assert _is(result, RESULTS.successful)
    assert RESULTS[result] == ""
    np.testing.assert_allclose(w, refs, rtol=1e-10, atol=1e-10)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        w2 = _run(_jitted(backend, "solve", **kwargs), stats, beta)
    assert not _fallback_warnings(record)
    np.testing.assert_allclose(w2, refs, rtol=1e-10, atol=1e-10)


# --------------------------------------------------------------------------- #
# fallback
# --------------------------------------------------------------------------- #


def test_collinear_problem_makes_lapack_cholesky_fail():
    """The premise of the fallback tests, checked with numpy's LAPACK."""
    x, _ = _collinear(0)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(x.T @ x)


@pytest.mark.parametrize("jit", [None, "jax", "eqx"])
def test_collinear_falls_back_and_warns(backend, jit):
    x, y = _collinear(0)
    stats, ref = _stats(x, y), _pinv_ref(x, y)
    wrap = {None: lambda f: f, "jax": jax.jit, "eqx": eqx.filter_jit}[jit]

    w, result = _run(wrap(lambda s: solve_with_result(s, 0.0)), stats)
    assert _is(result, RESULTS.fallback)
    assert_fallback_solution(w, x, ref, atol=1e-8)

    with pytest.warns(IllConditionedRidgeWarning, match="beta") as record:
        w2 = _run(wrap(lambda s: solve(s, 0.0)), stats)
    assert len(_fallback_warnings(record)) == 1
    message = str(_fallback_warnings(record)[0].message)
    assert "collinear" in message and "minimum-norm" in message
    assert_fallback_solution(w2, x, ref, atol=1e-8)


def test_fallback_message_names_the_remedy():
    message = RESULTS[RESULTS.fallback]
    assert "Cholesky" in message and "collinear" in message
    assert "larger ridge parameter `beta`" in message
    assert "fewer or less correlated features" in message


@pytest.mark.parametrize("batch_size", [None, 2])
def test_one_chunk_falls_back_others_factor(backend, batch_size):
    good0, bad, good2 = _problem(1, f=F), _collinear(2), _problem(3, f=F)
    stats = _stack([_stats(*p, seed=i) for i, p in enumerate([good0, bad, good2])])
    refs = [_ridge_ref(*good0, 0.0), _pinv_ref(*bad), _ridge_ref(*good2, 0.0)]

    w, result = _jitted(backend, "solve_with_result", batch_size=batch_size)(stats, 0.0)
    assert _is(result, RESULTS.fallback)
    w = np.asarray(w)
    np.testing.assert_allclose(w[0], refs[0], rtol=1e-10, atol=1e-10)
    assert_fallback_solution(w[1], bad[0], refs[1], atol=1e-8)
    np.testing.assert_allclose(w[2], refs[2], rtol=1e-10, atol=1e-10)

    with pytest.warns(IllConditionedRidgeWarning) as record:
        w2 = _run(_jitted(backend, "solve", batch_size=batch_size), stats, 0.0)
    assert len(_fallback_warnings(record)) == 1  # once per solve, not per chunk
    np.testing.assert_allclose(w2, w, rtol=1e-12, atol=1e-12)


def test_stack_of_one_falls_back(backend):
    x, y = _collinear(4)
    stats = _stack([_stats(x, y)])
    w, result = _jitted(backend, "solve_with_result")(stats, 0.0)
    assert _is(result, RESULTS.fallback)
    assert_fallback_solution(np.asarray(w)[0], x, _pinv_ref(x, y), atol=1e-8)


def test_intercept_falls_back(backend):
    """Collinear centred features (a copy of a column, and a column that is a
    constant shift of another) with beta = 0: the minimum-norm solution of the
    centred problem, the bias from the means."""
    rng = _rng(5)
    z = rng.standard_normal((40, 3))
    x = np.column_stack([np.ones(40), z, z[:, 0], z[:, 1] + 2.0])
    y = rng.standard_normal((40, O))
    xc, yc = x[:, 1:] - x[:, 1:].mean(0), y - y.mean(0)
    wc = (np.linalg.pinv(xc.T @ xc) @ (xc.T @ yc)).T
    ref = np.column_stack([y.mean(0) - wc @ x[:, 1:].mean(0), wc])
    w, result = _jitted(backend, "solve_with_result", intercept=True)(_stats(x, y), 0.0)
    assert _is(result, RESULTS.fallback)
    assert_fallback_solution(w, x, ref, atol=1e-8)


# --------------------------------------------------------------------------- #
# nonfinite and failed
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("where", ["gram", "cross"])
@pytest.mark.parametrize("intercept", [False, True])
def test_nan_statistics_are_nonfinite(backend, where, intercept):
    x, y = _problem(6, intercept=intercept)
    stats = _stats(x, y)
    if where == "gram":
        stats = _with(stats, "gram", (2, 5), np.nan)
    else:
        stats = _with(stats, "cross", (4, 1), np.inf)
    _, result = _jitted(backend, "solve_with_result", intercept=intercept)(stats, 1e-3)
    assert _is(result, RESULTS.nonfinite)
    assert "NaN" in RESULTS[result]
    with pytest.raises(RUNTIME_ERRORS, match="NaN"):  # called eagerly
        _run(solve, stats, 1e-3, intercept=intercept)
    with pytest.raises(RUNTIME_ERRORS, match="NaN"):
        _run(_jitted(backend, "solve", intercept=intercept), stats, 1e-3)


def test_nonfinite_chunk_outranks_fallback(backend):
    """Chunks combine by severity: a NaN chunk makes the solve ``nonfinite``
    even next to a chunk that falls back."""
    nan = _with(_stats(*_problem(7)), "gram", (0, 0), np.nan)
    stats = _stack([_stats(*_collinear(8)), nan, _stats(*_problem(9))])
    _, result = _jitted(backend, "solve_with_result")(stats, 0.0)
    assert _is(result, RESULTS.nonfinite)
    with pytest.raises(RUNTIME_ERRORS, match="NaN"):
        _run(_jitted(backend, "solve"), stats, 0.0)


def test_overflowing_weights_are_failed(backend):
    """Finite statistics whose solution overflows: ``failed``, and an error.
    (Of the other tests' size, F x O: the same programs.)"""
    stats = RidgeStats(np.eye(F) * 1e-300, np.full((F, O), 1e300), np.asarray(1.0))
    w, result = _jitted(backend, "solve_with_result")(stats, 0.0)
    assert _is(result, RESULTS.failed)
    assert not np.all(np.isfinite(w))
    with pytest.raises(RUNTIME_ERRORS, match="linear-algebra routine failed"):
        _run(solve, stats, 0.0)  # called eagerly


# --------------------------------------------------------------------------- #
# the default-platform (non-CPU) branch, run directly
# --------------------------------------------------------------------------- #


def test_default_platform_branch_reports_the_same_status():
    """``_solve_default`` is what runs off CPU; its status must be the native
    kernel's: 0 Cholesky, 1 fallback, -1 non-finite."""
    good, bad = _problem(10), _collinear(11)
    nan = _with(_stats(*good), "gram", (1, 3), np.nan)
    x, s = jax.jit(_ridge._solve_default)(_stats(*good).gram, _stats(*good).cross, 0.0)
    assert int(s) == 0
    np.testing.assert_allclose(np.asarray(x).T, _ridge_ref(*good, 0.0), rtol=1e-10)
    x, s = jax.jit(_ridge._solve_default)(_stats(*bad).gram, _stats(*bad).cross, 0.0)
    assert int(s) == 1
    assert_fallback_solution(np.asarray(x).T, bad[0], _pinv_ref(*bad), atol=1e-8)
    _, s = jax.jit(_ridge._solve_default)(nan.gram, nan.cross, 0.0)
    assert int(s) == -1


# --------------------------------------------------------------------------- #
# transformations
# --------------------------------------------------------------------------- #


def test_vmap_matches_per_problem_solves(backend):
    problems = [_problem(20), _collinear(21), _problem(22), _collinear(23)]
    stats = _stack([_stats(*p, seed=i) for i, p in enumerate(problems)])
    refs = [
        _ridge_ref(*problems[0], 0.0),
        _pinv_ref(*problems[1]),
        _ridge_ref(*problems[2], 0.0),
        _pinv_ref(*problems[3]),
    ]
    batched = _jitted(backend, "solve_with_result", vmap=True)
    w, result = batched(stats, 0.0)
    w = np.asarray(w)
    np.testing.assert_array_equal(
        np.asarray(result == RESULTS.fallback), [False, True, False, True]
    )
    np.testing.assert_array_equal(
        np.asarray(result == RESULTS.successful), [True, False, True, False]
    )
    for i in range(len(problems)):
        member = jax.tree.map(lambda a, i=i: a[i], stats)
        one, _ = _jitted(backend, "solve_with_result")(member, 0.0)
        if i % 2 and not ON_CPU:  # a shifted fallback: its own shift per call
            assert_fallback_solution(w[i], problems[i][0], one, atol=1e-8)
        else:
            np.testing.assert_allclose(w[i], one, rtol=1e-10, atol=1e-10)
        if i % 2:  # the collinear ones fall back
            assert_fallback_solution(w[i], problems[i][0], refs[i], atol=1e-8)
        else:
            np.testing.assert_allclose(w[i], refs[i], rtol=1e-10, atol=1e-8)

    solve_batched = _jitted(backend, "solve", vmap=True)
    with pytest.warns(IllConditionedRidgeWarning) as record:
        w2 = _run(solve_batched, stats, 0.0)
    assert len(_fallback_warnings(record)) == 1  # once per call, not per element
    np.testing.assert_allclose(w2, w, rtol=1e-12, atol=1e-12)

    nan = _with(stats, "gram", (2, 0, 1), np.nan)
    _, result = batched(nan, 0.0)
    np.testing.assert_array_equal(
        np.asarray(result == RESULTS.nonfinite), [False, False, True, False]
    )
    with warnings.catch_warnings():  # elements 1 and 3 still fall back
        warnings.simplefilter("ignore", IllConditionedRidgeWarning)
        with pytest.raises(RUNTIME_ERRORS, match="NaN"):
            _run(solve_batched, nan, 0.0)


@pytest.mark.parametrize("intercept", [False, True])
def test_grad_matches_finite_differences(backend, intercept):
    x, y = _problem(30, intercept=intercept)
    stats = _stats(x, y)
    rng = _rng(31)
    dg = np.triu(rng.standard_normal((F, F)))  # solve reads the upper triangle
    dc = rng.standard_normal((F, O))
    weights = rng.standard_normal((O, F))

    def loss(gram, cross, beta):
        w = solve(RidgeStats(gram, cross, stats.count), beta, intercept=intercept)
        return jnp.sum(jnp.sin(w) * weights)

    @jax.jit  # the gradient and the tangent: one program (eager, each
    def derivatives(gram, cross, beta):  # operation of theirs compiles)
        grads = jax.grad(loss, argnums=(0, 1, 2))(gram, cross, beta)
        _, tangent = jax.jvp(
            lambda t: loss(gram + t * dg, cross + t * dc, beta + t),
            (jnp.zeros((), gram.dtype),),
            (jnp.ones((), gram.dtype),),
        )
        return grads, tangent

    beta = np.asarray(0.3)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        (gg, gc, gb), tangent = derivatives(stats.gram, stats.cross, beta)
        jax.effects_barrier()
    assert not _fallback_warnings(record)

    h = 1e-6
    loss = jax.jit(loss)  # the two evaluations: one program
    fd = (
        loss(stats.gram + h * dg, stats.cross + h * dc, beta + h)
        - loss(stats.gram - h * dg, stats.cross - h * dc, beta - h)
    ) / (2 * h)
    directional = np.sum(gg * dg) + np.sum(gc * dc) + gb
    np.testing.assert_allclose(directional, fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-9)
