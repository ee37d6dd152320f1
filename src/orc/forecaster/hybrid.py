"""Hybrid forecasting: a reservoir that corrects an imperfect model.

Pathak et al. (2018, "Hybrid forecasting of chaotic processes: using machine
learning in conjunction with a knowledge-based model", Chaos 28, 041101)
join a physical model that is known to be imperfect to a reservoir. The
knowledge-based model ``K`` maps a sample to its own prediction of the next
one; the reservoir sees the sample and that prediction, and the readout
weighs the reservoir against the model:

    r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in [u_t; K(u_t)] + b)
    y_{t+1} = W_out [r_{t+1}; K(u_t)]

Trained by ridge regression like any ESN, run in closed loop like any
forecaster (``u`` replaced by the output fed back). Where the model is good
the readout leans on it, where it is wrong the reservoir learns the
correction: with Lorenz63 equations whose ``rho`` is 5% off, a 100-node
hybrid stayed valid for 12-13 Lyapunov times, twice as long as a 100-node ESN
(6.6) and six times as long as the equations alone (1.9), as in the paper's
Fig. 2 (``tests/test_hybrid.py``); ``benchmarks/science/HYBRID.md`` measures
50 to 800 nodes (with ``rho`` up to 5% off, a 50-node hybrid lasts as long
as an 800-node ESN).

ReservoirComputing.jl calls this ``HybridESN`` with a ``KnowledgeModel``.

The pieces are ordinary components, so the model runs through the same
training and forecasting code as every other forecaster:

- :class:`KnowledgeEmbedding` computes ``K(u)`` and the reservoir's drive
  ``W_in [u; K(u)]`` and hands both on;
- :class:`KnowledgeDriver` advances the reservoir (an
  :class:`orc.drivers.ESNDriver`, with its fused native run during
  training) and carries ``K(u)`` along: a state is ``[r; K(u)]``, shape
  ``(res_dim + knowledge_dim,)``;
- the readout is an :class:`orc.readouts.LinearReadout` over that state.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._compose import check_esn_sizes
from .._defaults import ESN, arguments
from .._esn import esn_components
from .._validation import check_int, init_component
from ..drivers import DriverBase, ESNDriver
from ..embeddings import EmbedBase, LinearEmbedding
from ..readouts import LinearReadout
from .base import RCForecasterBase

__all__ = ["HybridESNForecaster", "KnowledgeEmbedding", "KnowledgeDriver"]


def knowledge_dim(knowledge, in_dim: int, dtype, owner: str) -> int:
    """The length of ``knowledge``'s output for one ``(in_dim,)`` sample,
    found by tracing it (nothing runs); a ``TypeError`` naming
    ``knowledge`` when it is not a function of one sample to a vector."""
    if not callable(knowledge) or isinstance(knowledge, type):
        raise TypeError(f"{owner}: knowledge must be a function, got {knowledge!r}")
    if jax.tree.leaves(eqx.filter(knowledge, eqx.is_array)):
        raise TypeError(
            f"{owner}: knowledge must be a plain function (it is stored as a static "
            "part of the model); close over its arrays or pass them as constants"
        )
    try:
        out = jax.eval_shape(knowledge, jax.ShapeDtypeStruct((in_dim,), dtype))
    except Exception as err:  # noqa: BLE001 - re-raised with the argument named
        raise TypeError(
            f"{owner}: knowledge must map one sample of shape ({in_dim},) to a "
            f"vector; calling it failed: {type(err).__name__}: {err}"
        ) from err
    if not isinstance(out, jax.ShapeDtypeStruct) or out.ndim != 1 or not out.size:
        raise TypeError(
            f"{owner}: knowledge must return one non-empty vector (k,) for a sample "
            f"({in_dim},), got {jax.tree.map(lambda s: s.shape, out)}"
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(
            f"{owner}: knowledge must return floating values, got {out.dtype}"
        )
    return out.shape[0]


class KnowledgeEmbedding(EmbedBase):
    """``u -> [W_in [u; K(u)]; K(u)]``: the reservoir's drive, then the
    knowledge-based prediction, for :class:`KnowledgeDriver` to split. Its
    ``res_dim`` is the reservoir's plus ``knowledge_dim`` (the length of
    what :meth:`embed` returns).

    Parameters
    ----------
    in_dim : int
        The data's size.
    reservoir : LinearEmbedding
        ``W_in``, of input size ``in_dim + knowledge_dim``.
    knowledge : callable
        ``K``: one sample ``(in_dim,)`` to a vector ``(knowledge_dim,)``,
        written in JAX (it is traced, mapped and differentiated with the
        model). Stored as a static part of the model.
    """

    reservoir: LinearEmbedding
    knowledge: Callable = eqx.field(static=True)
    knowledge_dim: int = eqx.field(static=True)

    def __init__(self, in_dim: int, reservoir: LinearEmbedding, knowledge: Callable):
        owner = type(self).__name__
        if not isinstance(reservoir, LinearEmbedding):
            raise TypeError(f"{owner}: reservoir must be a LinearEmbedding")
        in_dim = check_int("in_dim", in_dim, owner, minimum=1)
        k = knowledge_dim(knowledge, in_dim, reservoir.dtype, owner)
        if in_dim + k != reservoir.in_dim:
            raise ValueError(
                f"{owner}: the reservoir's input size ({reservoir.in_dim}) must be "
                f"in_dim ({in_dim}) plus the length of knowledge's output ({k})"
            )
        self.reservoir, self.knowledge, self.knowledge_dim = reservoir, knowledge, k
        init_component(
            self, reservoir.dtype, in_dim=in_dim, res_dim=reservoir.res_dim + k
        )

    def __check_init__(self):
        if self.in_dim + self.knowledge_dim != self.reservoir.in_dim:
            raise ValueError(
                f"{type(self).__name__}: in_dim + knowledge_dim must equal the "
                f"reservoir's input size {self.reservoir.in_dim}"
            )

    def embed(self, in_state: Float[Array, " in_dim"]) -> Array:
        """``[W_in [u; K(u)]; K(u)]``, shape ``(res_dim,)``."""
        self._check_input(in_state)
        predicted = jnp.asarray(self.knowledge(in_state)).astype(self.dtype)
        drive = self.reservoir.embed(jnp.concatenate([in_state, predicted]))
        return jnp.concatenate([drive, predicted])


class KnowledgeDriver(DriverBase):
    """Advances the reservoir and carries the knowledge-based prediction:
    ``[r; k], [p; k'] -> [driver(p, r); k']``.

    Parameters
    ----------
    reservoir : ESNDriver
        The reservoir's update (``res_dim`` nodes).
    knowledge_dim : int
        Length of the prediction carried along; the state is
        ``(reservoir.res_dim + knowledge_dim,)``.
    """

    capabilities = frozenset({"sequence"})

    reservoir: ESNDriver
    knowledge_dim: int = eqx.field(static=True)

    def __init__(self, reservoir: ESNDriver, knowledge_dim: int):
        owner = type(self).__name__
        if not isinstance(reservoir, ESNDriver):
            raise TypeError(f"{owner}: reservoir must be an ESNDriver")
        self.reservoir = reservoir
        self.knowledge_dim = check_int("knowledge_dim", knowledge_dim, owner, minimum=1)
        init_component(self, reservoir.dtype, res_dim=reservoir.res_dim + knowledge_dim)

    def __check_init__(self):
        if self.res_dim != self.reservoir.res_dim + self.knowledge_dim:
            raise ValueError(
                f"{type(self).__name__}: res_dim must be the reservoir's "
                f"{self.reservoir.res_dim} plus knowledge_dim {self.knowledge_dim}"
            )

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """``[reservoir.advance(p, r); k']`` for ``proj_vars = [p; k']`` and
        ``res_state = [r; k]``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        n = self.reservoir.res_dim
        r = self.reservoir.advance(proj_vars[:n], res_state[:n])
        return jnp.concatenate([r, proj_vars[n:]])

    def advance_seq(self, proj_seq: Array, res_state: Array) -> Array:
        """The reservoir's run over the drives (its fused kernel where it has
        one), each state followed by its step's prediction."""
        proj_seq, res_state = self._check_seq(proj_seq, res_state)
        n = self.reservoir.res_dim
        states = self.reservoir.advance_seq(proj_seq[:, :n], res_state[:n])
        return jnp.concatenate([states, proj_seq[:, n:]], axis=1)


