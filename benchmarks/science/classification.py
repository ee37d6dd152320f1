"""Time-series classification: orc's ESNClassifier representations against
aeon's MiniRocket on the UCR/UEA sets that aeon's wheel ships.

Run (from the repository root, in the benchmark's own environment; see
``benchmarks/science/README.md``)::

    benchmarks/.venvs/science/bin/python benchmarks/science/classification.py

It writes ``benchmarks/science/CLASSIFICATION.md`` (tables) and
``benchmarks/science/CLASSIFICATION.json`` (every number, the chosen
hyperparameters and the environment). Nothing is downloaded: a set that the
installed aeon does not ship is reported as skipped.

Protocol
--------
* Data: ``aeon.datasets.load_classification(name, split="train"/"test")``,
  the published train/test split. Each channel is z-normalised with the mean
  and standard deviation of the training split (one pair per channel, from
  the training values only). PickupGestureWiimoteZ has series of 29 to 361
  samples: every series (train and test) is linearly resampled, on its own,
  to the longest training length, and both classifiers see the same
  resampled arrays (the ESN's representations assume one length per batch;
  zero-padding would feed the reservoir a fake constant tail).
* orc: ``ESNClassifier(res_dim=RES_DIM)`` for each ``state_repr``, ORC's
  other defaults (bias 1.6, spectral radius 0.8, density 0.02, seed 0),
  ``spinup = seq_len // 10``. ``leak_rate``, ``embedding_scaling`` and the
  readout's ridge ``beta`` are chosen by stratified 3-fold cross-validation
  on the training split only (grid below); the features of each (leak,
  scaling) are computed once and the folds' ridge fits reuse their Gram
  matrix (the readout's ridge in its dual form, the same estimator as
  ``train_RCClassifier``'s). The chosen triple is then fitted on the whole
  training split with ``train_RCClassifier`` and scored once on the test
  split.
  "default" is the untuned ORC configuration: ``state_repr="final"``,
  ``embedding_scaling=0.08``, ``beta=8e-8``, no spinup.
* "orc.sklearn": the scikit-learn estimator ``orc.sklearn.ESNClassifier(
  res_dim=RES_DIM, seed=S)`` as it comes, untuned: its defaults are the
  "bi_ppv_lags" recipe with ``leak_rate=0.1``, ``embedding_scaling=0.4``
  (``orc._defaults.ESTIMATOR_CLASSIFIER``); one ``fit``, compilation
  included.
* orc "bi_ppv_lags" (the recipe of ``ESNClassifier``'s docstring) and
  "bi_ppv_diff" (the previous one, without lags):
  ``state_repr="bi_ppv"``, ``input_lags=(4, 16)`` (the series' differences
  over 4 and 16 steps as extra channels) or none, ``input_differences=True``
  (the first differences of every channel), ``Wr_density=0.1``,
  ``Wr_spectral_radius=0.9``, same spinup and the same (leak, scaling)
  grid chosen by the same 3-fold CV; ``beta`` is not a grid axis: every
  fit (each fold's and the final one) picks it from ``LOO_BETAS`` by exact
  leave-one-out (``orc.classifier.loo_ridge``; the final fit is
  ``train_RCClassifier`` with the ``beta`` sequence). The fitted input
  parameters (difference scale, PPV thresholds; no labels involved) come
  from the whole training split (``orc.classifier.fit_features``), once per
  (leak, scaling), and the folds reuse them.
* MiniRocket: ``aeon.classification.convolution_based.MiniRocketClassifier``
  with its defaults (10,000 kernels, ``RidgeClassifierCV`` over its own
  alpha grid), ``random_state=0``, ``n_jobs=2``. ``--seed S`` sets the orc
  models' reservoir seed and MiniRocket's ``random_state`` to ``S``
  (default 0); the folds stay the same.
* Times are wall-clock seconds on this machine. "fit" for orc includes the
  cross-validation (selection) and the final fit, compilation included;
  MiniRocket's includes its internal ridge cross-validation.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import orc  # noqa: E402
from orc.classifier import (  # noqa: E402
    ESNClassifier,
    fit_features,
    loo_ridge,
    train_RCClassifier,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.report import md_table  # noqa: E402

SETS = (
    "BasicMotions",
    "GunPoint",
    "ArrowHead",
    "ItalyPowerDemand",
    "OSULeaf",
    "ACSF1",
    "PickupGestureWiimoteZ",
)
REPRS = (
    "final",
    "mean",
    "stats",
    "model_space",
    "bi_final",
    "bi_mean",
    "bi_stats",
    "bi_model_space",
)
RES_DIM = 500
SCALINGS = (0.1, 0.4, 1.6)
LEAKS = (0.1, 0.6)
BETAS = (1e-6, 1e-4, 1e-2, 1.0)
FOLDS = 3
SEED = 0  # --seed: the orc models' reservoir seed, MiniRocket's random_state
# the recipes: name -> the input_differences they give ESNClassifier
RECIPES = {"bi_ppv_diff": (), "bi_ppv_lags": (4, 16)}
# name -> input_lags; both recipes also take input_differences=True
LOO_BETAS = tuple(np.logspace(-3, 3, 10))


def load(name: str):
    """``(X_train, y_train, X_test, y_test, note)``; ``X`` ``(n, seq_len, dim)``
    float64, z-normalised per channel with the training statistics; ``y``
    integer labels ``0 .. n_classes-1``. ``None`` if aeon does not ship the set."""
    import aeon
    from aeon.datasets import load_classification

    shipped = Path(aeon.__file__).parent / "datasets" / "data" / name
    if not shipped.is_dir():
        return None
    xtr, ytr = load_classification(name, split="train")
    xte, yte = load_classification(name, split="test")
    note = ""
    if isinstance(xtr, list) or isinstance(xte, list):
        length = max(x.shape[-1] for x in xtr)
        lengths = [x.shape[-1] for x in list(xtr) + list(xte)]
        note = (
            f"unequal lengths {min(lengths)}-{max(lengths)}: each series linearly "
            f"resampled to {length}"
        )
        xtr, xte = _resample(xtr, length), _resample(xte, length)
    xtr = np.transpose(np.asarray(xtr, np.float64), (0, 2, 1))
    xte = np.transpose(np.asarray(xte, np.float64), (0, 2, 1))
    mean = xtr.mean(axis=(0, 1))
    std = xtr.std(axis=(0, 1))
    std = np.where(std > 0, std, 1.0)
    classes = np.unique(ytr)
    return (
        (xtr - mean) / std,
        np.searchsorted(classes, ytr),
        (xte - mean) / std,
        np.searchsorted(classes, yte),
        note,
    )


def _resample(series, length: int) -> np.ndarray:
    """Each ``(dim, seq_len_i)`` series linearly interpolated to ``length`` samples."""
    grid = np.linspace(0.0, 1.0, length)
    out = []
    for x in series:
        x = np.asarray(x, np.float64)
        old = np.linspace(0.0, 1.0, x.shape[-1])
        out.append(np.stack([np.interp(grid, old, row) for row in x]))
    return np.stack(out)


@eqx.filter_jit
def _features(model, seqs, spinup):
    return jax.vmap(lambda s: model.features(s, None, spinup))(seqs)


@eqx.filter_jit
def _predict(model, seqs, spinup):
    return jnp.argmax(jax.vmap(lambda s: model.classify(s, None, spinup))(seqs), 1)


def _folds(labels: np.ndarray, n_folds: int) -> list[np.ndarray]:
    """Stratified folds (validation indices), deterministic."""
    from sklearn.model_selection import StratifiedKFold

    n_folds = max(2, min(n_folds, np.bincount(labels).min()))
    split = StratifiedKFold(n_folds, shuffle=True, random_state=0)
    return [val for _, val in split.split(np.zeros(len(labels)), labels)]


def _cv_accuracy(gram, one_hot, labels, folds, beta) -> float:
    """Mean validation accuracy of the no-intercept ridge readout
    ``W = Y^T (F F^T + beta I)^{-1} F`` (the dual of ``(F^T F + beta I)^{-1} F^T Y``)."""
    accs = []
    for val in folds:
        fit = np.setdiff1d(np.arange(len(labels)), val)
        k = gram[np.ix_(fit, fit)] + beta * np.eye(len(fit))
        alpha = np.linalg.solve(k, one_hot[fit])
        scores = gram[np.ix_(val, fit)] @ alpha
        accs.append(np.mean(np.argmax(scores, 1) == labels[val]))
    return float(np.mean(accs))


def _grid_select(data, build, scores):
    """Cross-validated choice over ``LEAKS`` x ``SCALINGS`` on the training split.

    ``build(leak, scaling)`` gives the model (its fitted inputs, if any, are
    fitted to the training split with ``fit_features``); ``scores(feats,
    one_hot, folds)`` yields ``(cv_accuracy, choice)`` pairs for its features
    (e.g. one per ridge ``beta``). The first best wins. Returns ``(t_select,
    cv_accuracy, leak, scaling, model, choice, spinup)``.
    """
    xtr, ytr, _, _, _ = data
    n_classes = int(ytr.max()) + 1
    spinup = xtr.shape[1] // 10
    xtr_j = jnp.asarray(xtr)
    t0 = time.perf_counter()
    folds = _folds(ytr, FOLDS)
    one_hot = np.eye(n_classes)[ytr]
    best = (-1.0, None, None, None, None)
    for leak in LEAKS:
        for scaling in SCALINGS:
            model = fit_features(build(leak, scaling), xtr_j, spinup)
            feats = np.asarray(_features(model, xtr_j, spinup))
            for acc, choice in scores(feats, one_hot, folds):
                if acc > best[0]:
                    best = (acc, leak, scaling, model, choice)
    cv_acc, leak, scaling, model, choice = best
    return time.perf_counter() - t0, cv_acc, leak, scaling, model, choice, spinup


def run_orc(data, state_repr: str, res_dim: int) -> dict:
    xtr, ytr, _, _, _ = data
    dim, n_classes = xtr.shape[2], int(ytr.max()) + 1

    def build(leak, scaling):
        return ESNClassifier(
            dim, n_classes, res_dim, leak, state_repr=state_repr,
            embedding_scaling=scaling, seed=SEED,
        )  # fmt: skip

    def scores(feats, one_hot, folds):
        gram = feats @ feats.T
        for beta in BETAS:
            yield _cv_accuracy(gram, one_hot, ytr, folds, beta), beta

    t_select, cv_acc, leak, scaling, _, beta, spinup = _grid_select(data, build, scores)
    model = build(leak, scaling)
    return _final_fit(data, model, beta, spinup, t_select, cv_acc, leak, scaling)


def _final_fit(data, model, beta, spinup, t_select, cv_acc, leak, scaling) -> dict:
    """Fit the selected configuration on the whole training split, score it
    once on the test split, and report (``beta`` a value or the LOO grid)."""
    xtr, ytr, xte, yte, _ = data
    t1 = time.perf_counter()
    trained = train_RCClassifier(
        model, jnp.asarray(xtr), jnp.asarray(ytr), spinup=spinup, beta=beta
    )
    jax.block_until_ready(trained.readout.wout)
    t_fit = time.perf_counter() - t1
    t2 = time.perf_counter()
    pred = np.asarray(_predict(trained, jnp.asarray(xte), spinup))
    t_pred = time.perf_counter() - t2
    chosen = beta if trained.selected_beta is None else float(trained.selected_beta)
    return {
        "accuracy": float(np.mean(pred == yte)),
        "fit_s": t_select + t_fit,
        "select_s": t_select,
        "final_fit_s": t_fit,
        "predict_s": t_pred,
        "cv_accuracy": cv_acc,
        "leak_rate": leak,
        "embedding_scaling": scaling,
        "beta": chosen,
        "spinup": spinup,
        "feature_dim": trained.feature_dim,
    }


def _recipe(dim, n_classes, res_dim, leak, scaling, lags=()):
    return ESNClassifier(
        dim,
        n_classes,
        res_dim,
        leak,
        state_repr="bi_ppv",
        input_differences=True,
        input_lags=lags,
        seed=SEED,
        embedding_scaling=scaling,
        Wr_density=0.1,
        Wr_spectral_radius=0.9,
    )


def run_recipe(data, res_dim: int, name: str = "bi_ppv_diff") -> dict:
    """A recipe's column (``RECIPES``): see the protocol."""
    xtr, ytr, _, _, _ = data
    dim, n_classes = xtr.shape[2], int(ytr.max()) + 1
    betas = np.asarray(LOO_BETAS)

    def scores(feats, one_hot, folds):
        accs = []
        for val in folds:
            fit = np.setdiff1d(np.arange(len(ytr)), val)
            w, _, _ = loo_ridge(feats[fit], one_hot[fit], betas)
            pred = np.argmax(feats[val] @ np.asarray(w).T, 1)
            accs.append(np.mean(pred == ytr[val]))
        yield float(np.mean(accs)), None

    def build(leak, scaling):
        return _recipe(dim, n_classes, res_dim, leak, scaling, RECIPES[name])

    t_select, cv_acc, leak, scaling, _, _, spinup = _grid_select(data, build, scores)
    model = build(leak, scaling)  # unfitted: train_RCClassifier fits its inputs
    return _final_fit(data, model, betas, spinup, t_select, cv_acc, leak, scaling)


