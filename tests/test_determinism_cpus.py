"""Same bits under any CPU limit and either state mode (issue 47 item 10).

A training's readout must not depend on how many CPUs the process may use
(XLA's thread pool and OpenBLAS size themselves from the CPU affinity at
process start) nor on whether the states are kept (``return_states``). The
CPU tests run the same trainings in two fresh processes, one pinned to CPU 0
and one to CPUs 0 and 1 (``os.sched_setaffinity`` before anything imports
numpy or jax), and compare the weights bit for bit; the state-mode tests
train twice in this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import CPU_ONLY, lorenz_rk4
from orc import _native, _ridge
from orc.forecaster import (
    ESNForecaster,
    train_ESNForecaster,
    train_RCForecaster,
)

pytestmark = CPU_ONLY

NATIVE = pytest.mark.skipif(
    not _native.native_available(), reason="native kernels off (ORC_NATIVE=0)"
)

# The child: pin the CPUs first (the thread pools size themselves when numpy
# and jax load), then train on the parent's data and save every result.
_CHILD = textwrap.dedent(
    """
    import os, sys
    os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(",")})
    data, out = sys.argv[2], sys.argv[3]
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    import orc
    from orc import _native, _ridge
    from orc.forecaster import (
        ESNForecaster, NVARForecaster, train_ESNForecaster, train_NVARForecaster
    )

    u = jnp.asarray(np.load(data))
    res = {"threads": np.array(len(os.sched_getaffinity(0)))}
    native = _native.native_available()
    # XLA's products and solve: the Gram over 2900 rows and a solve of 100
    # features; a separate solve of 200 (LAPACK's potrf splits by threads
    # from 128 on)
    model = ESNForecaster(3, 100, seed=0)
    for keep in (True, False):
        trained, _ = train_ESNForecaster(
            model, u, spinup=100, backend="xla", return_states=keep
        )
        res[f"esn_xla_{keep}"] = np.asarray(trained.readout.wout)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((260, 200))
    gram = jnp.asarray(x.T @ x)
    cross = jnp.asarray(rng.standard_normal((200, 3)))
    stats = _ridge.RidgeStats(gram, cross, jnp.asarray(260.0))
    with orc.use_backend("xla"):
        res["solve_xla"] = np.asarray(jax.jit(lambda s: _ridge.solve(s, 1e-6))(stats))
    if native:
        # the native backend right after XLA's (a program of its own, as
        # orc's entry points compile one per backend): the traces orc caches
        # inside it must not serve the other backend
        with orc.use_backend("native"):
            solve = jax.jit(lambda s: _ridge.solve(s, 1e-6))
            res["solve_native"] = np.asarray(solve(stats))
        target = _native.ridge_solve_target(jnp.float64)
        direct = jax.jit(lambda g, c: _ridge._solve_native(g, c, 1e-6, target))
        res["solve_native_direct"] = np.asarray(direct(gram, cross)[0]).T
        # orc's Gram kernel (100 features) and BLAS (40, below 64)
        for n in (100, 40):
            for keep in (True, False):
                trained, _ = train_ESNForecaster(
                    ESNForecaster(3, n, seed=0), u, spinup=100,
                    backend="native", return_states=keep,
                )
                res[f"esn{n}_native_{keep}"] = np.asarray(trained.readout.wout)
    # NVAR with its default training noise (drawn beside its targets)
    nvar, _ = train_NVARForecaster(NVARForecaster(3), u)
    res["nvar"] = np.asarray(nvar.wout)
    np.savez(out, **res)
    """
)


def _affinity_ok() -> bool:
    return hasattr(os, "sched_setaffinity") and {0, 1} <= os.sched_getaffinity(0)


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    """The child's results on CPU {0} and on CPUs {0, 1}."""
    if not _affinity_ok():
        pytest.skip("needs CPUs 0 and 1 and os.sched_setaffinity")
    tmp = tmp_path_factory.mktemp("cpus")
    data = tmp / "u.npy"
    np.save(data, lorenz_rk4(3000))
    out = {}
    for cpus in ("0", "0,1"):
        path = tmp / f"out_{cpus.replace(',', '_')}.npz"
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, cpus, str(data), str(path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        out[cpus] = dict(np.load(path))
    assert out["0"]["threads"] == 1 and out["0,1"]["threads"] == 2
    return out


def _same_bits(pinned, key):
    one, two = pinned["0"][key], pinned["0,1"][key]
    assert one.shape == two.shape
    assert np.all(np.isfinite(one))
    assert np.array_equal(one, two), (
        f"{key}: one CPU and two CPUs differ by "
        f"{np.abs(one - two).max() / np.abs(two).max():.2e} (relative)"
    )


def test_xla_backend_training_and_solve_same_bits_on_one_or_two_cpus(pinned):
    for key in ("esn_xla_True", "esn_xla_False", "solve_xla"):
        _same_bits(pinned, key)
    # the two state modes of the XLA backend agree too
    assert np.array_equal(pinned["0"]["esn_xla_True"], pinned["0"]["esn_xla_False"])


@NATIVE
def test_native_training_same_bits_on_one_or_two_cpus(pinned):
    for key in (
        "esn100_native_True",
        "esn100_native_False",
        "esn40_native_True",
        "esn40_native_False",
        "solve_native",
    ):
        _same_bits(pinned, key)
    for n in (100, 40):
        assert np.array_equal(
            pinned["0,1"][f"esn{n}_native_True"], pinned["0,1"][f"esn{n}_native_False"]
        )


@NATIVE
def test_native_solve_after_xla_solve_is_the_native_kernels(pinned):
    # the same jitted function, first traced under the XLA backend: the
    # native backend's call must run the native kernel, not XLA's trace
    for cpus in ("0", "0,1"):
        res = pinned[cpus]
        assert np.array_equal(res["solve_native"], res["solve_native_direct"])
    np.testing.assert_allclose(
        pinned["0"]["solve_native"], pinned["0"]["solve_xla"], rtol=1e-6, atol=1e-9
    )


def test_nvar_same_bits_on_one_or_two_cpus(pinned):
    _same_bits(pinned, "nvar")


# --------------------------------------------------------------------------- #
# Both state modes
# --------------------------------------------------------------------------- #


@pytest.fixture(scope="module")
def u_long():
    return jnp.asarray(lorenz_rk4(9000))


@pytest.mark.parametrize(
    "backend",
    ["xla", pytest.param("native", marks=NATIVE)],
)
def test_both_state_modes_same_bits(u_long, backend):
    # 9000 rows: three streaming blocks of 4096; spinup 300 is no multiple
    # of the row groups (256), so groups cross the blocks' edges
    model = ESNForecaster(3, 80, seed=1)
    kept, states = train_ESNForecaster(
        model, u_long, spinup=300, backend=backend, return_states=True
    )
    streamed, last = train_ESNForecaster(
        model, u_long, spinup=300, backend=backend, return_states=False
    )
    assert np.array_equal(np.asarray(states[-1]), np.asarray(last))
    assert np.array_equal(
        np.asarray(kept.readout.wout), np.asarray(streamed.readout.wout)
    )


@NATIVE
@pytest.mark.parametrize("spinup", [300, 7000])
def test_a_training_without_states_stores_none(u_long, spinup):
    # return_states=False: the fused fit keeps the last state only (its rows
    # pass through a ring of 8 blocks of 256 rows, which these 9000 rows go
    # round four times; spinup 7000 starts the fit past the ring's first lap)
    # and is the bits of the training that keeps them
    model = ESNForecaster(3, 100, seed=4)
    kept, states = train_ESNForecaster(model, u_long, spinup=spinup)
    ringed, last = train_ESNForecaster(
        model, u_long, spinup=spinup, return_states=False
    )
    assert np.array_equal(np.asarray(states[-1]), np.asarray(last))
    assert np.array_equal(
        np.asarray(kept.readout.wout), np.asarray(ringed.readout.wout)
    )
    text = (
        jax.jit(
            lambda m, u: train_ESNForecaster(m, u, spinup=spinup, return_states=False)
        )
        .lower(model, u_long)
        .as_text()
    )
    calls = [line for line in text.splitlines() if "orc_esn_fit" in line]
    assert calls, "the training without states did not run the fused fit"
    # the kernel's first result is its states: one row of (chunks, res_dim)
    assert all("-> (tensor<1x1x100xf64>" in line for line in calls), calls


@NATIVE
def test_both_state_modes_same_bits_with_computed_features(u_long):
    # a quadratic readout with state noise: the features are computed block
    # by block in both modes (the noise drawn per block), below 64 features
    # per chunk (BLAS), three chunks
    model = ESNForecaster(3, 40, chunks=3, locality=1, quadratic=True, seed=2)
    runs = [
        train_RCForecaster(
            model,
            u_long[:6000],
            spinup=4100,
            state_noise=1e-3,
            return_states=keep,
        )[0]
        for keep in (True, False)
    ]
    w = [np.asarray(r.readout.wout) for r in runs]
    assert np.all(np.isfinite(w[0]))
    assert np.array_equal(w[0], w[1])


@pytest.mark.parametrize(
    "backend",
    ["xla", pytest.param("native", marks=NATIVE)],
)
@pytest.mark.parametrize("features", [30, 100])
def test_stats_update_split_at_a_group_edge_is_the_same_bits(backend, features):
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((1500, features)))
    y = jnp.asarray(rng.standard_normal((1500, 2)))
    zero = _ridge.RidgeStats.zeros(features, 2, None, jnp.float64)
    cut = 70 + 3 * _ridge.STATS_GROUP

    @jax.jit
    def both(x, y):
        whole = _ridge.stats_update(zero, x, y, 70, 1400)
        split = _ridge.stats_update(
            _ridge.stats_update(zero, x, y, 70, cut), x[cut:], y[cut:], 0, 1400 - cut
        )
        return whole, split

    with orc.use_backend(backend):
        whole, split = both(x, y)
    upper = np.triu_indices(features)
    assert np.array_equal(np.asarray(whole.gram)[upper], np.asarray(split.gram)[upper])
    assert np.array_equal(np.asarray(whole.cross), np.asarray(split.cross))
    xs, ys = np.asarray(x)[70:1400], np.asarray(y)[70:1400]
    np.testing.assert_allclose(
        np.asarray(whole.gram)[upper], (xs.T @ xs)[upper], rtol=1e-12, atol=1e-9
    )
    np.testing.assert_allclose(np.asarray(whole.cross), xs.T @ ys, atol=1e-9)


@pytest.mark.parametrize("n", [64, 200, 333])
def test_panel_cholesky_solve_matches_numpy(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n + 30, n))
    g = a.T @ a + 1e-3 * np.eye(n)
    b = rng.standard_normal((n, 4))
    factor = jax.jit(_ridge._cholesky_panels)(jnp.asarray(g))
    x = jax.jit(_ridge._cho_solve_panels)(factor, jnp.asarray(b))
    ref = np.linalg.cholesky(g)
    np.testing.assert_allclose(np.asarray(factor), ref, atol=1e-10 * np.abs(ref).max())
    np.testing.assert_allclose(
        np.asarray(x), np.linalg.solve(g, b), rtol=1e-8, atol=1e-10
    )
    # not positive definite in a late block: NaN, which the solve turns into
    # its fallback
    bad = g.copy()
    bad[n - 3, n - 3] = -1.0
    assert np.isnan(
        np.asarray(jax.jit(_ridge._cholesky_panels)(jnp.asarray(bad)))
    ).any()
