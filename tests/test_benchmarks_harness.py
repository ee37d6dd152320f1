"""Fast checks of the benchmark harness's pure-Python parts.

No virtualenv is created and no library is benchmarked here: only report
formatting, ratios, the skill metric and the deterministic data generators.
"""

import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH_DIR))

from harness import data, report  # noqa: E402
from harness.markdown import (  # noqa: E402
    CESN_REPORT,
    DYSTS_REPORT,
    cesn_section,
    dysts_section,
    gpu_section,
    render_results,
    tune_section,
)


def _load(name, file):
    """The benchmark script ``file`` (under benchmarks/), imported as ``name``."""
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = _load("bench_run", "run.py")


# ---------------------------------------------------------------- ratios, format


def test_ratio_is_ours_over_peer():
    assert report.ratio(1.0, 2.0) == 0.5
    assert report.ratio(3.0, 1.5) == 2.0


@pytest.mark.parametrize(
    "ours, peer",
    [(None, 1.0), (1.0, None), (1.0, 0.0), (1.0, -1.0), (math.nan, 1.0), ("x", 1)],
)
def test_ratio_missing_or_invalid(ours, peer):
    assert report.ratio(ours, peer) is None


@pytest.mark.parametrize(
    "seconds, text",
    [
        (123.4, "123 s"),
        (1.2345, "1.23 s"),
        (0.01234, "12.3 ms"),
        (2.5e-5, "25 µs"),
        (None, report.MISSING),
        (math.inf, report.MISSING),
    ],
)
def test_fmt_seconds(seconds, text):
    assert report.fmt_seconds(seconds) == text


def test_fmt_value_kinds():
    assert report.fmt_value("accuracy", 0.8467) == "84.7%"
    assert report.fmt_value("peak_rss_mb", 671.5) == "672 MiB"
    assert report.fmt_value("vpt_mean", 8.914) == "8.91"
    assert report.fmt_value("windows", 20) == "20"
    assert report.fmt_value("train_min", 0.5) == "500 ms"
    assert report.fmt_ratio(0.8512) == "0.851×"
    assert report.fmt_ratio(None) == report.MISSING


def test_md_table_shape():
    table = report.md_table(["a", "b"], [["x", "1"], ["y", "2"]])
    lines = table.splitlines()
    assert lines[0] == "| a | b |"
    assert lines[1] == "| :--- | ---: |"
    assert lines[3] == "| y | 2 |"


def _fake_results():
    return [
        {"library": "ours", "workload": "a", "size": 500, "ok": True,
         "train_min": 0.2, "peak_rss_mb": 300.0},
        {"library": "orc04", "workload": "a", "size": 500, "ok": True,
         "train_min": 0.4, "peak_rss_mb": 600.0},
        {"library": "rpy", "workload": "a", "size": 500, "ok": False,
         "error": "MemoryError: boom"},
        {"library": "rpy", "workload": "d", "size": 500, "ok": False, "na": True},
    ]  # fmt: skip


def test_comparison_rows_values_ratios_and_errors():
    libs = ["ours", "orc04", "rpy"]
    metrics = (("train_min", "train, warm min"), ("peak_rss_mb", "peak RSS"))
    rows = report.comparison_rows(_fake_results(), "a", [500], metrics, libs)
    assert rows[0] == [
        "500", "train, warm min", "200 ms", "400 ms", "error", "0.5×", report.MISSING
    ]  # fmt: skip
    assert rows[1][-2] == "0.5×"
    headers = report.comparison_headers("N", libs, {"orc04": "ORC 0.4.0"})
    assert headers[:3] == ["N", "metric", "ours"]
    assert headers[-2:] == ["ours / ORC 0.4.0", "ours / rpy"]


def test_na_cell_and_no_ratio_for_accuracy():
    res = _fake_results() + [
        {"library": "ours", "workload": "c", "size": 500, "ok": True, "accuracy": 0.9},
        {"library": "orc04", "workload": "c", "size": 500, "ok": True, "accuracy": 0.8},
    ]
    assert report.cell(report.find(res, "rpy", "d", 500), "train_min") == "n/a"
    rows = report.comparison_rows(
        res, "c", [500], (("accuracy", "acc"),), ["ours", "orc04"]
    )
    assert rows == [["500", "acc", "90.0%", "80.0%", report.MISSING]]


