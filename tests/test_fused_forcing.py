"""Which models' trainings run the fused native fit (the reservoir run and
its ridge statistics in one overlapped call): a model class that declares
its forcing the standard pipeline (``capabilities`` ``"pipeline_forcing"``,
:mod:`orc._bank`), a forecaster or a controller (whose embedding takes the
outputs and the controls side by side). The fused fit gives the bits of the
generic path: a subclass that does not declare the capability again (the
statement is not inherited) trains through that path."""

import jax
import numpy as np
import pytest

from _helpers import lorenz_rk4, on_cpu, on_device
from orc import _native
from orc.control import ESNController, train_RCController

pytestmark = pytest.mark.skipif(
    not _native.native_available(), reason="native kernels off (ORC_NATIVE=0)"
)


class GenericController(ESNController):
    """An ESNController that does not state ``pipeline_forcing``."""


def _fused_calls(model, u, c, keep):
    text = (
        jax.jit(lambda m, u, c: train_RCController(m, u, c, return_states=keep))
        .lower(model, u, c)
        .as_text()
    )
    return sum("orc_esn_fit" in line for line in text.splitlines())


@pytest.mark.parametrize("keep", [True, False])
def test_a_controller_trains_with_the_fused_fit(keep):
    with on_cpu():  # the fused fit is a native CPU kernel
        _check_controller(keep)


def _check_controller(keep):
    u = on_device(lorenz_rk4(3001))
    c = on_device(np.random.default_rng(0).standard_normal((3000, 2)))
    fused, generic = (
        ESNController(3, 2, 100, seed=3),
        GenericController(3, 2, 100, seed=3),
    )
    assert _fused_calls(fused, u[:-1], c, keep) == 1
    assert _fused_calls(generic, u[:-1], c, keep) == 0
    a, sa = train_RCController(fused, u[:-1], c, spinup=50, return_states=keep)
    b, sb = train_RCController(generic, u[:-1], c, spinup=50, return_states=keep)
    assert np.array_equal(np.asarray(a.readout.wout), np.asarray(b.readout.wout))
    assert np.array_equal(np.asarray(sa), np.asarray(sb))
