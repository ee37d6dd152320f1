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
as an 800-node ESN). On Kuramoto-Sivashinsky (L = 22, 64 points) 8 local
reservoirs of 100 nodes with a model whose domain is 5% too long lasted 2.3
Lyapunov times on average, the reservoirs alone 0.64, the model alone 0.45.

ReservoirComputing.jl calls this ``HybridESN`` with a ``KnowledgeModel``.

For spatiotemporal systems the reservoir is a bank of ``chunks`` local
reservoirs, as in :class:`ESNForecaster` (Wikner et al. 2020, "Combining
machine learning with knowledge-based modeling for scalable forecasting",
Chaos 30, 053111): ``K`` predicts the whole next state, reservoir ``c`` sees
the samples and predictions of its patch of grid points plus ``locality``
neighbours each side, and its readout reads its state and the predictions of
its own points.

The pieces are ordinary components, so the model runs through the same
training and forecasting code as every other forecaster:

- :class:`KnowledgeEmbedding` computes ``K(u)`` and the reservoirs' drive
  ``W_in,c [u; K(u)]_c`` and hands both on;
- :class:`KnowledgeDriver` advances the reservoirs (an
  :class:`orc.drivers.ParallelESNDriver`, with its fused native run during
  training) and carries ``K(u)`` along: the state of reservoir ``c`` is
  ``[r_c; K(u)_c]``;
- the readout is an :class:`orc.readouts.ParallelLinearReadout` over those
  states.
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
from ..drivers import DriverBase, ParallelESNDriver
from ..embeddings import EmbedBase, ParallelLinearEmbedding
from ..readouts import ParallelLinearReadout
from .base import RCForecasterBase

__all__ = ["HybridESNForecaster", "KnowledgeEmbedding", "KnowledgeDriver"]


def _knowledge_size(knowledge, in_dim: int, dtype, owner: str) -> int:
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
    """``u -> [W_in,c [u; K(u)]_c; K(u)_c]`` for each reservoir ``c``: its
    drive, then the knowledge-based predictions it reads out, for
    :class:`KnowledgeDriver` to split.

    With one reservoir, ``[u; K(u)]`` is the two vectors end to end and
    ``K(u)_c`` all of ``K(u)``. With ``chunks > 1``, ``K`` predicts the
    whole state (``knowledge_dim == in_dim``); ``u`` and ``K(u)`` are
    interleaved point by point, ``[u_0, K_0, u_1, K_1, ...]``, so that the
    reservoir embedding's local windows (``2 * locality`` entries each side)
    take the samples and predictions of the same grid points, and
    ``K(u)_c`` are the predictions of reservoir ``c``'s own points. Its
    ``res_dim`` (per reservoir) is the reservoir's plus ``knowledge_dim //
    chunks``.

    Parameters
    ----------
    in_dim : int
        The data's size.
    reservoir : ParallelLinearEmbedding
        ``W_in``, of input size ``in_dim + knowledge_dim``.
    knowledge : callable
        ``K``: one sample ``(in_dim,)`` to a vector ``(knowledge_dim,)``,
        written in JAX (it is traced, mapped and differentiated with the
        model). Stored as a static part of the model.
    """

    reservoir: ParallelLinearEmbedding
    knowledge: Callable = eqx.field(static=True)
    knowledge_dim: int = eqx.field(static=True)

    def __init__(
        self, in_dim: int, reservoir: ParallelLinearEmbedding, knowledge: Callable
    ):
        owner = type(self).__name__
        if not isinstance(reservoir, ParallelLinearEmbedding):
            raise TypeError(f"{owner}: reservoir must be a ParallelLinearEmbedding")
        in_dim = check_int("in_dim", in_dim, owner, minimum=1)
        k = _knowledge_size(knowledge, in_dim, reservoir.dtype, owner)
        self.reservoir, self.knowledge, self.knowledge_dim = reservoir, knowledge, k
        init_component(
            self,
            reservoir.dtype,
            in_dim=in_dim,
            res_dim=reservoir.res_dim + k // reservoir.chunks,
        )
        self.chunks = reservoir.chunks

    def __check_init__(self):
        owner, chunks = type(self).__name__, self.reservoir.chunks
        if self.in_dim + self.knowledge_dim != self.reservoir.in_dim:
            raise ValueError(
                f"{owner}: the reservoir's input size ({self.reservoir.in_dim}) "
                f"must be in_dim ({self.in_dim}) plus knowledge_dim "
                f"({self.knowledge_dim})"
            )
        if chunks > 1 and self.knowledge_dim != self.in_dim:
            raise ValueError(
                f"{owner}: with {chunks} reservoirs, knowledge must predict the "
                f"whole state, {self.in_dim} values, got {self.knowledge_dim}"
            )
        if self.chunks != chunks:
            raise ValueError(f"{owner}: chunks must be the reservoir's, {chunks}")
        locality = self.reservoir.locality
        if locality and (chunks == 1 or locality % 2 or not self.reservoir.periodic):
            raise ValueError(
                f"{owner}: the reservoir's locality ({locality}) must count whole "
                "points [u_j, K_j] (even), of a periodic domain, with chunks > 1"
            )

    def embed(self, in_state: Float[Array, " in_dim"]) -> Array:
        """``[W_in,c [u; K(u)]_c; K(u)_c]``, shape ``(chunks, res_dim)``."""
        self._check_input(in_state)
        predicted = jnp.asarray(self.knowledge(in_state)).astype(self.dtype)
        if self.chunks == 1:
            joined = jnp.concatenate([in_state, predicted])
        else:  # point by point, for the local windows
            joined = jnp.stack([in_state, predicted], axis=-1).reshape(-1)
        drive = self.reservoir.embed(joined)
        own = predicted.reshape(self.chunks, -1)
        return jnp.concatenate([drive, own], axis=-1)


