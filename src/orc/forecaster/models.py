"""Echo state network forecasters: discrete, continuous and ensemble."""

from __future__ import annotations

from typing import TYPE_CHECKING

import equinox as eqx
import jax.numpy as jnp

from .._compose import check_esn_sizes
from .._defaults import ESN, arguments
from .._esn import esn_components
from .._validation import check_int
from .base import CRCForecasterBase, RCForecasterBase

if TYPE_CHECKING:  # annotations only: diffrax is imported by a CESN's use
    import diffrax

__all__ = [
    "ESNForecaster",
    "CESNForecaster",
    "EnsembleESNForecaster",
    "DeepESNForecaster",
]


def check_driver_mode(model, mode: str) -> None:
    """An ESN forecaster's time mode and its driver's agree: a discrete model
    (stepped sample by sample) holds drivers in ``"discrete"`` mode, a
    continuous one (integrated by diffrax) in ``"continuous"`` mode; for a
    stacked driver, every layer. Part of the models' ``__check_init__``, so
    the same check decides for a built model and for one :func:`orc.load`
    rebuilds."""
    driver = model.driver
    for i, layer in enumerate(getattr(driver, "layers", (driver,))):
        have = getattr(layer, "mode", mode)
        if have != mode:
            where = f"driver.layers[{i}].mode" if layer is not driver else "driver.mode"
            raise ValueError(
                f"{type(model).__name__}: {where} must be {mode!r} (the model is "
                f"{mode} in time), got {have!r}"
            )


#: the integration settings of :class:`CRCForecasterBase`, which
#: :class:`CESNForecaster` takes besides the ESN's hyperparameters
_INTEGRATION = ("solver", "stepsize_controller", "adjoint", "max_steps")


def _build(model, given: dict, *, layout: str, mode=ESN.mode):
    """Fill ``model``, an ESN forecaster, from its constructor's arguments
    ``given`` (:func:`orc._defaults.arguments`): the components of
    ``layout`` from the hyperparameters (:func:`orc._esn.esn_components`),
    then the base class's fields (chunks, integration settings)."""
    name = type(model).__name__
    hyper = dict(given)
    data_dim = check_int("data_dim", hyper.pop("data_dim"), name, minimum=1)
    base = {key: hyper.pop(key) for key in _INTEGRATION if key in hyper}
    if "chunks" in hyper:
        base["chunks"] = hyper["chunks"]
    embedding, driver, readout, dtype = esn_components(
        name, layout=layout, in_dim=data_dim, out_dim=data_dim, mode=mode, **hyper
    )
    base_class = CRCForecasterBase if mode == "continuous" else RCForecasterBase
    base_class.__init__(
        model, driver, readout, embedding, dtype=dtype, seed=hyper["seed"], **base
    )
    model.data_dim = data_dim


class _ESNForecasterCore(RCForecasterBase):
    """What the discrete ESN forecasters (:class:`ESNForecaster`,
    :class:`EnsembleESNForecaster`, :class:`DeepESNForecaster`) share: the
    data size and the checks of a built or loaded model. Abstract: the final
    classes write ORC's signatures, choose the layout and each declare the
    fused native training (``capabilities``, read from a class's own body so
    that a subclass overriding the forcing does not inherit it)."""

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)
        check_driver_mode(self, "discrete")


