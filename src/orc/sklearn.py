"""scikit-learn estimators: orc's classifier and regressor in pipelines,
cross-validation, grid searches and aeon's tools.

:class:`ESNClassifier` classifies whole series (a time-series classifier, as
in aeon); :class:`ESNRegressor` maps a time-ordered input series to a target
series (reservoirpy's usual task). Both wrap orc's own models and training
functions (:mod:`orc.classifier`, :mod:`orc.regression`): the fitted orc model
is the attribute ``model_``, and everything it can do (``jax.vmap``,
:func:`orc.save`, a different series length, a different start state) stays
available on it.

scikit-learn is an optional dependency: ``pip install 'orc[sklearn]'``.
``import orc`` never imports it; ``import orc.sklearn`` does.

``ESNClassifier`` takes, like aeon's classifiers, ``X`` of shape
``(n_series, n_timepoints)`` (one channel) or ``(n_series, n_channels,
n_timepoints)`` (``channels_last=True``: ``(n_series, n_timepoints,
n_channels)``, orc's layout). ``ESNRegressor``'s ``X`` is ``(n_samples,
n_features)`` with rows that are consecutive time steps: keep them in order
and split with contiguous blocks
(:class:`sklearn.model_selection.TimeSeriesSplit`), never shuffle. There is
no forecaster estimator: scikit-learn's ``fit(X, y)``/``predict(X)`` has no
place for a closed-loop forecast (:mod:`orc.forecaster` has); one-step-ahead
prediction is ``ESNRegressor().fit(U[:-1], U[1:])``.

``dtype=None`` (the default) is float64 when JAX's x64 mode is on and
float32 when it is off; inputs are cast to it. Asking for float64 with x64
off gives float32 with a warning, as orc's models do.
"""

from __future__ import annotations

try:
    import sklearn
except ImportError as err:  # scikit-learn is the optional extra "sklearn"
    raise ImportError(
        "orc.sklearn needs scikit-learn, an optional dependency of orc: "
        "pip install 'orc[sklearn]'"
    ) from err


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


