"""The hyperparameters of orc's model families and their defaults, each written once.

ORC 0.4 users call the models and components by position as well as by name,
so every constructor spells ORC's signature out (names, order, defaults,
keyword-only markers) and takes each default from here: ``leak_rate: float =
ESN.leak_rate`` in :class:`orc.forecaster.ESNForecaster`'s signature.

The ``orc`` command's options (and so its config-file keys), the scikit-learn
estimators and the API pages (``docs/hooks/griffe_signatures.py``) take them
from here too. Defaults are ORC 0.4's unless a comment says otherwise. This
module imports nothing (the ``orc`` command reads it before JAX is imported),
so the one default it cannot hold, ``dtype=jax.numpy.float64``, is written in
the signatures.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ESN",
    "CLASSIFIER",
    "CONTROLLER",
    "REGRESSOR",
    "ESTIMATOR_CLASSIFIER",
    "NVAR",
    "SCORING",
    "NUMERICS",
    "TUNE",
    "PLASTICITY",
    "MATRICES",
    "CONCEPTORS",
]


def arguments(frame_locals: dict, *leave: str) -> dict:
    """The arguments a written-out signature received, by name, to hand on.

    Call as ``arguments(locals())`` in the first statement of the function
    (before it binds any other name): the signature stays the one place
    where the parameters are written, and handing them on does not spell
    each one again. ``self``, ``cls`` (and ``__class__``, which a function
    using ``super()`` holds) are left out, as are the names in ``leave``.
    """
    drop = {"self", "cls", "__class__", *leave}
    return {name: value for name, value in frame_locals.items() if name not in drop}


@dataclass(frozen=True)
class ESNDefaults:
    """Echo state networks: the models' hyperparameters under the models'
    names; the components take the same values under ORC's component names
    (``leak``, ``spectral_radius``, ``density``, ``scaling``)."""

    leak_rate: float = 0.6
    bias: float = 1.6
    embedding_scaling: float = 0.08
    Wr_density: float = 0.02
    Wr_spectral_radius: float = 0.8
    seed: int = 0
    chunks: int = 1
    locality: int = 0
    quadratic: bool = False
    periodic: bool = True
    use_sparse_eigs: bool = True
    construction: str = "orc"  # ours: how the random matrices are drawn
    # the drivers' time mode and continuous-time rate (CESNForecaster's is
    # "auto", which keeps this one wherever it suits the sampling)
    mode: str = "discrete"
    time_const: float = 50.0
    # members of ORC's EnsembleLinearEmbedding and EnsembleLinearReadout
    ensemble_chunks: int = 5
    # ours: deep (stacked) reservoirs
    n_layers: int = 2
    coupling_scaling: float = 0.2
    # ours: the edge-of-stability driver's share of the nonlinear update
    # (orc.drivers.ES2NDriver). Measured with the other defaults: at 0.1 a
    # 20-node reservoir's memory capacity is ~18 (ESN ~2.4) but 300 nodes
    # forecast Lorenz63 for under a Lyapunov time; at 0.5 memory ~7 and
    # Lorenz63 ~7 Lyapunov times (ESN 7-9)
    proximity: float = 0.5
    # ours: the multiple-activation driver's functions (orc.drivers.MRNNDriver),
    # ReservoirComputing.jl's MRNN default
    activations: tuple[str, ...] = ("tanh", "sigmoid")
    # ours: the Euler state network's step, diffusion and recurrent matrix's
    # spectral radius (orc.drivers.EuSNDriver). Of steps 0.01-1, diffusions
    # 0.01-0.5, radii 0.1-1 and input scalings 0.1 and 1, these gave 50 nodes
    # the highest memory capacity: 13.0, 13.9, 5.7 for seeds 0-2 (with the bias
    # 0, 0.5 or 1.6 alike), the ESN at orc's defaults 2.8, 4.0, 1.3
    step_size: float = 1.0
    diffusion: float = 0.1
    euler_spectral_radius: float = 0.1
    # ours: the residual ESN's skip and nonlinear weights (orc.drivers.ResESNDriver).
    # Of (0.9, 0.1), (0.7, 0.5), (0.5, 0.5), (0.3, 0.7), (1, 0.1): memory of 50
    # nodes 14.9 (ESN 2.8) and Lorenz63 5.0 and 8.8 Lyapunov times at 300
    # nodes (ESN 8.8, 11.6); (0.9, 0.1) remembers 29.5 but forecasts 1.3.
    # The skip map is ReservoirComputing.jl's default
    residual_alpha: float = 0.7
    residual_beta: float = 0.5
    residual_map: str = "random"
    # ours: the reservoir memory network's ring weight and the bound of its
    # coupling into the nonlinear part (orc.drivers.RMNDriver). Of weights
    # 0.8-1 and couplings 0.05-1: memory capacity of 50 nodes (25 memory)
    # 26.1, 25.5 (seeds 0, 1; ESN 2.8, 4.0) and Lorenz63 7.2, 10.1 Lyapunov
    # times at 300 (100 memory; ESN 8.6, 8.6). Weight 1 (the paper's) never
    # forgets: capacity 0.6, no forecast; 0.99 forecasts under a Lyapunov
    # time; stronger couplings forecast for less (0.5: 1.6-3.1)
    memory_weight: float = 0.9
    memory_coupling: float = 0.05
    # the excitatory-inhibitory ESN's recurrence scales (ReservoirComputing.jl's
    # EIESN defaults; orc.drivers.EIESNDriver, whose excitatory bias is the
    # ESN's bias and inhibitory bias 0). Of biases 0-1.6 and -0.5-0, radii 0.6,
    # 0.8 and 1: memory capacity of 50 nodes 4.8, 6.6, 3.1 (seeds 0-2; ESN
    # 2.8, 4.0, 1.3) and Lorenz63 7.2, 8.6, 9.9 Lyapunov times at 300 (ESN
    # 8.6, 8.6, 10.0); the additive form 9.9-10.2
    exc_recurrence: float = 0.9
    inh_recurrence: float = 0.5
    # delayed states a StateDelayDriver keeps (ReservoirComputing.jl's
    # StateDelayESN default)
    num_delays: int = 2
    # the cellular-automaton reservoir's rule, generations per input, blocks
    # and block width (orc.drivers.RECADriver; ReservoirComputing.jl's RECA
    # defaults)
    ca_rule: int = 90
    ca_generations: int = 8
    ca_permutations: int = 8
    ca_expansion_size: int = 40
    # ours: the spiking (leaky integrate-and-fire) reservoir's leak, threshold
    # and the spectral radius of its weights (orc.drivers.LIFDriver). Of leaks
    # 0.05-0.3, radii 0.5 and 1 and 0 or 20% inhibitory neurons (100 neurons,
    # input scaling 0.5 and 1, bias 0-0.6), these predicted Mackey-Glass 10
    # steps ahead best (NRMSE 0.19; a linear map of the sample 0.97)
    spiking_leak: float = 0.05
    spike_threshold: float = 1.0
    spiking_spectral_radius: float = 1.0
    # ridge strength of training (train_RCForecaster, train_RCClassifier, ...)
    beta: float = 8e-8
    # ours: the models require res_dim; the front ends that offer a default
    # (orc train and tune, the scikit-learn estimators) offer this one
    res_dim: int = 500


@dataclass(frozen=True)
class ClassifierDefaults:
    """:class:`orc.classifier.ESNClassifier`'s own (besides :data:`ESN`)."""

    state_repr: str = "final"
    input_differences: bool = False  # ours
    input_lags: tuple[int, ...] = ()  # ours


