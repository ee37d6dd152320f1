"""Input → output regression with a reservoir (reservoirpy's main use).

A regressor maps an input sequence ``u_0, u_1, ...`` to an output sequence
``y_0, y_1, ...`` of another quantity: infer an unobserved variable of a system
from the observed ones (Lorenz63 ``z`` from ``x, y``), emulate a NARMA system,
one-step prediction of a series. The reservoir is driven by the input,
``r_{t+1} = driver(embed(u_t), r_t)``, and the output at time ``t`` is read
from the state reached after ``u_t``::

    y_t = W_out φ(r_{t+1}) + W_u u_t + b

``W_u`` (input pass-through, ``input_passthrough=True``) and ``b`` (readout
bias, ``readout_bias=True``, the default) are optional; ``φ`` is the readout's
feature map (identity, or odd nodes squared with ``quadratic=True``). All of
``W_out``, ``W_u``, ``b`` are fitted in one ridge regression on the engine the
forecasters use (:mod:`orc._ridge`), accumulated in time blocks while the
reservoir runs; the bias is not penalised (ridge on centred features).

Unlike a forecaster, a regressor never feeds its output back: there is no
closed loop. Multi-step forecasting of a scalar series can be posed as
regression with ``target = series shifted by h``.

:class:`ESNRegressor`'s reservoir defaults are its own, not the
forecasters' (ORC 0.4's, tuned for chaotic forecasting, which it took
until orc 0.5): ``leak_rate=1.0``, ``bias=0.2``, ``embedding_scaling=0.4``,
``Wr_spectral_radius=0.95``. At 300 nodes they bring NARMA10's NRMSE from
0.74 to 0.20 and the memory capacity from 3 to 18
(``benchmarks/REGRESSOR_DEFAULTS.md``); pass the old values to reproduce
earlier results.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._compose import check_model
from ._defaults import ESN, REGRESSOR, arguments
from ._divergence import report_overflow
from ._esn import esn_components
from ._fit import (
    AbstractTeacherForcing,
    check_model_type,
    finite_sequence,
    fit,
    options,
    ridge,
    start_states,
    teacher_forcing_arguments,
)
from ._model import RCModel
from ._strategy import compiled
from ._validation import (
    check_input_finite,
    check_int,
    check_leaf,
    check_sequence,
)
from .drivers import DriverBase, check_state
from .embeddings import EmbedBase
from .readouts import ReadoutBase

__all__ = ["RCRegressorBase", "ESNRegressor", "train_RCRegressor"]


def _check_one_reservoir(owner, driver, readout) -> None:
    """A regressor reads one reservoir: states ``(res_dim,)`` and a readout
    that is a bank of one (features ``(seq_len, 1, n)``)."""
    if tuple(driver.state_shape) != (driver.res_dim,) or readout.chunks != 1:
        raise ValueError(
            f"{owner}: regressors use one reservoir (driver states (res_dim,), a "
            f"readout of one chunk such as LinearReadout); got driver states "
            f"{tuple(driver.state_shape)} and readout chunks {readout.chunks}"
        )


class RCRegressorBase(RCModel):
    """Reservoir regressor: embedding → driver → readout (+ pass-through + bias).

    Parameters
    ----------
    driver : DriverBase
        One reservoir (or a stack of layers) with states ``(res_dim,)``.
    readout : ReadoutBase
        Maps the state to the reservoir part of the output (``out_dim`` outputs).
    embedding : EmbedBase
    input_passthrough : bool, default False
        Add a trained linear term ``W_u u_t`` of the current input.
    readout_bias : bool, default True
        Add a trained (unpenalised) constant ``b``.
    dtype : dtype, default float64
    seed : int, default 0

    Methods
    -------
    force(in_seq, res_state=None) -> states ``(seq_len, *state_shape)``
    predict(in_seq, res_state=None) -> outputs ``(seq_len, out_dim)``

    Both raise on NaN or inf in ``in_seq`` or ``res_state`` (also under
    ``jax.jit``), naming the argument and the first bad row.
    """

    w_input: Array | None
    b_out: Array | None
    input_passthrough: bool = eqx.field(static=True)
    readout_bias: bool = eqx.field(static=True)

    def __init__(
        self,
        driver: DriverBase,
        readout: ReadoutBase,
        embedding: EmbedBase,
        input_passthrough: bool = False,
        readout_bias: bool = True,
        dtype=jnp.float64,
        seed=0,
    ) -> None:
        name = type(self).__name__
        _check_one_reservoir(name, driver, readout)
        self._set_components(driver, readout, embedding, dtype, seed)
        self.input_passthrough = bool(input_passthrough)
        self.readout_bias = bool(readout_bias)
        self.w_input = (
            jnp.zeros((self.out_dim, self.in_dim), self.dtype)
            if self.input_passthrough
            else None
        )
        self.b_out = jnp.zeros((self.out_dim,), self.dtype) if readout_bias else None

    def __check_init__(self):
        name = type(self).__name__
        _check_one_reservoir(name, self.driver, self.readout)
        check_model(self, self.in_dim, None)
        for flag, field, shape in (
            ("input_passthrough", "w_input", (self.out_dim, self.in_dim)),
            ("readout_bias", "b_out", (self.out_dim,)),
        ):
            value = getattr(self, field)
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{name}: {flag} must be a bool")
            if getattr(self, flag):
                check_leaf(name, field, value, shape, self.dtype)
            elif value is not None:
                raise ValueError(f"{name}: {field} must be None without {flag}")

    # -- running ------------------------------------------------------------ #
    def _check_input(self, in_seq, res_state, name="in_seq"):
        owner = type(self).__name__
        in_seq = check_sequence(name, in_seq, owner, self.dtype, self.in_dim, "in_dim")
        if res_state is None:
            res_state = self.driver.default_state()
        res_state = check_state("res_state", res_state, owner, self.driver, self.dtype)
        in_seq = check_input_finite(in_seq.astype(self.dtype), name, owner)
        res_state = check_input_finite(
            jnp.asarray(res_state, self.dtype), "res_state", owner
        )
        return in_seq, res_state

    def _run(self, in_seq, res_state):
        return self._drive(in_seq, res_state)

    @compiled
    def force(
        self, in_seq: Float[Array, "seq_len in_dim"], res_state: Array | None = None
    ) -> Array:
        """States after each input, ``(seq_len, *state_shape)``, from ``res_state``
        (default: the zero state)."""
        in_seq, res_state = self._check_input(in_seq, res_state)
        return self._run(in_seq, res_state)

    def output(self, states: Array, in_seq: Array) -> Array:
        """Outputs ``(seq_len, out_dim)`` of states and the inputs that led to them."""
        y = self.readout.batch_readout(states)
        if self.w_input is not None:
            y = y + jnp.matmul(in_seq, self.w_input.T, precision="highest")
        if self.b_out is not None:
            y = y + self.b_out
        return y

    @compiled
    def predict(
        self, in_seq: Float[Array, "seq_len in_dim"], res_state: Array | None = None
    ) -> Float[Array, "seq_len out_dim"]:
        """Output for each input: ``y_t`` from the state reached after ``u_t``."""
        in_seq, res_state = self._check_input(in_seq, res_state)
        out = self.output(self._run(in_seq, res_state), in_seq)
        report_overflow(
            f"{type(self).__name__}.predict", out, self.dtype, (in_seq, res_state)
        )
        return out

    def __call__(self, in_seq: Array, res_state: Array | None = None) -> Array:
        """Same as :meth:`predict`."""
        return self.predict(in_seq, res_state)

    # -- training hooks ----------------------------------------------------- #
    def features(self, states: Array, in_seq: Array) -> Array:
        """Regression features ``[1, u_t, φ(r)]`` (the optional parts as
        configured), ``(seq_len, 1, n_features)``: the readout's bank of one."""
        feats = self.readout.prepare_train(states)
        lead = feats.shape[:-1]
        parts = []
        if self.readout_bias:
            parts.append(jnp.ones(lead + (1,), self.dtype))
        if self.input_passthrough:
            parts.append(jnp.broadcast_to(in_seq[:, None, :], lead + (self.in_dim,)))
        parts.append(feats)
        return jnp.concatenate(parts, axis=-1)

    def set_weights(self, weights: Float[Array, "1 out_dim n_features"]):
        """A copy with the fitted weights ``[b | W_u | W_out]`` (as :meth:`features`)."""
        i = 0
        model = self
        if self.readout_bias:
            model = eqx.tree_at(lambda m: m.b_out, model, weights[0, :, 0])
            i = 1
        if self.input_passthrough:
            model = eqx.tree_at(
                lambda m: m.w_input, model, weights[0, :, i : i + self.in_dim]
            )
            i += self.in_dim
        return model.set_readout(model.readout.set_wout(weights[:, :, i:]))


