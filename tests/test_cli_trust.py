"""The ``orc`` command line a scientist can trust: time columns are never
features, unknown config keys are errors, the model file remembers dt, the
Lyapunov exponent and the column names, evaluation over windows marks capped
valid prediction times, diverged forecasts exit non-zero, every option is
documented, and ``orc --help`` starts without importing JAX."""

from __future__ import annotations

import subprocess
import sys

import click
import numpy as np
import pytest

import orc
from _helpers import run_cli
from orc import cli


def run(*args, cwd, code=0):
    """``orc ARGS`` in this process (``_helpers.run_cli``; the entry point in
    a process of its own is tests/test_cli.py's)."""
    proc = run_cli(*args, cwd=cwd)
    assert proc.returncode == code, proc.stderr
    return proc


def call(argv, capsys):
    """``orc ARGV`` in this process: for failures found before JAX is used."""
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_trust")
    run("data", "lorenz63", "--out", "l63.csv", "--tn", "45", "--transient", "500",
        cwd=d)  # fmt: skip
    return d


# ------------------------------------------------------------- time columns
def _write(path, header, rows):
    text = (header + "\n" if header else "") + "\n".join(
        ",".join(repr(float(v)) for v in row) for row in rows
    )
    path.write_text(text + "\n")


@pytest.mark.parametrize("name", ["t", "Time", "TIMES"])
def test_time_column_by_name(tmp_path, capsys, name):
    rows = np.c_[[0.0, 0.5, 0.7, 2.0], np.arange(8.0).reshape(4, 2)]
    rows[:, 0] = [0.0, 0.1, 0.2, 0.3]
    _write(tmp_path / "a.csv", f"{name},x,y", rows)
    table = cli._read_data(str(tmp_path / "a.csv"), "auto")
    assert table.columns == ["x", "y"] and table.time_name == name
    assert table.dt == 0.1 and table.values.shape == (4, 2)
    np.testing.assert_array_equal(table.values, rows[:, 1:])
    err = capsys.readouterr().err
    assert err == (
        f"orc: column {name!r} of a.csv taken as time (dt=0.1); "
        "--time-column none keeps it as a feature\n"
    )


def test_time_column_by_spacing_without_header_and_in_npy(tmp_path, capsys):
    t = 3.0 + 0.02 * np.arange(50)
    rows = np.c_[t, np.sin(t), np.cos(t)]
    _write(tmp_path / "a.csv", None, rows)
    np.save(tmp_path / "a.npy", rows)
    for name in ("a.csv", "a.npy"):
        table = cli._read_data(str(tmp_path / name), "auto")
        assert table.dt == 0.02 and table.values.shape == (50, 2)
        assert table.columns is None
    assert (
        "the first column of a.npy taken as time (dt=0.02)" in capsys.readouterr().err
    )
    # none keeps it; first forces it; a feature that is not uniform is not time
    assert cli._read_data(str(tmp_path / "a.csv"), "none").values.shape == (50, 3)
    rows[7, 0] += 1e-3
    _write(tmp_path / "b.csv", "u,v,w", rows)
    table = cli._read_data(str(tmp_path / "b.csv"), "auto")
    assert table.time_name is None and table.values.shape == (50, 3)
    assert table.columns == ["u", "v", "w"]
    with pytest.raises(click.UsageError, match="not increasing in equal steps"):
        cli._read_data(str(tmp_path / "b.csv"), "first")
    _write(tmp_path / "c.csv", "t,x", rows[:, :2])  # named time, not uniform
    with pytest.raises(click.UsageError, match="--time-column none keeps"):
        cli._read_data(str(tmp_path / "c.csv"), "auto")
    _write(tmp_path / "d.csv", "t", rows[:, :1])  # nothing left
    with pytest.raises(click.UsageError, match="no feature is left"):
        cli._read_data(str(tmp_path / "d.csv"), "auto")


def test_dt_disagreeing_with_the_time_column_is_a_usage_error(
    workdir, capsys, monkeypatch
):
    monkeypatch.chdir(workdir)
    code, _, err = call(["train", "l63.csv", "--dt", "0.02", "--out", "x.orc"], capsys)
    assert code == 2
    assert (
        "orc: error: --dt 0.02 disagrees with the spacing 0.01 of the time column "
        "'t' of l63.csv" in err
    )
    code, _, err = call(
        ["train", "l63.csv", "--time-column", "bogus", "--out", "x.orc"], capsys
    )
    assert code == 2 and "--time-column" in err


