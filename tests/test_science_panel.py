"""Fast checks of the dysts panel's pure functions (benchmarks/science).

Nothing is integrated and no library is benchmarked: flow selection,
standardisation, the NVAR stride rule, the window layout, the score and the
summaries.  dysts is not needed (it lives in its own virtualenv).
"""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

PANEL = (
    Path(__file__).resolve().parent.parent / "benchmarks" / "science" / "dysts_panel.py"
)


def _load():
    spec = importlib.util.spec_from_file_location("dysts_panel", PANEL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


panel = _load()


def test_select_flows_all_count_and_names():
    names = ["Lorenz", "Aizawa", "Rossler", "Chen"]
    assert panel.select_flows(names, "all") == sorted(names)
    two = panel.select_flows(names, "2")
    assert len(two) == 2 and set(two) <= set(names)
    assert two == panel.select_flows(list(reversed(names)), "2")  # order-free
    assert panel.select_flows(names, "Chen, Lorenz") == ["Chen", "Lorenz"]
    with pytest.raises(ValueError, match="unknown flows"):
        panel.select_flows(names, "Nope")


def test_standardise_uses_training_statistics_only():
    rng = np.random.default_rng(0)
    train = rng.normal(3.0, 2.0, size=(500, 2))
    rest = rng.normal(10.0, 1.0, size=(100, 2))
    tz, rz, mean, std = panel.standardise(train, rest)
    np.testing.assert_allclose(tz.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(tz.std(0), 1.0)
    np.testing.assert_allclose(rz, (rest - mean) / std)
    train[:, 1] = 5.0
    with pytest.raises(ValueError, match="constant"):
        panel.standardise(train, rest)


def test_stationarity_problem():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1000, 2))
    assert panel.stationarity_problem(a, 1.5 * a[:500]) is None
    assert "collapses" in panel.stationarity_problem(a, 0.01 * a[:500])
    assert "transient" in panel.stationarity_problem(a, 3.0 * a[:500])


@pytest.mark.parametrize("period", [20.0, 50.0, 125.0])
def test_dominant_period_and_stride(period):
    """The panel's stride is the library's s="auto" rule (one implementation):
    a noisy oscillation's period is found, a slower drift is not taken."""
    t = np.arange(5000)
    x = np.stack([np.sin(2 * np.pi * t / period), np.cos(2 * np.pi * t / period)], 1)
    x = x + 0.1 * np.random.default_rng(1).standard_normal(x.shape)
    assert panel.dominant_period(x) == pytest.approx(period, rel=0.02)
    assert panel.nvar_stride(x) == max(1, round(period / panel.NVAR_TAPS_PER_PERIOD))
    # a slow drift with more power than the oscillation is not the period
    drift = x + 5.0 * np.sin(2 * np.pi * t / 5000.0)[:, None]
    assert panel.dominant_period(drift) == pytest.approx(period, rel=0.02)


def test_horizon_and_windows():
    # 20 Lyapunov times of 75 steps each, then the cap
    assert panel.horizon_steps(1.0, 1.0 / 75) == min(panel.MAX_HORIZON, 1500)
    assert panel.horizon_steps(1e-6, 1.0) == panel.MAX_HORIZON
    starts = panel.window_starts(3, 10, 40)
    assert starts == [0, 50, 100]
    assert panel.N_POINTS >= panel.N_TRANSIENT + panel.N_TRAIN + panel.N_WINDOWS * (
        panel.SPINUP + panel.MAX_HORIZON
    )


def test_window_vpts_counts_valid_steps_in_lyapunov_times():
    spinup, horizon, dim = 5, 20, 2
    test = np.zeros((2 * (spinup + horizon), dim))
    starts = panel.window_starts(2, spinup, horizon)
    good = np.zeros((horizon, dim))
    bad = np.zeros((horizon, dim))
    bad[7:] = 1.0  # error 1 > 0.4 from step 7 on
    out = panel.window_vpts(np.stack([good, bad]), test, starts, spinup, 0.5, 2.0)
    assert out[0] == (pytest.approx(horizon * 0.5 * 2.0), True)  # capped
    assert out[1] == (pytest.approx(7 * 0.5 * 2.0), False)
    nan = np.full((horizon, dim), np.nan)
    assert panel.window_vpts(nan[None], test, starts[:1], spinup, 1.0, 1.0)[0][0] == 0.0
    assert (
        panel.diverged(nan) and panel.diverged(good + 2e3) and not panel.diverged(good)
    )


def test_quartiles_and_win_loss():
    q = panel.quartiles([1.0, 2.0, 3.0, 4.0, 5.0, math.nan, None])
    assert q == {"n": 5, "median": 3.0, "q25": 2.0, "q75": 4.0}
    assert panel.quartiles([])["n"] == 0 and math.isnan(panel.quartiles([])["median"])
    a = {"x": 2.0, "y": 1.0, "z": 3.0, "w": math.nan}
    b = {"x": 1.0, "y": 1.0, "z": 4.0, "w": 1.0, "only_b": 9.0}
    wl = panel.win_loss(a, b)
    assert (wl["n"], wl["wins"], wl["losses"], wl["ties"]) == (3, 1, 1, 1)
    assert wl["median_diff"] == 0.0


def test_sign_test():
    assert panel.sign_test(0, 0) == 1.0
    assert panel.sign_test(5, 5) == 1.0
    assert panel.sign_test(0, 10) == pytest.approx(2 / 1024)
    assert panel.sign_test(8, 14) == pytest.approx(0.286, abs=1e-3)


def test_report_has_the_tuned_column_and_failure_list(tmp_path):
    rows = [
        {"flow": "A", "status": "ok", "reason": "", "dim": 3, "dt": 0.01,
         "lyapunov": 1.0, "period_samples": 100.0, "nvar_stride": 3,
         "horizon_steps": 2000, "horizon_lyap": 20.0, "esn": 5.0, "tuned": 7.5,
         "tuned_Wr_spectral_radius": 0.9, "tuned_leak_rate": 0.4,
         "tuned_embedding_scaling": 0.1, "tuned_bias": 1.0, "tuned_beta": 1e-8,
         "tuned_search_s": 12.0},
        {"flow": "B", "status": "failed", "reason": "timeout after 120 s"},
    ]  # fmt: skip
    md = panel.report_md(rows, ["esn", "tuned"], {"run": "test"})
    assert panel.LABELS["tuned"] in md and "B: timeout after 120 s" in md
    assert "| tuned vs esn | 1 | 1 | 0 | 0 | 2.50 | 1.00 |" in md
    panel.write_csv(rows, tmp_path / "r.csv", ["esn", "tuned"])
    header, first = (tmp_path / "r.csv").read_text().splitlines()[:2]
    assert header.endswith(",tuned_beta,tuned_search_s") and "esn_seeds" in header
    assert first.endswith(",0.9,0.4,0.1,1.0,1e-08,12.0")
    # without the tuned column the CSV has no tuned fields
    panel.write_csv(rows, tmp_path / "s.csv", ["esn"])
    assert "tuned" not in (tmp_path / "s.csv").read_text().splitlines()[0]
