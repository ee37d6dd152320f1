"""Models are data: seeds stack, populations vmap through training and
forecasting, every seed shares one compiled program, and training is
reproducible bit for bit (run to run, process to process, on one thread or
two, and for an ensemble against its members trained alone)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import BATCHED, CPU_ONLY, ON_CPU, count_compiles, lorenz_rk4

U = np.asarray(lorenz_rk4(4000))  # numpy: its slices compile nothing


@CPU_ONLY
def test_models_of_different_seeds_stack_and_vmap():
    """Eight ESNs that differ only in their seed stack into one pytree, and one
    ``eqx.filter_vmap`` trains and forecasts all of them: the same numbers as
    eight separate trainings (bit for bit here; the issue asks 1e-10)."""
    models = [orc.forecaster.ESNForecaster(3, 300, seed=s) for s in range(8)]
    stacked = jax.tree.map(lambda *x: np.stack(x), *models)
    assert stacked.driver.wr.values.shape[0] == 8
    np.testing.assert_array_equal(stacked.seed, np.arange(8))

    @eqx.filter_vmap(in_axes=(eqx.if_array(0), None))
    def train_and_forecast(model, data):
        model, R = orc.forecaster.train_RCForecaster(model, data[:2000], spinup=100)
        return model.readout.wout, model.forecast(100, R[-1])

    W, F = (np.asarray(x) for x in train_and_forecast(stacked, U))
    assert W.shape == (8, 1, 3, 300) and F.shape == (8, 100, 3)
    for s, model in enumerate(models):
        trained, R = orc.forecaster.train_RCForecaster(model, U[:2000], spinup=100)
        np.testing.assert_allclose(W[s], trained.readout.wout, rtol=0, atol=1e-10)
        np.testing.assert_allclose(
            F[s], trained.forecast(100, R[-1]), rtol=0, atol=1e-10
        )
    # different seeds are different reservoirs, not copies
    assert not np.array_equal(W[0], W[1])


@CPU_ONLY  # bit identity; on a GPU the ill-conditioned solve (beta 1e-8) shows 1e-3
def test_hyperparameters_are_data_a_population_vmaps_over_them():
    """Models that differ in leak, spectral radius, bias and input scaling
    (and seed), each with its own ridge strength: one stacked pytree, one
    vmapped training and forecast equal to the separate ones; and every new
    set of hyperparameter values reuses the compiled programs."""
    hyper = [
        dict(leak_rate=0.3, Wr_spectral_radius=0.5, bias=0.2, embedding_scaling=0.05),
        dict(leak_rate=0.6, Wr_spectral_radius=0.8, bias=1.6, embedding_scaling=0.08),
        dict(leak_rate=0.9, Wr_spectral_radius=1.1, bias=0.0, embedding_scaling=0.2),
    ]
    models = [
        orc.forecaster.ESNForecaster(3, 80, seed=s, **h) for s, h in enumerate(hyper)
    ]
    betas = jnp.asarray([1e-8, 1e-6, 1e-4])
    stacked = jax.tree.map(lambda *x: np.stack(x), *models)
    np.testing.assert_array_equal(stacked.driver.leak, [0.3, 0.6, 0.9])
    np.testing.assert_array_equal(stacked.driver.spectral_radius, [0.5, 0.8, 1.1])

    def fit(model, beta):
        model, R = orc.forecaster.train_RCForecaster(
            model, U[:1000], spinup=50, beta=beta
        )
        return model.readout.wout, model.forecast(50, R[-1])

    W, F = (np.asarray(x) for x in eqx.filter_vmap(fit)(stacked, betas))
    for i, model in enumerate(models):
        w, f = fit(model, betas[i])
        np.testing.assert_allclose(W[i], w, rtol=0, atol=1e-10)
        np.testing.assert_allclose(F[i], f, rtol=0, atol=1e-10)
    # a new set of values is new data for the same programs
    other = orc.forecaster.ESNForecaster(
        3, 80, seed=7, leak_rate=0.45, Wr_spectral_radius=0.7, bias=0.9
    )
    beta = jnp.asarray([3e-7])[0]
    with count_compiles() as c:
        jax.block_until_ready(fit(other, beta))
    assert c["compiles"] == 0, c


def test_a_population_builds_under_vmap_with_the_jax_construction(tmp_path):
    """``construction="jax"`` draws the reservoir and input weights with
    ``jax.random`` from a key (orc._construct), so one ``eqx.filter_vmap``
    builds a whole population from an array of seeds: member ``i`` is, bit for
    bit on a CPU, the model built alone with seed ``i``, has the requested spectral
    radius, and trains and forecasts under the same vmap as alone."""
    seeds = jnp.arange(4)

    def build(seed):
        return orc.forecaster.ESNForecaster(3, 60, seed=seed, construction="jax")

    population = eqx.filter_vmap(build)(seeds)
    alone = [build(int(s)) for s in seeds]
    assert population.driver.wr.values.shape == (4, 1, 60, 1)
    for i, model in enumerate(alone):
        member = jax.tree.map(lambda x, i=i: np.asarray(x)[i], population)
        assert jax.tree.structure(member) == jax.tree.structure(model)
        for a, b in zip(jax.tree.leaves(member), jax.tree.leaves(model), strict=True):
            if ON_CPU:
                np.testing.assert_array_equal(a, b)
            else:  # the batched spectral-radius iteration rounds in another order
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
        rho = np.abs(np.linalg.eigvals(np.asarray(model.driver.wr.todense()[0])))
        assert abs(rho.max() - 0.8) < 1e-6
    assert not np.array_equal(alone[0].driver.wr.values, alone[1].driver.wr.values)
    # a key is a seed too: the int seed s is jax.random.key(s)
    keyed = build(jax.random.key(2))
    np.testing.assert_array_equal(keyed.driver.wr.values, alone[2].driver.wr.values)

    def fit(model):
        # a well-conditioned solve: off CPU the members' matrices differ from
        # those built alone in the last bits (above), which ORC's beta of 1e-8
        # amplified to 2e-6 in the forecasts on an H200
        model, R = orc.forecaster.train_RCForecaster(
            model, U[:800], spinup=50, beta=1e-4
        )
        return model.forecast(30, R[-1])

    together = np.asarray(eqx.filter_vmap(fit)(population))
    for i, model in enumerate(alone):
        np.testing.assert_allclose(together[i], fit(model), **BATCHED)
    # saved and loaded as it was built
    orc.save(tmp_path / "m.orc", alone[1])
    loaded = orc.load(tmp_path / "m.orc")
    assert loaded.driver.construction == "jax"
    np.testing.assert_array_equal(loaded.driver.wr.values, alone[1].driver.wr.values)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_distinct_seeds_compile_once_and_memory_stays_flat():
    """40 models with distinct seeds: training and forecasting compile for the
    first only, and resident memory does not grow with the number of seeds
    (each seed used to add its own programs: +177 MB over 40 models)."""
    data = U[:600]
    compiles, rss = [], []
    for seed in range(40):
        model = orc.forecaster.ESNForecaster(3, 100, seed=seed)
        with count_compiles() as c:
            model, R = orc.forecaster.train_RCForecaster(model, data, spinup=50)
            jax.block_until_ready(model.forecast(50, R[-1]))
        compiles.append(c["compiles"])
        rss.append(_rss_mib())
    assert compiles[0] > 0 and sum(compiles[1:]) == 0, compiles
    assert rss[-1] - rss[4] < 16, [round(r) for r in rss]


def test_training_twice_in_one_process_is_bit_identical():
    model = orc.forecaster.ESNForecaster(3, 1000, seed=1)
    first = orc.forecaster.train_ESNForecaster(model, U[:4000], spinup=100)[0]
    second = orc.forecaster.train_ESNForecaster(model, U[:4000], spinup=100)[0]
    np.testing.assert_array_equal(first.readout.wout, second.readout.wout)


_TRAIN = textwrap.dedent(
    """
    import sys, jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import orc
    U = jax.numpy.asarray(orc.data.lorenz63(tN=40, dt=0.01)[0])
    model = orc.forecaster.ESNForecaster(3, 1000, seed=1)
    trained = orc.forecaster.train_ESNForecaster(model, U[:4000], spinup=100)[0]
    np.save(sys.argv[1], np.asarray(trained.readout.wout))
    # the fused fit's statistics themselves (run + Gram + cross products)
    from orc._kernels import _native_run_stats as _esn_fit_native
    n, f64 = 1000, jax.numpy.float64
    z = lambda *shape: jax.numpy.zeros(shape, f64)
    operands = (
        model.driver.wr.values, model.driver.wr.columns, model.embedding.win,
        U[:3999, None, :], z(), z(1, n), jax.numpy.ones((), f64), z(1, n, n),
        z(1, n, 3), U[1:4000, None, :])
    states, gram, cross = _esn_fit_native(*operands, (100, 3999, True))
    # without the history: the rows pass through the kernel's ring instead
    last, gram_r, cross_r = _esn_fit_native(*operands, (100, 3999, False))
    assert np.array_equal(gram, gram_r) and np.array_equal(cross, cross_r)
    assert last.shape == (1, 1, n) and np.array_equal(states[-1:], last)
    np.save(sys.argv[1] + ".stats.npy", np.concatenate([gram.ravel(), cross.ravel()]))
    """
)


def test_training_is_bit_identical_across_processes_and_thread_counts(tmp_path):
    """The fused fit sums the Gram in a fixed order, whichever thread adds
    which block, with orc's own Gram kernel (never BLAS, whose thread count
    is the process's), and the ridge solve is orc's own Cholesky, each
    element of the factor computed by one thread in a fixed order: two
    processes, one native thread against XLA's pool, and BLAS on 1, 2 or 4
    threads give the same statistics and the same weights bit for bit.
    (LAPACK's potrf, used before, splits its sums by OpenBLAS's thread
    count: weights then differed in their last bits between 1 and 2 BLAS
    threads.) Three processes: the default, one native thread with four
    BLAS threads, one BLAS thread; any two of them are also two processes
    (a fourth, the default again, added 5.5 s and nothing the others do
    not show)."""
    runs = {
        "default": {},
        "one_blas4": {"ORC_NATIVE_THREADS": "1", "OPENBLAS_NUM_THREADS": "4"},
        "blas1": {"OPENBLAS_NUM_THREADS": "1"},
    }
    for name, extra in runs.items():
        # orc's CPU kernels, on the CPU whatever the machine's default device
        env = dict(os.environ, JAX_PLATFORMS="cpu", **extra)
        proc = subprocess.run(
            [sys.executable, "-c", _TRAIN, str(tmp_path / f"{name}.npy")],
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    w = {name: np.load(tmp_path / f"{name}.npy") for name in runs}
    for name in runs:
        stats = np.load(tmp_path / f"{name}.npy.stats.npy")
        np.testing.assert_array_equal(
            np.load(tmp_path / "default.npy.stats.npy"), stats, err_msg=name
        )
    for name in runs:
        np.testing.assert_array_equal(w["default"], w[name], err_msg=name)


@CPU_ONLY
def test_ensemble_equals_its_members_trained_alone():
    """The ensemble trainer fits each member exactly as the plain trainer fits
    that member on its own: bit-identical readouts."""
    ens = orc.forecaster.EnsembleESNForecaster(3, 400, chunks=3, seed=5)
    trained = orc.forecaster.train_EnsembleESNForecaster(ens, U[:3000], spinup=100)
    ens_w = np.asarray(trained[0].readout.wout)
    single = orc.forecaster.ESNForecaster(3, 400, seed=0)
    for c in range(3):
        member = eqx.tree_at(
            lambda m: (m.driver.wr.values, m.driver.wr.columns, m.embedding.win),
            single,
            (
                ens.driver.wr.values[c : c + 1],
                ens.driver.wr.columns[c : c + 1],
                ens.embedding.win[c : c + 1],
            ),
        )
        w = orc.forecaster.train_ESNForecaster(member, U[:3000], spinup=100)[0]
        np.testing.assert_array_equal(w.readout.wout[0], ens_w[c])