# ------------------------------------------------------------------- config
def test_unknown_config_key_is_an_error(workdir, capsys, monkeypatch):
    monkeypatch.chdir(workdir)
    (workdir / "bad.toml").write_text("resdim = 300\n")
    code, _, err = call(
        ["train", "l63.csv", "--config", "bad.toml", "--out", "x.orc"], capsys
    )
    assert code == 2
    assert "unknown key 'resdim' in bad.toml (did you mean 'res_dim'?)" in err
    assert err.startswith("orc: error: ") and len(err.strip().splitlines()) == 1
    (workdir / "bad2.toml").write_text("res-dim = 30.5\n")
    code, _, err = call(
        ["train", "l63.csv", "--config", "bad2.toml", "--out", "x.orc"], capsys
    )
    assert code == 2 and "'res-dim' in bad2.toml must be an integer, got 30.5" in err
    (workdir / "bad3.toml").write_text("data_file = 'l63.csv'\n")
    code, _, err = call(["train", "--config", "bad3.toml", "--out", "x.orc"], capsys)
    assert code == 2 and "is the argument DATA" in err
    # option names with dashes, underscores or as the flag (--tn sets tN) are keys
    ctx = click.Context(cli.data)
    (workdir / "ok.toml").write_text("tn = 5\ntransient = 3\n")
    cli._load_config(ctx, None, str(workdir / "ok.toml"))
    assert ctx.default_map == {"tN": 5, "transient": 3}


# ----------------------------------------------------------------- metadata
def test_save_metadata_is_validated_and_read_back(tmp_path):
    import jax.numpy as jnp

    model = orc.readouts.LinearReadout(out_dim=2, res_dim=4)
    meta = {"dt": 0.01, "n": 3, "ok": True, "none": None, "cols": ["x", "y"], "s": "a"}
    orc.save(tmp_path / "m.orc", model, extras={"s": jnp.ones(2)}, metadata=meta)
    assert orc.io.read_metadata(tmp_path / "m.orc") == meta
    loaded, extras = orc.load(tmp_path / "m.orc", return_extras=True)
    assert set(extras) == {"s"}
    orc.save(tmp_path / "plain.orc", model)
    assert orc.io.read_metadata(tmp_path / "plain.orc") == {}
    assert "metadata" not in orc.io.read_header(tmp_path / "plain.orc")
    for bad, key in [
        ({"a": float("nan")}, "a"),
        ({"b": np.float32(1.0)}, "b"),
        ({"c": [1, 2]}, "c"),
        ({"d": {"e": 1}}, "d"),
        ({1: "x"}, "1"),
    ]:
        with pytest.raises(TypeError, match=key):
            orc.save(tmp_path / "bad.orc", model, metadata=bad)
    with pytest.raises(TypeError, match="dict"):
        orc.save(tmp_path / "bad.orc", model, metadata=[("a", 1)])


def _rewrite_metadata(path, value):
    """Rewrite a model file's header with ``metadata = value``, checksum kept valid."""
    import hashlib
    import json
    import struct

    data = path.read_bytes()
    start = len(orc.io.MAGIC)
    (n,) = struct.unpack("<Q", data[start : start + 8])
    header = json.loads(data[start + 8 : start + 8 + n])
    payload = data[start + 8 + n + 32 :]
    header["metadata"] = value
    blob = json.dumps(header).encode()
    head = orc.io.MAGIC + struct.pack("<Q", len(blob)) + blob
    path.write_bytes(head + hashlib.sha256(head).digest() + payload)


@pytest.mark.parametrize("value", [{"a": {"b": 1}}, {"a": [1]}, ["x"], {"a": [None]}])
def test_read_metadata_refuses_other_values(tmp_path, value):
    model = orc.readouts.LinearReadout(out_dim=2, res_dim=4)
    orc.save(tmp_path / "m.orc", model, metadata={"a": 1})
    _rewrite_metadata(tmp_path / "m.orc", value)
    with pytest.raises(orc.io.ModelFileError, match="metadata"):
        orc.io.read_metadata(tmp_path / "m.orc")
    with pytest.raises(orc.io.ModelFileError, match="metadata"):
        orc.load(tmp_path / "m.orc")


