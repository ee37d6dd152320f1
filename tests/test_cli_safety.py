"""The ``orc`` command line never destroys its inputs and refuses what the
library refuses (issue 47, items 2 and 8).

- An output that is the same file as an input (the data, the model, the
  warm-up, the ``--config`` file; by path, symbolic or hard link) or as
  another output, and an output that cannot be written, are refused with exit
  code 2 before any work: the inputs' bytes are unchanged and no data is read,
  no model loaded, nothing trained.
- ``.npy`` data that is bool or complex is refused as ``orc._validation.check_data``
  refuses it; a column named as time (``timestamp`` too) is the time column,
  and irregular times are an error; ``orc train`` refuses options its
  ``--model`` does not use, given on the command line or in a config file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import click
import numpy as np
import pytest

import orc
from _helpers import run_cli
from orc import cli

DT = 0.05


def _write_csv(path, header, rows):
    np.savetxt(path, rows, delimiter=",", header=header, comments="")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A folder with data.csv (t, x, y: 300 rows of sinusoids) and m.orc, an
    ESN (res_dim 20) trained on it by ``orc train``."""
    d = tmp_path_factory.mktemp("cli_safety")
    t = DT * np.arange(300)
    _write_csv(d / "data.csv", "t,x,y", np.c_[t, np.sin(t), np.cos(1.3 * t)])
    proc = run_cli("train", "data.csv", "--res-dim", "20", "--spinup", "20",
                   "--out", "m.orc", cwd=d)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return d


@pytest.fixture
def work(source, tmp_path):
    """A fresh copy of ``source``'s files to misuse."""
    for name in ("data.csv", "m.orc"):
        shutil.copy(source / name, tmp_path / name)
    return tmp_path


@pytest.fixture
def no_work(monkeypatch):
    """Record any start of real work: reading data, loading a model, building
    a system's data, training (each call is recorded and then fails)."""
    started = []

    def sentinel(name):
        def called(*args, **kwargs):
            started.append(name)
            raise AssertionError(f"{name} was called")

        return called

    for owner, name in [
        (cli, "_read_data"),
        (cli, "_load_model"),
        (orc.data, "lorenz63"),
        (orc.forecaster, "train_RCForecaster"),
        (orc.forecaster, "train_NVARForecaster"),
    ]:
        monkeypatch.setattr(owner, name, sentinel(name))
    return started


