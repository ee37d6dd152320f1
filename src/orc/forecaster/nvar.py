"""Nonlinear vector autoregression (NVAR), a.k.a. next-generation reservoir computing.

Gauthier, Bollt, Griffith & Barbosa (2021), *Next generation reservoir
computing*, Nat. Commun. 12:5564. There is no reservoir: the feature vector at
time ``t`` is built directly from the last samples,

    O_lin(t)  = [x_t, x_{t-s}, x_{t-2s}, ..., x_{t-(k-1)s}]          (k * data_dim)
    O(t)      = [1, O_lin(t), monomials of O_lin(t) of orders 2..order]

(the constant is optional; the monomials are the *unique* products
``O_lin[i1] O_lin[i2] ... O_lin[ip]`` with ``i1 <= i2 <= ... <= ip``), and a
linear readout ``W_out`` is fitted by ridge regression so that

    x_{t+1} = x_t + W_out O(t)      (target="increment", as in the paper), or
    x_{t+1} =       W_out O(t)      (target="direct").

A forecast feeds each prediction back into the delay window.
"""

from __future__ import annotations

import functools
import itertools
from math import comb

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .. import _strategy
from .._defaults import NVAR
from .._divergence import BLOWUP_DATA, report_divergence, report_overflow
from .._fit import (
    check_flag,
    next_sample_forcing,
    ridge,
    teacher_forcing_arguments,
)
from .._ridge import sequence_stats
from .._strategy import compiled, method, model_hash
from .._training import training_noise
from .._validation import (
    check_data,
    check_dtype,
    check_float,
    check_input_finite,
    check_int,
    check_rank,
    check_sequence,
    check_static_int,
    warn_if_untrained,
)
from ..metrics import (
    dominant_period,
    mutual_information_delay,
    valid_prediction_time,
)
from ..readouts import check_data_scale

__all__ = [
    "NVARForecaster",
    "train_NVARForecaster",
    "nvar_order",
    "nvar_stride",
    "select_input_noise",
]

_TARGETS = ("increment", "direct")

#: Delay taps per dominant period for ``s="auto"``: Gauthier et al. (2021)'s
#: Lorenz63 NVAR (dt 0.025, stride 1) samples its ~0.75 time-unit oscillation
#: about 30 times, so the rule reproduces the paper on the paper's data.
TAPS_PER_PERIOD = 30

#: ``order="auto"``: cubic monomials while the feature vector stays this
#: small (``k * data_dim <= 20``, e.g. every flow of the dysts panel with
#: ``k=2``), quadratic beyond. On the panel's 132 flows the cubic NVAR with
#: input noise ``1e-3`` of the std has median VPT 4.1 Lyapunov times and 39
#: flows with a diverged window, the quadratic paper setting 0.57 and 81
#: (``benchmarks/science/NVAR_ABLATION.md``).
AUTO_ORDER_MAX_FEATURES = 2000

#: ``input_noise="auto"``: the noise's standard deviation as a fraction of each
#: data dimension's training standard deviation (scale-free, like the
#: standardised fit) where no selection is made (see
#: :func:`select_input_noise`), and the first candidate where one is.
AUTO_NOISE_FRACTION = 1e-3

#: The fractions :func:`select_input_noise` chooses from, smallest first. On
#: the dysts panel's 132 flows (cubic NVAR, ``s="auto"``) the selection keeps
#: 121 (92%) free of a diverged test window, against 93 (70%) with a fixed
#: ``1e-3``, and lifts the median VPT from 4.12 to 4.39 Lyapunov times
#: (``benchmarks/science/NVAR_ABLATION.md``).
AUTO_NOISE_CANDIDATES = (1e-3, 1e-2, 3e-2, 1e-1)

#: :func:`select_input_noise`: share of the training samples held out (the
#: last ones), validation windows, and the fewest samples a validation window
#: must have beyond its delay window for a selection to be made.
VALIDATION_FRACTION = 0.2
VALIDATION_WINDOWS = 5
VALIDATION_MIN_STEPS = 20

#: Error threshold of a valid validation step: the root mean square over data
#: dimensions of the error divided by each dimension's training standard
#: deviation (``orc.metrics.valid_prediction_time``'s ``"feature_std"``).
VALIDATION_THRESHOLD = 0.4

#: ``input_noise="auto"`` selects only while the feature vector has at most
#: this many entries: the selection costs four more fits, which is nothing
#: for the few hundred features of a low-dimensional flow (Lorenz63, 84
#: features: 0.12 s warm in all) but five times the fit of a high-dimensional
#: one (KS with 64 dimensions: 8,385 quadratic features).
AUTO_SELECT_MAX_FEATURES = 2000


def nvar_order(n_lin: int, constant: bool = True) -> int:
    """The ``order="auto"`` choice for ``n_lin = k * data_dim`` linear features:
    3 if the cubic feature vector has at most :data:`AUTO_ORDER_MAX_FEATURES`
    entries, else 2."""
    if _n_features(n_lin, 3, constant) <= AUTO_ORDER_MAX_FEATURES:
        return 3
    return 2


