"""Random reservoirs and input layers from the literature, drawn from a seed.

ReservoirComputing.jl ships a catalogue of weight initializers; those that
draw random numbers are here (with reservoirpy's sparse draws), the deterministic ones (rings, delay lines, the
minimal and logistic-map input layers) in :mod:`orc.topologies`. Each builds
the construction its paper (and RC.jl) describes, drawn on the host with
NumPy from ``seed`` (an int, a JAX key, a NumPy ``SeedSequence`` or
``Generator``, as the models take it): the same seed gives the same matrix in
every process. The random streams are NumPy's, not Julia's, so a matrix is
the same construction as RC.jl's for the same arguments, not the same
numbers.

Reservoirs:

- :func:`random_sparse`: entries at random places with normal, uniform or
  ``+-1`` values, as reservoirpy draws its reservoirs.
- :func:`pseudo_svd`: a diagonal of chosen singular values turned by random
  Givens rotations until it is as dense as asked (Yang et al. 2018).
- :func:`chaotic`: a ring through all units plus random extra edges, of
  order ``4**d`` (RC.jl's construction after Xie et al. 2024).
- :func:`low_connectivity`: ``in_degree`` random inputs per unit, or one
  random ring (Griffith et al. 2019).
- :func:`permutation`: each unit fed by one other, a random permutation.
- :func:`wigner`: a symmetric Gaussian (Wigner) matrix.
- :func:`lower_triangular`, :func:`band`, :func:`toeplitz`: the diagonal,
  then neighbouring diagonals filled until the density is reached (Cossu et
  al. 2025).
- :func:`dale_sparse`: sparse, with excitatory and inhibitory units
  (Dale's law: a unit's outgoing weights share one sign).
- :func:`hyperbolic`: weights that fall off with the hyperbolic distance
  between random points of a Poincaré ball.

Input layers: :func:`weighted_input` (each input feeds its own block of
units, Lu et al. 2017), :func:`informed_input` (each unit sees one input,
data or knowledge model, Pathak et al. 2018) and :func:`random_sparse_input`
(reservoirpy's sparse ``+-input_scaling`` layer).

Every function takes ``res_dim`` (the number of units, at least 2 for a
reservoir), ``seed`` (keyword, required) and ``dtype`` (``jnp.float32`` or
``jnp.float64``; default JAX's default float). A reservoir comes as an
:class:`orc.drivers.ReservoirMatrix` ``(res_dim, res_dim)`` (each row's
non-zero entries) for :meth:`orc.drivers.ESNDriver.from_matrices`, which
takes it as given; ``W[i, j]`` is what unit ``j`` sends to unit ``i``. An
input layer is an array ``(res_dim, in_dim)`` for
:meth:`orc.embeddings.LinearEmbedding.from_matrices`. Where a function takes
``spectral_radius`` (a number > 0 or ``None``), the matrix is scaled to it
(exact eigenvalues up to 200 units, an Arnoldi estimate above, as the models
scale theirs); ``None`` leaves it as drawn. ``density`` is the fraction of
non-zero entries (RC.jl names some of these ``sparsity``; each function says
how they relate).

Example
-------
>>> W = orc.initializers.low_connectivity(300, in_degree=2, spectral_radius=0.9, seed=0)
>>> driver = orc.drivers.ESNDriver.from_matrices(W, leak=1.0, bias=0.0)
"""

from __future__ import annotations

import math

import numpy as np
from jaxtyping import Array, Float

from ._defaults import MATRICES
from ._matrix import ReservoirMatrix, distinct_columns, ell_from_entries, scaling_radius
from ._random import numpy_rng
from ._validation import check_dtype, check_float, check_int, device_array
from .topologies import input_blocks

__all__ = [
    "random_sparse",
    "pseudo_svd",
    "chaotic",
    "low_connectivity",
    "permutation",
    "wigner",
    "lower_triangular",
    "band",
    "toeplitz",
    "dale_sparse",
    "hyperbolic",
    "weighted_input",
    "informed_input",
    "random_sparse_input",
]


