"""``orc.shard``: a forecaster's reservoir bank across devices and hosts
(the mechanics are :mod:`orc._shard`'s)."""

from __future__ import annotations

from jax.sharding import Mesh

from .._shard import check_shardable, mesh_axis, place
from .base import CRCForecasterBase, RCForecasterBase

__all__ = ["shard"]

OWNER = "orc.shard"


def shard(model, mesh: Mesh, axis: str | None = None):
    """``model`` with its reservoir bank placed across the devices of ``mesh``.

    Every array of the bank (``win``, ``wr``, ``wout``, per-node biases and
    leak rates: those with the bank's length first) is laid out along the
    mesh axis ``axis`` (a :class:`jax.sharding.NamedSharding`, ``P(axis)``),
    ``chunks / devices`` reservoirs per device; the model's other arrays
    (scalars, ``data_scale``) are replicated. Nothing else changes: the
    model is the same pytree of the same class. Training it
    (:func:`orc.forecaster.train_RCForecaster`) and forecasting with it
    (``forecast``) then run on every device's share (see
    :mod:`orc._shard`): no communication in training but the training
    data's ``locality`` halo columns, and per forecast step only the halo
    (two collective permutes). Results equal the unsharded model's: training
    bit for bit; forecasts bit for bit between any numbers of devices,
    and to rounding against the unsharded ``forecast``, whose native CPU
    kernel runs the whole closed loop in one call with its own ``tanh``.
    ``force``, ``predict`` and ``forecast_from_IC`` run the unplaced program,
    partitioned by XLA: the arrays are placed on the mesh's devices with its
    axes in JAX's automatic mode (``jax.make_mesh`` makes explicit ones, whose
    typing rules refuse a ``vmap`` over a sharded axis).

    Why a placement rather than a ``mesh=`` argument of every front: a
    placed model is still the same model, placement is how JAX says where
    arrays live, and the fronts read it once per call (as they resolve the
    backend) and hand the mesh to the compiled program as a static argument.

    Parameters
    ----------
    model : a discrete-time forecaster with a parallel linear embedding,
        an ESN or Taylor driver and a linear readout (``ESNForecaster(...,
        chunks=C, locality=l)``); ``chunks`` a multiple of the devices, and
        ``locality`` at most the inputs one device holds. Or an ensemble
        (``EnsembleESNForecaster(..., chunks=C)``): each device holds
        ``C / devices`` members, every member reads the whole data, and each
        forecast step averages the members across devices (one ``psum``;
        the forecast then equals the unplaced one to rounding).
    mesh : jax.sharding.Mesh
        E.g. ``jax.make_mesh((jax.device_count(),), ("bank",))``; after
        ``jax.distributed.initialize()`` its devices may span hosts.
    axis : str, optional
        The mesh axis to place the bank along (default: the mesh's only one).

    Returns
    -------
    The model, placed. ``orc.shard(model, mesh)`` on a placed model moves it.

    Example
    -------
    >>> mesh = jax.make_mesh((4,), ("bank",))
    >>> esn = orc.shard(ESNForecaster(512, 1000, chunks=64, locality=6), mesh)
    >>> esn, R = train_RCForecaster(esn, U_train)      # 16 reservoirs per device
    >>> esn.readout.wout.sharding.spec
    PartitionSpec('bank', None, None)
    >>> Y = esn.forecast(1000, R[-1])                  # (1000, 512), replicated
    """
    if not isinstance(model, RCForecasterBase) or isinstance(model, CRCForecasterBase):
        raise TypeError(
            f"{OWNER}: model must be a discrete-time forecaster with parallel "
            f"reservoirs (e.g. ESNForecaster(..., chunks=...)), got {type(model).__name__}"
        )
    axis, size = mesh_axis(OWNER, mesh, axis)
    check_shardable(OWNER, model, size)
    return place(model, mesh, axis)
