"""Echo state network controller."""

from __future__ import annotations

import equinox as eqx

from .._compose import check_esn_sizes
from .._esn import esn_components
from .._signatures import ESN_MODEL, orc_signature
from .._validation import check_int
from .base import RCControllerBase

__all__ = ["ESNController"]

# the cost weights of RCControllerBase, in ORC's order
_WEIGHTS = ("alpha_1", "alpha_2", "alpha_3")


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
    leak_rate=0.6, bias=1.6, embedding_scaling=0.08, Wr_density=0.02,
    Wr_spectral_radius=0.8, dtype=float64
        As for :class:`orc.forecaster.ESNForecaster`.
    alpha_1=100, alpha_2=1, alpha_3=5
        Penalty weights (tracking, control magnitude, control increments).
    seed=0, quadratic=False, use_sparse_eigs=True

    Example
    -------
    >>> ctrl = ESNController(data_dim=2, control_dim=1, res_dim=500)
    >>> ctrl, R = train_RCController(ctrl, outputs[:-1], controls[1:])
    >>> c_opt = ctrl.compute_control(jnp.zeros((50, 1)), R[-1], reference)
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)

    @orc_signature(
        "data_dim",
        "control_dim",
        "res_dim",
        "leak_rate",
        *ESN_MODEL,
        *_WEIGHTS,
        "seed",
        "quadratic",
        "use_sparse_eigs",
        "construction",
    )
    def __init__(self, data_dim, control_dim, **hyper) -> None:
        name = type(self).__name__
        data_dim = check_int("data_dim", data_dim, name, minimum=1)
        control_dim = check_int("control_dim", control_dim, name, minimum=1)
        weights = {alpha: hyper.pop(alpha) for alpha in _WEIGHTS}
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
            seed=hyper["seed"],
            **weights,
        )
        self.data_dim = data_dim