# --------------------------------------------------------------------------- #
# Shared checks and the finished matrix
# --------------------------------------------------------------------------- #


def _size(owner: str, res_dim) -> int:
    return check_int("res_dim", res_dim, owner, minimum=2)


def _density(owner: str, density) -> float:
    return check_float("density", density, owner, low=0.0, high=1.0, low_open=True)


def _radius(owner: str, spectral_radius):
    if spectral_radius is None:
        return None
    return check_float(
        "spectral_radius", spectral_radius, owner, low=0.0, low_open=True
    )


def _reservoir(owner, n, rows, cols, vals, spectral_radius, dtype, *, radius=None):
    """The :class:`ReservoirMatrix` with entries ``vals`` at ``(rows, cols)``,
    scaled to ``spectral_radius`` when one is given (``radius``: the drawn
    matrix's own, where it is known exactly)."""
    dtype = check_dtype(dtype, owner)
    values, columns = ell_from_entries([(rows, cols, vals)], n, np.float64)
    values, columns = values[0], columns[0]
    if spectral_radius is not None:
        rho = scaling_radius(values, columns) if radius is None else radius
        if not rho > 0:
            raise ValueError(
                f"{owner}: the drawn matrix has spectral radius 0 (nilpotent), so "
                "it cannot be scaled to spectral_radius; use another seed or "
                "spectral_radius=None"
            )
        values = values * (spectral_radius / rho)
    return ReservoirMatrix(device_array(values, dtype), device_array(columns, np.int32))


def _dense_reservoir(owner, W, spectral_radius, dtype):
    rows, cols = np.nonzero(W)
    return _reservoir(owner, W.shape[0], rows, cols, W[rows, cols], spectral_radius,
                      dtype)  # fmt: skip


# --------------------------------------------------------------------------- #
# Reservoirs
# --------------------------------------------------------------------------- #


#: The value distributions of :func:`random_sparse` and
#: :func:`random_sparse_input`, by name (reservoirpy's ``dist``).
DISTRIBUTIONS = ("normal", "uniform", "bernoulli")


