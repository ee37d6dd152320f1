"""Base class of reservoir classifiers.

A sequence is driven through the reservoir and summarised by one feature
vector (its *representation*, ``state_repr``), which the readout maps to class
scores; the probabilities are their softmax. Training fits the readout by
ridge regression onto one-hot labels. With states ``r_t`` after input ``u_t``
(``t = 0 .. T-1``) and ``S = {spinup, ..., T-1}``:

``"final"`` (default, ORC 0.4)
    ``r_{T-1}`` — ``res_dim`` features.
``"mean"`` (ORC 0.4)
    the mean of ``r_t`` over ``S`` — ``res_dim`` features.
``"stats"``
    ``[r_{T-1}, mean, std]`` over ``S`` (population standard deviation, per
    node) — ``3 * res_dim`` features. The final state keeps what the series
    did last, the mean its level, the standard deviation how strongly each
    node responds to it.
``"model_space"`` (Bianchi et al. 2020, "reservoir model space")
    the weights of a ridge one-step predictor fitted to this one series,
    ``u_{t+1} ≈ W p_t + b`` for ``t`` in ``S`` (``t < T-1``), where ``p_t`` is
    the first ``P = model_space_dim`` nodes of ``r_t``. The feature is
    ``[W[0], b[0], W[1], b[1], ...]`` — ``data_dim * (P + 1)`` features.
    The bias is not penalised (the fit is centred); the ridge is
    ``MODEL_SPACE_RIDGE`` times the mean variance of the ``P`` nodes, so it
    does not depend on the series' length or scale. It is solved in closed
    form (Cholesky) in float64 when JAX's x64 is on (float32 otherwise).
    The paper reduces the state by PCA fitted to the training states; a
    subset of nodes needs no fit (a representation stays a function of one
    series, so ``classify`` is unchanged by training) and no extra
    parameters, and since the reservoir's nodes are exchangeable (random
    ``W`` and ``W_in``) the first ``P`` are a random choice of ``P``.
``"ppv"`` (proportion of positive values: ROCKET's pooling, Dempster et al. 2020)
    per node, the mean of ``r_t`` over ``S`` and, for each ``q`` in
    :data:`PPV_QUANTILES` (0.25, 0.5, 0.75), the fraction of steps in ``S``
    with ``r_{t,i} > θ_{q,i}``: ``[mean, ppv_0.25, ppv_0.5, ppv_0.75]``,
    ``4 * res_dim`` features. The thresholds ``θ_{q,i}`` are the
    ``q``-quantiles of node ``i``'s states over the training set (all
    training series, steps in ``S``; about :data:`PPV_MAX_STATES` per node
    at most, taken with a fixed stride), fitted by
    :func:`~orc.classifier.train_RCClassifier` and stored in
    :attr:`RCClassifierBase.ppv_thresholds` (``(passes, 3, res_dim)``; zeros,
    i.e. the fraction of positive states, until trained). The PPV counts
    how often a node is above its typical levels, which the mean cannot
    tell from a few large excursions.
``"bi_<repr>"`` (``"bi_final"``, ``"bi_mean"``, ``"bi_stats"``, ``"bi_model_space"``, ``"bi_ppv"``)
    bidirectional: the representation of the series concatenated with that
    of the time-reversed series, driven through the same reservoir from the
    same initial state (``spinup`` skips the first steps of each pass) —
    twice the features. ``"bi_ppv"`` has its own thresholds for the reversed
    pass (``ppv_thresholds[1]``).

``input_differences=True`` adds ``data_dim`` input channels: the first
differences ``d_t = (u_t - u_{t-1}) / σ`` (``d_0 = 0``; ``σ`` per channel, the
standard deviation of the training differences, fitted by training and
stored in :attr:`RCClassifierBase.difference_scale`; ones until trained).
The reservoir reads ``[u_t, d_t]`` (its embedding takes ``2 * data_dim``
inputs); the reversed pass differences the reversed series. The
``"model_space"`` predictor still predicts ``u``.

``input_lags=(L1, L2, ...)`` adds ``data_dim`` channels per lag ``L``, the
differences over ``L`` steps ``(u_t - u_{t-L}) / σ_L`` (0 for ``t < L``;
``σ_L`` per channel, the standard deviation of the training series'
differences over ``L`` steps, in :attr:`RCClassifierBase.lag_scale`). They
come first: with ``input_differences=True`` as well, the first differences
are those of every channel, the lag channels' included, so
``input_lags=(4, 16), input_differences=True`` reads ``[u, d4, d16]`` and
their first differences (``6 * data_dim`` inputs). Differences over several
lags show the reservoir how the series changes at several time scales at
once, which a leaky reservoir's single time scale does not, as the
dilations of MiniRocket's kernels do (Dempster et al. 2021): on the seven
UCR/UEA sets of ``benchmarks/science/CLASSIFICATION.md`` that pair lifts
the bidirectional PPV recipe from 0.911 to 0.940 mean accuracy over three
reservoir seeds, level with MiniRocket's 0.939.

``"final"``, ``"mean"`` and ``"ppv"`` are computed in the scan carry, so no
state history is stored; ``"stats"`` too (Welford's running mean and variance);
``"model_space"`` keeps the ``P`` chosen nodes of each state.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._compose import check_model
from .._defaults import CLASSIFIER
from .._model import RCModel
from .._strategy import compiled, method
from .._validation import (
    check_finite,
    check_int,
    check_sequence,
    check_spinup,
    set_field_defaults,
    warn_if_untrained,
)
from ..drivers import DriverBase, check_state
from ..embeddings import EmbedBase
from ..readouts import ReadoutBase

__all__ = ["RCClassifierBase", "feature_dim", "STATE_REPRS", "FITTED_REPRS"]

BASE_REPRS = ("final", "mean", "stats", "model_space")
STATE_REPRS = BASE_REPRS + tuple(f"bi_{r}" for r in BASE_REPRS)
"""Representations that are a function of the one series alone."""
FITTED_REPRS = ("ppv", "bi_ppv")
"""Representations with parameters fitted by training (the PPV thresholds)."""
ALL_REPRS = STATE_REPRS + FITTED_REPRS
MODEL_SPACE_DIM = 75
"""Default number of nodes the model-space predictor reads (the paper's PCA size)."""
MODEL_SPACE_RIDGE = 1e-3
"""Ridge of the model-space fit, relative to the mean variance of its nodes."""
PPV_QUANTILES = (0.25, 0.5, 0.75)
"""Quantiles of the training states that the ``"ppv"`` thresholds sit at."""
PPV_MAX_STATES = 10_000
"""At most about this many training states per node (per pass) fix the
``"ppv"`` thresholds; above it each series contributes every ``stride``-th kept
state (the same ``stride`` for all), so the fit is deterministic. A
quartile of 10,000 samples is within about 0.005 (in probability) of the
population's; sorting them is most of the fit's cost on a CPU."""


def check_lags(input_lags, owner: str) -> tuple[int, ...]:
    """``input_lags`` as a tuple of distinct positive ints (``()`` for none)."""
    try:
        lags = tuple(input_lags)
        ok = all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1
            for v in lags
        ) and len(set(lags)) == len(lags)
    except TypeError:
        ok = False
    if not ok:
        raise TypeError(
            f"{owner}: input_lags must be a sequence of distinct positive ints "
            f"(steps, e.g. (4, 16)), got {input_lags!r}"
        )
    return tuple(int(v) for v in lags)


