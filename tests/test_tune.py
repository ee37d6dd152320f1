"""orc.tune: the population search against candidates trained one by one
through the public API (the reference), failures as data, static groups,
the table and the report."""

from __future__ import annotations

import csv

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import CPU_ONLY, assert_batched, hlo_loops, hlo_text, lorenz_rk4
from orc.forecaster import ESNForecaster, train_RCForecaster
from orc.tune import Choice, Forecast, IntUniform, LogUniform, Uniform

U = np.asarray(lorenz_rk4(2400))
TRAIN, VAL = U[:1500], U[1500:]
FIXED = {"data_dim": 3, "res_dim": 40}
RTOL = 1e-4


def _task(metric="nrmse", horizon=40):
    return Forecast(TRAIN, VAL, spinup=50, warmup=60, horizon=horizon, windows=3,
                    metric=metric, dt=0.01, lyapunov_exponent=0.906)  # fmt: skip


def _reference(task, row, names, fixed=FIXED):
    """One candidate through the public API: train_RCForecaster, force over
    the validation data, forecast each window, orc.metrics."""
    kw = dict(fixed)
    kw.update({n: row[n] for n in names})
    model = ESNForecaster(**kw, seed=row["seed"], construction="jax")
    model, _ = train_RCForecaster(
        model, jnp.asarray(TRAIN), spinup=task.spinup, beta=row["beta"]
    )
    return _score(task, model)


def _score(task, model):
    """A trained model's score on the task's windows, by the public API."""
    states = model.force(jnp.asarray(VAL), model.driver.default_state())
    scores = []
    for s in task.starts:
        pred = model.forecast(task.horizon, states[s - 1])
        truth = jnp.asarray(VAL[s : s + task.horizon])
        if task.metric == "nrmse":
            scores.append(orc.metrics.nrmse(pred, truth, scale=np.std(TRAIN)))
        else:
            scale = np.sqrt(np.mean(np.sum(TRAIN**2, axis=1)))
            scores.append(
                orc.metrics.valid_prediction_time(
                    pred, truth, dt=0.01, lyapunov_exponent=0.906, scale=scale
                )
            )
    return float(np.mean(scores))


SPACE = {
    "Wr_spectral_radius": Uniform(0.3, 1.2),
    "leak_rate": Uniform(0.2, 1.0),
    "embedding_scaling": LogUniform(0.02, 0.5),
    "bias": Uniform(0.0, 1.5),
}


@pytest.fixture(scope="module")
def nrmse_search():
    # one seed, a row of four draws: the program of the diverging
    # candidates' batch (a row of four points per seed there)
    return orc.tune.search(
        ESNForecaster, SPACE, _task(), fixed=FIXED, draws=4, seeds=1,
        beta=LogUniform(1e-8, 1e-2), ridge_points=3,
    )  # fmt: skip


def test_every_candidate_scores_as_its_solo_public_api_run(nrmse_search):
    res = nrmse_search
    assert len(res.rows) == 1 * 4 * 3
    assert [r["id"] for r in res.rows] == list(range(12))
    # seeds x draws x strengths, every combination once
    combos = {(r["seed"], r["Wr_spectral_radius"], r["beta"]) for r in res.rows}
    assert len(combos) == 12
    np.testing.assert_allclose(
        sorted({r["beta"] for r in res.rows}), np.geomspace(1e-8, 1e-2, 3)
    )
    for row in res.rows:
        assert row["status"] == "ok", row
        ref = _reference(_task(), row, list(SPACE))
        # the same weights (one Cholesky solve per strength, as training's);
        # the search's batched closed loop (XLA) and forecast's native one
        # round differently, which 40 chaotic steps magnify
        np.testing.assert_allclose(row["score"], ref, rtol=RTOL)
    best = min(res.rows, key=lambda r: r["score"])  # NRMSE: lower is better
    assert res.best == best


