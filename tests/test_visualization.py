"""Tests for orc.utils.visualization: figure structure, VPT marker, scaling, checks."""

import matplotlib

matplotlib.use("Agg")

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from orc.utils import visualization as viz  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _save(fig, tmp_path, name):
    path = tmp_path / f"{name}.png"
    fig.savefig(path, dpi=50)
    assert path.stat().st_size > 0
    plt.close(fig)


def _legend_texts(ax):
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


def _circle(n_steps, omega=0.3, dt=0.02):
    """Truth with ||u(t)|| = 1 at all times, so the error normaliser is exactly 1."""
    t = np.arange(n_steps) * dt
    return np.stack([np.cos(omega * t), np.sin(omega * t)], axis=1)


def _growing_error_case(n_steps=200, eps=1e-3, rate=0.05):
    """Forecast = truth + eps * exp(rate * k) along the first axis: e_k = eps e^{rk}."""
    truth = _circle(n_steps)
    k = np.arange(n_steps)
    forecast = truth.copy()
    forecast[:, 0] += eps * np.exp(rate * k)
    return truth, forecast, eps * np.exp(rate * k)


# first k with 1e-3 * exp(0.05 k) > 0.4 is k > ln(400) / 0.05 = 119.83, i.e. k = 120
K_CROSS = 120


def test_growing_error_case_crosses_where_expected():
    _, _, err = _growing_error_case()
    assert int(np.floor(np.log(0.4 / 1e-3) / 0.05)) + 1 == K_CROSS
    assert err[K_CROSS - 1] <= 0.4 < err[K_CROSS]


# --------------------------------------------------------------------------------------
# plot_time_series
# --------------------------------------------------------------------------------------


def test_plot_time_series_structure(tmp_path):
    rng = np.random.default_rng(0)
    U = rng.standard_normal((100, 3))
    t = np.linspace(0.0, 9.9, 100)
    out = viz.plot_time_series(
        [U, jnp.asarray(U + 1.0)],
        t=t,
        time_series_labels=["truth", "forecast"],
        line_formats=["-", "--"],
        state_var_names=["x", "y", "z"],
        t_lim=5.0,
        title="series",
    )
    assert out is None  # as ORC 0.4: the figure is pyplot's current one
    fig = plt.gcf()
    assert isinstance(fig, Figure)
    axs = fig.axes
    assert len(axs) == 3
    assert [ax.get_ylabel() for ax in axs] == ["x", "y", "z"]
    assert _legend_texts(axs[0]) == ["truth", "forecast"]
    assert axs[0].get_title() == "series"
    assert axs[-1].get_xlabel() == "$t$"
    assert axs[1].get_xlim() == pytest.approx((0.0, 5.0))
    assert all(len(ax.get_lines()) == 2 for ax in axs)
    assert axs[2].get_lines()[1].get_linestyle() == "--"
    np.testing.assert_allclose(axs[1].get_lines()[1].get_ydata(), U[:, 1] + 1.0)
    _save(fig, tmp_path, "time_series")


def test_plot_time_series_single_array_defaults(tmp_path):
    viz.plot_time_series(np.arange(10.0).reshape(10, 1))
    fig = plt.gcf()
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_legend() is None
    assert ax.get_title() == ""
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), np.arange(10))
    assert ax.get_xlim() == pytest.approx((0.0, 9.0))
    _save(fig, tmp_path, "time_series_single")