def lagged_differences(seq, lags):
    """``(T, len(lags) * d)``: ``seq[t] - seq[t - L]`` for each lag ``L`` (0 for
    ``t < L``), the lags' blocks side by side."""
    t = jnp.arange(seq.shape[0])[:, None]
    blocks = []
    for lag in lags:
        shifted = jnp.concatenate([jnp.zeros((lag,) + seq.shape[1:], seq.dtype), seq])
        blocks.append(jnp.where(t >= lag, seq - shifted[: seq.shape[0]], 0))
    return jnp.concatenate(blocks, axis=1)


def _check_state_repr(state_repr, owner: str) -> str:
    if not isinstance(state_repr, str) or state_repr not in ALL_REPRS:
        raise ValueError(
            f"{owner}: state_repr must be one of {', '.join(map(repr, ALL_REPRS))}, "
            f"got {state_repr!r}"
        )
    return state_repr


def _split_repr(state_repr: str) -> tuple[str, bool]:
    """``("stats", True)`` for ``"bi_stats"``."""
    if state_repr.startswith("bi_"):
        return state_repr[3:], True
    return state_repr, False


def feature_dim(
    state_repr: str, res_dim: int, data_dim: int, model_space_dim: int | None = None
) -> int:
    """Length of the feature vector a representation gives (the readout's input
    size): ``res_dim`` for ``"final"``/``"mean"``, ``3 * res_dim`` for
    ``"stats"``, ``4 * res_dim`` for ``"ppv"``,
    ``data_dim * (model_space_dim + 1)`` for ``"model_space"``
    (``model_space_dim`` defaults to ``min(res_dim, 75)``); twice that for the
    ``"bi_"`` forms."""
    owner = "feature_dim"
    base, bi = _split_repr(_check_state_repr(state_repr, owner))
    res_dim = check_int("res_dim", res_dim, owner, minimum=1)
    data_dim = check_int("data_dim", data_dim, owner, minimum=1)
    if base == "model_space":
        n = _model_space_dim(model_space_dim, res_dim, owner)
        dim = data_dim * (n + 1)
    else:
        dim = res_dim * {"stats": 3, "ppv": 1 + len(PPV_QUANTILES)}.get(base, 1)
    return dim * (2 if bi else 1)