def _snapshot(folder: Path) -> dict:
    """Every entry under ``folder``: a file's bytes, a link's target."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[p] = ("link", os.readlink(p))
        elif p.is_file():
            out[p] = ("file", p.read_bytes())
        else:
            out[p] = ("dir", None)
    return out


def _refused(work, args, *expected):
    """Run ``orc ARGS`` in ``work``: exit code 2, one error line holding each
    of ``expected``, and not a byte under ``work`` changed."""
    before = _snapshot(work)
    proc = run_cli(*args, cwd=work)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("orc: error: "), proc.stderr
    for text in expected:
        assert text in err[0], err[0]
    assert _snapshot(work) == before
    return err[0]


# ------------------------------------------------- an output is not an input
def _link(work, kind, target, name):
    """``name`` in ``work``: ``target`` itself, spelled otherwise, or a
    symbolic or hard link to it."""
    if kind == "same":
        return target
    if kind == "spelled":  # another spelling of the same path
        return f"../{work.name}/./{target}"
    if kind == "symlink":
        (work / name).symlink_to(target)
    else:
        os.link(work / target, work / name)
    return name


CASES = {  # command line with the output ({o}) naming the input (target)
    "train": (["train", "data.csv", "--out", "{o}"], "data.csv", "the data file"),
    "forecast": (
        ["forecast", "m.orc", "--steps", "5", "--out", "{o}"],
        "m.orc",
        "the model file",
    ),
    "forecast-warmup": (
        ["forecast", "m.orc", "--steps", "5", "--warmup", "data.csv", "--out", "{o}"],
        "data.csv",
        "the warm-up file",
    ),
    "forecast-plot": (
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv", "--plot", "{o}"],
        "m.orc",
        "the model file",
    ),
    "evaluate-plot-model": (
        ["evaluate", "m.orc", "data.csv", "--plot", "{o}"],
        "m.orc",
        "the model file",
    ),
    "evaluate-plot-data": (
        ["evaluate", "m.orc", "data.csv", "--plot", "{o}"],
        "data.csv",
        "the data file",
    ),
}


@pytest.mark.parametrize("kind", ["same", "spelled", "symlink", "hardlink"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_output_never_replaces_an_input(work, no_work, case, kind):
    args, target, what = CASES[case]
    out = _link(work, kind, target, "alias" + Path(target).suffix)
    option = "--plot" if "--plot" in args else "--out"
    _refused(
        work,
        [a.replace("{o}", out) for a in args],
        f"{option} {out} is the same file as {what} {target}",
        "an output never replaces an input",
    )
    assert no_work == []


@pytest.mark.parametrize("kind", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["train", "data", "demo"])
def test_the_config_file_is_an_input(work, no_work, command, kind):
    (work / "cfg.toml").write_text(
        "transient = 3\n" if command == "data" else "seed = 3\n"
    )
    if command == "demo":  # demo writes its plot into the folder --out
        (work / "plots").mkdir()
        shutil.copy(work / "cfg.toml", work / "plots" / "lorenz63_forecast.png")
        os.remove(work / "cfg.toml")
        config = _link(work, kind, "plots/lorenz63_forecast.png", "cfg.toml")
        args = ["demo", "--out", "plots", "--config", config]
        out = "plots/lorenz63_forecast.png"
    else:
        out = _link(work, kind, "cfg.toml", "alias.toml")
        first = ["train", "data.csv"] if command == "train" else ["data", "lorenz63"]
        args = [*first, "--config", "cfg.toml", "--out", out]
        config = "cfg.toml"
    _refused(work, args, f"--out {out} is the same file as the --config file {config}")
    assert no_work == []


@pytest.mark.parametrize("kind", ["same", "spelled", "symlink"])
def test_two_outputs_are_never_one_file(work, no_work, kind):
    (work / "f.csv").write_text("an earlier forecast\n")
    plot = _link(work, kind, "f.csv", "f.png")
    _refused(
        work,
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv", "--plot", plot],
        f"--plot {plot} and --out f.csv are the same file",
    )
    assert no_work == []


def test_a_dangling_link_to_the_other_output_counts(work, no_work):
    (work / "f.png").symlink_to("f.csv")  # f.csv does not exist yet
    _refused(
        work,
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv", "--plot", "f.png"],
        "--plot f.png and --out f.csv are the same file",
    )
    assert no_work == []


def test_other_paths_still_work(work):
    """The same commands with outputs of their own run and leave the inputs."""
    before = {p: p.read_bytes() for p in (work / "data.csv", work / "m.orc")}
    for args in (
        ["forecast", "m.orc", "--steps", "5", "--warmup", "data.csv", "--out", "f.csv"],
        ["evaluate", "m.orc", "data.csv", "--warmup", "50", "--horizon", "20"],
    ):
        proc = run_cli(*args, cwd=work)
        assert proc.returncode == 0, proc.stderr
    assert np.loadtxt(work / "f.csv", delimiter=",", skiprows=1).shape == (5, 3)
    assert {p: p.read_bytes() for p in before} == before


# --------------------------------------------------- an unwritable output
def _unwritable_folder(tmp_path) -> Path:
    """A folder no file can be created in, for this process: a read-only
    one, or (for root, whom permissions do not stop) sysfs."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    try:
        fd, name = tempfile.mkstemp(dir="/sys")
    except OSError:
        return Path("/sys")
    os.close(fd)
    os.unlink(name)
    pytest.skip("no folder here refuses a file to root")


@pytest.mark.parametrize("where", ["directory", "under-a-file", "no-permission"])
@pytest.mark.parametrize("command", ["train", "forecast", "evaluate", "data"])
def test_an_unwritable_output_is_found_before_any_work(
    work, no_work, tmp_path, command, where
):
    if where == "directory":
        (work / "out").mkdir()
        out, reason = "out", "it is a directory"
    elif where == "under-a-file":
        out, reason = "data.csv/f.csv", f"{work / 'data.csv'} is not a directory"
    else:
        folder = _unwritable_folder(tmp_path)
        out, reason = str(folder / "f.csv"), f"no file can be created in {folder}"
    option, args = {
        "train": ("--out", ["train", "data.csv", "--res-dim", "20"]),
        "forecast": ("--out", ["forecast", "m.orc", "--steps", "5"]),
        "evaluate": ("--plot", ["evaluate", "m.orc", "data.csv"]),
        "data": ("--out", ["data", "lorenz63", "--tn", "1"]),
    }[command]
    _refused(work, [*args, option, out], f"{option} {out} cannot be written: {reason}")
    assert no_work == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_output_file_is_refused(work, no_work):
    (work / "f.csv").write_text("kept\n")
    (work / "f.csv").chmod(0o444)
    _refused(
        work,
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv"],
        "--out f.csv cannot be written: no permission to write it",
    )
    assert no_work == []