U3 = np.zeros((10, 3))


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "name"),
    [
        ((np.zeros(10),), {}, TypeError, "U_lst"),
        (([[1.0, 2.0]],), {}, TypeError, "U_lst"),
        (([U3, np.zeros((9, 3))],), {}, ValueError, "U_lst"),
        ((U3,), {"t": np.zeros((10, 1))}, TypeError, "t"),
        ((U3,), {"t": np.zeros(9)}, ValueError, "t"),
        ((U3,), {"time_series_labels": "a"}, TypeError, "time_series_labels"),
        ((U3,), {"time_series_labels": ["a", "b"]}, ValueError, "time_series_labels"),
        ((U3,), {"line_formats": "-"}, TypeError, "line_formats"),
        ((U3,), {"line_formats": ["-", "--"]}, ValueError, "line_formats"),
        ((U3,), {"state_var_names": "xyz"}, TypeError, "state_var_names"),
        ((U3,), {"state_var_names": ["x"]}, ValueError, "state_var_names"),
        ((U3,), {"t_lim": (0, 5)}, TypeError, "t_lim"),
    ],
)
def test_plot_time_series_validation(args, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        viz.plot_time_series(*args, **kwargs)


# --------------------------------------------------------------------------------------
# imshow_1D_spatiotemp
# --------------------------------------------------------------------------------------


def test_imshow_1D_spatiotemp_structure(tmp_path):
    U = np.sin(np.linspace(0, 6, 40)[:, None] + np.linspace(0, 3, 16)[None, :])
    out = viz.imshow_1D_spatiotemp(jnp.asarray(U), 4.0, domain=(0, 22), title="KS")
    assert out is None  # as ORC 0.4: the figure is pyplot's current one
    fig = plt.gcf()
    assert isinstance(fig, Figure)
    assert fig.get_dpi() == 200  # ORC 0.4's resolution
    assert len(fig.axes) == 2  # image + colour bar
    ax, cax = fig.axes
    assert ax.get_title() == "KS"
    assert ax.get_xlabel() == "$t$"
    assert ax.get_ylabel() == "$x$"
    assert cax.get_ylabel() == "$u$"
    image = ax.images[0]
    assert image.get_extent() == pytest.approx([0.0, 4.0, 0.0, 22.0])
    assert image.get_array().shape == (16, 40)  # space on the vertical axis
    _save(fig, tmp_path, "imshow")


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "name"),
    [
        ((np.zeros(5), 1.0), {}, TypeError, "U"),
        (([[0.0, 1.0]], 1.0), {}, TypeError, "U"),
        ((np.zeros((5, 4)), "1"), {}, TypeError, "tN"),
        ((np.zeros((5, 4)), 1.0), {"domain": (0, 1, 2)}, TypeError, "domain"),
        ((np.zeros((5, 4)), 1.0), {"domain": 1.0}, TypeError, "domain"),
        ((np.zeros((5, 4)), 1.0), {"domain": (0, "a")}, TypeError, "domain"),
    ],
)
def test_imshow_1D_spatiotemp_validation(args, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        viz.imshow_1D_spatiotemp(*args, **kwargs)


# --------------------------------------------------------------------------------------
# plot_attractor
# --------------------------------------------------------------------------------------


def test_plot_attractor_list_with_labels(tmp_path):
    rng = np.random.default_rng(1)
    truth = rng.standard_normal((50, 4))
    forecast = jnp.asarray(rng.standard_normal((30, 3)))
    fig = viz.plot_attractor(
        [truth, forecast], labels=["truth", "forecast"], title="attractor"
    )
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.name == "3d"
    assert _legend_texts(ax) == ["truth", "forecast"]
    assert ax.get_title() == "attractor"
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) == (
        "$x$",
        "$y$",
        "$z$",
    )
    assert len(ax.get_lines()) == 2
    xs, ys, zs = ax.get_lines()[0].get_data_3d()
    np.testing.assert_allclose(np.stack([xs, ys, zs], axis=1), truth[:, :3])
    _save(fig, tmp_path, "attractor")