def _model_space_dim(model_space_dim, res_dim: int, owner: str) -> int:
    if model_space_dim is None:
        return min(res_dim, MODEL_SPACE_DIM)
    return check_int(
        "model_space_dim", model_space_dim, owner, minimum=1, maximum=res_dim
    )


def _one_step_predictor(x, y):
    """Flattened ``[W[0], b[0], W[1], b[1], ...]`` of the ridge fit
    ``y_t ≈ W x_t + b`` (``W`` ``(out, in)``; ``b`` not penalised; ridge
    ``MODEL_SPACE_RIDGE`` times the mean variance of ``x``'s columns), in
    float64 when JAX's x64 is on."""
    wide = jax.dtypes.canonicalize_dtype(jnp.float64)  # float32 without x64
    x, y = x.astype(wide), y.astype(wide)
    m, p = x.shape
    x_mean, y_mean = jnp.mean(x, axis=0), jnp.mean(y, axis=0)
    xc, yc = x - x_mean, y - y_mean
    cov = jnp.matmul(xc.T, xc, precision="highest") / m
    cross = jnp.matmul(xc.T, yc, precision="highest") / m
    ridge = MODEL_SPACE_RIDGE * jnp.trace(cov) / p + jnp.finfo(wide).tiny
    factor = jax.scipy.linalg.cho_factor(cov + ridge * jnp.eye(p, dtype=wide))
    w = jax.scipy.linalg.cho_solve(factor, cross)  # (p, out)
    b = y_mean - jnp.matmul(x_mean, w, precision="highest")
    return jnp.concatenate([w.T, b[:, None]], axis=1).reshape(-1)


