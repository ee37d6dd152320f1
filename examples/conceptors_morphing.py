"""Conceptors: four patterns in one reservoir, recalled and morphed (Jaeger 2014).

Jaeger's first demonstration ("Controlling Recurrent Neural Networks by
Conceptors", arXiv:1403.3369, Figures 1 and 2): a 100-unit reservoir is
driven by two sines (periods 8.83 and 9.83) and two period-5 sequences;
``orc.conceptors.load_patterns`` keeps a conceptor per pattern and folds the
input into the recurrent weights, so the reservoir runs without input. Under
one pattern's conceptor it regenerates that pattern; under a mix of the four
(``net.morph``) it generates patterns in between (inside the square) and
beyond them (outside).

    python examples/conceptors_morphing.py

Environment: ``ORC_EXAMPLE_SMALL=1`` runs a smaller grid (used by the
tests); ``ORC_EXAMPLE_OUT`` is the folder for figures (default
``examples/output/``).
"""

import os
from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np

import orc

jax.config.update("jax_enable_x64", True)

SMALL = os.environ.get("ORC_EXAMPLE_SMALL") == "1"
OUT = Path(os.environ.get("ORC_EXAMPLE_OUT", Path(__file__).parent / "output"))
OUT.mkdir(parents=True, exist_ok=True)

# the four driving patterns, n = 1 .. 1500 (Jaeger's Figure 1)
n = np.arange(1, 1501)
rand5 = np.array([0.16, 0.9, -0.9, -0.21, -0.55])
perturb5 = np.array([0.10, 0.9, -0.9, -0.65, -0.54])
patterns = np.stack(
    [
        np.sin(2 * np.pi * n / 8.8342522),
        np.sin(2 * np.pi * n / 9.8342522),
        rand5[n % 5],
        perturb5[n % 5],
    ]
)[..., None]  # (4 patterns, 1500 samples, 1 feature)

# Jaeger's reservoir: 100 units, no leak, spectral radius 1.5, input scaling
# 1.5, bias 0.2; its readout is not used (load_patterns trains its own)
esn = orc.forecaster.ESNForecaster(
    data_dim=1,
    res_dim=100,
    leak_rate=1.0,
    bias=0.2,
    embedding_scaling=1.5,
    Wr_spectral_radius=1.5,
    Wr_density=0.1,
    seed=0,
)
net = orc.conceptors.load_patterns(esn, patterns, names=["s1", "s2", "r3", "r4"])

# recall: each pattern from the reservoir alone
x0 = 0.5 * np.random.default_rng(4).random(100)
for name in net.names:
    y = np.asarray(net.generate(500, name, x0, washout=200))[:, 0]
    print(f"{name}: quota {float(orc.conceptors.quota(net.conceptor(name))):.3f}, "
          f"output range [{y.min():+.2f}, {y.max():+.2f}]")  # fmt: skip
C1, C2 = net.conceptor("s1"), net.conceptor("s2")
both = float(orc.conceptors.quota(orc.conceptors.conceptor_and(C1, C2)))
either = float(orc.conceptors.quota(orc.conceptors.conceptor_or(C1, C2)))
print(f"quota of s1 AND s2: {both:.3f}, of s1 OR s2: {either:.3f}")

# the morphing square
grid = np.linspace(-0.5, 1.5, 5 if SMALL else 9)


def morphed(a, b):
    """15 steps under the mix ((1 - a) b, a b, (1 - a)(1 - b), a (1 - b))."""
    mu = [(1 - a) * b, a * b, (1 - a) * (1 - b), a * (1 - b)]
    return np.asarray(net.generate(15, net.morph(mu), x0, washout=190))[:, 0]


runs = {(a, b): morphed(a, b) for a in grid for b in grid}
top = max(np.abs(y).max() for y in runs.values())
print(f"largest output over the square: {top:.2f}")
fig, axes = plt.subplots(
    len(grid), len(grid), figsize=(10, 10), sharex=True, sharey=True
)
for i, b in enumerate(grid[::-1]):  # b = 1.5 on top
    for j, a in enumerate(grid):
        ax = axes[i, j]
        prototype = a in (0.0, 1.0) and b in (0.0, 1.0)
        ax.plot(runs[a, b], color="k", lw=2.2 if prototype else 1.0)
        ax.set_ylim(-1.05 * top, 1.05 * top)
        ax.set_xticks([])
        ax.set_yticks([])
        if prototype:
            ax.set_facecolor("0.88")
        if i == len(grid) - 1:
            ax.set_xlabel(f"a = {a:g}")
        if j == 0:
            ax.set_ylabel(f"b = {b:g}")
fig.suptitle(
    "Morphing four loaded patterns with conceptors (shaded: the patterns themselves;\n"
    "sines on top, period-5 sequences below; outside the square: extrapolation)"
)
fig.tight_layout()
fig.savefig(OUT / "conceptors_morphing.png", dpi=90)
print(f"figure: {OUT / 'conceptors_morphing.png'}")
