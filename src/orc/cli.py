"""The ``orc`` command line.

Commands::

    orc demo                                   # ESN on Lorenz63: train, forecast, plot
    orc data lorenz63 --out l63.csv            # export a built-in system (t,x,y,z)
    orc train l63.csv --res-dim 500 --lyapunov 0.906 --out esn.orc
    orc forecast esn.orc --steps 1000 --out fc.csv --plot fc.png
    orc evaluate esn.orc l63_test.csv --horizon 1000 --windows 5 --plot ev.png
    orc tune l63.csv --config tune.toml --out tuned   # hyperparameter search

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

``orc tune`` searches an echo state network's hyperparameters
(:mod:`orc.tune`): its ``--config`` file holds, besides option values, a
``[search]`` table of what to search (``spectral_radius = {log_uniform =
[0.1, 2.0]}``, ``beta = [1e-8, 1e-6]``, ``seeds``, ``draws``, ``sampler``;
``orc tune --help`` lists them); an unknown key or a bad value there is an
error naming it. It writes a folder (``--out``) with ``results.csv`` (one
row per candidate), ``report.png`` and ``best.orc`` (the best candidate,
trained, with the metadata ``orc train`` stores). ``--storage`` keeps the
search as an Optuna study in an SQLite file or a PostgreSQL database, so a
killed or repeated run resumes it (``--budget`` counts the study's draws);
``--workers N`` evaluates it in N processes of this host (and the same
command on other hosts joins a PostgreSQL study); ``--dashboard`` serves it
live with optuna-dashboard, an optional extra.

The command line is an application, so unlike the library it sets JAX's
configuration: float64 on, and a persistent compilation cache in
``$ORC_CACHE_DIR/jax`` (default ``~/.cache/orc/jax``) so that a later run on
the same shapes loads its programs instead of compiling them (all of them:
:data:`CACHE_MIN_COMPILE_SECS`). JAX never caches a program that holds a
host callback, and some of the library's do (``orc tune``'s search, which
builds reservoirs from traced seeds; ``orc train``'s training on long
series, whose checks inside its block loop raise through ``eqx.error_if``):
those compile in every run. ``orc --no-compile-cache COMMAND`` (or
``ORC_COMPILE_CACHE=0``) runs without any cache, reading and writing none. Nothing heavy is imported before a command runs, so ``orc
--help`` answers at once.
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

from ._defaults import ESN, NVAR, SCORING, TUNE

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
    "rabinovich_fabrikant",
)
# Discrete series: sampled on their own grid, sized by a number of steps.
SERIES = ("mackey_glass", "narma", "henon_map", "logistic_map", "mso")
# Header names of a time column (any case), optionally followed by a unit in
# brackets or parentheses: "t", "time (s)", "timestamp [ms]".
TIME_NAME = re.compile(r"(t|times?|timestamps?)\s*([(\[][^()\[\]]*[)\]])?", re.I)
RTOL = 1e-6  # relative tolerance on sampling steps
THRESHOLD = SCORING.threshold  # the valid prediction time's error threshold
#: Programs compiled faster than this are not written to the persistent
#: compilation cache: none. JAX's default (1 s), or 0.5 s, leaves out most of
#: a command's programs, each compiled in 0.1 to 0.5 s: measured, ``orc
#: train`` (200 nodes, 5850 rows) loaded 1 of its 9 programs with 0.5 s and
#: all 9 with 0 (XLA compile time 2.2 s -> 0.1 s), for 60 kB to 200 kB of
#: cache files per command.
CACHE_MIN_COMPILE_SECS = 0.0


class Failure(click.ClickException):
    """A failure while running (exit code 1), as opposed to bad input (2)."""

    exit_code = 1


def _cache_dir() -> Path:
    """The command line's persistent compilation cache: ``jax`` in
    ``$ORC_CACHE_DIR``, else in ``~/.cache/orc``."""
    return Path(os.environ.get("ORC_CACHE_DIR", Path.home() / ".cache" / "orc")) / "jax"


def _configure_jax() -> None:
    """The application's JAX settings (never the library's): float64, and the
    persistent compilation cache in :func:`_cache_dir` unless ``orc
    --no-compile-cache`` (or ``ORC_COMPILE_CACHE=0``) turned it off, which
    also turns off a cache that JAX's own ``JAX_COMPILATION_CACHE_DIR``
    would have switched on: nothing is read from or written to any cache.

    Every program that takes at least :data:`CACHE_MIN_COMPILE_SECS` to
    compile is cached."""
    import jax

    jax.config.update("jax_enable_x64", True)
    ctx = click.get_current_context(silent=True)
    wanted = True if ctx is None else ctx.meta.get("orc.compile_cache", True)
    if not wanted:
        jax.config.update("jax_enable_compilation_cache", False)
        return
    cache = _cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update(
            "jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_SECS
        )
    except OSError:  # read-only home: run without the cache
        pass


def _number(x: float) -> str:
    """``x`` as people write it: ``8e-8`` (Python: ``8e-08``)."""
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{x:g}")


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


def _load_config(ctx: click.Context, _param, value, tables=()):
    """Read the ``--config`` TOML file into the command's ``default_map``;
    each of ``tables`` (e.g. ``"search"`` for ``orc tune``) may be a table
    of the file, kept as it is in ``ctx.meta["orc.config.<table>"]`` for the
    command to check."""
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
        if key in tables:
            if not isinstance(item, dict):
                raise click.BadParameter(
                    f"{key!r} in {value} must be a table: a [{key}] section"
                )
            ctx.meta[f"orc.config.{key}"] = item
            continue
        if name in arguments:
            raise click.BadParameter(
                f"{key!r} in {value} is the argument {arguments[name]}: give it on "
                "the command line"
            )
        if name not in keys:
            close = difflib.get_close_matches(name, sorted(keys) + list(tables), n=1)
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
                    + [f"[{t}]" for t in tables]
                )
            )
            raise click.BadParameter(f"unknown key {key!r} in {value} ({hint})")
        default_map[keys[name]] = _config_value(key, item, params[keys[name]], value)
    ctx.default_map = default_map
    ctx.meta["orc.config"] = value  # an input the outputs may not replace
    return value


def _config_option(*tables: str, help: str | None = None):
    """The ``--config`` option; ``tables``: the TOML tables the command reads
    besides option values (:func:`_load_config`)."""
    return click.option(
        "--config",
        type=click.Path(dir_okay=False),
        callback=functools.partial(_load_config, tables=tables),
        is_eager=True,
        expose_value=False,
        help=help
        or "TOML file with option values (command-line options win; an unknown "
        "key is an error).",
    )


config_option = _config_option()
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


# The typed options, declared the one way every command declares them: an
# option's default is shown in its help when it has one (a ``None`` default
# leaves the help to say where the value comes from otherwise).
def _int_option(name: str, help: str, *, low: int = 1, high=None, default=None, **kw):
    """An option taking a whole number in ``[low, high]``."""
    return click.option(
        name,
        default=default,
        show_default=default is not None,
        type=click.IntRange(low, high),
        help=help,
        **kw,
    )


def _real_option(name: str, help: str, *, type=positive, default=None):
    """An option taking a finite real number (``positive``, or ``non_negative``)."""
    return click.option(
        name, default=default, show_default=default is not None, type=type, help=help
    )


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
    time_column: str  # the --time-column that read it
    time_name: str | None = None
    dt: float | None = None


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


def _read_data(path: str, time_column: str) -> Table:
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
        time_column,
        time_name=first or "column 0",
        dt=dt,
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
@click.option(
    "--compile-cache/--no-compile-cache",
    default=True,
    envvar="ORC_COMPILE_CACHE",
    show_envvar=True,
    help="Keep compiled programs in a persistent cache ($ORC_CACHE_DIR/jax, "
    "default ~/.cache/orc/jax), so a later run on the same shapes loads "
    "them instead of compiling [default: on; ORC_COMPILE_CACHE=0 turns it "
    "off].",
)
@click.pass_context
def cli(ctx: click.Context, compile_cache: bool) -> None:
    """Reservoir computing in JAX: train, tune, forecast and evaluate echo
    state networks."""
    ctx.meta["orc.compile_cache"] = compile_cache


# ---------------------------------------------------------------------- demo
@cli.command()
@click.option(
    "--res-dim", default=ESN.res_dim, show_default=True, help="Reservoir size."
)
@click.option(
    "--train-steps", default=20000, show_default=True, help="Training samples."
)
@click.option("--seed", default=ESN.seed, show_default=True, help="Model seed.")
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
@cli.command(
    epilog=f"SYSTEM is one of the ODEs {', '.join(SYSTEMS)} or the discrete "
    f"series {', '.join(SERIES)}."
)
@click.argument("name", metavar="SYSTEM", type=click.Choice(SYSTEMS + SERIES))
@click.option("--out", required=True, help="Output file (.csv or .npy).")
@click.option("--tn", "tN", default=100.0, show_default=True, help="Final time.")
@_real_option("--dt", "Sampling step [default: 0.01; KS_1D 0.25].")
@_int_option(
    "--steps",
    "Length of a discrete series (mackey_glass, narma, henon_map, logistic_map, "
    "mso); default tN/dt.",
    low=2,
)
@_int_option("--transient", "Leading samples to drop.", low=0, default=0)
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


#: The reservoir options of ``orc train`` (and ``orc tune``) -> the arguments
#: of the ESN forecasters they set (``--chunks`` and ``--locality``: the
#: ESNForecaster's only).
ESN_ARGS = {
    "res_dim": "res_dim",
    "leak_rate": "leak_rate",
    "spectral_radius": "Wr_spectral_radius",
    "density": "Wr_density",
    "bias": "bias",
    "embedding_scaling": "embedding_scaling",
}


def _arg(name: str) -> str:
    """The ESNForecaster argument a reservoir option sets."""
    return ESN_ARGS.get(name, name)


def _reservoir_option(name: str, help: str):
    """The reservoir option ``name`` (a key of :data:`RESERVOIR_OPTIONS`, or
    ``res_dim``), its default the ESN forecasters' (:data:`orc._defaults.ESN`)."""
    return click.option(
        f"--{name.replace('_', '-')}",
        default=getattr(ESN, _arg(name)),
        show_default=True,
        help=help,
    )


