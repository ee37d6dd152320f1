"""The fixture format shared by make_fixtures.py (run in ORC 0.4's environment)
and tests/test_orc04_construction.py (run in ours): how an array is digested and
how a reservoir case is named. numpy and hashlib only, so that both sides load
the same definitions whichever ``orc`` their environment has."""

from __future__ import annotations

import hashlib

import numpy as np


def digest(arr) -> str:
    """SHA-256 of an array's C-ordered bytes (integers widened to little-endian
    int64, so int32 and int64 indices digest alike)."""
    a = np.asarray(arr)
    if np.issubdtype(a.dtype, np.integer):
        a = a.astype("<i8")
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def case_name(res_dim, chunks, dtype, use_sparse, batch) -> str:
    """Key of one reservoir layout in the fixture index."""
    return f"r{res_dim}_c{chunks}_{dtype}_{'arn' if use_sparse else 'dense'}_b{batch}"