# ---------------------------------------------------------------- skill metric


def test_vpt_counts_valid_steps_before_threshold():
    truth = np.ones((100, 3))
    fc = truth.copy()
    fc[37:] += 10.0  # error far above threshold from index 37 on
    vpt, censored = report.valid_prediction_time(fc, truth, norm=1.0)
    assert not censored
    assert vpt == pytest.approx(37 * 0.01 * 0.906)


def test_vpt_censored_and_nan():
    truth = np.zeros((50, 3))
    vpt, censored = report.valid_prediction_time(truth + 1e-3, truth, norm=1.0)
    assert censored and vpt == pytest.approx(50 * 0.01 * 0.906)
    fc = truth.copy()
    fc[0, 0] = np.nan
    assert report.valid_prediction_time(fc, truth, norm=1.0) == (0.0, False)


def test_skill_summary_alignment():
    rng = np.random.default_rng(0)
    test = rng.standard_normal((400, 3))
    spinup, length, starts = 20, 30, [0, 100, 200]
    exact = np.stack([test[s + spinup : s + spinup + length] for s in starts])
    summary = report.skill_summary(exact, test, starts, spinup)
    assert summary["censored"] == 3
    assert summary["vpt_mean"] == pytest.approx(length * 0.01 * 0.906)
    shifted = np.stack([test[s + spinup - 1 : s + spinup - 1 + length] for s in starts])
    assert report.skill_summary(shifted, test, starts, spinup)["vpt_mean"] < 0.05


def test_accuracy():
    assert report.accuracy([0, 1, 2, 2], np.array([0, 1, 1, 2])) == 0.75
    with pytest.raises(ValueError):
        report.accuracy([0, 1], [0])


# ---------------------------------------------------------------- data


def test_lorenz_is_deterministic_by_seed():
    a = data.lorenz63(50, transient=1.0, seed=3)
    b = data.lorenz63(50, transient=1.0, seed=3)
    c = data.lorenz63(50, transient=1.0, seed=4)
    assert a.shape == (50, 3) and np.all(np.isfinite(a))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_lorenz_step_matches_vector_field():
    traj = data.lorenz63(3, transient=1.0, seed=0)
    x, y, z = traj[1]
    rhs = np.array(data._lorenz_rhs(x, y, z))
    central = (traj[2] - traj[0]) / (2 * 0.01)
    np.testing.assert_allclose(central, rhs, rtol=0.02, atol=0.5)


def test_sinusoids_deterministic_and_balanced():
    x1, y1 = data.noisy_sinusoids(5, seq_len=40, seed=1)
    x2, y2 = data.noisy_sinusoids(5, seq_len=40, seed=1)
    assert x1.shape == (15, 40, 3) and y1.shape == (15,)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    assert np.bincount(y1).tolist() == [5, 5, 5]


def test_plant_follows_its_recursion():
    p = data.linear_plant(n_steps=60, horizon=10, seed=2)
    a, b = np.array(data.PLANT_A), np.array(data.PLANT_B)
    pred = p["outputs"][:-1] @ a.T + p["u"][1:] @ b.T
    np.testing.assert_allclose(p["outputs"][1:], pred, atol=1e-14)
    assert p["ref"].shape == (10, 2)
    np.testing.assert_allclose(p["free"][0], a @ p["outputs"][-1])


def test_prepare_data_caches(tmp_path):
    files = data.prepare_data(tmp_path, n_train=30, n_test=20, seed=0)
    assert np.load(files["lorenz_train"]).shape == (30, 3)
    assert np.load(files["lorenz_test"]).shape == (20, 3)
    mtimes = {k: Path(v).stat().st_mtime_ns for k, v in files.items()}
    again = data.prepare_data(tmp_path, n_train=30, n_test=20, seed=0)
    assert again == files
    assert {k: Path(v).stat().st_mtime_ns for k, v in again.items()} == mtimes
    # The test segment continues the training trajectory.
    whole = data.lorenz63(50, seed=0)
    np.testing.assert_array_equal(np.load(files["lorenz_test"]), whole[30:])


# ---------------------------------------------------------------- run.py glue