# -------------------------------------------------- train, forecast, evaluate
def test_model_file_remembers_dt_lyapunov_and_columns(workdir):
    run("train", "l63.csv", "--res-dim", "150", "--lyapunov", "0.906",
        "--val-fraction", "0.1", "--out", "esn.orc", cwd=workdir)  # fmt: skip
    meta = orc.io.read_metadata(workdir / "esn.orc")
    assert meta == {
        "dt": 0.01,
        "lyapunov": 0.906,
        "columns": ["x", "y", "z"],
        "time_column": "t",
        "model": "esn",
        "source": "l63.csv",
    }
    # forecast: names and times from the model file, plot in Lyapunov times
    proc = run("forecast", "esn.orc", "--steps", "40", "--warmup", "l63.csv",
               "--out", "fc.csv", "--plot", "fc.png", cwd=workdir)  # fmt: skip
    lines = (workdir / "fc.csv").read_text().splitlines()
    assert lines[0] == "t,x,y,z" and len(lines) == 41
    fc = np.loadtxt(workdir / "fc.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(fc[:, 0], np.round(0.01 * np.arange(1, 41), 12))
    assert (workdir / "fc.png").stat().st_size > 0 and "wrote plot" in proc.stdout
    # evaluate: windows, each reported, stored dt and lyapunov used
    proc = run("evaluate", "esn.orc", "l63.csv", "--warmup", "100", "--horizon",
               "300", "--windows", "3", "--plot", "ev.png", cwd=workdir)  # fmt: skip
    out = proc.stdout
    assert "3 windows of 300 steps, each after 100 warm-up rows, threshold 0.4" in out
    assert "VPT Lyapunov" in out and "100-399" in out and "700-999" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:9]}
    assert set(rows) == {"1", "2", "3", "mean", "median", "min", "max"}
    for w in ("1", "2", "3"):  # steps, time and Lyapunov times agree
        steps, t, lt = (float(x.lstrip("≥")) for x in rows[w][3:6])
        assert t == pytest.approx(steps * 0.01, rel=2e-3)
        assert lt == pytest.approx(steps * 0.01 * 0.906, rel=2e-3)
        assert rows[w][3].startswith("≥") == (steps == 300)
    assert (workdir / "ev.png").stat().st_size > 0
    # too short for the windows asked
    proc = run("evaluate", "esn.orc", "l63.csv", "--horizon", "1000", "--windows",
               "9", cwd=workdir, code=2)  # fmt: skip
    assert "has 4000 rows, fewer than the 9200 that --windows 9 of --horizon 1000" in (
        proc.stderr
    )
    # a warm-up sampled differently from the training data
    coarse = np.loadtxt(workdir / "l63.csv", delimiter=",", skiprows=1)[::5][:300]
    np.savetxt(workdir / "coarse.csv", coarse, delimiter=",", header="t,x,y,z",
               comments="")  # fmt: skip
    proc = run("forecast", "esn.orc", "--steps", "5", "--warmup", "coarse.csv",
               "--out", "c.csv", cwd=workdir, code=2)  # fmt: skip
    assert "coarse.csv is sampled every 0.05" in proc.stderr
    assert "esn.orc was trained on data sampled every 0.01" in proc.stderr


def test_report_marks_capped_windows():
    scores = [cli.Score(120, 200, 0.1), cli.Score(200, 200, 0.01)]
    assert cli._vpt_text(scores[0], 0.01, 0.9).startswith("valid prediction 120 steps")
    text = cli._vpt_text(scores[1], 0.01, 0.9)
    assert text.startswith("valid prediction ≥ 200 steps = 2 time units = 1.8 Ly")
    assert "the whole window" in text