def test_plot_attractor_single_array_into_given_axes(tmp_path):
    fig0 = plt.figure()
    ax = fig0.add_subplot(projection="3d")
    U = np.random.default_rng(2).standard_normal((20, 3))
    fig = viz.plot_attractor(U, ax=ax, state_var_names=["a", "b", "c"], color="k")
    assert fig is fig0
    assert ax.get_legend() is None
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()) == ("a", "b", "c")
    _save(fig, tmp_path, "attractor_ax")


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "name"),
    [
        ((np.zeros((10, 2)),), {}, ValueError, "U"),
        ((np.zeros(10),), {}, ValueError, "U"),
        (([[0.0, 1.0, 2.0]],), {}, TypeError, "U"),
        (([np.zeros((5, 3)), np.zeros((5, 2))],), {}, ValueError, r"U\[1\]"),
        ((np.zeros((5, 3)),), {"labels": ["a", "b"]}, ValueError, "labels"),
        (([np.zeros((5, 3))] * 2,), {"labels": "a"}, TypeError, "labels"),
        ((np.zeros((5, 3)),), {"state_var_names": ["a"]}, ValueError, "state_var"),
        ((np.zeros((5, 3)),), {"state_var_names": "abc"}, TypeError, "state_var"),
    ],
)
def test_plot_attractor_validation(args, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        viz.plot_attractor(*args, **kwargs)


def test_plot_attractor_rejects_2d_axes():
    _, ax = plt.subplots()
    with pytest.raises(TypeError, match="ax"):
        viz.plot_attractor(np.zeros((5, 3)), ax=ax)


# --------------------------------------------------------------------------------------
# plot_forecast
# --------------------------------------------------------------------------------------


def _vpt_positions(fig):
    return [
        line.get_xdata()[0]
        for ax in fig.axes
        for line in ax.get_lines()
        if line.get_gid() == "vpt"
    ]


def test_plot_forecast_lyapunov_axis_and_vpt(tmp_path):
    truth, forecast, err = _growing_error_case()
    dt, lam = 0.02, 0.9
    fig = viz.plot_forecast(
        jnp.asarray(truth),
        forecast,
        dt=dt,
        lyapunov_exponent=lam,
        state_var_names=["x", "y"],
        title="forecast",
    )
    assert isinstance(fig, Figure)
    axs = fig.axes
    assert len(axs) == 3  # two variables + error panel
    assert [ax.get_ylabel() for ax in axs] == ["x", "y", "normalised error"]
    assert fig.get_suptitle() == "forecast"
    assert axs[-1].get_xlabel() == r"Lyapunov times $\Lambda t$"

    x_expected = np.arange(200) * dt * lam
    np.testing.assert_allclose(axs[0].get_lines()[0].get_xdata(), x_expected)
    assert axs[-1].get_xlim() == pytest.approx((0.0, 199 * dt * lam))

    # VPT marker in every panel at the analytically known first crossing
    x_vpt = K_CROSS * dt * lam
    positions = _vpt_positions(fig)
    assert len(positions) == 3
    np.testing.assert_allclose(positions, x_vpt)
    assert _legend_texts(axs[0]) == ["truth", "forecast", f"VPT = {x_vpt:.3g} Λt"]

    # the error curve is e(t) and the threshold line sits at 0.4
    np.testing.assert_allclose(axs[-1].get_lines()[0].get_ydata(), err, rtol=1e-12)
    (thr_line,) = [ln for ln in axs[-1].get_lines() if ln.get_gid() == "threshold"]
    np.testing.assert_allclose(thr_line.get_ydata(), 0.4)
    assert _legend_texts(axs[-1]) == ["error $e(t)$", "threshold = 0.4"]

    lines0 = axs[0].get_lines()
    assert lines0[0].get_linestyle() == "-" and lines0[1].get_linestyle() == "--"
    _save(fig, tmp_path, "forecast")


def test_plot_forecast_time_units_and_steps(tmp_path):
    truth, forecast, _ = _growing_error_case()
    t = 5.0 + 0.1 * np.arange(200)
    fig = viz.plot_forecast(truth, forecast, t=t)
    assert fig.axes[-1].get_xlabel() == "$t$"
    np.testing.assert_allclose(_vpt_positions(fig), t[K_CROSS])
    # the legend value is the duration from the first sample
    assert _legend_texts(fig.axes[0])[-1] == f"VPT = {0.1 * K_CROSS:.3g}"
    _save(fig, tmp_path, "forecast_t")

    fig = viz.plot_forecast(truth, forecast, threshold=0.4)
    assert fig.axes[-1].get_xlabel() == "time step"
    np.testing.assert_allclose(_vpt_positions(fig), K_CROSS)
    assert _legend_texts(fig.axes[0])[-1] == f"VPT = {K_CROSS} steps"
    _save(fig, tmp_path, "forecast_steps")


def test_plot_forecast_no_crossing_uses_whole_window():
    truth, forecast, _ = _growing_error_case(n_steps=100)  # max error 0.13 < 0.4
    fig = viz.plot_forecast(truth, forecast, dt=0.5)
    np.testing.assert_allclose(_vpt_positions(fig), 99 * 0.5)
    assert _legend_texts(fig.axes[0])[-1] == "VPT ≥ 49.5"


def test_plot_forecast_nan_counts_as_failure_and_1d_input():
    truth = np.cos(np.arange(50) * 0.1)
    forecast = truth.copy()
    forecast[30:] = np.nan
    fig = viz.plot_forecast(truth, forecast)
    assert len(fig.axes) == 2
    np.testing.assert_allclose(_vpt_positions(fig), 30)


def test_plot_forecast_draws_the_warmup_before_the_forecast(tmp_path):
    truth, forecast, _ = _growing_error_case()
    warm = _circle(30)
    dt, lam = 0.02, 0.9
    fig = viz.plot_forecast(
        truth, forecast, dt=dt, lyapunov_exponent=lam, warmup=jnp.asarray(warm)
    )
    assert len(fig.axes) == 3
    assert _legend_texts(fig.axes[0])[:3] == ["warm-up", "truth", "forecast"]
    for i, ax in enumerate(fig.axes[:2]):
        (line,) = [ln for ln in ax.get_lines() if ln.get_gid() == "warmup"]
        # the last warm-up row one step before the forecast's first (at 0)
        np.testing.assert_allclose(line.get_xdata(), np.arange(-30, 0) * dt * lam)
        np.testing.assert_allclose(line.get_ydata(), warm[:, i])
        assert line.get_color() != ax.get_lines()[1].get_color()  # muted, not truth
    assert fig.axes[-1].get_xlim() == pytest.approx((-30 * dt * lam, 199 * dt * lam))
    np.testing.assert_allclose(_vpt_positions(fig), K_CROSS * dt * lam)  # unchanged
    _save(fig, tmp_path, "forecast_warmup")

    # the spacing of t (here starting at t=5) places it, and a 1-D warm-up works
    t = 5.0 + 0.1 * np.arange(50)
    fig = viz.plot_forecast(truth[:50, :1], forecast[:50, :1], t=t, warmup=np.ones(4))
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "warmup"]
    np.testing.assert_allclose(line.get_xdata(), [4.6, 4.7, 4.8, 4.9])
    # without time: steps -W .. -1
    fig = viz.plot_forecast(truth, forecast, warmup=warm[:3])
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_gid() == "warmup"]
    np.testing.assert_allclose(line.get_xdata(), [-3, -2, -1])

    with pytest.raises(ValueError, match="warmup"):
        viz.plot_forecast(truth, forecast, warmup=np.ones((5, 3)))
    with pytest.raises(ValueError, match="warmup"):
        viz.plot_forecast(truth, forecast, warmup=np.ones((0, 2)))
    with pytest.raises(TypeError, match="warmup"):
        viz.plot_forecast(truth, forecast, warmup=[[1.0, 2.0]])