def _sparse_entries(owner, rng, n_rows, n_cols, density, distribution):
    """``round(density * n_rows * n_cols)`` distinct places (at least one),
    drawn uniformly, and their values: ``N(0, 1)``, ``U(-1, 1)`` or ``+-1``
    with equal odds (scipy.sparse.random's placement, reservoirpy's
    values)."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(
            f"{owner}: distribution must be one of {DISTRIBUTIONS}, got "
            f"{distribution!r}"
        )
    count = max(1, round(_density(owner, density) * n_rows * n_cols))
    places = rng.choice(n_rows * n_cols, size=count, replace=False)
    if distribution == "normal":
        values = rng.standard_normal(count)
    elif distribution == "uniform":
        values = rng.uniform(-1.0, 1.0, count)
    else:
        values = np.where(rng.random(count) < 0.5, -1.0, 1.0)
    return places // n_cols, places % n_cols, values


def random_sparse(
    res_dim: int,
    *,
    seed,
    density: float = MATRICES.density,
    distribution: str = MATRICES.distribution,
    spectral_radius: float | None = None,
    dtype=None,
) -> ReservoirMatrix:
    """A random sparse reservoir as reservoirpy draws one (``mat_gen.random_sparse``).

    ``round(density * res_dim**2)`` entries at places drawn uniformly over
    the whole matrix (so rows hold varying counts, where orc's own
    construction gives each row the same count), with values from
    ``distribution``: ``"normal"`` (reservoirpy's ``Reservoir`` default),
    ``"uniform"`` in ``(-1, 1)`` or ``"bernoulli"`` (``+-1``). reservoirpy's
    ``Reservoir(rc_connectivity=, sr=)`` is ``density=`` and
    ``spectral_radius=`` (its default connectivity is 0.1, this default).
    """
    owner = "random_sparse"
    n = _size(owner, res_dim)
    radius = _radius(owner, spectral_radius)
    rng = numpy_rng(seed, owner)
    rows, cols, vals = _sparse_entries(owner, rng, n, n, density, distribution)
    return _reservoir(owner, n, rows, cols, vals, radius, dtype)


def pseudo_svd(
    res_dim: int,
    *,
    seed,
    max_value: float = 1.0,
    density: float = MATRICES.density,
    sorted: bool = True,
    reverse_sort: bool = False,
    dtype=None,
) -> ReservoirMatrix:
    """A reservoir of chosen singular values (Yang et al. 2018).

    Starts from the diagonal matrix of ``res_dim`` values drawn from
    ``U(0, max_value)`` (sorted ascending with the last set to
    ``max_value``, or descending with the first set to it; as drawn when
    ``sorted=False``) and multiplies it from the right by Givens rotations of
    random planes ``(i, j)``, ``i != j``, and angles in ``(-1, 1)`` radians
    until at least ``density * res_dim**2`` entries are non-zero. Rotations
    are orthogonal, so the singular values stay those of the diagonal: the
    largest is ``max_value`` and bounds the spectral radius.

    RC.jl's ``sparsity`` ``s`` stops at ``nnz / (zeros) > s``: ``density =
    s / (1 + s)`` (its default 0.1 is a density of 0.091). RC.jl may rotate a
    plane ``(i, i)``, which is not a rotation and changes a singular value;
    here ``i != j``.

    Parameters
    ----------
    max_value : float, default 1.0
        The largest singular value (> 0).
    density : float in (0, 1]
    sorted, reverse_sort : bool
        The order of the singular values on the starting diagonal.
    """
    owner = "pseudo_svd"
    n = _size(owner, res_dim)
    top = check_float("max_value", max_value, owner, low=0.0, low_open=True)
    target = math.ceil(_density(owner, density) * n * n)
    rng = numpy_rng(seed, owner)
    s = rng.uniform(0.0, top, n)
    if sorted:
        s.sort()
        if reverse_sort:
            s = s[::-1].copy()
            s[0] = top
        else:
            s[-1] = top
    W = np.diag(s)
    filled = np.ones(n, np.int64)  # non-zero entries per column
    while filled.sum() < target:
        i, j = rng.choice(n, size=2, replace=False)
        theta = rng.uniform(-1.0, 1.0)
        c, t = math.cos(theta), math.sin(theta)
        wi, wj = W[:, i].copy(), W[:, j]
        W[:, i] = c * wi + t * wj
        W[:, j] = c * wj - t * wi
        filled[i] = np.count_nonzero(W[:, i])
        filled[j] = np.count_nonzero(W[:, j])
    return _dense_reservoir(owner, W, None, dtype)


def chaotic(
    res_dim: int,
    *,
    seed,
    extra_edge_probability: float = MATRICES.extra_edge_probability,
    spectral_radius: float | None = 1.0,
    dtype=None,
) -> ReservoirMatrix:
    """A ring through all units plus random extra edges, as RC.jl's ``chaotic_init``.

    The graph of Xie et al.'s (2024) digital chaotic system at ``d`` bits has
    ``4**d`` states and is strongly connected; RC.jl builds it as a ring,
    unit ``i + 1`` feeding unit ``i`` (and unit 0 feeding the last), plus
    each other connection with probability ``extra_edge_probability``, with
    weights from ``U(-1, 1)``, scaled to ``spectral_radius``. The same here;
    ``res_dim`` must be a power of 4 (RC.jl moves another size to the
    nearest one with a warning; a model's size is yours to choose, so it is
    refused here, naming the nearest).

    Parameters
    ----------
    res_dim : int
        4, 16, 64, 256, 1024, 4096, ...
    extra_edge_probability : float in [0, 1]
    """
    owner = "chaotic"
    n = _size(owner, res_dim)
    bits = round(math.log(n, 4))
    if 4**bits != n:
        lower = 4 ** max(1, math.floor(math.log(n, 4)))
        raise ValueError(
            f"{owner}: res_dim must be a power of 4 (the states of a digital "
            f"system of d bits: 4**d), got {n}; the nearest are {lower} and "
            f"{4 * lower}"
        )
    p = check_float("extra_edge_probability", extra_edge_probability, owner,
                    low=0.0, high=1.0)  # fmt: skip
    radius = _radius(owner, spectral_radius)
    rng = numpy_rng(seed, owner)
    weights = rng.uniform(-1.0, 1.0, (n, n))
    edges = rng.random((n, n)) < p
    np.fill_diagonal(edges, False)
    edges[np.arange(n), (np.arange(n) + 1) % n] = True
    return _dense_reservoir(owner, np.where(edges, weights, 0.0), radius, dtype)


def low_connectivity(
    res_dim: int,
    *,
    seed,
    in_degree: int = 1,
    connected: bool = False,
    cut_cycle: bool = False,
    spectral_radius: float | None = None,
    dtype=None,
) -> ReservoirMatrix:
    """A reservoir of very low in-degree (Griffith, Pomerance and Gauthier 2019).

    Each unit receives from ``in_degree`` distinct units drawn at random,
    with weights from ``N(0, 1)``. With ``in_degree=1`` and
    ``connected=True`` the units form one ring in a random order instead,
    and ``cut_cycle=True`` then removes one of its connections at random
    (after the scaling: a cut ring is a delay line, spectral radius 0).

    Parameters
    ----------
    in_degree : int in [1, res_dim], default 1
    connected : bool, default False
        One ring through all units (``in_degree=1`` only).
    cut_cycle : bool, default False
        Cut the ring (``connected=True`` only).
    spectral_radius : float or None, default None (as drawn)
    """
    owner = "low_connectivity"
    n = _size(owner, res_dim)
    k = check_int("in_degree", in_degree, owner, minimum=1, maximum=n)
    if connected and k != 1:
        raise ValueError(f"{owner}: connected=True needs in_degree=1, got {k}")
    if cut_cycle and not connected:
        raise ValueError(f"{owner}: cut_cycle=True cuts the ring of connected=True")
    radius = _radius(owner, spectral_radius)
    rng = numpy_rng(seed, owner)
    if not connected:
        cols = distinct_columns(rng, n, n, k).ravel()
        rows = np.repeat(np.arange(n), k)
        return _reservoir(owner, n, rows, cols, rng.standard_normal(n * k), radius,
                          dtype)  # fmt: skip
    order = rng.permutation(n)
    rows, cols = order, np.roll(order, -1)
    vals = rng.standard_normal(n)
    if radius is not None:
        # a ring's eigenvalues have the modulus of its weights' geometric mean
        vals = vals * (radius / np.exp(np.mean(np.log(np.abs(vals)))))
    if cut_cycle:
        vals[rng.integers(n)] = 0.0
    return _reservoir(owner, n, rows, cols, vals, None, dtype)


def permutation(
    res_dim: int, weight=MATRICES.permutation_weight, *, seed, dtype=None
) -> ReservoirMatrix:
    """Each unit fed by exactly one other, in a random permutation.

    ``W[i, q[i]] = weight[i]`` for a random permutation ``q``: a permutation
    matrix with weights, as RC.jl's ``permutation_init`` (its diagonal
    ``weight`` times a random permutation matrix). Its eigenvalues have
    modulus ``|weight|`` for a single weight.

    Parameters
    ----------
    weight : float or array ``(res_dim,)``
        One weight for all, or one per receiving unit.
    """
    owner = "permutation"
    n = _size(owner, res_dim)
    w = np.asarray(weight, np.float64)
    if w.shape not in ((), (n,)) or not np.isfinite(w).all():
        raise ValueError(
            f"{owner}: weight must be a finite number or one per unit, shape "
            f"({n},), got {weight!r}"
        )
    rng = numpy_rng(seed, owner)
    rows = np.arange(n)
    return _reservoir(owner, n, rows, rng.permutation(n), np.broadcast_to(w, (n,)),
                      None, dtype)  # fmt: skip


def wigner(
    res_dim: int,
    *,
    seed,
    std: float = 1.0,
    std_diag: float = MATRICES.std_diag,
    dtype=None,
) -> ReservoirMatrix:
    """A symmetric Gaussian (Wigner) reservoir (Inubushi and Yoshimura 2017).

    ``W[i, j] = W[j, i] ~ N(0, std**2 / res_dim)`` off the diagonal and
    ``W[i, i] ~ N(0, std_diag**2 / res_dim)``: real eigenvalues spread by
    Wigner's semicircle law over ``[-2 std, 2 std]``, so the spectral radius
    is close to ``2 * std`` for large ``res_dim``. Dense. As RC.jl's
    ``wigner_init``.

    Parameters
    ----------
    std, std_diag : float
        Standard deviations times ``sqrt(res_dim)``, off and on the diagonal.
    """
    owner = "wigner"
    n = _size(owner, res_dim)
    off = check_float("std", std, owner, low=0.0, low_open=True)
    on = check_float("std_diag", std_diag, owner, low=0.0)
    rng = numpy_rng(seed, owner)
    upper = np.triu(rng.standard_normal((n, n)) * (off / math.sqrt(n)), 1)
    W = upper + upper.T
    W[np.diag_indices(n)] = rng.standard_normal(n) * (on / math.sqrt(n))
    return _dense_reservoir(owner, W, None, dtype)


def _diagonals(owner, res_dim, seed, density, spectral_radius, dtype, *,
               upper: bool, shared: bool):  # fmt: skip
    """Cossu et al.'s banded reservoirs: the main diagonal, then diagonal
    ``shift = 1, 2, ...`` below (and, with ``upper``, above) the main one,
    each filled whole, until ``round(density * n**2)`` entries stand; the
    last one filled in part, at random places. Weights from ``U(-1, 1)``,
    one per diagonal when ``shared``."""
    n = _size(owner, res_dim)
    target = round(_density(owner, density) * n * n)
    radius = _radius(owner, spectral_radius)
    rng = numpy_rng(seed, owner)

    def weights(count):
        if shared:
            return np.full(count, rng.uniform(-1.0, 1.0))
        return rng.uniform(-1.0, 1.0, count)

    rows, cols, vals = [np.arange(n)], [np.arange(n)], [weights(n)]
    placed = n
    for shift in range(1, n):
        for side in ("below", "above") if upper else ("below",):
            if placed >= target:
                break
            length = n - shift
            take = min(length, target - placed)
            where = np.sort(rng.permutation(length)[:take])
            value = weights(take)
            rows.append(where + shift if side == "below" else where)
            cols.append(where if side == "below" else where + shift)
            vals.append(value)
            placed += take
    known = None
    if not upper and radius is not None:  # triangular: the eigenvalues are the diagonal
        known = float(np.max(np.abs(vals[0])))
    return _reservoir(owner, n, np.concatenate(rows), np.concatenate(cols),
                      np.concatenate(vals), radius, dtype, radius=known)  # fmt: skip


def lower_triangular(
    res_dim: int,
    *,
    seed,
    density: float = MATRICES.density,
    spectral_radius: float | None = 1.0,
    dtype=None,
) -> ReservoirMatrix:
    """A lower-triangular banded reservoir (Cossu et al. 2025).

    The main diagonal, then the diagonals below it (unit ``i`` feeding unit
    ``i + shift``, ``shift = 1, 2, ...``), each filled whole until
    ``round(density * res_dim**2)`` entries stand (the main diagonal always
    whole), the last one at random places; weights from ``U(-1, 1)``,
    scaled to ``spectral_radius`` (a triangular matrix's eigenvalues are its
    diagonal). RC.jl's ``lower_triangular(; sparsity)`` is ``density = 1 -
    sparsity``; ``density`` lies in (0, 1].
    """
    return _diagonals("lower_triangular", res_dim, seed, density, spectral_radius,
                      dtype, upper=False, shared=False)  # fmt: skip


def band(
    res_dim: int,
    *,
    seed,
    density: float = MATRICES.density,
    spectral_radius: float | None = 1.0,
    dtype=None,
) -> ReservoirMatrix:
    """A banded reservoir (Cossu et al. 2025): as :func:`lower_triangular`,
    with each diagonal below the main one followed by the one as far above
    it (unit ``i + shift`` feeding unit ``i``). RC.jl's ``band_init``."""
    return _diagonals("band", res_dim, seed, density, spectral_radius, dtype,
                      upper=True, shared=False)  # fmt: skip