class HybridESNForecaster(RCForecasterBase):
    """An echo state network joined to a knowledge-based model (Pathak et al. 2018).

    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in [u_t; K(u_t)] + b)`` and
    ``y_{t+1} = W_out [r_{t+1}; K(u_t)]``, ``K`` your model's prediction of
    the next sample (see :mod:`orc.forecaster.hybrid`). States are
    ``(res_dim + k,)``, ``k`` the length of ``K``'s output, one reservoir;
    the built model's ``res_dim`` is that length (as a deep ESN's counts
    every layer), ``driver.reservoir.res_dim`` the nodes.
    Train with :func:`train_RCForecaster`; forecast, predict and save as any
    forecaster (to save, register ``knowledge`` with
    :func:`orc.io.register`: a file names it, it does not hold code).

    Parameters
    ----------
    data_dim : int
    res_dim : int
        Reservoir nodes.
    knowledge : callable
        ``K(u)``: one sample ``(data_dim,)`` to a vector ``(k,)``, usually
        an imperfect model's prediction of the next sample (one integration
        step of approximate equations). Written in JAX: it is traced,
        mapped over time and differentiated with the model.
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius, dtype, seed, use_sparse_eigs, construction
        As for :class:`ESNForecaster`; ``W_in`` takes ``[u; K(u)]``.

    Example
    -------
    >>> def K(u):  # Lorenz63 with rho 5% off, one RK4 step of dt
    ...     return rk4_step(lambda x: lorenz(x, rho=28 * 1.05), u, dt)
    >>> model = HybridESNForecaster(data_dim=3, res_dim=300, knowledge=K)
    >>> model, R = train_RCForecaster(model, U_train, spinup=100)
    >>> U_pred = model.forecast(1000, R[-1])
    """

    data_dim: int = eqx.field(static=True)

    def __check_init__(self):
        check_esn_sizes(self)
        embedding, driver = self.embedding, self.driver
        if not (
            isinstance(embedding, KnowledgeEmbedding)
            and isinstance(driver, KnowledgeDriver)
            and embedding.knowledge_dim == driver.knowledge_dim
        ):
            raise TypeError(
                "HybridESNForecaster: needs a KnowledgeEmbedding and a "
                "KnowledgeDriver that carry predictions of one length"
            )

    def __init__(
        self,
        data_dim: int,
        res_dim: int,
        knowledge: Callable,
        leak_rate: float = ESN.leak_rate,
        bias: float = ESN.bias,
        embedding_scaling: float = ESN.embedding_scaling,
        Wr_density: float = ESN.Wr_density,
        Wr_spectral_radius: float = ESN.Wr_spectral_radius,
        dtype: type = jnp.float64,
        seed: int = ESN.seed,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        hyper = arguments(locals())
        owner = type(self).__name__
        data_dim = check_int("data_dim", hyper.pop("data_dim"), owner, minimum=1)
        knowledge = hyper.pop("knowledge")
        k = knowledge_dim(knowledge, data_dim, jnp.dtype(dtype), owner)
        embedding, driver, _, dtype = esn_components(
            owner, layout="single", in_dim=data_dim + k, out_dim=data_dim, **hyper
        )
        driver = KnowledgeDriver(driver, k)
        RCForecasterBase.__init__(
            self,
            driver,
            LinearReadout(data_dim, driver.res_dim, dtype),
            KnowledgeEmbedding(data_dim, embedding, knowledge),
            dtype=dtype,
            seed=hyper["seed"],
        )
        self.data_dim = data_dim
