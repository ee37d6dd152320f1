"""The persistent-kernel experiment (benchmarks/gpu_persistent.py, issue 21)
compiles for Hopper wherever NVRTC's library is found (no GPU needed); its
results are checked against orc's scan on a GPU by the benchmark itself."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_persistent  # noqa: E402


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("lanes", [4, 8, 32])
def test_kernel_compiles(dtype, lanes):
    try:
        log = gpu_persistent.compile_check(dtype, lanes)
    except OSError as e:
        pytest.skip(str(e))
    assert "warning" not in log, log  # e.g. a variable left unused


def test_compile_errors_carry_the_log():
    try:
        gpu_persistent._nvrtc()
    except OSError as e:
        pytest.skip(str(e))
    with pytest.raises(RuntimeError, match="NVRTC could not compile"):
        gpu_persistent.compile_check("float64", 3)  # threads per row: a power of two
