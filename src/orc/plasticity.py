"""Unsupervised adaptation of a reservoir before its readout is trained.

The trainers fit only the readout; the reservoir stays as drawn. The rules
here change the reservoir itself from the input data, without targets, and
return a model of the same class whose readout is then trained as usual:

- :func:`intrinsic_plasticity` (Triesch 2005; Schrauwen et al. 2008) gives
  every node ``i`` a gain ``a_i`` and a bias ``b_i`` on its input,
  ``y_i = tanh(a_i x_i + b_i)`` with ``x = W r + W_in u + bias``, and moves
  them step by step so that the distribution of ``y_i`` over the data
  approaches a Gaussian of mean ``mu`` and standard deviation ``sigma`` (a
  gradient step on the Kullback-Leibler divergence). Gain and bias fold into
  the matrices: ``W <- diag(a) W``, ``W_in <- diag(a) W_in``, ``bias <- a *
  bias + b``, so the result is a plain echo state network, the same
  components as ``from_matrices`` builds: the kernels run it and model
  files store it as they do those.
- :func:`local_plasticity` changes the existing connections of ``W`` by a
  local rule of the presynaptic state ``r_j`` (before the step) and the
  postsynaptic state ``r'_i`` (after it): Oja's rule, anti-Oja, Hebbian,
  anti-Hebbian or BCM (Bienenstock, Cooper & Munro 1982), optionally with
  each row renormalised to unit length. The sparsity pattern is kept: a
  zero weight is no connection and stays zero.

Both run one compiled loop: ``epochs`` passes over the data (each trajectory
in turn with ``multi_sequence``), every pass from the initial state, the
first ``spinup`` steps of each pass driving the reservoir without adapting.
They apply to models whose driver is an echo state network in discrete time
(:class:`orc.drivers.ESNDriver`, :class:`orc.drivers.ParallelESNDriver`:
forecasters, regressors, classifiers, controllers, one reservoir or a bank)
and whose embedding is linear (:class:`orc.embeddings.LinearEmbedding` and
its parallel and ensemble forms).

The adapted matrices are no longer the ones a seed draws: the driver records
``construction="given"`` and no spectral radius, as one built by
``from_matrices``. A readout trained before the adaptation no longer fits
the states; train it afterwards.

Differences from reservoirpy 0.4's ``IPReservoir`` and
``LocalPlasticityReservoir``: the rules act on orc's leaky update, ``r' =
(1 - leak) r + leak tanh(...)`` (reservoirpy's ``IPReservoir`` leaks the
input sum), the local rules read the states ``r`` (reservoirpy reads the
input sums), ``spinup`` steps are driven rather than skipped, every epoch
starts from the initial state, and ``sigma`` defaults to 0.2 (reservoirpy:
1.0, which for ``tanh`` nodes asks for a distribution their outputs in
``(-1, 1)`` cannot have). With ``leak=1`` and one epoch the
intrinsic-plasticity updates are reservoirpy's step for step (on the same
matrices, gains and biases agreed to 1e-15).

When it helps (``benchmarks/PLASTICITY.md``): intrinsic plasticity
normalises a reservoir that sits far from a useful regime. On NARMA10 with
100 nodes it lowered the median NRMSE of a regressor with ORC's
forecasting scales (bias 1.6, saturated on NARMA's inputs) from 0.86 to 0.44
and of reservoirpy's ``IPReservoir`` from 0.58 to 0.49, but raised that of
reservoirs already scaled for the task: from 0.38 to 0.50, and from 0.41 to
0.46 for :class:`orc.regression.ESNRegressor` with its defaults. It also takes away a bias the model
relies on: orc's default forecaster, whose bias is what lets it forecast
Lorenz63, fell from 7.0 to 0.5 Lyapunov times with ``mu=0``.

References
----------
Triesch, J. (2005). A gradient rule for the plasticity of a neuron's
intrinsic excitability. *ICANN 2005*, LNCS 3696, 65-70.
Schrauwen, B., Wardermann, M., Verstraeten, D., Steil, J. J. & Stroobandt,
D. (2008). Improving reservoirs using intrinsic plasticity.
*Neurocomputing* 71(7-9), 1159-1171.
Oja, E. (1982). Simplified neuron model as a principal component analyzer.
*J. Math. Biol.* 15, 267-273.
Bienenstock, E. L., Cooper, L. N. & Munro, P. W. (1982). Theory for the
development of neuron selectivity. *J. Neurosci.* 2(1), 32-48.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from . import _errors
from ._bank import declares, to_bank
from ._construct import GIVEN
from ._defaults import PLASTICITY
from ._model import RCModel
from ._strategy import compiled
from ._training import check_initial_state, initial_states
from ._validation import (
    check_data,
    check_finite,
    check_float,
    check_int,
    check_last_dim,
    check_rank,
    check_spinup,
    replace_fields,
)
from .embeddings import EmbedBase

__all__ = ["intrinsic_plasticity", "local_plasticity", "LOCAL_RULES"]

LOCAL_RULES = ("oja", "anti-oja", "hebbian", "anti-hebbian", "bcm")
"""The rules :func:`local_plasticity` takes."""

_NAN_HINT = "Remove or interpolate missing samples first."
_DIVERGED = {
    "intrinsic_plasticity": (
        "intrinsic_plasticity: the adaptation diverged: a node's gain stepped "
        "through zero (or a value became non-finite). The gain's step grows "
        "with the node's input W r + W_in u + bias: lower learning_rate, or "
        "standardise the data"
    ),
    "local_plasticity": (
        "local_plasticity: the adaptation produced non-finite weights; lower "
        "learning_rate, or use normalize_rows=True (the Hebbian and BCM rules "
        "grow weights without bound)"
    ),
}


# --------------------------------------------------------------------------- #
# The rules, written for one reservoir (mapped over the bank)
# --------------------------------------------------------------------------- #


def _ip_step(hyper, params, W, bias, leak, p, r, on):
    """One step of a reservoir with gains ``a`` and biases ``b`` (``params``)
    and, where ``on``, the intrinsic-plasticity update of the Gaussian
    target (Schrauwen et al. 2008, eq. 5)."""
    mu, sigma, rate = hyper
    a, b = params
    x = W.matvec(r) + p + bias
    y = jnp.tanh(a * x + b)
    s2 = sigma**2
    db = rate * (mu / s2 - (y / s2) * (2 * s2 + 1 - y**2 + mu * y))
    da = rate / a + db * x
    params = (jnp.where(on, a + da, a), jnp.where(on, b + db, b))
    return params, leak * y + (1 - leak) * r


def _ip_failed(params):
    """The rule needs positive gains; a step too large flips them."""
    a, b = params
    return jnp.any(~(a > 0)) | ~jnp.all(jnp.isfinite(a)) | ~jnp.all(jnp.isfinite(b))


def _local_failed(values):
    return ~jnp.all(jnp.isfinite(values))


def _local_step(hyper, values, W, bias, leak, p, r, on, *, rule, normalize):
    """One step of a reservoir with connection weights ``values`` (``W``'s
    layout) and, where ``on``, the local rule on its nonzero connections."""
    rate, theta = hyper
    W = eqx.tree_at(lambda m: m.values, W, values)
    r_new = leak * jnp.tanh(W.matvec(r) + p + bias) + (1 - leak) * r
    pre, post = r[W.columns], r_new[:, None]
    if rule in ("oja", "anti-oja"):
        dw = post * (pre - post * values)
    elif rule in ("hebbian", "anti-hebbian"):
        dw = post * pre
    else:  # bcm
        dw = post * (post - theta) * pre
    sign = -1 if rule.startswith("anti") else 1
    new = jnp.where(values != 0, values + sign * rate * dw, 0)
    if normalize:
        norm = jnp.sqrt(jnp.sum(new**2, axis=-1, keepdims=True))
        new = new / jnp.where(norm > 0, norm, 1)
    return jnp.where(on, new, values), r_new


@compiled
def _adapt(model, seqs, r0, spinup, params, hyper, *, step, failed, epochs, owner):
    """``epochs`` passes over ``seqs`` ``(n_traj, seq_len, in_dim)``, each
    trajectory in turn from its start state ``r0`` ``(n_traj, *state)``, with
    ``step`` (one reservoir, mapped over the bank) updating ``params`` (each
    a ``(chunks, ...)`` array) from step ``spinup`` of each pass on;
    ``failed(params)``: whether the result is unusable (raised)."""
    driver, embedding = model.driver, model.embedding
    bank = driver.bank_shape
    dtype = model.dtype
    seqs = check_finite(seqs.astype(dtype), "in_seq", owner, _NAN_HINT)
    bias = jnp.broadcast_to(driver.bias, bank)
    leak = jnp.broadcast_to(driver.leak, bank)
    banked = jax.vmap(step, in_axes=(None, 0, 0, 0, 0, 0, 0, None))
    on = jnp.arange(seqs.shape[1], dtype=jnp.int32) >= spinup

    def one_pass(params, trajectory):
        def advance(carry, xs):
            params, r = carry
            u, adapt = xs
            p = to_bank(embedding.embed(u), embedding.out_shape, bank)
            params, r = banked(hyper, params, driver.wr, bias, leak, p, r, adapt)
            return (params, r), None

        r = to_bank(r0[trajectory], driver.state_shape, bank)
        (params, _), _ = jax.lax.scan(advance, (params, r), (seqs[trajectory], on))
        return params, None

    order = jnp.tile(jnp.arange(seqs.shape[0]), epochs)
    params, _ = jax.lax.scan(one_pass, params, order)
    return _errors.check(params, failed(params), _DIVERGED[owner])


# --------------------------------------------------------------------------- #
# The fronts
# --------------------------------------------------------------------------- #


def _checked(owner, model, in_seq, spinup, initial_res_state, multi_sequence, epochs):
    """The model, the sequences ``(n_traj, seq_len, in_dim)``, their start
    states, ``spinup`` and ``epochs``, checked."""
    if not isinstance(model, RCModel):
        raise TypeError(
            f"{owner}: model must be an orc model (an ESNForecaster, "
            f"ESNRegressor, ESNClassifier, ESNController, ...), got "
            f"{type(model).__name__}"
        )
    driver, embedding = model.driver, model.embedding
    if not declares(driver, "esn_kernels"):
        raise TypeError(
            f"{owner}: the model's driver must be an ESNDriver or "
            f"ParallelESNDriver (the echo state update the rule is written for), "
            f"got {type(driver).__name__}"
        )
    if driver.mode != "discrete":
        raise ValueError(
            f"{owner}: the driver must run in discrete time (mode='discrete'), "
            f"got mode={driver.mode!r}"
        )
    if not (isinstance(embedding, EmbedBase) and declares(embedding, "linear")):
        raise TypeError(
            f"{owner}: the model's embedding must be a LinearEmbedding, "
            f"ParallelLinearEmbedding or EnsembleLinearEmbedding, got "
            f"{type(embedding).__name__}"
        )
    if getattr(model, "input_lags", ()) or getattr(model, "input_differences", False):
        raise ValueError(
            f"{owner}: a classifier with input_lags or input_differences reads "
            f"differences scaled by its training, which do not exist before it; "
            f"adapt the reservoir of one without them"
        )
    if not isinstance(multi_sequence, bool):
        raise TypeError(
            f"{owner}: multi_sequence must be a bool, got {multi_sequence!r}"
        )
    epochs = check_int("epochs", epochs, owner, minimum=1)
    rank, what = (
        (3, "(n_traj, seq_len, in_dim)") if multi_sequence else (2, "(seq_len, in_dim)")
    )
    seqs = check_rank(
        "in_seq", check_data("in_seq", in_seq, owner, model.dtype), rank, owner, what
    )
    columns = "features (the embedding's in_dim"
    if embedding.in_dim != model.in_dim:
        columns += "; a controller takes [train_seq, control_seq] side by side"
    check_last_dim("in_seq", seqs, embedding.in_dim, owner, columns + ")")
    if not multi_sequence:
        seqs = seqs[None]
    if seqs.shape[0] == 0:
        raise ValueError(f"{owner}: in_seq holds no trajectory")
    n_traj, seq_len = seqs.shape[:2]
    spinup = check_spinup(spinup, seq_len, owner, f"seq_len ({seq_len})")
    check_initial_state(owner, model, initial_res_state, n_traj, multi_sequence)
    r0 = initial_states(model, initial_res_state, n_traj, multi_sequence)
    if not multi_sequence:
        r0 = r0[None]
    return seqs, r0, jnp.asarray(spinup, jnp.int32), epochs


def _rate(owner, name, value, dtype):
    return jnp.asarray(check_float(name, value, owner, low=0.0, low_open=True), dtype)


def intrinsic_plasticity(
    model: RCModel,
    in_seq: Array,
    mu: float = PLASTICITY.mu,
    sigma: float = PLASTICITY.sigma,
    learning_rate: float = PLASTICITY.ip_learning_rate,
    epochs: int = PLASTICITY.epochs,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    multi_sequence: bool = False,
) -> RCModel:
    """Adapt each node's gain and bias so that its states over ``in_seq``
    approach a Gaussian of mean ``mu`` and standard deviation ``sigma``.

    At every step, with ``x = W r + W_in u + bias`` the node's input and
    ``y = tanh(a x + b)`` its activation, ``a`` and ``b`` (starting at 1
    and 0) move by the gradient of the Kullback-Leibler divergence between
    the distribution of ``y`` and the Gaussian (Schrauwen et al. 2008)::

        db = -eta (-mu / sigma^2 + y / sigma^2 (2 sigma^2 + 1 - y^2 + mu y))
        da = eta / a + db x

    and the state advances as the driver's, ``r' = (1 - leak) r + leak y``.
    The gains and biases are then folded into the reservoir's matrices (see
    :mod:`orc.plasticity`), so the result is an ordinary model of the same
    class whose readout you train next.

    Compiled; ``mu``, ``sigma``, ``learning_rate`` and ``spinup`` enter as
    arrays (new values do not recompile), ``epochs`` is static.

    Parameters
    ----------
    model : RCModel
        A model whose driver is an ESN driver in discrete time and whose
        embedding is linear (forecasters, regressors, classifiers and
        controllers built by their ``ESN*`` constructors).
    in_seq : Array
        What the embedding takes, ``(seq_len, in_dim)`` (``(n_traj, seq_len,
        in_dim)`` with ``multi_sequence``): the training data of a
        forecaster, regressor or classifier; a controller's data and
        controls side by side.
    mu : float
        The target's mean, in ``(-1, 1)``.
    sigma : float
        The target's standard deviation (``> 0``).
    learning_rate : float
        The step ``eta`` (``> 0``).
    epochs : int
        Passes over the data, each from the initial state.
    spinup : int
        Steps of each pass that drive the reservoir without adapting it.
    initial_res_state : Array, optional
        The start state (one per trajectory with ``multi_sequence``); zeros
        by default.
    multi_sequence : bool
        ``in_seq`` holds several trajectories, adapted on one after another.

    Returns
    -------
    RCModel
        The model with ``W``, ``W_in`` and the bias adapted, its readout
        unchanged.

    Example
    -------
    >>> reg = ESNRegressor(1, 1, 100)
    >>> reg = intrinsic_plasticity(reg, u_train, epochs=10, spinup=100)
    >>> reg, last = train_RCRegressor(reg, u_train, y_train, spinup=100)
    """
    owner = "intrinsic_plasticity"
    seqs, r0, spinup, epochs = _checked(
        owner, model, in_seq, spinup, initial_res_state, multi_sequence, epochs
    )
    dtype = model.dtype
    mu = jnp.asarray(
        check_float("mu", mu, owner, low=-1.0, high=1.0, low_open=True, high_open=True),
        dtype,
    )
    hyper = (
        mu,
        _rate(owner, "sigma", sigma, dtype),
        _rate(owner, "learning_rate", learning_rate, dtype),
    )
    bank = model.driver.bank_shape
    start = (jnp.ones(bank, dtype), jnp.zeros(bank, dtype))
    gain, offset = _adapt(
        model,
        seqs,
        r0,
        spinup,
        start,
        hyper,
        step=_ip_step,
        failed=_ip_failed,
        epochs=epochs,
        owner=owner,
    )
    return _with_gains(model, gain, offset)


def _with_gains(model, gain, offset):
    """``model`` with gains and biases per node, ``(chunks, res_dim)``,
    folded into ``W``, ``W_in`` and the driver's bias."""
    driver, embedding = model.driver, model.embedding
    model = _with_matrices(
        model, driver.wr.values * gain[..., None], bias=gain * driver.bias + offset
    )
    scaled = replace_fields(
        embedding, win=embedding.win * gain[..., None], scaling=None
    )
    return model.set_embedding(scaled)


