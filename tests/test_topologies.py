"""orc.topologies: Rodan & Tiňo's deterministic reservoirs and input layer.

Each matrix is checked against a dense numpy matrix written from the papers'
definitions, entry by entry; the signs against pi's digits computed here by
another formula (Machin's); a ring's spectral radius against its weight; and
the point of the construction, its memory: a linear ring with aperiodic
input signs remembers close to its size (Rodan & Tiňo 2011, Theorem 1), far
more than a random reservoir of the same size, and nothing much when every
input weight has one sign.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc import topologies as T
from orc.drivers import ESNDriver
from orc.embeddings import LinearEmbedding

PI_50 = "14159265358979323846264338327950288419716939937510"


def _machin_pi_decimals(count: int) -> str:
    """pi's first ``count`` decimals by Machin's formula, 16 arctan(1/5) -
    4 arctan(1/239), in integers (an independent reference)."""
    guard = 10
    one = 10 ** (count + guard)

    def arctan_inv(x):
        total, term, k, x2 = 0, one // x, 1, x * x
        while term:
            total += term // k if k % 4 == 1 else -(term // k)
            term //= x2
            k += 2
        return total

    pi = (16 * arctan_inv(5) - 4 * arctan_inv(239)) // 10**guard
    return str(pi)[1:]


def test_pi_signs_follow_the_digits():
    assert _machin_pi_decimals(50) == PI_50
    digits = np.array([int(c) for c in _machin_pi_decimals(3000)])
    np.testing.assert_array_equal(T.pi_signs(3000), np.where(digits % 2, -1.0, 1.0))
    np.testing.assert_array_equal(T.pi_signs(5, start=11), T.pi_signs(15)[10:])
    assert T.pi_signs(3, dtype=jnp.float32).dtype == jnp.float32


def _todense(W):
    """A :class:`ReservoirMatrix` as a dense numpy matrix (on the host)."""
    values, columns = np.asarray(W.values), np.asarray(W.columns)
    dense = np.zeros((values.shape[0],) * 2)
    np.add.at(dense, (np.arange(len(values))[:, None], columns), values)
    return dense


def _dense(n, edges):
    """The dense matrix with ``W[target, source] = weight`` for each edge."""
    W = np.zeros((n, n))
    for target, source, weight in edges:
        W[target, source] = weight
    return W


def _crj_jumps(n, jump_size):
    """The CRJ's jumps as Rodan & Tiňo describe them: from unit 0, each
    ``jump_size``-th unit is joined to the next one, and the last to unit 0
    when ``jump_size`` divides ``n``."""
    units = list(range(0, n, jump_size))
    pairs = list(zip(units[:-1], units[1:], strict=True))
    if n % jump_size == 0 and len(units) > 2:
        pairs.append((units[-1], 0))
    return pairs


def test_matrices_are_the_papers():
    n = 7
    w = np.linspace(0.1, 0.7, n)
    np.testing.assert_array_equal(
        _todense(T.simple_cycle(n, w)),
        _dense(n, [((i + 1) % n, i, w[i]) for i in range(n)]),
    )
    np.testing.assert_array_equal(
        _todense(T.delay_line(n, w[: n - 2], shift=2)),
        _dense(n, [(i + 2, i, w[i]) for i in range(n - 2)]),
    )
    np.testing.assert_array_equal(
        _todense(T.delay_line_backward(n, 0.5, w[: n - 1])),
        _dense(n, [(i + 1, i, 0.5) for i in range(n - 1)])
        + _dense(n, [(i, i + 1, w[i]) for i in range(n - 1)]),
    )
    for n, jump in [(12, 3), (11, 3), (10, 5)]:
        jumps = _crj_jumps(n, jump)
        jw = np.arange(1, len(jumps) + 1) / 10
        expected = _dense(n, [((i + 1) % n, i, 0.9) for i in range(n)])
        expected += _dense(n, [(a, b, x) for (a, b), x in zip(jumps, jw, strict=True)])
        expected += _dense(n, [(b, a, x) for (a, b), x in zip(jumps, jw, strict=True)])
        got = _todense(T.cycle_jumps(n, 0.9, jw, jump_size=jump))
        np.testing.assert_array_equal(got, expected, err_msg=f"n={n}, jump={jump}")


#: ReservoirComputing.jl's documented examples (0.12.35 docstrings, 5 units):
#: (builder, arguments, the printed matrix, rows top to bottom).
RCJL_EXAMPLES = [
    (T.double_cycle, (5, -0.1, 0.3), {},
     "0 .3 0 0 .3; -.1 0 .3 0 0; 0 -.1 0 .3 0; 0 0 -.1 0 .3; -.1 0 0 -.1 0"),
    (T.true_double_cycle, (5, 0.1, 0.3), {},
     "0 .3 0 0 .1; .1 0 .3 0 0; 0 .1 0 .3 0; 0 0 .1 0 .3; .3 0 0 .1 0"),
    (T.selfloop_cycle, (5, -0.2, 0.5), {},
     ".5 0 0 0 -.2; -.2 .5 0 0 0; 0 -.2 .5 0 0; 0 0 -.2 .5 0; 0 0 0 -.2 .5"),
    (T.selfloop_backward_cycle, (5, 0.1, 0.5, 0.1), {},
     ".5 .1 0 0 .1; .1 0 0 0 0; 0 .1 .5 .1 0; 0 0 .1 0 0; 0 0 0 .1 .5"),
    (T.selfloop_delayline_backward, (5, -0.5, 0.3, 0.99), {},
     ".3 0 .99 0 0; -.5 .3 0 .99 0; 0 -.5 .3 0 .99; 0 0 -.5 .3 0; 0 0 0 -.5 .3"),
    (T.selfloop_delayline_backward, (5, 0.1, 0.1, 0.1),
     {"delay_shift": 3, "feedback_shift": 2},
     ".1 0 .1 0 0; 0 .1 0 .1 0; 0 0 .1 0 .1; .1 0 0 .1 0; 0 .1 0 0 .1"),
    (T.selfloop_forward_connection, (5, 0.5, 0.99), {},
     ".99 0 0 0 0; 0 .99 0 0 0; .5 0 .99 0 0; 0 .5 0 .99 0; 0 0 .5 0 .99"),
    (T.delay_line, (5, 0.99), {"shift": 2},  # RC.jl's forward_connection (TP5)
     "0 0 0 0 0; 0 0 0 0 0; .99 0 0 0 0; 0 .99 0 0 0; 0 0 .99 0 0"),
    # block_diagonal's two documented 4-unit examples
    (T.block_diagonal, (4, 1.0), {"block_size": 2},
     "1 1 0 0; 1 1 0 0; 0 0 1 1; 0 0 1 1"),
    (T.block_diagonal, (4, [0.5, 2.0]), {"block_size": 2},
     ".5 .5 0 0; .5 .5 0 0; 0 0 2 2; 0 0 2 2"),
]  # fmt: skip


def test_block_diagonal_blocks_and_spectrum():
    """``W[i, j] = w[i // s]`` where ``i // s == j // s`` (the last block
    shorter when ``s`` does not divide ``N``); a block of ``m`` units and
    value ``w`` has the eigenvalue ``m w`` (and ``m - 1`` zeros)."""
    for n, s in [(10, 3), (12, 4), (7, 7), (6, 1)]:
        w = np.arange(1, -(-n // s) + 1) / 10
        expected = np.array(
            [
                [w[i // s] if i // s == j // s else 0.0 for j in range(n)]
                for i in range(n)
            ]
        )
        got = _todense(T.block_diagonal(n, w, block_size=s))
        np.testing.assert_array_equal(got, expected, err_msg=f"n={n}, s={s}")
        sizes = [min(s, n - b * s) for b in range(len(w))]
        rho = max(m * x for m, x in zip(sizes, w, strict=True))
        assert np.abs(np.linalg.eigvals(got)).max() == pytest.approx(rho, rel=1e-12)


@pytest.mark.parametrize("build, args, kwargs, printed", RCJL_EXAMPLES)
def test_reservoircomputing_jl_documented_matrices(build, args, kwargs, printed):
    expected = np.array([[float(x) for x in row.split()] for row in printed.split(";")])
    np.testing.assert_array_equal(_todense(build(*args, **kwargs)), expected)


def test_ring_variants_follow_their_definitions_per_connection():
    """One weight per connection lands where each docstring says, checked
    against matrices written edge by edge."""
    n = 7
    w, v = np.linspace(0.1, 0.7, n), -np.linspace(0.2, 0.8, n)
    ring = [((i + 1) % n, i, w[i]) for i in range(n)]
    np.testing.assert_array_equal(
        _todense(T.true_double_cycle(n, w, v)),
        _dense(n, ring) + _dense(n, [(i, (i + 1) % n, v[i]) for i in range(n)]),
    )
    lower = [(i + 1, i, w[i]) for i in range(n - 1)] + [(n - 1, 0, w[-1])]
    upper = [(i, i + 1, v[i]) for i in range(n - 1)] + [(0, n - 1, v[-1])]
    np.testing.assert_array_equal(
        _todense(T.double_cycle(n, w, v)), _dense(n, lower) + _dense(n, upper)
    )
    even, odd = range(0, n, 2), range(1, n, 2)
    np.testing.assert_array_equal(
        _todense(T.selfloop_backward_cycle(n, w, v[:4], w[:3])),
        _dense(n, ring)
        + _dense(n, [(i, i, v[k]) for k, i in enumerate(even)])
        + _dense(n, [(j - 1, j, w[k]) for k, j in enumerate(odd)]),
    )
    np.testing.assert_array_equal(
        _todense(T.selfloop_delayline_backward(n, w[:5], v, w[:4], delay_shift=2,
                                               feedback_shift=3)),
        _dense(n, [(i + 2, i, w[i]) for i in range(5)])
        + np.diag(v) + _dense(n, [(i, i + 3, w[i]) for i in range(4)]),
    )  # fmt: skip
    np.testing.assert_array_equal(
        _todense(T.selfloop_forward_connection(n, w[:4], v, shift=3)),
        _dense(n, [(i + 3, i, w[i]) for i in range(4)]) + np.diag(v),
    )


def test_ring_variants_spectra():
    """A ring with self-loops has eigenvalues ``l + r z`` over the N-th roots
    of unity ``z`` (radius ``|l| + |r|`` for weights of one sign); two rings
    of one weight ``w`` both ways, ``w (z + 1/z) = 2 w cos(2πk/N)``."""
    for W, radius in [(T.selfloop_cycle(30, 0.5, 0.4), 0.9),
                      (T.true_double_cycle(30, 0.45, 0.45), 0.9),
                      (T.double_cycle(30, 0.45, 0.45), 0.9)]:  # fmt: skip
        rho = np.max(np.abs(np.linalg.eigvals(_todense(W))))
        assert rho == pytest.approx(radius, rel=1e-12)


def test_minimal_input_signs_run_down_the_columns():
    W_in = np.asarray(T.minimal_input(4, 2, 0.5))
    signs = np.where(np.array([int(c) for c in PI_50[:8]]) % 2, -1, 1)
    np.testing.assert_array_equal(W_in, 0.5 * signs.reshape(2, 4).T)
    own = np.array([[1, -1], [1, 1], [-1, -1], [1, -1]])
    np.testing.assert_array_equal(T.minimal_input(4, 2, 0.5, signs=own), 0.5 * own)


def test_ring_spectral_radius_is_its_weight():
    for W in (T.simple_cycle(40, -0.8), T.simple_cycle(40, 0.8 * T.pi_signs(40))):
        rho = np.max(np.abs(np.linalg.eigvals(_todense(W))))
        assert rho == pytest.approx(0.8, rel=1e-12)


def test_weights_are_data():
    """Weights may be traced: a population of rings under vmap is the loop,
    and jit gives the eager matrix."""
    ws = jnp.array([0.3, 0.6, 0.9])
    bank = jax.vmap(lambda a, b: T.cycle_jumps(9, a, b, jump_size=3))(ws, ws / 2)
    for k, w in enumerate(ws):
        one = T.cycle_jumps(9, w, w / 2, jump_size=3)
        np.testing.assert_array_equal(_todense(bank[k]), _todense(one))
    jitted = eqx.filter_jit(lambda w: T.delay_line_backward(6, w, 0.1))(0.4)
    assert eqx.tree_equal(jitted, T.delay_line_backward(6, 0.4, 0.1))
    blocks = jax.vmap(lambda w: T.block_diagonal(7, w, block_size=3))(
        jnp.stack([ws, -ws])
    )
    for k, w in enumerate([ws, -ws]):
        np.testing.assert_array_equal(
            _todense(blocks[k]),
            _todense(T.block_diagonal(7, np.asarray(w), block_size=3)),
        )
    bank = jax.vmap(lambda a, b: T.double_cycle(6, a, b))(ws, -ws)
    for k, w in enumerate(ws):
        np.testing.assert_array_equal(
            _todense(bank[k]), _todense(T.double_cycle(6, float(w), -float(w)))
        )
    assert T.simple_cycle(5, jnp.float32(0.5)).values.dtype == jnp.float32


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: T.simple_cycle(1, 0.5), "res_dim must be >= 2"),
        (lambda: T.simple_cycle(5, np.ones(4)), r"shape \(5,\)"),
        (lambda: T.simple_cycle(5, np.ones(5, bool)), "weight must be real"),
        (lambda: T.delay_line(5, 0.5, shift=5), "shift must be <= 4"),
        (lambda: T.cycle_jumps(10, 0.5, 0.1, jump_size=6), "jump_size must be <= 5"),
        (lambda: T.cycle_jumps(10, 0.5, 0.1, jump_size=1), "jump_size must be >= 2"),
        (lambda: T.minimal_input(4, 2, 0.1, signs="e"), "signs must be 'pi'"),
        (lambda: T.minimal_input(4, 2, 0.1, signs=np.ones(8)), r"shape \(4, 2\)"),
        (lambda: T.minimal_input(4, 2, np.ones(2)), "weight must be a number"),
        (lambda: T.pi_signs(0), "n must be >= 1"),
        (lambda: T.block_diagonal(6, 0.1, block_size=7), "block_size must be <= 6"),
        (lambda: T.block_diagonal(6, 0.1, block_size=0), "block_size must be >= 1"),
        (
            lambda: T.block_diagonal(6, np.ones(3), block_size=3),
            r"one value per block, shape \(2,\)",
        ),
        (lambda: T.double_cycle(2, 0.5, 0.5), "res_dim must be >= 3 for two rings"),
        (lambda: T.true_double_cycle(5, 0.5, np.ones(4)), r"second_weight .*\(5,\)"),
        (lambda: T.selfloop_backward_cycle(5, 0.5, np.ones(2), 0.1), r"\(3,\)"),
        (
            lambda: T.selfloop_delayline_backward(5, 0.5, 0.3, 0.1, feedback_shift=5),
            "feedback_shift must be <= 4",
        ),
        (
            lambda: T.selfloop_forward_connection(5, 0.5, 0.3, shift=0),
            "shift must be >= 1",
        ),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_non_finite_weights_raise_eager_and_under_jit():
    bad = np.array([0.5, np.nan, 0.5, 0.5, 0.5])
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"weight .*\(first at index 1\)"):
        T.simple_cycle(5, bad)
    with pytest.raises(eqx.EquinoxRuntimeError, match="feedback_weight"):
        eqx.filter_jit(lambda w: T.delay_line_backward(4, 0.5, w))(jnp.inf)


def _memory(n, W, W_in):
    reg = orc.regression.ESNRegressor(1, 1, n)
    reg = eqx.tree_at(
        lambda m: (m.driver, m.embedding),
        reg,
        (
            ESNDriver.from_matrices(W, leak=1.0, bias=0.0),
            LinearEmbedding.from_matrices(W_in),
        ),
    )
    u = np.random.default_rng(0).uniform(-0.8, 0.8, 5000)
    return float(orc.metrics.memory_capacity(reg, 2 * n, series=u, test_size=1000))


def test_cycle_with_aperiodic_input_signs_remembers_its_size():
    """Rodan & Tiňo 2011: a linear ring (here tanh at 1% input, nearly linear)
    whose input signs are aperiodic has memory capacity close to its size N;
    with one sign for every input weight it is close to nothing. A random
    sparse reservoir of the same size and radius falls in between."""
    n = 20
    ring = T.simple_cycle(n, 0.9)
    aperiodic = _memory(n, ring, T.minimal_input(n, 1, 0.01))
    one_sign = _memory(n, ring, np.full((n, 1), 0.01))
    reg = orc.regression.ESNRegressor(
        1, 1, n, leak_rate=1.0, bias=0.0, Wr_spectral_radius=0.9,
        embedding_scaling=0.01, Wr_density=0.2,
    )  # fmt: skip
    u = np.random.default_rng(0).uniform(-0.8, 0.8, 5000)
    random = float(orc.metrics.memory_capacity(reg, 2 * n, series=u, test_size=1000))
    assert 0.9 * n < aperiodic <= n + 0.5
    assert one_sign < 0.1 * n
    assert one_sign < random < aperiodic


# --------------------------------------------------------------------------- #
# Input layers from maps, and blocks
# --------------------------------------------------------------------------- #


def _sine_row(amplitude, divisor, count, phases):
    return amplitude * np.sin(np.asarray(phases) * np.pi / (divisor * count))


def test_chebyshev_input_iterates_the_map():
    a, d, p = 0.9, 1.5, 2.5
    W = np.asarray(T.chebyshev_input(7, 4, amplitude=a, sine_divisor=d,
                                     chebyshev_parameter=p))  # fmt: skip
    expected = [_sine_row(a, d, 4, [1, 2, 3, 4])]
    for _ in range(6):
        expected.append(np.cos(p * np.arccos(expected[-1])))
    np.testing.assert_allclose(W, np.array(expected), rtol=0, atol=1e-14)
    # ReservoirComputing.jl's documented example: (10, 3), entries in [-1, 1]
    plain = np.asarray(T.chebyshev_input(10, 3))
    assert plain.shape == (10, 3) and np.all(np.abs(plain) <= 1)
    np.testing.assert_allclose(plain, np.broadcast_to(plain[0], (10, 3)), atol=1e-15)
    with pytest.raises(ValueError, match="amplitude must lie in"):
        T.chebyshev_input(3, 2, amplitude=1.5)


def test_logistic_input_iterates_the_map():
    W = np.asarray(T.logistic_input(30, 3))
    rows = [_sine_row(0.3, 5.9, 3, [1, 2, 3])]
    for _ in range(29):
        rows.append(3.7 * rows[-1] * (1 - rows[-1]))
    # chaotic: the two recurrences part by rounding alone, a few bits a step
    np.testing.assert_allclose(W[:10], np.array(rows[:10]), rtol=1e-12)
    assert np.all((W >= 0) & (W <= 1))  # RC.jl's documented example's property
    single = np.asarray(T.logistic_input(30, 3, dtype=jnp.float32))
    assert single.dtype == np.float32
    # each row is the map of the row above as stored (float32), taken in float64
    prev = single[:-1].astype(np.float64)
    np.testing.assert_array_equal(
        single[1:], (3.7 * prev * (1 - prev)).astype(np.float32)
    )
    with pytest.raises(ValueError, match="left the real numbers"):
        T.logistic_input(
            200, 2, amplitude=1.0, sine_divisor=1.0, logistic_parameter=9.0
        )


def test_modified_logistic_input_chains():
    # ReservoirComputing.jl's documented examples: input 0's chain is zero
    W = np.asarray(T.modified_logistic_input(20, 10))
    assert W.shape == (20, 10) and np.count_nonzero(W) == 18
    assert np.count_nonzero(np.asarray(T.modified_logistic_input(12, 4))) == 9
    W = np.asarray(T.modified_logistic_input(12, 3, logistic_parameter=3.2))
    for j in range(3):
        chain = [_sine_row(0.3, 5.9, 12, j)]
        for _ in range(3):
            chain.append(3.2 * chain[-1] * (1 - chain[-1]))
        np.testing.assert_allclose(W[4 * j : 4 * j + 4, j], chain, rtol=1e-14)
    assert np.count_nonzero(W[:4, 1:]) == np.count_nonzero(W[4:8, [0, 2]]) == 0
    with pytest.raises(ValueError, match="multiple of in_dim"):
        T.modified_logistic_input(10, 3)


def test_weighted_minimal_input_blocks():
    # ReservoirComputing.jl's documented example: 9 x 3, three 0.99s a column
    W = np.asarray(T.weighted_minimal_input(9, 3, 0.99))
    np.testing.assert_array_equal(W, 0.99 * np.kron(np.eye(3), np.ones((3, 1))))
    signed = np.asarray(T.weighted_minimal_input(9, 3, 0.5, signs="pi"))
    np.testing.assert_array_equal(
        signed, np.asarray(T.minimal_input(9, 3, 0.5)) * (W != 0)
    )
    with pytest.raises(ValueError, match="6 or 9 would do"):
        T.weighted_minimal_input(8, 3, 0.1)
    many = jax.vmap(lambda w: T.weighted_minimal_input(6, 2, w))(jnp.array([0.1, 0.2]))
    np.testing.assert_allclose(many[1], 2 * many[0])


def test_map_input_layers_are_built_on_the_host():
    with pytest.raises(TypeError, match="amplitude must be a concrete number"):
        jax.jit(lambda a: T.logistic_input(5, 2, amplitude=a))(0.3)