class ESNForecaster(_ESNForecasterCore):
    """Echo state network forecaster (ORC 0.4 defaults).

    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in u_t + b)``, ``y = W_out r``
    (or ``W_out φ(r)`` with odd nodes squared when ``quadratic``). With
    ``chunks > 1`` the input is split into ``chunks`` local patches (with
    ``locality`` neighbours each side), one reservoir per patch (Pathak et al.
    2018): states are ``(chunks, res_dim)``.

    Parameters
    ----------
    data_dim : int
    res_dim : int
        Nodes per reservoir.
    leak_rate : float or array ``(res_dim,)``
        Leak rate in (0, 1], or one per node (a multi-timescale reservoir;
        see :class:`orc.drivers.ParallelESNDriver`'s ``leak``).
    bias : float
    embedding_scaling : float
        ``W_in ~ U(-s, s)``.
    Wr_density : float
    Wr_spectral_radius : float
    dtype : dtype, default float64
    seed : int or PRNG key, default 0
    chunks : int, default 1
    locality : int, default 0
    quadratic : bool, default False
    periodic : bool, default True
    use_sparse_eigs : bool, default True
    construction : {"orc", "orc04", "jax"}, default "orc"
        ``"orc04"`` builds exactly ORC 0.4's ``wr`` and ``win`` for ``seed``
        (slower to build), so ORC 0.4 results reproduce number for number;
        ``"jax"`` draws them with ``jax.random`` from ``seed`` (an int or a
        key, also a traced one), so a population builds under one
        ``eqx.filter_vmap`` (see :class:`orc.drivers.ParallelESNDriver`).
        Also accepted by the other ESN models (not by ``DeepESNForecaster``).

    Example
    -------
    >>> U, t = orc.data.lorenz63(tN=30, dt=0.01)
    >>> esn = ESNForecaster(data_dim=3, res_dim=500)
    >>> esn, R = train_RCForecaster(esn, U[:2400])
    >>> U_pred = esn.forecast(600, R[-1])        # (600, 3)
    """

    capabilities = frozenset({"pipeline_forcing"})

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        leak_rate: float = ESN.leak_rate,
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        chunks: int = ESN.chunks,
        locality: int = ESN.locality,
        quadratic: bool = ESN.quadratic,
        periodic: bool = ESN.periodic,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        _build(self, arguments(locals()), layout="parallel")


#: ORC 0.4's fixed time constant, which ``time_const="auto"`` keeps wherever
#: it suits the sampling.
ORC_TIME_CONST = ESN.time_const
#: ``time_const="auto"`` (the default) where ORC's 50 is too fast for samples
#: spaced ``dt`` (``50 dt > TIME_CONST_DT_WARN``): ``time_const =
#: TIME_CONST_PER_DT / dt``, i.e. the reservoir relaxes by about half of the
#: way to its drive over one sample, as the discrete ESN with ORC's leak rate
#: 0.6 does. (0.5 / dt everywhere would be 10 on Rossler at dt = 0.05, where
#: the forecast then depends on last-bit differences: NRMSE 0.55 or 8.0
#: against ORC's 50: 0.04-0.2.)
TIME_CONST_PER_DT = 0.5
#: Training warns (:class:`TimeConstantWarning`) when ``time_const * dt``
#: exceeds this: measured with ORC's 50, Lorenz63 at dt 0.025 (1.25) and
#: Rossler at dt 0.05 (2.5) forecast well, KS at dt 0.25 (12.5) and
#: Mackey-Glass at dt 1 (50) leave the attractor.
TIME_CONST_DT_WARN = 5.0


class TimeConstantWarning(UserWarning):
    """A continuous-time reservoir's ``time_const`` is large for the spacing
    of its training samples (``time_const * dt > 5``): it relaxes many times
    within one sample, nearly memoryless and stiff. ``time_const="auto"``
    (or about ``0.5 / dt``) fits it to the sampling."""


class CESNForecaster(CRCForecasterBase):
    """Continuous-time echo state network forecaster.

    ``dr/dt = γ (tanh(W r + W_in u(t) + b) - r)`` with ``γ = time_const``,
    integrated by diffrax. Train with ``train_CESNForecaster(model, U, t)``;
    forecast with ``model.forecast(ts, r)`` at the times ``ts``.

    Parameters as :class:`ESNForecaster` with ``time_const`` in place of
    ``leak_rate``, plus ``solver``, ``stepsize_controller``, ``adjoint`` and
    ``max_steps`` (see :class:`CRCForecasterBase`).

    time_const : float or "auto", default "auto" (ORC 0.4: 50.0)
        ``γ``. ``"auto"`` is set by training from the spacing ``dt`` of the
        training times: ORC 0.4's 50 wherever ``50 dt <= 5`` (samples up to
        0.1 apart: ORC's model bit for bit), else ``γ = 0.5 / dt``
        (``TIME_CONST_PER_DT``; rounded to 9 significant digits in float64
        and 6 in float32); it is 50 until then. A number fixes ``γ``. ORC's
        constant on coarse samples makes the reservoir relax many times
        within a sample, nearly memoryless and stiff (Mackey-Glass at ``dt =
        1``: ``γ dt = 50``, and the forecast leaves the attractor; KS at ``dt
        = 0.25``: 12.5), and training warns (:class:`TimeConstantWarning`)
        from ``γ dt > 5`` on. The default differs from ORC 0.4's because that
        constant fails two of the standard benchmarks
        (``tests/test_defaults_benchmarks.py``) while ``"auto"`` equals it
        wherever it works.
    """

    data_dim: int = eqx.field(static=True)
    # the factor of "auto" (training sets time_const = factor / dt); None: fixed
    time_const_per_dt: float | None = eqx.field(
        default=None, static=True, metadata={"added_field": True}
    )

    def __check_init__(self):
        check_esn_sizes(self)
        check_driver_mode(self, "continuous")

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        time_const: float | str = "auto",
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        chunks: int = ESN.chunks,
        locality: int = ESN.locality,
        quadratic: bool = ESN.quadratic,
        periodic: bool = ESN.periodic,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        solver: diffrax.AbstractSolver | None = None,
        stepsize_controller: diffrax.AbstractStepSizeController | None = None,
        adjoint: diffrax.AbstractAdjoint | None = None,
        max_steps: int | None = None,
        construction: str = ESN.construction,
    ) -> None:
        given = arguments(locals())
        per_dt = None
        if isinstance(time_const, str):
            if time_const != "auto":
                raise ValueError(
                    "CESNForecaster: time_const must be a positive float or 'auto', "
                    f"got {time_const!r}"
                )
            per_dt = TIME_CONST_PER_DT
            given["time_const"] = ORC_TIME_CONST  # until training
        _build(self, given, layout="parallel", mode="continuous")
        self.time_const_per_dt = per_dt


