"""Echo state network forecasters: discrete, continuous and ensemble."""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax.numpy as jnp

from .._compose import check_esn_sizes
from .._esn import esn_components, esn_hyperparameters
from .._validation import check_int
from .base import CRCForecasterBase, RCForecasterBase

__all__ = [
    "ESNForecaster",
    "CESNForecaster",
    "EnsembleESNForecaster",
    "DeepESNForecaster",
]


class ESNForecaster(RCForecasterBase):
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
    leak_rate : float, default 0.6
    bias : float, default 1.6
    embedding_scaling : float, default 0.08
        ``W_in ~ U(-s, s)``.
    Wr_density : float, default 0.02
    Wr_spectral_radius : float, default 0.8
    dtype : dtype, default float64
    seed : int or PRNG key, default 0
    chunks : int, default 1
    locality : int, default 0
    quadratic : bool, default False
    periodic : bool, default True
    use_sparse_eigs : bool, default True
    construction : {"orc", "orc04"}, default "orc"
        ``"orc04"`` builds exactly ORC 0.4's ``wr`` and ``win`` for ``seed``
        (slower to build), so ORC 0.4 results reproduce number for number;
        also accepted by the other ESN models (not by ``DeepESNForecaster``).

    Example
    -------
    >>> U, t = orc.data.lorenz63(tN=30, dt=0.01)
    >>> esn = ESNForecaster(data_dim=3, res_dim=500)
    >>> esn, R = train_RCForecaster(esn, U[:2400])
    >>> U_pred = esn.forecast(600, R[-1])        # (600, 3)
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)

    capabilities = frozenset({"pipeline_forcing"})

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        leak_rate: float = 0.6,
        bias: float = 1.6,
        embedding_scaling: float = 0.08,
        Wr_density: float = 0.02,
        Wr_spectral_radius: float = 0.8,
        dtype=jnp.float64,
        seed=0,
        chunks: int = 1,
        locality: int = 0,
        quadratic: bool = False,
        periodic: bool = True,
        use_sparse_eigs: bool = True,
        construction: str = "orc",
    ) -> None:
        data_dim = check_int("data_dim", data_dim, type(self).__name__, minimum=1)
        embedding, driver, readout, dtype = esn_components(
            type(self).__name__,
            layout="parallel",
            in_dim=data_dim,
            out_dim=data_dim,
            **esn_hyperparameters(locals()),
        )
        super().__init__(
            driver, readout, embedding, chunks=chunks, dtype=dtype, seed=seed
        )
        self.data_dim = data_dim


class CESNForecaster(CRCForecasterBase):
    """Continuous-time echo state network forecaster.

    ``dr/dt = γ (tanh(W r + W_in u(t) + b) - r)`` with ``γ = time_const``,
    integrated by diffrax. Train with ``train_CESNForecaster(model, U, t)``;
    forecast with ``model.forecast(ts, r)`` at the times ``ts``.

    Parameters as :class:`ESNForecaster` with ``time_const`` (default 50.0) in
    place of ``leak_rate``, plus ``solver``, ``stepsize_controller``,
    ``adjoint`` and ``max_steps`` (see :class:`CRCForecasterBase`).
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        time_const: float = 50.0,
        bias: float = 1.6,
        embedding_scaling: float = 0.08,
        Wr_density: float = 0.02,
        Wr_spectral_radius: float = 0.8,
        dtype=jnp.float64,
        seed=0,
        chunks: int = 1,
        locality: int = 0,
        quadratic: bool = False,
        periodic: bool = True,
        use_sparse_eigs: bool = True,
        solver: diffrax.AbstractSolver | None = None,
        stepsize_controller: diffrax.AbstractStepSizeController | None = None,
        adjoint: diffrax.AbstractAdjoint | None = None,
        max_steps: int | None = None,
        construction: str = "orc",
    ) -> None:
        data_dim = check_int("data_dim", data_dim, type(self).__name__, minimum=1)
        embedding, driver, readout, dtype = esn_components(
            type(self).__name__,
            layout="parallel",
            in_dim=data_dim,
            out_dim=data_dim,
            mode="continuous",
            **esn_hyperparameters(locals()),
        )
        super().__init__(
            driver,
            readout,
            embedding,
            chunks=chunks,
            dtype=dtype,
            seed=seed,
            solver=solver,
            stepsize_controller=stepsize_controller,
            adjoint=adjoint,
            max_steps=max_steps,
        )
        self.data_dim = data_dim


class EnsembleESNForecaster(RCForecasterBase):
    """Ensemble of ``chunks`` ESNs that all see the full input; outputs averaged.

    Each member has its own ``W_in``, ``W`` and ``W_out`` (each fitted to the
    full target); the forecast feeds the ensemble mean back to every member.
    States are ``(chunks, res_dim)``. Parameters as :class:`ESNForecaster`
    (``chunks`` = ensemble size, default 1; no locality).
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)

    capabilities = frozenset({"pipeline_forcing"})

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        leak_rate: float = 0.6,
        bias: float = 1.6,
        embedding_scaling: float = 0.08,
        Wr_density: float = 0.02,
        Wr_spectral_radius: float = 0.8,
        dtype=jnp.float64,
        seed=0,
        chunks: int = 1,
        use_sparse_eigs: bool = True,
        construction: str = "orc",
    ) -> None:
        data_dim = check_int("data_dim", data_dim, type(self).__name__, minimum=1)
        embedding, driver, readout, dtype = esn_components(
            type(self).__name__,
            layout="ensemble",
            in_dim=data_dim,
            out_dim=data_dim,
            **esn_hyperparameters(locals()),
        )
        super().__init__(
            driver, readout, embedding, chunks=chunks, dtype=dtype, seed=seed
        )
        self.data_dim = data_dim


class DeepESNForecaster(RCForecasterBase):
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
    n_layers : int, default 2
    coupling_scaling : float, default 0.5
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius, dtype, seed, quadratic, use_sparse_eigs
        As for :class:`ESNForecaster`.

    Example
    -------
    >>> esn = DeepESNForecaster(data_dim=3, res_dim=200, n_layers=3)
    >>> esn, R = train_RCForecaster(esn, U_train, spinup=100)   # R: (T, 600)
    """

    data_dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)
        if self.n_layers != len(self.driver.layers):
            raise ValueError(
                f"DeepESNForecaster: n_layers ({self.n_layers!r}) must equal the "
                f"driver's {len(self.driver.layers)} layers"
            )

    capabilities = frozenset({"pipeline_forcing"})

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        n_layers: int = 2,
        coupling_scaling: float = 0.5,
        leak_rate: float = 0.6,
        bias: float = 1.6,
        embedding_scaling: float = 0.08,
        Wr_density: float = 0.02,
        Wr_spectral_radius: float = 0.8,
        dtype=jnp.float64,
        seed=0,
        quadratic: bool = False,
        use_sparse_eigs: bool = True,
    ) -> None:
        data_dim = check_int("data_dim", data_dim, type(self).__name__, minimum=1)
        embedding, driver, readout, dtype = esn_components(
            type(self).__name__,
            layout="single",
            in_dim=data_dim,
            out_dim=data_dim,
            **esn_hyperparameters(locals()),
        )
        super().__init__(driver, readout, embedding, dtype=dtype, seed=seed)
        self.data_dim = data_dim
        self.n_layers = n_layers
