"""The ``orc`` command line.

Commands::

    orc demo                                   # ESN on Lorenz63: train, forecast, plot
    orc data lorenz63 --out l63.csv            # export a built-in system (t,x,y,z)
    orc train l63.csv --res-dim 500 --lyapunov 0.906 --out esn.orc
    orc forecast esn.orc --steps 1000 --out fc.csv --plot fc.png
    orc evaluate esn.orc l63_test.csv --horizon 1000 --windows 5 --plot ev.png

Data files are CSV (a header row of column names is allowed) or ``.npy``,
one row per time step and one column per feature. A time column (a column
with a header name ``t``, ``time``, ``times``, ``timestamp`` or
``timestamps``, any case, a unit in brackets allowed as in ``time (s)``; or,
without such a name, a first column that increases in equal steps) is never
used as a feature: it is announced on stderr and its spacing is the sampling
step ``dt``; one that is not equally spaced is an error, as the models
assume one sampling step (``--time-column`` overrides the detection). A
``.npy`` file must hold real numbers: a bool or complex array is refused, as
the library refuses it (:func:`orc._validation.check_data`). ``orc train``
stores ``dt``, the Lyapunov exponent and the column names in the model file
(:func:`orc.io.read_metadata`), and ``forecast`` and ``evaluate`` use them
unless their own options say otherwise.

Every command reads its options also from a TOML file given with
``--config`` (keys are the option names with dashes or underscores; an
unknown key is an error). Before any work, a command refuses an output file
that is one of its inputs (the data, the model, the ``--config`` file; a
symbolic or hard link to one counts), two outputs that are one file, and an
output it could not write; ``orc train`` refuses options that its
``--model`` does not use (given on the command line or in the ``--config``
file). Errors are one line on stderr, ``orc: error: ...``, with exit code 2
(bad input) or 1 (failure while running, e.g. a forecast that diverged: the
requested files are written first, for inspection).

The command line is an application, so unlike the library it sets JAX's
configuration: float64 on, and a persistent compilation cache so a second run
does not recompile. Nothing heavy is imported before a command runs, so
``orc --help`` answers at once.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import click

LORENZ_LYAPUNOV = 0.906
SYSTEMS = (
    "lorenz63",
    "rossler",
    "sakaraya",
    "colpitts",
    "hyper_lorenz63",
    "hyper_xu",
    "double_pendulum",
    "lorenz96",
    "KS_1D",
    "double_scroll",
    "multiscroll",
)
# Discrete series: sampled on their own grid, sized by a number of steps.
SERIES = ("mackey_glass", "narma", "henon_map", "logistic_map", "mso")
# Header names of a time column (any case), optionally followed by a unit in
# brackets or parentheses: "t", "time (s)", "timestamp [ms]".
TIME_NAME = re.compile(r"(t|times?|timestamps?)\s*([(\[][^()\[\]]*[)\]])?", re.I)
RTOL = 1e-6  # relative tolerance on sampling steps
THRESHOLD = 0.4  # default error threshold of the valid prediction time


class Failure(click.ClickException):
    """A failure while running (exit code 1), as opposed to bad input (2)."""

    exit_code = 1


def _configure_jax() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    cache = (
        Path(os.environ.get("ORC_CACHE_DIR", Path.home() / ".cache" / "orc")) / "jax"
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    except OSError:  # read-only home: run without the cache
        pass


def _note(text: str) -> None:
    click.echo(f"orc: {text}", err=True)


# -------------------------------------------------------------------- config
def _config_keys(command: click.Command) -> dict[str, str]:
    """Keys a config file may use (option names, dashes as underscores, and
    their long flags) -> the parameter they set."""
    keys = {}
    for p in command.params:
        if not isinstance(p, click.Option) or p.name == "config":
            continue
        keys[p.name] = p.name
        for flag in p.opts + p.secondary_opts:
            if flag.startswith("--"):
                keys[flag[2:].replace("-", "_")] = p.name
    return keys


def _config_value(key: str, value, param: click.Parameter, path: str):
    """Refuse TOML values click would silently coerce (3.7 for an integer,
    true for a number)."""
    kind = param.type
    if isinstance(kind, click.types.IntParamType | click.types.FloatParamType):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or (
            isinstance(kind, click.types.IntParamType) and value != int(value)
        ):
            what = (
                "an integer"
                if isinstance(kind, click.types.IntParamType)
                else "a number"
            )
            raise click.BadParameter(f"{key!r} in {path} must be {what}, got {value!r}")
        return int(value) if isinstance(kind, click.types.IntParamType) else value
    return value


def _load_config(ctx: click.Context, _param, value):
    if value is None:
        return value
    import difflib

    import tomllib

    try:
        with open(value, "rb") as f:
            cfg = tomllib.load(f)
    except OSError as err:
        raise click.BadParameter(f"cannot read {value}: {err.strerror}") from err
    except tomllib.TOMLDecodeError as err:
        raise click.BadParameter(f"{value} is not valid TOML: {err}") from err
    keys = _config_keys(ctx.command)
    params = {p.name: p for p in ctx.command.params}
    arguments = {
        p.name: p.human_readable_name
        for p in ctx.command.params
        if isinstance(p, click.Argument)
    }
    default_map = {}
    for key, item in cfg.items():
        name = key.replace("-", "_")
        if name in arguments:
            raise click.BadParameter(
                f"{key!r} in {value} is the argument {arguments[name]}: give it on "
                "the command line"
            )
        if name not in keys:
            close = difflib.get_close_matches(name, sorted(keys), n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else "valid keys: "
                + ", ".join(
                    sorted(
                        p.opts[-1].lstrip("-")
                        for p in ctx.command.params
                        if isinstance(p, click.Option) and p.name != "config"
                    )
                )
            )
            raise click.BadParameter(f"unknown key {key!r} in {value} ({hint})")
        default_map[keys[name]] = _config_value(key, item, params[keys[name]], value)
    ctx.default_map = default_map
    ctx.meta["orc.config"] = value  # an input the outputs may not replace
    return value


config_option = click.option(
    "--config",
    type=click.Path(dir_okay=False),
    callback=_load_config,
    is_eager=True,
    expose_value=False,
    help="TOML file with option values (command-line options win; an unknown "
    "key is an error).",
)
time_column_option = click.option(
    "--time-column",
    type=click.Choice(["auto", "first", "none"]),
    default="auto",
    show_default=True,
    help="Time column of the data: auto takes the column named t, time(s) or "
    "timestamp(s) (a unit in brackets allowed), else a first column increasing "
    "in equal steps; first always takes the first column; none keeps every "
    "column as a feature. Its spacing is dt; it must be uniform.",
)


class _FiniteRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and inf (a range check
    alone lets NaN through: every comparison with it is false)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number is not None and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


positive = _FiniteRange(min=0.0, min_open=True)
non_negative = _FiniteRange(min=0.0)


# --------------------------------------------------------------------- files
def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file: the same inode when both
    exist (so symbolic and hard links count), else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (yet)
        try:
            return os.path.realpath(a) == os.path.realpath(b)
        except ValueError:  # a NUL character: no file (_unwritable says so)
            return False


def _unwritable(path: str) -> str | None:
    """Why the file ``path`` could not be written, or None when it can.

    Through symbolic links, as the writers follow them: the target must not
    be a directory nor a file without write permission; its directory, or
    the nearest existing folder above it when directories are to be created,
    must be a directory a file can be created in (tried with a temporary
    file, removed at once, so that permissions, read-only mounts and
    pseudo-filesystems all answer as they would to the write)."""
    if "\0" in path:
        return "a path cannot hold a NUL character"
    try:
        target = Path(os.path.realpath(path))
        if target.is_dir():
            return "it is a directory"
        if target.exists() and not os.access(target, os.W_OK):
            return "no permission to write it"
        folder = target.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir():
            return f"{folder} is not a directory"
    except OSError as err:  # e.g. a name too long
        return err.strerror or str(err)
    try:
        fd, probe = tempfile.mkstemp(prefix=".orc-write-test-", dir=folder)
    except OSError as err:
        return f"no file can be created in {folder} ({err.strerror})"
    os.close(fd)
    os.unlink(probe)
    return None


def _check_files(inputs, outputs) -> None:
    """Refuse, before any work, outputs that would destroy the command's
    inputs or each other, and outputs that cannot be written (a usage error,
    exit code 2).

    inputs, outputs: ``(label, path)`` pairs, e.g. ``("the model file",
    "esn.orc")`` and ``("--out", "fc.csv")``; a path of None (an option not
    given) is skipped. The ``--config`` file read by the command is an input
    too. An output is refused when it is the same file as an input or an
    earlier output (:func:`_same_file`), or when :func:`_unwritable` finds a
    reason it cannot be written.
    """
    config = click.get_current_context().meta.get("orc.config")
    seen = [(label, str(path)) for label, path in inputs if path is not None]
    if config is not None:
        seen.append(("the --config file", config))
    n_inputs = len(seen)
    for label, path in outputs:
        if path is None:
            continue
        path = str(path)
        for i, (other, known) in enumerate(seen):
            if _same_file(path, known):
                if i < n_inputs:
                    raise click.UsageError(
                        f"{label} {path} is the same file as {other} {known}: "
                        "an output never replaces an input; choose another path"
                    )
                raise click.UsageError(
                    f"{label} {path} and {other} {known} are the same file: give "
                    "them different paths"
                )
        why = _unwritable(path)
        if why is not None:
            raise click.UsageError(f"{label} {path} cannot be written: {why}")
        seen.append((label, path))


def _check_plot_format(plot) -> None:
    """Refuse, before any work, a ``--plot`` file whose suffix names a format
    matplotlib cannot write (a usage error, exit code 2); no suffix is PNG."""
    if plot is None:
        return
    suffix = Path(str(plot)).suffix.lower().lstrip(".")
    if not suffix:
        return
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix not in formats:
        raise click.UsageError(
            f"--plot {plot}: a plot cannot be written as .{suffix}; name a file "
            f"of one of the image formats {', '.join(sorted(formats))} (e.g. "
            f"{Path(str(plot)).stem}.png)"
        )


# Options of `orc train` that only some models use -> those models.
MODEL_OPTIONS = {
    "res_dim": ("esn", "deep-esn"),
    "leak_rate": ("esn", "deep-esn"),
    "spectral_radius": ("esn", "deep-esn"),
    "density": ("esn", "deep-esn"),
    "bias": ("esn", "deep-esn"),
    "embedding_scaling": ("esn", "deep-esn"),
    "chunks": ("esn",),
    "locality": ("esn",),
    "layers": ("deep-esn",),
    "k": ("nvar",),
    "order": ("nvar",),
    "stride": ("nvar",),
}


def _check_model_options(model: str) -> None:
    """Refuse the options given for ``orc train`` (on the command line or in
    the ``--config`` file; an option left at its default is not given) that
    ``--model model`` does not use (a usage error naming each, where it came
    from and the models it is for)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    params = {p.name: p for p in ctx.command.params}
    config = ctx.meta.get("orc.config")
    unused = []
    for name, models in MODEL_OPTIONS.items():
        source = ctx.get_parameter_source(name)
        if model in models or source in (None, ParameterSource.DEFAULT):
            continue
        where = f"in {config}, " if source == ParameterSource.DEFAULT_MAP else ""
        unused.append(f"{params[name].opts[-1]} ({where}{'/'.join(models)} only)")
    if unused:
        raise click.UsageError(
            f"--model {model} does not use {', '.join(unused)}: remove "
            f"{'it' if len(unused) == 1 else 'them'}"
        )


