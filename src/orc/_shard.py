"""Reservoir banks and search populations across devices and hosts.

A parallel-reservoir forecaster (``chunks`` reservoirs, each reading its
patch of the input and ``locality`` neighbours on each side, Pathak et al.
2018) is one computation mapped over its bank axis. :func:`shard` places
that axis across the devices of a :class:`jax.sharding.Mesh`; orc's fronts
(:func:`orc.forecaster.train_RCForecaster`, ``forecast``) read the placement
from the model's arrays when they are called and run the model's own code
on each device's share of the bank inside ``jax.shard_map``:

- **training**: each device forces its reservoirs, accumulates their ridge
  statistics and solves their readouts (``orc._fit``'s program on the
  device's *local model*, below). Each device holds only its own columns
  of the training data; the ``locality`` columns on each side that its
  outer reservoirs read are received once per block of rows from the
  neighbouring devices (``ppermute``). States, statistics and weights never
  leave their device;
- **closed-loop forecast**: every step each device reads out its patch,
  sends the ``locality`` outer columns of it to its two neighbours and
  receives theirs (two collective permutes on a ring, periodic or not:
  non-periodic edges repeat their boundary value as the unsharded
  embedding does), embeds and advances its reservoirs. No all-gather of
  the state or output inside the loop; the forecast's outputs are gathered
  once, after it.

The *local model* of a device is the user's model class built from the
device's shard of every bank leaf, with ``chunks / devices`` reservoirs and
``chunks / devices * chunk_size`` outputs, and one component swapped: its
embedding is :class:`HaloEmbedding`, the linear embedding whose input window
comes from the device's own outputs plus the halo its neighbours sent (on
a mesh of one device, the halo is the bank's own wrap: a local gather). The
driver, readout, teacher forcing, ridge engine and closed-loop scan are the
unsharded model's own code, on fewer reservoirs: every reservoir does
the arithmetic it does unsharded, so training gives the same bits on any
number of devices. The native CPU kernels run inside ``shard_map`` on each
device's shard (the fused run-with-statistics of training, the sparse
product of each forecast step).

Why the placement and not a ``mesh=`` argument: a placed model is still the
same model (a pytree of the same class; saved, loaded, indexed as before),
placement is how JAX says where arrays live, and ``jax.device_put`` is
what users of ``jax.sharding`` already call. The fronts read it once per
call, as they resolve the backend, and pass the mesh to the compiled
program as a static argument: part of its identity, never a global.

A population of candidates (:func:`orc.tune.search` with ``mesh=``) is
placed the same way along its trajectory axis (:func:`population_map`).
After ``jax.distributed.initialize()`` a mesh over every process's devices
runs the same code across hosts (CPU collectives through gloo, see
``docs/examples/cluster.md``).
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array

from . import _errors
from ._kernels import linear_drive
from ._strategy import compiled
from ._validation import (
    check_finite,
    check_leaf,
    from_fields,
    module_fields,
    warn_if_untrained,
)
from .embeddings import EmbedBase, _LinearEmbeddingCore, _take_windows

__all__ = [
    "mesh_axis",
    "check_shardable",
    "place",
    "placement",
    "HaloEmbedding",
    "fit_sharded",
    "forecast_sharded",
    "population_map",
    "place_population",
    "put",
]


# --------------------------------------------------------------------------- #
# The halo: a device's outputs extended by its neighbours'
# --------------------------------------------------------------------------- #


def _ring(size: int, step: int) -> list[tuple[int, int]]:
    return [(i, (i + step) % size) for i in range(size)]


def extend(y, locality: int, periodic: bool, axis: str | None, size: int):
    """``y`` ``(..., m)``, a device's own ``m`` outputs, extended by
    ``locality`` values on each side: ``(..., m + 2 * locality)``.

    Sharded (``axis`` a mesh axis of ``size`` devices): the left values are
    the last ``locality`` of the device before on the ring, the right ones
    the first of the device after, each received by one ``ppermute``.
    Unsharded (``axis=None``): the bank's own wrap, a local gather. Not
    ``periodic``: the outer edges of the whole input repeat its first and
    last value (:func:`orc.embeddings._window_indices`'s rule)."""
    if locality == 0:
        return y
    left, right = y[..., -locality:], y[..., :locality]
    if axis is not None and size > 1:
        left = jax.lax.ppermute(left, axis, _ring(size, 1))
        right = jax.lax.ppermute(right, axis, _ring(size, -1))
    if not periodic:
        index = 0 if axis is None else jax.lax.axis_index(axis)
        first = jnp.broadcast_to(y[..., :1], left.shape)
        last = jnp.broadcast_to(y[..., -1:], right.shape)
        left = jnp.where(index == 0, first, left)
        right = jnp.where(index == size - 1, last, right)
    return jnp.concatenate([left, y, right], axis=-1)


class HaloEmbedding(EmbedBase):
    """The linear embedding of one device's share of a parallel bank.

    ``p_c = W_in,c @ v[c s : c s + s + 2 locality]`` for its ``chunks``
    reservoirs, ``s = chunk_size``, where ``v = extend(u)`` is the device's
    own input ``u`` ``(chunks * s,)`` with the halo its neighbours send
    (:func:`extend`): the window :class:`orc.embeddings.ParallelLinearEmbedding`
    gathers from the whole input, so the drive is the same numbers (the same
    gather and :func:`orc._kernels.linear_drive`). Made by the sharded
    programs of a model placed by :func:`orc.shard` inside ``shard_map``
    (:func:`local_model`); ``axis=None``: unsharded (a local wrap).
    """

    win: Array
    chunk_size: int = eqx.field(static=True)
    locality: int = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)
    axis: str | None = eqx.field(static=True)
    devices: int = eqx.field(static=True)

    # the linear factors of training's fused pass; the closed loop runs the
    # model's scan (its halo exchange sits between two steps of a kernel
    # that computes a whole forecast in one call otherwise)
    capabilities = frozenset({"linear"})

    def __check_init__(self):
        name = type(self).__name__
        if self.in_dim != self.chunks * self.chunk_size:
            raise ValueError(
                f"{name}: in_dim ({self.in_dim}) must be chunks * chunk_size "
                f"({self.chunks} * {self.chunk_size})"
            )
        width = self.chunk_size + 2 * self.locality
        check_leaf(
            name, "win", self.win, (self.chunks, self.res_dim, width), self.dtype
        )

    def _window(self) -> np.ndarray:
        width = self.chunk_size + 2 * self.locality
        return np.arange(self.chunks)[:, None] * self.chunk_size + np.arange(width)

    def linear_factors(self, in_state):
        """``(win (C, n, w), windows (batch, C, w))``, as
        :meth:`orc.embeddings.ParallelLinearEmbedding.linear_factors`."""
        v = extend(in_state, self.locality, self.periodic, self.axis, self.devices)
        return self.win, _take_windows(v, self._window())

    def embed(self, in_state):
        self._check_input(in_state)
        return linear_drive(*self.linear_factors(in_state[None]))[0]

    def batch_embed(self, in_state):
        return linear_drive(*self.linear_factors(in_state))


