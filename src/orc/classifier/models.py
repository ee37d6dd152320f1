"""Echo state network classifier."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .._compose import check_esn_sizes
from .._defaults import CLASSIFIER, ESN, arguments
from .._esn import esn_components
from .._validation import check_int
from .base import RCClassifierBase, _check_state_repr, check_lags, feature_dim

__all__ = ["ESNClassifier"]


class ESNClassifier(RCClassifierBase):
    """Echo state network classifier of sequences (ORC 0.4 defaults).

    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in u_t + b)``; a representation
    of the states (``state_repr``: final or mean state, statistics, the
    model space of a one-step predictor, optionally bidirectional) is mapped
    by a linear (or quadratic) readout to ``n_classes`` scores.

    Parameters
    ----------
    data_dim : int
    n_classes : int
    res_dim : int
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius, dtype, \
seed, quadratic, use_sparse_eigs
        As for :class:`orc.forecaster.ESNForecaster`.
    state_repr : {"final", "mean", "stats", "model_space", "ppv", "bi_final", \
"bi_mean", "bi_stats", "bi_model_space", "bi_ppv"}, default "final"
        See :mod:`orc.classifier.base`: ``"final"`` state, ``"mean"`` state
        after ``spinup`` (ORC 0.4's two), ``"stats"`` = [final, mean, std]
        (``3 * res_dim`` features), ``"model_space"`` = weights and bias of a
        ridge one-step predictor of the input fitted to each series
        (``data_dim * (model_space_dim + 1)`` features), ``"ppv"`` = [mean,
        fraction of steps above each node's training quartiles]
        (``4 * res_dim`` features; thresholds fitted by training);
        ``"bi_"`` adds the same representation of the time-reversed series.
    construction : str, default "orc"
        As for :class:`orc.forecaster.ESNForecaster`.
    model_space_dim : int, optional
        Nodes the ``"model_space"`` predictor reads; default
        ``min(res_dim, 75)``. Ignored by the other representations;
        the readout is sized for the representation at construction
        (:attr:`feature_dim` inputs).
    input_differences : bool, default False
        Also feed the reservoir the first differences of each input channel,
        scaled by their training standard deviation (the embedding reads
        ``2 * data_dim`` inputs; ``data_dim`` stays the series' width).
    input_lags : sequence of int, default ()
        Also feed the reservoir each channel's differences over these
        numbers of steps, ``u_t - u_{t-L}``, scaled by their training
        standard deviation; with ``input_differences`` their first
        differences too (see :mod:`orc.classifier.base`).

    Notes
    -----
    The strongest recipe measured on seven UCR/UEA sets
    (``benchmarks/science/CLASSIFICATION.md``) is ``state_repr="bi_ppv"``,
    ``input_lags=(4, 16)``, ``input_differences=True``, ``Wr_density=0.1``,
    ``Wr_spectral_radius=0.9``, ``spinup = seq_len // 10`` and ``beta``
    chosen by leave-one-out from a grid (:func:`train_RCClassifier`). This
    class keeps ORC 0.4's defaults; the scikit-learn estimator
    :class:`orc.sklearn.ESNClassifier` takes the recipe (with
    ``leak_rate=0.1``, ``embedding_scaling=0.4``) as its defaults.

    Example
    -------
    >>> clf = ESNClassifier(data_dim=3, n_classes=3, res_dim=500)
    >>> clf = train_RCClassifier(clf, train_seqs, train_labels)
    >>> probs = jax.vmap(clf.classify)(test_seqs)    # (n_test, 3)
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)

    def __init__(
        self,
        data_dim: int,
        n_classes: int,
        res_dim: int,
        leak_rate: float = ESN.leak_rate,
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        quadratic: bool = ESN.quadratic,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        state_repr: str = CLASSIFIER.state_repr,
        construction: str = ESN.construction,
        model_space_dim: int | None = None,
        input_differences: bool = CLASSIFIER.input_differences,
        input_lags: tuple[int, ...] = CLASSIFIER.input_lags,
    ) -> None:
        hyper = arguments(
            locals(),
            "data_dim",
            "n_classes",
            "state_repr",
            "model_space_dim",
            "input_differences",
            "input_lags",
        )
        name = type(self).__name__
        data_dim = check_int("data_dim", data_dim, name, minimum=1)
        n_classes = check_int("n_classes", n_classes, name, minimum=2)
        state_repr = _check_state_repr(state_repr, name)
        if not isinstance(input_differences, bool):
            raise TypeError(
                f"{name}: input_differences must be a bool, got {input_differences!r}"
            )
        lags = check_lags(input_lags, name)
        embedding, driver, readout, dtype = esn_components(
            name,
            layout="single",
            in_dim=data_dim * (1 + len(lags)) * (2 if input_differences else 1),
            out_dim=n_classes,
            **hyper,
        )
        if model_space_dim is not None:
            check_int("model_space_dim", model_space_dim, name, minimum=1)
        if state_repr not in ("final", "mean"):  # not a state: resize the readout
            width = feature_dim(state_repr, driver.res_dim, data_dim, model_space_dim)
            readout = type(readout)(n_classes, width, dtype)
        super().__init__(
            driver,
            readout,
            embedding,
            n_classes,
            state_repr,
            dtype,
            seed,
            input_differences=input_differences,
            input_lags=lags,
        )
        self.data_dim = data_dim