def test_plot_forecast_without_truth(tmp_path):
    _, forecast, _ = _growing_error_case()
    fig = viz.plot_forecast(
        None, forecast, dt=0.1, state_var_names=["a", "b"], warmup=forecast[:10]
    )
    assert [ax.get_ylabel() for ax in fig.axes] == ["a", "b"]  # no error panel
    assert fig.axes[-1].get_xlabel() == "$t$"
    assert _legend_texts(fig.axes[0]) == ["warm-up", "forecast"]
    assert _vpt_positions(fig) == []
    _save(fig, tmp_path, "forecast_only")


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"truth": [[1.0, 2.0]]}, TypeError, "truth"),
        ({"forecast": np.ones((10, 3))}, ValueError, "forecast"),
        (
            {"truth": np.zeros((10, 2)), "forecast": np.zeros((10, 2))},
            ValueError,
            "truth",
        ),
        (
            {"truth": np.ones((2, 5, 2)), "forecast": np.ones((2, 5, 2))},
            ValueError,
            "truth",
        ),
        ({"t": np.arange(9.0)}, ValueError, "t"),
        ({"t": np.arange(10.0), "dt": 0.1}, ValueError, "dt"),
        ({"dt": -0.1}, ValueError, "dt"),
        ({"dt": "0.1"}, TypeError, "dt"),
        ({"lyapunov_exponent": 0.9}, ValueError, "lyapunov_exponent"),
        ({"dt": 0.1, "lyapunov_exponent": 0.0}, ValueError, "lyapunov_exponent"),
        ({"threshold": "0.4"}, TypeError, "threshold"),
        ({"threshold": 0.0}, ValueError, "threshold"),
        ({"state_var_names": ["x"]}, ValueError, "state_var_names"),
        ({"state_var_names": "xy"}, TypeError, "state_var_names"),
    ],
)
def test_plot_forecast_validation(kwargs, exc, name):
    args = {"truth": np.ones((10, 2)), "forecast": np.ones((10, 2))} | kwargs
    with pytest.raises(exc, match=name):
        viz.plot_forecast(**args)