def test_demo_output_folder_that_is_a_file(work, no_work):
    _refused(
        work,
        ["demo", "--out", "data.csv"],
        "--out data.csv/lorenz63_forecast.png cannot be written",
        f"{work / 'data.csv'} is not a directory",
    )
    assert no_work == []


def test_missing_folders_are_writable_and_the_probe_leaves_nothing(tmp_path):
    """Missing folders of an output are created when it is written (as
    orc.save does), so they are no reason to refuse it; the check creates
    neither them nor any file."""
    assert cli._unwritable(str(tmp_path / "new" / "sub" / "f.csv")) is None
    assert cli._unwritable(str(tmp_path / "f.csv")) is None
    assert list(tmp_path.iterdir()) == []
    assert cli._unwritable(str(tmp_path / ("x" * 300) / "f.csv")) == (
        "File name too long"
    )
    assert "NUL" in cli._unwritable(str(tmp_path / "a\0b"))


def test_same_file():
    with tempfile.TemporaryDirectory() as d:
        a, b = Path(d, "a"), Path(d, "b")
        a.write_text("x")
        assert cli._same_file(str(a), f"{d}/./a") and not cli._same_file(str(a), b)
        os.link(a, b)
        assert cli._same_file(str(a), str(b))  # a hard link: one inode
        assert cli._same_file(f"{d}/new", f"{d}/sub/../new")  # neither exists
        assert not cli._same_file(f"{d}/new", f"{d}/other")


# -------------------------------------------------- .npy: real numbers only
@pytest.mark.parametrize(
    "dtype, reason",
    [
        ("complex128", "must be real-valued, got complex dtype complex128"),
        ("complex64", "must be real-valued, got complex dtype complex64"),
        ("bool", "must hold real numbers (float or int), got a bool array"),
    ],
)
def test_npy_data_of_real_numbers_only(work, monkeypatch, dtype, reason):
    x = np.sin(DT * np.arange(300))[:, None] * np.ones((1, 2))
    data = (x + 1j * x) if dtype.startswith("complex") else (x > 0)
    np.save(work / "bad.npy", data.astype(dtype))
    trained = []
    monkeypatch.setattr(orc.forecaster, "train_RCForecaster", trained.append)
    _refused(
        work, ["train", "bad.npy", "--out", "x.orc"], f"bad.npy: its values {reason}"
    )
    # the warm-up of a forecast and the data of an evaluation too
    _refused(work, ["forecast", "m.orc", "--steps", "5", "--warmup", "bad.npy",
                    "--out", "f.csv"], "bad.npy", reason)  # fmt: skip
    _refused(work, ["evaluate", "m.orc", "bad.npy"], "bad.npy", reason)
    assert trained == []


def test_npy_integers_are_data(tmp_path):
    """Integers are numbers (the library converts them as well)."""
    np.save(tmp_path / "i.npy", np.arange(12, dtype=np.int32).reshape(6, 2) ** 2)
    table = cli._read_data(str(tmp_path / "i.npy"), "auto")
    assert table.values.dtype == np.float64
    np.testing.assert_array_equal(table.values, np.arange(12).reshape(6, 2) ** 2)


# ---------------------------------------------------------- time columns
@pytest.mark.parametrize(
    "name", ["t", "Time", "times", "timestamp", "TimeStamps", "time (s)", "t [ms]"]
)
def test_columns_named_as_time(name):
    assert cli._is_time_name(name)


@pytest.mark.parametrize("name", ["x", "temp", "timer", "tt", "time2", "date", "dt"])
def test_columns_not_named_as_time(name):
    assert not cli._is_time_name(name)