# --------------------------------------------------------------------------- #
# Placement
# --------------------------------------------------------------------------- #


def _bank_leaf(x, chunks: int) -> bool:
    """Whether an array leaf of a model lies on its bank axis: rank 2 or
    more with the bank's length first (``win``, ``wr``'s values and
    columns, ``wout``, per-node biases and leak rates); scalars and
    per-output vectors are replicated."""
    return eqx.is_array(x) and np.ndim(x) >= 2 and np.shape(x)[0] == chunks


def _specs(tree, chunks: int, axis: str):
    """Partition specs of ``tree``'s array leaves (a tree of the arrays'
    positions, as :func:`equinox.partition` leaves them, ``None`` elsewhere):
    ``P(axis)`` for the bank's, ``P()`` (replicated) for the others."""
    dyn = eqx.filter(tree, eqx.is_array)
    return jax.tree.map(lambda x: P(axis) if _bank_leaf(x, chunks) else P(), dyn)


def _replicated(tree):
    return jax.tree.map(lambda _: P(), eqx.filter(tree, eqx.is_array))


def put(x, mesh: Mesh, spec: P):
    """The array ``x`` laid out over ``mesh`` by ``spec``. An array already on
    the mesh is resharded where needed; host data (every process holding the
    same values, as after ``jax.distributed.initialize``) is cut into the
    shards this process's devices hold."""
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        # a typed key (training noise's): its data placed, the key rewrapped
        data = put(jax.random.key_data(x), mesh, spec)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    sharding = NamedSharding(mesh, spec)
    if isinstance(x, jax.Array) and isinstance(x.sharding, NamedSharding):
        if x.sharding.mesh == mesh and x.sharding.is_equivalent_to(sharding, x.ndim):
            return x
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return jax.device_put(x, sharding)
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda i: host[i])