def test_parse_child_output():
    good = run.parse_child_output('noise\nBENCH_RESULT {"ok": true, "x": 1}\n', "", 0)
    assert good == {"ok": True, "x": 1}
    killed = run.parse_child_output("", "last words", -9)
    assert not killed["ok"] and "out of memory" in killed["error"]
    assert "last words" in killed["error"]


def test_plan_and_jobs():
    quick = run.build_plan(run.parse_args(["--quick"]))
    assert quick["sizes_a"] == [500] and quick["sweep_t"] == []
    assert len(quick["window_starts"]) >= 10
    full = run.build_plan(run.parse_args([]))
    assert full["sizes_a"] == [500, 2000, 4000]
    assert full["sweep_t"] == [10000, 20000, 50000, 100000]
    jobs = run.make_jobs(full, ["ours", "rpy"], ["a", "b"])
    assert jobs[0] == {"library": "ours", "workload": "a", "size": 500}
    assert jobs[1]["library"] == "rpy"
    assert len(jobs) == 2 * (3 + 4)
    with pytest.raises(SystemExit):
        run.parse_args(["--only", "nope"])


def test_merge_previous_keeps_rows_not_rerun():
    old = {
        "libraries": ["orc04", "rpy"],
        "workloads": ["a", "c"],
        "plan": {"sizes_a": [500, 2000], "sweep_t": [], "sizes_e": []},
        "meta": {"date_utc": "then", "libraries": {"rpy": {"python": "3.11"}}},
        "results": _fake_results()[1:],
    }
    new = {
        "libraries": ["ours"],
        "workloads": ["a"],
        "plan": {"sizes_a": [500], "sweep_t": [], "sizes_e": []},
        "meta": {"libraries": {}},
        "results": [],
    }
    jobs = [{"library": "rpy", "workload": "a", "size": 500}]
    run.merge_previous(new, old, jobs)
    kept = {(r["library"], r["workload"]) for r in new["results"]}
    assert kept == {("orc04", "a"), ("rpy", "d")}
    assert new["libraries"] == ["ours", "orc04", "rpy"]
    assert new["workloads"] == ["a", "c"]
    assert new["plan"]["sizes_a"] == [500, 2000]
    assert new["meta"]["merged_from"] == "then"
    assert "rpy" in new["meta"]["libraries"]


def test_render_results_smoke():
    payload = {
        "meta": {
            "date_utc": "2025-01-01T00:00:00+00:00",
            "cpu": "Test CPU",
            "cores": 2,
            "ram_gib": 24.0,
            "loadavg_at_start": [0.1, 0.2, 0.3],
            "harness_python": "3.11.7",
            "platform": "Linux",
            "env_vars": {"XLA_FLAGS": None, "JAX_PLATFORMS": "cpu"},
            "git": {"commit": "abc123", "src_dirty": True},
            "libraries": {"ours": {"python": "3.11.7", "jax": "0.4", "orc": "0.5"}},
        },
        "plan": {"quick": True, "repeats": 2, "sizes_a": [500], "sweep_t": []},
        "libraries": ["ours", "orc04", "rpy"],
        "workloads": ["a", "b", "d"],
        "settings": {"classifier_n": 500, "controller_n": 500},
        "results": _fake_results(),
    }
    text = render_results(payload, {"orc04": "ORC 0.4.0", "rpy": "reservoirpy"})
    assert "Test CPU" in text and "QUICK" in text
    assert "| 500 | train, warm min | 200 ms | 400 ms | error | 0.5× |" in text
    assert "MemoryError: boom" in text
    assert "(not run in this mode)" in text


def test_gpu_section_takes_the_sizes_table(tmp_path):
    md = tmp_path / "GPU.md"
    assert gpu_section(md) == []  # no GPU report: no section
    md.write_text(
        "# GPU\n\nMeasured on **one H100** (x).\n\n## Sizes\n\ntext\n\n"
        "| N | s |\n|---:|---:|\n| 2000 | 1.0 |\n\nafter\n\n| other | table |\n"
    )
    section = gpu_section(md)
    assert section[0].startswith("## GPU")
    assert "one H100" in section[2]
    assert [ln for ln in section if ln.startswith("|")] == [
        "| N | s |",
        "|---:|---:|",
        "| 2000 | 1.0 |",
    ]