@dataclass(frozen=True)
class ControllerDefaults:
    """The control cost weights: tracking, control magnitude, control
    increments (:class:`orc.control.ESNController`, its base class)."""

    alpha_1: float = 100
    alpha_2: float = 1
    alpha_3: float = 5


@dataclass(frozen=True)
class RegressorDefaults:
    """:class:`orc.regression.ESNRegressor`'s own (ours; besides :data:`ESN`).

    The reservoir's four scales are not ORC's forecasting defaults: those
    (leak 0.6, bias 1.6, input scaling 0.08, spectral radius 0.8) saturate a
    reservoir on inputs of order one and forget them within a few steps.
    Measured by ``benchmarks/regressor_defaults.py`` (median of 3 seeds,
    300 nodes; ``benchmarks/REGRESSOR_DEFAULTS.md``): NARMA10 NRMSE 0.74 ->
    0.20, memory capacity 3.1 -> 17, Lorenz63 ``z`` from ``x`` 0.18 -> 0.02
    (raw data) and 0.38 -> 0.05 (standardised), better at 100 and 1000
    nodes as well. The bias is small but not zero: with no bias the
    reservoir is an odd function of its input and cannot output an even one
    (``z`` from ``x``: NRMSE 1.0)."""

    leak_rate: float = 1.0
    bias: float = 0.2
    embedding_scaling: float = 0.4
    Wr_spectral_radius: float = 0.95
    n_layers: int = 1
    input_passthrough: bool = False
    readout_bias: bool = True
    beta: float = 1e-6


@dataclass(frozen=True)
class EstimatorClassifierDefaults:
    """:class:`orc.sklearn.ESNClassifier`'s (ours), where they are not
    :class:`orc.classifier.ESNClassifier`'s (which keeps ORC 0.4's).

    A scikit-learn user fits ``ESNClassifier()`` as it comes, so its
    defaults are the recipe measured strongest on seven UCR/UEA sets
    (``benchmarks/science/CLASSIFICATION.md``): the mean state with the
    proportion of steps above each node's training quartiles, of the series
    and of its reverse (``"bi_ppv"``), fed with the first differences and the
    differences over 4 and 16 steps, a denser reservoir, the spinup and the
    ridge chosen from the data, and the leak and input scale the
    cross-validation chose most. Untuned, on z-normalised series, their mean
    test accuracy is 0.92 (ORC 0.4's defaults: 0.52; aeon's MiniRocket:
    0.94), in 19 s for the seven sets on 2 cores, compilation included."""

    leak_rate: float = 0.1
    embedding_scaling: float = 0.4
    Wr_density: float = 0.1
    Wr_spectral_radius: float = 0.9
    state_repr: str = "bi_ppv"
    input_differences: bool = True
    input_lags: tuple[int, ...] = (4, 16)
    spinup: int | None = None  # a tenth of the training series' length
    beta: float | None = None  # chosen by leave-one-out among logspace(-3, 3, 10)


