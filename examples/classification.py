"""Classify noisy waveforms with an echo state network.

Three classes of one-dimensional signals, sine, square and sawtooth waves, each
with a random frequency, phase and amplitude plus Gaussian noise. An
``ESNClassifier`` summarises each sequence by a reservoir feature (the final
state, or the mean state after a spin-up) and a ridge readout maps it to class
probabilities. Both summaries are trained and compared on held-out sequences.

    python examples/classification.py

Environment: ``ORC_EXAMPLE_SMALL=1`` runs a small, fast version (used by the
tests); ``ORC_EXAMPLE_OUT`` is the folder for figures (default
``examples/output/``).
"""

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import orc

jax.config.update("jax_enable_x64", True)

SMALL = os.environ.get("ORC_EXAMPLE_SMALL") == "1"
OUT = Path(os.environ.get("ORC_EXAMPLE_OUT", Path(__file__).parent / "output"))
OUT.mkdir(parents=True, exist_ok=True)

CLASSES = ["sine", "square", "sawtooth"]
SEQ_LEN = 120
N_TRAIN = 60 if SMALL else 300
N_TEST = 60 if SMALL else 600
RES_DIM = 100 if SMALL else 400
NOISE = 0.3


def waveforms(n, rng):
    """``n`` labelled sequences ``(n, SEQ_LEN, 1)`` and their labels ``(n,)``."""
    labels = rng.integers(0, len(CLASSES), size=n)
    t = np.arange(SEQ_LEN)
    freq = rng.uniform(0.02, 0.08, size=(n, 1))  # cycles per step
    phase = rng.uniform(0, 1, size=(n, 1))
    amp = rng.uniform(0.5, 1.5, size=(n, 1))
    cycle = (freq * t + phase) % 1.0  # position within the period, in [0, 1)
    waves = np.stack(
        [
            np.sin(2 * np.pi * cycle),
            np.where(cycle < 0.5, 1.0, -1.0),
            2 * cycle - 1,
        ]
    )  # (3, n, SEQ_LEN)
    x = amp * waves[labels, np.arange(n)] + NOISE * rng.standard_normal((n, SEQ_LEN))
    return jnp.asarray(x[..., None]), jnp.asarray(labels)


rng = np.random.default_rng(0)
X_train, y_train = waveforms(N_TRAIN, rng)
X_test, y_test = waveforms(N_TEST, rng)
print(f"data: {N_TRAIN} training and {N_TEST} test sequences of {SEQ_LEN} steps")

results = {}
for state_repr in ("final", "mean"):
    clf = orc.classifier.ESNClassifier(
        data_dim=1,
        n_classes=len(CLASSES),
        res_dim=RES_DIM,
        embedding_scaling=0.5,
        state_repr=state_repr,
        seed=0,
    )
    clf = orc.classifier.train_RCClassifier(clf, X_train, y_train, spinup=20, beta=1e-6)
    # classify() takes one sequence; vmap maps it over the test set.
    probs = jax.vmap(lambda x, c=clf: c.classify(x, spinup=20))(X_test)  # (N_TEST, 3)
    pred = jnp.argmax(probs, axis=1)
    accuracy = float(jnp.mean(pred == y_test))
    results[state_repr] = (accuracy, pred)
    print(f"state_repr={state_repr!r:8} test accuracy {accuracy:.1%}")

best = max(results, key=lambda k: results[k][0])
accuracy, pred = results[best]
C = orc.utils.visualization.confusion_matrix(y_test, pred, n_classes=len(CLASSES))
print("confusion matrix (rows: true class, columns: predicted):")
for name, row in zip(CLASSES, C, strict=True):
    print(f"  {name:9} {row}")

fig, axes = plt.subplots(1, 3, figsize=(12, 2.6), sharey=True, layout="constrained")
for k, ax in enumerate(axes):
    i = int(np.flatnonzero(np.asarray(y_train) == k)[0])
    ax.plot(np.asarray(X_train[i, :, 0]), lw=1)
    ax.set_title(f"class {k}: {CLASSES[k]}")
    ax.set_xlabel("step")
fig.savefig(OUT / "classification_samples.png", dpi=100)
plt.close(fig)

fig = orc.utils.visualization.plot_confusion_matrix(
    y_test,
    pred,
    n_classes=len(CLASSES),
    class_names=CLASSES,
    normalize=True,
    title=f"ESNClassifier (state_repr={best!r}), test accuracy {accuracy:.1%}",
)
fig.savefig(OUT / "classification_confusion.png", dpi=100)
plt.close(fig)
print(f"figures in {OUT}")
