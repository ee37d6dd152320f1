"""The users' own notebook contract (../shared/spec/seed_jit_compat.py), run unchanged.

It runs in a fresh interpreter, exactly as a user would run it, and must end
with 'SEED OK'. The spec lives beside the repository; a copy of it is not kept
here so that it can never drift from the users' version.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "seed_jit_compat.py"


@pytest.mark.skipif(not SPEC.exists(), reason=f"users' spec not found at {SPEC}")
def test_users_seed_notebook_passes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAX_NUMPY_DTYPE_PROMOTION"}
    proc = subprocess.run(
        [sys.executable, str(SPEC)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert out.strip().splitlines()[-1] == "SEED OK", out