def _with_matrices(model, values, **changes):
    """``model`` with the adapted ``W`` values (and ``changes`` to other
    driver fields), its driver recorded as given matrices (see the module
    doc)."""
    driver = model.driver
    driver = replace_fields(
        driver,
        wr=eqx.tree_at(lambda w: w.values, driver.wr, values),
        spectral_radius=None,
        construction=GIVEN,
        **changes,
    )
    return eqx.tree_at(lambda m: m.driver, model, driver)


def local_plasticity(
    model: RCModel,
    in_seq: Array,
    rule: str = PLASTICITY.rule,
    learning_rate: float = PLASTICITY.local_learning_rate,
    bcm_theta: float = PLASTICITY.bcm_theta,
    normalize_rows: bool = PLASTICITY.normalize_rows,
    epochs: int = PLASTICITY.epochs,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    multi_sequence: bool = False,
) -> RCModel:
    """Adapt the reservoir's connections by a local rule of the states.

    At every step, with ``r`` the state before it and ``r'`` after it, each
    existing connection ``W_ij`` (``i`` postsynaptic, ``j`` presynaptic)
    changes by::

        oja            eta r'_i (r_j - r'_i W_ij)
        anti-oja      -eta r'_i (r_j - r'_i W_ij)
        hebbian        eta r'_i r_j
        anti-hebbian  -eta r'_i r_j
        bcm            eta r'_i (r'_i - theta) r_j

    after which, with ``normalize_rows``, each row of ``W`` is scaled to
    unit length. Zero weights are no connections and stay zero. Compiled
    like :func:`intrinsic_plasticity`; ``rule``, ``normalize_rows`` and
    ``epochs`` are static.

    Parameters
    ----------
    model : RCModel
        As for :func:`intrinsic_plasticity`.
    in_seq : Array
        As for :func:`intrinsic_plasticity`.
    rule : str
        One of :data:`LOCAL_RULES`.
    learning_rate : float
        The step ``eta`` (``> 0``).
    bcm_theta : float
        The BCM rule's threshold ``theta``.
    normalize_rows : bool
        Scale each row of ``W`` to unit Euclidean length after every update.
    epochs : int
        Passes over the data, each from the initial state.
    spinup : int
        Steps of each pass that drive the reservoir without adapting it.
    initial_res_state : Array, optional
        The start state (one per trajectory with ``multi_sequence``).
    multi_sequence : bool
        ``in_seq`` holds several trajectories, adapted on one after another.

    Returns
    -------
    RCModel
        The model with ``W`` adapted (same sparsity pattern), its readout
        unchanged.

    Example
    -------
    >>> esn = local_plasticity(esn, U, rule="bcm", bcm_theta=0.1, spinup=100)
    >>> esn, R = train_RCForecaster(esn, U, spinup=100)
    """
    owner = "local_plasticity"
    if rule not in LOCAL_RULES:
        raise ValueError(f"{owner}: rule must be one of {LOCAL_RULES}, got {rule!r}")
    if not isinstance(normalize_rows, bool):
        raise TypeError(
            f"{owner}: normalize_rows must be a bool, got {normalize_rows!r}"
        )
    seqs, r0, spinup, epochs = _checked(
        owner, model, in_seq, spinup, initial_res_state, multi_sequence, epochs
    )
    dtype = model.dtype
    hyper = (
        _rate(owner, "learning_rate", learning_rate, dtype),
        jnp.asarray(check_float("bcm_theta", bcm_theta, owner), dtype),
    )
    step = jax.tree_util.Partial(_local_step, rule=rule, normalize=normalize_rows)
    values = _adapt(
        model,
        seqs,
        r0,
        spinup,
        model.driver.wr.values,
        hyper,
        step=step,
        failed=_local_failed,
        epochs=epochs,
        owner=owner,
    )
    return _with_matrices(model, values)