def test_tune_section_takes_the_throughput_table(tmp_path):
    md = tmp_path / "TUNE.md"
    assert tune_section(md) == []
    md.write_text(
        "# T\n\nMeasured on **2 cores**, x.\n\n## Throughput\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n## Other\n\n| c |\n"
    )
    section = tune_section(md)
    assert section[0].startswith("## Hyperparameter search")
    assert "2 cores" in section[2]
    assert [ln for ln in section if ln.startswith("|")] == [
        "| a | b |",
        "|---|---|",
        "| 1 | 2 |",
    ]


def test_the_cesn_and_dysts_reports_have_their_sections():
    # the hand-written reports as they are: a renamed heading would drop
    # their table from RESULTS.md without a word
    cesn, dysts = cesn_section(CESN_REPORT), dysts_section(DYSTS_REPORT)
    assert cesn[0].startswith("## Continuous ESN") and "2 CPU cores" in cesn[2]
    assert any(ln.startswith("| train, first call") for ln in cesn)
    assert dysts[0].startswith("## Tuning across 133 dysts flows")
    assert sum(ln.startswith("| ours ESN") for ln in dysts) == 2


def test_results_md_is_what_the_renderer_writes():
    # RESULTS.md is written by run.py from results.json and the reports
    # beside it; text added to it by hand would be lost at the next run
    # (it was: the earlier runs' paragraphs, now HISTORY.md)
    spec = importlib.util.spec_from_file_location("bench_run", BENCH_DIR / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    payload = json.loads((BENCH_DIR / "results.json").read_text())
    assert run.results_markdown(payload) == (BENCH_DIR / "RESULTS.md").read_text(), (
        "benchmarks/RESULTS.md differs from its rendering: edit the report it "
        "comes from (TUNE.md, GPU.md, HISTORY.md, ...), then run "
        "`python benchmarks/run.py --render`"
    )


def test_gpu_table_renders_only_the_jobs_that_ran():
    gpu = _load("bench_gpu", "gpu.py")
    fused = [
        {"job": "fused", "n": 2000, "dtype": "float64", "form": "scan"}
        | {"us_per_step": 5.264, "max_diff_vs_scan_50": 0.0},
        {"job": "fused", "n": 2000, "dtype": "float64", "form": "fused rows 16"}
        | {"us_per_step": 5.091, "max_diff_vs_scan_50": 2.3e-14},
        {"job": "fused", "n": 2000, "dtype": "float64", "form": "scan, vmap 64"}
        | {"us_per_step": 0.654},
    ]
    lines = gpu._table(fused).splitlines()
    assert lines[0] == "| N | dtype | forecast | µs/step | max diff vs scan, 50 steps |"
    assert lines[2:] == [
        "| 2000 | float64 | scan | 5.26 | 0.0e+00 |",
        "| 2000 | float64 | fused rows 16 | 5.09 | 2.3e-14 |",
        "| 2000 | float64 | scan, vmap 64 | 0.65 | - |",
    ]
    size = {"job": "size", "n": 8000, "build_host_s": 1.97, "train_warm_s": 0.31}
    assert (
        gpu._table([size])
        .splitlines()[2]
        .startswith("| 8000 | 1.97 | - / - | - / 0.31 |")
    )


# ------------------------------------------------- orc04_suite.py (ORC's own suite)


def test_orc04_suite_reads_pytest_outcomes_and_judges_them():
    suite = _load("bench_orc04_suite", "orc04_suite.py")
    xml = """<testsuites><testsuite>
      <testcase classname="tests.test_a" name="test_ok" time="0.1"/>
      <testcase classname="tests.test_a" name="test_bad[3]"><failure message="x"/></testcase>
      <testcase classname="tests.sub.test_b" name="test_err"><error message="y"/></testcase>
      <testcase classname="tests.test_a" name="test_skip"><skipped/></testcase>
    </testsuite></testsuites>"""
    assert suite.outcomes(xml) == {
        "tests.test_a::test_ok": "passed",
        "tests.test_a::test_bad[3]": "failed",
        "tests.sub.test_b::test_err": "failed",
        "tests.test_a::test_skip": "skipped",
    }
    listed = sorted(suite.DIFFERENCES)
    results = {
        listed[0]: "failed",
        listed[1]: "passed",
        "tests.test_x::test_new": "failed",
    }
    expected, unexpected, stale = suite.judge(results)
    assert expected == [listed[0]]
    assert unexpected == ["tests.test_x::test_new"]
    # a listed test that passed or did not run is named: the list follows the code
    assert stale == sorted(listed[1:])


def test_notebook_cells_run_in_order_and_stop_at_the_first_error(tmp_path):
    import subprocess

    cells = [
        "%matplotlib inline\nx = 2\nprint('hello', x)",
        ["import warnings\n", "warnings.warn('careful')\n",
         "import matplotlib.pyplot as plt\n", "plt.plot([1, x])"],
        "raise ValueError('boom')",
        "print('never')",
    ]  # fmt: skip
    notebook = {"cells": [{"cell_type": "markdown", "source": "# title"}]}
    notebook["cells"] += [{"cell_type": "code", "source": c} for c in cells]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(notebook))
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH_DIR / "workloads" / "notebook_cells.py"),
         str(path), str(tmp_path / "figs"), str(report)],
        capture_output=True, text=True, env=dict(os.environ, MPLBACKEND="Agg"),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    got = json.loads(report.read_text())["cells"]
    assert [c["status"] for c in got] == ["ok", "ok", "error", "not run"]
    assert got[0]["stdout"] == "hello 2\n"
    assert [w[:2] for w in got[1]["warnings"]] == [["UserWarning", "careful"]]
    assert got[1]["figures"] == ["cell01_0.png"]
    assert (tmp_path / "figs" / "cell01_0.png").stat().st_size > 1000
    assert got[2]["error"].strip().endswith("ValueError: boom")
    assert got[3]["stdout"] == "" and got[3]["seconds"] == 0.0


