"""Seeds for model construction.

Models are built on the host with numpy by default: drawing the random
weights is a one-off computation, and doing it in numpy avoids compiling
JAX's PRNG and eigen-solvers for every new shape (~2 s per shape on a CPU,
against ~70 ms for a 500-node build). ``construction="jax"`` draws them with
``jax.random`` instead (:func:`prng_key`, :mod:`orc._construct`), so a
model can be built inside ``jax.vmap``/``jit`` from a traced seed.
A seed may be an int (ORC's convention), a JAX PRNG key (typed or raw
``uint32[2]``), a numpy ``SeedSequence`` or ``Generator``.
"""

from __future__ import annotations

import numbers

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import device_array

__all__ = ["seed_sequence", "spawn", "numpy_rng", "jax_key", "prng_key", "flat_draw"]


def seed_sequence(seed, owner: str) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2**63))
    if isinstance(seed, jax.core.Tracer):
        raise TypeError(
            f"{owner}: seed is being traced by jax.jit/vmap; build models outside "
            "transformed functions (pass the built model into them instead)."
        )
    if isinstance(seed, jax.Array) and jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
        seed = jax.random.key_data(seed)
    if isinstance(seed, (jax.Array, np.ndarray)):
        data = np.asarray(seed)
        if not np.issubdtype(data.dtype, np.integer):
            raise TypeError(
                f"{owner}: seed must be an int or a JAX PRNG key, got {data.dtype}"
            )
        return np.random.SeedSequence([int(x) & 0xFFFFFFFF for x in data.ravel()])
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{owner}: seed must be an int or a JAX PRNG key, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{owner}: seed must be non-negative, got {seed}")
    return np.random.SeedSequence(int(seed))


def spawn(seed, n: int, owner: str) -> list[np.random.SeedSequence]:
    """``n`` independent child seeds (one per component)."""
    return seed_sequence(seed, owner).spawn(n)


def numpy_rng(seed, owner: str) -> np.random.Generator:
    return np.random.default_rng(seed_sequence(seed, owner))


def jax_key(seed, owner: str):
    """A JAX key derived from ``seed`` (for components built with JAX, e.g. the GRU)."""
    return jax.random.key(int(numpy_rng(seed, owner).integers(0, 2**31 - 1)))


def prng_key(seed, owner: str):
    """A typed JAX key for ``seed`` that can be traced (``construction="jax"``).

    An int seed gives ``jax.random.key(seed)``, a typed key is itself, raw key
    data (``uint32[2]``) is wrapped, an integer array (also a traced one,
    under ``vmap``) seeds a key; a numpy ``SeedSequence``/``Generator`` draws
    the int first. Unlike :func:`seed_sequence`, a traced seed is accepted:
    building under ``jax.vmap``/``jax.jit`` is what this is for.
    """
    if isinstance(seed, (np.random.SeedSequence, np.random.Generator)):
        return jax_key(seed, owner)
    if isinstance(seed, (jax.Array, np.ndarray)):
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
            return seed
        if not jnp.issubdtype(seed.dtype, jnp.integer):
            raise TypeError(
                f"{owner}: seed must be an int or a JAX PRNG key, got {seed.dtype}"
            )
        if seed.shape == (2,) and seed.dtype == jnp.uint32:
            return jax.random.wrap_key_data(seed)
        if seed.shape == ():
            return jax.random.key(seed)
        raise ValueError(
            f"{owner}: seed must be a scalar or uint32[2] key data, got shape "
            f"{seed.shape}"
        )
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{owner}: seed must be an int or a JAX PRNG key, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{owner}: seed must be non-negative, got {seed}")
    return jax.random.key(int(seed))


def seed_field(seed, owner: str):
    """The value a model stores as its ``seed`` attribute: data, not metadata.

    An int seed (ORC's convention) becomes a 0-d ``int32`` array (``uint32``
    words from 2**31 on), a JAX key its key data, so models that differ only
    in their seed have one pytree structure: they stack
    (``jax.tree.map(jnp.stack, *models)``), ``vmap`` together and share every
    compiled program. A numpy ``SeedSequence``/``Generator`` gives ``None``.
    """
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"{owner}: seed must be non-negative, got {seed}")
        if seed < 2**31:
            return device_array(seed, jnp.int32)
        words = []
        while seed:
            words.append(seed & 0xFFFFFFFF)
            seed >>= 32
        return jnp.asarray(words, jnp.uint32)
    if isinstance(seed, jax.core.Tracer):  # a model built under vmap/jit
        prng_key(seed, owner)  # checks it is a key or integer key data
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(seed)
        return seed
    if isinstance(seed, (jax.Array, np.ndarray)):
        seed_sequence(seed, owner)  # checks it is a key or integer key data
        if jnp.issubdtype(seed.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(seed)
        return jnp.asarray(seed)
    seed_sequence(seed, owner)  # raises TypeError for anything that is not a seed
    return None


def check_seed_field(value, owner: str) -> None:
    """A model's ``seed`` attribute is ``None`` or an integer array."""
    if value is None:
        return
    if not isinstance(value, (jax.Array, np.ndarray)) or not jnp.issubdtype(
        value.dtype, jnp.integer
    ):
        raise TypeError(
            f"{owner}: seed must be None or an integer array, got {value!r}"
        )


def flat_draw(sampler, key, shape, *args, **kwargs) -> jax.Array:
    """``sampler(key, shape, *args, **kwargs)`` drawn as one flat vector and
    reshaped: the same numbers, compiled faster.

    JAX's threefry counters run over the flattened shape in row-major order
    (in both its partitionable and its default mode), so the flat draw
    reshaped equals the draw of ``shape`` bit for bit (tested). XLA's CPU
    compiler, though, takes ~1.3 s for a ``(500, 10)`` draw against ~0.2 s
    for a ``(5000,)`` one (jax 0.10.2: the rolled threefry loop over a short
    minor axis), and the build of a model draws several such matrices.
    Array arguments of the sampler that broadcast against ``shape`` (e.g.
    ``randint``'s ``maxval``) must be given by keyword, and are broadcast
    and flattened alike.
    """
    shape = tuple(int(d) for d in shape)
    size = int(np.prod(shape, dtype=np.int64))
    flat = {
        name: jnp.broadcast_to(value, shape).reshape(size)
        if isinstance(value, (jax.Array, np.ndarray)) and value.ndim > 0
        else value
        for name, value in kwargs.items()
    }
    return sampler(key, (size,), *args, **flat).reshape(shape)
