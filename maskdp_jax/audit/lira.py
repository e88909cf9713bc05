r"""LiRA, the likelihood-ratio membership-inference attack (Carlini et al. 2022), as in Gu & Chen
2024.

Shadow models are trained on random halves of the data; ``inclusion [M, N]`` records which of the
N examples each of the M models saw. Each model scores every example by the log-odds of its
true-label probability, φ = log(p_y / (1 − p_y)) (:func:`log_odds_confidence`). Then:

* **offline** (Gu & Chen 2024, Sec. III): fit a Gaussian N(μ_out, σ_out²) to example j's scores on
  the models that did not see it; Λ = Φ((φ − μ_out)/σ_out), and the guess is "member" iff Λ > 0.5
  (Gu & Chen 2024's threshold), i.e. iff φ > μ_out;
* **online** (stronger, needs IN models too): also fit N(μ_in, σ_in²) on the models that saw it;
  the statistic is the log-likelihood ratio log N(φ; μ_in, σ_in) − log N(φ; μ_out, σ_out) and the
  guess is "member" iff it is positive.

**Fits** (:class:`Options`), three ways to get σ:

* ``"per_example"`` (Gu & Chen 2024): each example's own leave-one-out σ, from the M/2 − 1 or
  M/2 scores of the other models on that side. With 16 shadow models that σ rests on 7 or 8
  scores and is itself noisy, which hurts the online attack (it divides by two such σ) more
  than the offline one.
* ``"pooled"`` (this project's estimator, the default below 64 shadow models through
  ``"auto"``): per attacked model and side, the root of the mean over examples of those
  per-example variances, i.e. the **pooled within-example** variance. It keeps each example's
  own centre and drops only the noise of its σ.
* ``"carlini_fixed"`` (Carlini et al. 2022's released code, ``research/mi_lira_2021/plot.py``
  in tensorflow/privacy, ``fix_variance=True``): one **total** standard deviation of the scores
  over every example, shadow model and query, ``np.std`` (ddof 0) of all of them, so it
  contains the spread *between* examples' centres as well as within. Online: the std of the IN
  scores, used for both the IN and the OUT Gaussian; offline: the std of the OUT scores.
  Carlini et al. centre with the median (:data:`CARLINI`); leave-one-out here as everywhere.

What the choice changes: a σ shared by every example only rescales one attacked model's
statistics. Offline then ranks a model's pairs by φ − μ_out (pooled and Carlini's σ alike).
Online with Carlini's σ, the same on both sides, is exactly
(φ − (μ_in + μ_out)/2)·(μ_in − μ_out)/σ², linear in φ; the pooled fit has a σ per side, so its
online statistic keeps a quadratic term. Carlini's σ is wider wherever examples' centres differ
(it holds the spread between them): that changes the calibration of Λ and of the likelihood
ratio, and, with several queries, their weights (one σ for all queries, where the other fits
have one per query). Carlini et al. (Sec. VI-A) recommend a fixed σ below 64 shadow models;
``"auto"`` follows that advice with the pooled estimator. A median centre and several query
augmentations per example (``scores [M, N, A]``, one Gaussian per augmentation, statistics
averaged) are the paper's other options.

**Online is not always the stronger attack.** With one σ per side for every example (pooled or
Carlini's) the online statistic is close to (φ − (μ_in + μ_out)/2)·(μ_in − μ_out): it learns
each example's direction of leakage from M/2 models per side. When the leak is small next to
the spread of that estimate (8 + 8 models, a shift of a fraction of σ), the direction is often
wrong and offline, which assumes members score higher, separates better (tested: 0.7 σ, 16
models).

**Gu & Chen 2024's offline rule caps per-example ASR near 0.75.** It guesses "member" iff φ > μ_out,
so on the models that did not train on an example it is right only half the time however strong the
leak, and with every example IN on half the models its expected per-example ASR is at most
(1 + 1/2)/2 = 0.75 (values above come from chance alone). Faithful to the seed; the online
statistic has no such cap.

Every fit is **leave-one-out**: the attack on model i uses only the other models' scores, as in
Gu & Chen 2024's batch ASR (the model being attacked plays the target, the rest are shadows). The
per-example attack success rate is the fraction of models on which the guess is right
(:func:`per_example_asr`); ASR^M is its maximum over the examples (:func:`asr_max`): the
dataset's worst case. A model that leaks nothing gives ASR ≈ 0.5 for every example.

Written here, not taken from a library: jax_privacy's auditing module (used by
:mod:`maskdp_jax.audit.metrics` for AUC, TPR at low FPR and ε lower bounds) starts from attack
scores; the per-example Gaussian fits and Gu & Chen 2024's leave-one-out ASR are what produce those
scores.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

KINDS = ("offline", "online")


def log_odds_confidence(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """φ = log(p_y / (1 − p_y)) from logits, without computing p.

    log p_y − log(1 − p_y) = z_y − logsumexp_{k≠y} z_k, exact and finite for any finite logits
    (p_y = 1 in float32 would give +inf through the probabilities).

    Args:
      logits: ``[..., C]``.
      labels: ``[...]`` int, the true labels.

    Returns:
      ``[...]`` float, φ.
    """
    labels = jnp.asarray(labels)
    true = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    others = jnp.where(jax.nn.one_hot(labels, logits.shape[-1], dtype=bool), -jnp.inf, logits)
    return true - jax.nn.logsumexp(others, axis=-1)


def balanced_inclusion(rng: np.random.Generator, num_models: int,
                       num_examples: int) -> np.ndarray:
    """``[M, N]`` bool: every example is IN exactly M/2 models (a random half, independently per
    example), so every example has as many IN as OUT fits (Carlini et al.'s design); each model
    then sees about N/2 examples.

    Raises:
      ValueError: M odd or < 4 (leave-one-out fits need at least two models on each side).
    """
    if num_models < 4 or num_models % 2:
        raise ValueError(f"need an even number of shadow models >= 4; got {num_models}.")
    ranks = np.argsort(rng.random((num_models, num_examples)), axis=0).argsort(axis=0)
    return ranks < num_models // 2


#: How σ is fitted (:class:`Options`; module docstring).
VARIANCES = ("auto", "pooled", "per_example", "carlini_fixed")
#: Variance names that were renamed, and why: the old name said something the estimator is not.
RENAMED_VARIANCES = {
    "global": "'global' is now 'pooled' (the pooled within-example σ this project fits); "
              "Carlini et al.'s released fixed variance (one total std) is 'carlini_fixed'",
}
#: The centre of a fit (:class:`Options`).
ESTIMATORS = ("mean", "median")
#: Below this many shadow models ``"auto"`` fixes σ (Carlini et al. 2022, Sec. VI-A), with the
#: pooled estimator.
FIXED_VARIANCE_BELOW = 64
#: Table names of the variances.
VARIANCE_LABELS = {"pooled": "pooled σ", "per_example": "per-example σ",
                   "carlini_fixed": "Carlini's total σ"}


@dataclasses.dataclass(frozen=True)
class Options:
    """How the Gaussians of :func:`lira_statistic` are fitted (module docstring, "Fits").

    Attributes:
      variance: ``"per_example"`` (Gu & Chen 2024: each example's own leave-one-out σ),
        ``"pooled"`` (per attacked model and side, the root mean over examples of the
        per-example leave-one-out variances: the pooled within-example σ, this project's
        estimator), ``"carlini_fixed"`` (Carlini et al. 2022's released ``fix_variance``: one
        total std over every example, model and query, of the IN scores for both Gaussians
        online, of the OUT scores offline) or ``"auto"`` (pooled below
        :data:`FIXED_VARIANCE_BELOW` shadow models, as Carlini et al. recommend a fixed σ;
        per-example from there on).
      estimator: the centre of a fit, ``"mean"`` or ``"median"`` (robust to a shadow model that
        diverged; Carlini et al.'s code uses the median). The σ does not depend on it.
    """

    variance: str = "auto"
    estimator: str = "mean"

    def __post_init__(self):
        if self.variance in RENAMED_VARIANCES:
            raise ValueError(f"variance: {RENAMED_VARIANCES[self.variance]}.")
        if self.variance not in VARIANCES:
            raise ValueError(f"variance must be one of {VARIANCES}; got {self.variance!r}.")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}; got {self.estimator!r}.")

    def resolved_variance(self, num_models: int) -> str:
        """``"pooled"``, ``"per_example"`` or ``"carlini_fixed"`` for ``num_models`` shadow
        models."""
        if self.variance != "auto":
            return self.variance
        return "pooled" if num_models < FIXED_VARIANCE_BELOW else "per_example"

    def label(self, num_models: int) -> str:
        """Short name for tables: e.g. ``"pooled σ, mean"``."""
        return f"{VARIANCE_LABELS[self.resolved_variance(num_models)]}, {self.estimator}"


#: Gu & Chen 2024's own fits: each example's σ and mean.
SEED004 = Options(variance="per_example", estimator="mean")
#: Carlini et al. 2022's released fixed-variance attack: one total σ, median centres.
CARLINI = Options(variance="carlini_fixed", estimator="median")


def _loo_fit(scores: np.ndarray, side: np.ndarray, *, estimator: str = "mean",
             variance: str = "per_example") -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out centre and std ``[M, N, A]`` of each example's scores ``[M, N, A]`` (A query
    augmentations, fitted separately) on the models in ``side`` (``[M, N]`` bool), excluding
    model i itself from the fit used against model i.

    ``variance="pooled"`` replaces each std by the root of the mean over examples of model i's
    leave-one-out variances (``[M, 1, A]``, broadcast): the pooled within-example std.
    ``variance="carlini_fixed"`` replaces it by the population std (ddof 0) of every score on
    ``side`` of the models other than i, over all examples and augmentations together
    (``[M, 1, 1]``, broadcast): Carlini et al.'s ``np.std(dat_in)``."""
    side_f = side.astype(np.float64)[..., None]
    n = side_f.sum(axis=0, keepdims=True) - side_f
    s1 = (scores * side_f).sum(axis=0, keepdims=True) - scores * side_f
    s2 = (scores**2 * side_f).sum(axis=0, keepdims=True) - scores**2 * side_f
    if np.any(n < 2):
        raise ValueError("an example has fewer than two shadow models on one side once the "
                         "attacked model is left out: train more shadow models.")
    mean = s1 / n
    var = np.maximum(s2 - n * mean**2, 0.0) / (n - 1)
    if variance == "pooled":
        var = np.broadcast_to(var.mean(axis=1, keepdims=True), var.shape)
    elif variance == "carlini_fixed":
        var = np.broadcast_to(_loo_total_var(scores, side)[:, None, None], var.shape)
    if estimator == "median":
        on_side = np.where(side[..., None], scores, np.nan)
        mean = np.stack([np.nanmedian(np.delete(on_side, i, axis=0), axis=0)
                         for i in range(len(scores))])
    return mean, np.sqrt(var)


def _loo_total_var(scores: np.ndarray, side: np.ndarray) -> np.ndarray:
    """``[M]``: the population variance of all the scores ``[M, N, A]`` on ``side`` (``[M, N]``)
    of the models other than i, pooled over examples and augmentations."""
    w = np.broadcast_to(side[..., None], scores.shape).astype(np.float64)
    count = w.sum() - w.sum(axis=(1, 2))
    s1 = (scores * w).sum() - (scores * w).sum(axis=(1, 2))
    s2 = (scores**2 * w).sum() - (scores**2 * w).sum(axis=(1, 2))
    return np.maximum(s2 / count - (s1 / count) ** 2, 0.0)


def lira_statistic(scores: np.ndarray, inclusion: np.ndarray, *, kind: str = "offline",
                   options: Options = SEED004, min_std: float = 1e-6) -> np.ndarray:
    """The attack's statistic for every (model, example) pair, higher = more likely a member.

    Args:
      scores: ``[M, N]`` φ of example j on model i, or ``[M, N, A]`` with A query augmentations
        of the example (e.g. the video flipped or shifted; Carlini et al. 2022, Sec. VI-B).
      inclusion: ``[M, N]`` bool, whether model i trained on example j.
      kind: ``"offline"`` (Λ = Φ(mean over augmentations of (φ − μ_out)/σ_out) ∈ [0, 1]; member
        iff > 0.5; with one query Gu & Chen 2024's Λ) or ``"online"`` (log-likelihood ratio,
        averaged over augmentations; member iff > 0).
      options: how the Gaussians are fitted (:class:`Options`; default Gu & Chen 2024's). With
        ``"carlini_fixed"`` the online statistic uses the IN scores' total σ on both sides and
        the offline one the OUT scores' (Carlini et al.'s released code).
      min_std: floor on the fitted stds (a model family that always outputs the same score for an
        example would otherwise divide by zero).

    Returns:
      ``[M, N]`` float64.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}.")
    scores = np.asarray(scores, np.float64)
    inclusion = np.asarray(inclusion, bool)
    if scores.ndim == 2:
        scores = scores[..., None]
    if scores.shape[:2] != inclusion.shape or scores.ndim != 3 or inclusion.ndim != 2:
        raise ValueError(f"scores {scores.shape} and inclusion {inclusion.shape} must be "
                         "[models, examples(, augmentations)] and [models, examples].")
    fit = dict(estimator=options.estimator, variance=options.resolved_variance(len(scores)))
    mu_out, sd_out = _loo_fit(scores, ~inclusion, **fit)
    sd_out = np.maximum(sd_out, min_std)
    if kind == "offline":
        return stats.norm.cdf(np.mean((scores - mu_out) / sd_out, axis=-1))
    mu_in, sd_in = _loo_fit(scores, inclusion, **fit)
    sd_in = np.maximum(sd_in, min_std)
    if fit["variance"] == "carlini_fixed":  # Carlini et al.: std_out = np.std(dat_in)
        sd_out = sd_in
    return np.mean(stats.norm.logpdf(scores, mu_in, sd_in)
                   - stats.norm.logpdf(scores, mu_out, sd_out), axis=-1)


def member_guess(statistic: np.ndarray, *, kind: str) -> np.ndarray:
    """``[M, N]`` bool: Gu & Chen 2024's threshold Λ > 0.5 (offline), likelihood ratio > 1
    (online)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}.")
    return statistic > (0.5 if kind == "offline" else 0.0)


def per_example_asr(guess: np.ndarray, inclusion: np.ndarray) -> np.ndarray:
    """``[N]``: Gu & Chen 2024's ASR(x_j) = fraction of the M models on which the guess is right."""
    return np.mean(np.asarray(guess) == np.asarray(inclusion, bool), axis=0)


def asr_max(asr: np.ndarray) -> float:
    """ASR^M = max_j ASR(x_j): the dataset's most exposed example (Gu & Chen 2024)."""
    return float(np.max(asr))


def chance_asr_max(num_models: int, num_examples: int) -> float:
    """The median ASR^M of an attack that guesses at random: the median of the maximum of N
    independent Binomial(M, 1/2)/M. A maximum over many examples is high by chance alone (16
    models, 1,437 examples: 0.875), so ASR^M means something only next to this level."""
    cdf = stats.binom.cdf(np.arange(num_models + 1), num_models, 0.5) ** num_examples
    return float(np.searchsorted(cdf, 0.5) / num_models)