if _version(sklearn.__version__) < (1, 6):
    raise ImportError(
        f"orc.sklearn needs scikit-learn >= 1.6 (its estimator tags), found "
        f"{sklearn.__version__}: pip install 'orc[sklearn]'"
    )

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.base import (  # noqa: E402
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.metrics import r2_score  # noqa: E402
from sklearn.utils.multiclass import check_classification_targets  # noqa: E402
from sklearn.utils.validation import check_is_fitted, validate_data  # noqa: E402

from . import classifier as _classifier  # noqa: E402
from . import regression as _regression  # noqa: E402
from ._defaults import ESN, ESTIMATOR_CLASSIFIER, REGRESSOR, arguments  # noqa: E402
from ._strategy import compiled  # noqa: E402
from ._validation import check_dtype, default_float_dtype  # noqa: E402

__all__ = ["ESNClassifier", "ESNRegressor", "ESNTransformer"]

DEFAULT_BETAS = tuple(float(b) for b in np.logspace(-3, 3, 10))
"""``ESNClassifier``'s ridge candidates when ``beta`` is ``None``."""


def _model_dtype(dtype, owner: str) -> np.dtype:
    """The float dtype of the model to build: ``dtype``, or JAX's default
    float (float64 with x64 on, else float32) for ``None``."""
    if dtype is None:
        return np.dtype(default_float_dtype())
    return np.dtype(check_dtype(dtype, owner))


def _refuse_scalar(X, name: str, expected: str) -> None:
    """A scalar ``X`` is refused before scikit-learn's validation (which, for
    the ranks these estimators accept, would fail on it with a TypeError)."""
    if np.isscalar(X) or getattr(X, "ndim", None) == 0:
        raise ValueError(f"{name}: X must be {expected}, got a scalar {X!r}")


def _rank_error(name: str, X: np.ndarray, expected: str, hint: str) -> ValueError:
    return ValueError(
        f"{name}: X must be {expected}, got {X.ndim}-D X of shape {X.shape}. "
        f"Reshape your data: {hint}"
    )


def _n_features_error(name: str, n_features: int, expected: int) -> str:
    """scikit-learn's wording for an input of the wrong width (its estimator
    checks look for it)."""
    return (
        f"X has {n_features} features, but {name} is expecting {expected} "
        "features as input"
    )


@compiled
def _probabilities(model, seqs, spinup):
    """Class probabilities ``(n_series, n_classes)`` of ``model.classify``."""
    return jax.vmap(lambda s: model.classify(s, None, spinup))(seqs)


class _ESNParams:
    """What the two estimators share, a mixin of scikit-learn's
    ``BaseEstimator``: hyperparameters kept as given, and those of the orc
    model passed to it as they are."""

    #: The reservoir's hyperparameters, the orc model's arguments of the same
    #: name in both estimators.
    _RESERVOIR = (
        "res_dim",
        "leak_rate",
        "bias",
        "embedding_scaling",
        "Wr_density",
        "Wr_spectral_radius",
        "seed",
        "quadratic",
        "use_sparse_eigs",
    )
    #: The hyperparameters that are the orc model's arguments of the same name.
    _MODEL_PARAMS: tuple[str, ...] = ()

    def _keep(self, args: dict) -> None:
        """Keep each argument of ``__init__`` (``args``, its ``locals()``:
        :func:`orc._defaults.arguments`) as the attribute of its name:
        scikit-learn's convention, ``__init__`` does nothing else
        (``get_params`` reads them back)."""
        for name, value in arguments(args).items():
            setattr(self, name, value)

    def _model_args(self) -> dict:
        """The hyperparameters :attr:`_MODEL_PARAMS` as the orc model's arguments."""
        return {name: getattr(self, name) for name in self._MODEL_PARAMS}


class ESNClassifier(ClassifierMixin, _ESNParams, BaseEstimator):
    """Echo state network classifier of series, a scikit-learn estimator.

    Each series drives a reservoir,
    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in u_t + b)`` from the zero
    state; a representation of the run (``state_repr``: the final state,
    the mean state after ``spinup`` steps, statistics, the reservoir model
    space, the mean state with the proportions of steps above each node's
    training quartiles, bidirectional forms) is mapped by a ridge readout to
    one score per class, and the class probabilities are their softmax.
    This is :class:`orc.classifier.ESNClassifier` trained by
    :func:`orc.classifier.train_RCClassifier`; the hyperparameters have
    their names.

    The defaults are not all the orc model's (ORC 0.4's, which it keeps):
    they are the configuration measured strongest on seven UCR/UEA sets
    (``benchmarks/science/CLASSIFICATION.md``, ``orc.sklearn`` column),
    ``state_repr="bi_ppv"``, ``input_differences=True``, ``input_lags=(4,
    16)``, ``Wr_density=0.1``, ``Wr_spectral_radius=0.9``,
    ``leak_rate=0.1``, ``embedding_scaling=0.4``, ``spinup=None``,
    ``beta=None``: a mean test accuracy of 0.92 untuned, against 0.52 with
    ORC 0.4's defaults, for z-normalised series (each channel to mean 0
    and standard deviation 1). Choosing ``leak_rate`` in {0.1, 0.6} and
    ``embedding_scaling`` in {0.1, 0.4, 1.6} by cross-validation (a grid
    search) gave 0.94.

    Parameters
    ----------
    res_dim : int
        Reservoir nodes.
    leak_rate, bias : float
    embedding_scaling : float
        Scale of the input weights ``W_in``; the default is for inputs of
        order one.
    Wr_density, Wr_spectral_radius : float
    dtype : dtype or None, default None
        ``None``: float64 when JAX's x64 mode is on, else float32 (inputs
        are cast to it).
    seed : int, default 0
        Seed of the reservoir and input weights.
    quadratic : bool, default False
        Square the odd-indexed nodes in the readout.
    use_sparse_eigs : bool, default True
        Estimate the spectral radius with Arnoldi iterations.
    state_repr : {"final", "mean", "stats", "model_space", "ppv", "bi_final", \
"bi_mean", "bi_stats", "bi_model_space", "bi_ppv"}, default "bi_ppv"
        Series feature (:mod:`orc.classifier.base`): the final state, the
        mean state after ``spinup``, ``[final, mean, std]``, the weights of
        a ridge one-step predictor fitted to the series (model space),
        ``[mean, PPV]`` (the mean state and the fraction of steps above
        each node's training quartiles; ``4 * res_dim`` features), and the
        same concatenated with the time-reversed series' (``"bi_"``).
        ``"final"`` is ORC 0.4's default.
    spinup : int or None, default None
        Leading states left out of every representation but ``"final"``;
        must be less than the series length. ``None``: a tenth of the
        training series' length (``n_timepoints // 10``).
    beta : float, sequence of floats or None, default None
        Ridge penalty of the readout. Several candidates are chosen among by
        leave-one-out error on the training series (the chosen one is
        ``model_.selected_beta``); ``None``: the ten candidates
        ``numpy.logspace(-3, 3, 10)``.
    model_space_dim : int or None, default None
        Nodes the ``"model_space"`` predictor reads (``None``:
        ``min(res_dim, 75)``); ignored by the other representations.
    channels_last : bool, default False
        Layout of 3-D ``X``: ``False`` reads ``(n_series, n_channels,
        n_timepoints)`` (aeon's), ``True`` reads ``(n_series, n_timepoints,
        n_channels)`` (orc's). 2-D ``X`` is always ``(n_series,
        n_timepoints)``, one channel.
    input_differences : bool, default True
        Also feed the reservoir each channel's first differences, scaled by
        their training standard deviation.
    input_lags : tuple of int, default (4, 16)
        Also feed the reservoir each channel's differences over these
        numbers of steps (``u_t - u_{t-L}``), scaled by their training
        standard deviation (before the first differences, which then
        include theirs).

    Attributes
    ----------
    model_ : orc.classifier.ESNClassifier
        The trained orc model (its classes are ``0 .. n_classes - 1``, the
        positions in ``classes_``). ``model_.classify`` takes a series
        ``(seq_len, n_channels)`` of any length.
    classes_ : ndarray, shape ``(n_classes,)``
        The labels seen in ``fit``, sorted; any type ``numpy.unique`` sorts.
    n_channels_, n_timepoints_ : int
        Channels and length of the training series; ``predict`` asks for
        the same.
    n_features_in_ : int
        Size of ``X``'s second axis in ``fit``, as scikit-learn defines it:
        ``n_channels_`` for 3-D ``X`` in aeon's layout, else
        ``n_timepoints_``. ``predict`` checks the series' shape, so 2-D ``X``
        and 3-D ``X`` of one channel are interchangeable.

    Example
    -------
    >>> from orc.sklearn import ESNClassifier
    >>> clf = ESNClassifier()
    >>> clf.fit(X_train, y_train)          # X (n_series, n_timepoints), y labels
    >>> clf.predict(X_test), clf.score(X_test, y_test)
    """

    _MODEL_PARAMS = (
        *_ESNParams._RESERVOIR,
        "state_repr",
        "model_space_dim",
        "input_differences",
        "input_lags",
    )

    def __init__(
        self,
        res_dim=ESN.res_dim,
        leak_rate=ESTIMATOR_CLASSIFIER.leak_rate,
        bias=ESN.bias,
        embedding_scaling=ESTIMATOR_CLASSIFIER.embedding_scaling,
        Wr_density=ESTIMATOR_CLASSIFIER.Wr_density,
        Wr_spectral_radius=ESTIMATOR_CLASSIFIER.Wr_spectral_radius,
        dtype=None,
        seed=ESN.seed,
        quadratic=ESN.quadratic,
        use_sparse_eigs=ESN.use_sparse_eigs,
        state_repr=ESTIMATOR_CLASSIFIER.state_repr,
        spinup=ESTIMATOR_CLASSIFIER.spinup,
        beta=ESTIMATOR_CLASSIFIER.beta,
        model_space_dim=None,
        channels_last=False,
        input_differences=ESTIMATOR_CLASSIFIER.input_differences,
        input_lags=ESTIMATOR_CLASSIFIER.input_lags,
    ):
        self._keep(locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        return tags

    def _series(self, X) -> np.ndarray:
        """``X`` validated by :func:`validate_data`, as orc's
        ``(n_series, n_timepoints, n_channels)``."""
        name = type(self).__name__
        if X.ndim == 2:
            seqs = X[:, :, None]
        elif X.ndim == 3:
            seqs = X if self.channels_last else np.swapaxes(X, 1, 2)
        else:
            hint = (
                "X.reshape(1, -1) is one series of one channel"
                if X.ndim == 1
                else "one series per row of X, no further axes"
            )
            raise _rank_error(name, X, self._expected(), hint)
        if seqs.shape[1] == 0 or seqs.shape[2] == 0:
            raise ValueError(
                f"{name}: X must hold series of at least one time point and "
                f"one channel {self._layout()}, got shape {X.shape}"
            )
        return seqs

    def _expected(self) -> str:
        return f"2-D (n_series, n_timepoints) or 3-D {self._layout()}"

    def _layout(self) -> str:
        if self.channels_last:
            return "(n_series, n_timepoints, n_channels) with channels_last=True"
        return "(n_series, n_channels, n_timepoints)"

    def fit(self, X, y):
        """Build the reservoir and fit the readout on labelled series.

        Parameters
        ----------
        X : array-like, shape ``(n_series, n_timepoints)`` or 3-D (see
            ``channels_last``)
        y : array-like, shape ``(n_series,)``
            Labels of any type, at least two distinct.

        Returns
        -------
        self
        """
        name = type(self).__name__
        dtype = _model_dtype(self.dtype, name)
        _refuse_scalar(X, name, self._expected())
        # ranks 2 and 3 are checked by _series, with this estimator's message
        X, y = validate_data(self, X, y, allow_nd=True, ensure_2d=False, dtype=dtype)
        seqs = self._series(X)
        check_classification_targets(y)
        classes, labels = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(
                f"{name}: y must hold at least 2 classes, got 1 class ({classes[0]!r})"
            )
        model = _classifier.ESNClassifier(
            data_dim=seqs.shape[2],
            n_classes=int(classes.size),
            dtype=dtype,
            **self._model_args(),
        )
        spinup = seqs.shape[1] // 10 if self.spinup is None else self.spinup
        beta = DEFAULT_BETAS if self.beta is None else self.beta
        self.model_ = _classifier.train_RCClassifier(
            model,
            jnp.asarray(seqs),
            jnp.asarray(labels.reshape(-1), jnp.int32),
            spinup=spinup,
            beta=beta,
        )
        self.classes_ = classes
        self.n_timepoints_, self.n_channels_ = seqs.shape[1], seqs.shape[2]
        self.n_features_in_ = X.shape[1]
        # the spinup of the features the readout was fitted on, as a Python
        # int (static in the compiled program, also when set_params or a grid
        # search gave a numpy integer)
        self._spinup = int(spinup)
        return self

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, shape ``(n_series, n_classes)``, columns in
        the order of ``classes_``: ``model_.classify`` of each series."""
        check_is_fitted(self)
        name = type(self).__name__
        _refuse_scalar(X, name, self._expected())
        X = validate_data(
            self,
            X,
            allow_nd=True,
            ensure_2d=False,
            dtype=np.dtype(self.model_.dtype),
            reset=False,
        )
        seqs = self._series(X)
        if seqs.shape[1:] != (self.n_timepoints_, self.n_channels_):
            # 2-D X and 3-D X of one channel hold the same series: the
            # series' shape is checked, not X.shape[1] (n_features_in_) alone
            width = ""
            if X.shape[1] != self.n_features_in_:
                width = _n_features_error(name, X.shape[1], self.n_features_in_)
                width += "; "
            raise ValueError(
                f"{name}: {width}X holds series of {seqs.shape[1]} time points and "
                f"{seqs.shape[2]} channels, but the classifier was fitted on "
                f"{self.n_timepoints_} time points and {self.n_channels_} "
                f"channels (X is {self._expected()}). Series of other lengths: "
                "classify them with model_.classify"
            )
        probs = _probabilities(self.model_, jnp.asarray(seqs), self._spinup)
        return np.array(probs)  # a writeable copy

    def predict(self, X) -> np.ndarray:
        """Predicted labels, shape ``(n_series,)``: the most probable class."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class _TimeRows:
    """What the estimators on time-ordered rows share (a mixin of
    scikit-learn's ``BaseEstimator``): their validation of ``X``."""

    def _validate(self, X, y=None, *, dtype, fitting: bool, target: bool = True):
        """``X`` (and ``y`` when ``fitting`` an estimator with a ``target``)
        validated by :func:`validate_data`; ``X`` must be 2-D, with this
        estimator's message."""
        name = type(self).__name__
        expected = "2-D (n_samples, n_features), its rows consecutive time steps"
        _refuse_scalar(X, name, expected)
        params = dict(allow_nd=True, ensure_2d=False, dtype=dtype)
        if not fitting or not target:
            X = validate_data(self, X, reset=fitting, **params)
        else:
            X, y = validate_data(
                self, X, y, multi_output=True, y_numeric=True, **params
            )
        if X.ndim != 2:
            hint = (
                "X.reshape(-1, 1) is one feature"
                if X.ndim == 1
                else "one time step per row of X, one feature per column"
            )
            raise _rank_error(name, X, expected, hint)
        return (X, y) if fitting and target else X

    def _rows(self, X) -> np.ndarray:
        """``X`` to run the fitted model on: validated, in the model's dtype,
        as wide as the ``X`` of ``fit``."""
        check_is_fitted(self)
        name = type(self).__name__
        X = self._validate(X, dtype=np.dtype(self.model_.dtype), fitting=False)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{name}: {_n_features_error(name, X.shape[1], self.n_features_in_)}"
                " (columns of X in fit)"
            )
        return X


class ESNRegressor(RegressorMixin, _TimeRows, _ESNParams, BaseEstimator):
    """Echo state network regressor of time-ordered data, a scikit-learn
    estimator.

    The rows of ``X`` are consecutive inputs ``u_0, u_1, ...``; they drive a
    reservoir from the zero state,
    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in u_t + b)``, and the output
    for row ``t`` is read from the state reached after ``u_t``:
    ``y_t = W_out φ(r_{t+1}) [+ W_u u_t] [+ b_out]``, fitted by one ridge
    regression (teacher forcing: the targets never drive the reservoir).
    This is :class:`orc.regression.ESNRegressor` trained by
    :func:`orc.regression.train_RCRegressor`; the hyperparameters have their
    names and defaults.

    ``predict(X)`` runs the reservoir over ``X`` from the zero state, so its
    first outputs carry the reservoir's transient, as the first ``spinup``
    rows of the training data do; ``score`` leaves these ``spinup`` rows out,
    as ``fit`` does. Rows are not independent samples: keep them in time
    order and split with contiguous blocks (``TimeSeriesSplit``); ``predict``
    on a subset of rows is not the subset of ``predict`` on all of them.

    One-step-ahead prediction of a series ``U`` is this regression onto the
    next sample: ``ESNRegressor().fit(U[:-1], U[1:])``.

    Parameters
    ----------
    res_dim : int
        Nodes per reservoir layer.
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius : float
    n_layers : int, default 1
        More than 1 stacks reservoirs (:class:`orc.drivers.DeepESNDriver`).
    coupling_scaling : float
        Inter-layer weight scale (``n_layers > 1``).
    input_passthrough : bool, default False
        Add a fitted linear term ``W_u u_t`` of the current input.
    readout_bias : bool, default True
        Add a fitted (unpenalised) constant ``b_out``.
    quadratic : bool, default False
        Square the odd-indexed nodes in the readout.
    dtype : dtype or None, default None
        ``None``: float64 when JAX's x64 mode is on, else float32.
    seed : int, default 0
    use_sparse_eigs : bool, default True
    spinup : int, default 0
        Leading rows of the training data left out of the fit (the
        reservoir's warm-up), and of the data ``score`` is computed on; less
        than ``n_samples``.
    beta : float
        Ridge penalty on ``W_out`` and ``W_u``.
    input_noise, state_noise : float, default 0.0
        Noise regularisation during training (Gaussian noise on the inputs
        driving the reservoir, or on the regressed states).
    noise_seed : int, default 0

    Attributes
    ----------
    model_ : orc.regression.ESNRegressor
        The trained orc model; ``model_.predict(X, res_state)`` continues
        from any state.
    n_features_in_ : int
        Input features (columns of ``X``).
    n_outputs_ : int
        Targets (columns of ``y``; 1 for 1-D ``y``, whose predictions are 1-D).

    Example
    -------
    >>> from orc.sklearn import ESNRegressor
    >>> reg = ESNRegressor(res_dim=300, spinup=100).fit(U[:4000, :2], U[:4000, 2])
    >>> reg.score(U[4000:, :2], U[4000:, 2])   # R² of z inferred from (x, y)
    """

    _MODEL_PARAMS = (
        *_ESNParams._RESERVOIR,
        "n_layers",
        "coupling_scaling",
        "input_passthrough",
        "readout_bias",
    )

    def __init__(
        self,
        res_dim=ESN.res_dim,
        leak_rate=REGRESSOR.leak_rate,
        bias=REGRESSOR.bias,
        embedding_scaling=REGRESSOR.embedding_scaling,
        Wr_density=ESN.Wr_density,
        Wr_spectral_radius=REGRESSOR.Wr_spectral_radius,
        n_layers=REGRESSOR.n_layers,
        coupling_scaling=ESN.coupling_scaling,
        input_passthrough=REGRESSOR.input_passthrough,
        readout_bias=REGRESSOR.readout_bias,
        quadratic=ESN.quadratic,
        dtype=None,
        seed=ESN.seed,
        use_sparse_eigs=ESN.use_sparse_eigs,
        spinup=0,
        beta=REGRESSOR.beta,
        input_noise=0.0,
        state_noise=0.0,
        noise_seed=0,
    ):
        self._keep(locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y):
        """Build the reservoir, drive it with ``X`` and fit the readout onto ``y``.

        Parameters
        ----------
        X : array-like, shape ``(n_samples, n_features)``, rows in time order
        y : array-like, shape ``(n_samples,)`` or ``(n_samples, n_targets)``

        Returns
        -------
        self
        """
        name = type(self).__name__
        dtype = _model_dtype(self.dtype, name)
        X, y = self._validate(X, y, dtype=dtype, fitting=True)
        self.n_features_in_ = X.shape[1]
        targets = y.reshape(y.shape[0], -1).astype(dtype)
        model = _regression.ESNRegressor(
            in_dim=X.shape[1],
            out_dim=targets.shape[1],
            dtype=dtype,
            **self._model_args(),
        )
        self.model_, _ = _regression.train_RCRegressor(
            model,
            jnp.asarray(X),
            jnp.asarray(targets),
            spinup=self.spinup,
            beta=self.beta,
            progress=False,
            input_noise=self.input_noise,
            state_noise=self.state_noise,
            noise_seed=self.noise_seed,
        )
        self.n_outputs_ = targets.shape[1]
        self._one_target = y.ndim == 1
        self._spinup = int(self.spinup)  # the warm-up that score leaves out
        return self

    def predict(self, X) -> np.ndarray:
        """Outputs for the rows of ``X`` (time-ordered), the reservoir started
        from the zero state: shape ``(n_samples,)`` if ``y`` was 1-D, else
        ``(n_samples, n_targets)``."""
        X = self._rows(X)
        out = np.array(self.model_.predict(jnp.asarray(X)))  # a writeable copy
        return out[:, 0] if self._one_target else out

    def score(self, X, y, sample_weight=None) -> float:
        """Coefficient of determination R² of ``predict(X)`` against ``y``,
        leaving out the first ``spinup`` rows (the reservoir's warm-up from the
        zero state, which ``fit`` leaves out too).

        Parameters
        ----------
        X : array-like, shape ``(n_samples, n_features)``, rows in time order
        y : array-like, shape ``(n_samples,)`` or ``(n_samples, n_targets)``
        sample_weight : array-like, shape ``(n_samples,)``, optional

        Returns
        -------
        float
            :func:`sklearn.metrics.r2_score` of rows ``spinup:``, targets
            averaged uniformly. Scorers other than ``score`` (such as
            ``scoring="r2"`` in ``cross_val_score``) see every row.
        """
        pred = self.predict(X)
        skip = self._spinup
        if skip >= pred.shape[0]:
            raise ValueError(
                f"{type(self).__name__}: X must have more rows than spinup "
                f"({skip}), the warm-up rows score leaves out; got "
                f"{pred.shape[0]} rows"
            )
        y = np.asarray(y)
        if y.shape[:1] != pred.shape[:1]:
            raise ValueError(
                f"{type(self).__name__}: y must have one row per row of X "
                f"({pred.shape[0]}), got shape {y.shape}"
            )
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight)[skip:]
        return float(r2_score(y[skip:], pred[skip:], sample_weight=sample_weight))


