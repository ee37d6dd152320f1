"""CESNForecaster's time constant against the sampling of its data: the
default ``time_const="auto"`` (set by training: ORC 0.4's 50 where it suits
the sampling, 0.5 / dt on coarser samples) and the warning when a fixed constant such as ORC 0.4's 50 is
far too fast for the samples (issue 19)."""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc import forecaster as F


@functools.cache  # each spacing integrated once for the file
def _lorenz(dt, n=300):
    # Lorenz63 samples and their times, in numpy (the library converts them):
    # slicing and shifting them compile nothing, nor does the integration
    # (_helpers' RK4 in Python floats; orc.data's adaptive solve compiled a
    # program for the file). The times are orc.data's grid to the bit,
    # np.arange(0.0, n * dt, dt)[:n]; only their spacing matters here.
    return lorenz_rk4(n, dt), np.arange(n) * dt


#: every training of the file has this spinup (a static argument of the
#: training program): one program per model structure for the whole file
SPINUP = 50


def _train(model, u, t):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, states = F.train_CESNForecaster(model, u, t, spinup=SPINUP)
    kinds = {c.category for c in caught}
    return model, states, kinds


@pytest.mark.parametrize(
    "dt, gamma", [(0.01, 50.0), (0.025, 50.0), (0.05, 50.0), (0.25, 2.0), (1.0, 0.5)]
)
def test_auto_is_orcs_constant_or_half_over_the_sample_spacing(dt, gamma):
    u, t = _lorenz(dt)
    model = F.CESNForecaster(3, 30, time_const="auto", seed=1)
    assert model.time_const_per_dt == 0.5
    assert float(model.driver.time_const) == 50.0  # ORC's constant until trained
    trained, _, kinds = _train(model, u, t)
    assert float(trained.driver.time_const) == gamma  # exactly
    assert F.TimeConstantWarning not in kinds
    # the times' origin does not matter, only their spacing
    shifted, _, _ = _train(model, u, t + 123.0)
    assert float(shifted.driver.time_const) == pytest.approx(gamma, rel=1e-9)


def test_auto_at_orcs_sampling_is_orcs_model_bit_for_bit():
    u, t = _lorenz(0.01)
    auto, states_auto, _ = _train(F.CESNForecaster(3, 30), u, t)
    assert float(auto.driver.time_const) == 50.0
    fixed, states_fixed, _ = _train(F.CESNForecaster(3, 30, time_const=50.0), u, t)
    assert fixed.time_const_per_dt is None and float(fixed.driver.time_const) == 50.0
    assert np.array_equal(np.asarray(auto.readout.wout), np.asarray(fixed.readout.wout))
    assert np.array_equal(np.asarray(states_auto), np.asarray(states_fixed))


def test_auto_is_orcs_constant_exactly_in_float32_too():
    # float32 times 0.01 apart sum with rounding errors of ~1e-7 relative
    # (0.5 / dt would be 49.999996 for the second): ORC's sampling keeps
    # ORC's 50 exactly, and the training program that follows is ORC's
    from orc.forecaster.train import _sampled_time_const

    model = F.CESNForecaster(3, 30, dtype=jnp.float32)
    # one traced program for both time grids (same shape and dtype)
    traced = jax.jit(lambda m, t: _sampled_time_const(m, t).driver.time_const)
    # the times built in numpy (the same float32 values as jnp.arange(4000,
    # dtype=float32) * 0.01 and jnp.linspace(...).astype(float32)), as jax arrays
    for t in (
        np.arange(4000, dtype=np.float32) * np.float32(0.01),
        np.linspace(3.0, 42.99, 4000).astype(np.float32),
    ):
        t = jnp.asarray(t)
        assert t.dtype == jnp.float32
        gamma = _sampled_time_const(model, t).driver.time_const
        assert gamma.dtype == jnp.float32 and float(gamma) == 50.0
        assert float(traced(model, t)) == 50.0
    # coarse spacings keep 0.5 / dt to float32's precision
    t = jnp.asarray(np.arange(300, dtype=np.float32) * np.float32(0.37))
    gamma = float(_sampled_time_const(model, t).driver.time_const)
    assert gamma == pytest.approx(0.5 / 0.37, rel=2e-6)


def test_orcs_constant_on_coarse_samples_warns_and_names_the_fix():
    u, _ = _lorenz(0.01)
    t = np.arange(float(len(u)))  # samples 1 apart: time_const * dt = 50
    orcs = F.CESNForecaster(3, 30, time_const=50.0)
    with pytest.warns(F.TimeConstantWarning, match=r"time_const \* dt = 50.*'auto'"):
        F.train_CESNForecaster(orcs, u, t, spinup=SPINUP)
    _, _, kinds = _train(F.CESNForecaster(3, 30), u, t)  # the default: "auto"
    assert F.TimeConstantWarning not in kinds
    # ORC's sampling: no warning with ORC's constant
    _, _, kinds = _train(orcs, *_lorenz(0.01))
    assert F.TimeConstantWarning not in kinds


def test_auto_is_set_under_jit_from_traced_times():
    u, t = _lorenz(0.25, 300)
    fit = jax.jit(lambda m, u, t: F.train_CESNForecaster(m, u, t)[0].driver.time_const)
    assert float(fit(F.CESNForecaster(3, 30, time_const="auto"), u, t)) == 2.0


def test_auto_survives_save_and_load(tmp_path):
    u, t = _lorenz(0.25, 300)
    model, _, _ = _train(F.CESNForecaster(3, 30, time_const="auto"), u, t)
    path = tmp_path / "cesn.orc"
    orc.io.save(path, model)
    loaded = orc.io.load(path)
    assert loaded.time_const_per_dt == 0.5
    assert float(loaded.driver.time_const) == 2.0
    # retrained on other samples, the loaded model follows them again
    again, _, _ = _train(loaded, *_lorenz(0.01, 300))
    assert float(again.driver.time_const) == 50.0


def test_bad_time_const_names_the_argument():
    with pytest.raises(
        ValueError, match="time_const must be a positive float or 'auto'"
    ):
        F.CESNForecaster(3, 20, time_const="fast")
    with pytest.raises(ValueError, match="time_const"):
        F.CESNForecaster(3, 20, time_const=-1.0)


def test_the_default_is_auto_and_orcs_constant_is_one_argument_away():
    # ORC 0.4's default is 50.0; ours is "auto" (the one deliberate default
    # difference, tests/test_orc_signatures.py), with any construction
    import inspect

    default = inspect.signature(F.CESNForecaster).parameters["time_const"].default
    assert default == "auto"
    assert F.CESNForecaster(3, 20).time_const_per_dt == 0.5
    assert F.CESNForecaster(3, 20, time_const=50.0).time_const_per_dt is None
    model = F.CESNForecaster(3, 20, construction="orc04")
    assert model.time_const_per_dt == 0.5
