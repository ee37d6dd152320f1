"""Deterministic reservoirs and input layers: rings, delay lines, jumps.

Rodan and Tiňo showed that reservoirs with almost no randomness forecast and
remember as well as random sparse ones (Rodan & Tiňo 2011, "Minimum
complexity echo state network", IEEE TNN 22(1); 2012, "Simple deterministically
constructed cycle reservoirs with regular jumps", Neural Computation 24(7)).
These builders make their matrices; ReservoirComputing.jl calls them
``delay_line``, ``delay_line_backward``, ``simple_cycle``, ``cycle_jumps``,
``double_cycle``, ``true_doublecycle``, the ``selfloop_*`` builders,
``block_diagonal``, ``minimal_init``, ``weighted_minimal``,
``chebyshev_mapping``, ``logistic_mapping`` and ``modified_lm`` and uses the
same layout, so its users find their matrices entry for entry here (for
weights given as numbers). Its random initializers are
:mod:`orc.initializers`.

- :func:`delay_line` (DLR): unit ``i`` feeds unit ``i + shift``.
- :func:`delay_line_backward` (DLRB): a delay line whose units also feed
  their predecessors.
- :func:`simple_cycle` (SCR): a delay line closed into a ring, ``N - 1``
  feeding ``0``.
- :func:`cycle_jumps` (CRJ): the ring with two-way shortcuts every
  ``jump_size`` units.
- :func:`double_cycle`, :func:`true_double_cycle`: rings both ways (after Fu
  et al. 2023).
- :func:`selfloop_cycle`, :func:`selfloop_backward_cycle`,
  :func:`selfloop_delayline_backward`, :func:`selfloop_forward_connection`:
  Elsarraj et al.'s (2019) TP1-TP4, rings and delay lines with self-loops
  (TP5 is ``delay_line(N, w, shift=2)``).
- :func:`block_diagonal`: constant square blocks on the diagonal (Ma et al.
  2023), small all-to-all reservoirs side by side.
- :func:`minimal_input`: an input matrix whose entries are all ``weight`` in
  magnitude, with signs from the decimal digits of pi (or yours).
- :func:`weighted_minimal_input`: each input feeding its own block of units
  with one weight (Lu et al. 2017).
- :func:`chebyshev_input`, :func:`logistic_input`,
  :func:`modified_logistic_input`: input weights from iterated chaotic maps
  (Xie et al. 2024; Wang et al. 2022; Viehweg et al. 2025).
- :func:`pi_signs`: those signs, ``+1``/``-1`` per decimal digit of pi.

Matrix entries follow the update ``r' = f(W r + W_in u)``: ``W[i, j]`` is what
unit ``j`` sends to unit ``i``.

A reservoir comes as an :class:`orc.drivers.ReservoirMatrix` (each row's
entries; a ring has one per row, so a step costs ``N`` multiply-adds): pass it
to :meth:`orc.drivers.ESNDriver.from_matrices` (or the parallel driver's),
which takes it as given, unscaled. A ring of weight ``w`` has spectral radius
``|w|`` exactly; a delay line has spectral radius 0 (its memory is the length
of the line), so asking ``from_matrices`` to scale one to a radius is refused.

The weights are data: a number, or one value per connection (signed as you
like, e.g. ``w * pi_signs(n)``). They may be traced, so a population of rings
of different weights is ``jax.vmap(lambda w: simple_cycle(500, w))(ws)``; the
sizes (``res_dim``, ``shift``, ``jump_size``) are static.

Example
-------
>>> W = simple_cycle(300, 0.9)
>>> driver = orc.drivers.ESNDriver.from_matrices(W, leak=1.0, bias=0.0)
>>> embedding = orc.embeddings.LinearEmbedding.from_matrices(minimal_input(300, 1, 0.5))
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._defaults import MATRICES
from ._matrix import ReservoirMatrix
from ._validation import (
    check_dtype,
    check_finite,
    check_finite_rows,
    check_float,
    check_int,
    device_array,
)

__all__ = [
    "delay_line",
    "delay_line_backward",
    "simple_cycle",
    "cycle_jumps",
    "double_cycle",
    "true_double_cycle",
    "selfloop_cycle",
    "selfloop_backward_cycle",
    "selfloop_delayline_backward",
    "selfloop_forward_connection",
    "block_diagonal",
    "minimal_input",
    "weighted_minimal_input",
    "chebyshev_input",
    "logistic_input",
    "modified_logistic_input",
    "pi_signs",
]


# --------------------------------------------------------------------------- #
# The decimal digits of pi, for the signs
# --------------------------------------------------------------------------- #


def _pi_scaled(digits: int) -> int:
    """``floor(pi * 10**digits)``, within one unit, by the Chudnovsky series
    summed with binary splitting (exact integer arithmetic; about 14 digits a
    term)."""
    # the series' constants (Chudnovsky & Chudnovsky, 1988)
    a, b, c3_24 = 13591409, 545140134, 640320**3 // 24

    def split(lo: int, hi: int) -> tuple[int, int, int]:
        if hi - lo == 1:
            if lo == 0:
                p = q = 1
            else:
                p = (6 * lo - 5) * (2 * lo - 1) * (6 * lo - 1)
                q = lo * lo * lo * c3_24
            t = p * (a + b * lo)
            return p, q, -t if lo % 2 else t
        mid = (lo + hi) // 2
        p1, q1, t1 = split(lo, mid)
        p2, q2, t2 = split(mid, hi)
        return p1 * p2, q1 * q2, q2 * t1 + p1 * t2

    guard = 10  # digits computed beyond those returned
    one = 10 ** (digits + guard)
    _, q, t = split(0, digits // 14 + 2)
    root = math.isqrt(10005 * one * one)
    return (q * 426880 * root // t) // 10**guard


@functools.cache
def _pi_decimals(count: int) -> np.ndarray:
    """The first ``count`` decimal digits of pi after the point (1, 4, 1, 5, ...)."""
    # two digits more than asked: the last one computed may be off by one
    text = _decimal(_pi_scaled(count + 2), count + 3)
    return (np.frombuffer(text[1 : count + 1].encode(), np.uint8) - ord("0")).astype(
        int
    )


def _decimal(x: int, width: int) -> str:
    """``x``'s ``width`` decimal digits (zero-padded), halving the number
    until each piece is short enough for Python's ``str`` (which refuses
    more than 4300 digits by default)."""
    if width <= 1000:
        return f"{x:0{width}d}"
    low = width // 2
    high, rest = divmod(x, 10**low)
    return _decimal(high, width - low) + _decimal(rest, low)


def pi_signs(n: int, start: int = 1, dtype=None) -> Float[Array, " n"]:
    """Signs from the decimal digits of pi: ``-1`` where a digit is odd.

    Entry ``k`` is the sign of decimal digit ``start + k`` of pi (digits
    counted from 1 after the point: 1, 4, 1, 5, 9, 2, 6, ...), so the
    default starts ``-1, +1, -1, -1, -1, +1, +1``. This is ReservoirComputing.jl's
    ``irrational_sample!`` rule (``irrational=pi``), a deterministic stand-in
    for random signs (Rodan & Tiňo 2011 took their input signs from pi's
    digits too).

    Parameters
    ----------
    n : int
        Number of signs, >= 1.
    start : int, default 1
        The digit the first sign comes from, >= 1.
    dtype : jnp.float32 or jnp.float64, optional
        Default JAX's default float.

    Returns
    -------
    Array of shape ``(n,)``, entries ``+1`` or ``-1``.

    Example
    -------
    >>> pi_signs(4)
    Array([-1.,  1., -1., -1.], dtype=float64)
    """
    n = check_int("n", n, "pi_signs", minimum=1)
    start = check_int("start", start, "pi_signs", minimum=1)
    digits = _pi_decimals(start - 1 + n)[start - 1 :]
    return jnp.asarray(1 - 2 * (digits % 2), check_dtype(dtype, "pi_signs"))


# --------------------------------------------------------------------------- #
# Reservoirs
# --------------------------------------------------------------------------- #


def _weights(owner: str, name: str, weight, count: int, dtype, per="connection"):
    """``weight`` (a number or one value per ``per``) as ``(count,)`` of
    ``dtype``: a NumPy array for a concrete weight (built on the host, no
    program compiled per size), a JAX one for a traced weight. Non-finite
    values raise (also under ``jax.jit``)."""
    traced = isinstance(weight, jax.core.Tracer)
    xp = jnp if traced else np
    w = xp.asarray(weight)
    if not (np.issubdtype(w.dtype, np.floating) or np.issubdtype(w.dtype, np.integer)):
        raise TypeError(f"{owner}: {name} must be real, got dtype {w.dtype}")
    if w.shape not in ((), (count,)):
        raise ValueError(
            f"{owner}: {name} must be a number or one value per {per}, "
            f"shape ({count},), got shape {tuple(w.shape)}"
        )
    if not traced:
        check_finite_rows(w, name, owner)
        return np.broadcast_to(w.astype(dtype), (count,))
    return check_finite(jnp.broadcast_to(w.astype(dtype), (count,)), name, owner)


def _dtype(owner: str, dtype, *weights):
    """``dtype``, or (None) that of the floating arrays among ``weights``
    when all are float32, else JAX's default float (as the data builders)."""
    if dtype is None:
        floats = [
            jnp.dtype(w.dtype)
            for w in weights
            if hasattr(w, "dtype") and jnp.issubdtype(w.dtype, jnp.floating)
        ]
        if floats and all(f == jnp.dtype(jnp.float32) for f in floats):
            return jnp.dtype(jnp.float32)
    return check_dtype(dtype, owner)