class KnowledgeDriver(DriverBase):
    """Advances the reservoirs and carries the knowledge-based predictions:
    ``[r_c; k_c], [p_c; k'_c] -> [driver(p, r)_c; k'_c]``.

    Parameters
    ----------
    reservoir : ParallelESNDriver
        The reservoirs' update (``chunks`` reservoirs of ``res_dim`` nodes).
    knowledge_dim : int
        Length of the predictions each reservoir carries; its state is
        ``(reservoir.res_dim + knowledge_dim,)``, the bank's ``(chunks,
        reservoir.res_dim + knowledge_dim)``.
    """

    capabilities = frozenset({"sequence"})

    reservoir: ParallelESNDriver
    knowledge_dim: int = eqx.field(static=True)

    def __init__(self, reservoir: ParallelESNDriver, knowledge_dim: int):
        owner = type(self).__name__
        if not isinstance(reservoir, ParallelESNDriver):
            raise TypeError(f"{owner}: reservoir must be a ParallelESNDriver")
        self.reservoir = reservoir
        self.knowledge_dim = check_int("knowledge_dim", knowledge_dim, owner, minimum=1)
        init_component(
            self, reservoir.dtype, res_dim=reservoir.res_dim + self.knowledge_dim
        )
        self.chunks = reservoir.chunks

    def __check_init__(self):
        owner, reservoir = type(self).__name__, self.reservoir
        if (self.chunks, self.res_dim) != (
            reservoir.chunks,
            reservoir.res_dim + self.knowledge_dim,
        ):
            raise ValueError(
                f"{owner}: chunks and res_dim must be the reservoir's "
                f"({reservoir.chunks}, {reservoir.res_dim} plus knowledge_dim "
                f"{self.knowledge_dim})"
            )

    def advance(self, proj_vars: Array, res_state: Array) -> Array:
        """``[reservoir.advance(p, r); k']`` per reservoir, for ``proj_vars =
        [p; k']`` and ``res_state = [r; k]``."""
        proj_vars, res_state = self._check_shapes(proj_vars, res_state)
        n = self.reservoir.res_dim
        r = self.reservoir.advance(proj_vars[..., :n], res_state[..., :n])
        return jnp.concatenate([r, proj_vars[..., n:]], axis=-1)

    def advance_seq(self, proj_seq: Array, res_state: Array) -> Array:
        """The reservoirs' run over the drives (their fused kernel where it
        has one), each state followed by its step's predictions."""
        proj_seq, res_state = self._check_seq(proj_seq, res_state)
        n = self.reservoir.res_dim
        states = self.reservoir.advance_seq(proj_seq[..., :n], res_state[..., :n])
        return jnp.concatenate([states, proj_seq[..., n:]], axis=-1)


