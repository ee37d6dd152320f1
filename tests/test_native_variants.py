"""Which variant each native kernel runs: measured at build time, fixed per
process, overridable.

`pip install` runs ``orc_calibrate`` after building the kernels and installs
its ``calibration.txt`` next to the module; ``orc._native`` loads it at import
(a strict ``key=value`` parser in the kernels, nothing executed), then applies
``ORC_NATIVE_VARIANTS`` over it. The selection logic itself is unit-tested in
C++ (``tests/native/kernels_test.cc``, ``TestVariantChoice``).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from orc import _native

pytestmark = pytest.mark.skipif(
    not _native.native_available(), reason="native kernels off (ORC_NATIVE=0)"
)

_REPORT = textwrap.dedent(
    """
    import json, sys, warnings, jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import orc
        from orc import _native
        forecast = jax.numpy.zeros(0)
        if sys.argv[1] == "forecast":  # else only the load and its report
            model = orc.forecaster.ESNForecaster(3, 300, seed=0)
            u = jax.numpy.asarray(np.load(sys.argv[2]))  # the parent's Lorenz63
            trained, states = orc.forecaster.train_ESNForecaster(model, u, spinup=100)
            forecast = trained.forecast(20, states[-1])
        config = _native.native_config()
    print(json.dumps({
        "variants": config["variants"],
        "from": config["variants_from"],
        "forecast": [float(v) for v in forecast.ravel()],
        "warnings": [str(w.message) for w in caught],
    }))
    """
)


@functools.cache
def _lorenz_file() -> str:
    """Lorenz63 (tN 25, dt 0.01) integrated once here and saved for every
    subprocess: the processes compare their kernels on the same data, and
    none of them integrates (compiles diffrax) again."""
    import orc

    folder = tempfile.mkdtemp(prefix="orc-variants-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "lorenz.npy")
    np.save(path, np.asarray(orc.data.lorenz63(tN=25, dt=0.01)[0]))
    return path


@functools.cache
def _default_report() -> str:
    return json.dumps(_report())


def _report(forecast: bool = True, **env) -> dict:
    """What a fresh process with ``env`` runs: its variants, where they came
    from, the warnings of its import and (``forecast``) a trained model's
    forecast."""
    full = {k: v for k, v in os.environ.items() if k != "ORC_NATIVE_VARIANTS"}
    full.update(env)
    full["JAX_PLATFORMS"] = "cpu"  # the CPU kernels, also where a GPU is the default
    what = "forecast" if forecast else "load"
    proc = subprocess.run(
        [sys.executable, "-c", _REPORT, what, _lorenz_file() if forecast else ""],
        env=full,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _calibration_file() -> str:
    return os.path.join(
        os.path.dirname(_native._state["module"].__file__), "calibration.txt"
    )


def test_the_install_measured_the_variants():
    """The build left calibration.txt beside the module, every line a
    comment or a key=value the kernels accept, and a process without
    ORC_NATIVE_VARIANTS runs exactly what it names."""
    path = _calibration_file()
    assert os.path.isfile(path), f"no calibration.txt next to the module: {path}"
    with open(path, encoding="ascii") as f:
        text = f.read()
    spec = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, value = line.split("=")
        spec[key] = value
    assert set(spec) == {"ell_f64", "ell_f32", "run_f64", "run_f32", "tanh", "gram"}, (
        text
    )
    assert "us per" in text  # the measurements are kept as comments
    report = json.loads(_default_report())  # the default process, run once
    assert report["from"] == "the build's calibration", report
    running = dict(word.split("=") for word in report["variants"].split())
    assert running == spec, (running, spec)


def test_environment_overrides_and_changes_only_rounding():
    default = json.loads(_default_report())
    portable = _report(
        ORC_NATIVE_VARIANTS="ell_f64=scalar,ell_f32=scalar run_f64=rows run_f32=rows "
        "tanh=baseline gram=baseline"
    )
    assert portable["variants"] == (
        "ell_f64=scalar ell_f32=scalar run_f64=rows run_f32=rows tanh=baseline gram=baseline"
    ), portable
    assert portable["from"].endswith("ORC_NATIVE_VARIANTS"), portable
    assert not portable["warnings"], portable["warnings"]
    # other arithmetic (sums in another order, no FMA), the same model: the
    # weights of a ridge fit with beta = 8e-8 move with rounding (1e-5
    # relative here), its forecast does not
    a, b = default["forecast"], portable["forecast"]
    scale = max(abs(v) for v in a)
    assert 0 < max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-6 * scale


def test_interleaved_runs_agree_with_the_row_loops():
    """The multi-step kernels' interleaved products (training and forecast
    here) give the row loops' model to rounding: another order of the same
    sums."""
    forced = _report(ORC_NATIVE_VARIANTS="run_f64=interleaved:1 run_f32=interleaved:1")
    if any("cannot run" in w for w in forced["warnings"]):
        pytest.skip("this CPU has no AVX2 + FMA: no interleaved loop")
    assert "run_f64=interleaved:1 run_f32=interleaved:1" in forced["variants"], forced
    rows = _report(ORC_NATIVE_VARIANTS="run_f64=rows run_f32=rows")
    assert "run_f64=rows run_f32=rows" in rows["variants"], rows
    a, b = forced["forecast"], rows["forecast"]
    scale = max(abs(v) for v in a)
    assert 0 < max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-6 * scale


@pytest.mark.parametrize(
    "spec, says",
    [
        ("ell_f64=gather:8", "not one of scalar, avx2, avx512"),
        ("tanh=fast", "not one of baseline, avx2, avx512"),
        ("colour=blue", "unknown key 'colour'"),
        ("ell_f64=avx2", "needs the shortest row"),
        ("run_f32=interleaved", "not rows or interleaved:K"),
    ],
)
def test_a_bad_override_is_reported_and_ignored(spec, says):
    report = _report(forecast=False, ORC_NATIVE_VARIANTS=spec)
    assert any(
        "ignoring ORC_NATIVE_VARIANTS" in w and says in w for w in report["warnings"]
    ), report["warnings"]
    assert report["variants"] == json.loads(_default_report())["variants"]


def test_variants_are_fixed_once_kernels_ran():
    _native.native_config()  # has run a kernel in this process
    with pytest.raises(ValueError, match="already run"):
        _native._state["module"].set_variants("tanh=baseline")


def test_cli_info_calibrate_measures_now():
    proc = subprocess.run(
        [sys.executable, "-m", "orc.cli", "info", "--calibrate"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "variants" in out and "Measured now" in out, out
    for key in ("ell_f64=", "ell_f32=", "run_f64=", "run_f32=", "tanh=", "gram="):
        assert key in out.split("Measured now")[1], out