def test_window_statistics_mark_lower_bounds(capsys):
    scores = [cli.Score(s, 100, 0.1) for s in (40, 100, 60, 100)]
    spans = [(10, 110), (110, 210), (210, 310), (310, 410)]
    cli._report_windows(scores, spans, None, None)
    rows = {
        line.split()[0]: line.split()
        for line in capsys.readouterr().out.split("\n")[1:9]
    }
    assert rows["1"][-1] == "40" and rows["2"][-1] == "≥100"
    assert rows["mean"][-1] == "≥75"  # some windows capped: a lower bound
    assert rows["median"][-1] == "≥80"  # (60 + 100) / 2, one of them capped
    assert rows["min"][-1] == "40" and rows["max"][-1] == "≥100"


# --------------------------------------------------------------- divergence
def test_diverged_forecasts_exit_1_after_writing(workdir):
    """NVAR on Lorenz63 sampled every 0.05 with almost no ridge: its closed loop
    blows up within a few steps (checked: NaN from step ~10)."""
    coarse = np.loadtxt(workdir / "l63.csv", delimiter=",", skiprows=1)[::5]
    np.savetxt(workdir / "l63c.csv", coarse, delimiter=",", header="t,x,y,z",
               comments="")  # fmt: skip
    proc = run("train", "l63c.csv", "--model", "nvar", "--beta", "1e-12",
               "--order", "2", "--input-noise", "0", "--val-fraction", "0.3",
               "--out", "nv.orc", cwd=workdir, code=1)  # fmt: skip
    err = proc.stderr.strip().splitlines()[-1]
    assert err.startswith("orc: error: validation forecast: NVARForecaster.forecast:")
    assert "diverged" in err and "The model was written to nv.orc for inspection" in err
    assert (workdir / "nv.orc").is_file() and "saved nv.orc" in proc.stdout
    proc = run("forecast", "nv.orc", "--steps", "60", "--out", "nfc.csv",
               cwd=workdir, code=1)  # fmt: skip
    assert "The forecast was written to nfc.csv for inspection" in proc.stderr
    assert np.loadtxt(workdir / "nfc.csv", delimiter=",", skiprows=1).shape == (60, 4)
    proc = run("evaluate", "nv.orc", "l63c.csv", "--warmup", "50", "--horizon", "60",
               "--windows", "2", cwd=workdir, code=1)  # fmt: skip
    assert "window 1:" in proc.stderr and "(2 of 2 windows diverged)" in proc.stderr
    assert "mean" in proc.stdout  # the report comes first


# ------------------------------------------------------------------- help
def test_every_option_has_help():
    missing = [
        f"{name} {p.opts[0]}"
        for name, command in cli.cli.commands.items()
        for p in command.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert not missing, missing


# ---------------------------------------------------------------- start-up
def _python(code):
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_cli_and_help_import_no_jax():
    assert _python("import orc.cli, sys; print('jax' in sys.modules)") == "False"
    helps = "\n".join(
        f"    main({argv!r})"
        for argv in (["--help"], ["train", "--help"], ["evaluate", "--help"],
                     ["forecast", "--help"], ["data", "--help"])
    )  # fmt: skip
    code = (
        "import sys, contextlib, io\nfrom orc.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n{helps}\n"
        "print('jax' in sys.modules, 'numpy' in sys.modules)"
    )
    assert _python(code) == "False False"


def test_lazy_package_keeps_its_names():
    out = _python(
        "import orc, sys\n"
        "assert 'jax' not in sys.modules\n"
        "print(orc.forecaster.ESNForecaster.__name__)\n"
        "ns = {}\nexec('from orc import *', ns)\n"
        "print(sorted(set(orc.__all__) - set(ns)))\n"
        "from orc import save, load, IllConditionedRidgeWarning, forecaster\n"
        "print(set(orc.__all__) <= set(dir(orc)))"
    )
    assert out.splitlines() == ["ESNForecaster", "[]", "True"]
    # `import orc` still registers orc's exported-program support with JAX
    # (orc.Errors' serialisation, the native kernels), once JAX is imported
    out = _python(
        "import sys, orc\n"
        "print('orc._errors' in sys.modules)\n"
        "import jax\n"
        "print('orc._errors' in sys.modules, 'orc._native' in sys.modules)"
    )
    assert out.splitlines() == ["False", "True True"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        orc.nope  # noqa: B018