class HybridESNForecaster(RCForecasterBase):
    """An echo state network joined to a knowledge-based model (Pathak et al. 2018).

    ``r_{t+1} = (1 - a) r_t + a tanh(W r_t + W_in [u_t; K(u_t)] + b)`` and
    ``y_{t+1} = W_out [r_{t+1}; K(u_t)]``, ``K`` your model's prediction of
    the next sample (see :mod:`orc.forecaster.hybrid`). With ``chunks > 1``
    each of ``chunks`` reservoirs sees its patch of the data and of ``K``'s
    prediction (plus ``locality`` neighbours each side) and predicts its
    patch (Wikner et al. 2020); ``K`` must then predict the whole state.
    States are ``(chunks, res_dim + k)``, ``k`` the length of ``K``'s output
    per reservoir; the built model's ``res_dim`` is that length,
    ``driver.reservoir.res_dim`` the nodes. Train with
    :func:`train_RCForecaster`; forecast, predict and save as any forecaster
    (to save, register ``knowledge`` with :func:`orc.io.register`: a file
    names it, it does not hold code).

    Parameters
    ----------
    data_dim : int
    res_dim : int
        Nodes per reservoir.
    knowledge : callable
        ``K(u)``: one sample ``(data_dim,)`` to a vector ``(k,)``, usually
        an imperfect model's prediction of the next sample (one integration
        step of approximate equations); ``(data_dim,)`` when ``chunks > 1``.
        Written in JAX: it is traced, mapped over time and differentiated
        with the model.
    chunks : int
        Reservoirs, each predicting ``data_dim // chunks`` points (must
        divide ``data_dim``).
    locality : int
        Neighbouring points each reservoir also sees on each side (with
        ``chunks > 1``; wrapped around, so ``periodic`` only).
    leak_rate, bias, embedding_scaling, Wr_density, Wr_spectral_radius, dtype, seed, periodic, use_sparse_eigs, construction
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
            and embedding.knowledge_dim == driver.knowledge_dim * driver.chunks
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
        chunks: int = ESN.chunks,
        locality: int = ESN.locality,
        periodic: bool = ESN.periodic,
        use_sparse_eigs: bool = ESN.use_sparse_eigs,
        construction: str = ESN.construction,
    ) -> None:
        hyper = arguments(locals())
        owner = type(self).__name__
        data_dim = check_int("data_dim", hyper.pop("data_dim"), owner, minimum=1)
        knowledge = hyper.pop("knowledge")
        k = _knowledge_size(knowledge, data_dim, jnp.dtype(dtype), owner)
        chunks = check_int("chunks", chunks, owner, minimum=1)
        locality = check_int("locality", locality, owner, minimum=0)
        if chunks > 1 and k != data_dim:
            raise ValueError(
                f"{owner}: with chunks={chunks}, knowledge must predict the whole "
                f"state ({data_dim} values), got {k}"
            )
        if locality and (chunks == 1 or not periodic):
            raise ValueError(
                f"{owner}: locality ({locality}) needs chunks > 1 and periodic=True "
                "(the windows wrap around the domain)"
            )
        hyper["locality"] = 2 * locality  # in [u_0, K_0, u_1, K_1, ...]
        embedding, driver, _, dtype = esn_components(
            owner, layout="parallel", in_dim=data_dim + k, out_dim=data_dim, **hyper
        )
        driver = KnowledgeDriver(driver, k // chunks)
        RCForecasterBase.__init__(
            self,
            driver,
            ParallelLinearReadout(data_dim, driver.res_dim, chunks, dtype),
            KnowledgeEmbedding(data_dim, embedding, knowledge),
            chunks=chunks,
            dtype=dtype,
            seed=hyper["seed"],
        )
        self.data_dim = data_dim
