"""The component view ORC 0.4 users read (shapes, per-chunk matrices),
checked against what the compute path uses.

ORC 0.4 reports a parallel driver's ``wr`` as ``(chunks, N, N)`` and
``todense()`` gives every chunk's matrix (tests/data/orc04_construction/
components.json, written by ORC 0.4 itself, records it); ours once reported
``(N, N)`` and returned one matrix for three stored ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import orc

FACTS = json.loads(
    (
        Path(__file__).parent / "data" / "orc04_construction" / "components.json"
    ).read_text()
)["components"]


@pytest.mark.parametrize("chunks", [1, 3])
def test_parallel_driver_reports_every_chunk(chunks):
    n = 50
    d = orc.drivers.ParallelESNDriver(n, chunks=chunks, spectral_radius=0.7, seed=2)
    assert d.wr.shape == (chunks, n, n)
    dense = np.asarray(d.wr.todense())
    assert dense.shape == (chunks, n, n)
    assert d.wr.nse == n * np.count_nonzero(dense[0], axis=1)[0]
    # each chunk's dense matrix is the one the update uses
    rng = np.random.default_rng(0)
    r = rng.standard_normal((chunks, n)) * 0.5
    p = rng.standard_normal((chunks, n)) * 0.5
    got = np.asarray(d.advance(jnp.asarray(p), jnp.asarray(r)))
    want = 0.4 * r + 0.6 * np.tanh(np.einsum("cij,cj->ci", dense, r) + p + 1.6)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # and each has the requested spectral radius (n <= 200: exact)
    for c in range(chunks):
        rho = np.max(np.abs(np.linalg.eigvals(dense[c])))
        np.testing.assert_allclose(rho, 0.7, rtol=1e-6)
    # different chunks are different reservoirs
    if chunks > 1:
        assert not np.array_equal(dense[0], dense[1])


def test_orc_records_the_same_shapes_for_parallel_drivers():
    """The shapes ORC 0.4 recorded for ParallelESNDriver(res_dim=50, chunks=3)."""
    wr = FACTS["ParallelESNDriver(res_dim=50, chunks=3)"]["attributes"]["wr"]
    ours = orc.drivers.ParallelESNDriver(50, chunks=3, seed=0)
    assert tuple(wr["shape"]) == ours.wr.shape == (3, 50, 50)
    assert wr["nse"] == ours.wr.nse == 50  # density 0.02: one entry per row