def nvar_stride(
    data: Array,
    taps_per_period: float | None = None,
    max_period: float | None = None,
    multi_sequence: bool = False,
) -> int:
    """Delay stride for an NVAR from the data's sampling: ``s="auto"``'s rule.

    **Several observed dimensions** (the usual case, the state observed):
    ``s = max(1, round(P / taps_per_period))`` with ``P`` the dominant period
    of ``data`` in samples (:func:`orc.metrics.dominant_period`: the peak of
    the power spectrum among periods of at most ``max_period`` samples, by
    default a tenth of the record) and :data:`TAPS_PER_PERIOD` (30) taps per
    period. The taps then sit at a fixed fraction of the oscillation whatever
    the sampling: Lorenz63 sampled at dt 0.025 (30 samples per period, the
    setting of Gauthier et al. 2021) gets ``s=1``, at dt 0.01 (about 75
    samples per period) ``s=2`` or ``3`` depending on the record.

    **A scalar series** (``data_dim`` 1) is one coordinate of a larger state,
    which its delayed copies have to reconstruct: taps a thirtieth of a
    period apart are nearly equal and carry almost no new information (on
    Mackey-Glass at unit step, ``s=2``, the default NVAR forecast no better
    than persistence: NRMSE 1.18 against 1.07 over one Lyapunov time). There
    the stride is the delay-embedding lag,
    :func:`orc.metrics.mutual_information_delay` (the first minimum of the
    average mutual information: 11 on Mackey-Glass, NRMSE 0.62; 18 on
    Lorenz63's ``x`` at dt 0.01), or a quarter of the dominant period where
    the series has no such minimum (a pure tone). Pass ``taps_per_period``
    to use the period rule on a scalar series too.

    With ``multi_sequence`` (data ``(n_traj, seq_len, data_dim)``) the median
    of the trajectories' strides is used. ``data`` must be concrete (not
    traced): the stride is a static, shape-defining choice.
    """
    owner = "nvar_stride"
    if taps_per_period is not None and not taps_per_period > 0:
        raise ValueError(
            f"{owner}: taps_per_period must be positive, got {taps_per_period!r}"
        )
    if isinstance(data, jax.core.Tracer):
        raise TypeError(
            f"{owner}: data must be a concrete array, not a traced value: the "
            "stride fixes the model's shapes, so choose it outside jax.jit (or "
            "pass s=... to NVARForecaster)"
        )
    arr = np.asarray(data)
    rank = 3 if multi_sequence else 2
    if arr.ndim != rank:
        what = (
            "(n_traj, seq_len, data_dim)" if multi_sequence else "(seq_len, data_dim)"
        )
        raise ValueError(f"{owner}: data must be {what}, got shape {arr.shape}")
    trajs = arr if multi_sequence else arr[None]

    def one(x):
        if taps_per_period is None and x.shape[1] == 1:
            # the lag needs 20 samples; a shorter record has a quarter period
            lag = mutual_information_delay(x) if x.shape[0] >= 20 else None
            if lag is not None:
                return lag
            return dominant_period(x, max_period=max_period) / 4
        taps = TAPS_PER_PERIOD if taps_per_period is None else taps_per_period
        return dominant_period(x, max_period=max_period) / taps

    return max(1, int(round(float(np.median([one(x) for x in trajs])))))


@functools.lru_cache(maxsize=64)
def _monomial_tables(n_lin: int, order: int) -> tuple[np.ndarray, ...]:
    """Index tables of the unique monomials of orders ``2..order`` of ``n_lin`` variables.

    Entry ``p - 2`` is an int array ``(C(n_lin + p - 1, p), p)`` whose row
    ``(i1, ..., ip)``, ``i1 <= ... <= ip``, stands for ``lin[i1] * ... * lin[ip]``;
    rows are in lexicographic order. Built once per shape with numpy (cached),
    so they are compile-time constants of every traced function.
    """
    tables = []
    for p in range(2, order + 1):
        rows = list(itertools.combinations_with_replacement(range(n_lin), p))
        table = np.asarray(rows, dtype=np.int32).reshape(len(rows), p)
        table.setflags(write=False)
        tables.append(table)
    return tuple(tables)


def _n_features(n_lin: int, order: int, constant: bool) -> int:
    return int(constant) + sum(comb(n_lin + p - 1, p) for p in range(1, order + 1))


