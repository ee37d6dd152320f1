"""``orc tune``: the hyperparameter search from the command line, its
``[search]`` table, its files, a stored study that resumes, and the
persistent compilation cache with its opt-out (``orc --no-compile-cache``).

Small on purpose: a reservoir of 20 nodes, 1250 rows, 2 draws x 2 seeds x
2 ridge strengths, so that the few programs compiled are compiled fast.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _helpers import lorenz_rk4, run_cli

ORC = shutil.which("orc", path=str(Path(sys.executable).parent)) or "orc"

# 1250 rows: 250 validation rows (--warmup 50 + 2 windows x 100), 1000 to train
CONFIG = """\
res_dim = 20
spinup = 50
warmup = 50
horizon = 100
windows = 2
lyapunov = 0.906

[search]
spectral_radius = {log_uniform = [0.3, 1.2]}
leak_rate = {uniform = [0.3, 1.0]}
beta = [1e-8, 1e-6]
seeds = 2
draws = 2
"""
SEARCHED = ("spectral_radius", "leak_rate")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune")
    U = lorenz_rk4(1250)
    t = 0.01 * np.arange(1, 1251)
    np.savetxt(d / "l63.csv", np.column_stack([t, U]), delimiter=",",
               header="t,x,y,z", comments="")  # fmt: skip
    (d / "tune.toml").write_text(CONFIG)
    return d


def tune(*args, cwd):
    return run_cli("tune", "l63.csv", "--config", "tune.toml", *args, cwd=cwd)


def read_rows(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def best_row(rows) -> dict:
    ok = [r for r in rows if r["status"] == "ok"]
    return max(ok, key=lambda r: float(r["score"]))


def test_tune_writes_the_table_the_report_and_a_model_forecast_reads(workdir):
    import orc

    proc = tune("--out", "run", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "2 draws (sobol) x 2 seeds x 2 ridge strengths = 8 candidates" in out
    assert "1000 rows to train, the last 250 to validate" in out
    assert "best: valid prediction time" in out and "Lyapunov times" in out
    rows = read_rows(workdir / "run" / "results.csv")
    assert len(rows) == 8
    assert list(rows[0]) == ["id", "trajectory", "seed", *SEARCHED, "beta", "vpt",
                             "score", "status", "reason", "seconds"]  # fmt: skip
    assert {float(r["beta"]) for r in rows} == {1e-8, 1e-6}
    assert {r["seed"] for r in rows} == {"0", "1"}
    assert (workdir / "run" / "report.png").stat().st_size > 5000

    # the model file is the best row's candidate, with orc train's metadata
    best = best_row(rows)
    model = orc.load(workdir / "run" / "best.orc")
    meta = orc.io.read_metadata(workdir / "run" / "best.orc")
    for name in SEARCHED:
        assert meta[name] == pytest.approx(float(best[name]), rel=1e-12)
    assert float(model.driver.spectral_radius) == pytest.approx(
        float(best["spectral_radius"]), rel=1e-12
    )
    assert float(model.driver.leak) == pytest.approx(float(best["leak_rate"]))
    assert int(model.seed) == int(best["seed"]) == meta["seed"]
    assert meta["beta"] == float(best["beta"])
    assert meta["score"] == pytest.approx(float(best["score"]))
    assert (meta["dt"], meta["lyapunov"], meta["columns"]) == (0.01, 0.906,
                                                               ["x", "y", "z"])  # fmt: skip
    assert (meta["res_dim"], meta["train_rows"]) == (20, 1000)
    assert f"  spectral_radius  {float(best['spectral_radius']):.4g}" in out

    fc = run_cli("forecast", "run/best.orc", "--steps", "30", "--out", "fc.csv",
                 cwd=workdir)  # fmt: skip
    assert fc.returncode == 0, fc.stderr
    table = np.loadtxt(workdir / "fc.csv", delimiter=",", skiprows=1)
    assert table.shape == (30, 4) and np.all(np.isfinite(table))


BAD_CONFIGS = [
    # (the [search] table, what the error names)
    ('spectral_radus = {uniform = [0.1, 1.0]}', "unknown key 'spectral_radus' in "
     "[search] of tune.toml (did you mean 'spectral_radius'?)"),
    ("leak_rate = {uniform = [1.0, 0.1]}", "[search] leak_rate in tune.toml: "
     "uniform needs low < high"),
    ("density = {uniform = [0.01, 0.1]}", "[search] density in tune.toml: density "
     "sets the number of non-zero entries"),
    ("res_dim = {choice = [20, 30.5]}", "[search] res_dim in tune.toml: choice "
     "takes whole numbers"),
    ("spinup = {choice = [10, 20]}", "[search] spinup in tune.toml: spinup cannot "
     "be searched"),
    ("beta = {uniform = [0, 1]}", "[search] beta in tune.toml: the ridge strengths"),
    ('sampler = "grid"', "[search] sampler in tune.toml: one of sobol, random, tpe"),
    ("seeds = 1", "[search] in tune.toml varies nothing"),
]  # fmt: skip


@pytest.mark.parametrize("table, message", BAD_CONFIGS)
def test_a_bad_search_table_is_an_error_naming_the_key(workdir, table, message):
    d = workdir / "bad"
    d.mkdir(exist_ok=True)
    shutil.copy(workdir / "l63.csv", d / "l63.csv")
    (d / "tune.toml").write_text("res_dim = 20\n[search]\n" + table + "\n")
    proc = tune("--out", "run", cwd=d)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not (d / "run").exists()


def test_usage_errors_before_any_work(workdir, monkeypatch):
    def error(*args, **kw):
        proc = tune(*args, cwd=workdir)
        assert proc.returncode == 2, proc.stderr
        return proc.stderr

    # a searched hyperparameter given a fixed value too
    assert (
        "spectral_radius is searched ([search] in tune.toml) and also fixed "
        "(as --spectral-radius)" in error("--spectral-radius", "0.9", "--out", "x")
    )
    # an output that is the input
    (workdir / "in").mkdir(exist_ok=True)
    shutil.copy(workdir / "l63.csv", workdir / "in" / "results.csv")
    text = run_cli("tune", "in/results.csv", "--config", "tune.toml", "--out", "in",
                   cwd=workdir).stderr  # fmt: skip
    assert "the results table in/results.csv is the same file as the data file" in text
    assert "--out best.orc names the folder" in error("--out", "best.orc")
    # the dashboard: it serves a stored study, and needs its package
    assert "--dashboard serves a study kept in --storage" in error(
        "--out", "x", "--dashboard"
    )
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)
    assert "pip install optuna-dashboard" in error(
        "--out", "x", "--dashboard", "--storage", "s.db"
    )
    # Optuna: a stored study, or its samplers, need orc[tune]
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert "--storage needs optuna, an optional extra: pip install" in error(
        "--out", "x", "--storage", "s.db"
    )
    assert not (workdir / "x").exists() and not (workdir / "s.db").exists()
    # [search] is orc tune's: another command's config refuses it
    (workdir / "train.toml").write_text("res_dim = 20\n" + CONFIG[CONFIG.index("[") :])
    train = run_cli("train", "l63.csv", "--config", "train.toml", "--out", "m.orc",
                    cwd=workdir)  # fmt: skip
    assert train.returncode == 2 and "unknown key 'search'" in train.stderr
    help_text = run_cli("tune", "--help", cwd=workdir).stdout
    assert "spectral_radius = {log_uniform = [0.1, 2.0]}" in help_text


def test_a_stored_study_resumes(workdir):
    args = ("--storage", "study.db", "--out", "study", "--budget")
    first = tune(*args, "1", cwd=workdir)
    assert first.returncode == 0, first.stderr
    assert "1 draw finished, 1 evaluated by this run" in first.stdout
    assert len(read_rows(workdir / "study" / "results.csv")) == 4  # 2 seeds x 2 betas
    # a second run with a larger budget evaluates only the missing draw
    second = tune(*args, "2", cwd=workdir)
    assert second.returncode == 0, second.stderr
    assert "study 'orc' in study.db (tpe): 2 draws finished, 1 evaluated" in (
        second.stdout
    )
    rows = read_rows(workdir / "study" / "results.csv")
    assert len(rows) == 8 and {r["trial"] for r in rows} == {"0", "1"}
    meta = __import__("orc").io.read_metadata(workdir / "study" / "best.orc")
    assert meta["seed"] == int(best_row(rows)["seed"])
    # the same study with another space is refused, not mixed
    other = workdir / "other.toml"
    other.write_text(CONFIG.replace("[0.3, 1.0]", "[0.2, 1.0]"))
    proc = run_cli("tune", "l63.csv", "--config", other.name, *args, "3", cwd=workdir)
    assert proc.returncode == 2
    assert "exists with another setup (its space differ)" in proc.stderr
    assert "--study-name" in proc.stderr
    assert len(read_rows(workdir / "study" / "results.csv")) == 8


def test_the_compile_cache_and_its_opt_out(workdir, tmp_path):
    """The command line caches its compiled programs in $ORC_CACHE_DIR/jax;
    ``orc --no-compile-cache`` writes no cache, not even the one JAX's own
    JAX_COMPILATION_CACHE_DIR would switch on."""
    data = np.column_stack([0.01 * np.arange(400), lorenz_rk4(400)])
    np.savetxt(tmp_path / "d.csv", data, delimiter=",", header="t,x,y,z",
               comments="")  # fmt: skip
    env = dict(os.environ)
    env.pop("JAX_NUMPY_DTYPE_PROMOTION", None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    args = ["train", "d.csv", "--res-dim", "10", "--spinup", "10", "--out", "m.orc"]

    def run(*pre, **more):
        proc = subprocess.run([ORC, *pre, *args], cwd=tmp_path, env=dict(env, **more),
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr

    run(ORC_CACHE_DIR=str(tmp_path / "on"))
    # the training program is among them (a count of programs would change
    # whenever orc compiles fewer small ones)
    cached = [p.name for p in (tmp_path / "on" / "jax").iterdir()]
    assert any(n.startswith("jit_fit-") and n.endswith("-cache") for n in cached), (
        cached
    )
    run("--no-compile-cache", ORC_CACHE_DIR=str(tmp_path / "off"),
        JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-env"))  # fmt: skip
    for cache in (tmp_path / "off", tmp_path / "jax-env"):
        assert not cache.exists() or not any(cache.rglob("*-cache"))


def test_the_search_programs_go_to_the_compile_cache(workdir, tmp_path):
    """No program of a search holds a host callback (which JAX never writes
    to its persistent cache): the population's checks come back from its
    loop as codes, and the constructors' spectral-radius check is a code of
    their own program. So the population (jit_evaluate) and the reservoir
    construction (jit_built_bank) are cached, and a second ``orc tune`` on
    the same shapes compiles neither."""
    env = dict(os.environ, ORC_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("JAX_NUMPY_DTYPE_PROMOTION", None)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    cmd = [ORC, "tune", "l63.csv", "--config", "tune.toml", "--out"]
    proc = subprocess.run([*cmd, str(tmp_path / "run")], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cached = [p.name for p in (tmp_path / "cache" / "jax").iterdir()]
    for program in ("jit_evaluate-", "jit_built_bank-", "jit_fit-"):
        assert any(n.startswith(program) and n.endswith("-cache") for n in cached), (
            program,
            cached,
        )