class RCClassifierBase(RCModel):
    """Reservoir classifier: embedding → driver → feature → readout → softmax.

    Parameters
    ----------
    driver, readout, embedding : components (``readout.out_dim == n_classes``)
    n_classes : int
    state_repr : {"final", "mean", "stats", "model_space", "ppv", "bi_final", \
"bi_mean", "bi_stats", "bi_model_space", "bi_ppv"}, default "final"
        The feature vector (see the module docstring). The readout's input
        size must be :func:`feature_dim` of it (the driver's ``res_dim`` for
        ``"final"``/``"mean"``); for ``"model_space"`` the readout's size sets
        how many nodes the predictor reads.
    dtype : dtype, default float64
    seed : int, default 0
    input_differences : bool, default False
        Feed the reservoir the scaled first differences of the input as
        ``data_dim`` extra channels (the embedding then takes
        ``2 * data_dim`` inputs; see the module docstring).

    Attributes
    ----------
    ppv_thresholds : Array ``(passes, 3, res_dim)`` or None
        The ``"ppv"`` thresholds (``None`` for the other representations).
    difference_scale : Array ``(data_dim * (1 + len(input_lags)),)`` or None
        The scale of the first-difference channels (``None`` without them).
    lag_scale : Array ``(len(input_lags) * data_dim,)`` or None
        The scale of the lagged-difference channels, lag by lag (``None``
        without them).
    lag_set : tuple of int or None
        The lags (``None`` without them; :attr:`input_lags` gives ``()``).
    selected_beta : Array or None
        The ridge strength leave-one-out chose when training was given
        several (``None`` otherwise).
    """

    n_classes: int = eqx.field(static=True)
    state_repr: str = eqx.field(default="final", static=True)
    # fields added after format-3 files were first written: such a file has
    # none of them and loads with None (orc.io, "added_field")
    ppv_thresholds: Array | None = eqx.field(
        default=None, metadata={"added_field": True}
    )
    difference_scale: Array | None = eqx.field(
        default=None, metadata={"added_field": True}
    )
    selected_beta: Array | None = eqx.field(
        default=None, metadata={"added_field": True}
    )
    lag_scale: Array | None = eqx.field(default=None, metadata={"added_field": True})
    lag_set: tuple[int, ...] | None = eqx.field(
        default=None, static=True, metadata={"added_field": True}
    )

    def __init__(
        self,
        driver: DriverBase,
        readout: ReadoutBase,
        embedding: EmbedBase,
        n_classes: int,
        state_repr: str = CLASSIFIER.state_repr,
        dtype=jnp.float64,
        seed=0,
        input_differences: bool = False,
        input_lags: tuple[int, ...] = (),
    ) -> None:
        name = type(self).__name__
        set_field_defaults(self)  # the unfitted fields (None) are stored too
        _check_state_repr(state_repr, name)
        if not isinstance(input_differences, bool):
            raise TypeError(
                f"{name}: input_differences must be a bool, got {input_differences!r}"
            )
        lags = check_lags(input_lags, name)
        self.n_classes = check_int("n_classes", n_classes, name, minimum=2)
        if readout.out_dim != self.n_classes:
            raise ValueError(
                f"{name}: readout.out_dim ({readout.out_dim}) must equal n_classes "
                f"({self.n_classes})"
            )
        per_dim = (1 + len(lags)) * (2 if input_differences else 1)
        if embedding.in_dim % per_dim:
            raise ValueError(
                f"{name}: input_differences={input_differences} with "
                f"{len(lags)} input_lags needs an embedding of {per_dim} * "
                f"data_dim inputs, got embedding.in_dim {embedding.in_dim}"
            )
        in_dim = embedding.in_dim // per_dim
        self._set_components(driver, readout, embedding, dtype, seed, in_dim)
        self.state_repr = state_repr
        base, bi = _split_repr(state_repr)
        if base == "ppv":  # fitted by training; 0 (the sign of the state) until then
            shape = (2 if bi else 1, len(PPV_QUANTILES), self.res_dim)
            self.ppv_thresholds = jnp.zeros(shape, self.dtype)
        if lags:
            self.lag_scale = jnp.ones(len(lags) * self.in_dim, self.dtype)
            self.lag_set = lags
        if input_differences:
            self.difference_scale = jnp.ones(self._channels, self.dtype)

    def __check_init__(self):
        name = type(self).__name__
        _check_state_repr(self.state_repr, name)
        check_int("n_classes", self.n_classes, name, minimum=2)
        if self.readout.out_dim != self.n_classes:
            raise ValueError(
                f"{name}: readout.out_dim ({self.readout.out_dim}) must equal "
                f"n_classes ({self.n_classes})"
            )
        self._check_fitted_fields(name)
        if self.state_repr in ("final", "mean"):
            check_model(self, self._embed_dim, None)  # the readout reads a state
            return
        state = jax.eval_shape(self.driver.default_state)
        if state.shape != (self.res_dim,):
            raise ValueError(
                f"{name}: state_repr={self.state_repr!r} needs a driver whose state "
                f"has shape (res_dim,) = ({self.res_dim},), got {tuple(state.shape)}"
            )
        width = self.readout.res_dim
        base, bi = _split_repr(self.state_repr)
        if base == "model_space":
            per_dim, rest = divmod(width, self.in_dim * (2 if bi else 1))
            ok = not rest and 2 <= per_dim <= self.res_dim + 1
            want = (
                f"data_dim * (model_space_dim + 1){' * 2' if bi else ''} = "
                f"{self.in_dim} * (model_space_dim + 1){' * 2' if bi else ''} "
                f"with 1 <= model_space_dim <= res_dim ({self.res_dim})"
            )
        else:
            ok = width == feature_dim(self.state_repr, self.res_dim, self.in_dim)
            want = str(feature_dim(self.state_repr, self.res_dim, self.in_dim))
        if not ok or getattr(self.readout, "state_shape", (width,)) != (width,):
            raise ValueError(
                f"{name}: state_repr={self.state_repr!r} gives the readout "
                f"{want} features, but the readout reads {width} (readout.res_dim); "
                "build it with orc.classifier.feature_dim(state_repr, res_dim, "
                "data_dim, model_space_dim) inputs"
            )
        check_model(self, self._embed_dim, None, readout_input=(width,))

    def _readout_reads(self) -> None:
        """The readout reads the representation of the states (its
        ``feature_dim``), not the driver's states."""
        return None

    def _check_fitted_fields(self, name):
        base, bi = _split_repr(self.state_repr)
        want = {
            "ppv_thresholds": (
                (2 if bi else 1, len(PPV_QUANTILES), self.res_dim)
                if base == "ppv"
                else None
            ),
            "difference_scale": (
                (self._channels,) if self.difference_scale is not None else None
            ),
            "lag_scale": ((len(self.lag_set) * self.in_dim,) if self.lag_set else None),
            "selected_beta": () if self.selected_beta is not None else None,
        }
        for field, shape in want.items():
            value = getattr(self, field)
            if shape is None:
                if value is not None:
                    raise ValueError(
                        f"{name}: {field} must be None for state_repr="
                        f"{self.state_repr!r}"
                    )
                continue
            if value is None or tuple(jnp.shape(value)) != shape:
                got = None if value is None else tuple(jnp.shape(value))
                raise ValueError(
                    f"{name}: {field} must have shape {shape} for state_repr="
                    f"{self.state_repr!r} and res_dim {self.res_dim}, got {got}"
                )

    @property
    def input_differences(self) -> bool:
        """Whether the reservoir also reads the input's scaled first differences."""
        return self.difference_scale is not None

    @property
    def input_lags(self) -> tuple[int, ...]:
        """The lags of the lagged-difference channels (``()`` without them)."""
        return self.lag_set or ()

    @property
    def _channels(self) -> int:
        """Channels before the first differences: the series' and its lags'."""
        return self.in_dim * (1 + len(self.input_lags))

    @property
    def _embed_dim(self) -> int:
        """Inputs the embedding reads (twice :attr:`_channels` with differences)."""
        return self._channels * (2 if self.input_differences else 1)

    def _lagged(self, in_seq):
        """``in_seq`` with its scaled differences over :attr:`input_lags`."""
        if not self.input_lags:
            return in_seq
        lagged = lagged_differences(in_seq, self.input_lags) / self.lag_scale
        return jnp.concatenate([in_seq, lagged], axis=1)

    def _inputs(self, in_seq):
        """What the reservoir reads: ``in_seq``, its scaled lagged differences
        (:attr:`input_lags`), then the scaled first differences of all of
        these when :attr:`input_differences`."""
        seq = self._lagged(in_seq)
        if not self.input_differences:
            return seq
        diff = jnp.diff(seq, axis=0, prepend=seq[:1])
        return jnp.concatenate([seq, diff / self.difference_scale], axis=1)

    @property
    def feature_dim(self) -> int:
        """Length of the feature vector (the readout's input size)."""
        if self.state_repr in ("final", "mean"):
            return self.res_dim
        return self.readout.res_dim

    @property
    def model_space_dim(self) -> int | None:
        """Nodes the model-space predictor reads (``None`` for other representations)."""
        base, bi = _split_repr(self.state_repr)
        if base != "model_space":
            return None
        return self.readout.res_dim // (self.in_dim * (2 if bi else 1)) - 1

    def _check_seq(self, in_seq, name="in_seq"):
        owner = type(self).__name__
        return check_sequence(name, in_seq, owner, self.dtype, self.in_dim, "data_dim")

    def _initial(self, res_state):
        if res_state is None:
            return self.driver.default_state()
        res_state = check_state(
            "res_state", res_state, type(self).__name__, self.driver, self.dtype
        )
        return jnp.asarray(res_state, self.dtype)

    @compiled
    def force(
        self, in_seq: Float[Array, "seq_len data_dim"], res_state: Array
    ) -> Array:
        """Teacher-force with ``in_seq``; states ``(seq_len, res_dim)`` (the
        reservoir reads the difference channels too with
        :attr:`input_differences`)."""
        in_seq = self._check_seq(in_seq)

        return self._drive(self._inputs(in_seq), self._initial(res_state))

    def __call__(
        self, in_seq: Array, res_state: Array | None = None, spinup: int = 0
    ) -> Array:
        """Same as :meth:`classify`."""
        return self.classify(in_seq, res_state, spinup)

    def features(
        self, in_seq: Array, res_state: Array | None = None, spinup: int = 0
    ) -> Array:
        """The feature vector ``(feature_dim,)`` of a sequence (see ``state_repr``).

        ``spinup`` (static) skips the leading states of each pass; it must leave
        one state (two for ``"model_space"``, which fits a one-step predictor).
        """
        owner = type(self).__name__
        in_seq = self._check_seq(in_seq)
        length = in_seq.shape[0]
        spinup = check_spinup(spinup, length, owner, f"the sequence length ({length})")
        base, bi = _split_repr(self.state_repr)
        if base == "model_space" and in_seq.shape[0] - spinup < 2:
            raise ValueError(
                f"{owner}: state_repr={self.state_repr!r} fits a one-step predictor "
                f"and needs at least two states after spinup: spinup ({spinup}) must "
                f"be at most the sequence length minus 2 ({in_seq.shape[0] - 2})"
            )
        r0 = self._initial(res_state)
        thresholds = self.ppv_thresholds
        if not bi:
            first = None if thresholds is None else thresholds[0]
            return self._represent(base, in_seq, r0, spinup, first)
        # both passes as one batch: one program (and one batched solve) for both
        both = jnp.stack([in_seq, in_seq[::-1]])
        feats = jax.vmap(
            lambda s, th: self._represent(base, s, r0, spinup, th),
            in_axes=(0, None if thresholds is None else 0),
        )(both, thresholds)
        return feats.reshape(-1)

    def _advance(self, r, u):
        return self.driver.advance(self.embedding.embed(u), r)

    def _kept_states(self, in_seq, r0, spinup: int, stride: int):
        """States ``r_t`` for ``t = spinup, spinup + stride, ...`` of one pass
        (``in_seq`` as the user gives it; the difference channels are added
        here): what the ``"ppv"`` thresholds are fitted to."""
        inputs = self._inputs(in_seq)
        r = jax.lax.scan(lambda r, u: (self._advance(r, u), None), r0, inputs[:spinup])[
            0
        ]
        _, states = jax.lax.scan(
            lambda r, u: (self._advance(r, u),) * 2, r, inputs[spinup:]
        )
        return states[::stride]

    def _represent(self, base: str, in_seq, r0, spinup: int, thresholds=None):
        """One pass's representation ``base`` of ``in_seq`` from state ``r0``
        (``thresholds`` ``(3, res_dim)``: this pass's ``"ppv"`` thresholds)."""
        raw, in_seq = in_seq, self._inputs(in_seq)
        advance = self._advance

        if base == "final":
            return jax.lax.scan(lambda r, u: (advance(r, u), None), r0, in_seq)[0]

        if base in ("mean", "ppv"):  # running sums: no state history is kept
            ppv = base == "ppv"

            def step(carry, xs):
                r, total, above = carry
                u, keep = xs
                r = advance(r, u)
                total = total + jnp.where(keep, r, 0.0)
                if ppv:
                    above = above + (keep & (r > thresholds)).astype(jnp.int32)
                return (r, total, above), None

            keep = jnp.arange(in_seq.shape[0]) >= spinup
            count = jnp.zeros(thresholds.shape if ppv else (), jnp.int32)
            init = (r0, jnp.zeros_like(r0), count)
            (_, total, above), _ = jax.lax.scan(step, init, (in_seq, keep))
            n = in_seq.shape[0] - spinup
            if not ppv:
                return total / n
            fraction = above.astype(r0.dtype) / n
            return jnp.concatenate([total / n, fraction.reshape(-1)])

        r = jax.lax.scan(lambda r, u: (advance(r, u), None), r0, in_seq[:spinup])[0]
        kept = in_seq[spinup:]
        n = kept.shape[0]

        if base == "stats":  # Welford's running mean and sum of squared deviations

            def welford(carry, xs):
                r, mean, m2 = carry
                u, k = xs
                r = advance(r, u)
                delta = r - mean
                mean = mean + delta / k
                return (r, mean, m2 + delta * (r - mean)), None

            count = jnp.arange(1, n + 1, dtype=r.dtype)
            zeros = jnp.zeros_like(r)
            (r, mean, m2), _ = jax.lax.scan(welford, (r, zeros, zeros), (kept, count))
            var = m2 / n
            positive = var > 0  # a zero variance has no finite sqrt gradient
            std = jnp.where(positive, jnp.sqrt(jnp.where(positive, var, 1.0)), 0.0)
            return jnp.concatenate([r, mean, std])

        # "model_space": ridge fit u_{t+1} ~ W p_t + b on this series alone
        width = self.model_space_dim

        def record(r, u):
            r = advance(r, u)
            return r, r[:width]

        _, nodes = jax.lax.scan(record, r, kept)
        target = raw[spinup + 1 :]  # the input itself, not its difference channels
        return _one_step_predictor(nodes[:-1], target).astype(self.dtype)

    @method
    def classify(
        self,
        in_seq: Float[Array, "seq_len data_dim"],
        res_state: Array | None = None,
        spinup: int = 0,
        *,
        backend: str | None = None,
    ) -> Float[Array, " n_classes"]:
        """Class probabilities ``(n_classes,)`` of one sequence (softmax of the readout).

        ``spinup`` (static) skips leading states (all representations but
        ``"final"``).
        Batch with ``jax.vmap(model.classify)(seqs)``. Non-finite ``in_seq`` or
        ``res_state`` raise (also under ``jax.jit``); an untrained model (all-zero
        readout weights) warns outside ``jax.jit``. ``backend`` as for
        :meth:`orc.forecaster.RCForecasterBase.forecast`.
        """
        if isinstance(spinup, np.integer):  # static, as a Python int is
            spinup = int(spinup)
        shape = np.shape(in_seq) if hasattr(in_seq, "shape") else None
        if shape is not None and len(shape) >= 1 and shape[0] == 0:
            raise ValueError(
                f"{type(self).__name__}.classify: in_seq must hold at least one "
                f"step, got shape {tuple(shape)}"
            )
        probs = self._classify(in_seq, res_state, spinup, backend=backend)
        warn_if_untrained(self, f"{type(self).__name__}.classify")
        return probs

    @compiled
    def _classify(self, in_seq, res_state, spinup):
        owner = type(self).__name__
        in_seq = check_finite(self._check_seq(in_seq), "in_seq", owner)
        if res_state is not None:
            res_state = check_finite(self._initial(res_state), "res_state", owner)
        return jax.nn.softmax(
            self.readout.readout(self.features(in_seq, res_state, spinup))
        )