class NVARForecaster(eqx.Module):
    """Nonlinear vector autoregression forecaster (next-generation RC).

    The feature vector at time ``t`` is

    ``O(t) = [1, O_lin(t), O_lin(t)^{⊗2}, ..., O_lin(t)^{⊗order}]`` with
    ``O_lin(t) = [x_t, x_{t-s}, ..., x_{t-(k-1)s}]``,

    where ``⊗p`` denotes the ``C(n + p - 1, p)`` unique monomials of degree
    ``p`` of the ``n = k * data_dim`` linear features (lexicographic order of
    the index tuples ``i1 <= ... <= ip``) and the leading ``1`` is present when
    ``constant``. The prediction of the next sample is
    ``x_{t+1} = x_t + W_out O(t)`` (``target="increment"``, Gauthier et al.
    2021) or ``x_{t+1} = W_out O(t)`` (``target="direct"``). Fit ``W_out``
    with :func:`train_NVARForecaster`.

    **State.** The model keeps no reservoir; its state is the *delay window*:
    the last ``window = (k - 1) * s + 1`` samples, shape ``(window, data_dim)``,
    oldest first, so ``res_state[-1]`` is the current sample ``x_t`` and
    ``res_state[-1 - j * s]`` its ``j``-th delayed copy. ``forecast(n,
    res_state)[0]`` predicts the sample right after the window, like the
    ESN forecasters' ``forecast(n, R[-1])[0]``.

    Parameters
    ----------
    data_dim : int
        Dimension of the data.
    k : int, optional
        Number of delay taps (current sample included); ``k >= 1``.
    s : int or "auto", default "auto"
        Spacing of the taps in samples (the stride); ``s >= 1``. ``"auto"``
        lets :func:`train_NVARForecaster` choose it from the training data's
        sampling, :func:`nvar_stride`: about 30 taps per dominant period, which
        gives the paper's ``s=1`` on Lorenz63 sampled at dt 0.025 and keeps
        the taps' spacing in time the same when the data are sampled finer;
        for a scalar series (``data_dim=1``) the delay-embedding lag (first
        minimum of the mutual information), since its taps must reconstruct
        the unobserved coordinates. Until then ``s`` (and ``stride``) is
        ``None`` and the model has no delay window; with ``k=1`` there is
        nothing to choose and ``s`` is 1.
    order : int or "auto", default "auto"
        Highest monomial degree; ``order=1`` gives a linear VAR, ``order=2``
        the paper's quadratic NVAR. ``"auto"`` (:func:`nvar_order`) is 3 while
        the feature vector has at most 2000 entries (``k * data_dim <= 20``)
        and 2 beyond: on low-dimensional flows the cubic terms forecast
        longer and diverge less often (dysts panel, 132 flows, with
        input noise 1e-3: median valid time 4.1 vs 0.57 Lyapunov times,
        39 vs 81 flows with a diverged window; 4.4 and 11 with
        ``input_noise="auto"``); the quadratic vector is what
        stays affordable in high dimension. The resolved value is stored.
    constant : bool, default True
        Prepend the constant feature ``1``.
    target : {"increment", "direct"}, default "increment"
        Regress the increment ``x_{t+1} - x_t`` (the paper) or ``x_{t+1}``.
    dtype : dtype, default float64
    stride : int, optional
        Alias of ``s`` (reservoirpy's name is ``strides``).

    Attributes
    ----------
    wout : Array
        ``(data_dim, n_features)`` readout weights (zeros until trained).
    window : int
        ``(k - 1) * s + 1``, the number of samples in the delay window.
    n_lin, n_features : int
        Sizes of the linear part and of the whole feature vector.

    Example
    -------
    >>> U, t = orc.data.lorenz63(tN=15.0, dt=0.025)
    >>> nvar = NVARForecaster(3, k=2, s=1, order=2)    # Gauthier et al. 2021
    >>> nvar, W = train_NVARForecaster(nvar, U[:400], beta=2.5e-6, input_noise=0)
    >>> U_pred = nvar.forecast(100, W[-1])       # predicts U[400:500]
    """

    # a model as a static argument of jax.jit: an error that says what to do
    __hash__ = model_hash

    wout: Array
    data_dim: int = eqx.field(static=True)
    k: int = eqx.field(static=True)
    s: int = eqx.field(static=True)
    order: int = eqx.field(static=True)
    constant: bool = eqx.field(static=True)
    target: str = eqx.field(static=True)
    dtype: object = eqx.field(static=True)
    # The training data's largest magnitude per dimension, what forecasts are
    # judged against (orc._divergence; the ESN families keep theirs in the
    # readout). Set by training; None until then and in files written before
    # it was kept (orc.io loads a missing "added_field" as None).
    data_scale: Array | None = eqx.field(default=None, metadata={"added_field": True})

    def __init__(
        self,
        data_dim: int,
        k: int = NVAR.k,
        s: int | str = NVAR.s,
        order: int | str = NVAR.order,
        constant: bool = NVAR.constant,
        target: str = NVAR.target,
        dtype=jnp.float64,
        *,
        stride: int | None = None,
    ) -> None:
        owner = type(self).__name__
        self.data_dim = check_int("data_dim", data_dim, owner, minimum=1)
        self.k = check_int("k", k, owner, minimum=1)
        if isinstance(s, str):
            if s != "auto":
                raise ValueError(
                    f"{owner}: s must be a positive int or 'auto', got {s!r}"
                )
            s = None
        else:
            s = check_int("s", s, owner, minimum=1)
        if stride is not None:
            stride = check_int("stride", stride, owner, minimum=1)
            if s not in (None, stride):
                raise ValueError(
                    f"{owner}: s and stride are the same option; got s={s} and "
                    f"stride={stride}"
                )
            s = stride
        if s is None and self.k == 1:
            s = 1  # a single tap has no stride to choose
        self.s = s
        if not isinstance(constant, (bool, np.bool_)):
            raise TypeError(f"{owner}: constant must be a bool, got {constant!r}")
        self.constant = bool(constant)
        if isinstance(order, str):
            if order != "auto":
                raise ValueError(
                    f"{owner}: order must be a positive int or 'auto', got {order!r}"
                )
            order = nvar_order(self.k * self.data_dim, self.constant)
        self.order = check_int("order", order, owner, minimum=1)
        if target not in _TARGETS:
            raise ValueError(
                f"{owner}: target must be one of {_TARGETS}, got {target!r}"
            )
        self.target = str(target)
        self.dtype = check_dtype(dtype, owner)
        n_feat = _n_features(self.k * self.data_dim, self.order, self.constant)
        self.wout = jnp.zeros((self.data_dim, n_feat), self.dtype)
        self.data_scale = None

    def __check_init__(self):
        check_data_scale(type(self).__name__, self.data_scale, self.data_dim)

    # ------------------------------------------------------------------ sizes
    @property
    def stride(self) -> int | None:
        """Alias of ``s`` (``None`` until training chooses it for ``s="auto"``)."""
        return self.s

    @property
    def window(self) -> int:
        """Samples in the delay window, ``(k - 1) * s + 1``."""
        if self.s is None:
            raise ValueError(
                f"{type(self).__name__}: the stride is not chosen yet (s='auto' "
                "picks it from the training data): train the model with "
                "train_NVARForecaster first, or pass s=... (see nvar_stride)"
            )
        return (self.k - 1) * self.s + 1

    def with_stride(self, s: int) -> NVARForecaster:
        """This model with delay stride ``s`` (its readout weights kept)."""
        new = type(self)(
            self.data_dim, self.k, s, self.order, self.constant, self.target, self.dtype
        )
        return eqx.tree_at(
            lambda m: (m.wout, m.data_scale),
            new,
            (self.wout, self.data_scale),
            is_leaf=lambda x: x is None,
        )

    @property
    def n_lin(self) -> int:
        """Size of the linear part, ``k * data_dim``."""
        return self.k * self.data_dim

    @property
    def n_features(self) -> int:
        """Size of the feature vector (constant, linear and nonlinear parts)."""
        return _n_features(self.n_lin, self.order, self.constant)

    @property
    def in_dim(self) -> int:
        """Input dimension (``data_dim``), as on the ESN forecasters."""
        return self.data_dim

    @property
    def out_dim(self) -> int:
        """Output dimension (``data_dim``), as on the ESN forecasters."""
        return self.data_dim

    @property
    def monomial_indices(self) -> tuple[np.ndarray, ...]:
        """Index tables of the nonlinear features, one per degree ``2..order``.

        Table ``p - 2`` has shape ``(C(n_lin + p - 1, p), p)``; its row
        ``(i1, ..., ip)`` is the feature ``O_lin[i1] * ... * O_lin[ip]``.
        """
        return _monomial_tables(self.n_lin, self.order)

    # --------------------------------------------------------------- features
    def _lags(self) -> np.ndarray:
        return np.arange(self.k) * self.s

    def _linear(self, seq: Array, t: Array) -> Array:
        """``O_lin`` of the windows ending at rows ``t`` of ``seq``: ``(len(t), n_lin)``."""
        rows = t[:, None] - jnp.asarray(self._lags())[None, :]  # (B, k), newest first
        return seq[rows].reshape(t.shape[0], self.n_lin)

    def _features_from_linear(self, lin: Array) -> Array:
        parts = [lin]
        if self.constant:
            parts.insert(0, jnp.ones(lin.shape[:-1] + (1,), lin.dtype))
        for table in self.monomial_indices:
            parts.append(jnp.prod(lin[..., table], axis=-1))
        return jnp.concatenate(parts, axis=-1)

    def _rows(self, seq: Array, t: Array) -> Array:
        return self._features_from_linear(self._linear(seq, t))

    def _window_features(self, window: Array) -> Array:
        """The feature vector ``(n_features,)`` of one delay window ``(window, data_dim)``."""
        t = jnp.array([self.window - 1])
        return self._rows(window, t)[0]

    def _check_seq(self, seq, name: str, min_len: int):
        why = (
            f" (the delay window (k - 1) * s + 1 = {self.window} with k={self.k}, "
            f"s={self.s})"
        )
        seq = check_sequence(
            name, seq, type(self).__name__, self.dtype, self.data_dim, "data_dim",
            min_len, why,
        )  # fmt: skip
        return jnp.asarray(seq).astype(self.dtype)

    def _check_state(self, res_state, name: str = "res_state"):
        res_state = check_data(name, res_state, type(self).__name__, self.dtype)
        expected = (self.window, self.data_dim)
        if tuple(jnp.shape(res_state)) != expected:
            raise ValueError(
                f"{type(self).__name__}: {name} must be the delay window of shape "
                f"{expected} ((k - 1) * s + 1 samples, oldest first), got "
                f"{tuple(jnp.shape(res_state))}"
            )
        return jnp.asarray(res_state).astype(self.dtype)

    @compiled
    def features(
        self, in_seq: Float[Array, "seq_len data_dim"]
    ) -> Float[Array, "n_windows n_features"]:
        """Feature rows of every full delay window of ``in_seq``.

        Row ``i`` is ``O(t)`` for ``t = window - 1 + i``, i.e. the features
        of the window ending at ``in_seq[window - 1 + i]``; there are
        ``seq_len - window + 1`` rows. Order of the columns: constant (if any),
        ``O_lin`` (newest sample first), then the monomials of degree 2, 3, ...
        as listed by :attr:`monomial_indices`.

        Parameters
        ----------
        in_seq : Array
            ``(seq_len, data_dim)``, ``seq_len >= window``.

        Returns
        -------
        Array
            ``(seq_len - window + 1, n_features)``.
        """
        seq = self._check_seq(in_seq, "in_seq", self.window)
        return self._rows(seq, jnp.arange(self.window - 1, seq.shape[0]))

    @compiled
    def windows(
        self, in_seq: Float[Array, "seq_len data_dim"]
    ) -> Float[Array, "n_windows window data_dim"]:
        """Every full delay window of ``in_seq``: the NVAR's "states".

        Row ``i`` is ``in_seq[i : i + window]``, the state after input
        ``window - 1 + i``; ``forecast(n, windows(U)[-1])`` continues ``U``.

        Parameters
        ----------
        in_seq : Array
            ``(seq_len, data_dim)``, ``seq_len >= window``.

        Returns
        -------
        Array
            ``(seq_len - window + 1, window, data_dim)``.
        """
        seq = self._check_seq(in_seq, "in_seq", self.window)
        return _sliding_windows(seq, self.window)

    def _next(self, feats: Array, current: Array) -> Array:
        step = jnp.matmul(feats, self.wout.T, precision="highest")
        return current + step if self.target == "increment" else step

    @compiled
    def predict(
        self, in_seq: Float[Array, "seq_len data_dim"]
    ) -> Float[Array, "n_windows data_dim"]:
        """One-step-ahead (teacher-forced) predictions for every full window of ``in_seq``.

        Row ``i`` predicts ``in_seq[window + i]`` from the window ending at
        ``in_seq[window - 1 + i]`` (the last row predicts the sample after
        ``in_seq``).

        Parameters
        ----------
        in_seq : Array
            ``(seq_len, data_dim)``, ``seq_len >= window``.

        Returns
        -------
        Array
            ``(seq_len - window + 1, data_dim)``. NaN or inf in ``in_seq``
            raises (also under ``jax.jit``), naming its first bad row.
        """
        seq = self._check_seq(in_seq, "in_seq", self.window)
        seq = check_input_finite(seq, "in_seq", type(self).__name__)
        feats = self._rows(seq, jnp.arange(self.window - 1, seq.shape[0]))
        out = self._next(feats, seq[self.window - 1 :])
        report_overflow(f"{type(self).__name__}.predict", out, self.dtype, (seq,))
        return out

    def _closed_loop(self, fcast_len: int, window: Array) -> Array:
        def step(w, _):
            y = self._next(self._window_features(w), w[-1])
            return jnp.concatenate([w[1:], y[None]], axis=0), y

        return jax.lax.scan(step, window, None, length=fcast_len)[1]

    @method
    def forecast(
        self, fcast_len: int, res_state: Float[Array, "window data_dim"]
    ) -> Float[Array, "fcast_len data_dim"]:
        """Closed-loop forecast of ``fcast_len`` samples from a delay window.

        ``out[0]`` predicts the sample right after ``res_state``; each
        prediction is appended to the window (the oldest sample drops out) to
        make the next one.

        Parameters
        ----------
        fcast_len : int
            Number of samples; a Python int (static under ``jax.jit``).
        res_state : Array
            The delay window ``(window, data_dim)``, oldest first (e.g. the last
            row of the states returned by :func:`train_NVARForecaster`).

        Returns
        -------
        Array
            ``(fcast_len, data_dim)``.
        """
        fcast_len = check_static_int(
            "fcast_len", fcast_len, type(self).__name__, minimum=1
        )
        warn_if_untrained(self, f"{type(self).__name__}.forecast")
        _strategy.to_host_soon([res_state])  # read by report_divergence
        return report_divergence(
            f"{type(self).__name__}.forecast",
            self._forecast(fcast_len, self._check_state(res_state)),
            res_state,
            scale=self.data_scale,
        )

    @compiled(host_results=True)  # read by report_divergence
    def _forecast(self, fcast_len: int, window: Array) -> Array:
        window = check_input_finite(window, "res_state", type(self).__name__)
        return self._closed_loop(fcast_len, window)

    @compiled(host_results=True)  # read by report_divergence
    def _forecast_from_IC(self, fcast_len: int, seq: Array) -> Array:
        # every row checked, also those before the last window (which the
        # forecast does not read): NaN/inf anywhere is bad data, refused
        seq = check_input_finite(seq, "spinup_data", type(self).__name__)
        return self._closed_loop(fcast_len, seq[seq.shape[0] - self.window :])

    @method
    def forecast_from_IC(
        self, fcast_len: int, spinup_data: Float[Array, "seq_len data_dim"]
    ) -> Float[Array, "fcast_len data_dim"]:
        """Forecast what follows ``spinup_data``.

        Only the last ``window`` samples of ``spinup_data`` matter (they form
        the delay window); ``out[0]`` predicts the sample right after it.
        NaN or inf in any row of ``spinup_data`` raises (also under
        ``jax.jit``), naming its first bad row.

        Parameters
        ----------
        fcast_len : int
            Number of samples (Python int).
        spinup_data : Array
            ``(seq_len, data_dim)`` with ``seq_len >= window``.

        Returns
        -------
        Array
            ``(fcast_len, data_dim)``.
        """
        fcast_len = check_static_int(
            "fcast_len", fcast_len, type(self).__name__, minimum=1
        )
        seq = self._check_seq(spinup_data, "spinup_data", self.window)
        warn_if_untrained(self, f"{type(self).__name__}.forecast_from_IC")
        _strategy.to_host_soon([spinup_data])  # read by report_divergence
        return report_divergence(
            f"{type(self).__name__}.forecast_from_IC",
            self._forecast_from_IC(fcast_len, seq),
            spinup_data,
            scale=self.data_scale,
        )