def _size(owner: str, res_dim) -> int:
    return check_int("res_dim", res_dim, owner, minimum=2)


def _ell(rows: list[tuple[np.ndarray, np.ndarray, Array]], n: int, dtype):
    """The :class:`ReservoirMatrix` of connections given as groups ``(targets,
    sources, weights)`` (a unit receives at most once per group): one
    stored entry per group and row, zero where a row gets none of a group.
    On the host unless a weight is traced."""
    columns = np.zeros((n, len(rows)), np.int32)
    if any(isinstance(w, jax.core.Tracer) for *_, w in rows):
        values = jnp.zeros((n, len(rows)), dtype)
        for slot, (targets, sources, weights) in enumerate(rows):
            values = values.at[targets, slot].set(weights)
            columns[targets, slot] = sources
    else:
        values = np.zeros((n, len(rows)), dtype)
        for slot, (targets, sources, weights) in enumerate(rows):
            values[targets, slot] = weights
            columns[targets, slot] = sources
    return ReservoirMatrix(jnp.asarray(values), jnp.asarray(columns))


def _connections(owner: str, n: int, dtype, groups) -> ReservoirMatrix:
    """The :class:`ReservoirMatrix` of ``groups`` of connections ``(name,
    weight, targets, sources)``: ``weight`` (a number or one value per
    connection, checked under ``name``) on ``sources[k] -> targets[k]``, a
    unit the target at most once per group. ``dtype`` as the builders take
    it (``None``: from the weights)."""
    dtype = _dtype(owner, dtype, *(weight for _, weight, _, _ in groups))
    rows = [(targets, sources, _weights(owner, name, weight, len(targets), dtype))
            for name, weight, targets, sources in groups]  # fmt: skip
    return _ell(rows, n, dtype)