@dataclass(frozen=True)
class NVARDefaults:
    """:class:`orc.forecaster.NVARForecaster` and its training (ours)."""

    k: int = 2
    s: int | str = "auto"
    order: int | str = "auto"
    constant: bool = True
    target: str = "increment"
    beta: float = 2.5e-6


@dataclass(frozen=True)
class ScoringDefaults:
    """:mod:`orc.metrics`' (which the tuning tasks, the plots and the ``orc``
    command score and draw with)."""

    threshold: float = 0.4  # the valid prediction time's error threshold
    normalization: str = "mean_norm"
    spectrum_axis: str = "time"


@dataclass(frozen=True)
class NumericsDefaults:
    """:mod:`orc.utils`' ridge regression and Arnoldi helpers (ORC 0.4's), and
    how the constructions estimate a spectral radius (ours)."""

    ridge_beta: float = 1e-7
    arnoldi_steps: int = 200
    radius_method: str = "arnoldi"


@dataclass(frozen=True)
class TuneDefaults:
    """:mod:`orc.tune`'s tasks and searches, and the ``orc`` command's fits (ours)."""

    spinup: int = 100  # training samples each fit drops (the transient)
    warmup: int = 100  # samples that synchronise a validation window
    ridge_points: int = 8  # ridge strengths per candidate when beta is not given


@dataclass(frozen=True)
class PlasticityDefaults:
    """:mod:`orc.plasticity`'s rules (ours; reservoirpy 0.4's ``IPReservoir``
    and ``LocalPlasticityReservoir`` defaults, but for ``sigma``: see the
    module doc)."""

    mu: float = 0.0
    # ours (reservoirpy: 1.0, a spread tanh outputs cannot have). Of 0.1, 0.2
    # and 0.5, 0.2 gave two 100-node reservoirs the highest memory capacity
    # (12.5, 14.3); NARMA10 preferred 0.1 (NRMSE 0.40 vs 0.43, 0.31 vs 0.39)
    sigma: float = 0.2
    ip_learning_rate: float = 5e-4
    epochs: int = 1
    rule: str = "oja"
    local_learning_rate: float = 1e-3
    bcm_theta: float = 0.0
    normalize_rows: bool = False


@dataclass(frozen=True)
class MatrixDefaults:
    """The reservoirs and input layers of :mod:`orc.initializers` and
    :mod:`orc.topologies`: ReservoirComputing.jl's defaults for them (its
    ``sparsity`` restated as a density where each function says so)."""

    density: float = 0.1  # pseudo_svd, the banded ones, dale_sparse, random_sparse
    distribution: str = "normal"  # random_sparse (reservoirpy's Reservoir W)
    input_distribution: str = "bernoulli"  # random_sparse_input (its W_in)
    input_scaling: float = 0.1  # weighted_input, informed_input (RC.jl: scaling)
    permutation_weight: float = 0.1
    extra_edge_probability: float = 0.1  # chaotic
    excitatory_fraction: float = 0.8  # dale_sparse
    std_diag: float = 0.5  # wigner
    gamma: float = 0.5  # informed_input: the share of units that see the data
    poincare_dim: int = 2  # hyperbolic
    disk_radius: float = 0.99  # hyperbolic
    sine_amplitude: float = 0.3  # the logistic-map input layers' first row
    sine_divisor: float = 5.9
    logistic_parameter: float = 3.7  # logistic_input
    chain_logistic_parameter: float = 2.35  # modified_logistic_input


@dataclass(frozen=True)
class ConceptorDefaults:
    """:mod:`orc.conceptors`: Jaeger's (2014) settings for loading patterns."""

    aperture: float = 10
    washout: int = 500
    beta_w: float = 1e-4  # ridge strength of the loaded recurrent weights
    beta_out: float = 1e-2  # ridge strength of the readout


ESN = ESNDefaults()
CLASSIFIER = ClassifierDefaults()
CONTROLLER = ControllerDefaults()
REGRESSOR = RegressorDefaults()
ESTIMATOR_CLASSIFIER = EstimatorClassifierDefaults()
NVAR = NVARDefaults()
SCORING = ScoringDefaults()
NUMERICS = NumericsDefaults()
TUNE = TuneDefaults()
PLASTICITY = PlasticityDefaults()
MATRICES = MatrixDefaults()
CONCEPTORS = ConceptorDefaults()
