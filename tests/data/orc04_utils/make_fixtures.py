"""Regenerate ``fixtures.npz``: outputs of ORC 0.4's ``orc.utils`` helpers.

Run with an interpreter that has ORC 0.4 installed (PyPI
``openreservoircomputing==0.4.0``), never the one with this project::

    python3 -m venv /tmp/orc04u
    /tmp/orc04u/bin/pip install openreservoircomputing==0.4.0
    /tmp/orc04u/bin/python tests/data/orc04_utils/make_fixtures.py

Inputs are small integers (int16) scaled by a power-of-ten divisor in float64,
so they are stored exactly in a few KB and rebuilt bit for bit by the test
(``ints / SCALE``, one correctly rounded division).
"""

from __future__ import annotations

import importlib.metadata
import inspect
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from orc.utils.numerics import _arnoldi_iteration, max_eig_arnoldi  # noqa: E402
from orc.utils.regressions import (  # noqa: E402
    _solve_all_ridge_reg,
    _solve_all_ridge_reg_batched,
    ridge_regression,
)

OUT = Path(__file__).with_name("fixtures.npz")
T, C, F, O = 50, 3, 8, 2  # samples, chunks, features, outputs
N = 20  # matrix size for the Arnoldi helpers
BETAS = (1e-7, 1e-2, 10.0)
BATCHES = (1, 2)  # batch sizes below the chunk count (2 leaves a remainder)
ARNOLDI = ((6, 0), (6, 7), (20, 0))  # (max_iters, seed)
HELPERS = {
    "ridge_regression": ridge_regression,
    "_solve_all_ridge_reg": _solve_all_ridge_reg,
    "_solve_all_ridge_reg_batched": _solve_all_ridge_reg_batched,
    "_arnoldi_iteration": _arnoldi_iteration,
    "max_eig_arnoldi": max_eig_arnoldi,
}


def signature(fn) -> str:
    """``"a,b=1e-07"``: parameter names and defaults."""
    return ",".join(
        p.name if p.default is p.empty else f"{p.name}={p.default!r}"
        for p in inspect.signature(fn).parameters.values()
    )


def main() -> None:
    assert importlib.metadata.version("openreservoircomputing") == "0.4.0"
    rng = np.random.default_rng(20240404)
    x_int = rng.integers(-1000, 1001, (T, C, F)).astype(np.int16)
    y_int = rng.integers(-1000, 1001, (T, C, O)).astype(np.int16)
    a_int = rng.integers(-1000, 1001, (N, N)).astype(np.int16)
    x = jnp.asarray(x_int / 1000.0)
    y = jnp.asarray(y_int / 1000.0)
    a = jnp.asarray(a_int / 4000.0)  # spectral radius ~ 1

    out: dict[str, np.ndarray] = {
        "x_int": x_int,
        "y_int": y_int,
        "a_int": a_int,
        "betas": np.asarray(BETAS),
        "batches": np.asarray(BATCHES),
        "arnoldi": np.asarray(ARNOLDI),
        "orc_version": np.asarray("0.4.0"),
        "jax_version": np.asarray(jax.__version__),
    }
    out["signatures"] = np.asarray(
        [f"{name}({signature(fn)})" for name, fn in HELPERS.items()]
    )
    # regressions
    out["ridge_chunk0"] = np.asarray(ridge_regression(x[:, 0], y[:, 0], 1e-2))
    out["all"] = np.stack([_solve_all_ridge_reg(x, y, b) for b in BETAS])
    out["all_f32"] = np.asarray(
        _solve_all_ridge_reg(x.astype(jnp.float32), y.astype(jnp.float32), 1e-2)
    )
    out["batched"] = np.stack(
        [_solve_all_ridge_reg_batched(x, y, 1e-2, bs) for bs in BATCHES]
    )
    # numerics: Q and H of the first Arnoldi run (the others only as their
    # largest Ritz value, to keep the file small)
    q, h = _arnoldi_iteration(a, *ARNOLDI[0])
    out["arnoldi_q"], out["arnoldi_h"] = np.asarray(q), np.asarray(h)
    out["max_eig"] = np.stack([max_eig_arnoldi(a, k, s) for k, s in ARNOLDI])
    # default max_iters=200 > N: ORC does not cap the Krylov dimension at the
    # matrix size, so past N its basis is rounding noise (here the value still
    # comes out right; on other matrices it is NaN)
    out["max_eig_default"] = np.asarray(max_eig_arnoldi(a))
    q32, h32 = _arnoldi_iteration(a.astype(jnp.float32), *ARNOLDI[0])
    out["arnoldi_h_f32"] = np.asarray(h32)
    out["arnoldi_q_f32_dtype"] = np.asarray(str(q32.dtype))
    out["max_eig_f32"] = np.asarray(max_eig_arnoldi(a.astype(jnp.float32), 6, 0))
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
