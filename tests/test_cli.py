"""The ``orc`` command line, driven from a shell on files written by ``orc data``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _helpers import run_cli

ORC = shutil.which("orc", path=str(Path(sys.executable).parent)) or "orc"


def run_process(*args, cwd, ok=True):
    """``orc ARGS`` through the installed entry point, in a process of its own."""
    env = dict(os.environ)
    env.pop("JAX_NUMPY_DTYPE_PROMOTION", None)
    proc = subprocess.run(
        [ORC, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def run(*args, cwd, ok=True):
    """``orc ARGS`` in this process (``_helpers.run_cli``)."""
    proc = run_cli(*args, cwd=cwd)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    run(
        "data",
        "lorenz63",
        "--out",
        "l63.csv",
        "--tn",
        "70",
        "--transient",
        "500",
        cwd=d,
    )
    return d


def test_help_of_every_command(workdir):
    # the entry point in a process of its own once; each command's help in
    # this process (a process per command cost ~3 s each)
    top = run_process("--help", cwd=workdir).stdout
    for cmd in ("demo", "data", "train", "tune", "forecast", "evaluate", "info"):
        assert cmd in top
        text = run(cmd, "--help", cwd=workdir).stdout
        assert "Usage: orc " + cmd in text
        assert "--config" in text or cmd == "info"


def test_data_train_forecast_evaluate(workdir):
    table = np.loadtxt(workdir / "l63.csv", delimiter=",", skiprows=1)
    assert table.shape == (6500, 4)  # t, x, y, z
    np.testing.assert_allclose(np.diff(table[:, 0]), 0.01, rtol=1e-9)
    U = table[:, 1:]
    proc = run(
        "train", "l63.csv", "--res-dim", "200", "--val-fraction", "0.1", "--dt", "0.01",
        "--lyapunov", "0.906", "--out", "esn.orc", cwd=workdir,
    )  # fmt: skip
    out = proc.stdout
    assert "validation: 650 steps" in out and "Lyapunov times" in out
    assert "column 't' of l63.csv taken as time (dt=0.01)" in proc.stderr
    run(
        "forecast",
        "esn.orc",
        "--steps",
        "300",
        "--out",
        "fc.csv",
        "--plot",
        "fc.png",
        cwd=workdir,
    )
    fc = np.loadtxt(workdir / "fc.csv", delimiter=",", skiprows=1)
    assert fc.shape == (300, 4) and np.isfinite(fc).all()
    np.testing.assert_allclose(fc[:, 0], 0.01 * np.arange(1, 301), rtol=1e-12)
    fc = fc[:, 1:]
    assert (workdir / "fc.png").stat().st_size > 0
    # forecast continues from the end of training: close to the held-out data at first
    assert np.linalg.norm(fc[0] - U[5850]) < 0.5
    run(
        "forecast",
        "esn.orc",
        "--steps",
        "50",
        "--warmup",
        "l63.csv",
        "--out",
        "fc2.npy",
        cwd=workdir,
    )
    assert np.load(workdir / "fc2.npy").shape == (50, 3)
    out = run("evaluate", "esn.orc", "l63.csv", "--dt", "0.01", cwd=workdir).stdout
    assert "NRMSE" in out and "valid prediction" in out


def test_config_file(workdir):
    (workdir / "cfg.toml").write_text("res-dim = 50\nspinup = 20\n")
    out = run(
        "train", "l63.csv", "--config", "cfg.toml", "--out", "small.orc", cwd=workdir
    ).stdout
    assert "res_dim=50" in out


@pytest.mark.parametrize(
    "args, reason",
    [
        (
            ["train", "missing.csv", "--out", "x.orc"],
            "data file not found: missing.csv",
        ),
        (
            ["train", "nan.csv", "--out", "x.orc"],
            "contain NaN or inf (first at data row 1)",
        ),
        (
            ["evaluate", "esn.orc", "two.csv", "--warmup", "1"],
            "has 2 columns but the model expects 3",
        ),
        (
            ["forecast", "nope.orc", "--steps", "3", "--out", "f.csv"],
            "model file not found",
        ),
        (
            ["forecast", "garbage.orc", "--steps", "3", "--out", "f.csv"],
            "not an orc model file",
        ),
        (["train", "l63.csv", "--spinup", "99999", "--out", "x.orc"], "--spinup"),
    ],
)
def test_errors_exit_nonzero_with_one_line(workdir, args, reason):
    (workdir / "nan.csv").write_text("1,2,3\n4,nan,6\n7,8,9\n")
    (workdir / "two.csv").write_text("a,b\n1,2\n3,4\n2,6\n")
    (workdir / "garbage.orc").write_bytes(b"hello")
    if not (workdir / "esn.orc").exists():
        run("train", "l63.csv", "--res-dim", "50", "--out", "esn.orc", cwd=workdir)
    proc = run_process(*args, cwd=workdir, ok=False)
    assert proc.returncode != 0
    # one error line (after the note naming a time column, if one was taken)
    lines = [x for x in proc.stderr.strip().splitlines() if "taken as time" not in x]
    assert len(lines) == 1 and reason in lines[0], proc.stderr
    assert lines[0].startswith("orc: error: ")


def test_deep_esn_and_nvar_models(workdir):
    import orc

    out = run(
        "train", "l63.csv", "--model", "deep-esn", "--res-dim", "100", "--layers", "2",
        "--val-fraction", "0.05", "--out", "deep.orc", cwd=workdir,
    ).stdout  # fmt: skip
    assert "trained deep-esn (res_dim=100, layers=2)" in out
    out = run(
        "train", "l63.csv", "--model", "nvar", "--val-fraction", "0.05",
        "--out", "nvar.orc", cwd=workdir,
    ).stdout  # fmt: skip
    # s="auto": ~30 taps per Lorenz oscillation (~75 samples at dt 0.01);
    # order "auto": cubic for 2 x 3 linear features
    assert "trained nvar (k=2, stride=3 (auto), order=3 (auto), 84 features)" in out
    for name in ("deep.orc", "nvar.orc"):
        run("forecast", name, "--steps", "50", "--out", f"{name}.csv", cwd=workdir)
        pred = np.loadtxt(workdir / f"{name}.csv", delimiter=",", skiprows=1)
        assert pred.shape == (50, 4) and np.all(np.isfinite(pred))  # t, x, y, z
        assert "evaluation:" in run("evaluate", name, "l63.csv", cwd=workdir).stdout
    bad = run("train", "l63.csv", "--model", "nvar", "--k", "0", "--out", "x.orc",
              cwd=workdir, ok=False)  # fmt: skip
    assert bad.returncode == 2 and "k must be >= 1" in bad.stderr
    out = run("train", "l63.csv", "--model", "nvar", "--stride", "1", "--order", "2",
              "--input-noise", "1e-3", "--out", "s1.orc", cwd=workdir).stdout  # fmt: skip
    assert "trained nvar (k=2, stride=1, order=2, 28 features)" in out
    assert orc.load(workdir / "s1.orc").s == 1
    bad = run("train", "l63.csv", "--model", "nvar", "--stride", "two",
              "--out", "x.orc", cwd=workdir, ok=False)  # fmt: skip
    assert bad.returncode == 2 and "positive integer or 'auto'" in bad.stderr


def test_data_exports_discrete_series(workdir):
    import orc

    run("data", "narma", "--steps", "300", "--out", "narma.csv", cwd=workdir)
    table = np.loadtxt(workdir / "narma.csv", delimiter=",", skiprows=1)
    u, y = orc.data.narma(300)
    np.testing.assert_allclose(table, np.concatenate([u, y], 1), rtol=1e-15)
    header = (workdir / "narma.csv").read_text().splitlines()[0]
    assert header == "u,y"
    run("data", "henon_map", "--steps", "100", "--out", "h.npy", cwd=workdir)
    np.testing.assert_allclose(
        np.load(workdir / "h.npy"), orc.data.henon_map(100), rtol=1e-15
    )


def test_cli_lists_every_system_orc_data_has():
    """``orc data NAME`` offers every ODE system (integrated to a time
    ``tN``) and every discrete series (``n_timesteps`` long) of
    :mod:`orc.data`: the command line keeps its own lists (importing
    ``orc.data`` would import JAX for ``orc --help``), checked here."""
    import inspect

    import orc.data
    from orc import cli

    takes = {
        name: inspect.signature(getattr(orc.data, name)).parameters
        for name in orc.data.integrators.__all__ + orc.data.datasets.__all__
    }
    assert set(cli.SYSTEMS) == {n for n, p in takes.items() if "tN" in p}
    assert set(cli.SERIES) == {n for n, p in takes.items() if "n_timesteps" in p}


def test_orc_data_help_names_every_system_whole():
    """``orc data --help`` shows the argument as ``SYSTEM`` (not a choice list
    wrapped mid-name) and names every system once, in its epilog."""
    from click.testing import CliRunner

    from orc import cli

    runner = CliRunner()
    out = runner.invoke(cli.cli, ["data", "--help"], prog_name="orc").output
    assert "Usage: orc data [OPTIONS] SYSTEM\n" in out
    epilog = " ".join(out[out.index("SYSTEM is one of") :].split())
    for name in cli.SYSTEMS + cli.SERIES:
        assert f" {name}," in epilog or f" {name} " in epilog or f" {name}." in epilog
