"""orc.metrics against hand-computed references and known invariants."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import block, count_compiles, on_cpu
from orc import metrics
from orc.drivers import DriverBase
from orc.embeddings import EmbedBase
from orc.readouts import LinearReadout
from orc.regression import ESNRegressor, RCRegressorBase

TRUTH = np.array([[1.0, 10.0], [2.0, 14.0], [4.0, 12.0], [3.0, 8.0]])
PRED = np.array([[1.5, 10.0], [2.0, 13.0], [3.0, 12.0], [3.0, 10.0]])
ERR2 = (PRED - TRUTH) ** 2  # 0.25, 0, 0, 1, 1, 0, 0, 4 -> sum 6.25


def test_rmse_and_every_nrmse_normalisation_by_hand():
    rmse = np.sqrt(6.25 / 8)
    assert float(metrics.rmse(PRED, TRUTH)) == pytest.approx(rmse)
    assert float(metrics.mse(PRED, TRUTH)) == pytest.approx(6.25 / 8)
    # |errors| 0.5, 0, 0, 1, 1, 0, 0, 2
    assert float(metrics.mae(PRED, TRUTH)) == pytest.approx(4.5 / 8)
    flat = TRUTH.ravel()
    expected = {
        "std": rmse / flat.std(),
        "var": rmse / flat.var(),
        "range": rmse / (14.0 - 1.0),
        "mean_norm": rmse / np.sqrt(np.mean(np.sum(TRUTH**2, 1))),
        # total variance: var(col 0) = 1.25, var(col 1) = 5
        "total_var": rmse / np.sqrt(1.25 + 5.0),
        # per-feature: (0.25 + 1)/1.25 and (1 + 4)/5 over 8 entries
        "feature_std": np.sqrt(((0.25 + 1) / 1.25 + (1 + 4) / 5) / 8),
    }
    for norm, value in expected.items():
        got = float(metrics.nrmse(PRED, TRUTH, normalization=norm))
        assert got == pytest.approx(value, rel=1e-12), norm
    # a given scale replaces the window's own
    assert float(metrics.nrmse(PRED, TRUTH, scale=2.0)) == pytest.approx(rmse / 2)
    got = float(metrics.nrmse(PRED, TRUTH, "feature_std", scale=[1.0, 2.0]))
    assert got == pytest.approx(np.sqrt((1.25 + 5 / 4) / 8))
    with pytest.raises(ValueError, match="normalization must be one of"):
        metrics.nrmse(PRED, TRUTH, normalization="minmax")
    with pytest.raises(ValueError, match="rmse: pred and truth must have the same"):
        metrics.rmse(PRED, TRUTH[:3])
    with pytest.raises(ValueError, match="mae: pred and truth must have the same"):
        metrics.mae(PRED, TRUTH[:3])


def test_rsquare_by_hand_and_invariants():
    # col 0: mean 2.5, SS_tot 5, SS_res 1.25 -> 0.75; col 1: mean 11, SS_tot 20,
    # SS_res 5 -> 0.75; variance-weighted: 1 - 6.25 / 25 = 0.75 as well
    assert float(metrics.rsquare(PRED, TRUTH)) == pytest.approx(0.75)
    np.testing.assert_allclose(
        metrics.rsquare(PRED, TRUTH, multioutput="raw"), [0.75, 0.75]
    )
    pred = TRUTH.copy()
    pred[:, 1] = 11.0  # the mean predictor scores 0, a perfect one 1
    np.testing.assert_allclose(
        metrics.rsquare(pred, TRUTH, multioutput="raw"), [1.0, 0.0]
    )
    pred[:, 0] += 1.0  # col 0: SS_res 4 / SS_tot 5
    vw = 1 - (4 + 20) / (5 + 20)
    assert float(
        metrics.rsquare(pred, TRUTH, multioutput="variance_weighted")
    ) == pytest.approx(vw)
    with pytest.raises(ValueError, match="multioutput"):
        metrics.rsquare(PRED, TRUTH, multioutput="mean")


def test_valid_prediction_time_by_hand():
    truth = np.ones((10, 2))  # scale sqrt(mean ||u||^2) = sqrt(2)
    pred = truth.copy()
    pred[6:, 0] += 1.0  # error 1 / sqrt(2) > 0.4 from step 6
    assert float(metrics.valid_prediction_time(pred, truth)) == 6.0
    assert float(
        metrics.valid_prediction_time(pred, truth, dt=0.5, lyapunov_exponent=0.9)
    ) == pytest.approx(6 * 0.5 * 0.9)
    # a larger threshold is never crossed: the whole window counts
    assert float(metrics.valid_prediction_time(pred, truth, threshold=0.8)) == 10.0
    # an explicit scale replaces the window's own
    assert float(metrics.valid_prediction_time(pred, truth, scale=10.0)) == 10.0
    jitted = jax.jit(metrics.valid_prediction_time)(pred, truth)
    assert float(jitted) == 6.0
    # the capped flag says whether the window ended the count
    vpt, capped = metrics.valid_prediction_time(pred, truth, return_capped=True)
    assert float(vpt) == 6.0 and not bool(capped)
    vpt, capped = metrics.valid_prediction_time(
        pred, truth, threshold=0.8, return_capped=True
    )
    assert float(vpt) == 10.0 and bool(capped)


def test_valid_prediction_time_per_dimension_std():
    # dimension 0 has std 1, dimension 1 std 100 (alternating +-1 and +-100)
    sign = np.where(np.arange(10) % 2 == 0, 1.0, -1.0)
    truth = np.stack([sign, 100 * sign], 1)
    pred = truth.copy()
    pred[4:, 1] += 50.0  # e = sqrt((0 + 0.5^2) / 2) = 0.354 < 0.4 from step 4
    pred[7:, 0] += 1.0  # e = sqrt((1 + 0.25) / 2) = 0.79 > 0.4 from step 7
    e = metrics.normalised_error(pred, truth, normalization="feature_std")
    np.testing.assert_allclose(
        np.asarray(e)[[0, 4, 7]], [0.0, np.sqrt(0.125), np.sqrt(0.625)]
    )
    assert (
        float(metrics.valid_prediction_time(pred, truth, normalization="feature_std"))
        == 7.0
    )
    # the mean-norm error is dominated by dimension 1: 50 / sqrt(mean(1 + 1e4))
    assert float(metrics.valid_prediction_time(pred, truth)) == 4.0
    # the attractor's stds replace the window's
    assert (
        float(
            metrics.valid_prediction_time(
                pred, truth, normalization="feature_std", scale=[10.0, 100.0]
            )
        )
        == 10.0
    )
    with pytest.raises(ValueError, match="per feature"):
        metrics.normalised_error(pred, truth, [1.0, 2.0, 3.0], "feature_std")
    with pytest.raises(ValueError, match="normalization"):
        metrics.normalised_error(pred, truth, normalization="std")


def test_smape_by_hand():
    truth = np.array([[1.0, 0.0], [2.0, -4.0]])
    pred = np.array([[3.0, 0.0], [2.0, 4.0]])
    # entries: 2*2/4 = 1, 0/0 -> 0, 0, 2*8/8 = 2: mean 0.75 -> 75 %
    assert float(metrics.smape(pred, truth)) == pytest.approx(75.0)
    assert float(metrics.smape(truth, truth)) == 0.0


def test_power_spectrum_of_sines():
    n = 256
    t = np.arange(n)
    x = np.stack(
        [3 * np.sin(2 * np.pi * 16 * t / n), np.cos(2 * np.pi * 40 * t / n)], 1
    )
    f, p = metrics.power_spectrum(x, dt=0.5)
    assert f.shape == p.shape == (n // 2 + 1,)
    np.testing.assert_allclose(f, np.fft.rfftfreq(n, 0.5))
    p = np.asarray(p)  # the checks in numpy (an eager jnp index compiles)
    # |FFT|^2 / n of a sine of amplitude A on an exact bin is n A^2 / 4,
    # averaged over the two features
    assert float(p[16]) == pytest.approx(n * 9 / 4 / 2)
    assert float(p[40]) == pytest.approx(n * 1 / 4 / 2)
    mask = np.ones(n // 2 + 1, bool)
    mask[[16, 40]] = False
    assert float(np.max(p[mask])) < 1e-20
    # spatial spectrum: each snapshot's own spectrum, averaged over time
    field = np.tile(np.sin(2 * np.pi * 3 * np.arange(32) / 32), (5, 1))
    _, ps = metrics.power_spectrum(field, axis="space")
    assert int(np.argmax(np.asarray(ps))) == 3


def test_power_spectrum_error_invariants():
    rng = np.random.default_rng(0)
    truth = rng.standard_normal((512, 3)).cumsum(0)
    assert float(metrics.power_spectrum_error(truth, truth)) == 0.0
    # scaling the signal by 2 multiplies every power by 4
    assert float(
        metrics.power_spectrum_error(2 * truth, truth, normalize=False)
    ) == pytest.approx(np.log10(4.0))
    assert float(metrics.power_spectrum_error(2 * truth, truth)) == pytest.approx(
        0.0, abs=1e-12
    )
    # a time-shifted copy of a stationary signal has (nearly) the same
    # spectrum, white noise a very different one
    shifted = float(metrics.power_spectrum_error(truth[::-1], truth))
    noise = float(metrics.power_spectrum_error(rng.standard_normal((512, 3)), truth))
    assert shifted < 0.1 * noise


def test_power_spectrum_hann_window():
    """Hann-windowed power of an exact-bin sine: A^2 n / 6 at the bin and
    A^2 n / 24 at its two neighbours (the window's transform), nothing else."""
    n, m, amp = 512, 37, 2.0
    x = amp * np.sin(2 * np.pi * m * np.arange(n) / n)
    _, p = metrics.power_spectrum(x, window="hann")
    p = np.asarray(p)
    assert float(p[m]) == pytest.approx(amp**2 * n / 6)
    assert float(p[m - 1]) == pytest.approx(amp**2 * n / 24)
    assert float(p[m + 1]) == pytest.approx(amp**2 * n / 24)
    rest = np.delete(p, [m - 1, m, m + 1])
    assert rest.max() < 1e-20
    with pytest.raises(ValueError, match="window"):
        metrics.power_spectrum(x, window="hamming")


def test_power_spectrum_error_does_not_depend_on_where_the_record_ends():
    """Two Lorenz trajectories with the same climate: without a window the
    error swings with the (non-periodic) record's end points (0.2 to 1.4 for
    15900 to 16000 samples); with the default Hann window it stays within 2%."""
    with on_cpu():  # the same trajectories on every machine (chaos amplifies rounding)
        a, _ = orc.data.lorenz63(tN=180, dt=0.01)
        b, _ = orc.data.lorenz63(tN=180, dt=0.01, u0=np.array([1.0, 2.0, 20.0]))
    a, b = np.asarray(a)[1000:], np.asarray(b)[1000:]
    # under one jax.jit (the same computation): eagerly each of its
    # operations compiles a program of its own for each of the three lengths
    error = jax.jit(metrics.power_spectrum_error, static_argnames=("window",))
    hann = [float(error(b[:n], a[:n])) for n in (15900, 15950, 16000)]
    raw = [float(error(b[:n], a[:n], window=None)) for n in (15900, 15950, 16000)]
    assert max(hann) - min(hann) < 0.02 * min(hann)
    assert max(raw) > 2 * min(raw)


class _ShiftRegister(DriverBase):
    """A delay line: node j holds the input of j steps ago (perfect memory)."""

    def advance(self, proj_vars, res_state):
        return jnp.concatenate([proj_vars[:1], res_state[:-1]])


class _FirstNode(EmbedBase):
    def embed(self, in_state):
        return jnp.zeros(self.res_dim, self.dtype).at[0].set(in_state[0])


def test_memory_capacity_of_a_delay_line_is_its_length():
    n = 20
    model = RCRegressorBase(_ShiftRegister(n), LinearReadout(1, n), _FirstNode(1, n))
    # under one jax.jit (the same computation): eagerly its operations
    # compile ~70 programs for this model's shapes, which no other test has
    capacity = jax.jit(
        metrics.memory_capacity, static_argnames=("k_max", "beta", "as_list")
    )
    mc = np.asarray(capacity(model, k_max=50, beta=1e-10, as_list=True))
    # the state after u(t) holds u(t), ..., u(t - n + 1): delays 1..n-1 are
    # recalled exactly, longer ones not at all (i.i.d. input)
    np.testing.assert_allclose(mc[: n - 1], 1.0, atol=1e-8)
    assert float(np.max(mc[n:])) < 0.2


@functools.cache
def _issue_reservoir(seed: int) -> ESNRegressor:
    """The issue's reservoir (below): 100 units, spectral radius 1, density
    0.1. The numpy comparison uses it too, so that both tests run the same
    compiled programs (same shapes: 100 units, k_max 50, 500 samples)."""
    return ESNRegressor(
        1,
        1,
        100,
        Wr_spectral_radius=1.0,
        leak_rate=1.0,
        bias=0.0,
        embedding_scaling=0.3,
        Wr_density=0.1,
        seed=seed,
    )


def test_memory_capacity_matches_a_numpy_reimplementation():
    model = _issue_reservoir(0)
    n, k_max, n_test = 500, 50, 100
    u = np.random.default_rng(7).uniform(-0.8, 0.8, n)
    got = np.asarray(
        metrics.memory_capacity(
            model, k_max, series=u, test_size=n_test, beta=1e-4, as_list=True
        )
    )
    # the states memory_capacity drives (from the default state): its program
    R = np.asarray(model.force(u[:, None], model.driver.default_state()))
    F = np.concatenate([np.ones((n, 1)), R], 1)
    expected = []
    for k in range(1, k_max + 1):
        tr, te = slice(k_max, n - n_test), slice(n - n_test, n)
        y = np.roll(u, k)
        Fc = F[tr, 1:] - F[tr, 1:].mean(0)
        yc = y[tr] - y[tr].mean()
        w = np.linalg.solve(Fc.T @ Fc + 1e-4 * np.eye(100), Fc.T @ yc)
        b = y[tr].mean() - F[tr, 1:].mean(0) @ w
        pred = F[te, 1:] @ w + b
        expected.append(np.corrcoef(pred, y[te])[0, 1] ** 2)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)