def test_a_timestamp_column_anywhere_is_time(tmp_path, capsys):
    t = 2.0 + 0.1 * np.arange(40)
    rows = np.c_[np.sin(t), t, np.cos(t)]
    _write_csv(tmp_path / "a.csv", "x,timestamp,y", rows)
    table = cli._read_data(str(tmp_path / "a.csv"), "auto")
    assert table.columns == ["x", "y"] and table.time_name == "timestamp"
    assert table.dt == 0.1
    np.testing.assert_array_equal(table.values, rows[:, [0, 2]])
    assert "column 'timestamp' of a.csv taken as time (dt=0.1)" in (
        capsys.readouterr().err
    )
    # none keeps it; first takes the first column (x is not increasing: an error)
    assert cli._read_data(str(tmp_path / "a.csv"), "none").values.shape == (40, 3)
    with pytest.raises(click.UsageError, match="column 'x', taken as time"):
        cli._read_data(str(tmp_path / "a.csv"), "first")


def test_irregular_timestamps_are_refused(work, monkeypatch):
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.5, 1.5, 300))
    _write_csv(work / "irr.csv", "x,timestamp,y", np.c_[np.sin(t), t, np.cos(t)])
    trained = []
    monkeypatch.setattr(orc.forecaster, "train_RCForecaster", trained.append)
    err = _refused(
        work,
        ["train", "irr.csv", "--out", "x.orc"],
        "irr.csv: column 'timestamp', taken as time, is not increasing in equal steps",
        "the sampling must be uniform",
        "--time-column none keeps the column as a feature",
    )
    steps = np.diff(t)
    assert f"steps from {steps.min():.6g} to {steps.max():.6g}" in err
    assert trained == []


def test_two_time_columns_are_ambiguous(tmp_path):
    t = 0.1 * np.arange(10)
    _write_csv(tmp_path / "a.csv", "t,x,timestamp", np.c_[t, t**2, t])
    with pytest.raises(
        click.UsageError, match="columns 't', 'timestamp' are all named"
    ):
        cli._read_data(str(tmp_path / "a.csv"), "auto")


# -------------------------------------------------- options of other models
@pytest.mark.parametrize(
    "model, options, named",
    [
        ("nvar", ["--res-dim", "30"], ["--res-dim (esn/deep-esn only)"]),
        ("nvar", ["--res-dim", "500"], ["--res-dim"]),  # its default, but given
        (
            "nvar",
            ["--leak-rate", "0.3", "--layers", "3", "--chunks", "2"],
            ["--leak-rate", "--layers (deep-esn only)", "--chunks (esn only)"],
        ),
        ("esn", ["--k", "3"], ["--k (nvar only)"]),
        ("esn", ["--order", "2", "--stride", "4"], ["--order", "--stride"]),
        ("esn", ["--layers", "3"], ["--layers (deep-esn only)"]),
        ("deep-esn", ["--chunks", "2", "--locality", "1"], ["--chunks", "--locality"]),
    ],
)
def test_options_of_another_model_are_refused(work, no_work, model, options, named):
    err = _refused(
        work,
        ["train", "data.csv", "--model", model, *options, "--out", "x.orc"],
        f"--model {model} does not use",
        *named,
    )
    assert err.endswith("remove them" if len(named) > 1 else "remove it")
    assert no_work == []


def test_options_of_another_model_from_a_config_file(work, no_work):
    (work / "cfg.toml").write_text("res-dim = 30\nk = 3\nseed = 2\n")
    _refused(
        work,
        ["train", "data.csv", "--model", "nvar", "--config", "cfg.toml",
         "--out", "x.orc"],
        "--model nvar does not use --res-dim (in cfg.toml, esn/deep-esn only): "
        "remove it",
    )  # fmt: skip
    assert no_work == []


@pytest.mark.parametrize(
    "model, options",
    [
        ("nvar", ["--k", "3", "--order", "2", "--stride", "1", "--seed", "2"]),
        ("esn", ["--res-dim", "20", "--chunks", "1", "--leak-rate", "0.5"]),
        ("deep-esn", ["--res-dim", "20", "--layers", "2", "--beta", "1e-6"]),
    ],
)
def test_options_of_the_model_reach_its_trainer(work, monkeypatch, model, options):
    """The check lets a model's own options and the common ones through: the
    trainer is reached (stopped there, so nothing trains)."""

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached("trainer reached")

    for name in ("train_RCForecaster", "train_NVARForecaster"):
        monkeypatch.setattr(orc.forecaster, name, reached)
    (work / "cfg.toml").write_text("spinup = 10\n")
    proc = run_cli("train", "data.csv", "--model", model, *options, "--config",
                   "cfg.toml", "--out", "x.orc", cwd=work)  # fmt: skip
    assert proc.returncode == 1 and "orc: error: trainer reached" in proc.stderr


