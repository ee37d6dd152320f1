"""The native kernels leave process-wide settings alone.

BLAS's thread count is the process's (OpenBLAS has no per-call setting in the
builds SciPy ships): the fused training fit runs its Gram on orc's own kernel
beside the reservoir instead of limiting BLAS to one thread for the call, so
another thread of the program sees BLAS's threads unchanged while orc trains.
"""

from __future__ import annotations

import threading

import jax
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4, on_cpu
from orc import _native

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture(autouse=True)
def _cpu_device():
    """These tests are about the CPU kernels: run them on the CPU device also
    where the default device is a GPU."""
    with on_cpu():
        yield


pytestmark = pytest.mark.skipif(
    not _native.native_available(), reason="native kernels off (ORC_NATIVE=0)"
)


def _blas_threads() -> dict[str, int]:
    return {
        f"{i['internal_api']}:{i['filepath']}": i["num_threads"]
        for i in threadpoolctl.threadpool_info()
        if i["user_api"] == "blas"
    }


def test_training_never_changes_blas_threads():
    # 400 features, 4000 steps: the fit overlaps the run with the Gram on two
    # threads (where the machine has two cores), the case that used to set
    # OpenBLAS to one thread for the call
    u = jax.numpy.asarray(lorenz_rk4(4200))
    model = orc.forecaster.ESNForecaster(3, 400, seed=0)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and all(n == 2 for n in before.values()), before
        seen: list[dict[str, int]] = []
        stop = threading.Event()

        def watch():  # jax releases the GIL while the kernels run
            while not stop.is_set():
                seen.append(_blas_threads())

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            for _ in range(3):
                trained, _ = orc.forecaster.train_RCForecaster(model, u, spinup=100)
                jax.block_until_ready(trained.readout.wout)
        finally:
            stop.set()
            watcher.join()
        after = _blas_threads()
    assert after == before
    assert len(seen) >= 2
    changed = [s for s in seen if s != before]
    assert not changed, changed[:3]
    assert np.isfinite(np.asarray(trained.readout.wout)).all()