def _put_tree(tree, specs, mesh):
    """``tree`` with its arrays laid out by ``specs`` (:func:`_specs`'s form)."""
    dyn, static = eqx.partition(tree, eqx.is_array)
    dyn = jax.tree.map(lambda x, s: put(x, mesh, s), dyn, specs)
    return eqx.combine(dyn, static)


def mesh_axis(owner: str, mesh, axis):
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"{owner}: mesh must be a jax.sharding.Mesh (e.g. "
            f"jax.make_mesh((len(jax.devices()),), ('bank',))), got {type(mesh).__name__}"
        )
    if axis is None:
        if len(mesh.axis_names) != 1:
            raise ValueError(
                f"{owner}: the mesh has axes {mesh.axis_names}; use a mesh of one axis "
                "(or name the bank's axis: orc.shard(..., axis=...))"
            )
        axis = mesh.axis_names[0]
    if axis not in mesh.axis_names:
        raise ValueError(
            f"{owner}: axis {axis!r} is not an axis of the mesh {mesh.axis_names}"
        )
    return axis, int(mesh.shape[axis])


def check_shardable(owner: str, model, size: int) -> None:
    """A forecaster's components can share their bank over ``size`` devices:
    a parallel linear embedding, a sparse reservoir driver stepped in
    discrete time and a linear readout (or an ensemble's embedding and
    readout, every member seeing the whole input), ``chunks`` a multiple of
    ``size`` and a halo within one neighbour (the caller checks the model's
    class)."""
    from .drivers import _SparseReservoirDriver
    from .readouts import _LinearReadoutCore

    emb, drv, out = model.embedding, model.driver, model.readout
    if not (
        isinstance(emb, _LinearEmbeddingCore)
        and isinstance(drv, _SparseReservoirDriver)
        and getattr(drv, "mode", "discrete") == "discrete"
        and isinstance(out, _LinearReadoutCore)
        and emb.ensemble == out.ensemble
    ):
        raise TypeError(
            f"{owner}: model must hold a parallel linear embedding, a sparse "
            "reservoir driver (ESN or Taylor) in discrete time and a parallel "
            "linear readout (or an ensemble's embedding and readout); got "
            f"{type(emb).__name__}, {type(drv).__name__}, {type(out).__name__}"
        )
    chunks = drv.chunks
    if chunks % size:
        raise ValueError(
            f"{owner}: the model's chunks ({chunks}) must be a multiple of the "
            f"mesh axis's {size} devices (each device holds chunks / devices reservoirs)"
        )
    per_device = chunks // size * emb.chunk_size
    if not emb.ensemble and emb.locality > per_device:
        raise ValueError(
            f"{owner}: locality ({emb.locality}) exceeds the {per_device} inputs "
            "each device holds (chunks / devices * chunk size): a device's halo "
            "would reach past its neighbours; use fewer devices"
        )


