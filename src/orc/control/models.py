"""Echo state network controller."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .._compose import check_esn_sizes
from .._defaults import CONTROLLER, ESN, arguments
from .._esn import esn_components
from .._validation import check_int
from .base import RCControllerBase

__all__ = ["ESNController"]


class ESNController(RCControllerBase):
    """Echo state network surrogate for model-predictive control (ORC 0.4 defaults).

    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in [y_t, c_t] + b)``,
    ``ŷ_{t+1} = W_out r_{t+1}``.

    Parameters
    ----------
    data_dim : int
        System output dimension.
    control_dim : int
    res_dim : int
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius, dtype
        As for :class:`orc.forecaster.ESNForecaster`.
    alpha_1, alpha_2, alpha_3 : float
        Penalty weights (tracking, control magnitude, control increments).
    seed, quadratic, use_sparse_eigs, construction
        As for :class:`orc.forecaster.ESNForecaster`.

    Example
    -------
    >>> ctrl = ESNController(data_dim=2, control_dim=1, res_dim=500)
    >>> ctrl, R = train_RCController(ctrl, outputs[:-1], controls[1:])
    >>> c_opt = ctrl.compute_control(jnp.zeros((50, 1)), R[-1], reference)
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)

    capabilities = frozenset({"pipeline_forcing"})

    def __init__(
        self,
        data_dim: int,
        control_dim: int,
        res_dim: int,
        leak_rate: float = ESN.leak_rate,
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        alpha_1: float = CONTROLLER.alpha_1,
        alpha_2: float = CONTROLLER.alpha_2,
        alpha_3: float = CONTROLLER.alpha_3,
        seed: int = ESN.seed,
        quadratic: bool = ESN.quadratic,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        hyper = arguments(
            locals(), "data_dim", "control_dim", "alpha_1", "alpha_2", "alpha_3"
        )
        name = type(self).__name__
        data_dim = check_int("data_dim", data_dim, name, minimum=1)
        control_dim = check_int("control_dim", control_dim, name, minimum=1)
        embedding, driver, readout, dtype = esn_components(
            name,
            layout="single",
            in_dim=data_dim + control_dim,
            out_dim=data_dim,
            **hyper,
        )
        super().__init__(
            driver,
            readout,
            embedding,
            in_dim=data_dim,
            control_dim=control_dim,
            dtype=dtype,
            alpha_1=alpha_1,
            alpha_2=alpha_2,
            alpha_3=alpha_3,
            seed=seed,
        )
        self.data_dim = data_dim