# ---------------------------------------------------------------------- data
@dataclass
class Table:
    """A data file's features ``values (T, d)``, their names from its header
    (``None`` without one) and its time column, if it had one."""

    path: str
    values: object
    columns: list[str] | None
    time_name: str | None = None
    dt: float | None = None
    time_column: str = "auto"  # the --time-column that read it


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * max(abs(a), abs(b))


def _header(path: Path) -> list[str] | None:
    """Column names of a CSV's first line, or None when it holds numbers."""
    with open(path) as f:
        first = f.readline().strip()
    if not first:
        return None
    fields = [x.strip().strip("\"'") for x in first.lstrip("#").split(",")]
    try:
        [float(x) for x in fields]
    except ValueError:
        return fields
    return None if not first.startswith("#") else fields


def _is_time_name(name: str) -> bool:
    """Whether a column's header name marks it as time (:data:`TIME_NAME`)."""
    return TIME_NAME.fullmatch(name.strip()) is not None


def _uniform_steps(t) -> bool:
    import numpy as np

    steps = np.diff(t)
    med = float(np.median(steps))
    return med > 0 and bool(np.all(np.abs(steps - med) <= RTOL * med))


def _read_data(path: str, time_column: str = "auto") -> Table:
    """The table in CSV or .npy file ``path``, float64, its time column split
    off (see ``--time-column``), with clear errors."""
    import numpy as np

    p = Path(path)
    if not p.is_file():
        raise click.UsageError(f"data file not found: {path}")
    names = None
    try:
        if p.suffix == ".npy":
            data = np.load(p, allow_pickle=False)
        else:
            names = _header(p)
            data = np.loadtxt(
                p, delimiter=",", skiprows=0 if names is None else 1, ndmin=2
            )
    except ValueError as err:
        raise click.UsageError(f"{path}: cannot parse as numbers ({err})") from err
    except EOFError as err:  # np.load of an empty or cut-off file
        raise click.UsageError(
            f"{path} is empty or cut off: it holds no .npy array ({err})"
        ) from err
    if p.suffix == ".npy":  # the library's rule: real numbers, not bool or complex
        from ._validation import check_data

        try:
            data = check_data("its values", data, path, np.float64)
        except TypeError as err:
            raise click.UsageError(str(err)) from err
    data = np.asarray(data, dtype=np.float64)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] < 2:
        raise click.UsageError(
            f"{path}: expected a (time, features) table, got shape {data.shape}"
        )
    if names is not None and len(names) != data.shape[1]:
        raise click.UsageError(
            f"{path}: its header names {len(names)} columns but its rows have "
            f"{data.shape[1]}"
        )
    bad = ~np.isfinite(data).all(axis=1)
    if bad.any():
        rows = np.nonzero(bad)[0]
        raise click.UsageError(
            f"{path}: {bad.sum()} row(s) contain NaN or inf (first at data row {rows[0]}); "
            "remove or interpolate them"
        )
    col = None  # index of the time column
    if time_column == "first":
        col = 0
    elif time_column == "auto":
        named = [i for i, name in enumerate(names or ()) if _is_time_name(name)]
        if len(named) > 1:
            raise click.UsageError(
                f"{path}: columns {', '.join(repr(names[i]) for i in named)} are "
                "all named as time; keep one (--time-column first takes the "
                "first column, none keeps every column as a feature)"
            )
        if named:
            col = named[0]
        elif data.shape[1] >= 2 and data.shape[0] >= 3 and _uniform_steps(data[:, 0]):
            col = 0
    if col is None:
        return Table(path, data, names, time_column=time_column)
    first = names[col] if names else None
    label = f"column {first!r}" if first is not None else "the first column"
    if data.shape[1] < 2:
        raise click.UsageError(
            f"{path}: its only column, {label}, is a time column: no feature is "
            "left (--time-column none keeps it as a feature)"
        )
    if not _uniform_steps(data[:, col]):
        steps = np.diff(data[:, col])
        raise click.UsageError(
            f"{path}: {label}, taken as time, is not increasing in equal steps "
            f"(steps from {steps.min():.6g} to {steps.max():.6g}); the sampling "
            "must be uniform, as the models assume one sampling step: resample "
            "the data, or --time-column none keeps the column as a feature"
        )
    dt = float(f"{np.median(np.diff(data[:, col])):.12g}")
    _note(
        f"{label} of {p.name} taken as time (dt={dt:g}); "
        "--time-column none keeps it as a feature"
    )
    return Table(
        path,
        np.delete(data, col, axis=1),
        names[:col] + names[col + 1 :] if names else None,
        first or "column 0",
        dt,
        time_column,
    )