def place(model, mesh: Mesh, axis: str):
    """``model`` with its bank along ``axis`` of ``mesh`` (see
    :func:`orc.shard`; checked by the caller).

    The arrays are placed on ``mesh``'s devices with its axes in JAX's
    automatic mode (``AxisType.Auto``; ``jax.make_mesh`` makes explicit
    ones): orc's own sharded programs are ``shard_map``s, which take either,
    and the entry points that run the unplaced program on a placed model
    (``force``, ``predict``, ``forecast_from_IC``) are then partitioned by
    XLA (correct, with the gathers it needs) instead of refused by the
    typing rules of explicit sharding (a ``vmap`` over a sharded axis)."""
    auto = Mesh(
        mesh.devices,
        mesh.axis_names,
        axis_types=(jax.sharding.AxisType.Auto,) * len(mesh.axis_names),
    )
    return _put_tree(model, _specs(model, model.driver.chunks, axis), auto)


def placement(model) -> tuple[Mesh, str] | None:
    """``(mesh, axis)`` where ``model``'s bank is placed by :func:`shard`
    (its readout weights carry a ``NamedSharding`` along a mesh axis), else
    ``None`` (an unplaced model, or one traced under the user's ``jit``).
    Called by every training and forecast: in a process with one device it
    looks at nothing else (~1 us; reading the model's fields costs ~3 us)."""
    if jax.device_count() == 1:
        return None
    wout = getattr(getattr(model, "readout", None), "wout", None)
    if not isinstance(wout, jax.Array) or isinstance(wout, jax.core.Tracer):
        return None
    sharding = wout.sharding
    if not isinstance(sharding, NamedSharding) or not len(sharding.spec):
        return None
    axis = sharding.spec[0]
    if not isinstance(axis, str):
        return None
    return sharding.mesh, axis


# --------------------------------------------------------------------------- #
# The local model of a device
# --------------------------------------------------------------------------- #


def _ensemble(model) -> bool:
    """Whether ``model`` is an ensemble: every member sees the whole input
    and the output is the members' mean (the data are replicated, the
    members shared out)."""
    return getattr(model.embedding, "ensemble", False)  # a HaloEmbedding: no


@functools.cache
def _device_mean(cls, axis: str, devices: int):
    """``cls`` (an ensemble's readout) whose output is the mean over the
    members of every device (inside ``shard_map``): each device's mean of
    its own members, averaged across devices (one ``psum`` per output)."""

    class DeviceMean(cls):
        def readout(self, res_state):
            return jax.lax.psum(super().readout(res_state), axis) / devices

    DeviceMean.__name__ = DeviceMean.__qualname__ = cls.__name__
    return DeviceMean


def local_model(model, axis: str | None, size: int):
    """The local model of one device: ``model`` whose bank leaves are
    already the device's shard (inside ``shard_map``), rebuilt with
    ``chunks / size`` reservoirs and a :class:`HaloEmbedding` (an
    ensemble: its own embedding, and a readout averaged across devices)."""
    emb, drv, out = model.embedding, model.driver, model.readout
    chunks = drv.chunks // size
    if _ensemble(model):
        fields = dict(
            module_fields(model),
            driver=from_fields(type(drv), dict(module_fields(drv), chunks=chunks)),
            embedding=from_fields(type(emb), dict(module_fields(emb), chunks=chunks)),
            readout=from_fields(
                _device_mean(type(out), axis, size),
                dict(module_fields(out), chunks=chunks),
            ),
            chunks=chunks,
        )
        return from_fields(type(model), fields)
    width = chunks * emb.chunk_size
    driver = from_fields(type(drv), dict(module_fields(drv), chunks=chunks))
    readout = from_fields(
        type(out),
        dict(module_fields(out), chunks=chunks, out_dim=width, data_scale=None),
    )
    embedding = from_fields(
        HaloEmbedding,
        dict(
            in_dim=width,
            res_dim=emb.res_dim,
            dtype=emb.dtype,
            chunks=chunks,
            win=emb.win,
            chunk_size=emb.chunk_size,
            locality=emb.locality,
            periodic=emb.periodic,
            axis=axis,
            devices=size,
        ),
    )
    fields = dict(
        module_fields(model), driver=driver, readout=readout, embedding=embedding
    )
    fields.update(in_dim=width, out_dim=width, chunks=chunks)
    if "data_dim" in fields:
        fields["data_dim"] = width
    return from_fields(type(model), fields)