def run_orc_default(data, res_dim: int) -> dict:
    xtr, ytr, xte, yte, _ = data
    model = ESNClassifier(xtr.shape[2], int(ytr.max()) + 1, res_dim, seed=SEED)
    t0 = time.perf_counter()
    trained = train_RCClassifier(model, jnp.asarray(xtr), jnp.asarray(ytr))
    jax.block_until_ready(trained.readout.wout)
    t_fit = time.perf_counter() - t0
    pred = np.asarray(_predict(trained, jnp.asarray(xte), 0))
    return {"accuracy": float(np.mean(pred == yte)), "fit_s": t_fit}


def run_estimator(data, res_dim: int) -> dict:
    from orc.sklearn import ESNClassifier as Estimator

    xtr, ytr, xte, yte, _ = data
    clf = Estimator(res_dim=res_dim, seed=SEED, channels_last=True)
    t0 = time.perf_counter()
    clf.fit(xtr, ytr)
    t_fit = time.perf_counter() - t0
    return {"accuracy": float(np.mean(clf.predict(xte) == yte)), "fit_s": t_fit}


def run_minirocket(data) -> dict:
    from aeon.classification.convolution_based import MiniRocketClassifier

    xtr, ytr, xte, yte, _ = data
    clf = MiniRocketClassifier(random_state=SEED, n_jobs=2)
    t0 = time.perf_counter()
    clf.fit(np.transpose(xtr, (0, 2, 1)), ytr)
    t_fit = time.perf_counter() - t0
    pred = clf.predict(np.transpose(xte, (0, 2, 1)))
    return {"accuracy": float(np.mean(pred == yte)), "fit_s": t_fit}


