"""Checks that an embedding, a driver and a readout fit together.

Run once when a model is built, on abstract shapes (``jax.eval_shape``), so a
mismatch is reported in terms of the components instead of failing later
inside a compiled loop.
"""

from __future__ import annotations

import jax

__all__ = ["check_pipeline"]


def check_pipeline(
    owner: str, embedding, driver, readout, feedback_dim: int | None
) -> None:
    """Embedding output drives the driver, and the readout reads its state.

    ``feedback_dim``: the readout output is fed back into the embedding (a
    forecaster or controller), so ``readout.out_dim`` must equal it.
    """
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
    try:
        y = jax.eval_shape(readout.readout, state)
    except Exception as err:  # noqa: BLE001
        raise ValueError(
            f"{owner}: the readout cannot read the driver's state {tuple(state.shape)} "
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
