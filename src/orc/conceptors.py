"""Conceptors: several patterns stored in one reservoir, recalled, morphed and
combined (Jaeger 2014, "Controlling Recurrent Neural Networks by Conceptors",
arXiv:1403.3369).

A reservoir driven by a pattern ``p`` visits a cloud of states; the
*conceptor* of that cloud, ``C = R (R + aperture**-2 I)**-1`` with ``R`` the
states' correlation matrix, is a soft projection onto the directions the
pattern excites. :func:`load_patterns` drives an ESN with each pattern, keeps
their conceptors, trains a linear readout of the pattern and *loads* the
reservoir: it refits the recurrent weights so that ``W' x`` replaces ``W x +
W_in p`` (the input internalised, Jaeger's section 3.3), after which the
reservoir runs without input. Run autonomously with a conceptor inserted,

    ``x' = C ((1 - a) x + a tanh(W' x + b))``,   ``y = W_out x``,

it regenerates the pattern the conceptor belongs to
(:meth:`ConceptorNetwork.generate`); a mix of conceptors generates patterns
in between (:meth:`ConceptorNetwork.morph`). The Boolean operations
(:func:`conceptor_not`, :func:`conceptor_and`, :func:`conceptor_or`), the
aperture adaptation (:func:`adapt_aperture`) and :func:`quota` work on any
conceptor. ReservoirComputing.jl's ``Conceptor``, ``loadpatterns``,
``generate``, ``morph_conceptor`` and its conceptor algebra.

Example
-------
>>> n = jnp.arange(1, 1501)
>>> patterns = jnp.stack([jnp.sin(2 * jnp.pi * n / 8.83), jnp.sin(2 * jnp.pi * n / 9.83)])
>>> esn = orc.forecaster.ESNForecaster(1, 100, leak_rate=1.0, bias=0.2,
...     embedding_scaling=1.5, Wr_spectral_radius=1.5, Wr_density=0.1, seed=3)
>>> net = orc.conceptors.load_patterns(esn, patterns[..., None])
>>> y = net.generate(100, 0)              # the first sine, from the reservoir alone
>>> y = net.generate(100, net.morph([0.5, 0.5]))   # halfway between the two
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._defaults import CONCEPTORS
from ._validation import check_float, check_int, check_rank
from .drivers import DriverBase, ESNDriver, ParallelESNDriver
from .utils.regressions import ridge_regression

__all__ = [
    "correlation",
    "conceptor",
    "adapt_aperture",
    "conceptor_not",
    "conceptor_and",
    "conceptor_or",
    "quota",
    "ConceptorNetwork",
    "load_patterns",
]


# --------------------------------------------------------------------------- #
# Conceptors and their algebra
# --------------------------------------------------------------------------- #


def _square(owner: str, name: str, x) -> Array:
    x = jnp.asarray(x)
    check_rank(name, x, 2, owner)
    if x.shape[0] != x.shape[1]:
        raise ValueError(f"{owner}: {name} must be square, got shape {x.shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _aperture(owner: str, name: str, value):
    return check_float(name, value, owner, low=0.0, low_open=True)


def _spectral(C: Array, fn) -> Array:
    """``U diag(fn(s)) U^T`` for the symmetric ``C = U diag(s) U^T``, made
    exactly symmetric."""
    s, U = jnp.linalg.eigh((C + C.T) / 2)
    out = jnp.matmul(U * fn(s), U.T, precision="highest")
    return (out + out.T) / 2


def correlation(states: Float[Array, "T N"]) -> Float[Array, "N N"]:
    """``R = X^T X / T``, the correlation matrix of ``T`` states ``(T, N)``."""
    X = jnp.asarray(states)
    check_rank("states", X, 2, "correlation")
    return jnp.matmul(X.T, X, precision="highest") / X.shape[0]


def conceptor(
    correlation: Float[Array, "N N"], aperture: float = CONCEPTORS.aperture
) -> Float[Array, "N N"]:
    """``C = R (R + aperture**-2 I)**-1``: the conceptor of the state cloud
    whose correlation matrix is ``R`` (:func:`correlation`).

    Symmetric, eigenvalues ``s / (s + aperture**-2)`` in ``[0, 1)`` for the
    eigenvalues ``s >= 0`` of ``R`` (negative ones, from rounding, count as
    0). A larger aperture admits more directions.
    """
    owner = "conceptor"
    R = _square(owner, "correlation", correlation)
    a = _aperture(owner, "aperture", aperture)
    return _spectral(R, lambda s: jnp.maximum(s, 0) / (jnp.maximum(s, 0) + a**-2.0))


def adapt_aperture(C: Float[Array, "N N"], gamma: float) -> Float[Array, "N N"]:
    """The conceptor of aperture ``gamma`` times ``C``'s: ``C (C + gamma**-2
    (I - C))**-1``, each eigenvalue ``s`` to ``s / (s + gamma**-2 (1 - s))``
    (Jaeger's ``phi(C, gamma)``; 1 stays 1, 0 stays 0)."""
    owner = "adapt_aperture"
    C = _square(owner, "C", C)
    g = _aperture(owner, "gamma", gamma)

    def adapted(s):
        s = jnp.clip(s, 0.0, 1.0)
        return s / jnp.where(s == 0, 1.0, s + g**-2.0 * (1.0 - s))

    return _spectral(C, adapted)


def conceptor_not(C: Float[Array, "N N"]) -> Float[Array, "N N"]:
    """``I - C``: the directions ``C`` leaves out."""
    C = _square("conceptor_not", "C", C)
    return jnp.eye(C.shape[0], dtype=C.dtype) - C


def _floor(dtype) -> float:
    """The smallest eigenvalue :func:`conceptor_and` inverts: a direction
    ``C`` (nearly) leaves out is taken at this value."""
    return 100 * float(np.finfo(dtype).eps)


def conceptor_and(
    C: Float[Array, "N N"], B: Float[Array, "N N"]
) -> Float[Array, "N N"]:
    """``(C^-1 + B^-1 - I)^-1``: the directions both admit (Jaeger's
    definition for invertible conceptors; eigenvalues below ~1e-14 in
    float64, ~1e-5 in float32, are raised to that floor first, so a
    direction outside either range comes out at about that floor)."""
    owner = "conceptor_and"
    C, B = _square(owner, "C", C), _square(owner, "B", B)
    if C.shape != B.shape:
        raise ValueError(
            f"{owner}: C and B must have one shape, got {C.shape}, {B.shape}"
        )
    eps = _floor(jnp.result_type(C, B))

    def inverse(M):
        return _spectral(M, lambda s: 1.0 / jnp.maximum(s, eps))

    eye = jnp.eye(C.shape[0], dtype=jnp.result_type(C, B))
    return inverse(inverse(C) + inverse(B) - eye)


def conceptor_or(C: Float[Array, "N N"], B: Float[Array, "N N"]) -> Float[Array, "N N"]:
    """``NOT (NOT C AND NOT B)``: the directions either admits."""
    return conceptor_not(conceptor_and(conceptor_not(C), conceptor_not(B)))


def quota(C: Float[Array, "N N"]) -> Array:
    """``trace(C) / N``: the share of the state space ``C`` admits, in [0, 1]."""
    C = _square("quota", "C", C)
    return jnp.trace(C) / C.shape[0]


# --------------------------------------------------------------------------- #
# A reservoir loaded with patterns
# --------------------------------------------------------------------------- #


class ConceptorNetwork(eqx.Module):
    """A reservoir loaded with patterns and their conceptors (from
    :func:`load_patterns`): ``x' = C driver(0, x)``, ``y = W_out x``.

    Attributes
    ----------
    driver : ESNDriver
        The loaded reservoir: ``W'`` (the input internalised), the bias and
        leak of the ESN it was loaded from.
    readout : Array ``(out_dim, res_dim)``
        ``W_out``, trained to read each pattern from its states.
    conceptors : Array ``(n_patterns, res_dim, res_dim)``
        One conceptor per pattern, in the order given.
    names : tuple of str
        The patterns' names (``"0"``, ``"1"``, ... unless given).
    """

    driver: DriverBase
    readout: Float[Array, "out_dim res_dim"]
    conceptors: Float[Array, "n_patterns res_dim res_dim"]
    names: tuple[str, ...] = eqx.field(static=True)

    @property
    def res_dim(self) -> int:
        return self.conceptors.shape[-1]

    def conceptor(self, pattern) -> Float[Array, "res_dim res_dim"]:
        """The conceptor of ``pattern``, given by name or position."""
        if isinstance(pattern, str):
            if pattern not in self.names:
                raise KeyError(
                    f"ConceptorNetwork: no pattern named {pattern!r}; the patterns "
                    f"are {self.names}"
                )
            return self.conceptors[self.names.index(pattern)]
        index = check_int("pattern", pattern, "ConceptorNetwork.conceptor",
                          minimum=-len(self.names), maximum=len(self.names) - 1)  # fmt: skip
        return self.conceptors[index]

    def morph(self, weights) -> Float[Array, "res_dim res_dim"]:
        """``sum_j w_j C_j``: ``weights`` one per pattern (a sequence or array
        in the patterns' order, or a mapping from names to weights, the
        others 0). Weights outside [0, 1] extrapolate (Jaeger's morphing
        square, ReservoirComputing.jl's ``morph_conceptor``)."""
        if isinstance(weights, Mapping):
            unknown = set(weights) - set(self.names)
            if unknown:
                raise KeyError(
                    f"ConceptorNetwork.morph: no patterns named {sorted(unknown)}; "
                    f"the patterns are {self.names}"
                )
            weights = [weights.get(name, 0.0) for name in self.names]
        w = jnp.asarray(weights, self.conceptors.dtype)
        if w.shape != (len(self.names),):
            raise ValueError(
                f"ConceptorNetwork.morph: weights must hold one weight per pattern, "
                f"shape ({len(self.names)},), got shape {w.shape}"
            )
        return jnp.tensordot(w, self.conceptors, axes=1, precision="highest")

    def step(self, conceptor: Array, res_state: Array) -> Array:
        """One autonomous step, ``C driver(0, x)``."""
        zero = jnp.zeros_like(res_state)
        return jnp.matmul(conceptor, self.driver.advance(zero, res_state),
                          precision="highest")  # fmt: skip

    def generate(
        self,
        steps: int,
        conceptor,
        init_state: Array | None = None,
        *,
        washout: int = 0,
    ) -> Float[Array, "steps out_dim"]:
        """``steps`` outputs of the reservoir run alone under ``conceptor``.

        ``conceptor``: a pattern's name or position, or a matrix ``(res_dim,
        res_dim)`` (:meth:`morph`, the algebra's results). ``init_state``
        (default zeros, which a conceptor keeps at zero only where the bias
        is zero) and ``washout`` steps run first and are not returned: the
        state settles into the conceptor's pattern.
        """
        owner = "ConceptorNetwork.generate"
        steps = check_int("steps", steps, owner, minimum=1)
        washout = check_int("washout", washout, owner, minimum=0)
        C = conceptor
        if isinstance(conceptor, str) or isinstance(conceptor, int | np.integer):
            C = self.conceptor(conceptor)
        C = jnp.asarray(C, self.conceptors.dtype)
        if C.shape != (self.res_dim, self.res_dim):
            raise ValueError(
                f"{owner}: conceptor must be a pattern's name or position or a "
                f"({self.res_dim}, {self.res_dim}) matrix, got shape {C.shape}"
            )
        x = self.driver.default_state() if init_state is None else init_state
        x = jnp.asarray(x, self.conceptors.dtype)
        if x.shape != (self.res_dim,):
            raise ValueError(
                f"{owner}: init_state must have shape ({self.res_dim},), got {x.shape}"
            )
        return _generate(self, C, x, steps, washout)


@eqx.filter_jit
def _generate(net: ConceptorNetwork, C, x, steps: int, washout: int):
    def run(x, _):
        x = net.step(C, x)
        return x, jnp.matmul(net.readout, x, precision="highest")

    x, _ = jax.lax.scan(run, x, None, length=washout) if washout else (x, None)
    return jax.lax.scan(run, x, None, length=steps)[1]


def _esn_parts(owner: str, model):
    """``(driver, W dense, bias, leak)`` of ``model``'s single ESN reservoir."""
    driver = getattr(model, "driver", None)
    if not isinstance(driver, ESNDriver | ParallelESNDriver) or driver.chunks != 1:
        raise TypeError(
            f"{owner}: model must hold one ESN reservoir (a driver ESNDriver, or "
            f"ParallelESNDriver with chunks=1), got {type(driver).__name__}"
        )
    if driver.mode != "discrete":
        raise ValueError(f"{owner}: the ESN must run in discrete mode")
    n = driver.res_dim
    W = np.asarray(driver.wr.todense()).reshape(n, n)
    bias = np.broadcast_to(np.asarray(driver.bias), (1, n)).reshape(n)
    leak = np.broadcast_to(np.asarray(driver.leak), (1, n)).reshape(n)
    return driver, W, bias, leak


def load_patterns(
    model,
    patterns,
    *,
    washout: int = CONCEPTORS.washout,
    aperture: float = CONCEPTORS.aperture,
    beta_w: float = CONCEPTORS.beta_w,
    beta_out: float = CONCEPTORS.beta_out,
    names: Sequence[str] | None = None,
) -> ConceptorNetwork:
    """Drive ``model``'s reservoir with each pattern and load it (Jaeger 2014).

    Each pattern ``p_j`` drives the reservoir from the zero state; after
    ``washout`` steps its states ``X_j`` give its conceptor, ``conceptor(
    correlation(X_j), aperture)``. Over all patterns, ``W_out`` is the ridge
    fit (``beta_out``) of the pattern from the state, and ``W'`` the ridge
    fit (``beta_w``) of ``W x_old + W_in p`` from the previous state
    ``x_old``: the reservoir then needs no input.

    Parameters
    ----------
    model
        A model with one ESN reservoir and a linear input layer, e.g. an
        untrained :class:`orc.forecaster.ESNForecaster` (its readout is not
        used): ``driver`` an :class:`orc.drivers.ESNDriver` or a
        ``ParallelESNDriver`` with ``chunks=1`` in discrete mode, and
        ``embedding``. Jaeger's reservoir is ``leak_rate=1``, spectral
        radius 1.5, input and bias scalings 1.5 and 0.2, 100 units.
    patterns : array ``(n_patterns, T, data_dim)``
        The patterns, each ``T`` samples long (``T > washout``).
    washout : int
        Steps dropped before the states count.
    aperture : float
        Of every conceptor (> 0).
    beta_w, beta_out : float
        Ridge strengths of the loaded weights and the readout.
    names : sequence of str, optional
        One per pattern; default ``"0"``, ``"1"``, ...

    Returns
    -------
    ConceptorNetwork
    """
    owner = "load_patterns"
    driver, W, bias, leak = _esn_parts(owner, model)
    P = jnp.asarray(patterns, driver.dtype)
    check_rank("patterns", P, 3, owner, " (n_patterns, T, data_dim)")
    count, length, _ = P.shape
    washout = check_int("washout", washout, owner, minimum=0, maximum=length - 2)
    a = _aperture(owner, "aperture", aperture)
    beta_w = check_float("beta_w", beta_w, owner, low=0.0)
    beta_out = check_float("beta_out", beta_out, owner, low=0.0)
    if names is None:
        names = tuple(str(j) for j in range(count))
    names = tuple(names)
    if (
        len(names) != count
        or len(set(names)) != count
        or not all(isinstance(name, str) for name in names)
    ):
        raise ValueError(
            f"{owner}: names must be {count} distinct strings, one per pattern, "
            f"got {names!r}"
        )
    n = driver.res_dim
    proj, states = _drive(model, driver, P)
    old = jnp.concatenate([jnp.zeros((count, 1, n), states.dtype), states[:, :-1]], 1)
    kept = slice(washout, None)
    X, X_old, U = states[:, kept], old[:, kept], proj[:, kept]
    conceptors = jnp.stack([conceptor(correlation(x), a) for x in X])

    def flat(z):  # the patterns end to end
        return z.reshape(-1, z.shape[-1])

    readout = ridge_regression(flat(X), flat(P[:, kept]), beta_out)
    W_old = jnp.matmul(flat(X_old), jnp.asarray(W.T, X.dtype), precision="highest")
    internal = W_old + flat(U)
    W_loaded = ridge_regression(flat(X_old), internal, beta_w)
    loaded = ESNDriver.from_matrices(
        np.asarray(W_loaded), leak=leak, bias=bias, dtype=driver.dtype
    )
    return ConceptorNetwork(loaded, readout, conceptors, names)


@eqx.filter_jit
def _drive(model, driver, P):
    """The input projections and states ``(n_patterns, T, res_dim)`` of the
    patterns ``P``, each from the zero state."""
    n = driver.res_dim

    def one(p):
        proj = jax.vmap(model.embedding.embed)(p)
        proj = proj.reshape((p.shape[0], *driver.default_state().shape))
        states = driver.advance_seq(proj, driver.default_state())
        return proj.reshape(-1, n), states.reshape(-1, n)

    return jax.vmap(one)(P)