def _at(ndim: int, position: int, axis: str) -> P:
    """A spec placing axis ``position`` (negative: from the end) along ``axis``."""
    spec = [None] * ndim
    spec[position] = axis
    return P(*spec)


def _shard_map(fn, mesh, in_specs, out_specs):
    # check_vma off: the native kernels' custom calls carry no record of
    # which mesh axes their outputs vary over
    return jax.shard_map(
        fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
    )


def _gathered(x, axis: str, position: int = 0):
    """Inside ``shard_map``: the devices' blocks of ``x`` joined along
    ``position`` on every device (one all-gather, after any loop), so that
    the result is replicated and every process can read it on the host."""
    return jax.lax.all_gather(x, axis, axis=position, tiled=True)


def _local_errors(fn, *args, axis: str):
    """``fn(*args)`` inside ``shard_map``, its checks as codes ``(devices,
    n)`` (every device's, gathered) and their static entries."""
    out, errors = _errors.collect(fn, *args)
    codes = errors.codes
    codes = jnp.zeros((1, 0), jnp.int32) if codes is None else codes[None]
    return out, _gathered(codes, axis), errors.entries


def _report(out, codes, entries):
    """Hand the devices' check codes to the enclosing orc program."""
    if entries:
        out = _errors.report(out, _errors.Errors(codes, tuple(entries)))
    return out


# --------------------------------------------------------------------------- #
# Training and forecasting
# --------------------------------------------------------------------------- #


def _fit_specs(model, problem, solver, axis: str):
    """Specs of a fit's arguments: the model's bank, the data's columns
    (its last axis: a device holds its own patch) and the initial states'
    bank axis along ``axis``; the rest replicated."""
    specs = (
        _specs(model, model.driver.chunks, axis),
        _replicated(problem),
        _replicated(solver),
    )
    data = {"init": -2}
    if not _ensemble(model):  # an ensemble's members all read the whole data
        data.update(train_seq=-1, target_seq=-1)
    placed = {
        name: _at(getattr(problem, name).ndim, position, axis)
        for name, position in data.items()
        if getattr(problem, name) is not None
    }
    problem_specs = eqx.tree_at(
        lambda p: [getattr(p, name) for name in placed], specs[1], list(placed.values())
    )
    return specs[0], problem_specs, specs[2]


def fit_sharded(model, problem, solver, opts, placed, program):
    """:func:`orc._fit.fit` of a placed model (see :mod:`orc._shard`):
    ``(model, states)``, the weights and states laid out as the bank.
    ``program`` is the front's own training function (``orc._fit._fit``'s,
    uncompiled), traced on each device for its share of the bank."""
    mesh, axis = placed
    owner = problem.owner
    if problem.force_kwargs:
        raise ValueError(f"{owner}: a model placed by orc.shard takes no force_kwargs")
    check_shardable(owner, model, int(mesh.shape[axis]))
    args = (model, problem, solver)
    args = tuple(
        _put_tree(a, s, mesh)
        for a, s in zip(args, _fit_specs(*args, axis), strict=True)
    )
    noise = opts.noise
    if noise is not None:  # replicated: each device slices its own share
        noise = _put_tree(noise, _replicated(noise), mesh)
    return _fit_sharded(
        *args, opts.keep_states, noise, mesh, axis, program, backend=opts.backend
    )