def test_memory_capacity_of_a_100_unit_reservoir():
    """The issue's setup (reservoirpy's documented example reports 18.8):
    100 units, spectral radius 1, ridge 1e-4, k_max 50, U(-0.8, 0.8) input.
    (The size is the published setup's: it stays 100.)"""
    values = [
        float(metrics.memory_capacity(_issue_reservoir(s), k_max=50, beta=1e-4, seed=s))
        for s in range(3)
    ]
    assert all(15 <= v <= 25 for v in values), values


def test_memory_capacity_bad_inputs():
    model = ESNRegressor(1, 1, 10)
    with pytest.raises(ValueError, match="in_dim == 1"):
        metrics.memory_capacity(ESNRegressor(2, 1, 10), 5)
    with pytest.raises(ValueError, match="k_max"):
        metrics.memory_capacity(model, 0)
    with pytest.raises(ValueError, match="test_size"):
        metrics.memory_capacity(model, 5, test_size=1.5)
    with pytest.raises(ValueError, match="too short"):
        metrics.memory_capacity(model, 5, series=np.zeros(12))


def test_each_metric_is_one_program_and_numbers_are_traced():
    """Called on a new shape, an error metric compiles one program (op by op
    it compiled 5 to 27); a new value of a number (dt, scale, threshold,
    floor) compiles nothing; a new option (a string) is a new program."""
    rng = np.random.default_rng(7)
    truth = rng.standard_normal((123, 5))
    pred = truth + 0.1 * rng.standard_normal((123, 5))
    calls = {
        "nrmse": lambda s: metrics.nrmse(pred, truth, scale=s),
        "rmse": lambda s: metrics.rmse(pred * s, truth),
        "vpt": lambda s: metrics.valid_prediction_time(pred, truth, s, dt=s, scale=s),
        "spectrum_error": lambda s: metrics.power_spectrum_error(pred, truth, floor=s),
        "spectrum": lambda s: metrics.power_spectrum(truth, dt=s),
        "rsquare": lambda s: metrics.rsquare(pred * s, truth),
    }
    for name, call in calls.items():
        with count_compiles() as first:
            block(call(0.5))
        with count_compiles() as again:
            block(call(0.25))
        assert first["compiles"] == 1, (name, first)
        assert again["compiles"] == 0, (name, again)
    with count_compiles() as other:
        block(metrics.nrmse(pred, truth, "range"))
    assert other["compiles"] == 1