# --------------------------------------------------------------------------------------
# plot_spatiotemporal_forecast
# --------------------------------------------------------------------------------------


def test_plot_spatiotemporal_forecast_structure(tmp_path):
    t = 0.25 * np.arange(60)
    x = np.linspace(0, 22, 32)
    truth = np.sin(x[None, :] - t[:, None])
    forecast = truth + 0.01 * t[:, None] * np.cos(x[None, :])
    forecast[5, 3] = -1.7  # largest absolute value sits in the forecast
    fig = viz.plot_spatiotemporal_forecast(
        truth,
        jnp.asarray(forecast),
        t=t,
        domain=(0, 22),
        lyapunov_exponent=0.05,
        title="KS",
    )
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 5  # three images + two colour bars
    ax_t, ax_f, ax_e, cbar_field, cbar_err = fig.axes
    assert [ax.get_title(loc="left") for ax in (ax_t, ax_f, ax_e)] == [
        "truth",
        "forecast",
        "error (forecast − truth)",
    ]
    assert fig.get_suptitle() == "KS"
    assert ax_e.get_xlabel() == r"Lyapunov times $\Lambda t$"
    assert all(ax.get_ylabel() == "$x$" for ax in (ax_t, ax_f, ax_e))
    assert cbar_field.get_ylabel() == "$u$"
    assert cbar_err.get_ylabel() == r"$\hat u - u$"

    im_t, im_f, im_e = (ax.images[0] for ax in (ax_t, ax_f, ax_e))
    assert im_t.get_extent() == pytest.approx([0.0, t[-1] * 0.05, 0.0, 22.0])
    assert im_t.get_clim() == pytest.approx((-1.7, 1.7))
    assert im_f.get_clim() == im_t.get_clim()
    emax = np.abs(forecast - truth).max()
    assert im_e.get_clim() == pytest.approx((-emax, emax))
    np.testing.assert_allclose(im_e.get_array(), (forecast - truth).T)
    _save(fig, tmp_path, "spatiotemporal")


def test_plot_spatiotemporal_forecast_without_time():
    fig = viz.plot_spatiotemporal_forecast(np.ones((10, 4)), np.ones((10, 4)))
    ax_e = fig.axes[2]
    assert ax_e.get_xlabel() == "time step"
    assert ax_e.images[0].get_extent() == pytest.approx([0.0, 9.0, 0.0, 1.0])
    assert ax_e.images[0].get_clim() == pytest.approx((-1.0, 1.0))  # zero error


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"truth": "abc"}, TypeError, "truth"),
        ({"truth": np.ones(10), "forecast": np.ones(10)}, ValueError, "truth"),
        ({"forecast": np.ones((10, 5))}, ValueError, "forecast"),
        ({"t": np.arange(9.0)}, ValueError, "t"),
        ({"domain": (0, 1, 2)}, TypeError, "domain"),
        ({"domain": (1.0, 0.0)}, ValueError, "domain"),
        ({"lyapunov_exponent": 0.1}, ValueError, "lyapunov_exponent"),
        ({"t": np.arange(10.0), "lyapunov_exponent": -1}, ValueError, "lyapunov"),
    ],
)
def test_plot_spatiotemporal_forecast_validation(kwargs, exc, name):
    args = {"truth": np.ones((10, 4)), "forecast": np.ones((10, 4))} | kwargs
    with pytest.raises(exc, match=name):
        viz.plot_spatiotemporal_forecast(**args)


# --------------------------------------------------------------------------------------
# confusion matrix
# --------------------------------------------------------------------------------------

Y_TRUE = [0, 0, 1, 1, 1, 2, 2, 0]
Y_PRED = [0, 1, 1, 1, 2, 2, 0, 0]
# rows: true class, columns: predicted class (counted by hand)
C_HAND = np.array([[2, 1, 0], [0, 2, 1], [1, 0, 1]])