def test_best_model_is_an_ordinary_trained_model(nrmse_search, tmp_path):
    res = nrmse_search
    model = res.best_model
    assert isinstance(model, ESNForecaster)
    assert model.res_dim == 40
    assert float(model.driver.spectral_radius) == pytest.approx(
        res.best["Wr_spectral_radius"]
    )
    # the model that was scored: its own score is the table's
    assert_batched(_score(_task(), model), res.best["score"], cpu={"rtol": 1e-9})
    path = tmp_path / "best.orc"
    orc.save(path, model)
    loaded = orc.load(path)
    np.testing.assert_array_equal(loaded.readout.wout, model.readout.wout)


def test_table_csv_and_report(nrmse_search, tmp_path):
    res = nrmse_search
    res.to_csv(tmp_path / "search.csv")
    with open(tmp_path / "search.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(res.rows)
    assert list(rows[0]) == res.columns
    assert float(rows[5]["score"]) == pytest.approx(res.rows[5]["score"])
    res.plot(tmp_path / "search.png")
    import matplotlib.pyplot as plt

    image = plt.imread(tmp_path / "search.png")
    assert image.ndim == 3 and image.shape[0] > 400  # 200 dpi, several panels
    curve = res.best_so_far()
    assert curve[-1] == pytest.approx(res.best["score"])
    assert np.all(np.diff(curve) <= 0)  # NRMSE: the best so far only falls
    assert "12 candidates, 12 ok" in repr(res)
    # a panel per hyperparameter that varied, none for one that did not
    panels = {a.get_xlabel() for a in res.plot().axes if a.get_visible()}
    assert panels == {*SPACE, "beta", "candidates tried"}
    one = [r for r in res.rows if r["beta"] == res.rows[0]["beta"]]
    fixed_beta = type(res)(one, res.columns, False, None, res.metric, res.log_scaled)
    panels = {a.get_xlabel() for a in fixed_beta.plot().axes if a.get_visible()}
    assert panels == {*SPACE, "candidates tried"}
    # a log axis within a decade labels 1, 2, 3 and 5 times a power of ten
    # only (its other minor ticks crowd towards the decade's end)
    fig = res.plot()
    ax = next(a for a in fig.axes if a.get_xlabel() == "embedding_scaling")
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
    shown += [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    mantissas = [float(t) / 10 ** np.floor(np.log10(float(t))) for t in shown]
    assert shown and all(np.isclose(m, [1, 2, 3, 5]).any() for m in mantissas), shown
    plt.close("all")


def test_vpt_search_picks_the_longest_valid_time():
    task = _task("vpt", horizon=150)
    res = orc.tune.search(
        ESNForecaster, SPACE, task, fixed=FIXED, draws=2, seeds=1,
        beta=[1e-6], sampler="random", sampler_seed=3,
    )  # fmt: skip
    assert len(res.rows) == 2
    for row in res.rows:
        ref = _reference(task, row, list(SPACE))
        # a step of the threshold crossing is 0.01 * 0.906 Lyapunov times
        assert abs(row["score"] - ref) <= 0.00906 + 1e-9
    assert res.best["score"] == max(r["score"] for r in res.rows)


def test_diverging_candidates_fail_as_data_and_leave_the_others_alone():
    # an input scaling of 1e308 overflows the drive (inf - inf = NaN): two
    # such candidates planted between good ones in one batch (one program)
    space = SPACE
    task = _task()
    good = {"Wr_spectral_radius": 0.9, "leak_rate": 0.6, "bias": 0.5}
    points = [dict(good, embedding_scaling=s) for s in (0.1, 1e308, 0.2, 1e308)]
    points[2]["leak_rate"] = 0.9
    res = orc.tune.search(
        ESNForecaster, space, task, fixed=FIXED, points=points, seeds=2,
        beta=LogUniform(1e-8, 1e-2), ridge_points=3,  # nrmse_search's program
    )  # fmt: skip
    assert len(res.rows) == 2 * 4 * 3
    failed = [r for r in res.rows if r["status"] == "failed"]
    ok = [r for r in res.rows if r["status"] == "ok"]
    assert len(failed) == len(ok) == 12
    for row in failed:
        assert row["embedding_scaling"] == 1e308
        assert "not finite" in row["reason"]
        assert np.isnan(row["score"])
    # each good candidate alone (the same solver, one trajectory): the same
    # bits as in the batch with the overflowing ones
    for p in (points[0], points[2]):
        for seed in (0, 1):
            alone = orc.tune.search(
                ESNForecaster, space, task, fixed=FIXED, points=[p], seeds=[seed],
                beta=LogUniform(1e-8, 1e-2), ridge_points=3,
            )  # fmt: skip
            mine = [
                r for r in ok if r["seed"] == seed and r["leak_rate"] == p["leak_rate"]
            ]
            assert_batched([r["score"] for r in alone.rows], [r["score"] for r in mine])
    # and as their public-API runs
    for row in ok:
        ref = _reference(task, row, list(space))
        np.testing.assert_allclose(row["score"], ref, rtol=RTOL)
    assert res.best in ok


def test_static_hyperparameters_compile_one_program_per_value():
    # two draws, one of each value (a row of one draw per group: the
    # res_dim=40 group is the program of a candidate searched alone in
    # test_diverging_candidates_fail_as_data_and_leave_the_others_alone)
    space = dict(SPACE, res_dim=Choice([30, 40]))
    res = orc.tune.search(
        ESNForecaster, space, _task(), fixed={"data_dim": 3}, draws=2,
        beta=LogUniform(1e-8, 1e-2), ridge_points=3,
    )  # fmt: skip
    assert {r["res_dim"] for r in res.rows} == {30, 40}
    for row in res.rows:
        ref = _reference(_task(), row, list(space), fixed={"data_dim": 3})
        np.testing.assert_allclose(row["score"], ref, rtol=RTOL)
    assert res.best_model.res_dim == res.best["res_dim"]


@pytest.mark.parametrize(
    "seeds,draws,width,devices,grid",
    [
        (4, 8, 1, 1, (1, 8)),  # the benchmark's 4 x 8: a seed's draws per call
        (1, 16, 1, 1, (1, 8)),  # one seed: SHARED_DRAWS draws together
        (4, 64, 1, 1, (1, 32)),  # many draws: about eight calls
        (64, 1, 1, 1, (8, 1)),  # one draw of many seeds: seeds per call
        (2, 8, 1, 4, (4, 4)),  # a mesh: a row for each device
        (1, 4, 1, 4, (4, 1)),  # one seed on 4 devices: one draw each
        (4, 8, 16, 1, (2, 8)),  # side by side on an accelerator
    ],
)
def test_calls_hold_blocks_of_a_seeds_draws(seeds, draws, width, devices, grid):
    # a row of a call is one seed and a block of its draws, which share the
    # seed's matrices (built and scaled to their radius once, before the
    # loop over the draws); the bits do not depend on the layout (a solo run
    # of one candidate is a grid of one:
    # test_diverging_candidates_fail_as_data_and_leave_the_others_alone)
    from orc.tune._search import _grid

    rows, per_row = _grid(seeds, draws, width, devices)
    assert (rows, per_row) == grid
    assert rows % devices == 0 and 1 <= per_row <= draws


@CPU_ONLY
def test_a_seeds_matrices_are_built_once_for_its_draws():
    # the spectral radius of the seed's reservoir (Arnoldi, then the
    # eigenvalues of the small Hessenberg matrix: LAPACK's geev on a CPU) is
    # computed outside the loop over the seed's draws, which trains and
    # forecasts each draw (the native kernels; XLA hoists what is invariant)
    from orc._native import native_config
    from orc.tune import _population

    if not native_config()["available"]:
        pytest.skip("the loops are told apart by the native kernels' names")
    names = tuple(SPACE)
    v = jnp.asarray([[[0.9, 0.6, 0.1, 0.5]] * 4])  # one seed, four draws
    program = jax.jit(
        orc.capture_errors(
            lambda t, b, v, s: _population.evaluate.__wrapped__(
                ESNForecaster, FIXED, names, t, b, v, s, 1
            )
        )
    )
    with orc.use_backend("native"):
        hlo = program.lower(
            _task(), jnp.asarray([1e-8, 1e-4]), v, jnp.asarray([0], jnp.int32)
        )
        hlo = hlo.compile().as_text()
    assert "lapack_dgeev" in hlo
    loops = hlo_loops(hlo)
    draws = [c for c in loops.values() if "orc_esn_forecast_batch" in hlo_text(c)]
    assert draws, "no loop over the draws"
    for comps in draws:
        assert "orc_esn_run" in hlo_text(comps)
        assert "lapack_dgeev" not in hlo_text(comps)


def test_distributions_map_the_unit_interval():
    np.testing.assert_allclose(Uniform(2.0, 4.0).from_unit([0, 0.5]), [2.0, 3.0])
    np.testing.assert_allclose(LogUniform(1e-4, 1.0).from_unit([0, 0.5]), [1e-4, 1e-2])
    assert IntUniform(3, 5).from_unit([0.0, 0.34, 0.999]) == [3, 4, 5]
    assert Choice(["a", "b"]).from_unit([0.2, 0.7]) == ["a", "b"]
    np.testing.assert_allclose(LogUniform(1e-6, 1e-2).grid(3), [1e-6, 1e-4, 1e-2])


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: Uniform(1.0, 1.0), ValueError, "low must be < high"),
        (lambda: LogUniform(0.0, 1.0), ValueError, "0 < low < high"),
        (lambda: IntUniform(1.5, 3), TypeError, "low must be an int"),
        (lambda: Choice([]), ValueError, "must not be empty"),
        (lambda: Forecast(TRAIN, VAL[:50]), ValueError, r"warmup \+ horizon"),
        (lambda: Forecast(TRAIN, VAL[:, :2]), ValueError, "3 columns"),
        (lambda: Forecast(TRAIN, VAL, metric="mse"), ValueError, "metric"),
    ],
)
def test_bad_spaces_and_tasks_are_refused(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"seeds": 0}, ValueError, "seeds must be >= 1"),
        ({"draws": 0}, ValueError, "draws must be an int >= 1"),
        ({"beta": [-1.0]}, ValueError, "beta must be finite strengths >= 0"),
        ({"beta": Uniform(0, 1)}, TypeError, "LogUniform"),
        ({"sampler": "grid"}, ValueError, "sampler must be one of"),
        ({"fixed": {"data_dim": 3, "seed": 1}}, ValueError, "must not set 'seed'"),
        ({"points": [{"bias": 1.0}]}, ValueError, "points.0. must give exactly"),
    ],
)
def test_bad_search_arguments_are_refused(kwargs, error, words):
    args = {"fixed": FIXED, **kwargs}
    with pytest.raises(error, match=words):
        orc.tune.search(ESNForecaster, SPACE, _task(), **args)


def test_a_structural_hyperparameter_cannot_be_traced():
    # the candidate given is the default density's (whose reservoir program
    # the searches above compiled); a drawn one is refused the same way
    with pytest.raises(ValueError, match="Choice"):
        orc.tune.search(
            ESNForecaster, {"Wr_density": Uniform(0.01, 0.1)}, _task(), fixed=FIXED,
            points=[{"Wr_density": 0.02}],
        )  # fmt: skip


def test_not_a_forecaster_class_is_refused():
    with pytest.raises(TypeError, match="model_class"):
        orc.tune.search(orc.classifier.ESNClassifier, SPACE, _task())
    with pytest.raises(TypeError, match="task"):
        orc.tune.search(ESNForecaster, SPACE, (TRAIN, VAL))


def test_float32_models_search_too():
    if jax.config.jax_enable_x64:
        fixed = dict(FIXED, dtype=jnp.float32)
    else:
        fixed = FIXED
    res = orc.tune.search(
        ESNForecaster, SPACE, _task(), fixed=fixed, draws=1, beta=[1e-4],
    )  # fmt: skip
    assert res.rows[0]["status"] == "ok" and np.isfinite(res.rows[0]["score"])