def _write_table(path: str, data, header: list[str]) -> None:
    import numpy as np

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".npy":
        np.save(p, np.asarray(data))
    else:
        # repr: the shortest text that reads back as the same float64
        lines = [",".join(header)] if header else []
        lines += [",".join(map(repr, row)) for row in np.asarray(data).tolist()]
        p.write_text("\n".join(lines) + "\n")


def _columns(n: int) -> list[str]:
    return [f"u{i}" for i in range(n)]


# --------------------------------------------------------------------- model
@dataclass
class Settings:
    """What a saved model's metadata says about its data, merged with the
    command's options (an option given explicitly wins)."""

    dt: float | None
    lyapunov: float | None
    columns: list[str] | None


def _load_model(path: str):
    """``(model, extras, metadata)`` of a model file, with clear errors."""
    import orc

    if not Path(path).is_file():
        raise click.UsageError(f"model file not found: {path}")
    try:
        forecasters = (orc.forecaster.RCForecasterBase, orc.forecaster.NVARForecaster)
        model, extras = orc.load(path, cls=forecasters, return_extras=True)
        return model, extras, orc.io.read_metadata(path)
    except orc.io.ModelFileError as err:
        raise click.UsageError(str(err)) from err


def _stored(meta: dict, key: str):
    """A positive number from the metadata, or None."""
    value = meta.get(key)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def _settings(meta, model_file, table, dt, lyapunov, n_features) -> Settings:
    """dt: ``--dt``, else the data's time column, else the model file's; a
    disagreement between the data and those is a usage error."""
    stored_dt = _stored(meta, "dt")
    file_dt = table.dt if table is not None else None
    if dt is not None:
        if file_dt is not None and not _close(dt, file_dt):
            raise click.UsageError(
                f"--dt {dt:g} disagrees with the spacing {file_dt:g} of the time "
                f"column {table.time_name!r} of {table.path}"
            )
        if stored_dt is not None and not _close(dt, stored_dt):
            _note(f"--dt {dt:g} overrides the dt={stored_dt:g} stored in {model_file}")
    elif file_dt is not None:
        if stored_dt is not None and not _close(file_dt, stored_dt):
            raise click.UsageError(
                f"{table.path} is sampled every {file_dt:g} (its time column "
                f"{table.time_name!r}) but "
                f"{model_file} was trained on data sampled every {stored_dt:g} "
                "(--dt overrides)"
            )
        dt = file_dt
    else:
        dt = stored_dt
    if lyapunov is None:
        lyapunov = _stored(meta, "lyapunov")
    elif dt is None:
        _note("--lyapunov needs dt (--dt or a time column) to count Lyapunov times")
    stored_cols = meta.get("columns")
    if not (
        isinstance(stored_cols, list)
        and len(stored_cols) == n_features
        and all(isinstance(c, str) for c in stored_cols)
    ):
        stored_cols = None
    file_cols = table.columns if table is not None else None
    if stored_cols and file_cols and list(file_cols) != stored_cols:
        _note(
            f"warning: the columns of {table.path} ({', '.join(file_cols)}) are not "
            f"those {model_file} was trained on ({', '.join(stored_cols)}); they are "
            "taken in order"
        )
    return Settings(dt, lyapunov, stored_cols or file_cols)