def test_orc04_suite_report_counts_tests_cells_and_warnings():
    suite = _load("bench_orc04_suite", "orc04_suite.py")
    listed = sorted(suite.DIFFERENCES)[0]
    tests = {
        "results": {listed: "failed", "tests.t::a": "passed", "tests.t::b": "failed"},
        "seconds": 12.0,
        "workers": 2,
        "orc_file": str(suite.envs.REPO_ROOT / "src" / "orc" / "__init__.py"),
    }

    def cell(i, status, seconds, warnings=()):
        error = "Traceback ...\nKeyError: 'x'\n" if status == "error" else None
        return {"index": i, "status": status, "seconds": seconds,
                "warnings": [list(w) for w in warnings], "figures": [], "error": error}  # fmt: skip

    notebooks = {
        "demo": {
            "ours": {"cells": [cell(0, "ok", 1.5, [("UserWarning", "a | b", "x:1")]),
                               cell(1, "error", 0.25), cell(2, "not run", 0.0)]},
            "orc04": {"cells": [cell(0, "ok", 2.0), cell(1, "ok", 1.0),
                                cell(2, "ok", 1.0)], "crash": None},
        }
    }  # fmt: skip
    info = {"date": "2026-11-29", "cpu": "cpu", "cores": 2, "commit": "abc"}
    text = suite.markdown(info, tests, notebooks)
    assert "3 tests: **1 passed**, 2 failed, 0 skipped (12 s, 2 pytest workers)" in text
    assert "`import orc` being `src/orc/__init__.py`" in text
    assert f"| `{listed}` | {suite.DIFFERENCES[listed]} |" in text
    assert "Unexpected failures: `tests.t::b`." in text
    assert "| `demo.ipynb` | 1/3 | 1.8 | 3/3 | 4.0 | 1 |" in text
    assert "| all 1 | | 1.8 | | 4.0 | |" in text
    assert "- `demo` cell 1 under ours: KeyError: 'x'" in text
    assert "- `demo`, cell 0: UserWarning: a \\| b" in text  # a table-safe line
    assert suite.regressions(notebooks["demo"]) == [1, 2]


def test_orc04_suite_reads_the_readme_quick_start_as_cells(tmp_path):
    suite = _load("bench_orc04_suite", "orc04_suite.py")
    (tmp_path / "README.md").write_text(
        "# ORC\n```bash\npip install x\n```\n```python\nimport orc\nx = 1\n```\n"
        "text\n```python \nprint(x)\n```\n"
    )
    path = suite.readme_notebook(tmp_path, tmp_path / "README.ipynb")
    cells = json.loads(path.read_text())["cells"]
    assert [c["source"] for c in cells] == ["import orc\nx = 1\n", "print(x)\n"]