def test_every_model_option_is_an_option_of_train():
    names = {p.name for p in cli.train.params}
    assert set(cli.MODEL_OPTIONS) <= names
    models = next(p for p in cli.train.params if p.name == "model").type.choices
    assert {m for ms in cli.MODEL_OPTIONS.values() for m in ms} <= set(models)


# ------------------------------- numbers, empty files and plot formats (item 8)
@pytest.mark.parametrize(
    "args, words",
    [
        (["--beta", "-1"], "Invalid value for '--beta': -1.0 is not in the range x>=0"),
        (["--beta", "nan"], "Invalid value for '--beta': 'nan' is not a finite number"),
        (["--input-noise", "-0.1"], "Invalid value for '--input-noise': -0.1 is not"),
        (["--input-noise", "nan"], "'--input-noise': 'nan' is not a finite number"),
        (["--dt", "nan"], "Invalid value for '--dt': 'nan' is not a finite number"),
        (["--dt", "inf"], "Invalid value for '--dt': 'inf' is not a finite number"),
        (["--dt", "0"], "Invalid value for '--dt': 0.0 is not in the range x>0"),
        (["--lyapunov", "nan"], "'--lyapunov': 'nan' is not a finite number"),
    ],
)
def test_train_refuses_bad_numbers_as_usage_errors(work, no_work, args, words):
    # exit 2 with click's one line naming the option (--beta -1 was the
    # library's ValueError, exit 1, after the data was read; NaN passed
    # click.FloatRange's comparisons)
    _refused(work, ["train", "data.csv", *args, "--out", "x.orc"], words)
    assert no_work == []


@pytest.mark.parametrize(
    "command",
    [
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv", "--dt", "nan"],
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv", "--lyapunov", "inf"],
        ["evaluate", "m.orc", "data.csv", "--dt", "nan"],
        ["evaluate", "m.orc", "data.csv", "--threshold", "nan"],
    ],
)
def test_forecast_and_evaluate_refuse_non_finite_numbers(work, no_work, command):
    option = next(a for a in command if a in ("--dt", "--lyapunov", "--threshold"))
    _refused(work, command, f"Invalid value for '{option}'", "is not a finite number")
    assert no_work == []


@pytest.mark.parametrize(
    "content, words",
    [
        # an empty file was np.load's EOFError, click's "Aborted!", exit 1
        (b"", "bad.npy is empty or cut off: it holds no .npy array"),
        (b"\x93NUMPY\x01\x00", "bad.npy: cannot parse as numbers (EOF"),
    ],
)
def test_an_empty_or_cut_off_npy_is_a_usage_error(work, content, words):
    (work / "bad.npy").write_bytes(content)
    _refused(work, ["train", "bad.npy", "--out", "x.orc"], words)
    _refused(work, ["forecast", "m.orc", "--steps", "5", "--warmup", "bad.npy",
                    "--out", "f.csv"], words)  # fmt: skip
    _refused(work, ["evaluate", "m.orc", "bad.npy"], words)


@pytest.mark.parametrize(
    "command",
    [
        ["forecast", "m.orc", "--steps", "5", "--out", "f.csv", "--plot", "p.csv"],
        ["evaluate", "m.orc", "data.csv", "--plot", "p.csv"],
        ["evaluate", "m.orc", "data.csv", "--plot", "p.docx"],
    ],
)
def test_a_plot_format_matplotlib_cannot_write_is_refused_first(work, no_work, command):
    suffix = command[-1].rsplit(".", 1)[1]
    err = _refused(
        work, command, f"--plot {command[-1]}: a plot cannot be written as .{suffix}"
    )
    assert "png" in err and "pdf" in err  # the formats it can write are listed
    assert no_work == []


def test_a_plot_that_names_an_input_is_refused_before_any_work(work, no_work):
    _refused(
        work,
        ["evaluate", "m.orc", "data.csv", "--plot", "data.csv"],
        "--plot data.csv is the same file as the data file data.csv",
    )
    assert no_work == []


def test_plot_formats_matplotlib_writes_are_taken(work):
    for name in ("p.png", "p.pdf", "p.svg", "p"):
        proc = run_cli("forecast", "m.orc", "--steps", "5", "--out", "f.csv",
                       "--plot", name, cwd=work)  # fmt: skip
        assert proc.returncode == 0, (name, proc.stderr)