@compiled
def _fit_sharded(model, problem, solver, keep, noise, mesh, axis, program):
    size = int(mesh.shape[axis])
    ensemble = _ensemble(model)
    specs = (*_fit_specs(model, problem, solver, axis), _replicated(noise))
    dyn, static = eqx.partition((model, problem, solver, noise), eqx.is_array)
    entries: list = []

    def body(dyn):
        model_l, problem_l, solver_l, noise_l = eqx.combine(dyn, static)
        local = local_model(model_l, axis, size)
        if noise_l is not None:
            noise_l = noise_l.sharded(axis, size, columns=not ensemble)
        (trained, states), codes, found = _local_errors(
            program, local, problem_l, solver_l, keep, False, noise_l, axis=axis
        )
        entries[:] = found
        scale = trained.readout.data_scale
        if not ensemble:  # each device's columns
            scale = _gathered(scale, axis)
        return trained.readout.wout, scale, states, codes

    n_states = problem.init.ndim + keep
    wout, scale, states, codes = _shard_map(
        body,
        mesh,
        in_specs=(specs,),
        out_specs=(P(axis), P(), _at(n_states, -2, axis), P()),
    )(dyn)
    readout = model.readout.set_wout(wout).with_data_scale(scale)
    trained = model.set_readout(readout)
    return _report((trained, states), codes, entries)


def forecast_sharded(model, fcast_len: int, res_state, placed, backend=None):
    """``model.forecast(fcast_len, res_state)`` of a placed model (checked
    by the caller): the outputs ``(fcast_len, out_dim)``, replicated."""
    from ._divergence import report_divergence

    mesh, axis = placed
    owner = f"{type(model).__name__}.forecast"
    check_shardable(owner, model, int(mesh.shape[axis]))
    if model.readout.wout.is_fully_addressable:  # else on another host too
        warn_if_untrained(model, owner)
    model = _put_tree(model, _specs(model, model.driver.chunks, axis), mesh)
    res_state = put(res_state, mesh, P(axis))
    out = _forecast_sharded(model, fcast_len, res_state, mesh, axis, backend=backend)
    return report_divergence(
        owner, out, scale=getattr(model.readout, "data_scale", None)
    )


@compiled(host_results=True)  # read by report_divergence
def _forecast_sharded(model, fcast_len, res_state, mesh, axis):
    size = int(mesh.shape[axis])
    ensemble = _ensemble(model)
    res_state = check_finite(
        jnp.asarray(res_state, model.dtype), "res_state", type(model).__name__
    )
    dyn, static = eqx.partition(model, eqx.is_array)

    def body(dyn, r):
        local = local_model(eqx.combine(dyn, static), axis, size)
        out = local._closed_loop_scan(fcast_len, r)
        return out if ensemble else _gathered(out, axis, 1)

    specs = (_specs(model, model.driver.chunks, axis), P(axis))
    return _shard_map(body, mesh, specs, P())(dyn, res_state)


# --------------------------------------------------------------------------- #
# Populations
# --------------------------------------------------------------------------- #


def population_map(fn, replicated, members, mesh: Mesh, axis: str):
    """``fn(replicated, members)`` inside a compiled program, with the
    leading axis of ``members`` (the candidates; a multiple of the devices)
    placed along ``axis`` of ``mesh``: each device runs ``fn`` on its own
    candidates, with no communication; the results (leading axis the
    candidates) are gathered once at the end, for every process to read."""
    dyn, static = eqx.partition(replicated, eqx.is_array)

    def body(dyn, members):
        out = fn(eqx.combine(dyn, static), members)
        return jax.tree.map(lambda x: _gathered(x, axis), out)

    return _shard_map(body, mesh, (P(), P(axis)), P())(dyn, members)


def place_population(replicated, members, mesh: Mesh, axis: str):
    """``(replicated, members)`` laid out for :func:`population_map`."""
    return (
        _put_tree(replicated, _replicated(replicated), mesh),
        _put_tree(
            members,
            jax.tree.map(lambda _: P(axis), eqx.filter(members, eqx.is_array)),
            mesh,
        ),
    )