def markdown(results: dict, methods: list[str], skipped: dict, setup: str) -> str:
    sets = list(results)
    reprs = [m for m in methods if m in REPRS or m in RECIPES]

    def table(metric, fmt, total_name, total):
        rows = [
            [name, *(fmt.format(results[name][m][metric]) for m in methods)]
            for name in sets
        ]
        totals = [total([results[s][m][metric] for s in sets]) for m in methods]
        rows.append([f"**{total_name}**", *(f"**{fmt.format(v)}**" for v in totals)])
        return md_table(["set", *methods], rows)

    def chosen(r):
        return (
            f"{r['leak_rate']:g} / {r['embedding_scaling']:g} / {r['beta']:g} "
            f"({r['cv_accuracy']:.2f})"
        )

    lines = [
        "# Classification: orc ESNClassifier vs aeon MiniRocket",
        "",
        "Written by `benchmarks/science/classification.py` (protocol in its "
        "docstring). " + setup,
        "",
        "## Test accuracy",
        "",
        table("accuracy", "{:.3f}", "mean", np.mean),
        "",
        "## Fit time (s)",
        "",
        "orc: cross-validated selection of `leak_rate`, `embedding_scaling` and "
        "`beta` plus "
        "the final fit, compilation included; MiniRocket: `fit` (its ridge "
        'cross-validation included); "default" (ORC 0.4\'s defaults) and '
        '"orc.sklearn" (the estimator\'s): one untuned fit. '
        "`bi_ppv_diff`: `bi_ppv` + `input_differences=True` + leave-one-out "
        "`beta` (density 0.1, spectral radius 0.9; see the protocol); "
        "`bi_ppv_lags`: the same with `input_lags=(4, 16)`.",
        "",
        table("fit_s", "{:.1f}", "total", sum),
        "",
        "## Chosen hyperparameters (cross-validation on the training split)",
        "",
        "`leak_rate` / `embedding_scaling` / `beta` (CV accuracy; for "
        "the recipes the leave-one-out `beta` of the final fit)",
        "",
        md_table(
            ["set", *reprs],
            [[name, *(chosen(results[name][m]) for m in reprs)] for name in sets],
        ),
    ]
    notes = [f"- {s}: {results[s]['note']}" for s in sets if results[s].get("note")]
    notes += [f"- {s}: skipped ({why})" for s, why in skipped.items()]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="*", default=list(SETS))
    parser.add_argument("--reprs", nargs="*", default=[*REPRS, *RECIPES])
    parser.add_argument("--res-dim", type=int, default=RES_DIM)
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="reservoir seed of every orc model and MiniRocket's random_state",
    )
    parser.add_argument("--out", default=str(HERE / "CLASSIFICATION.md"))
    args = parser.parse_args()
    global SEED
    SEED = args.seed
    import aeon

    start = time.perf_counter()
    results, skipped = {}, {}
    for name in args.sets:
        data = load(name)
        if data is None:
            skipped[name] = f"not shipped in aeon {aeon.__version__}'s wheel"
            print(f"{name}: {skipped[name]}", flush=True)
            continue
        xtr, ytr, xte, _, note = data
        print(
            f"{name}: train {xtr.shape}, test {xte.shape[0]}, "
            f"{int(ytr.max()) + 1} classes",
            flush=True,
        )
        row = {"note": note, "minirocket": run_minirocket(data)}
        row["default"] = run_orc_default(data, args.res_dim)
        row["orc.sklearn"] = run_estimator(data, args.res_dim)
        for state_repr in args.reprs:
            if state_repr in RECIPES:
                row[state_repr] = run_recipe(data, args.res_dim, state_repr)
            else:
                row[state_repr] = run_orc(data, state_repr, args.res_dim)
        for method, r in row.items():
            if method != "note":
                print(f"  {method:15s} acc {r['accuracy']:.3f}  fit {r['fit_s']:.1f}s")
        results[name] = row
    total = time.perf_counter() - start
    methods = ["minirocket", "default", "orc.sklearn", *args.reprs]
    setup = (
        f"ESN res_dim={args.res_dim}; grid leak_rate {list(LEAKS)} x "
        f"embedding_scaling {list(SCALINGS)} x "
        f"beta {list(BETAS)}, {FOLDS}-fold CV on train (recipes: beta by "
        f"leave-one-out from logspace(-3, 3, 10)). aeon {aeon.__version__}, "
        f"seed {args.seed}, orc {orc.__version__}, jax {jax.__version__}, "
        f"{platform.processor() or platform.machine()}, "
        f"{__import__('os').cpu_count()} CPUs; whole run {total / 60:.1f} min."
    )
    Path(args.out).write_text(markdown(results, methods, skipped, setup))
    Path(args.out).with_suffix(".json").write_text(
        json.dumps({"setup": setup, "results": results, "skipped": skipped}, indent=1)
    )
    print(f"wrote {args.out} ({total / 60:.1f} min)")


if __name__ == "__main__":
    main()