#: ``--leak-rate`` to ``--locality``: the reservoir's options, in the order
#: of the help, -> their help.
RESERVOIR_OPTIONS = {
    "leak_rate": "Leak rate a of the reservoir update r' = (1-a) r + a tanh(...).",
    "spectral_radius": "Spectral radius the reservoir matrix is scaled to.",
    "density": "Fraction of non-zero entries of the reservoir matrix.",
    "bias": "Scale of the reservoir's bias.",
    "embedding_scaling": "Scale of the input (embedding) weights.",
    "chunks": "esn: parallel reservoirs, each reading a slice of the features.",
    "locality": "esn with --chunks: neighbouring features each chunk also reads.",
}

# Options of `orc train` that `orc tune` shares (one declaration of each).
res_dim_option = _reservoir_option("res_dim", "Reservoir size per chunk/layer.")
beta_option = _real_option(
    "--beta",
    f"Ridge regularisation [default: {_number(ESN.beta)}; nvar {_number(NVAR.beta)}].",
    type=non_negative,
)
spinup_option = click.option(
    "--spinup", default=TUNE.spinup, show_default=True, help="Transient states dropped."
)
train_dt_option = _real_option(
    "--dt",
    "Sample spacing [default: that of the data's time column], stored in the "
    "model file.",
)
train_lyapunov_option = _real_option(
    "--lyapunov",
    "Largest Lyapunov exponent of the system (VPT in Lyapunov times), stored in "
    "the model file.",
)