@functools.lru_cache(maxsize=64)
def _unscale_table(
    n_lin: int, order: int, constant: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static tables of the map from standardised to raw features.

    With ``z = (lin - mu) / sigma``, each feature of ``z`` (a monomial
    ``z[i1] ... z[ip]``) expands into the features of ``lin`` of the subsets
    of its factors: ``prod_k (lin[ik] - mu[ik]) / sigma[ik]`` is the sum, over
    the subsets ``S`` of its positions, of ``prod_{k in S} lin[ik]`` times
    ``prod_{k in S} 1/sigma[ik] * prod_{k not in S} -mu[ik]/sigma[ik]``. The
    monomial of a subset of size 0 is the constant feature. Returns the rows
    (feature of ``z``), columns (feature of ``lin``), the factor indices
    ``(P, order)`` (padded with ``n_lin``) and whether each factor is in the
    subset, one entry per (feature, subset) pair.
    """
    column = {}
    if constant:
        column[()] = 0
    offset = int(constant)
    for i in range(n_lin):
        column[(i,)] = offset + i
    offset += n_lin
    for table in _monomial_tables(n_lin, order):
        for r, row in enumerate(table):
            column[tuple(int(v) for v in row)] = offset + r
        offset += table.shape[0]
    rows, cols, factors, inside = [], [], [], []
    for mono, zc in column.items():
        p = len(mono)
        for mask in range(1 << p):
            chosen = tuple(mono[k] for k in range(p) if mask >> k & 1)
            if chosen not in column:  # the constant, in a model without one
                continue
            rows.append(zc)
            cols.append(column[chosen])
            factors.append(list(mono) + [n_lin] * (order - p))
            inside.append(
                [bool(mask >> k & 1) for k in range(p)] + [True] * (order - p)
            )
    out = (
        np.asarray(rows, dtype=np.int32),
        np.asarray(cols, dtype=np.int32),
        np.asarray(factors, dtype=np.int32).reshape(len(rows), order),
        np.asarray(inside, dtype=bool).reshape(len(rows), order),
    )
    for a in out:
        a.setflags(write=False)
    return out


def _raw_weights(model, w_z: Array, mu: Array, sigma: Array) -> Array:
    """Readout weights on the raw features equal to ``w_z`` on standardised ones.

    ``w_z`` predicts the next sample in standardised units (its increment or
    the sample itself, by ``model.target``) from the features of the window
    standardised per data dimension by ``mu`` and ``sigma``. The features of
    the standardised window are a linear map ``T`` of the raw ones
    (:func:`_unscale_table`), so ``w_z T`` scaled back by ``sigma`` is the same
    polynomial of the raw window: the fitted model is the usual NVAR
    ``x_{t+1} = x_t + W_out O(t)``; standardising only conditioned the fit.
    """
    rows, cols, factors, inside = _unscale_table(
        model.n_lin, model.order, model.constant
    )
    dtype = w_z.dtype
    mu_lin = jnp.concatenate([jnp.tile(mu, model.k), jnp.zeros((1,), dtype)])
    sig_lin = jnp.concatenate([jnp.tile(sigma, model.k), jnp.ones((1,), dtype)])
    a_in = 1.0 / sig_lin[factors]
    a_out = -mu_lin[factors] / sig_lin[factors]
    coef = jnp.prod(jnp.where(inside, a_in, a_out), axis=1)
    n = model.n_features
    transform = jnp.zeros((n, n), dtype).at[rows, cols].add(coef)
    w = sigma[:, None] * jnp.matmul(w_z, transform, precision="highest")
    if model.target == "direct":  # x_{t+1} = sigma * (W_z O_z) + mu
        w = w.at[:, 0].add(mu)
    return w


def _sliding_windows(seq: Array, window: int) -> Array:
    idx = np.arange(seq.shape[0] - window + 1)[:, None] + np.arange(window)[None, :]
    return seq[idx]


@compiled
def _train(
    model,
    train_seq,
    target_seq,
    solver,
    spinup,
    multi,
    return_states,
    noise,
    standardize,
    relative_noise=False,
):
    forcing, _, targets = next_sample_forcing(
        "train_NVARForecaster", model.dtype, train_seq, target_seq
    )
    w = model.window
    if not multi:
        forcing, targets = forcing[None], targets[None]
    n_traj, t_in = forcing.shape[:2]
    clean = forcing
    if noise is not None:
        if relative_noise:  # input_noise="auto": a fraction of each dimension's sd
            sample = clean.reshape(-1, clean.shape[-1])
            sd = jnp.sqrt(jnp.mean((sample - jnp.mean(sample, axis=0)) ** 2, axis=0))
            noise = eqx.tree_at(lambda n: n.input_scale, noise, noise.input_scale * sd)
        forcing = noise.perturb(forcing)
    first = max(spinup, w - 1)
    t = np.arange(first, targets.shape[1])
    # Regression rows are indexed into the flattened trajectories: row (j, t) is
    # time j * t_in + t; as t >= window - 1 its delay taps stay in trajectory j.
    flat = forcing.reshape(n_traj * t_in, forcing.shape[-1])
    rows = (np.arange(n_traj)[:, None] * t_in + t[None, :]).reshape(-1)
    y = targets[:, first:].reshape(rows.size, targets.shape[-1])
    if standardize:
        # per data dimension, over the clean training samples; a constant
        # dimension keeps scale 1. Without a constant feature a shift cannot
        # be folded back into the weights, so only the scale is used.
        sample = clean.reshape(-1, clean.shape[-1])
        mu = jnp.mean(sample, axis=0) if model.constant else jnp.zeros_like(sample[0])
        sigma = jnp.sqrt(jnp.mean((sample - mu) ** 2, axis=0))
        sigma = jnp.where(sigma > 0, sigma, jnp.ones_like(sigma))
        flat = (flat - mu) / sigma
        y = (y - mu) / sigma
    if model.target == "increment":
        # flat[rows] as slices, not a gather: XLA's CPU fusion of a gather with
        # the noise draw gave other last bits when split across threads (the
        # weights then depended on the CPUs the process may use)
        last = first + rows.size // n_traj
        current = flat.reshape(n_traj, t_in, flat.shape[-1])[:, first:last]
        y = y - current.reshape(rows.size, flat.shape[-1])

    def feats(block):
        return model._rows(flat, block)

    stats = sequence_stats(jnp.asarray(rows), y, feats, lambda v: v)
    wout = solver.weights(stats)
    if standardize:
        wout = _raw_weights(model, wout, mu, sigma)
    wout = wout.astype(model.dtype)
    # the scale forecasts are judged against: the largest finite magnitude
    # of each dimension's clean training targets (samples, in data units)
    scale = jnp.abs(targets.reshape(-1, targets.shape[-1])).astype(model.dtype)
    scale = jnp.max(jnp.where(jnp.isfinite(scale), scale, 0.0), axis=0, initial=0.0)
    model = eqx.tree_at(
        lambda m: (m.wout, m.data_scale),
        model,
        (wout, scale),
        is_leaf=lambda x: x is None,
    )
    if return_states:
        states = jax.vmap(lambda f: _sliding_windows(f, w))(clean)
    else:
        states = clean[:, t_in - w :]
    return model, (states if multi else states[0])


def train_NVARForecaster(
    model: NVARForecaster,
    train_seq: Array,
    target_seq: Array | None = None,
    beta: float = NVAR.beta,
    spinup: int = 0,
    multi_sequence: bool = False,
    *,
    penalize_constant: bool = True,
    return_states: bool = True,
    input_noise: float | str = "auto",
    noise_seed=0,
    standardize: bool = True,
) -> tuple[NVARForecaster, Array]:
    """Fit an :class:`NVARForecaster`'s readout by ridge regression.

    The window ending at ``train_seq[t]`` (features ``O(t)``) is paired with the
    next sample ``train_seq[t + 1]`` (or ``target_seq[t]`` when given), for
    every ``t >= max(spinup, window - 1)``: the first ``window - 1`` samples
    only fill the delay window. The regression target is the increment
    ``y_t - train_seq[t]`` (``model.target == "increment"``) or ``y_t``
    itself, and ``W_out`` minimises

    ``sum_t ||W_out O(t) - target_t||^2 + beta ||W_out||^2``

    (solved by the library's ridge engine, :mod:`orc._ridge`). As in
    Gauthier et al. (2021), the penalty covers *all* weights, the constant
    term's included (``penalize_constant=True``); with
    ``penalize_constant=False`` the constant's weight (an output bias) is left
    unpenalised, which makes the fit invariant to shifting the targets.

    Parameters
    ----------
    model : NVARForecaster
    train_seq : Array
        ``(seq_len, data_dim)``, or ``(n_traj, seq_len, data_dim)`` with
        ``multi_sequence``; at least ``max(spinup, window - 1) + 2`` samples
        (one fewer with ``target_seq``), ``window = (k - 1) * s + 1``.
    target_seq : Array, optional
        Same shape as ``train_seq``; ``target_seq[t]`` is the target of the
        window ending at ``train_seq[t]``. The states then also include the
        window ending at ``target_seq[-1]`` (appended to ``train_seq``), so the
        last state starts a forecast of what follows ``target_seq``.
    beta : float, optional
        Ridge regularisation (default: the paper's value for Lorenz63).
    spinup : int, default 0
        Pairs ``t < spinup`` are left out of the fit.
    multi_sequence : bool, default False
        Fit one readout on several trajectories (their statistics are summed).
    penalize_constant : bool, default True
        Include the constant feature's weight in the ridge penalty (the
        paper's choice). Without a constant feature this has no effect.
    return_states : bool, default True
        Return every delay window; with ``False`` only the last one.
    input_noise : float or "auto", default "auto"
        Standard deviation of Gaussian noise added to the samples the features
        are built from (the next-sample targets stay clean; with
        ``target="increment"`` the increment is taken from the noisy current
        sample, so the readout learns to pull a perturbed window back). A
        regulariser of the closed loop; see the note below. Not in the paper:
        pass ``input_noise=0`` for the paper's plain ridge fit. A number is in
        the data's units; ``"auto"`` is a fraction of each dimension's standard
        deviation over the training samples (the same for data of any scale),
        chosen from :data:`AUTO_NOISE_CANDIDATES` (``1e-3`` to ``1e-1``) by
        closed-loop validation on the last 20% of ``train_seq``
        (:func:`select_input_noise`, which shows the scores), then fitted to
        all of it; ``1e-3`` where no selection is made (several trajectories,
        ``target_seq`` given, traced data, too few samples, more than 2000
        features).
    noise_seed : int or PRNG key, default 0
        Seed of ``input_noise``.
    standardize : bool, default True
        Fit on the samples standardised per data dimension (mean and standard
        deviation of the training data; only the scale without a constant
        feature), then express the weights in raw units: the model is the same
        polynomial NVAR, only the fit is better conditioned and ``beta``
        penalises the weights of standardised features, so one value suits data
        of any scale. ``False`` is the paper's raw-feature fit.

    Returns
    -------
    model : NVARForecaster
        The model with ``wout`` fitted (and, for ``s="auto"``, the stride
        :func:`nvar_stride` chose from ``train_seq``).
    states : Array
        The delay windows ``(n_windows, window, data_dim)``: row ``i`` is the
        window ending at sample ``window - 1 + i`` of ``train_seq`` (with
        ``target_seq[-1]`` appended when given), so
        ``model.forecast(n, states[-1])[0]`` predicts the sample after the
        training data. With ``multi_sequence`` a leading trajectory axis; with
        ``return_states=False`` only the last window(s) ``([n_traj,] window,
        data_dim)``.

    Notes
    -----
    On accurately integrated data the paper's Lorenz63 setup (``k=2``,
    ``s=1``, quadratic, ``beta=2.5e-6``) fits the one-step map very well
    (training NRMSE ~5e-5) yet its closed loop diverges within a Lyapunov
    time: the delay taps let the fit choose an unstable two-step
    "integrator" (Zhang, dos Santos & Cornelius 2024, "How more data can
    hurt", arXiv:2407.08641). The paper's data came from a default-tolerance
    RK23 solve whose errors acted as noise. Raising ``beta`` alone did not
    help reliably in our measurements; input noise (``1e-3``, about 1e-4 of the
    attractor's standard deviation) did, and so does standardising the
    samples (the default): with ``beta=2.5e-6`` on standardised features the
    quadratic closed loop is stable at ``dt=0.01`` and ``0.025`` (NRMSE over
    one Lyapunov time 9e-4 and 3e-3 from 4000 and 1600 samples). A flow
    sampled too coarsely for a quadratic map stays out of reach of the paper's
    setting: Rossler at ``dt=0.05`` diverges (reported by a
    :class:`DivergenceWarning` when forecasting); the defaults (cubic terms,
    ``input_noise="auto"``) forecast it to NRMSE 0.006 over one Lyapunov time.
    Delay systems need a window that spans the delay: on Mackey-Glass
    (delay 17 samples) ``k=2`` with the auto stride (window of 3 samples)
    does no better than persistence, ``k=3, s=9`` reaches NRMSE 0.16.

    Example
    -------
    >>> nvar, W = train_NVARForecaster(NVARForecaster(3), U_train, beta=2.5e-6)
    >>> U_pred = nvar.forecast(500, W[-1])
    """
    owner = "train_NVARForecaster"
    if not isinstance(model, NVARForecaster):
        raise TypeError(
            f"{owner}: model must be an NVARForecaster, got {type(model).__name__}"
        )
    multi = check_flag("multi_sequence", multi_sequence, owner)
    return_states = check_flag("return_states", return_states, owner)
    spinup = check_int("spinup", spinup, owner, minimum=0)
    if model.s is None:  # s="auto": the stride from the training data's sampling
        if isinstance(train_seq, jax.core.Tracer):
            raise TypeError(
                f"{owner}: the model's stride is 'auto', chosen from concrete "
                "training data; under jax.jit build the model with s=... (e.g. "
                "orc.forecaster.nvar_stride(data) computed outside the jit)"
            )
        what = "(n_traj, seq_len, data_dim)" if multi else "(seq_len, data_dim)"
        checked = check_rank(
            "train_seq",
            check_data("train_seq", train_seq, owner, model.dtype),
            3 if multi else 2,
            owner,
            what,
        )
        model = model.with_stride(nvar_stride(checked, multi_sequence=multi))
    first = max(spinup, model.window - 1)
    needed = first + (1 if target_seq is None else 0) + 1
    shape = tuple(jnp.shape(train_seq))
    if len(shape) == (3 if multi else 2) and shape[-2] < needed:
        raise ValueError(
            f"{owner}: train_seq must have at least {needed} samples, got shape "
            f"{shape}: pairs t < max(spinup, window - 1) = {first} are not fitted "
            f"(delay window {model.window} for k={model.k}, s={model.s}; "
            f"spinup={spinup}) and at least one training pair must remain"
        )
    train_seq, target_seq, spinup, _ = teacher_forcing_arguments(
        owner, model, train_seq, target_seq, spinup, multi
    )
    solver = _solver(owner, model, beta, penalize_constant, standardize, train_seq)
    relative = isinstance(input_noise, str)
    if relative and input_noise != "auto":
        raise ValueError(
            f"{owner}: input_noise must be a number >= 0 or 'auto', got {input_noise!r}"
        )
    if relative:
        input_noise = AUTO_NOISE_FRACTION
        if not (
            multi
            or target_seq is not None
            or model.n_features > AUTO_SELECT_MAX_FEATURES
            or _traced(train_seq, beta)
        ):
            chosen, _ = _select(
                owner, model, train_seq, solver, spinup, AUTO_NOISE_CANDIDATES,
                noise_seed, standardize,
            )  # fmt: skip
            input_noise = AUTO_NOISE_FRACTION if chosen is None else chosen
    return _train(
        model,
        train_seq,
        target_seq,
        solver,
        spinup,
        multi,
        return_states,
        training_noise(owner, input_noise, 0.0, noise_seed, model.dtype),
        bool(standardize),
        relative,
    )


def _solver(owner, model, beta, penalize_constant, standardize, seq):
    """The checked flags and the ridge solver of an NVAR fit (the constant
    feature's weight unpenalised unless ``penalize_constant``)."""
    for name, flag in (
        ("penalize_constant", penalize_constant),
        ("standardize", standardize),
    ):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{owner}: {name} must be a bool, got {flag!r}")
    intercept = model.constant and not penalize_constant
    return ridge(owner, beta, model.dtype, intercept=intercept, data=(seq,))


def _traced(*values) -> bool:
    """Whether any of ``values`` is traced, or the call is being traced by
    ``jax.jit`` (where even closed-over concrete data give traced results)."""
    values = (*values, jnp.zeros(()))
    return any(isinstance(v, jax.core.Tracer) for v in values)


@compiled
def _free_runs(model, windows, length: int):
    """Closed loops of ``length`` samples from each delay window ``(n, window, d)``."""
    return jax.vmap(lambda w: model._closed_loop(length, w))(windows)


def select_input_noise(
    model: NVARForecaster,
    train_seq: Array,
    beta: float = NVAR.beta,
    spinup: int = 0,
    *,
    candidates=AUTO_NOISE_CANDIDATES,
    noise_seed=0,
    penalize_constant: bool = True,
    standardize: bool = True,
) -> tuple[float | None, dict]:
    """The ``input_noise="auto"`` choice: the training-noise level whose
    closed loop holds up best on held-out data.

    The last :data:`VALIDATION_FRACTION` (20%) of ``train_seq`` is held out.
    For each candidate (a fraction of each dimension's standard deviation, as
    ``input_noise="auto"`` scales it) the model is fitted to the rest, then run
    in closed loop from :data:`VALIDATION_WINDOWS` (5) evenly spaced delay
    windows of the held-out part, each run as long as the whole held-out part.
    A run is *bounded* when it stays finite and within ``BLOWUP_DATA`` (10)
    times the largest deviation of the fitted samples from their mean
    (:class:`~orc.forecaster.DivergenceWarning`'s factor, measured from the
    mean so that an offset in the data does not loosen it); its *valid
    steps* are :func:`orc.metrics.valid_prediction_time` in steps
    (``normalization="feature_std"`` with the training standard deviations,
    threshold :data:`VALIDATION_THRESHOLD`, 0.4) against the held-out samples
    up to the next window. The
    choice maximises the number of bounded runs, then the mean valid steps;
    ties go to the smaller noise. Bounded runs come first because a readout
    that leaves the attractor from one held-out window will do so from some
    test window too, however well it does elsewhere.

    :func:`train_NVARForecaster` makes this choice for ``input_noise="auto"``
    on one concrete trajectory without ``target_seq`` and a feature vector
    of at most :data:`AUTO_SELECT_MAX_FEATURES` (2000) entries; elsewhere
    (several trajectories, explicit targets, data traced by ``jax.jit``,
    more features, or a held-out window shorter than the delay window plus
    :data:`VALIDATION_MIN_STEPS` samples) it uses
    :data:`AUTO_NOISE_FRACTION` (``1e-3``). Call this function to see the
    scores behind the choice (or to make it for a larger model).

    Parameters
    ----------
    model : NVARForecaster
        With ``s="auto"`` the stride is chosen from ``train_seq`` first.
    train_seq : Array ``(seq_len, data_dim)``
    beta, spinup, noise_seed, penalize_constant, standardize
        As for :func:`train_NVARForecaster`.
    candidates : sequence of float
        Noise fractions (each >= 0) to choose from.

    Returns
    -------
    fraction : float or None
        The chosen fraction; ``None`` when ``train_seq`` is too short to hold
        out the validation windows.
    scores : dict
        ``{fraction: (bounded_runs, mean_valid_steps)}`` per candidate.

    Example
    -------
    >>> U, _ = orc.data.lorenz63(tN=100.0, dt=0.02)
    >>> frac, scores = select_input_noise(NVARForecaster(3), U)
    """
    owner = "select_input_noise"
    if not isinstance(model, NVARForecaster):
        raise TypeError(
            f"{owner}: model must be an NVARForecaster, got {type(model).__name__}"
        )
    seq = check_rank(
        "train_seq", check_data("train_seq", train_seq, owner, model.dtype), 2,
        owner, "(seq_len, data_dim)",
    )  # fmt: skip
    if model.s is None:
        model = model.with_stride(nvar_stride(seq))
    spinup = check_int("spinup", spinup, owner, minimum=0)
    teacher_forcing_arguments(owner, model, seq, None, spinup, False)
    solver = _solver(owner, model, beta, penalize_constant, standardize, seq)
    try:
        candidates = tuple(
            check_float("candidates", c, owner, low=0.0) for c in candidates
        )
    except TypeError as err:
        raise TypeError(
            f"{owner}: candidates must be a sequence of numbers >= 0, got "
            f"{candidates!r}"
        ) from err
    if not candidates:
        raise ValueError(f"{owner}: candidates must not be empty")
    return _select(
        owner, model, seq, solver, spinup, candidates, noise_seed, standardize
    )


def _select(owner, model, seq, solver, spinup, candidates, noise_seed, standardize):
    seq = np.asarray(seq)
    n, w = seq.shape[0], model.window
    n_val = int(n * VALIDATION_FRACTION)
    gap = n_val // VALIDATION_WINDOWS
    steps = gap - w
    fit = seq[: n - n_val]
    if steps < VALIDATION_MIN_STEPS or len(fit) < max(spinup, w - 1) + 2:
        return None, {}
    val = seq[n - n_val :]
    starts = np.arange(VALIDATION_WINDOWS) * gap
    windows = np.stack([val[i : i + w] for i in starts])
    truth = np.stack([val[i + w : i + gap] for i in starts])
    mean, sd = fit.mean(axis=0), fit.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    bound = BLOWUP_DATA * np.max(np.abs(fit - mean))
    scores = {}
    for fraction in candidates:
        fitted, _ = _train(
            model,
            jnp.asarray(fit, model.dtype),
            None,
            solver,
            spinup,
            False,
            False,
            training_noise(owner, fraction, 0.0, noise_seed, model.dtype),
            bool(standardize),
            True,
        )
        runs = np.asarray(_free_runs(fitted, jnp.asarray(windows, model.dtype), n_val))
        with np.errstate(invalid="ignore", over="ignore"):
            dev = np.abs(runs - mean).reshape(len(runs), -1)
            bounded = np.all(np.isfinite(runs).reshape(len(runs), -1), axis=1) & (
                np.max(dev, axis=1, initial=0.0) <= bound
            )
        valid = [
            float(
                valid_prediction_time(
                    run[:steps], want, VALIDATION_THRESHOLD, scale=sd,
                    normalization="feature_std",
                )
            )
            for run, want in zip(runs, truth, strict=True)
        ]  # fmt: skip
        scores[fraction] = (int(bounded.sum()), float(np.mean(valid)))
    best = max(candidates, key=lambda c: (scores[c], -candidates.index(c)))
    return best, scores
