"""Online learning of readouts: recursive least squares (RLS), LMS and FORCE.

The batch trainers (:func:`orc.forecaster.train_RCForecaster` and friends) run
the whole training sequence and then solve one ridge regression. The learners
here update the readout weights after every row instead, so data can arrive in
pieces (a stream), old data can be forgotten (tracking a drifting system), and
the readout can be trained while the model runs in closed loop (FORCE).

Two levels:

- **On features.** :class:`RLSState` / :func:`rls_init` / :func:`rls_update` /
  :func:`rls_fit`, and :class:`LMSState` / :func:`lms_init` / :func:`lms_update`
  / :func:`lms_fit`, act on feature rows ``f`` and target rows ``y``.
- **On models.** :func:`train_online` teacher-forces a discrete-time forecaster
  and updates its readout at every step; :func:`train_force` does FORCE
  learning (Sussillo & Abbott 2009), where the reservoir is driven in closed
  loop by its own output while the readout learns.

**Recursive least squares.** For one row ``f`` (``n_features``) with target
``y`` (``n_out``) and forgetting factor ``λ`` in ``(0, 1]``, RLS keeps the
inverse correlation matrix ``P`` of the features and updates::

    k = P f,   a = λ + fᵀ k,   g = k / a        (gain)
    e = y - W f                                 (a-priori error)
    W ← W + e gᵀ
    P ← (P - k kᵀ / a) / λ

The learner does not store ``P`` itself but a square root ``S`` with
``P = S Sᵀ``, updated by Potter's square-root algorithm::

    φ = Sᵀ f,   a = λ + φᵀ φ,   g = S φ / a,   γ = 1 / (a + sqrt(λ a))
    S ← (S - γ (S φ) φᵀ) / sqrt(λ)

which gives exactly the ``P`` update above in exact arithmetic, at the same
``O(n_features²)`` cost. ``P = S Sᵀ`` is positive semi-definite whatever the
rounding, and ``S`` needs half the dynamic range of ``P``. This matters: on
the states of a 100-node ESN (Lorenz63, 1200 rows, ``delta = 1e-6``) float32
RLS with the textbook ``P`` update diverged (late one-step RMS error 55), the
symmetrised Joseph form still failed (0.18), and the square-root form matched
float64 (1.8e-4). :attr:`RLSState.P` returns ``S Sᵀ``.

**Regularisation.** Starting from ``W = 0`` and ``P = I / δ`` (``delta``),
after rows ``f_1 .. f_n`` the weights are exactly (up to rounding)::

    W_n = argmin_W  Σ_i λ^(n-i) ||y_i - W f_i||² + δ λ^n ||W||²

With ``λ = 1`` this is ridge regression with ``β = δ``: the RLS solution on a
data set equals :func:`orc.utils.regressions.ridge_regression` with
``beta = delta``. With ``λ < 1`` old rows (and the regulariser) fade with a
memory of about ``1 / (1 - λ)`` rows, so the weights track a changing target.
A caveat of forgetting: directions of feature space the data stop exciting
have ``P`` grow like ``λ^-n`` ("wind-up"); keep the memory ``1 / (1 - λ)``
well above ``n_features`` when the features are correlated, as reservoir
states are.

**LMS.** Stochastic gradient descent on the squared error, one row at a time::

    e = y - W f
    W ← W + μ e fᵀ                      (plain LMS, stable for small μ)
    W ← W + μ e fᵀ / (ε + fᵀ f)         (normalised LMS, stable for 0 < μ < 2)

Cheaper per row than RLS (``O(n_out · n_features)`` instead of
``O(n_features²)``), but it converges slowly when the features are correlated.

**Shapes.** Like the ridge engine (:mod:`orc._ridge`): features ``(rows, F)``
and targets ``(rows, O)`` with weights ``(O, F)``, or with ``C`` chunks
(parallel reservoirs, each with its own readout) features ``(rows, C, F)``,
targets ``(rows, C, O)``, weights ``(C, O, F)`` and ``S``, ``P``
``(C, F, F)``. The chunked update is the single one mapped with ``vmap``.

All learner states are Equinox modules (pytrees): they can be carried across
calls, passed to ``jax.jit``, and stacked and mapped with ``vmap`` to run
independent learners side by side. The forgetting factor and learning rate
are array leaves, so changing them does not recompile.

References
----------
Haykin, S. *Adaptive Filter Theory* (RLS, square-root RLS, NLMS).
Potter, J. E. & Stern, R. G. (1963). Statistical filtering of space navigation
measurements. *AIAA Guidance and Control Conference* (square-root update).
Sussillo, D. & Abbott, L. F. (2009). Generating coherent patterns of activity
from chaotic neural networks. *Neuron* 63(4), 544-557 (FORCE learning).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from . import _errors
from ._strategy import compiled
from ._training import check_initial_state, initial_states
from ._validation import (
    check_data,
    check_dtype,
    check_finite,
    check_float,
    check_int,
    check_last_dim,
    check_rank,
    check_spinup,
)
from .forecaster.base import CRCForecasterBase, RCForecasterBase

__all__ = [
    "RLSState",
    "LMSState",
    "rls_init",
    "rls_update",
    "rls_fit",
    "lms_init",
    "lms_update",
    "lms_fit",
    "train_online",
    "train_force",
]

_NAN_HINT = "Remove or interpolate missing samples before training."
_DIVERGED = (
    "{owner}: the online learner produced non-finite readout weights. With RLS "
    "this usually means P grew without bound (forgetting < 1 on features that do "
    "not excite every direction) or the features are badly scaled: raise "
    "forgetting or delta. With LMS the learning rate is too large for the feature "
    "scale: lower it or use normalized=True."
)


# --------------------------------------------------------------------------
# Learner states and their single-row updates
# --------------------------------------------------------------------------


def _rls_row(W, S, lam, f, y):
    """One RLS step on one chunk (Potter's square-root form, module docstring):
    ``W (O, F)``, ``S (F, F)`` with ``P = S Sᵀ``, ``f (F,)``, ``y (O,)``."""
    phi = jnp.matmul(S.T, f, precision="highest")
    a = lam + jnp.dot(phi, phi, precision="highest")
    k = jnp.matmul(S, phi, precision="highest")  # = P f
    e = y - jnp.matmul(W, f, precision="highest")
    W = W + jnp.outer(e, k / a)
    gamma = 1.0 / (a + jnp.sqrt(lam * a))
    S = (S - gamma * jnp.outer(k, phi)) / jnp.sqrt(lam)
    return W, S, e


def _lms_row(W, mu, f, y, normalized, eps):
    """One (normalised) LMS step on one chunk."""
    e = y - jnp.matmul(W, f, precision="highest")
    step = mu / (eps + jnp.dot(f, f, precision="highest")) if normalized else mu
    return W + step * jnp.outer(e, f), e


def _keep(active, new, old):
    if active is None:
        return new
    return jax.tree.map(lambda a, b: jnp.where(active, a, b), new, old)


def _add_count(count, active):
    return count + (1 if active is None else active.astype(count.dtype))


class RLSState(eqx.Module):
    """State of a recursive-least-squares learner (create with :func:`rls_init`).

    Attributes
    ----------
    W : Array
        Readout weights ``(n_out, n_features)``, or ``(chunks, n_out, n_features)``.
    S : Array
        Square root of the inverse correlation matrix, ``P = S Sᵀ``;
        ``(n_features, n_features)`` or ``(chunks, n_features, n_features)``.
    forgetting : Array
        Scalar forgetting factor ``λ`` in ``(0, 1]``; 1 means no forgetting.
    count : Array
        Scalar int32, number of rows learnt so far.
    """

    W: Array
    S: Array
    forgetting: Array
    count: Array

    @property
    def P(self) -> Array:
        """Inverse (weighted, regularised) correlation matrix ``S Sᵀ`` of the
        features, ``([chunks,] n_features, n_features)``. With ``forgetting=1``
        it is ``(FᵀF + delta I)⁻¹`` of the rows ``F`` learnt so far."""
        return jnp.matmul(self.S, jnp.swapaxes(self.S, -1, -2), precision="highest")

    def _row(self, f, y, active=None):
        row = _rls_row
        if self.W.ndim == 3:  # chunks: the single form mapped over the chunk axis
            row = jax.vmap(_rls_row, in_axes=(0, 0, None, 0, 0))
        W, S, e = row(self.W, self.S, self.forgetting, f, y)
        W, S = _keep(active, (W, S), (self.W, self.S))
        return RLSState(W, S, self.forgetting, _add_count(self.count, active)), e

    def _guard(self, owner):
        lam = self.forgetting
        return eqx.tree_at(
            lambda s: s.forgetting,
            self,
            _errors.check(
                lam,
                ~((lam > 0) & (lam <= 1)),
                f"{owner}: the learner's forgetting factor must lie in (0, 1].",
            ),
        )


class LMSState(eqx.Module):
    """State of a least-mean-squares learner (create with :func:`lms_init`).

    Attributes
    ----------
    W : Array
        Readout weights ``(n_out, n_features)``, or ``(chunks, n_out, n_features)``.
    learning_rate : Array
        Scalar step size ``μ``.
    count : Array
        Scalar int32, number of rows learnt so far.
    normalized : bool
        Static: normalised LMS (step ``μ / (eps + fᵀf)``) when True.
    eps : float
        Static: regulariser of the normalised step.
    """

    W: Array
    learning_rate: Array
    count: Array
    normalized: bool = eqx.field(static=True)
    eps: float = eqx.field(static=True)

    def _row(self, f, y, active=None):
        def row(W, f, y):
            return _lms_row(W, self.learning_rate, f, y, self.normalized, self.eps)

        if self.W.ndim == 3:
            row = jax.vmap(row)
        W, e = row(self.W, f, y)
        W = _keep(active, W, self.W)
        return (
            LMSState(
                W,
                self.learning_rate,
                _add_count(self.count, active),
                self.normalized,
                self.eps,
            ),
            e,
        )

    def _guard(self, owner):
        mu = self.learning_rate
        bad = ~(mu > 0)
        if self.normalized:
            bad = bad | ~(mu < 2)
        return eqx.tree_at(
            lambda s: s.learning_rate,
            self,
            _errors.check(
                mu,
                bad,
                f"{owner}: the learner's learning_rate must be > 0"
                + (" and < 2 (normalised LMS)." if self.normalized else "."),
            ),
        )


# --------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------


def _lead(chunks):
    return () if chunks is None else (chunks,)


def _check_sizes(owner, n_features, n_out, chunks):
    n_features = check_int("n_features", n_features, owner, minimum=1)
    n_out = check_int("n_out", n_out, owner, minimum=1)
    if chunks is not None:
        chunks = check_int("chunks", chunks, owner, minimum=1)
    return n_features, n_out, chunks


def _forgetting(owner, value, dtype):
    check_float("forgetting", value, owner, low=0.0, high=1.0, low_open=True)
    lam = jnp.asarray(value).astype(dtype)
    if lam.shape != ():
        raise ValueError(f"{owner}: forgetting must be a scalar, got shape {lam.shape}")
    return _errors.check(
        lam, ~((lam > 0) & (lam <= 1)), f"{owner}: forgetting must lie in (0, 1]."
    )


def _delta(owner, value, dtype):
    check_float("delta", value, owner, low=0.0, low_open=True)
    delta = jnp.asarray(value).astype(dtype)
    if delta.shape != ():
        raise ValueError(f"{owner}: delta must be a scalar, got shape {delta.shape}")
    return _errors.check(delta, ~(delta > 0), f"{owner}: delta must be > 0.")


def _learning_rate(owner, value, normalized, dtype):
    if normalized:
        bounds = {"high": 2.0, "high_open": True}
    else:
        bounds = {}
    check_float("learning_rate", value, owner, low=0.0, low_open=True, **bounds)
    mu = jnp.asarray(value).astype(dtype)
    if mu.shape != ():
        raise ValueError(
            f"{owner}: learning_rate must be a scalar, got shape {mu.shape}"
        )
    bad = ~(mu > 0) | (~(mu < 2) if normalized else False)
    rng = "(0, 2) for normalised LMS" if normalized else "> 0"
    return _errors.check(mu, bad, f"{owner}: learning_rate must be {rng}.")


def _check_state(owner, state, cls):
    if not isinstance(state, cls):
        maker = "rls_init" if cls is RLSState else "lms_init"
        raise TypeError(
            f"{owner}: state must be an {cls.__name__} (from {maker}), "
            f"got {type(state).__name__}"
        )


def _check_rows(owner, state, f, y, rows: bool):
    """``f``/``y`` (one row) or ``feats``/``targets`` (a leading row axis)."""
    fname, yname = ("feats", "targets") if rows else ("f", "y")
    lead = tuple(state.W.shape[:-2])
    n_out, n_feat = state.W.shape[-2:]
    axes = ("rows",) if rows else ()
    chunk_axes = ("chunks",) if lead else ()
    f = check_rank(fname, f, len(axes) + len(lead) + 1, owner)
    y = check_rank(yname, y, len(axes) + len(lead) + 1, owner)
    for name, x, size, what in (
        (fname, f, n_feat, "n_features"),
        (yname, y, n_out, "n_out"),
    ):
        expected = lead + (size,)
        if tuple(x.shape[len(axes) :]) != expected:
            spec = ", ".join(axes + chunk_axes + (what,))
            shape = ", ".join([*axes, *map(str, expected)])
            raise ValueError(
                f"{owner}: {name} must have shape ({shape}) i.e. ({spec}) to match "
                f"the learner's weights {tuple(state.W.shape)}, got {tuple(x.shape)}"
            )
    if rows and f.shape[0] != y.shape[0]:
        raise ValueError(
            f"{owner}: feats and targets must have the same number of rows, got "
            f"{f.shape[0]} and {y.shape[0]}"
        )
    dtype = state.W.dtype
    return f.astype(dtype), y.astype(dtype)


# --------------------------------------------------------------------------
# Low level: learners on features
# --------------------------------------------------------------------------


def rls_init(
    n_features: int,
    n_out: int,
    delta: float = 1e-6,
    forgetting: float = 1.0,
    *,
    chunks: int | None = None,
    dtype=None,
) -> RLSState:
    """A fresh RLS learner: ``W = 0``, ``P = I / delta`` (``S = I / sqrt(delta)``).

    Parameters
    ----------
    n_features : int
        Length of a feature row ``f``.
    n_out : int
        Length of a target row ``y``.
    delta : float, default 1e-6
        Initial regularisation, ``P0 = I / delta``; must be > 0. With
        ``forgetting=1`` the learnt weights equal ridge regression with
        ``beta = delta`` (see the module docstring). Small values learn fast
        (reservoirpy's RLS default ``alpha`` is the same 1e-6); FORCE uses
        larger ones (Sussillo & Abbott take 1 to 100).
    forgetting : float, default 1.0
        Forgetting factor ``λ`` in ``(0, 1]``; row ``i`` of ``n`` is weighted
        ``λ^(n-i)``.
    chunks : int, optional
        Number of independent readouts sharing the update (parallel reservoirs):
        ``W`` becomes ``(chunks, n_out, n_features)``, ``S`` (and ``P``)
        ``(chunks, n_features, n_features)``.
    dtype : dtype, optional
        float32 or float64; default the JAX default float dtype.

    Returns
    -------
    state : RLSState

    Example
    -------
    >>> s = rls_init(10, 2, delta=1e-3)
    >>> s = rls_fit(s, feats, targets)      # feats (T, 10), targets (T, 2)
    >>> pred = feats_new @ s.W.T
    """
    owner = "rls_init"
    n_features, n_out, chunks = _check_sizes(owner, n_features, n_out, chunks)
    dtype = check_dtype(dtype, owner)
    delta = _delta(owner, delta, dtype)
    lam = _forgetting(owner, forgetting, dtype)
    lead = _lead(chunks)
    S = jnp.broadcast_to(
        jnp.eye(n_features, dtype=dtype) / jnp.sqrt(delta),
        lead + (n_features, n_features),
    )
    W = jnp.zeros(lead + (n_out, n_features), dtype)
    return RLSState(W, S, lam, jnp.zeros((), jnp.int32))


def lms_init(
    n_features: int,
    n_out: int,
    learning_rate: float,
    *,
    normalized: bool = False,
    eps: float = 1e-8,
    chunks: int | None = None,
    dtype=None,
) -> LMSState:
    """A fresh LMS learner with ``W = 0``.

    Parameters
    ----------
    n_features : int
        Length of a feature row ``f``.
    n_out : int
        Length of a target row ``y``.
    learning_rate : float
        Step size ``μ > 0``. Plain LMS is stable (in mean square) only for
        ``μ`` well below ``2 / trace(E[f fᵀ])``; normalised LMS for ``0 < μ < 2``.
    normalized : bool, default False
        Normalised LMS: the step is divided by ``eps + fᵀ f``, which makes the
        stable range of ``μ`` independent of the feature scale.
    eps : float, default 1e-8
        Regulariser of the normalised step (ignored otherwise).
    chunks : int, optional
        Independent readouts, as for :func:`rls_init`.
    dtype : dtype, optional
        float32 or float64; default the JAX default float dtype.

    Returns
    -------
    state : LMSState

    Example
    -------
    >>> s = lms_init(10, 2, learning_rate=0.5, normalized=True)
    >>> s, err = lms_fit(s, feats, targets, return_errors=True)
    """
    owner = "lms_init"
    n_features, n_out, chunks = _check_sizes(owner, n_features, n_out, chunks)
    dtype = check_dtype(dtype, owner)
    if not isinstance(normalized, bool):
        raise TypeError(f"{owner}: normalized must be a bool, got {normalized!r}")
    eps = check_float("eps", eps, owner, low=0.0)
    mu = _learning_rate(owner, learning_rate, normalized, dtype)
    W = jnp.zeros(_lead(chunks) + (n_out, n_features), dtype)
    return LMSState(W, mu, jnp.zeros((), jnp.int32), normalized, float(eps))


@compiled
def _update(state, f, y, owner):
    state = state._guard(owner)
    f = check_finite(f, "f", owner, _NAN_HINT)
    y = check_finite(y, "y", owner, _NAN_HINT)
    new, e = state._row(f, y)
    new = _errors.check(
        new, ~jnp.all(jnp.isfinite(new.W)), _DIVERGED.format(owner=owner)
    )
    return new, e


@compiled
def _fit(state, feats, targets, owner, return_errors):
    state = state._guard(owner)
    feats = check_finite(feats, "feats", owner, _NAN_HINT)
    targets = check_finite(targets, "targets", owner, _NAN_HINT)

    def step(s, fy):
        return s._row(*fy)

    new, errs = jax.lax.scan(step, state, (feats, targets))
    new = _errors.check(
        new, ~jnp.all(jnp.isfinite(new.W)), _DIVERGED.format(owner=owner)
    )
    return (new, errs) if return_errors else new


def rls_update(
    state: RLSState, f: Array, y: Array, return_error: bool = False
) -> RLSState | tuple[RLSState, Array]:
    """Learn one row: ``f`` ``([chunks,] n_features)``, ``y`` ``([chunks,] n_out)``.

    Parameters
    ----------
    state : RLSState
    f : Array
        Feature row, ``(n_features,)`` or ``(chunks, n_features)``.
    y : Array
        Target row, ``(n_out,)`` or ``(chunks, n_out)``.
    return_error : bool, default False
        Also return the a-priori error ``y - W f`` (weights before the update).

    Returns
    -------
    state : RLSState
        The updated learner (and the error when ``return_error``).
    """
    return _learn_row("rls_update", RLSState, state, f, y, return_error)


def rls_fit(
    state: RLSState,
    feats: Float[Array, "rows ..."],
    targets: Float[Array, "rows ..."],
    return_errors: bool = False,
) -> RLSState | tuple[RLSState, Array]:
    """Learn rows one after another (a ``lax.scan`` of :func:`rls_update`).

    Parameters
    ----------
    state : RLSState
        From :func:`rls_init`, or returned by a previous call: fitting a
        sequence in pieces gives the same learner as fitting it at once.
    feats : Array
        ``(rows, n_features)`` or ``(rows, chunks, n_features)``.
    targets : Array
        ``(rows, n_out)`` or ``(rows, chunks, n_out)``.
    return_errors : bool, default False
        Also return the a-priori errors ``y_i - W_{i-1} f_i``, shaped like
        ``targets``.

    Returns
    -------
    state : RLSState
        The updated learner (and the errors when ``return_errors``).

    Example
    -------
    >>> s = rls_fit(rls_init(8, 2, delta=0.1), X, Y)
    >>> np.allclose(s.W, np.linalg.solve(X.T @ X + 0.1 * np.eye(8), X.T @ Y).T)
    True
    """
    return _learn_rows("rls_fit", RLSState, state, feats, targets, return_errors)


def lms_update(
    state: LMSState, f: Array, y: Array, return_error: bool = False
) -> LMSState | tuple[LMSState, Array]:
    """Learn one row by (normalised) LMS: parameters and returns as
    :func:`rls_update`, with an :class:`LMSState` from :func:`lms_init`."""
    return _learn_row("lms_update", LMSState, state, f, y, return_error)


def lms_fit(
    state: LMSState,
    feats: Float[Array, "rows ..."],
    targets: Float[Array, "rows ..."],
    return_errors: bool = False,
) -> LMSState | tuple[LMSState, Array]:
    """Learn rows one after another by (normalised) LMS: parameters and
    returns as :func:`rls_fit`, with an :class:`LMSState`."""
    return _learn_rows("lms_fit", LMSState, state, feats, targets, return_errors)


def _learn_row(owner, kind, state, f, y, return_error):
    """The public one-row update of either learner (``kind`` its state class)."""
    _check_state(owner, state, kind)
    f, y = _check_rows(owner, state, f, y, rows=False)
    new, e = _update(state, f, y, owner)
    return (new, e) if return_error else new


def _learn_rows(owner, kind, state, feats, targets, return_errors):
    """The public sequence fit of either learner."""
    _check_state(owner, state, kind)
    feats, targets = _check_rows(owner, state, feats, targets, rows=True)
    return _fit(state, feats, targets, owner, bool(return_errors))


# --------------------------------------------------------------------------
# High level: models
# --------------------------------------------------------------------------

_METHODS = ("rls", "lms")


def _check_model(owner, model):
    if not isinstance(model, RCForecasterBase) or isinstance(model, CRCForecasterBase):
        raise TypeError(
            f"{owner}: model must be a discrete-time forecaster (an "
            f"RCForecasterBase such as ESNForecaster; continuous-time models are "
            f"not supported), got {type(model).__name__}"
        )


def _check_sequences(owner, model, seq, seq_name, target_seq, spinup, cont):
    """Ranks/widths of the sequences; returns them and the number of pairs."""
    what = "(seq_len, data_dim)"
    seq = check_data(seq_name, seq, owner, model.dtype)
    seq = check_rank(seq_name, seq, 2, owner, what)
    check_last_dim(seq_name, seq, model.in_dim, owner, "features (data_dim)")
    T = seq.shape[0]
    if target_seq is not None:
        target_seq = check_data("target_seq", target_seq, owner, model.dtype)
        target_seq = check_rank("target_seq", target_seq, 2, owner, what)
        if target_seq.shape != (T, model.out_dim):
            raise ValueError(
                f"{owner}: target_seq must have shape ({T}, {model.out_dim}) "
                f"(one row per row of {seq_name}, out_dim columns), got "
                f"{tuple(target_seq.shape)}"
            )
        n_pairs = T
    else:
        n_pairs = T if cont else T - 1
    spinup = check_spinup(
        spinup,
        n_pairs,
        owner,
        f"the number of training pairs ({n_pairs}; {seq_name} has {T} samples)",
    )
    return seq, target_seq, spinup


def _learner_shape(model, r0):
    """Shape of ``W`` for this model's readout: ``([C,] O, F)``."""
    ro = model.readout
    f = jax.eval_shape(lambda r: ro.prepare_train(r[None])[0], r0)
    y = jax.eval_shape(
        lambda u: ro.prepare_target(u[None])[0],
        jax.ShapeDtypeStruct((model.out_dim,), model.dtype),
    )
    if f.shape[:-1] != y.shape[:-1]:
        raise ValueError(
            f"{type(ro).__name__}: prepare_train features {f.shape} and "
            f"prepare_target targets {y.shape} disagree on the chunk axis"
        )
    return f.shape[:-1] + (y.shape[-1], f.shape[-1])


def _learner(
    owner, model, r0, method, state, forgetting, delta, learning_rate, normalized
):
    """A new learner for ``model``'s readout, or the checked ``state``."""
    shape = _learner_shape(model, r0)
    dtype = jnp.dtype(model.dtype)
    lead, (n_out, n_feat) = shape[:-2], shape[-2:]
    chunks = lead[0] if lead else None
    if state is None:
        if method == "rls":
            if learning_rate is not None or normalized is not None:
                raise ValueError(
                    f"{owner}: learning_rate and normalized apply to method='lms' only"
                )
            return rls_init(
                n_feat,
                n_out,
                1e-6 if delta is None else delta,
                1.0 if forgetting is None else forgetting,
                chunks=chunks,
                dtype=dtype,
            )
        if delta is not None or forgetting is not None:
            raise ValueError(
                f"{owner}: delta and forgetting apply to method='rls' only"
            )
        normalized = True if normalized is None else normalized
        if learning_rate is None:
            if not normalized:
                raise ValueError(
                    f"{owner}: learning_rate is required for plain LMS "
                    "(normalized=False): its stable range depends on the feature scale"
                )
            learning_rate = 0.5
        return lms_init(
            n_feat,
            n_out,
            learning_rate,
            normalized=normalized,
            chunks=chunks,
            dtype=dtype,
        )
    cls = RLSState if method == "rls" else LMSState
    if not isinstance(state, cls):
        raise TypeError(
            f"{owner}: state must be an {cls.__name__} for method={method!r}, "
            f"got {type(state).__name__}"
        )
    if tuple(state.W.shape) != tuple(shape):
        raise ValueError(
            f"{owner}: state.W must have shape {tuple(shape)} for this model's "
            f"readout, got {tuple(state.W.shape)}"
        )
    if state.W.dtype != dtype:
        raise TypeError(
            f"{owner}: state has dtype {state.W.dtype} but the model is {dtype}"
        )
    if delta is not None:
        raise ValueError(
            f"{owner}: delta only sets the initial P of a new learner; it cannot be "
            "combined with state"
        )
    if method == "rls":
        if learning_rate is not None or normalized is not None:
            raise ValueError(
                f"{owner}: learning_rate and normalized apply to method='lms' only"
            )
        if forgetting is not None:
            state = eqx.tree_at(
                lambda s: s.forgetting, state, _forgetting(owner, forgetting, dtype)
            )
        return state
    if forgetting is not None:
        raise ValueError(f"{owner}: forgetting applies to method='rls' only")
    if normalized is not None and normalized != state.normalized:
        raise ValueError(
            f"{owner}: normalized={normalized} differs from the state's "
            f"({state.normalized}); it is fixed when the learner is created"
        )
    if learning_rate is not None:
        state = eqx.tree_at(
            lambda s: s.learning_rate,
            state,
            _learning_rate(owner, learning_rate, state.normalized, dtype),
        )
    return state


@compiled
def _run(
    model,
    seq,
    target_seq,
    r0,
    learner,
    spinup,
    *,
    owner,
    seq_name,
    cont,
    closed_loop,
    return_errors,
):
    """Drive the reservoir step by step while the learner updates the readout.

    Slot ``k`` holds the state ``r_k`` reached before input ``k``. Without
    ``target_seq`` slot ``k`` pairs ``r_k`` with ``seq[k]`` (the sample that
    follows the input that produced ``r_k``); slot 0 has a pair only when the
    call continues a stream (``cont``). With ``target_seq`` slot ``k >= 1``
    pairs ``r_k`` with ``target_seq[k - 1]`` and a last learn-only step pairs
    ``r_T`` with ``target_seq[-1]``. Pair ``i`` (counted from the first) is
    learnt when ``i >= spinup``. ``closed_loop``: ``False`` drives the
    reservoir with ``seq``; ``"prior"`` or ``"posterior"`` feeds back the
    readout's output of each learnt pair, read before or after its update
    (:func:`train_force`).
    """
    dtype = model.dtype
    readout, driver, embedding = model.readout, model.driver, model.embedding
    learner = learner._guard(owner)
    seq = check_finite(seq.astype(dtype), seq_name, owner, _NAN_HINT)
    if target_seq is not None:
        target_seq = check_finite(
            target_seq.astype(dtype), "target_seq", owner, _NAN_HINT
        )
        slot_targets = jnp.concatenate([target_seq[:1], target_seq[:-1]], axis=0)
    else:
        slot_targets = seq
    T = seq.shape[0]
    first = 0 if cont else 1  # slot of the first pair
    active = jnp.arange(T, dtype=jnp.int32) >= first + spinup

    def learn(learner, r, target, on):
        out = readout.set_wout(learner.W).readout(r)  # a-priori output
        feats = readout.prepare_train(r[None])[0].astype(dtype)
        y = readout.prepare_target(target[None])[0].astype(dtype)
        learner, _ = learner._row(feats, y, on)
        return learner, out

    def step(carry, xs):
        learner, r = carry
        u, target, on = xs
        learner, out = learn(learner, r, target, on)
        fed = out
        if closed_loop == "posterior":  # the output of the updated readout
            fed = readout.set_wout(learner.W).readout(r)
        x = jnp.where(on, fed, u) if closed_loop else u
        r = driver.advance(embedding.embed(x), r)
        return (learner, r), target - out

    (learner, r), errs = jax.lax.scan(step, (learner, r0), (seq, slot_targets, active))
    errs = errs[first:]
    if target_seq is not None:
        learner, out = learn(learner, r, target_seq[-1], jnp.asarray(True))
        errs = jnp.concatenate([errs, (target_seq[-1] - out)[None]], axis=0)
    learner = _errors.check(
        learner, ~jnp.all(jnp.isfinite(learner.W)), _DIVERGED.format(owner=owner)
    )
    model = model.set_readout(readout.set_wout(learner.W))
    if return_errors:
        return model, learner, r, errs
    return model, learner, r


def _train(
    owner,
    model,
    seq,
    seq_name,
    target_seq,
    spinup,
    initial_res_state,
    learner_args: tuple,
    *,
    cont,
    closed_loop,
    return_errors,
):
    """What :func:`train_online` and :func:`train_force` share once their own
    arguments are checked: the sequences (:func:`_check_sequences`) and the
    start state are checked, the learner made or checked (:func:`_learner`,
    its arguments after ``r0`` being ``learner_args``), and the reservoir
    driven by ``seq`` (:func:`_run`)."""
    seq, target_seq, spinup = _check_sequences(
        owner, model, seq, seq_name, target_seq, spinup, cont
    )
    check_initial_state(owner, model, initial_res_state, 1, False)
    r0 = initial_states(model, initial_res_state, None, False)
    learner = _learner(owner, model, r0, *learner_args)
    return _run(
        model,
        seq,
        target_seq,
        r0,
        learner,
        jnp.asarray(spinup, jnp.int32),  # traced: no recompile per spinup
        owner=owner,
        seq_name=seq_name,
        cont=cont,
        closed_loop=closed_loop,
        return_errors=bool(return_errors),
    )


def train_online(
    model: RCForecasterBase,
    train_seq: Float[Array, "seq_len data_dim"],
    target_seq: Float[Array, "seq_len out_dim"] | None = None,
    method: str = "rls",
    spinup: int = 0,
    initial_res_state: Array | None = None,
    forgetting: float | None = None,
    delta: float | None = None,
    learning_rate: float | None = None,
    normalized: bool | None = None,
    state: RLSState | LMSState | None = None,
    return_errors: bool = False,
):
    """Teacher-force a forecaster and learn its readout online (RLS or LMS).

    The reservoir is driven by ``train_seq`` one step at a time inside one
    ``lax.scan``, and the readout weights are updated at every step; no state
    history is stored (memory ``O(n_features²)`` for RLS whatever the length).
    Pairs follow the batch convention of
    :func:`orc.forecaster.train_RCForecaster`: the state after input ``t`` is
    regressed onto ``train_seq[t + 1]`` (or onto ``target_seq[t]``), the first
    ``spinup`` pairs are skipped, and with ``forgetting=1``, ``delta=beta`` the
    RLS readout equals the batch ridge readout up to rounding.

    **Streams.** The call returns the learner and the last reservoir state;
    pass them back as ``state=`` and ``initial_res_state=`` with the next piece
    of the stream. When both are given (and no ``target_seq``), the call
    continues the stream: ``initial_res_state`` is taken to be the state after
    the previous piece's last sample, so it is also regressed onto
    ``train_seq[0]``, the pair straddling the two pieces, and fitting a sequence
    in pieces gives the same model and learner as fitting it at once. With
    ``target_seq`` each piece brings its own pairs and no pair straddles.

    Compiled (arrays traced, other arguments static, as ``eqx.filter_jit``
    splits them); hyperparameters (``forgetting``,
    ``delta``, ``learning_rate``, ``spinup``) enter as arrays, so new values do
    not recompile. Under ``jax.jit`` mark ``method``, ``spinup`` and
    ``return_errors`` static; mapping over learners with ``vmap`` works.

    Parameters
    ----------
    model : RCForecasterBase
        A discrete-time forecaster (ESNForecaster, EnsembleESNForecaster,
        DeepESNForecaster or a custom subclass); its current readout weights
        are replaced by the learnt ones.
    train_seq : Array
        ``(seq_len, data_dim)``, the inputs that force the reservoir.
    target_seq : Array, optional
        ``(seq_len, out_dim)``: ``target_seq[t]`` is the target of the state
        after ``train_seq[t]``. Unlike the batch trainer, the reservoir is not
        then advanced with ``target_seq[-1]``: the returned state is the one
        after ``train_seq[-1]``, so the next piece of a stream continues from
        it (to forecast after ``target_seq``, first
        ``model.force(target_seq[-1:], res_state)[-1]``).
    method : {"rls", "lms"}, default "rls"
        Recursive least squares or (normalised) LMS.
    spinup : int, default 0
        Leading pairs not learnt (the reservoir still runs).
    initial_res_state : Array, optional
        Start state (default zeros), shape ``model.driver.default_state()``.
    forgetting : float, optional
        RLS forgetting factor in ``(0, 1]``; default 1.0 for a new learner,
        the learner's own when ``state`` is given (a value given then replaces it).
    delta : float, optional
        RLS initial regularisation ``P0 = I / delta`` (default 1e-6), equal to
        the ridge ``beta`` of the batch fit; new learners only.
    learning_rate : float, optional
        LMS step size; default 0.5 for normalised LMS, required for plain LMS.
        With ``state`` a given value replaces the learner's.
    normalized : bool, optional
        Normalised LMS (default True); fixed when the learner is created.
    state : RLSState or LMSState, optional
        A learner returned by a previous call (its type must match ``method``).
    return_errors : bool, default False
        Also return the a-priori errors ``target - output`` of every pair of
        this call (also the spun-up ones, which are not learnt), computed with
        the weights before that pair's update: ``(n_pairs, out_dim)`` with
        ``n_pairs = seq_len - 1`` for a fresh start without ``target_seq``,
        ``seq_len`` otherwise.

    Returns
    -------
    model : RCForecasterBase
        The model with the learnt readout.
    state : RLSState or LMSState
        The learner, to continue training on the next piece.
    res_state : Array
        The reservoir state after the last input; ``model.forecast(n,
        res_state)[0]`` predicts the sample after ``train_seq``.
    errors : Array
        Only with ``return_errors``.

    Example
    -------
    >>> esn = ESNForecaster(3, 200)
    >>> esn, learner, r = train_online(esn, U[:1000], spinup=100)
    >>> esn, learner, r = train_online(esn, U[1000:2000], state=learner,
    ...                                initial_res_state=r)   # continue the stream
    >>> pred = esn.forecast(500, r)
    """
    owner = "train_online"
    _check_model(owner, model)
    if method not in _METHODS:
        raise ValueError(f"{owner}: method must be one of {_METHODS}, got {method!r}")
    if normalized is not None and not isinstance(normalized, bool):
        raise TypeError(f"{owner}: normalized must be a bool, got {normalized!r}")
    cont = state is not None and initial_res_state is not None and target_seq is None
    return _train(
        owner,
        model,
        train_seq,
        "train_seq",
        target_seq,
        spinup,
        initial_res_state,
        (method, state, forgetting, delta, learning_rate, normalized),
        cont=cont,
        closed_loop=False,
        return_errors=return_errors,
    )


def train_force(
    model: RCForecasterBase,
    target_seq: Float[Array, "seq_len data_dim"],
    spinup: int = 0,
    initial_res_state: Array | None = None,
    forgetting: float | None = None,
    delta: float | None = None,
    state: RLSState | None = None,
    return_errors: bool = False,
    feedback: str = "posterior",
):
    """FORCE learning (Sussillo & Abbott 2009): RLS on the readout in closed loop.

    The forecaster runs autonomously, its output fed back as its next input,
    while RLS updates the readout at every step toward ``target_seq``. At step
    ``k`` with state ``r_k``::

        z_k = W_{k-1} φ(r_k)                       output of the current readout
        W_k = RLS update of W_{k-1} on (φ(r_k), target_seq[k])
        r_{k+1} = driver(embed(W_k φ(r_k)), r_k)   the output, not the target, is fed back

    By default the fed-back output is the a-posteriori one, ``W_k φ(r_k)``,
    read after the step's update (reservoirpy's ``RLS`` node does the same);
    ``feedback="prior"`` feeds back ``z_k``, read before it, as in Sussillo &
    Abbott's algorithm. A small ``delta`` (large ``P0 = I / delta``) makes the
    first updates strong, so the output is pulled to the target at once and the
    error stays small throughout: the network learns with its own output in
    the loop and so learns to correct it.

    **Difference from teacher forcing** (:func:`train_online`,
    :func:`orc.forecaster.train_RCForecaster`): there the reservoir is driven
    by the true sequence and the readout never sees the consequences of its
    own errors; in closed loop, small errors are fed back and can grow, so a
    teacher-forced readout may be unstable autonomously. FORCE trains on the
    closed-loop dynamics themselves, so the learnt loop is stabilised around the
    target (the feedback is part of what is trained). The cost is one RLS step
    (``O(n_features²)``) per time step, and the learnt weights depend on the
    order of the data rather than solving a single regression.

    The first sample ``target_seq[0]`` is fed in as the input that starts the
    run; with ``spinup`` the first ``spinup + 1`` samples are fed in (teacher
    forcing, no learning) to warm the reservoir up before the loop closes.
    As in :func:`train_online`, pair ``t`` regresses the state after input
    ``t`` onto ``target_seq[t + 1]``, and passing the returned ``state`` and
    ``res_state`` back with the next piece continues the run (the loop stays
    closed across pieces).

    Parameters
    ----------
    model : RCForecasterBase
        A discrete-time forecaster (its readout output is its next input).
    target_seq : Array
        ``(seq_len, data_dim)``, the trajectory the closed loop should produce.
    spinup : int, default 0
        Teacher-forced warm-up pairs, not learnt.
    initial_res_state : Array, optional
        Start state (default zeros).
    forgetting : float, optional
        RLS forgetting factor in ``(0, 1]`` (default 1.0, or the state's own).
    delta : float, optional
        ``P0 = I / delta`` (Sussillo & Abbott's ``α``), new learners only;
        default 1e-6. Sussillo & Abbott use 1 to 100 for a rate network whose
        units swing over their whole range; the states of an ESN vary little
        around their operating point, and on sinusoidal targets (res_dim
        100-200) 1e-3 already left closed-loop errors ~10x larger than 1e-6.
        Smaller still (1e-8, 1e-10) lowered the median free-run error of
        smooth targets another 10x each step, but on a triangle wave one of
        six seeds diverged at 1e-8 (none at 1e-6): 1e-6 is the robust default.
    state : RLSState, optional
        A learner returned by a previous call.
    return_errors : bool, default False
        Also return the a-priori errors ``target - z`` of every pair
        (``(n_pairs, data_dim)``, as in :func:`train_online`); with
        ``feedback="prior"``, ``target - errors`` is the closed-loop output
        during training.
    feedback : {"posterior", "prior"}, default "posterior"
        Which output is fed back while learning: the readout's after the
        step's update, or before it. Measured on the Notes' reservoir over
        seeds 0-5 (median / largest free-run error over 500 steps, ``delta``
        1e-6), the posterior feedback left 3 to 60 times smaller errors:
        two sines 2.1e-4 / 3.0e-3 against 1.2e-2 / 4.2e-2, one sine 2.1e-4 /
        2.6e-4 against 2.2e-3 / 5.1e-3, a smoothed square wave 0.11 / 0.45
        against 0.39 / 0.81, Mackey-Glass (100 steps) 1.9e-2 against 0.92;
        the same order at ``delta`` 1e-8 and 1e-4. A quasi-periodic sum of
        three sines was learnt by neither (the posterior's free run
        diverged, which ``forecast`` reports).

    Returns
    -------
    model : RCForecasterBase
        The model with the learnt readout.
    state : RLSState
        The learner.
    res_state : Array
        The state after the last step; ``model.forecast(n, res_state)``
        continues the closed loop, predicting the samples after ``target_seq``.
    errors : Array
        Only with ``return_errors``.

    Notes
    -----
    The reservoir must respond to its fed-back input: with ORC's default ESN
    hyperparameters (a large ``bias``, a small ``embedding_scaling``) the units sit
    deep in saturation and FORCE did not learn a sinusoid in our trials. With
    ``bias=0.5, embedding_scaling=0.5, Wr_spectral_radius=1.2,
    Wr_density=0.1`` and ``res_dim=200`` it learnt
    ``0.6 sin(2πt/50) + 0.4 sin(2πt/25 + 1)`` in 3000 steps; the autonomous
    continuation stayed within 2.8e-4 of the target for 500 steps (10
    periods; median over seeds 0-9; 1.2e-2 with ``feedback="prior"``), where
    teacher forcing + ridge on the same reservoir drifted to 0.17.

    Example
    -------
    >>> t = jnp.arange(3500.0)
    >>> target = (0.6 * jnp.sin(2 * jnp.pi * t / 50)
    ...           + 0.4 * jnp.sin(2 * jnp.pi * t / 25 + 1.0))[:, None]
    >>> esn = ESNForecaster(1, 200, bias=0.5, embedding_scaling=0.5,
    ...                     Wr_spectral_radius=1.2, Wr_density=0.1)
    >>> esn, learner, r = train_force(esn, target[:3000])
    >>> out = esn.forecast(500, r)    # ≈ target[3000:]
    """
    owner = "train_force"
    _check_model(owner, model)
    if feedback not in ("posterior", "prior"):
        raise ValueError(
            f'{owner}: feedback must be "posterior" or "prior", got {feedback!r}'
        )
    cont = state is not None and initial_res_state is not None
    return _train(
        owner,
        model,
        target_seq,
        "target_seq",
        None,
        spinup,
        initial_res_state,
        ("rls", state, forgetting, delta, None, None),
        cont=cont,
        closed_loop=feedback,
        return_errors=return_errors,
    )