class ESNRegressor(RCRegressorBase):
    """Echo state network regressor (optionally deep).

    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in u_t + b)`` and
    ``y_t = W_out φ(r_{t+1}) [+ W_u u_t] [+ b_out]``. Hyperparameters as
    :class:`orc.forecaster.ESNForecaster`; the defaults of ``leak_rate``,
    ``bias``, ``embedding_scaling`` and ``Wr_spectral_radius`` are the
    regressor's own (1.0, 0.2, 0.4, 0.95: :data:`orc._defaults.REGRESSOR`),
    chosen on NARMA10, memory capacity and Lorenz63 observers, raw and
    standardised: ORC's forecasting defaults (0.6, 1.6, 0.08, 0.8) saturate
    the reservoir and forget the input (NARMA10 NRMSE 0.74 against 0.20 at
    300 nodes).

    Parameters
    ----------
    in_dim : int
    out_dim : int
    res_dim : int
        Nodes per reservoir layer.
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius : float
    n_layers : int, default 1
        More than 1 stacks reservoirs (:class:`orc.drivers.DeepESNDriver`); the
        readout reads all layers.
    coupling_scaling : float
        Inter-layer weight scale (``n_layers > 1``).
    input_passthrough : bool, default False
    readout_bias : bool, default True
    quadratic : bool, default False
        Square the odd-indexed nodes in the readout.
    dtype : dtype, default float64
    seed : int or PRNG key, default 0
    use_sparse_eigs : bool, default True
    construction : {"orc", "orc04", "jax"}, default "orc"
        As for :class:`orc.forecaster.ESNForecaster` (``"jax"`` builds from
        a traced seed and traced hyperparameters: :class:`orc.tune.Regress`).

    Example
    -------
    >>> U, _ = orc.data.lorenz63(tN=100, dt=0.01)
    >>> reg = ESNRegressor(in_dim=2, out_dim=1, res_dim=300)
    >>> reg, _ = train_RCRegressor(reg, U[:8000, :2], U[:8000, 2:], spinup=200)
    >>> z_hat = reg.predict(U[8000:, :2])          # (2000, 1)
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        res_dim: int,
        leak_rate: float = REGRESSOR.leak_rate,
        bias: float = REGRESSOR.bias,
        embedding_scaling: float = REGRESSOR.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = REGRESSOR.Wr_spectral_radius,
        n_layers: int = REGRESSOR.n_layers,
        coupling_scaling: float = ESN.coupling_scaling,
        input_passthrough: bool = REGRESSOR.input_passthrough,
        readout_bias: bool = REGRESSOR.readout_bias,
        quadratic: bool = ESN.quadratic,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        hyper = arguments(locals(), "input_passthrough", "readout_bias")
        # one layer is the plain ESN driver (its fused kernels); more stack
        layers = check_int("n_layers", n_layers, type(self).__name__, minimum=1)
        hyper["n_layers"] = layers if layers > 1 else None
        embedding, driver, readout, dtype = esn_components(
            type(self).__name__, layout="single", **hyper
        )
        super().__init__(
            driver,
            readout,
            embedding,
            dtype=dtype,
            seed=seed,
            input_passthrough=input_passthrough,
            readout_bias=readout_bias,
        )


class Regression(AbstractTeacherForcing):
    """A regressor's teacher-forced problem: the state after ``in_seq[t]``
    (with ``in_seq[t]`` itself for pass-through) is regressed onto
    ``target_seq[t]``; nothing is fed back. Built by :func:`train_RCRegressor`."""

    owner: str = eqx.field(static=True)
    in_seq: Array
    target_seq: Array
    init: Array
    spinup: int = eqx.field(static=True)
    multi: bool = eqx.field(static=True)

    @property
    def rows(self):
        return self.in_seq

    def forcing(self, model, noise):
        in_seq = finite_sequence(self.owner, "in_seq", self.in_seq, model.dtype)
        targets = finite_sequence(
            self.owner, "target_seq", self.target_seq, model.dtype
        )
        # the reservoir is driven by the (noisy) forcing; pass-through
        # features use the clean inputs
        forcing = in_seq if noise is None else noise.perturb(in_seq)
        return (in_seq, forcing), targets

    def force(self, model, inputs, state):
        return model._run(inputs[1], state)

    def features(self, model, noise):
        def features(states, inputs, offset):
            if noise is not None:
                states = noise.states(states, offset)
            return model.features(states, inputs[0])

        return features

    def solution(self, model, weights):
        return model.set_weights(weights)


def train_RCRegressor(
    model: RCRegressorBase,
    in_seq: Array,
    target_seq: Array,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = REGRESSOR.beta,
    multi_sequence: bool = False,
    return_states: bool = False,
    progress: bool | None = None,
    input_noise: float = 0.0,
    state_noise: float = 0.0,
    noise_seed=0,
):
    """Fit a regressor's output weights by ridge regression.

    The reservoir is driven by ``in_seq``; the state after input ``t`` (with
    ``u_t`` for pass-through) is regressed onto ``target_seq[t]``, skipping the
    first ``spinup`` pairs. The statistics are accumulated in time blocks while
    the reservoir runs, so no state history is kept unless asked for.

    Parameters
    ----------
    model : RCRegressorBase
    in_seq : Array
        ``(seq_len, in_dim)``, or ``(n_seq, seq_len, in_dim)`` with ``multi_sequence``.
    target_seq : Array
        ``(seq_len, out_dim)`` (same leading shape as ``in_seq``).
    spinup : int, default 0
        Leading pairs left out of the fit (reservoir warm-up).
    initial_res_state : Array, optional
        Start state (default zeros); one per sequence with ``multi_sequence``.
    beta : float, optional
        Ridge penalty on ``W_out`` and ``W_u`` (not on the bias).
    multi_sequence : bool, default False
        Fit one set of weights on several sequences (statistics are summed).
    return_states : bool, default False
        Also return every state (memory ``seq_len × state``); otherwise the
        last state (per sequence), from which :meth:`RCRegressorBase.predict`
        can continue the stream.
    progress : bool, optional
        Progress bar, as in :func:`orc.forecaster.train_RCForecaster`.
    input_noise, state_noise : float, default 0
        Noise regularisation (see :class:`orc._training.TrainingNoise`):
        Gaussian noise on the inputs driving the reservoir, or on the states
        entering the regression.
    noise_seed : int or PRNG key, default 0

    Returns
    -------
    (model, states) : the fitted model and the states ``(seq_len, *state)``
    with ``return_states``, else ``(model, last_state)``.

    Example
    -------
    >>> reg, r_last = train_RCRegressor(ESNRegressor(2, 1, 300), X, Z, spinup=100)
    >>> Z_next = reg.predict(X_next, r_last)      # continues from the training run
    """
    owner = "train_RCRegressor"
    check_model_type(owner, model, RCRegressorBase)
    in_seq, target_seq, spinup, _ = teacher_forcing_arguments(
        owner, model, in_seq, target_seq, spinup, multi_sequence,
        main=("in_seq", "in_dim"), targets_required=True,
    )  # fmt: skip
    init = start_states(owner, model, initial_res_state, in_seq)
    problem = Regression(owner=owner, in_seq=in_seq, target_seq=target_seq, init=init,
                         spinup=spinup, multi=in_seq.ndim == 3)  # fmt: skip
    solver = ridge(
        owner, beta, model.dtype, intercept=model.readout_bias, data=(in_seq,)
    )
    opts = options(owner, model.dtype, return_states, progress, input_noise,
                   state_noise, noise_seed)  # fmt: skip
    return fit(model, problem, solver, opts)