def _check_width(table: Table, model) -> None:
    d = table.values.shape[1]
    if d != model.in_dim:
        hint = ""
        if d == model.in_dim + 1 and table.time_column == "auto":
            hint = " (if its first column is time, pass --time-column first)"
        raise click.UsageError(
            f"{table.path} has {d} columns but the model expects {model.in_dim}{hint}"
        )


# ---------------------------------------------------------------- divergence
@contextlib.contextmanager
def _watch_divergence():
    """Collect the messages of the DivergenceWarnings raised inside (other
    warnings are shown as usual)."""
    from ._divergence import DivergenceWarning

    found: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DivergenceWarning)
        yield found
    for w in caught:
        if issubclass(w.category, DivergenceWarning):
            found.append(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


# ------------------------------------------------------------------- scoring
@dataclass
class Score:
    steps: int  # valid prediction time in steps
    length: int  # steps scored
    nrmse: float

    @property
    def capped(self) -> bool:
        return self.steps >= self.length


@functools.cache
def _scorer():
    """orc.metrics' valid prediction time (in steps) and NRMSE, compiled as
    one program (run op by op they take a second to compile)."""
    import jax

    from . import metrics

    def score(pred, truth, threshold):
        return (
            metrics.valid_prediction_time(pred, truth, threshold),
            metrics.nrmse(pred, truth),
        )

    return jax.jit(score)


def _score(pred, truth, threshold: float) -> Score:
    import numpy as np

    pred, truth = np.asarray(pred), np.asarray(truth, dtype=np.asarray(pred).dtype)
    steps, nrmse = _scorer()(pred, truth, threshold)
    return Score(int(steps), int(truth.shape[0]), float(nrmse))


def _vpt_text(score: Score, dt, lyapunov) -> str:
    ge = "≥ " if score.capped else ""
    text = f"valid prediction {ge}{score.steps} steps"
    if dt is not None:
        text += f" = {score.steps * dt:.3g} time units"
        if lyapunov is not None:
            text += f" = {score.steps * dt * lyapunov:.3g} Lyapunov times"
    if score.capped:
        text += " (the whole window: the error never exceeded the threshold)"
    return text


def _report(label: str, score: Score, dt, lyapunov, where: str = "") -> None:
    click.echo(
        f"{label}: {score.length} steps{where}, NRMSE {score.nrmse:.4g}, "
        + _vpt_text(score, dt, lyapunov)
    )


def _report_windows(scores, spans, dt, lyapunov) -> None:
    """A table of the windows' scores and their mean/median/min/max; ``≥``
    marks a VPT (or statistic) that is only a lower bound (the window capped it)."""
    import numpy as np

    H = scores[0].length
    units = [("VPT steps", 1.0)]
    if dt is not None:
        units.append(("VPT time", dt))
        if lyapunov is not None:
            units.append(("VPT Lyapunov", dt * lyapunov))
    width = max(13, len(f"{spans[-1][0]}-{spans[-1][1] - 1}"))
    click.echo(
        f"{'window':>7}  {'rows scored':>{width}}  {'NRMSE':>9}"
        + "".join(f"  {u:>12}" for u, _ in units)
    )

    def row(name, rows, nrmse, steps, bound):
        cells = []
        for i, (_, factor) in enumerate(units):
            value = steps * factor
            text = (
                (f"{value:.0f}" if value == round(value) else f"{value:.1f}")
                if i == 0
                else f"{value:.3g}"
            )
            cells.append(f"  {('≥' if bound else '') + text:>12}")
        click.echo(f"{name:>7}  {rows:>{width}}  {nrmse:>9.4g}" + "".join(cells))

    for i, (s, (a, b)) in enumerate(zip(scores, spans, strict=True)):
        row(str(i + 1), f"{a}-{b - 1}", s.nrmse, s.steps, s.capped)
    steps = np.array([s.steps for s in scores], dtype=float)
    nrmse = np.array([s.nrmse for s in scores])
    srt = np.sort(steps)
    n = len(srt)
    stats = (
        ("mean", np.mean, bool((steps >= H).any())),
        ("median", np.median, bool(srt[n // 2] >= H)),
        ("min", np.min, bool(srt[0] >= H)),
        ("max", np.max, bool(srt[-1] >= H)),
    )
    for name, fn, bound in stats:
        row(name, "", float(fn(nrmse)), float(fn(steps)), bound)
    if (steps >= H).any():
        click.echo(
            f"≥: the error stayed below the threshold for the whole window of {H} "
            "steps, so the VPT is at least that (a longer --horizon measures it)"
        )


# ------------------------------------------------------------------ plotting
def _plot(path, pred, *, truth=None, warmup=None, dt=None, lyapunov=None,
          names=None, title=None, threshold=THRESHOLD) -> None:  # fmt: skip
    """The figure of one forecast (with its truth when there is one) by
    :func:`orc.utils.visualization.plot_forecast`: time 0 is the last warm-up
    row, the x axis in Lyapunov times (dt and lyapunov known), time units (dt)
    or steps, the last rows of the warm-up (at most half the forecast's
    length) drawn before the forecast."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .utils import visualization

    n = pred.shape[0]
    if warmup is not None:
        warmup = np.asarray(warmup)[-max(1, n // 2) :]
    t = None
    if dt is not None and n > 1:
        t = np.arange(1, n + 1) * dt
    with np.errstate(over="ignore", invalid="ignore"):  # a diverged forecast
        fig = visualization.plot_forecast(
            None if truth is None else np.asarray(truth),
            np.asarray(pred),
            t=t,
            dt=dt if t is None else None,
            lyapunov_exponent=lyapunov if dt is not None else None,
            threshold=threshold,
            state_var_names=names,
            title=title,
            warmup=warmup,
        )
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Reservoir computing in JAX: train, forecast and evaluate echo state networks."""


# ---------------------------------------------------------------------- demo
@cli.command()
@click.option("--res-dim", default=500, show_default=True, help="Reservoir size.")
@click.option(
    "--train-steps", default=20000, show_default=True, help="Training samples."
)
@click.option("--seed", default=0, show_default=True, help="Model seed.")
@click.option("--out", default="orc-output", show_default=True, help="Output folder.")
@config_option
def demo(res_dim: int, train_steps: int, seed: int, out: str) -> None:
    """Train an ESN (ORC defaults) on Lorenz63, forecast ten test windows,
    report the valid prediction time and save a forecast plot."""
    plot = Path(out) / "lorenz63_forecast.png"
    _check_files([], [("--out", plot)])
    _configure_jax()
    import jax.numpy as jnp
    import numpy as np

    import orc

    dt, warmup, horizon, n_windows = 0.01, 200, 1500, 10
    click.echo("orc demo: echo state network forecast of the Lorenz63 system")
    t0 = time.perf_counter()
    total = train_steps + n_windows * (warmup + horizon) + 1000
    U, _ = orc.data.lorenz63(tN=total * dt, dt=dt)
    U = U[1000:]  # drop the transient onto the attractor
    click.echo(
        f"  data        {U.shape[0]} samples, dt={dt} ({time.perf_counter() - t0:.1f} s)"
    )

    t0 = time.perf_counter()
    esn = orc.forecaster.ESNForecaster(data_dim=3, res_dim=res_dim, seed=seed)
    esn, R = orc.forecaster.train_RCForecaster(esn, U[:train_steps], spinup=200)
    R.block_until_ready()
    click.echo(
        f"  training    res_dim={res_dim}, {train_steps} steps, states {tuple(R.shape)} "
        f"({time.perf_counter() - t0:.1f} s incl. compilation)"
    )
    t0 = time.perf_counter()
    scale = float(jnp.sqrt(jnp.mean(jnp.sum(U[train_steps:] ** 2, axis=1))))
    vpts, first = [], None
    for w in range(n_windows):
        start = train_steps + warmup + w * (warmup + horizon)
        pred = esn.forecast_from_IC(horizon, U[start - warmup : start])
        truth = U[start : start + horizon]
        vpts.append(
            float(
                orc.metrics.valid_prediction_time(
                    pred, truth, THRESHOLD, dt, LORENZ_LYAPUNOV, scale=scale
                )
            )
        )
        first = first or (truth, pred, U[start - warmup : start])
    vpts = np.array(vpts)
    click.echo(
        f"  forecasting {n_windows} windows of {horizon} steps ({time.perf_counter() - t0:.1f} s)"
    )
    click.echo(
        f"  valid prediction time (error < {THRESHOLD}): mean {vpts.mean():.2f} "
        f"Lyapunov times (min {vpts.min():.2f}, max {vpts.max():.2f}; window cap "
        f"{horizon * dt * LORENZ_LYAPUNOV:.2f})"
    )
    _plot(
        plot,
        first[1],
        truth=first[0],
        warmup=first[2],
        dt=dt,
        lyapunov=LORENZ_LYAPUNOV,
        names=["x", "y", "z"],
        title=f"ESN forecast of Lorenz63 (res_dim={res_dim}), test window 1",
    )
    click.echo(f"  plot        {plot.resolve()}")


# ---------------------------------------------------------------------- data
@cli.command()
@click.argument("name", type=click.Choice(SYSTEMS + SERIES))
@click.option("--out", required=True, help="Output file (.csv or .npy).")
@click.option("--tn", "tN", default=100.0, show_default=True, help="Final time.")
@click.option(
    "--dt",
    default=None,
    type=positive,
    help="Sampling step [default: 0.01; KS_1D 0.25].",
)
@click.option(
    "--steps",
    default=None,
    type=click.IntRange(min=2),
    help="Length of a discrete series (mackey_glass, narma, henon_map, "
    "logistic_map, mso); default tN/dt.",
)
@click.option(
    "--transient",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Leading samples to drop.",
)
@config_option
def data(name: str, out: str, tN: float, dt, steps, transient: int) -> None:
    """Export a built-in dynamical system as a (time, features) table.

    ODEs and KS_1D are integrated up to --tn and sampled every --dt; their
    table starts with a time column t (so ``orc train`` finds dt in it). The
    discrete series (mackey_glass sampled every 1 time unit, narma's input u
    and output y, the maps, mso) have --steps rows and no time column.
    """
    _check_files([], [("--out", out)])
    _configure_jax()
    import numpy as np

    import orc

    if dt is None:
        dt = 0.25 if name == "KS_1D" else 0.01
    fn = getattr(orc.data, name)
    t = None
    try:
        if name in SERIES:
            n = steps if steps is not None else int(round(tN / dt))
            U = fn(n)
            U = np.concatenate([np.asarray(a) for a in U], 1) if name == "narma" else U
        else:
            U, t = fn(tN, dt=dt) if name == "KS_1D" else fn(tN, dt)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    U = np.asarray(U)
    if transient >= U.shape[0]:
        raise click.UsageError(
            f"--transient {transient} drops all {U.shape[0]} samples of {name}"
        )
    U = U[transient:]
    names = {
        "lorenz63": ["x", "y", "z"],
        "rossler": ["x", "y", "z"],
        "narma": ["u", "y"],
        "henon_map": ["x", "y"],
    }.get(name, _columns(U.shape[1]))
    table, what = U, ""
    if t is not None:
        table = np.concatenate([np.asarray(t)[transient:, None], U], axis=1)
        names, what = ["t", *names], f" (and a time column t, dt={dt:g})"
    _write_table(out, table, names)
    click.echo(
        f"wrote {U.shape[0]} samples x {U.shape[1]} features of {name}{what} to {out}"
    )


# --------------------------------------------------------------------- train
def _int_or_auto(option: str, value):
    """An option that takes a positive integer or 'auto'."""
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise click.UsageError(
            f"{option} must be a positive integer or 'auto', got {value!r}"
        ) from None


@cli.command()
@click.argument("data_file", metavar="DATA")
@click.option(
    "--model",
    type=click.Choice(["esn", "deep-esn", "nvar"]),
    default="esn",
    show_default=True,
    help="esn: echo state network (parallel with --chunks); deep-esn: stacked "
    "reservoirs (--layers); nvar: next-generation RC (--k, --order).",
)
@click.option(
    "--res-dim", default=500, show_default=True, help="Reservoir size per chunk/layer."
)
@click.option("--layers", default=2, show_default=True, help="deep-esn: layers.")
@click.option("--k", default=2, show_default=True, help="nvar: delayed samples.")
@click.option(
    "--order",
    default="auto",
    show_default=True,
    help="nvar: monomial order; 'auto' is 3 while k x columns <= 20, else 2.",
)
@click.option(
    "--stride",
    default="auto",
    show_default=True,
    help="nvar: spacing of the delayed samples; 'auto' chooses it from the "
    "data's sampling (about 30 per dominant period).",
)
@click.option(
    "--input-noise",
    type=non_negative,
    default=None,
    help="Std of noise added to the training inputs (stabilises closed loops), "
    "in the data's units. Default: nvar 1e-3 to 1e-1 of each column's std, "
    "chosen by closed-loop validation on the last 20% of the data; esn 0.",
)
@click.option(
    "--leak-rate",
    default=0.6,
    show_default=True,
    help="Leak rate a of the reservoir update r' = (1-a) r + a tanh(...).",
)
@click.option(
    "--spectral-radius",
    default=0.8,
    show_default=True,
    help="Spectral radius the reservoir matrix is scaled to.",
)
@click.option(
    "--density",
    default=0.02,
    show_default=True,
    help="Fraction of non-zero entries of the reservoir matrix.",
)
@click.option(
    "--bias", default=1.6, show_default=True, help="Scale of the reservoir's bias."
)
@click.option(
    "--embedding-scaling",
    default=0.08,
    show_default=True,
    help="Scale of the input (embedding) weights.",
)
@click.option(
    "--chunks",
    default=1,
    show_default=True,
    help="esn: parallel reservoirs, each reading a slice of the features.",
)
@click.option(
    "--locality",
    default=0,
    show_default=True,
    help="esn with --chunks: neighbouring features each chunk also reads.",
)
@click.option(
    "--beta",
    default=None,
    type=non_negative,
    help="Ridge regularisation [default: 8e-8; nvar 2.5e-6].",
)
@click.option(
    "--spinup", default=100, show_default=True, help="Transient states dropped."
)
@click.option(
    "--val-fraction",
    default=0.0,
    show_default=True,
    help="Trailing fraction held out and forecast for validation.",
)
@click.option(
    "--dt",
    default=None,
    type=positive,
    help="Sample spacing [default: that of the data's time column], stored in "
    "the model file.",
)
@click.option(
    "--lyapunov",
    default=None,
    type=positive,
    help="Largest Lyapunov exponent of the system (VPT in Lyapunov times), "
    "stored in the model file.",
)
@click.option(
    "--seed", default=0, show_default=True, help="Seed of the reservoir and noise."
)
@click.option("--out", required=True, help="Model file to write.")
@time_column_option
@config_option
def train(data_file, model, res_dim, layers, k, order, stride, input_noise, leak_rate,
          spectral_radius, density, bias, embedding_scaling, chunks, locality, beta,
          spinup, val_fraction, dt, lyapunov, seed, out, time_column) -> None:  # fmt: skip
    """Train a forecaster on DATA (CSV or .npy, time x features) and save it.

    The model file also stores dt, --lyapunov, the column names and the data
    file's name, which forecast and evaluate use.
    """
    _check_files([("the data file", data_file)], [("--out", out)])
    _check_model_options(model)
    table = _read_data(data_file, time_column)
    U = table.values
    if not 0.0 <= val_fraction < 1.0:
        raise click.UsageError("--val-fraction must be in [0, 1)")
    n_val = int(round(val_fraction * U.shape[0]))
    n_train = U.shape[0] - n_val
    if spinup >= n_train - 1:
        raise click.UsageError(
            f"--spinup ({spinup}) must be less than the training length ({n_train})"
        )
    dt = _settings({}, out, table, dt, lyapunov, U.shape[1]).dt
    _configure_jax()
    import jax.numpy as jnp

    import orc

    esn_args = dict(
        data_dim=U.shape[1], res_dim=res_dim, leak_rate=leak_rate, bias=bias,
        embedding_scaling=embedding_scaling, Wr_density=density,
        Wr_spectral_radius=spectral_radius, seed=seed,
    )  # fmt: skip
    fc = orc.forecaster
    try:
        if model == "esn":
            esn = fc.ESNForecaster(**esn_args, chunks=chunks, locality=locality)
            what = f"res_dim={res_dim}, chunks={chunks}"
        elif model == "deep-esn":
            esn = fc.DeepESNForecaster(**esn_args, n_layers=layers)
            what = f"res_dim={res_dim}, layers={layers}"
        else:
            stride = _int_or_auto("--stride", stride)
            order = _int_or_auto("--order", order)
            esn = fc.NVARForecaster(U.shape[1], k=k, s=stride, order=order)
    except (ValueError, TypeError) as err:
        raise click.UsageError(str(err)) from err
    t0 = time.perf_counter()
    train_fn = fc.train_NVARForecaster if model == "nvar" else fc.train_RCForecaster
    if beta is None:
        beta = 2.5e-6 if model == "nvar" else 8e-8
    if input_noise is None:
        input_noise = "auto" if model == "nvar" else 0.0
    esn, last = train_fn(
        esn,
        jnp.asarray(U[:n_train]),
        spinup=spinup,
        beta=beta,
        return_states=False,
        input_noise=input_noise,
        noise_seed=seed,
    )
    last.block_until_ready()
    if model == "nvar":  # after training: s="auto" is chosen from the data
        how = " (auto)" if stride == "auto" else ""
        what = (
            f"k={k}, stride={esn.s}{how}, order={esn.order}"
            f"{' (auto)' if order == 'auto' else ''}, {esn.n_features} features"
        )
    click.echo(
        f"trained {model} ({what}) on {n_train} samples x "
        f"{U.shape[1]} features in {time.perf_counter() - t0:.1f} s"
    )
    diverged = []
    if n_val:
        with _watch_divergence() as diverged:
            pred = esn.forecast(n_val, last)
            pred.block_until_ready()
        _report("validation", _score(pred, U[n_train:], THRESHOLD), dt, lyapunov)
    metadata = {
        "dt": dt,
        "lyapunov": lyapunov,
        "columns": table.columns,
        "time_column": table.time_name,
        "model": model,
        "source": Path(data_file).name,
    }
    orc.save(out, esn, extras={"last_state": last}, metadata=metadata)
    click.echo(f"saved {out}")
    if diverged:
        raise Failure(
            f"validation forecast: {diverged[0]} The model was written to {out} "
            "for inspection."
        )


# ------------------------------------------------------------------ forecast
@cli.command()
@click.argument("model_file", metavar="MODEL")
@click.option(
    "--steps", required=True, type=click.IntRange(min=1), help="Samples to forecast."
)
@click.option(
    "--warmup",
    default=None,
    help="Data file to warm the model up on; the forecast follows its last row "
    "(default: continue from the end of training).",
)
@click.option(
    "--out",
    required=True,
    help="Forecast file (.csv or .npy). A CSV has the training data's column "
    "names and, when dt is known, a leading column t = dt, 2 dt, ... (time since "
    "the last warm-up row).",
)
@click.option(
    "--plot",
    default=None,
    help="Also plot the forecast (after the end of the warm-up) to this PNG.",
)
@click.option(
    "--dt",
    default=None,
    type=positive,
    help="Sample spacing [default: the model file's, or the warm-up's time column].",
)
@click.option(
    "--lyapunov",
    default=None,
    type=positive,
    help="Largest Lyapunov exponent for the plot's axis [default: the model file's].",
)
@time_column_option
@config_option
def forecast(model_file, steps, warmup, out, plot, dt, lyapunov, time_column) -> None:
    """Forecast STEPS samples with a saved model.

    Exits with code 1 if the forecast diverges (after writing it).
    """
    import numpy as np

    _check_files(
        [("the model file", model_file), ("the warm-up file", warmup)],
        [("--out", out), ("--plot", plot)],
    )
    _check_plot_format(plot)
    table = _read_data(warmup, time_column) if warmup is not None else None
    _configure_jax()
    import jax.numpy as jnp

    model, extras, meta = _load_model(model_file)
    if table is not None:
        _check_width(table, model)
    elif "last_state" not in extras:
        raise click.UsageError(f"{model_file} stores no last state; pass --warmup DATA")
    cfg = _settings(meta, model_file, table, dt, lyapunov, model.out_dim)
    with _watch_divergence() as diverged:
        if table is not None:
            pred = model.forecast_from_IC(steps, jnp.asarray(table.values))
        else:
            pred = model.forecast(steps, extras["last_state"])
        pred = np.asarray(pred)
    names = cfg.columns or _columns(pred.shape[1])
    rows, header = pred, names
    if (
        cfg.dt is not None
        and Path(out).suffix != ".npy"
        and not any(_is_time_name(c) for c in names)
    ):
        t = [float(f"{k * cfg.dt:.12g}") for k in range(1, steps + 1)]
        rows = np.concatenate([np.asarray(t)[:, None], pred], 1)
        header = ["t", *names]
    _write_table(out, rows, header)
    click.echo(f"wrote {steps} forecast steps to {out}")
    if plot:
        source = f"warm-up {Path(warmup).name}" if warmup else "end of training"
        _plot(
            plot,
            pred,
            warmup=table.values if table is not None else None,
            dt=cfg.dt,
            lyapunov=cfg.lyapunov,
            names=names,
            title=f"forecast by {Path(model_file).name} from the {source}",
        )
        click.echo(f"wrote plot {plot}")
    if diverged:
        raise Failure(
            f"{diverged[0]} The forecast was written to {out} for inspection."
        )


# ------------------------------------------------------------------ evaluate
@cli.command()
@click.argument("model_file", metavar="MODEL")
@click.argument("data_file", metavar="DATA")
@click.option(
    "--warmup",
    default=200,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rows of true data each window warms up on before it is forecast.",
)
@click.option(
    "--horizon",
    default=None,
    type=click.IntRange(min=1),
    help="Rows scored per window [default: all rows after the warm-up, shared "
    "by the windows].",
)
@click.option(
    "--windows",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Consecutive windows scored after the first --warmup rows, each warmed "
    "up on the --warmup rows just before it.",
)
@click.option(
    "--threshold",
    default=THRESHOLD,
    show_default=True,
    type=positive,
    help="Normalised error that ends the valid prediction time.",
)
@click.option(
    "--dt",
    default=None,
    type=positive,
    help="Sample spacing [default: the data's time column, or the model file's].",
)
@click.option(
    "--lyapunov",
    default=None,
    type=positive,
    help="Largest Lyapunov exponent [default: the model file's].",
)
@click.option(
    "--plot", default=None, help="Plot the first window's forecast to this PNG."
)
@time_column_option
@config_option
def evaluate(model_file, data_file, warmup, horizon, windows, threshold, dt,
             lyapunov, plot, time_column) -> None:  # fmt: skip
    """Forecast windows of DATA after warming up on the rows before each, and
    report each window's NRMSE and valid prediction time (VPT) with their
    mean, median, min and max.

    Window k (from 0) scores rows W + k H to W + (k + 1) H - 1 and warms up on
    the W rows before them (W = --warmup, H = --horizon). The VPT counts the
    steps before the normalised error ||forecast - truth|| / sqrt(mean ||truth||²)
    (over the window) first exceeds --threshold; "≥" marks a window whose
    forecast stayed below it to the end, which only bounds the VPT from
    below. Exits with code 1 if a forecast diverges (after the report).
    """
    import numpy as np

    _check_files(
        [("the model file", model_file), ("the data file", data_file)],
        [("--plot", plot)],
    )
    _check_plot_format(plot)
    table = _read_data(data_file, time_column)
    U = table.values
    T = U.shape[0]
    if horizon is None:
        horizon = (T - warmup) // windows
        if horizon < 1:
            raise click.UsageError(
                f"{data_file} has {T} rows: nothing is left to score after "
                f"--warmup {warmup} for --windows {windows}"
            )
    need = warmup + windows * horizon
    if need > T:
        raise click.UsageError(
            f"{data_file} has {T} rows, fewer than the {need} that --windows "
            f"{windows} of --horizon {horizon} after --warmup {warmup} need"
        )
    _configure_jax()
    import jax.numpy as jnp

    model, _, meta = _load_model(model_file)
    _check_width(table, model)
    cfg = _settings(meta, model_file, table, dt, lyapunov, model.out_dim)
    scores, spans, diverged, first = [], [], [], None
    for w in range(windows):
        start = warmup + w * horizon
        with _watch_divergence() as found:
            pred = model.forecast_from_IC(
                horizon, jnp.asarray(U[start - warmup : start])
            )
            pred = np.asarray(pred)
        truth = U[start : start + horizon]
        diverged += [(w + 1, msg) for msg in found]
        scores.append(_score(pred, truth, threshold))
        spans.append((start, start + horizon))
        first = first or (pred, truth, U[start - warmup : start])
    name = Path(data_file).name
    if windows == 1:
        where = f" (rows {warmup}-{warmup + horizon - 1} of {name})"
        _report("evaluation", scores[0], cfg.dt, cfg.lyapunov, where)
    else:
        click.echo(
            f"evaluation: {Path(model_file).name} on {name}, {windows} windows of "
            f"{horizon} steps, each after {warmup} warm-up rows, threshold {threshold:g}"
        )
        _report_windows(scores, spans, cfg.dt, cfg.lyapunov)
    if plot:
        a, b = spans[0]
        _plot(
            plot,
            first[0],
            truth=first[1],
            warmup=first[2],
            dt=cfg.dt,
            lyapunov=cfg.lyapunov,
            names=cfg.columns,
            title=f"{Path(model_file).name} on {name}, rows {a}-{b - 1}",
            threshold=threshold,
        )
        click.echo(f"wrote plot {plot}")
    if diverged:
        w, msg = diverged[0]
        n = len({w for w, _ in diverged})
        raise Failure(
            f"window {w}: {msg}"
            + (f" ({n} of {windows} windows diverged)" if windows > 1 else "")
        )


# ---------------------------------------------------------------------- info
@cli.command()
@click.option(
    "--calibrate",
    is_flag=True,
    help="Also measure the native kernel variants on this machine now and print "
    "the fastest (as ORC_NATIVE_VARIANTS takes them) with their times.",
)
def info(calibrate) -> None:
    """Show which implementation runs here: native kernels or XLA, SIMD, threads, BLAS."""
    _configure_jax()
    from ._config import show_config

    show_config()
    if calibrate:
        from . import _native

        click.echo(
            "\nMeasured now (the build measured the variants in use the same way):"
        )
        click.echo(_native.calibrate().rstrip())


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.echo(f"orc: warning: {message} ({category.__name__})", err=True)


def main(argv: list[str] | None = None) -> int:
    shown, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        return _main(argv)
    finally:
        warnings.showwarning = shown


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _main(argv: list[str] | None) -> int:
    try:
        cli.main(args=argv, prog_name="orc", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except _NO_ARGS_IS_HELP as err:  # plain `orc` (click >= 8.2): the help
        click.echo(err.format_message(), err=True)
        return err.exit_code
    except click.ClickException as err:
        click.echo(f"orc: error: {err.format_message()}", err=True)
        return err.exit_code
    except Exception as err:  # noqa: BLE001 - one line for the user, not a traceback
        first = (
            str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        )
        click.echo(f"orc: error: {first}", err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