def toeplitz(
    res_dim: int,
    *,
    seed,
    density: float = MATRICES.density,
    spectral_radius: float | None = 1.0,
    dtype=None,
) -> ReservoirMatrix:
    """A Toeplitz-like banded reservoir (Cossu et al. 2025): as :func:`band`,
    with one weight from ``U(-1, 1)`` for all entries of each diagonal.
    RC.jl's ``toeplitz_init``."""
    return _diagonals("toeplitz", res_dim, seed, density, spectral_radius, dtype,
                      upper=True, shared=True)  # fmt: skip


def dale_sparse(
    res_dim: int,
    *,
    seed,
    excitatory_fraction: float = MATRICES.excitatory_fraction,
    density: float = MATRICES.density,
    std: float = 1.0,
    ei_weight_ratio: float = 1.0,
    spectral_radius: float | None = 1.0,
    dtype=None,
) -> ReservoirMatrix:
    """A sparse reservoir that obeys Dale's law: excitatory and inhibitory units.

    Each unit sends to ``round(density * res_dim)`` distinct units drawn at
    random (at least one), with magnitudes ``|N(0, std**2)|``. The first
    ``round(excitatory_fraction * res_dim)`` units (at least one, at most
    all but one) are excitatory, their outgoing weights (columns of ``W``)
    positive; the others inhibitory, negative and ``ei_weight_ratio`` times
    larger. Scaled to ``spectral_radius``. RC.jl's ``dale_sparse`` (whose
    ``sparsity`` acts as this ``density``).

    Parameters
    ----------
    excitatory_fraction : float in (0, 1)
    density : float in (0, 1]
    std : float, default 1.0
    ei_weight_ratio : float, default 1.0
        Inhibitory magnitudes relative to excitatory ones (> 0).
    """
    owner = "dale_sparse"
    n = _size(owner, res_dim)
    fraction = check_float("excitatory_fraction", excitatory_fraction, owner,
                           low=0.0, high=1.0, low_open=True, high_open=True)  # fmt: skip
    k = max(1, round(_density(owner, density) * n))
    scale = check_float("std", std, owner, low=0.0, low_open=True)
    ratio = check_float("ei_weight_ratio", ei_weight_ratio, owner, low=0.0,
                        low_open=True)  # fmt: skip
    radius = _radius(owner, spectral_radius)
    rng = numpy_rng(seed, owner)
    excitatory = min(max(round(fraction * n), 1), n - 1)
    targets = distinct_columns(rng, n, n, k)  # row j: the units j sends to
    sources = np.repeat(np.arange(n), k)
    magnitude = np.abs(rng.standard_normal(n * k)) * scale
    sign = np.where(sources < excitatory, 1.0, -ratio)
    return _reservoir(owner, n, targets.ravel(), sources, magnitude * sign, radius,
                      dtype)  # fmt: skip