class EnsembleESNForecaster(_ESNForecasterCore):
    """Ensemble of ``chunks`` ESNs that all see the full input; outputs averaged.

    Each member has its own ``W_in``, ``W`` and ``W_out`` (each fitted to the
    full target); the forecast feeds the ensemble mean back to every member.
    States are ``(chunks, res_dim)``. Parameters as :class:`ESNForecaster`
    (``chunks`` = ensemble size, default 1; no locality).
    """

    capabilities = frozenset({"pipeline_forcing"})

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        leak_rate: float = ESN.leak_rate,
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        chunks: int = ESN.chunks,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        _build(self, arguments(locals()), layout="ensemble")


class DeepESNForecaster(_ESNForecasterCore):
    """Deep echo state network forecaster: ``n_layers`` reservoirs in series.

    The input drives layer 0; layer ``l`` is driven by the new state of layer
    ``l - 1`` through dense weights ``~ U(-coupling_scaling, coupling_scaling)``
    (:class:`orc.drivers.DeepESNDriver`). The readout reads the concatenation
    of all layers, so states are ``(n_layers * res_dim,)`` (single reservoir
    stack, no chunk axis). Train with :func:`train_RCForecaster`. Other
    parameters and defaults as :class:`ESNForecaster`; every layer shares them.

    Parameters
    ----------
    data_dim : int
    res_dim : int
        Nodes per layer.
    n_layers : int
    coupling_scaling : float
        Scale of the inter-layer weights. A layer of ``res_dim`` nodes in
        ``(-1, 1)`` drives the next one with a sum of ``res_dim`` terms: at
        0.5 the second layer saturated and the defaults forecast Rossler
        worse than persistence for 2 of 5 seeds (2 x 250 nodes); at 0.2 all
        five seeds beat it (median NRMSE over one Lyapunov time 0.03) and
        Mackey-Glass improves (0.84 -> 0.79), Lorenz63 unchanged.
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius, dtype, seed, quadratic, use_sparse_eigs
        As for :class:`ESNForecaster`.

    Example
    -------
    >>> esn = DeepESNForecaster(data_dim=3, res_dim=200, n_layers=3)
    >>> esn, R = train_RCForecaster(esn, U_train, spinup=100)   # R: (T, 600)
    """

    capabilities = frozenset({"pipeline_forcing"})

    n_layers: int = eqx.field(static=True)

    def __check_init__(self):
        if self.n_layers != len(self.driver.layers):
            raise ValueError(
                f"DeepESNForecaster: n_layers ({self.n_layers!r}) must equal the "
                f"driver's {len(self.driver.layers)} layers"
            )

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        n_layers: int = ESN.n_layers,
        coupling_scaling: float = ESN.coupling_scaling,
        leak_rate: float = ESN.leak_rate,
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        quadratic: bool = ESN.quadratic,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
    ) -> None:
        _build(self, arguments(locals()), layout="single")
        self.n_layers = n_layers