def test_confusion_matrix_hand_example():
    C = viz.confusion_matrix(Y_TRUE, Y_PRED)
    assert C.dtype == np.int64
    np.testing.assert_array_equal(C, C_HAND)
    C_jax = viz.confusion_matrix(jnp.asarray(Y_TRUE), np.asarray(Y_PRED), n_classes=4)
    expected = np.zeros((4, 4), dtype=np.int64)
    expected[:3, :3] = C_HAND
    np.testing.assert_array_equal(C_jax, expected)


def test_plot_confusion_matrix_counts(tmp_path):
    fig = viz.plot_confusion_matrix(
        Y_TRUE, Y_PRED, class_names=["a", "b", "c"], title="cm"
    )
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # heat map + colour bar
    ax = fig.axes[0]
    assert ax.get_title() == "cm"
    assert ax.get_xlabel() == "predicted class"
    assert ax.get_ylabel() == "true class"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    np.testing.assert_array_equal(ax.images[0].get_array(), C_HAND)
    texts = [t.get_text() for t in ax.texts]
    assert texts == [str(v) for v in C_HAND.ravel()]
    assert fig.axes[1].get_ylabel() == "count"
    _save(fig, tmp_path, "confusion")


def test_plot_confusion_matrix_normalized(tmp_path):
    fig = viz.plot_confusion_matrix(Y_TRUE, Y_PRED, n_classes=4, normalize=True)
    ax = fig.axes[0]
    values = np.asarray(ax.images[0].get_array())
    np.testing.assert_allclose(values[:3].sum(axis=1), 1.0)
    np.testing.assert_allclose(values[3], 0.0)  # class 3 never occurs: row stays 0
    np.testing.assert_allclose(values[:3, :3], C_HAND / C_HAND.sum(1, keepdims=True))
    assert ax.texts[0].get_text() == f"{2 / 3:.2f}"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    _save(fig, tmp_path, "confusion_normalized")


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "name"),
    [
        (([0, 1], [0, 1, 1]), {}, ValueError, "pred_labels"),
        (([0.0, 1.0], [0, 1]), {}, TypeError, "true_labels"),
        (([0, 1], np.array([True, False])), {}, TypeError, "pred_labels"),
        (([[0, 1]], [[0, 1]]), {}, ValueError, "true_labels"),
        (([0, -1], [0, 1]), {}, ValueError, "true_labels"),
        (("01", [0, 1]), {}, TypeError, "true_labels"),
        (([0, 1], [0, 2]), {"n_classes": 2}, ValueError, "pred_labels"),
        (([0, 1], [0, 1]), {"n_classes": 2.0}, TypeError, "n_classes"),
        (([0, 1], [0, 1]), {"n_classes": 0}, ValueError, "n_classes"),
        (([], []), {}, ValueError, "n_classes"),
    ],
)
def test_confusion_matrix_validation(args, kwargs, exc, name):
    with pytest.raises(exc, match=name):
        viz.confusion_matrix(*args, **kwargs)
    with pytest.raises(exc, match=name):
        viz.plot_confusion_matrix(*args, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"class_names": ["a", "b"]}, ValueError, "class_names"),
        ({"class_names": "abc"}, TypeError, "class_names"),
        ({"normalize": "yes"}, TypeError, "normalize"),
    ],
)
def test_plot_confusion_matrix_validation(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        viz.plot_confusion_matrix(Y_TRUE, Y_PRED, **kwargs)


def test_library_leaves_global_matplotlib_state_alone():
    before = dict(matplotlib.rcParams)
    backend = matplotlib.get_backend()
    truth, forecast, _ = _growing_error_case(n_steps=50)
    viz.plot_time_series(truth)
    viz.imshow_1D_spatiotemp(truth, 1.0)
    viz.plot_attractor(np.ones((5, 3)))
    viz.plot_forecast(truth, forecast, dt=0.1, lyapunov_exponent=1.0)
    viz.plot_spatiotemporal_forecast(truth, forecast)
    viz.plot_confusion_matrix(Y_TRUE, Y_PRED)
    assert dict(matplotlib.rcParams) == before
    assert matplotlib.get_backend() == backend