def hyperbolic(
    res_dim: int,
    *,
    seed,
    poincare_dim: int = MATRICES.poincare_dim,
    disk_radius: float = MATRICES.disk_radius,
    top_k: int = 0,
    sigma: float = 1.0,
    spectral_radius: float | None = 1.0,
    dtype=None,
) -> ReservoirMatrix:
    """Weights that fall off with hyperbolic distance, as RC.jl's ``rand_hyper``.

    Each unit is a random point of the Poincaré ball of dimension
    ``poincare_dim``: a uniform direction, at a hyperbolic distance from the
    centre drawn from ``U(0, 2 artanh(disk_radius))``. ``W[i, j] =
    exp(-d(p_i, p_j) / sigma)`` for ``i != j`` (``d`` the hyperbolic
    distance), ``W[i, i] = 0``; with ``0 < top_k < res_dim`` each row keeps
    only its ``top_k`` largest entries. Scaled to ``spectral_radius``.

    Parameters
    ----------
    poincare_dim : int
    disk_radius : float in (0, 1)
        The points' largest Euclidean distance from the centre.
    top_k : int, default 0 (all)
    sigma : float, default 1.0
        Length scale of the fall-off (> 0).
    """
    owner = "hyperbolic"
    n = _size(owner, res_dim)
    dim = check_int("poincare_dim", poincare_dim, owner, minimum=1)
    edge = check_float("disk_radius", disk_radius, owner, low=0.0, high=1.0,
                       low_open=True, high_open=True)  # fmt: skip
    keep = check_int("top_k", top_k, owner, minimum=0)
    length = check_float("sigma", sigma, owner, low=0.0, low_open=True)
    radius = _radius(owner, spectral_radius)
    rng = numpy_rng(seed, owner)
    direction = rng.standard_normal((n, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    rho = rng.uniform(0.0, 2.0 * math.atanh(edge), n)
    points = direction * np.tanh(rho / 2.0)[:, None]
    square = np.sum(points**2, axis=1)
    gap = np.sum((points[:, None, :] - points[None, :, :]) ** 2, axis=-1)
    cosh = 1.0 + 2.0 * gap / np.outer(1.0 - square, 1.0 - square)
    W = np.exp(-np.arccosh(np.maximum(cosh, 1.0)) / length)
    np.fill_diagonal(W, 0.0)
    if 0 < keep < n:
        smallest = np.argsort(W, axis=1, kind="stable")[:, : n - keep]
        np.put_along_axis(W, smallest, 0.0, axis=1)
    return _dense_reservoir(owner, W, radius, dtype)


# --------------------------------------------------------------------------- #
# Input layers
# --------------------------------------------------------------------------- #


def weighted_input(
    res_dim: int, in_dim: int, *, seed, scaling=MATRICES.input_scaling, dtype=None
) -> Float[Array, "res_dim in_dim"]:
    """Each input feeds its own block of units (Lu et al. 2017).

    Input ``j`` feeds units ``j * q`` to ``(j + 1) * q - 1``, ``q = res_dim
    // in_dim``, with weights from ``U(-scaling_j, scaling_j)``; every other
    entry is zero. RC.jl's ``weighted_init``; the same layout with one
    weight is :func:`orc.topologies.weighted_minimal_input`.

    Parameters
    ----------
    res_dim, in_dim : int
        ``res_dim`` a multiple of ``in_dim``.
    scaling : float or array ``(in_dim,)``
        One bound for all inputs or one per input (>= 0).

    Returns
    -------
    Array ``(res_dim, in_dim)``
    """
    owner = "weighted_input"
    n, m, q = input_blocks(owner, res_dim, in_dim)
    s = np.asarray(scaling, np.float64)
    if s.shape not in ((), (m,)) or not (np.isfinite(s).all() and (s >= 0).all()):
        raise ValueError(
            f"{owner}: scaling must be a finite number >= 0 or one per input, "
            f"shape ({m},), got {scaling!r}"
        )
    rng = numpy_rng(seed, owner)
    W = np.zeros((n, m))
    units = np.arange(n)
    W[units, units // q] = (
        rng.uniform(-1.0, 1.0, n) * np.broadcast_to(s, (m,))[units // q]
    )
    return device_array(W, check_dtype(dtype, owner))


def informed_input(
    res_dim: int,
    in_dim: int,
    model_in_dim: int,
    *,
    seed,
    scaling: float = MATRICES.input_scaling,
    gamma: float = MATRICES.gamma,
    dtype=None,
) -> Float[Array, "res_dim in_dim"]:
    """The input layer of an ESN joined to a knowledge model (Pathak et al. 2018).

    The input is ``[u; K(u)]``: ``in_dim - model_in_dim`` data entries, then
    the ``model_in_dim`` predictions of the knowledge model ``K``, as
    :class:`orc.forecaster.HybridESNForecaster` feeds its reservoir.
    ``floor(gamma * res_dim)`` units drawn at random each see one data entry,
    ``floor((1 - gamma) * res_dim)`` of the others one prediction (entries
    drawn at random), with weights from ``U(-scaling, scaling)``; a unit
    sees at most one input. RC.jl's ``informed_init``.

    Parameters
    ----------
    res_dim, in_dim : int
    model_in_dim : int
        The knowledge model's outputs, the last ``model_in_dim`` inputs
        (fewer than ``in_dim``).
    scaling : float
    gamma : float in [0, 1]
        The share of units that see the data.

    Returns
    -------
    Array ``(res_dim, in_dim)``
    """
    owner = "informed_input"
    n = check_int("res_dim", res_dim, owner, minimum=1)
    m = check_int("in_dim", in_dim, owner, minimum=2)
    k = check_int("model_in_dim", model_in_dim, owner, minimum=1, maximum=m - 1)
    s = check_float("scaling", scaling, owner, low=0.0)
    g = check_float("gamma", gamma, owner, low=0.0, high=1.0)
    rng = numpy_rng(seed, owner)
    data, model = math.floor(g * n), math.floor((1.0 - g) * n)
    units = rng.permutation(n)
    W = np.zeros((n, m))
    seen = units[:data]
    W[seen, rng.integers(0, m - k, data)] = rng.uniform(-s, s, data)
    seen = units[data : data + model]
    W[seen, rng.integers(m - k, m, model)] = rng.uniform(-s, s, model)
    return device_array(W, check_dtype(dtype, owner))


def random_sparse_input(
    res_dim: int,
    in_dim: int,
    *,
    seed,
    density: float = MATRICES.density,
    distribution: str = MATRICES.input_distribution,
    scaling: float = 1.0,
    dtype=None,
) -> Float[Array, "res_dim in_dim"]:
    """A random sparse input layer as reservoirpy draws one.

    ``round(density * res_dim * in_dim)`` entries (at least one) at places
    drawn uniformly, with values from ``distribution`` (as for
    :func:`random_sparse`) times ``scaling``. The defaults are reservoirpy's
    ``Reservoir``: ``+-input_scaling`` on 10% of the entries
    (``input_connectivity=0.1``, ``input_scaling=1.0``); orc's own
    embedding is dense and uniform.
    """
    owner = "random_sparse_input"
    n = check_int("res_dim", res_dim, owner, minimum=1)
    m = check_int("in_dim", in_dim, owner, minimum=1)
    s = check_float("scaling", scaling, owner, low=0.0)
    rng = numpy_rng(seed, owner)
    rows, cols, vals = _sparse_entries(owner, rng, n, m, density, distribution)
    W = np.zeros((n, m))
    W[rows, cols] = s * vals
    return device_array(W, check_dtype(dtype, owner))