class ESNTransformer(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, _TimeRows, _ESNParams,
    BaseEstimator,
):  # fmt: skip
    """Echo state network states as features, a scikit-learn transformer:
    any scikit-learn model on a reservoir (reservoirpy's ``ScikitLearnNode``).

    The rows of ``X`` are consecutive inputs; ``transform(X)`` drives the
    reservoir from the zero state and returns the state reached after each
    row, ``(n_samples, res_dim * n_layers)``. Nothing is fitted: ``fit``
    builds the reservoir for ``X``'s width. Put any estimator after it::

        make_pipeline(ESNTransformer(res_dim=300), LogisticRegression())

    classifies each time step; ``Ridge()`` in its place is
    :class:`ESNRegressor` (which fits in one pass and leaves out a warm-up).
    The first rows carry the reservoir's transient from the zero state; keep
    rows in time order (``TimeSeriesSplit``), as for :class:`ESNRegressor`,
    whose reservoir hyperparameters these are, with its names and defaults.

    Attributes
    ----------
    model_ : orc.regression.ESNRegressor
        The orc model whose reservoir runs (its readout is not used);
        ``model_.force(X, res_state)`` continues from any state.
    n_features_in_ : int

    Example
    -------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> clf = make_pipeline(ESNTransformer(res_dim=200), LogisticRegression())
    >>> clf.fit(U_train, labels_train).score(U_test, labels_test)
    """

    _MODEL_PARAMS = (
        "res_dim", "leak_rate", "bias", "embedding_scaling", "Wr_density",
        "Wr_spectral_radius", "n_layers", "coupling_scaling", "seed",
        "use_sparse_eigs",
    )  # fmt: skip

    def __init__(
        self,
        res_dim=ESN.res_dim,
        leak_rate=REGRESSOR.leak_rate,
        bias=REGRESSOR.bias,
        embedding_scaling=REGRESSOR.embedding_scaling,
        Wr_density=ESN.Wr_density,
        Wr_spectral_radius=REGRESSOR.Wr_spectral_radius,
        n_layers=REGRESSOR.n_layers,
        coupling_scaling=ESN.coupling_scaling,
        dtype=None,
        seed=ESN.seed,
        use_sparse_eigs=ESN.use_sparse_eigs,
    ):
        self._keep(locals())

    def fit(self, X, y=None):
        """Build the reservoir for ``X``'s width (``y`` is ignored)."""
        dtype = _model_dtype(self.dtype, type(self).__name__)
        X = self._validate(X, dtype=dtype, fitting=True, target=False)
        self.n_features_in_ = X.shape[1]
        self.model_ = _regression.ESNRegressor(
            in_dim=X.shape[1], out_dim=1, dtype=dtype, **self._model_args()
        )
        self._n_features_out = int(np.prod(self.model_.driver.state_shape))
        return self

    def transform(self, X) -> np.ndarray:
        """The reservoir's state after each row of ``X`` (time-ordered), from
        the zero state: ``(n_samples, res_dim * n_layers)``."""
        X = self._rows(X)
        model = self.model_
        states = model.force(jnp.asarray(X), model.driver.default_state())
        return np.array(states).reshape(X.shape[0], -1)  # a writeable copy
