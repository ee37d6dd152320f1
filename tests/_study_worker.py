"""One worker of an ``orc.tune.study`` for tests/test_tune_study.py, run as
a process of its own (``python tests/_study_worker.py CONFIG.json``) or
called in the test process (:func:`run`).

Every evaluation is logged, independently of the study, to a JSON-lines
file: a ``start`` line before the batch's search and an ``end`` line after
it, each with the process id and the batch's points. A batch is made slow
(``sleep`` seconds after its search) so that a test can kill the worker
while its trials are running.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import numpy as np

from _helpers import lorenz_rk4

U = np.asarray(lorenz_rk4(2400))
TRAIN, VAL = U[:1500], U[1500:]
FIXED = {"data_dim": 3, "res_dim": 40}
SEEDS = [0, 1]
RIDGE_POINTS = 3


def task():
    from orc.tune import Forecast

    return Forecast(TRAIN, VAL, spinup=50, warmup=60, horizon=40, windows=3,
                    metric="nrmse", dt=0.01, lyapunov_exponent=0.906)  # fmt: skip


def space():
    from orc.tune import LogUniform, Uniform

    return {
        "Wr_spectral_radius": Uniform(0.3, 1.2),
        "leak_rate": Uniform(0.2, 1.0),
        "embedding_scaling": LogUniform(0.02, 0.5),
        "bias": Uniform(0.0, 1.5),
    }


def beta():
    from orc.tune import LogUniform

    return LogUniform(1e-8, 1e-2)


def _log(path, event, points):
    line = json.dumps({"event": event, "pid": os.getpid(), "points": points})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())  # one write: whole lines
    finally:
        os.close(fd)


@contextlib.contextmanager
def logged(log, sleep=0.0, hang_at=None):
    """``orc.tune.study``'s search calls logged to ``log`` and followed by
    ``sleep`` seconds; the ``hang_at``-th (from 1) hangs after its search,
    for a test to kill the process there (evaluated, not yet told)."""
    import orc.tune._study as module

    original = module.search
    calls = []

    def search(*args, points, **kwargs):
        calls.append(None)
        _log(log, "start", points)
        out = original(*args, points=points, **kwargs)
        time.sleep(3600 if len(calls) == hang_at else sleep)
        _log(log, "end", points)
        return out

    module.search = search
    try:
        yield
    finally:
        module.search = original


def run(storage, study_name, n_trials, batch, log, sleep=0.0, hang_at=None,
        heartbeat=2, sampler="tpe"):  # fmt: skip
    import orc
    from orc.forecaster import ESNForecaster

    with logged(log, sleep, hang_at):
        return orc.tune.study(
            ESNForecaster, space(), task(), fixed=FIXED, seeds=SEEDS, beta=beta(),
            ridge_points=RIDGE_POINTS, sampler=sampler, n_trials=n_trials,
            batch=batch, storage=storage, study_name=study_name,
            heartbeat_interval=heartbeat, progress=False,
        )  # fmt: skip


if __name__ == "__main__":
    import jax

    # as the tests' process (tests/conftest.py)
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    with open(sys.argv[1]) as f:
        config = json.load(f)
    run(**config)
