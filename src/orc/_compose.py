"""Checks that an embedding, a driver and a readout fit together.

Run once when a model is built, on abstract shapes (``jax.eval_shape``), so a
mismatch is reported in terms of the components instead of failing later
inside a compiled loop.
"""

from __future__ import annotations

import collections

import jax
import numpy as np

__all__ = ["check_pipeline", "check_model", "check_esn_sizes"]


def check_esn_sizes(model) -> None:
    """The ESN models' own sizes agree with their components: ORC's
    ``data_dim`` is the model's input size, and a model's ``chunks`` (where it
    has one) is its driver's."""
    owner = type(model).__name__
    if model.data_dim != model.in_dim:
        raise ValueError(
            f"{owner}: data_dim ({model.data_dim!r}) must equal the input size "
            f"{model.in_dim}"
        )
    chunks = getattr(model, "chunks", None)
    if chunks is not None and chunks != model.driver.chunks:
        raise ValueError(
            f"{owner}: chunks ({chunks!r}) must equal driver.chunks "
            f"({model.driver.chunks})"
        )


def check_model(
    model,
    embedding_in_dim: int,
    feedback_dim: int | None,
    readout_input: tuple[int, ...] | None = None,
) -> None:
    """A model's invariants (its ``__check_init__``): components of the three
    base classes, the model's sizes equal to its components', and a pipeline
    that fits together (:func:`check_pipeline`). ``embedding_in_dim`` is what
    the embedding must accept; ``feedback_dim`` and ``readout_input`` as for
    :func:`check_pipeline`."""
    from ._random import check_seed_field
    from ._validation import check_dtype_field
    from .drivers import DriverBase
    from .embeddings import EmbedBase
    from .readouts import ReadoutBase

    owner = type(model).__name__
    for name, base in (
        ("driver", DriverBase),
        ("readout", ReadoutBase),
        ("embedding", EmbedBase),
    ):
        if not isinstance(getattr(model, name), base):
            raise TypeError(
                f"{owner}: {name} must be a {base.__name__}, got "
                f"{type(getattr(model, name)).__name__}"
            )
    sizes = (
        ("embedding.in_dim", model.embedding.in_dim, embedding_in_dim),
        ("out_dim", model.out_dim, model.readout.out_dim),
        ("res_dim", model.res_dim, model.driver.res_dim),
    )
    for name, have, want in sizes:
        if have != want:
            raise ValueError(f"{owner}: {name} is {have!r} but must be {want!r}")
    check_dtype_field(owner, model.dtype)
    check_seed_field(getattr(model, "seed", None), owner)
    check_pipeline(
        owner,
        model.embedding,
        model.driver,
        model.readout,
        feedback_dim,
        readout_input,
    )


def check_pipeline(
    owner: str,
    embedding,
    driver,
    readout,
    feedback_dim: int | None,
    readout_input: tuple[int, ...] | None = None,
) -> None:
    """Embedding output drives the driver, and the readout reads its state.

    ``feedback_dim``: the readout output is fed back into the embedding (a
    forecaster or controller), so ``readout.out_dim`` must equal it.
    ``readout_input``: the shape the readout reads when it is not the
    driver's state (a classifier's feature vector, e.g. ``(3 * res_dim,)``).
    """
    key = _pipeline_key(owner, embedding, driver, readout, feedback_dim, readout_input)
    if key is not None and key in _PASSED:
        _PASSED.move_to_end(key)
        return
    _check_pipeline(owner, embedding, driver, readout, feedback_dim, readout_input)
    if key is not None:
        _PASSED[key] = None
        if len(_PASSED) > _PASSED_SIZE:
            _PASSED.popitem(last=False)


# Pipelines that passed, by structure and leaf shapes: tracing the three
# components with eval_shape is most of the Python cost of building a small
# model (~3 ms of ~50 at 500 nodes), and its outcome depends on nothing else
# (abstract evaluation sees shapes and dtypes, never values).
_PASSED: collections.OrderedDict = collections.OrderedDict()
_PASSED_SIZE = 256


def _pipeline_key(*parts):
    """``(treedef, leaf shapes and dtypes)`` of ``parts``, or None where a
    part is not hashable (then the check runs every time)."""
    leaves, treedef = jax.tree.flatten(parts)
    sig = []
    for leaf in leaves:
        if isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
            sig.append((np.shape(leaf), np.dtype(leaf.dtype)))
        else:
            sig.append((type(leaf), leaf))
    key = (treedef, tuple(sig))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _check_pipeline(
    owner, embedding, driver, readout, feedback_dim, readout_input=None
) -> None:
    state = jax.eval_shape(driver.default_state)
    u = jax.ShapeDtypeStruct((embedding.in_dim,), embedding.dtype)
    try:
        proj = jax.eval_shape(embedding.embed, u)
    except Exception as err:  # noqa: BLE001 - report whatever the component raised
        raise ValueError(
            f"{owner}: the embedding cannot embed an input of shape ({embedding.in_dim},): "
            f"{err}"
        ) from err
    try:
        nxt = jax.eval_shape(driver.advance, proj, state)
    except Exception as err:  # noqa: BLE001
        raise ValueError(
            f"{owner}: the embedding's output {tuple(proj.shape)} does not fit the driver "
            f"(embedding.res_dim={embedding.res_dim}, driver.res_dim={driver.res_dim}, "
            f"driver state {tuple(state.shape)}): {err}"
        ) from err
    if nxt.shape != state.shape:
        raise ValueError(
            f"{owner}: driver.advance returns shape {tuple(nxt.shape)} but its state has "
            f"shape {tuple(state.shape)}"
        )
    read, what = state, "the driver's state"
    if readout_input is not None:
        read = jax.ShapeDtypeStruct(tuple(readout_input), state.dtype)
        what = "the model's feature vector"
    try:
        y = jax.eval_shape(readout.readout, read)
    except Exception as err:  # noqa: BLE001
        raise ValueError(
            f"{owner}: the readout cannot read {what} {tuple(read.shape)} "
            f"(readout.res_dim={readout.res_dim}, driver.res_dim={driver.res_dim}): {err}"
        ) from err
    if y.shape != (readout.out_dim,):
        raise ValueError(
            f"{owner}: readout returns shape {tuple(y.shape)}, expected "
            f"(readout.out_dim,) = ({readout.out_dim},)"
        )
    if feedback_dim is not None and readout.out_dim != feedback_dim:
        raise ValueError(
            f"{owner}: readout.out_dim ({readout.out_dim}) must equal the fed-back input "
            f"dimension ({feedback_dim}): the readout's output is the next input"
        )