def reservoir_options(command):
    """``--leak-rate`` to ``--locality``: the reservoir's options."""
    for name, help in reversed(RESERVOIR_OPTIONS.items()):
        command = _reservoir_option(name, help)(command)
    return command


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
@res_dim_option
@click.option(
    "--layers", default=ESN.n_layers, show_default=True, help="deep-esn: layers."
)
@click.option("--k", default=NVAR.k, show_default=True, help="nvar: delayed samples.")
@click.option(
    "--order",
    default=NVAR.order,
    show_default=True,
    help="nvar: monomial order; 'auto' is 3 while k x columns <= 20, else 2.",
)
@click.option(
    "--stride",
    default=NVAR.s,
    show_default=True,
    help="nvar: spacing of the delayed samples; 'auto' chooses it from the "
    "data's sampling (about 30 per dominant period).",
)
@_real_option(
    "--input-noise",
    "Std of noise added to the training inputs (stabilises closed loops), in the "
    "data's units. Default: nvar 1e-3 to 1e-1 of each column's std, chosen by "
    "closed-loop validation on the last 20% of the data; esn 0.",
    type=non_negative,
)
@reservoir_options
@beta_option
@spinup_option
@click.option(
    "--val-fraction",
    default=0.0,
    show_default=True,
    help="Trailing fraction held out and forecast for validation.",
)
@train_dt_option
@train_lyapunov_option
@click.option(
    "--seed",
    default=ESN.seed,
    show_default=True,
    help="Seed of the reservoir and noise.",
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

    params = click.get_current_context().params
    esn_args = {arg: params[name] for name, arg in ESN_ARGS.items()}
    esn_args.update(data_dim=U.shape[1], seed=seed)
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
        beta = NVAR.beta if model == "nvar" else ESN.beta
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
@_int_option("--steps", "Samples to forecast.", required=True)
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
@_real_option(
    "--dt", "Sample spacing [default: the model file's, or the warm-up's time column]."
)
@_real_option(
    "--lyapunov",
    "Largest Lyapunov exponent for the plot's axis [default: the model file's].",
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
threshold_option = _real_option(
    "--threshold",
    "Normalised error that ends the valid prediction time.",
    default=THRESHOLD,
)


@cli.command()
@click.argument("model_file", metavar="MODEL")
@click.argument("data_file", metavar="DATA")
@_int_option(
    "--warmup",
    "Rows of true data each window warms up on before it is forecast.",
    default=200,
)
@_int_option(
    "--horizon",
    "Rows scored per window [default: all rows after the warm-up, shared by the "
    "windows].",
)
@_int_option(
    "--windows",
    "Consecutive windows scored after the first --warmup rows, each warmed up on "
    "the --warmup rows just before it.",
    default=1,
)
@threshold_option
@_real_option(
    "--dt", "Sample spacing [default: the data's time column, or the model file's]."
)
@_real_option("--lyapunov", "Largest Lyapunov exponent [default: the model file's].")
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


# ---------------------------------------------------------------------- tune
#: The files ``orc tune`` writes into its ``--out`` folder.
TUNE_FILES = {"table": "results.csv", "report": "report.png", "model": "best.orc"}

#: What a ``[search]`` table may search: the reservoir options (those of
#: ``orc train``) -> the distributions each takes. ``uniform`` and
#: ``log_uniform`` vary inside one compiled program; every value of an
#: ``int_uniform`` or ``choice`` is a program of its own (a size, a number of
#: non-zero entries: ``density`` sets one, so it is searched by ``choice``).
TUNABLE = {
    "res_dim": ("int_uniform", "choice"),
    "leak_rate": ("uniform", "log_uniform", "choice"),
    "spectral_radius": ("uniform", "log_uniform", "choice"),
    "density": ("choice",),
    "bias": ("uniform", "log_uniform", "choice"),
    "embedding_scaling": ("uniform", "log_uniform", "choice"),
    "chunks": ("int_uniform", "choice"),
    "locality": ("int_uniform", "choice"),
}
#: A ``[search]`` distribution -> its class in :mod:`orc.tune`.
DISTRIBUTIONS = {
    "uniform": "Uniform",
    "log_uniform": "LogUniform",
    "int_uniform": "IntUniform",
    "choice": "Choice",
}
#: The ``[search]`` keys that are not hyperparameters.
SEARCH_SETTINGS = (
    "beta",
    "ridge_points",
    "seeds",
    "draws",
    "sampler",
    "batch",
    "sampler_seed",
)
DASHBOARD_INSTALL = "pip install optuna-dashboard (or pip install 'orc[dashboard]')"


def _count(n: int, thing: str) -> str:
    """``"1 draw"``, ``"2 draws"``."""
    return f"{n} {thing}{'s' * (n != 1)}"


@dataclass
class SearchPlan:
    """A ``[search]`` table, checked: ``space`` maps each searched option to
    ``(distribution, values)``; the settings are None where not given (the
    library's defaults then hold)."""

    space: dict
    beta: object = None  # a list of strengths, or ("log_uniform", low, high)
    ridge_points: int | None = None
    seeds: object = None  # a count or a list of seeds
    draws: int | None = None
    sampler: str | None = None
    batch: int | None = None
    sampler_seed: int | None = None


def _config_error(message: str):
    """A bad value in the ``--config`` file (exit code 2, as
    :func:`_load_config`'s errors)."""
    ctx = click.get_current_context()
    param = next(p for p in ctx.command.params if p.name == "config")
    return click.BadParameter(message, ctx=ctx, param=param)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _distribution(key: str, item, where: str) -> tuple[str, tuple]:
    """``(kind, values)`` of the ``[search]`` entry ``key = item``."""
    kinds = TUNABLE[key]
    forms = " or ".join(f"{{{k} = [...]}}" for k in kinds)
    if not isinstance(item, dict):
        fixed = "" if isinstance(item, list) else (
            f"; a fixed value goes at the top of the file ({key} = {item!r}) "
            "or on the command line"
        )  # fmt: skip
        raise _config_error(
            f"[search] {key} in {where} must be a distribution, {forms}, got "
            f"{item!r}{fixed}"
        )
    if len(item) != 1 or next(iter(item)) not in DISTRIBUTIONS:
        raise _config_error(
            f"[search] {key} in {where} must be one distribution, {forms}, got {item!r}"
        )
    ((kind, values),) = item.items()
    integer = "int_uniform" in kinds
    if kind not in kinds:
        why = (
            f"{key} is a whole number"
            if integer
            else "density sets the number of non-zero entries, a shape"
            if key == "density"
            else f"{key} is a real number"
        )
        raise _config_error(f"[search] {key} in {where}: {why}; search it by {forms}")
    number = _is_int if integer else _is_real
    what = "whole numbers" if integer else "finite numbers"
    if kind == "choice":
        if not isinstance(values, list) or not values:
            raise _config_error(
                f"[search] {key} in {where}: choice takes a non-empty list of "
                f"{what}, got {values!r}"
            )
        if not all(number(v) for v in values):
            raise _config_error(
                f"[search] {key} in {where}: choice takes {what}, got {values!r}"
            )
        return kind, tuple(values)
    if not (isinstance(values, list) and len(values) == 2 and all(map(number, values))):
        raise _config_error(
            f"[search] {key} in {where}: {kind} takes [low, high], two {what}, "
            f"got {values!r}"
        )
    low, high = values
    if not (low <= high if kind == "int_uniform" else low < high):
        raise _config_error(
            f"[search] {key} in {where}: {kind} needs low < high, got {values!r}"
        )
    if kind == "log_uniform" and low <= 0:
        raise _config_error(
            f"[search] {key} in {where}: log_uniform needs 0 < low, got {values!r}"
        )
    return kind, (low, high)


def _search_plan(ctx: click.Context) -> SearchPlan:
    """The ``[search]`` table of ``orc tune``'s ``--config`` file, checked
    (a usage error naming the key), and checked against the options: a
    hyperparameter is searched or fixed, not both."""
    import difflib

    from click.core import ParameterSource

    where = ctx.meta.get("orc.config")
    table = ctx.meta.get("orc.config.search")
    if table is None:
        raise click.UsageError(
            "orc tune needs a [search] table in a --config file naming what to "
            "search, e.g.\n  [search]\n  spectral_radius = {log_uniform = "
            "[0.1, 2.0]}\n  beta = [1e-8, 1e-6, 1e-4]"
        )
    plan = SearchPlan(space={})
    for raw, item in table.items():
        key = raw.replace("-", "_")
        if key in TUNABLE:
            plan.space[key] = _distribution(key, item, where)
            continue
        if key not in SEARCH_SETTINGS:
            if key in {p.name for p in ctx.command.params}:
                raise _config_error(
                    f"[search] {raw} in {where}: {key} cannot be searched; set it "
                    f"at the top of the file ({key} = ...) or on the command line "
                    f"(searchable: {', '.join(TUNABLE)})"
                )
            close = difflib.get_close_matches(
                key, [*TUNABLE, *SEARCH_SETTINGS], n=1, cutoff=0.6
            )
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else f"valid keys: {', '.join([*TUNABLE, *SEARCH_SETTINGS])}"
            )
            raise _config_error(f"unknown key {raw!r} in [search] of {where} ({hint})")
        setattr(plan, key, _search_setting(key, item, where))
    if plan.ridge_points is not None and not isinstance(plan.beta, tuple):
        raise _config_error(
            f"[search] ridge_points in {where} counts the strengths of "
            "beta = {log_uniform = [low, high]}; give that beta, or leave it out"
        )
    for name in [*plan.space, "beta"]:
        if name == "beta" and plan.beta is None:
            continue
        source = ctx.get_parameter_source(name)
        if source not in (None, ParameterSource.DEFAULT):
            given = (
                f"as {name} = ... at the top of {where}"
                if source == ParameterSource.DEFAULT_MAP
                else f"as --{name.replace('_', '-')}"
            )
            raise click.UsageError(
                f"{name} is searched ([search] in {where}) and also fixed ({given}): "
                "remove one"
            )
    return plan


def _search_setting(key: str, item, where: str):
    """A ``[search]`` setting (:data:`SEARCH_SETTINGS`), checked."""
    at = f"[search] {key} in {where}"
    if key == "beta":
        if _is_real(item) and item >= 0:
            return [float(item)]
        if (
            isinstance(item, list)
            and item
            and all(_is_real(b) and b >= 0 for b in item)
        ):
            return [float(b) for b in item]
        if isinstance(item, dict) and list(item) == ["log_uniform"]:
            values = item["log_uniform"]
            if (
                isinstance(values, list)
                and len(values) == 2
                and all(map(_is_real, values))
                and 0 < values[0] < values[1]
            ):
                return ("log_uniform", float(values[0]), float(values[1]))
        raise _config_error(
            f"{at}: the ridge strengths, a list of numbers >= 0 ([1e-8, 1e-6]) "
            "or {log_uniform = [low, high]} (ridge_points strengths from low to "
            f"high, 0 < low < high), got {item!r}"
        )
    if key == "seeds":
        if _is_int(item) and item >= 1:
            return item
        if isinstance(item, list) and item and all(map(_is_int, item)):
            if len(set(item)) != len(item):
                raise _config_error(f"{at}: the seeds repeat, got {item!r}")
            return item
        raise _config_error(
            f"{at}: a count of seeds (>= 1) or a list of seeds (whole numbers), "
            f"got {item!r}"
        )
    if key == "sampler":
        if not isinstance(item, str):
            raise _config_error(f"{at}: a sampler's name, got {item!r}")
        return item
    if key == "sampler_seed":
        if not _is_int(item):
            raise _config_error(f"{at}: a whole number, got {item!r}")
        return item
    if not (_is_int(item) and item >= 1):  # draws, batch, ridge_points
        raise _config_error(f"{at}: a whole number >= 1, got {item!r}")
    return item


class _Rows(click.ParamType):
    """Rows of a table: a fraction in (0, 1) of them (a float) or a number
    of rows >= 1 (an int)."""

    name = "FRACTION|ROWS"

    def convert(self, value, param, ctx):
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number.", param, ctx)
        number = value
        if isinstance(value, str):
            try:
                number = int(value)
            except ValueError:
                try:
                    number = float(value)
                except ValueError:
                    self.fail(f"{value!r} is not a number.", param, ctx)
        if isinstance(number, float) and 0 < number < 1:
            return number
        if isinstance(number, float) and number.is_integer():
            number = int(number)
        if isinstance(number, int) and number >= 1:
            return number
        self.fail(
            f"{value!r} is neither a fraction in (0, 1) nor a number of rows >= 1.",
            param,
            ctx,
        )


def _sqlite_file(storage: str | None) -> str | None:
    """The SQLite file a ``--storage`` names (a path or an ``sqlite:///``
    URL), or None (no storage, or a database server)."""
    if storage is None:
        return None
    if "://" not in storage:
        return storage
    if storage.startswith("sqlite:///"):
        path = storage[len("sqlite:///") :]
        return path if path and path != ":memory:" else None
    return None


def _storage_url(storage: str) -> str:
    """``--storage`` as a database URL (a path is an SQLite file)."""
    if "://" in storage:
        return storage
    return "sqlite:///" + os.path.abspath(storage)


def _serve_dashboard(storage: str, port: int) -> str:
    """Serve ``storage``'s studies with optuna-dashboard on ``port`` of this
    machine, on a thread that ends with the process; its URL. The server
    is bound (a port in use is a usage error) and the storage opened before
    the study starts writing to it."""
    import socketserver
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    import optuna
    import optuna_dashboard

    class Server(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args) -> None:  # no line per request on stderr
            pass

    url = _storage_url(storage)
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    app = optuna_dashboard.wsgi(optuna.storages.RDBStorage(url, engine_kwargs=engine))
    try:
        server = make_server(
            "127.0.0.1", port, app, server_class=Server, handler_class=Quiet
        )
    except OSError as err:
        raise click.UsageError(
            f"--dashboard-port {port}: cannot serve on it ({err.strerror}); "
            "choose another port"
        ) from err
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{port}/"


def _need(module: str, why: str, install: str, name: str | None = None) -> None:
    """A usage error when the optional ``module`` (the package ``name``) is
    not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # e.g. sys.modules[module] is None
        found = False
    if not found:
        raise click.UsageError(
            f"{why} needs {name or module}, an optional extra: {install}"
        )


def _cli_names(result):
    """``result`` (an ``orc.tune`` result) with the command line's names for
    the hyperparameters (``spectral_radius``, not ``Wr_spectral_radius``):
    what the table and the report show."""
    from orc.tune import SearchResult

    names = {arg: name for name, arg in ESN_ARGS.items()}
    rows = [{names.get(k, k): v for k, v in row.items()} for row in result.rows]
    columns = [names.get(c, c) for c in result.columns]
    log = {names.get(c, c) for c in result.log_scaled}
    return SearchResult(
        rows,
        columns,
        result.higher_is_better,
        lambda _row: result.best_model,
        result.metric,
        log,
    )


def _score_unit(metric: str, cfg: Settings) -> str:
    """The unit of a ``--metric`` score (the VPT's: Lyapunov times with dt
    and the exponent, time units with dt, else steps)."""
    if metric != "vpt":
        return ""
    if cfg.dt is None:
        return "steps"
    return "Lyapunov times" if cfg.lyapunov is not None else "time units"


#: Set in the environment of the workers ``orc tune --workers`` starts
#: (``i/N``): such a process evaluates trials and writes no outputs.
WORKER_ENV = "_ORC_TUNE_WORKER"

#: Seconds a worker is given to stop after Ctrl-C before it is killed (its
#: running trials are then failed and retried by the study's heartbeat).
WORKER_STOP_SECS = 20


def _local_gpus() -> list[str] | None:
    """This host's CUDA GPUs as ``CUDA_VISIBLE_DEVICES`` names them, or
    None (a CPU or another platform). JAX starts here without taking the
    GPUs' memory: this process only waits for its workers, then trains one
    model."""
    import jax

    key = "XLA_PYTHON_CLIENT_PREALLOCATE"
    before = os.environ.get(key)
    os.environ.setdefault(key, "false")  # read when the backend starts
    try:
        devices = jax.local_devices()
    finally:
        if before is None:
            os.environ.pop(key, None)  # the workers' environment is the user's
    return _cuda_names(devices, os.environ.get("CUDA_VISIBLE_DEVICES"))


def _cuda_names(devices, visible: str | None) -> list[str] | None:
    """The ``CUDA_VISIBLE_DEVICES`` names of JAX's ``devices`` (given
    ``visible``, the variable's value), or None unless they are CUDA GPUs."""
    if not devices or devices[0].platform != "gpu":
        return None
    version = str(getattr(devices[0].client, "platform_version", "")).lower()
    if "cuda" not in version:
        return None
    names = [v.strip() for v in visible.split(",")] if visible else []
    out = []
    for d in devices:
        i = getattr(d, "local_hardware_id", None)
        i = d.id if i is None else i
        out.append(names[i] if i < len(names) else str(i))
    return out


def _worker_envs(n: int, env: dict, gpus: list[str] | None) -> list[dict]:
    """The environments of ``n`` workers: ``env`` with the worker's number
    and, on a host of CUDA ``gpus``, one GPU each (in turn: with more workers
    than GPUs some share one, and then every worker allocates memory as it
    needs it instead of taking most of a GPU's at start, unless ``env`` sets
    JAX's allocation)."""
    mine = {"XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
            "XLA_PYTHON_CLIENT_ALLOCATOR"}  # fmt: skip
    envs = []
    for i in range(n):
        e = dict(env)
        e[WORKER_ENV] = f"{i + 1}/{n}"
        if gpus:
            e["CUDA_VISIBLE_DEVICES"] = gpus[i % len(gpus)]
            if n > len(gpus) and not mine & set(env):
                e["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        envs.append(e)
    return envs


def _run_workers(n: int, gpus: list[str] | None) -> dict[int, int]:
    """Run ``n`` workers, each this ``orc`` command (its arguments) in a
    process of its own, until they end; their exit codes by process id.

    A worker's warnings are passed on to stderr, prefixed with its number;
    its other lines (the plan, notes) are this command's. If every worker
    failed, their first error is this command's (its exit code); if some
    did, a note says so (the others finished the study, retrying the failed
    one's trials). Ctrl-C (or SIGTERM) stops the workers: each gets SIGINT,
    then SIGKILL after :data:`WORKER_STOP_SECS`."""
    import signal
    import subprocess
    import threading

    ctx = click.get_current_context()
    argv = (ctx.find_root().obj or {}).get("argv")
    if argv is None:  # called other than through main()
        raise Failure("--workers starts this command again: run it as orc tune ...")
    code = "import sys; from orc.cli import main; sys.exit(main(sys.argv[1:]))"
    if gpus:
        used = gpus[: min(n, len(gpus))]
        idle = f"; {len(gpus) - n} idle" if n < len(gpus) else ""
        _note(f"{n} workers on {len(gpus)} GPUs: GPU {', '.join(used)}{idle}")
    procs, errors, relays = [], {}, []

    def relay(i, proc):
        for line in proc.stderr:
            line = line.rstrip("\n")
            if line.startswith("orc: error: "):
                errors[proc.pid] = line[len("orc: error: ") :]
            elif line.startswith("orc: warning: "):
                click.echo(f"orc: worker {i}: {line[len('orc: ') :]}", err=True)

    def stop(*_):
        raise KeyboardInterrupt

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, stop)
    try:
        for i, env in enumerate(_worker_envs(n, dict(os.environ), gpus), 1):
            proc = subprocess.Popen(
                [sys.executable, "-c", code, *argv], env=env, text=True,
                errors="replace", stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True,
            )  # fmt: skip
            procs.append(proc)
            relays.append(threading.Thread(target=relay, args=(i, proc), daemon=True))
            relays[-1].start()
        click.echo(
            f"started {n} workers (processes {', '.join(str(p.pid) for p in procs)}) "
            "on the study; waiting for them"
        )
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        _note("stopping the workers")
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + WORKER_STOP_SECS
        for proc in procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise click.exceptions.Abort from None
    finally:
        for proc in procs:  # an error here: no worker outlives the command
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        for thread in relays:
            thread.join(5)

    codes = {p.pid: p.returncode for p in procs}

    def why(i, proc):
        if proc.returncode < 0:
            return f"worker {i} was killed by signal {-proc.returncode}"
        return f"worker {i}: {errors.get(proc.pid, f'exit code {proc.returncode}')}"

    failed = [(i, p) for i, p in enumerate(procs, 1) if p.returncode != 0]
    if len(failed) == n:
        i, proc = failed[0]
        if proc.pid in errors and proc.returncode in (1, 2):
            err = click.ClickException(errors[proc.pid])  # the command's own error
            err.exit_code = proc.returncode
            raise err
        raise Failure(f"every worker failed ({why(i, proc)})")
    for i, proc in failed:
        _note(f"{why(i, proc)}; the other workers finished the study")
    return codes


def _tune_report(view, path: str, title: str, unit: str) -> None:
    """The search's report (:meth:`orc.tune.SearchResult.plot`), its score
    axes labelled with their unit, to the PNG ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = view.plot()
    if unit:
        for ax in fig.axes:
            label = ax.get_ylabel()
            if label:
                ax.set_ylabel(f"{label} ({unit})")
    fig.suptitle(f"{title}\n{fig.get_suptitle()}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


@cli.command()
@click.argument("data_file", metavar="DATA")
@click.option(
    "--out",
    required=True,
    help="Folder to write to: results.csv (one row per candidate), report.png "
    "(the score against each hyperparameter) and best.orc (the best candidate, "
    "trained: orc forecast and orc evaluate read it).",
)
@_int_option(
    "--budget",
    "Draws of the search space (Optuna's trials) [default: draws in [search], "
    "else the library's]. With --storage it counts the study's finished draws: "
    "a resumed study evaluates only the missing ones.",
)
@click.option(
    "--storage",
    default=None,
    help="Keep the study (Optuna) in an SQLite file (a path, or sqlite:///path) "
    "or a database server (postgresql://user@host/db), so that a run killed "
    "or repeated resumes it. Needs pip install 'orc[tune]'.",
)
@click.option(
    "--study-name",
    default=None,
    help="The study in --storage, created or resumed [default: the library's].",
)
@_int_option(
    "--workers",
    default=1,
    help="Worker processes this command starts on this host, each evaluating "
    "its own batches of the --storage study (needs --storage; on a host of "
    "CUDA GPUs each worker gets one of them, so give as many as GPUs). The "
    "command waits for them, then writes --out from the finished study. On "
    "several hosts, run the command on each against one postgresql:// "
    "--storage with its own --out: every command returns when the study's "
    "--budget is finished, so each --out holds the whole study.",
)
@click.option(
    "--dashboard",
    is_flag=True,
    help="Serve the study live with optuna-dashboard while it runs (needs "
    "--storage and pip install optuna-dashboard).",
)
@_int_option(
    "--dashboard-port",
    "Port of --dashboard on this machine (127.0.0.1).",
    high=65535,
    default=8080,
)
@click.option(
    "--validation",
    type=_Rows(),
    default=None,
    help="The last rows of DATA, held out to score the candidates: a fraction "
    "(0.2) or a number of rows (2000) [default: --warmup + --windows x "
    "--horizon rows]. The rows before them train.",
)
@_int_option(
    "--warmup",
    "Validation rows forced before the first window [default: orc.tune.Forecast's].",
)
@_int_option(
    "--horizon",
    "Steps forecast per validation window [default: orc.tune.Forecast's].",
    low=2,
)
@_int_option(
    "--windows",
    "Validation windows, spread evenly over the validation rows after --warmup "
    "(one after another at the default --validation) [default: "
    "orc.tune.Forecast's].",
)
@click.option(
    "--metric",
    type=click.Choice(["vpt", "nrmse"]),
    default=None,
    help="The score, a mean over the windows: vpt (valid prediction time, "
    "higher is better) or nrmse (lower is better) [default: "
    "orc.tune.Forecast's].",
)
@threshold_option
@res_dim_option
@reservoir_options
@beta_option
@spinup_option
@train_dt_option
@train_lyapunov_option
@time_column_option
@_config_option(
    "search",
    help="TOML file with option values and the [search] table: what to search "
    "(command-line options win; an unknown key is an error).",
)
def tune(data_file, out, budget, storage, study_name, workers, dashboard,
         dashboard_port, validation, warmup, horizon, windows, metric, threshold,
         res_dim, leak_rate, spectral_radius, density, bias, embedding_scaling, chunks,
         locality, beta, spinup, dt, lyapunov, time_column) -> None:  # fmt: skip
    """Search an echo state network's hyperparameters on DATA (CSV or .npy,
    time x features) and save the best model.

    The --config file's [search] table says what to search; each
    hyperparameter takes a distribution, the other options are fixed:

    \b
      res_dim = 300                     # fixed (or --res-dim 300)
      [search]
      spectral_radius = {log_uniform = [0.1, 2.0]}
      leak_rate = {uniform = [0.1, 1.0]}
      density = {choice = [0.01, 0.05]}
      beta = [1e-8, 1e-6, 1e-4]         # ridge strengths, each one tried
      seeds = 2                         # reservoirs drawn per point
      draws = 16                        # points of the space (--budget)
      sampler = "sobol"                 # sobol, random; tpe, cmaes (Optuna)

    Searchable: res_dim, chunks, locality ({int_uniform = [low, high]} or
    {choice = [...]}), density ({choice = [...]}), leak_rate,
    spectral_radius, bias, embedding_scaling ({uniform = [low, high]},
    {log_uniform = [low, high]} or {choice = [...]}). beta may also be
    {log_uniform = [low, high]} with ridge_points = n strengths; seeds a
    list of seeds; batch the draws an Optuna sampler proposes at once;
    sampler_seed seeds the sampler.

    Every draw is built with every seed and trained with every ridge
    strength on the rows before the validation rows, then forecasts the
    validation windows; its score is the mean over them. Without --storage
    the search runs in memory (orc.tune.search; tpe and cmaes: an Optuna
    study in memory); with it, an Optuna study (orc.tune.study) that a
    repeated run resumes. The best candidate is trained again and saved with
    dt, --lyapunov and the column names, as orc train saves a model; orc
    forecast continues it from the end of its training rows.

    --workers N (with --storage) runs the study in N processes of this
    command on this host and writes --out once it is finished; the same
    command on other hosts, against one postgresql:// --storage, joins the
    study (see --workers). A worker that dies leaves its trials to the
    others (retried after its heartbeat stops); Ctrl-C stops them all.
    """
    ctx = click.get_current_context()
    plan = _search_plan(ctx)
    if Path(out).suffix.lower() in (".orc", ".csv", ".png", ".npy"):
        raise click.UsageError(
            f"--out {out} names the folder orc tune writes "
            f"{', '.join(TUNE_FILES.values())} to; give a folder name (e.g. "
            f"{Path(out).stem})"
        )
    if Path(out).exists() and not Path(out).is_dir():
        raise click.UsageError(
            f"--out {out} is a file; orc tune writes a folder of "
            f"{', '.join(TUNE_FILES.values())}: give a folder"
        )
    files = {k: str(Path(out) / name) for k, name in TUNE_FILES.items()}
    if study_name is not None and storage is None:
        raise click.UsageError(
            "--study-name names a study in --storage: give --storage too"
        )
    if workers > 1 and storage is None:
        raise click.UsageError(
            f"--workers {workers} share one study, which needs --storage (e.g. "
            "--storage study.db, or postgresql://user@host/db for several hosts)"
        )
    # a worker this command started (--workers): it evaluates the study's
    # trials and leaves the outputs and the dashboard to the command
    worker = os.environ.get(WORKER_ENV)
    if worker is not None:
        workers, dashboard = 1, False
    if dashboard and storage is None:
        raise click.UsageError(
            "--dashboard serves a study kept in --storage: give --storage too "
            "(e.g. --storage study.db)"
        )
    if dashboard:
        _need("optuna_dashboard", "--dashboard", DASHBOARD_INSTALL, "optuna-dashboard")
    _check_files(
        [("the data file", data_file)],
        [
            ("the results table", files["table"]),
            ("the report", files["report"]),
            ("the best model", files["model"]),
            ("--storage", _sqlite_file(storage)),
        ],
    )
    _configure_jax()
    gpus = _local_gpus() if workers > 1 else None
    import inspect

    import orc
    import orc.tune
    from orc.tune import _space, _study

    # the sampler: the library's search (no Optuna) or an Optuna study
    samplers = (*_space.SAMPLERS, *(s for s in _study.SAMPLERS
                                    if s not in _space.SAMPLERS))  # fmt: skip
    if plan.sampler is not None and plan.sampler not in samplers:
        raise _config_error(
            f"[search] sampler in {ctx.meta['orc.config']}: one of "
            f"{', '.join(samplers)}, got {plan.sampler!r}"
        )
    use_study = storage is not None or (
        plan.sampler is not None and plan.sampler not in _space.SAMPLERS
    )
    run = orc.tune.study if use_study else orc.tune.search
    defaults = {n: p.default for n, p in inspect.signature(run).parameters.items()}
    sampler = plan.sampler or defaults["sampler"]
    if storage is not None and sampler not in _study.SAMPLERS:
        raise _config_error(
            f"[search] sampler {sampler!r} in {ctx.meta['orc.config']}: a study "
            f"in --storage is Optuna's, whose samplers are "
            f"{', '.join(_study.SAMPLERS)}"
        )
    if use_study:
        why = "--storage" if storage is not None else f"sampler {sampler!r}"
        _need("optuna", why, _study.INSTALL)
        if sampler == "cmaes":
            _need("cmaes", "sampler 'cmaes'", _study.INSTALL)
        if storage is not None and storage.startswith("postgres"):
            _need(
                "psycopg2", "a PostgreSQL --storage", "pip install 'orc[tune-postgres]'"
            )
    elif plan.batch is not None:
        raise _config_error(
            f"[search] batch in {ctx.meta['orc.config']}: the draws an Optuna "
            "sampler (tpe, cmaes; random with --storage) proposes at once; this "
            f"search's sampler is {sampler!r}"
        )

    # what is searched, what is fixed
    space = {}
    for name, (kind, values) in plan.space.items():
        dist = getattr(orc.tune, DISTRIBUTIONS[kind])
        space[_arg(name)] = dist(list(values)) if kind == "choice" else dist(*values)
    fixed = {_arg(n): ctx.params[n] for n in TUNABLE if n not in plan.space}
    betas = plan.beta if plan.beta is not None else [beta] if beta is not None else None
    kw = dict(fixed=fixed, sampler=sampler,
              progress=worker is None and sys.stderr.isatty())  # fmt: skip
    if betas is not None:
        kw["beta"] = (
            orc.tune.LogUniform(*betas[1:]) if isinstance(betas, tuple) else betas
        )
    n_betas = (
        1 if betas is None
        else len(betas) if isinstance(betas, list)
        else plan.ridge_points or defaults["ridge_points"]
    )  # fmt: skip
    for key in ("ridge_points", "seeds", "sampler_seed", "batch"):
        if getattr(plan, key) is not None:
            kw[key] = getattr(plan, key)
    seeds = plan.seeds if plan.seeds is not None else defaults["seeds"]
    n_seeds = seeds if isinstance(seeds, int) else len(seeds)
    draws = budget or plan.draws or defaults["n_trials" if use_study else "draws"]
    if not space:
        if n_betas == 1 and n_seeds == 1:
            raise _config_error(
                f"[search] in {ctx.meta['orc.config']} varies nothing: give a "
                "hyperparameter a distribution, or several beta or seeds"
            )
        if draws != 1:
            _note("no hyperparameter is searched (only beta and seeds): one draw")
        draws = 1
    kw["n_trials" if use_study else "draws"] = draws
    if storage is not None:
        kw["storage"] = storage
        if study_name is not None:
            kw["study_name"] = study_name

    table = _read_data(data_file, time_column)
    U = table.values
    n_rows, n_features = U.shape
    cfg = _settings({}, files["model"], table, dt, lyapunov, n_features)

    fixed["data_dim"] = n_features
    # the task: the library's defaults where no option is given
    task_defaults = {
        name: p.default
        for name, p in inspect.signature(orc.tune.Forecast).parameters.items()
    }
    warmup = task_defaults["warmup"] if warmup is None else warmup
    horizon = task_defaults["horizon"] if horizon is None else horizon
    windows = task_defaults["windows"] if windows is None else windows
    metric = task_defaults["metric"] if metric is None else metric
    if validation is None:
        n_val = warmup + windows * horizon
        how = f"--warmup {warmup} + --windows {windows} x --horizon {horizon}"
    elif isinstance(validation, float):
        n_val = int(round(validation * n_rows))
        how = f"--validation {validation:g} of {n_rows} rows"
    else:
        n_val, how = validation, f"--validation {validation}"
    if n_val < warmup + horizon:
        raise click.UsageError(
            f"{how}: {n_val} validation rows, fewer than --warmup {warmup} + "
            f"--horizon {horizon}"
        )
    n_train = n_rows - n_val
    if n_train < spinup + 2:
        raise click.UsageError(
            f"{data_file} has {n_rows} rows: after the {n_val} validation rows "
            f"({how}), {max(n_train, 0)} are left to train on, fewer than --spinup "
            f"{spinup} + 2; give more data, or fewer validation rows"
        )
    task_kw = dict(spinup=spinup, warmup=warmup, horizon=horizon, windows=windows,
                   metric=metric, threshold=threshold)  # fmt: skip
    # the VPT's unit: Lyapunov times, time units, or steps (dt 1) without dt
    task_kw["dt"] = 1.0 if cfg.dt is None else cfg.dt
    if cfg.dt is not None and cfg.lyapunov is not None:
        task_kw["lyapunov_exponent"] = cfg.lyapunov
    try:
        task = orc.tune.Forecast(U[:n_train], U[n_train:], **task_kw)
    except (ValueError, TypeError) as err:
        raise click.UsageError(str(err)) from err

    # the plan, said before the work
    score = (
        f"mean valid prediction time (error < --threshold {threshold:g})"
        if metric == "vpt"
        else "mean NRMSE"
    )
    unit = _score_unit(metric, cfg)
    click.echo(
        f"tuning an echo state network on {Path(data_file).name}: {n_train} rows "
        f"to train, the last {n_val} to validate ({windows} windows of {horizon} "
        f"steps after {warmup} warm-up rows); score: {score}"
        + (f" in {unit}" if unit else "")
    )
    searched = ", ".join(
        f"{n} {k.replace('_', '-')} {list(v) if k == 'choice' else f'{v[0]:g}-{v[1]:g}'}"
        for n, (k, v) in plan.space.items()
    )
    per = f"{_count(n_seeds, 'seed')} x {_count(n_betas, 'ridge strength')}"
    if use_study:
        where = f" in {storage}" if storage is not None else " in memory"
        click.echo(
            f"searching {searched or 'ridge strengths and seeds only'}: an Optuna study{where} ({sampler}) of "
            f"{_count(draws, 'draw')} x {per}"
        )
    else:
        click.echo(
            f"searching {searched or 'ridge strengths and seeds only'}: {_count(draws, 'draw')} ({sampler}) x {per} = "
            f"{draws * n_seeds * n_betas} candidates"
        )
    if dashboard:
        _note(
            f"dashboard: {_serve_dashboard(storage, dashboard_port)} (live while "
            f"orc tune runs; afterwards: optuna-dashboard {_storage_url(storage)})"
        )
    if use_study:  # Optuna's lines ("A new study created ...") say what orc says
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)

    db = _sqlite_file(storage)
    if db is not None:  # the library wants the SQLite file's folder to exist
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    pool = {}
    if workers > 1:  # the study's draws, evaluated by the workers
        _study.create_storage(storage)  # made once, not raced by the workers
        pool = _run_workers(workers, gpus)
    try:
        # with workers, the finished study: nothing left to evaluate (or
        # what a worker that failed left, evaluated here)
        result = run(orc.forecaster.ESNForecaster, space, task, **kw)
    except (ValueError, TypeError) as err:
        hint = ""
        if "study_name" in str(err):  # a stored study made with other settings
            hint = " (here: --study-name, or another --storage)"
        raise click.UsageError(f"{err}{hint}") from err
    seconds = time.perf_counter() - t0
    if worker is not None:
        return

    # the results
    view = _cli_names(result)
    Path(out).mkdir(parents=True, exist_ok=True)
    view.to_csv(files["table"])
    _tune_report(view, files["report"], f"orc tune on {Path(data_file).name}", unit)
    n_ok = sum(r["status"] == "ok" for r in view.rows)
    if use_study:
        which = (
            f"study {result.study.study_name!r} in {storage}"
            if storage is not None
            else "Optuna study in memory"
        )
        done = {r["trial"] for r in view.rows}
        if pool:  # the workers' trials: orc.tune.study stores host:pid
            import socket

            names = {f"{socket.gethostname()}:{pid}" for pid in pool}
            mine = {t.number for t in result.study.get_trials(deepcopy=False)
                    if t.user_attrs.get("worker") in names}  # fmt: skip
            by = f"this run's {len(pool)} workers"
            evaluated = len((mine | set(result.evaluated)) & done)
        else:
            by, evaluated = "this run", len(result.evaluated)
        click.echo(
            f"{which} ({sampler}): {_count(len(done), 'draw')} finished, "
            f"{evaluated} evaluated by {by} in {seconds:.1f} s; "
            f"{len(view.rows)} candidates, {n_ok} ok"
        )
    else:
        click.echo(
            f"searched {len(view.rows)} candidates in {seconds:.1f} s, {n_ok} ok"
        )
    if view.best is None:
        raise Failure(
            f"every candidate failed (the reason column of {files['table']} says "
            f"why); no model was written. Wrote {files['table']} and "
            f"{files['report']}"
        )
    best = view.best
    value = best["score"]
    text = f"{value:.3g} {unit}".rstrip()
    capped = False
    if metric == "vpt":
        capped = math.isclose(
            value, horizon * task.dt * (task.lyapunov_exponent or 1.0)
        )
        what = f"valid prediction time {'≥ ' if capped else ''}{text}"
    else:
        what = f"NRMSE {text}"
    click.echo(
        f"best: {what} (mean over the {len(task.starts)} validation windows; "
        f"{'higher' if view.higher_is_better else 'lower'} is better)"
    )
    if metric == "vpt" and capped:
        click.echo(
            "  ≥: its forecasts stayed below the threshold for whole windows; a "
            "longer --horizon tells the best candidates apart"
        )
    width = max(len(n) for n in [*plan.space, "beta", "seed"])
    for name in plan.space:
        click.echo(f"  {name:<{width}}  {best[name]:.4g}")
    click.echo(f"  {'beta':<{width}}  {best['beta']:.3g}  (ridge strength)")
    click.echo(f"  {'seed':<{width}}  {best['seed']}")
    others = ", ".join(f"{n}={ctx.params[n]:g}" for n in TUNABLE if n not in plan.space)
    click.echo(f"  fixed: {others}")

    # the best candidate, trained as orc train trains (the weights the search
    # scored, bit for bit: orc.tune's contract), with its last training state
    import jax.numpy as jnp

    esn = orc.forecaster.ESNForecaster(
        **fixed, **{_arg(n): best[n] for n in plan.space}, seed=best["seed"],
        construction="jax",
    )  # fmt: skip
    model, last = orc.forecaster.train_RCForecaster(
        esn, jnp.asarray(U[:n_train]), spinup=spinup, beta=best["beta"],
        return_states=False,
    )  # fmt: skip
    metadata = {
        "dt": cfg.dt,
        "lyapunov": cfg.lyapunov,
        "columns": cfg.columns,
        "time_column": table.time_name,
        "model": "esn",
        "source": Path(data_file).name,
        "train_rows": n_train,
        "metric": metric,
        "score": float(value),
        **{n: best[n] for n in plan.space},
        **{n: ctx.params[n] for n in TUNABLE if n not in plan.space},
        "beta": float(best["beta"]),
        "seed": int(best["seed"]),
    }
    orc.save(files["model"], model, extras={"last_state": last}, metadata=metadata)
    click.echo(
        f"wrote {files['table']} (one row per candidate), {files['report']} and "
        f"{files['model']} (the best candidate, trained on the first {n_train} rows)"
    )
    click.echo(
        f"next: orc forecast {files['model']} --steps {horizon} --out forecast.csv "
        "(continues from the end of its training rows)"
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
        args = sys.argv[1:] if argv is None else [str(a) for a in argv]
        # orc tune --workers starts its workers with the same arguments
        cli.main(args=args, prog_name="orc", standalone_mode=False,
                 obj={"argv": args})  # fmt: skip
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