def delay_line(res_dim: int, weight, *, shift: int = 1, dtype=None) -> ReservoirMatrix:
    """A delay line reservoir (DLR): ``W[i + shift, i] = weight``.

    Unit ``i`` feeds unit ``i + shift``; the first ``shift`` units receive
    nothing from the reservoir (only the input). Spectral radius 0.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    weight : float or array ``(N - shift,)``
        The connections' weight, or one per connection (``weight[i]`` on
        ``i -> i + shift``). May be traced.
    shift : int, default 1
        Distance of each connection, ``1 <= shift < N``. Static.
    dtype : jnp.float32 or jnp.float64, optional
        Default float32 if ``weight`` is a float32 array, else JAX's default float.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, one stored entry per row.

    Example
    -------
    >>> W = delay_line(5, 0.5)
    >>> W.todense()[1:, :-1]   # 0.5 on the sub-diagonal
    """
    owner = "delay_line"
    n = _size(owner, res_dim)
    shift = check_int("shift", shift, owner, minimum=1, maximum=n - 1)
    src = np.arange(n - shift)
    return _connections(owner, n, dtype, [("weight", weight, src + shift, src)])


def delay_line_backward(
    res_dim: int, weight, feedback_weight, *, dtype=None
) -> ReservoirMatrix:
    """A delay line with feedback (DLRB): ``W[i + 1, i] = weight`` and
    ``W[i, i + 1] = feedback_weight``.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    weight : float or array ``(N - 1,)``
        Forward connections ``i -> i + 1``, a number or one per connection.
    feedback_weight : float or array ``(N - 1,)``
        Backward connections ``i + 1 -> i``, a number or one per connection.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, two stored entries per row.

    Example
    -------
    >>> W = delay_line_backward(100, 0.5, 0.05)
    """
    owner = "delay_line_backward"
    n = _size(owner, res_dim)
    src = np.arange(n - 1)
    groups = [("weight", weight, src + 1, src),
              ("feedback_weight", feedback_weight, src, src + 1)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def simple_cycle(res_dim: int, weight, *, dtype=None) -> ReservoirMatrix:
    """A simple cycle reservoir (SCR): ``W[(i + 1) % N, i] = weight``.

    A ring: unit ``i`` feeds unit ``i + 1`` and the last unit feeds the
    first. With one weight ``w`` the spectral radius is ``|w|``.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    weight : float or array ``(N,)``
        The ring's weight, or one per connection (``weight[i]`` on
        ``i -> (i + 1) % N``; signed with :func:`pi_signs`, say).
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, one stored entry per row.

    Example
    -------
    >>> W = simple_cycle(500, 0.9)
    >>> W_signed = simple_cycle(500, 0.9 * pi_signs(500))
    """
    owner = "simple_cycle"
    n = _size(owner, res_dim)
    src = np.arange(n)
    return _connections(owner, n, dtype, [("weight", weight, (src + 1) % n, src)])


def _jump_path(n: int, jump_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The jumps of a CRJ: units ``0, l, 2l, ...`` joined in turn, and the
    last back to unit 0 when ``l`` divides ``N`` (Rodan & Tiňo 2012). Each
    jump joins ``a[k]`` and ``b[k]``; each unit is in ``a`` at most once and
    in ``b`` at most once."""
    stops = np.arange(0, n, jump_size)
    if n % jump_size == 0 and len(stops) > 2:  # the jumps close into a ring
        return stops, np.roll(stops, -1)
    return stops[:-1], stops[1:]


def cycle_jumps(
    res_dim: int, cycle_weight, jump_weight, jump_size: int = 3, *, dtype=None
) -> ReservoirMatrix:
    """A cycle reservoir with regular jumps (CRJ): :func:`simple_cycle` plus
    two-way connections of weight ``jump_weight`` between units ``0, l, 2l,
    ...`` in turn (``l = jump_size``), the last joined back to unit 0 when
    ``l`` divides ``N``.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    cycle_weight : float or array ``(N,)``
        The ring's weight, or one per connection, as for :func:`simple_cycle`.
    jump_weight : float or array ``(J,)``
        The jumps' weight, or one per jump (both directions of a jump share
        it); ``J = N // l - 1``, plus one when ``l`` divides ``N`` (and
        ``N // l > 2``).
    jump_size : int, default 3
        Distance ``l`` between jumping units, ``2 <= l <= N // 2``. Static.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, three stored entries per row (the
    ring's and up to two jumps').

    Example
    -------
    >>> W = cycle_jumps(300, 0.7, 0.3, jump_size=5)
    """
    owner = "cycle_jumps"
    n = _size(owner, res_dim)
    if n < 4:
        raise ValueError(f"{owner}: res_dim must be >= 4 for jumps, got {n}")
    jump_size = check_int("jump_size", jump_size, owner, minimum=2, maximum=n // 2)
    src = np.arange(n)
    a, b = _jump_path(n, jump_size)
    # a unit is at most once in a and once in b: one stored entry for each
    groups = [("cycle_weight", cycle_weight, (src + 1) % n, src),
              ("jump_weight", jump_weight, a, b), ("jump_weight", jump_weight, b, a)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def _at_least_three(owner: str, res_dim) -> int:
    """Two rings on the same units need three of them (on two, the rings'
    connections would be the same entries)."""
    n = _size(owner, res_dim)
    if n < 3:
        raise ValueError(f"{owner}: res_dim must be >= 3 for two rings, got {n}")
    return n


def _shift(owner: str, name: str, shift, n: int) -> int:
    return check_int(name, shift, owner, minimum=1, maximum=n - 1)


def double_cycle(res_dim: int, weight, second_weight, *, dtype=None) -> ReservoirMatrix:
    """ReservoirComputing.jl's double cycle (after Fu et al. 2023): the band
    below the diagonal holds ``weight``, the band above ``second_weight``,
    each with its wrap-around corner.

    ``W[i + 1, i] = weight`` and ``W[N - 1, 0] = weight``; ``W[i, i + 1] =
    second_weight`` and ``W[0, N - 1] = second_weight``. With one weight
    for both, a ring in both directions. With two, the units' forward
    connections carry ``weight`` except that ``N - 1 -> 0`` carries
    ``second_weight`` (and ``0 -> N - 1`` carries ``weight``): not two rings
    of their own weights. :func:`true_double_cycle` builds those.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 3. Static.
    weight : float or array ``(N,)``
        The lower band: ``weight[i]`` on ``i -> i + 1`` for ``i < N - 1``,
        ``weight[N - 1]`` on ``0 -> N - 1``.
    second_weight : float or array ``(N,)``
        The upper band: ``second_weight[i]`` on ``i + 1 -> i`` for
        ``i < N - 1``, ``second_weight[N - 1]`` on ``N - 1 -> 0``.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, two stored entries per row.

    Example
    -------
    >>> W = double_cycle(300, 0.45, 0.45)   # a two-way ring, spectral radius 0.9
    """
    owner = "double_cycle"
    n = _at_least_three(owner, res_dim)
    dtype = _dtype(owner, dtype, weight, second_weight)
    lower = _weights(owner, "weight", weight, n, dtype)
    upper = _weights(owner, "second_weight", second_weight, n, dtype)
    src = np.arange(n - 1)
    groups = [("weight", lower[:-1], src + 1, src),
              ("weight", lower[-1:], [n - 1], [0]),
              ("second_weight", upper[:-1], src, src + 1),
              ("second_weight", upper[-1:], [0], [n - 1])]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def true_double_cycle(
    res_dim: int, weight, second_weight, *, dtype=None
) -> ReservoirMatrix:
    """Two rings on the same units, one each way: ``W[(i + 1) % N, i] =
    weight`` (the :func:`simple_cycle`) and ``W[i, (i + 1) % N] =
    second_weight`` (ReservoirComputing.jl's ``true_doublecycle``).

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 3. Static.
    weight : float or array ``(N,)``
        The forward ring, ``weight[i]`` on ``i -> (i + 1) % N``.
    second_weight : float or array ``(N,)``
        The backward ring, ``second_weight[i]`` on ``(i + 1) % N -> i``.
        (For one weight per connection ReservoirComputing.jl reads its
        arrays in another order; numbers give the same matrix.)
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, two stored entries per row.

    Example
    -------
    >>> W = true_double_cycle(300, 0.6, 0.3)
    """
    owner = "true_double_cycle"
    n = _at_least_three(owner, res_dim)
    src = np.arange(n)
    groups = [("weight", weight, (src + 1) % n, src),
              ("second_weight", second_weight, src, (src + 1) % n)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def selfloop_cycle(
    res_dim: int, cycle_weight, selfloop_weight, *, dtype=None
) -> ReservoirMatrix:
    """A ring with a self-loop on every unit (Elsarraj et al. 2019's TP1):
    :func:`simple_cycle` plus ``W[i, i] = selfloop_weight``.

    With one weight each, the eigenvalues are ``selfloop_weight +
    cycle_weight * z`` over the ``N``-th roots of unity ``z``.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    cycle_weight : float or array ``(N,)``
        As :func:`simple_cycle`'s ``weight``.
    selfloop_weight : float or array ``(N,)``
        ``selfloop_weight[i]`` on ``i -> i``.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, two stored entries per row.

    Example
    -------
    >>> W = selfloop_cycle(300, 0.5, 0.4)    # spectral radius 0.9
    """
    owner = "selfloop_cycle"
    n = _size(owner, res_dim)
    src = np.arange(n)
    groups = [("cycle_weight", cycle_weight, (src + 1) % n, src),
              ("selfloop_weight", selfloop_weight, src, src)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def selfloop_backward_cycle(
    res_dim: int, cycle_weight, selfloop_weight, feedback_weight, *, dtype=None
) -> ReservoirMatrix:
    """A ring with self-loops on the even units and a feedback connection
    from each odd unit to the one before it (Elsarraj et al. 2019's TP2;
    ReservoirComputing.jl's ``selfloop_backward_cycle``; units counted from
    0, so its odd units are these even ones).

    :func:`simple_cycle`, plus ``W[i, i] = selfloop_weight`` for even ``i``
    and ``W[j - 1, j] = feedback_weight`` for odd ``j``.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    cycle_weight : float or array ``(N,)``
        As :func:`simple_cycle`'s ``weight``.
    selfloop_weight : float or array ``((N + 1) // 2,)``
        ``selfloop_weight[k]`` on unit ``2 k``'s self-loop.
    feedback_weight : float or array ``(N // 2,)``
        ``feedback_weight[k]`` on ``2 k + 1 -> 2 k``.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, three stored entries per row (the
    ring's, and a self-loop or a feedback where a row has one).

    Example
    -------
    >>> W = selfloop_backward_cycle(300, 0.5, 0.3, 0.2)
    """
    owner = "selfloop_backward_cycle"
    n = _size(owner, res_dim)
    src = np.arange(n)
    even, odd = src[0::2], src[1::2]
    groups = [("cycle_weight", cycle_weight, (src + 1) % n, src),
              ("selfloop_weight", selfloop_weight, even, even),
              ("feedback_weight", feedback_weight, odd - 1, odd)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def selfloop_delayline_backward(
    res_dim: int,
    delay_weight,
    selfloop_weight,
    feedback_weight,
    *,
    delay_shift: int = 1,
    feedback_shift: int = 2,
    dtype=None,
) -> ReservoirMatrix:
    """A delay line with self-loops and backward connections (Elsarraj et
    al. 2019's TP3; ReservoirComputing.jl's ``selfloop_delayline_backward``).

    ``W[i + delay_shift, i] = delay_weight``, ``W[i, i] = selfloop_weight``
    and ``W[i, i + feedback_shift] = feedback_weight``.

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    delay_weight : float or array ``(N - delay_shift,)``
        ``delay_weight[i]`` on ``i -> i + delay_shift``.
    selfloop_weight : float or array ``(N,)``
    feedback_weight : float or array ``(N - feedback_shift,)``
        ``feedback_weight[i]`` on ``i + feedback_shift -> i``.
    delay_shift : int, default 1
        ``1 <= delay_shift < N``. Static.
    feedback_shift : int, default 2
        ``1 <= feedback_shift < N``. Static.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, three stored entries per row.

    Example
    -------
    >>> W = selfloop_delayline_backward(300, 0.5, 0.3, 0.1)
    """
    owner = "selfloop_delayline_backward"
    n = _size(owner, res_dim)
    d = _shift(owner, "delay_shift", delay_shift, n)
    f = _shift(owner, "feedback_shift", feedback_shift, n)
    src = np.arange(n)
    groups = [("delay_weight", delay_weight, src[: n - d] + d, src[: n - d]),
              ("selfloop_weight", selfloop_weight, src, src),
              ("feedback_weight", feedback_weight, src[: n - f], src[: n - f] + f)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def selfloop_forward_connection(
    res_dim: int, forward_weight, selfloop_weight, *, shift: int = 2, dtype=None
) -> ReservoirMatrix:
    """Self-loops and forward connections over ``shift`` units (Elsarraj et
    al. 2019's TP4; ReservoirComputing.jl's ``selfloop_forwardconnection``):
    ``W[i, i] = selfloop_weight``, ``W[i + shift, i] = forward_weight``.

    (TP5, ReservoirComputing.jl's ``forward_connection``, is the forward
    connections alone: ``delay_line(res_dim, weight, shift=2)``.)

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    forward_weight : float or array ``(N - shift,)``
        ``forward_weight[i]`` on ``i -> i + shift``.
    selfloop_weight : float or array ``(N,)``
    shift : int, default 2
        ``1 <= shift < N``. Static.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, two stored entries per row.

    Example
    -------
    >>> W = selfloop_forward_connection(300, 0.5, 0.9)
    """
    owner = "selfloop_forward_connection"
    n = _size(owner, res_dim)
    shift = _shift(owner, "shift", shift, n)
    src = np.arange(n)
    groups = [("forward_weight", forward_weight, src[: n - shift] + shift, src[: n - shift]),
              ("selfloop_weight", selfloop_weight, src, src)]  # fmt: skip
    return _connections(owner, n, dtype, groups)


def block_diagonal(
    res_dim: int, weight, *, block_size: int = 1, dtype=None
) -> ReservoirMatrix:
    """Square blocks of one value each on the diagonal (Ma et al. 2023,
    "Efficient forecasting of chaotic systems with block-diagonal and binary
    reservoir computing", Chaos 33; ReservoirComputing.jl's
    ``block_diagonal``): ``W[i, j] = weight[b]`` where units ``i`` and ``j``
    both lie in block ``b`` (units ``b s`` to ``b s + s - 1`` for
    ``s = block_size``), else 0.

    Each block is a small all-to-all reservoir of its own, uncoupled from the
    others. A block of ``m`` units and value ``w`` has spectral radius
    ``m |w|``, so the matrix's is the largest of those. When ``block_size``
    does not divide ``N`` the last block is smaller (``N mod s`` units).

    Parameters
    ----------
    res_dim : int
        Number of units ``N``, >= 2. Static.
    weight : float or array ``(ceil(N / block_size),)``
        One value for every block, or one per block.
    block_size : int, default 1
        ``1 <= block_size <= N``; 1 gives the diagonal matrix of the weights.
        Static.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    ReservoirMatrix of shape ``(N, N)``, ``block_size`` stored entries per row.

    Example
    -------
    >>> W = block_diagonal(300, 0.09, block_size=10)   # spectral radius 0.9
    """
    owner = "block_diagonal"
    n = _size(owner, res_dim)
    s = check_int("block_size", block_size, owner, minimum=1, maximum=n)
    blocks = -(-n // s)
    dtype = _dtype(owner, dtype, weight)
    per_block = _weights(owner, "weight", weight, blocks, dtype, per="block")
    units = np.arange(n)
    start = units // s * s
    groups = []
    for k in range(s):  # the k-th unit of each block feeds its whole block
        targets = units[start + k < n]
        groups.append(("weight", per_block[targets // s], targets, start[targets] + k))
    return _connections(owner, n, dtype, groups)


# --------------------------------------------------------------------------- #
# Input layer
# --------------------------------------------------------------------------- #


def _input_size(owner: str, res_dim, in_dim) -> tuple[int, int]:
    return (
        check_int("res_dim", res_dim, owner, minimum=1),
        check_int("in_dim", in_dim, owner, minimum=1),
    )


def input_blocks(owner: str, res_dim, in_dim) -> tuple[int, int, int]:
    """``(res_dim, in_dim, q)`` of an input layer in which each input feeds
    its own block of ``q = res_dim // in_dim`` units (``res_dim`` must be a
    multiple of ``in_dim``)."""
    n, m = _input_size(owner, res_dim, in_dim)
    if n % m:
        low = n - n % m
        raise ValueError(
            f"{owner}: res_dim must be a multiple of in_dim (each input feeds "
            f"res_dim // in_dim units), got res_dim={n}, in_dim={m}; "
            f"{f'{low} or ' if low else ''}{low + m} would do"
        )
    return n, m, n // m


def _signs(owner: str, signs, n: int, m: int, dtype):
    """The ``(n, m)`` signs of an input layer: ``"pi"`` (:func:`pi_signs`
    read down the columns) or the given array of ``+1``/``-1``."""
    if isinstance(signs, str):
        if signs != "pi":
            raise ValueError(f"{owner}: signs must be 'pi' or an array, got {signs!r}")
        return pi_signs(n * m, dtype=dtype).reshape(m, n).T
    s = jnp.asarray(signs)
    if s.shape != (n, m):
        raise ValueError(
            f"{owner}: signs must have shape ({n}, {m}), got {tuple(s.shape)}"
        )
    return s.astype(dtype)


def _magnitude(owner: str, weight, dtype):
    if np.ndim(weight) != 0:
        raise ValueError(
            f"{owner}: weight must be a number (the entries' magnitude), got "
            f"shape {np.shape(weight)}; for entries of your own, pass the matrix "
            "to from_matrices directly"
        )
    return _weights(owner, "weight", weight, 1, dtype)[0]


def minimal_input(
    res_dim: int, in_dim: int, weight, *, signs="pi", dtype=None
) -> Float[Array, "res_dim in_dim"]:
    """An input matrix of one magnitude: ``W_in[i, j] = weight * s[i, j]``.

    Rodan & Tiňo's input layer: every unit sees every input with the same
    weight, and only the signs vary, here deterministic by default.

    Parameters
    ----------
    res_dim, in_dim : int
        The matrix is ``(res_dim, in_dim)``, as
        :meth:`orc.embeddings.LinearEmbedding.from_matrices` takes it.
    weight : float
        The entries' magnitude (their value before the signs). May be traced.
    signs : "pi" or array ``(res_dim, in_dim)``, default "pi"
        ``"pi"``: :func:`pi_signs` read down the columns (entry ``(i, j)``
        takes sign ``j * res_dim + i``, ReservoirComputing.jl's order for
        ``minimal_init(; sampling_type=:irrational_sample!)``). An array of
        ``+1``/``-1`` for signs of your own, e.g. random ones from
        ``jax.random.rademacher(key, (res_dim, in_dim))``.
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    Array of shape ``(res_dim, in_dim)``.

    Example
    -------
    >>> W_in = minimal_input(100, 3, 0.1)
    >>> embedding = orc.embeddings.LinearEmbedding.from_matrices(W_in)
    """
    owner = "minimal_input"
    n, m = _input_size(owner, res_dim, in_dim)
    dtype = _dtype(owner, dtype, weight)
    return _magnitude(owner, weight, dtype) * _signs(owner, signs, n, m, dtype)


def weighted_minimal_input(
    res_dim: int, in_dim: int, weight, *, signs=None, dtype=None
) -> Float[Array, "res_dim in_dim"]:
    """Each input feeds its own block of units, all with one weight (Lu et al. 2017).

    Input ``j`` feeds units ``j * q`` to ``(j + 1) * q - 1``, ``q = res_dim
    // in_dim``: ``W_in[i, i // q] = weight`` (times its sign), every other
    entry zero. ReservoirComputing.jl's ``weighted_minimal``; random
    weights in the same layout are :func:`orc.initializers.weighted_input`.

    Parameters
    ----------
    res_dim, in_dim : int
        ``res_dim`` a multiple of ``in_dim`` (RC.jl rounds ``res_dim`` down
        to one with a warning; here a model's size is yours, so another is
        refused).
    weight : float
        The entries' magnitude. May be traced.
    signs : None, "pi" or array ``(res_dim, in_dim)``, default None
        ``None``: all positive (RC.jl's default ``:no_sample``); ``"pi"``
        and arrays as for :func:`minimal_input` (RC.jl's
        ``:irrational_sample!`` signs every entry of the matrix, zeros
        included, in the same order).
    dtype : jnp.float32 or jnp.float64, optional
        As for :func:`delay_line`.

    Returns
    -------
    Array of shape ``(res_dim, in_dim)``.
    """
    owner = "weighted_minimal_input"
    n, m, q = input_blocks(owner, res_dim, in_dim)
    dtype = _dtype(owner, dtype, weight)
    units = np.arange(n)
    block = np.zeros((n, m), dtype)
    block[units, units // q] = 1
    if signs is not None:
        block = block * _signs(owner, signs, n, m, dtype)
    return _magnitude(owner, weight, dtype) * block


def _host_float(owner: str, name: str, value, **bounds) -> float:
    """A concrete real number (the map input layers are built on the host)."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{owner}: {name} must be a concrete number, got a traced value: "
            "this input layer is built on the host (NumPy), so build it outside "
            "jax.jit/vmap"
        )
    return check_float(name, value, owner, **bounds)


def _sine_row(owner: str, amplitude, sine_divisor, count: int, phases) -> np.ndarray:
    """``amplitude * sin(phases * pi / (sine_divisor * count))``, the first
    row (or chain element) of the map input layers."""
    a = _host_float(owner, "amplitude", amplitude)
    d = _host_float(owner, "sine_divisor", sine_divisor)
    if d == 0:
        raise ValueError(f"{owner}: sine_divisor must not be 0")
    return a * np.sin(phases * np.pi / (d * count))


def _mapped(owner: str, first, step, rows: int, dtype) -> np.ndarray:
    """``rows`` rows, the first ``first``, each next one ``step`` of the one
    before: computed in float64 from the previous row as stored in
    ``dtype``, as RC.jl fills its matrix. On the host."""
    out = np.empty((rows, first.size), dtype)
    out[0] = first
    with np.errstate(over="ignore", invalid="ignore"):  # raised on just below
        for i in range(1, rows):
            out[i] = step(out[i - 1].astype(np.float64))
    if not np.isfinite(out).all():
        raise ValueError(
            f"{owner}: the map left the real numbers (NaN or inf entries); keep "
            "the first row and the map's parameter where the map stays bounded"
        )
    return out


def chebyshev_input(
    res_dim: int,
    in_dim: int,
    *,
    amplitude: float = 1.0,
    sine_divisor: float = 1.0,
    chebyshev_parameter: float = 1.0,
    dtype=None,
) -> Float[Array, "res_dim in_dim"]:
    """An input layer from the Chebyshev map (Xie et al. 2024).

    The first row is ``amplitude * sin(j pi / (sine_divisor * in_dim))`` for
    ``j = 1, ..., in_dim``; each next row is the map of the one above,
    ``x -> cos(chebyshev_parameter * arccos(x))``, entry by entry. Dense and
    deterministic; ReservoirComputing.jl's ``chebyshev_mapping``, computed as
    it computes it (each row in float64 from the row above as stored). With
    the default ``chebyshev_parameter=1`` every row is the first.

    Parameters
    ----------
    res_dim, in_dim : int
    amplitude : float in [-1, 1]
    sine_divisor : float
    chebyshev_parameter : float, default 1.0
    dtype : jnp.float32 or jnp.float64, optional
        Default: JAX's default float.

    Returns
    -------
    Array of shape ``(res_dim, in_dim)``, entries in ``[-1, 1]``. Built on
    the host (the parameters may not be traced).
    """
    owner = "chebyshev_input"
    n, m = _input_size(owner, res_dim, in_dim)
    dtype = check_dtype(dtype, owner)
    _host_float(owner, "amplitude", amplitude, low=-1.0, high=1.0)
    first = _sine_row(owner, amplitude, sine_divisor, m, np.arange(1, m + 1))
    p = _host_float(owner, "chebyshev_parameter", chebyshev_parameter)
    # clipped: a float32 row may round to just outside [-1, 1]
    W = _mapped(owner, first, lambda x: np.cos(p * np.arccos(np.clip(x, -1, 1))),
                n, dtype)  # fmt: skip
    return device_array(W, dtype)


def logistic_input(
    res_dim: int,
    in_dim: int,
    *,
    amplitude: float = MATRICES.sine_amplitude,
    sine_divisor: float = MATRICES.sine_divisor,
    logistic_parameter: float = MATRICES.logistic_parameter,
    dtype=None,
) -> Float[Array, "res_dim in_dim"]:
    """An input layer from the logistic map (Wang et al. 2022).

    The first row is ``amplitude * sin(j pi / (sine_divisor * in_dim))`` for
    ``j = 1, ..., in_dim``; each next row is the map of the one above,
    ``x -> logistic_parameter * x * (1 - x)``. Dense and deterministic;
    ReservoirComputing.jl's ``logistic_mapping``, computed as it computes it
    (each row in float64 from the row above as stored: the map is chaotic at
    the default 3.7, so float32 and float64 rows part after a few dozen).

    Parameters
    ----------
    res_dim, in_dim : int
    amplitude : float
    sine_divisor : float
    logistic_parameter : float
        In ``[0, 4]`` with the first row in ``[0, 1]`` the entries stay in
        ``[0, 1]``; a map that leaves the real numbers raises.
    dtype : as for :func:`chebyshev_input`

    Returns
    -------
    Array of shape ``(res_dim, in_dim)``. Built on the host.
    """
    owner = "logistic_input"
    n, m = _input_size(owner, res_dim, in_dim)
    dtype = check_dtype(dtype, owner)
    first = _sine_row(owner, amplitude, sine_divisor, m, np.arange(1, m + 1))
    r = _host_float(owner, "logistic_parameter", logistic_parameter)
    return device_array(
        _mapped(owner, first, lambda x: r * x * (1 - x), n, dtype), dtype
    )


def modified_logistic_input(
    res_dim: int,
    in_dim: int,
    *,
    amplitude: float = MATRICES.sine_amplitude,
    sine_divisor: float = MATRICES.sine_divisor,
    logistic_parameter: float = MATRICES.chain_logistic_parameter,
    dtype=None,
) -> Float[Array, "res_dim in_dim"]:
    """Each input feeds its own chain of units, weighted by the logistic map
    (Viehweg et al. 2025).

    Input ``j`` (``j = 0, ..., in_dim - 1``) feeds the ``q = res_dim //
    in_dim`` units ``j * q`` to ``(j + 1) * q - 1``; the first with weight
    ``amplitude * sin(j pi / (q * in_dim * sine_divisor))``, each next with
    the logistic map of the one before, ``x -> logistic_parameter * x * (1 -
    x)``; every other entry is zero. ReservoirComputing.jl's ``modified_lm``
    with ``factor = q``, computed as it computes it; as there, input 0's
    chain starts at ``sin(0) = 0`` and stays zero.

    Parameters
    ----------
    res_dim, in_dim : int
        ``res_dim`` a multiple of ``in_dim`` (RC.jl resizes to ``factor *
        in_dim`` rows with a warning).
    amplitude : float
    sine_divisor : float
    logistic_parameter : float
    dtype : as for :func:`chebyshev_input`

    Returns
    -------
    Array of shape ``(res_dim, in_dim)``. Built on the host.
    """
    owner = "modified_logistic_input"
    n, m, q = input_blocks(owner, res_dim, in_dim)
    dtype = check_dtype(dtype, owner)
    first = _sine_row(owner, amplitude, sine_divisor, q * m, np.arange(m))
    r = _host_float(owner, "logistic_parameter", logistic_parameter)
    chains = _mapped(owner, first, lambda x: r * x * (1 - x), q, dtype)
    W = np.zeros((n, m), dtype)
    units = np.arange(n)
    W[units, units // q] = chains[units % q, units // q]
    return device_array(W, dtype)
