"""What the auditing literature reports for an attack: AUC, TPR at low FPR, an ε lower bound, each
next to what an attack that finds nothing would score.

**Reported figures.** The **standard AUC** (the Mann–Whitney statistic: the probability that an
IN score beats an OUT score, ties counting half; :func:`standard_auc`) and the **TPR at a fixed
FPR on the empirical ROC** (:func:`empirical_tpr_at_fpr`: the largest TPR of a threshold whose
observed FPR is at most the level, never interpolated). jax_privacy's ``CanaryScoreAuditor``
reports the area under the ROC's *concave hull* and the TPR interpolated on that hull; kept as
``auc_hull`` / ``tpr_at_fpr_hull`` and named "hull" wherever shown. The hull lies above every
ROC point, so with no leakage its AUC is above 0.5 (0.57 on average at 64 IN / 64 OUT).

**Null levels** (:class:`NullBand`): the mean and the 2.5–97.5 % band of a figure when nothing
leaks, by simulation with a fixed seed (:data:`NULL_SEED`, :data:`NULL_DRAWS` draws) at the same
IN/OUT counts: :func:`score_null` draws the attack scores iid (the figures are rank statistics, so
any continuous distribution gives the same null); :func:`lira_null` draws the shadow models' φ
iid and runs the whole attack (leave-one-out fits, per-example ASR), because fits and maxima
shift the null: online LiRA's ASR^M with 16 models and 64 examples has median 0.81, not
the binomial 0.75.

**The ε lower bound** (:func:`epsilon_lower_bound`). Clopper–Pearson intervals on FPR and TPR
(jax_privacy's ``epsilon_clopper_pearson`` at an explicit threshold), ε ≥ log((TPR_lo − δ) /
FPR_hi), maximised over a **fixed, pre-declared grid of FPR levels** (:data:`BOUND_FPRS`) with a
Bonferroni correction over the grid's size (significance / 6 per level). At level f the
threshold is the ⌊f·n_out⌋-th largest OUT score, so it depends on the OUT scores only: the IN
count is then binomial given the threshold (the TPR interval is exact), and the true FPR of an
order-statistic threshold is Beta-distributed and stochastically below the Clopper–Pearson
upper limit at the observed count (the FPR interval is conservative). jax_privacy's default
instead takes Bonferroni over the vertices of the ROC's hull, a number that depends on the data.

**What the bound assumes.** Clopper–Pearson treats every (model, example) guess as an
independent trial. That holds exactly when each trial is its own training run with one
target (Jagielski et al.); pooling the M×N pairs of one shadow-model experiment shares models
across trials, so the interval is optimistic in its width, not in its centre. Report it as an
indication; the one-run audit (Steinke et al. 2023, many canaries in one run) is the rigorous
alternative for large models.

Written here (standard AUC, empirical TPR, the nulls): a few lines of numpy each; scikit-learn
has ``roc_auc_score`` but is not a dependency, and no library simulates these nulls.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from maskdp_jax.audit import lira

#: The false-positive rates at which the true-positive rate is reported (0.1 % and 1 %).
FPRS = (0.001, 0.01)
#: The ε lower bound's FPR levels, fixed before any data are seen (Bonferroni over them).
BOUND_FPRS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5)
#: Simulations per null (at most; :func:`null_draws_for`).
NULL_DRAWS = 1000
#: The nulls' random seed: a report's null bands are reproducible.
NULL_SEED = 0
#: The null band's percentiles (a 95 % band).
NULL_BAND = (2.5, 97.5)
#: The FPR grid of the log-log ROC plots (``roc_tpr``).
ROC_FPRS = tuple(float(f) for f in np.logspace(-3, 0, 31))


def mean_std(values) -> tuple[float, float]:
    """``(mean, sample std)`` of a study's per-seed values (std 0 for a single seed)."""
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def _auditing():
    try:
        from jax_privacy import auditing
    except ImportError as err:
        raise ImportError("audit metrics need jax-privacy: pip install -e '.[audit]'"
                          ) from err
    return auditing


def require_extra() -> None:
    """Check that the audit extra is installed, so a study fails before it trains its shadow
    models rather than after.

    Raises:
      ImportError: jax-privacy is missing; the message names the install command.
    """
    _auditing()


def _split(in_scores, out_scores) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.ravel(np.asarray(in_scores, np.float64)), np.ravel(np.asarray(out_scores,
                                                                            np.float64))
    if a.size == 0 or b.size == 0:
        raise ValueError(f"need IN and OUT scores; got {a.size} IN and {b.size} OUT.")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("attack scores must be finite.")
    return a, b


def standard_auc(in_scores, out_scores) -> float:
    """The Mann–Whitney AUC: P(IN score > OUT score) + P(equal)/2 (0.5: no separation).

    Args:
      in_scores / out_scores: ``[n_in]`` / ``[n_out]`` attack scores, higher = member.
    """
    a, b = _split(in_scores, out_scores)
    ranks = _ranks(np.concatenate([a, b]))
    return float((ranks[: a.size].sum() - a.size * (a.size + 1) / 2) / (a.size * b.size))


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy import stats  # noqa: PLC0415

    return stats.rankdata(x, method="average")


def _threshold_counts(out_sorted_desc: np.ndarray, fpr: float) -> float:
    """The threshold t with at most ⌊fpr·n_out⌋ OUT scores ≥ t, as many as ties allow: the
    ⌊fpr·n_out⌋-th largest OUT score (the smallest float above the largest when that is 0)."""
    k = int(np.floor(fpr * out_sorted_desc.size + 1e-9))
    if k == 0:
        return float(np.nextafter(out_sorted_desc[0], np.inf))
    # the k-th largest; with ties at it, move above them so the count stays <= k.
    t = out_sorted_desc[k - 1]
    if k < out_sorted_desc.size and out_sorted_desc[k] == t:
        return float(np.nextafter(t, np.inf))
    return float(t)


def empirical_tpr_at_fpr(in_scores, out_scores, fprs=FPRS) -> tuple[float, ...]:
    """TPR at each FPR level on the empirical ROC: guess IN for scores ≥ the threshold whose
    observed FPR is the largest not above the level (``_threshold_counts``)."""
    a, b = _split(in_scores, out_scores)
    out = np.sort(b)[::-1]
    return tuple(float(np.mean(a >= _threshold_counts(out, f))) for f in fprs)


def epsilon_lower_bound(in_scores, out_scores, *, delta: float, significance: float = 0.05,
                        fprs=BOUND_FPRS) -> float:
    """Clopper–Pearson ε lower bound over the fixed FPR grid ``fprs``, Bonferroni over its size
    (module docstring: why this is valid and jax_privacy's default is not quite).

    Args:
      in_scores / out_scores: attack scores, higher = member.
      delta: the δ of the guarantee being audited.
      significance: one minus the confidence (0 < s < 0.5).
      fprs: the pre-declared FPR levels (fixed before the data are seen).
    """
    if not 0 < significance < 0.5:
        raise ValueError(f"significance must be in (0, 0.5); got {significance}.")
    if not fprs or not all(0 < f < 1 for f in fprs):
        raise ValueError(f"fprs must be a non-empty set of levels in (0, 1); got {fprs}.")
    a, b = _split(in_scores, out_scores)
    auditing = _auditing()
    auditor = auditing.CanaryScoreAuditor(a, b)
    out = np.sort(b)[::-1]
    return max(float(auditor.epsilon_clopper_pearson(
        significance / len(fprs), delta,
        threshold_strategy=auditing.Explicit(_threshold_counts(out, f)))) for f in fprs)


@dataclasses.dataclass(frozen=True)
class NullBand:
    """A figure's distribution when nothing leaks: ``mean`` and the ``low``–``high`` band
    (:data:`NULL_BAND` percentiles) over ``draws`` simulations."""

    mean: float
    low: float
    high: float
    draws: int

    @classmethod
    def of(cls, values) -> NullBand:
        values = np.asarray(values, np.float64)
        low, high = np.percentile(values, NULL_BAND)
        return cls(float(values.mean()), float(low), float(high), len(values))

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def _rank_figures(scores: np.ndarray, is_in: np.ndarray) -> dict[str, np.ndarray]:
    """Standard AUC and empirical TPRs of every row of ``scores [D, n]`` (continuous, no ties),
    ``is_in [D, n]`` bool with the same count per row: vectorised :func:`standard_auc` and
    :func:`empirical_tpr_at_fpr`."""
    n_in = int(is_in[0].sum())
    n_out = is_in.shape[1] - n_in
    ranks = np.argsort(np.argsort(scores, axis=1), axis=1) + 1.0
    auc = ((ranks * is_in).sum(axis=1) - n_in * (n_in + 1) / 2) / (n_in * n_out)
    out_desc = -np.sort(-np.where(is_in, -np.inf, scores), axis=1)[:, :n_out]
    figures = {"auc": auc}
    for f in FPRS:
        k = int(np.floor(f * n_out + 1e-9))
        t = np.nextafter(out_desc[:, 0], np.inf) if k == 0 else out_desc[:, k - 1]
        figures[f"tpr@{f:g}"] = ((scores >= t[:, None]) & is_in).sum(axis=1) / n_in
    return figures


@functools.cache
def score_null(num_in: int, num_out: int, draws: int = NULL_DRAWS,
               seed: int = NULL_SEED) -> dict[str, NullBand]:
    """Null bands of the standard AUC (``"auc"``) and the empirical TPR at each of :data:`FPRS`
    (``"tpr@0.001"``, ...) for ``num_in`` IN and ``num_out`` OUT scores drawn iid."""
    if num_in < 1 or num_out < 1:
        raise ValueError(f"need IN and OUT scores; got {num_in} and {num_out}.")
    rng = np.random.default_rng(seed)
    is_in = np.zeros((draws, num_in + num_out), bool)
    is_in[:, :num_in] = True
    figures = _rank_figures(rng.standard_normal(is_in.shape), is_in)
    return {k: NullBand.of(v) for k, v in figures.items()}


@dataclasses.dataclass(frozen=True)
class AttackMetrics:
    """Attack quality over all (model, example) pairs, or over canaries.

    Attributes:
      auc: the standard (Mann–Whitney) AUC.
      tpr_at_fpr: TPR at each FPR of :data:`FPRS` (0.1 %, 1 %) on the empirical ROC.
      null: the figures' no-leakage bands, keyed ``"auc"``, ``"tpr@0.001"``, ... (and, for
        LiRA, ``"asr_max"``, ``"asr_mean"``; :func:`lira_null`).
      auc_hull / tpr_at_fpr_hull: jax_privacy's figures on the ROC's concave hull.
      epsilon_lower_bound: ε such that the attack would be impossible under (ε', δ)-DP for
        every ε' < ε, at confidence 1 − ``significance`` (:func:`epsilon_lower_bound`).
      significance, delta: the bound's inputs; bound_fprs: its grid.
      num_in, num_out: trials per side.
      roc_tpr: the empirical TPR at each FPR of :data:`ROC_FPRS` (the log-log ROC plots).
    """

    auc: float
    tpr_at_fpr: tuple[float, ...]
    null: dict[str, NullBand]
    auc_hull: float
    tpr_at_fpr_hull: tuple[float, ...]
    epsilon_lower_bound: float
    significance: float
    delta: float
    num_in: int
    num_out: int
    roc_tpr: tuple[float, ...]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"fprs": FPRS, "bound_fprs": BOUND_FPRS}


def null_draws_for(num_trials: int) -> int:
    """Simulations for a null of ``num_trials`` scores: :data:`NULL_DRAWS` up to 4,000 trials,
    fewer above (at least 200: the band's 2.5 % point is then the 5th value) so that a null
    costs about as much as at 4,000 trials."""
    return int(max(200, min(NULL_DRAWS, 4_000_000 // max(1, num_trials))))


def attack_metrics(statistic: np.ndarray, inclusion: np.ndarray, *, delta: float,
                   significance: float = 0.05, null: dict[str, NullBand] | None = None
                   ) -> AttackMetrics:
    """Standard AUC, empirical TPR at 0.1 % and 1 % FPR, their null bands, the hull figures and
    the ε lower bound.

    Args:
      statistic: ``[M, N]`` (or ``[m]``) higher = member
        (:func:`maskdp_jax.audit.lira.lira_statistic`).
      inclusion: the same shape, bool ground truth.
      delta: the δ of the guarantee being audited.
      significance: one minus the confidence of the lower bound (0 < s < 0.5).
      null: the no-leakage bands; default :func:`score_null` at the same counts.
    """
    statistic = np.asarray(statistic, np.float64)
    inclusion = np.asarray(inclusion, bool)
    if statistic.shape != inclusion.shape:
        raise ValueError(f"statistic {statistic.shape} and inclusion {inclusion.shape} differ.")
    a, b = _split(statistic[inclusion], statistic[~inclusion])
    auditor = _auditing().CanaryScoreAuditor(a, b)
    return AttackMetrics(
        auc=standard_auc(a, b), tpr_at_fpr=empirical_tpr_at_fpr(a, b),
        null=null if null is not None else score_null(
            a.size, b.size, draws=null_draws_for(a.size + b.size)),
        auc_hull=float(auditor.attack_auroc()),
        tpr_at_fpr_hull=tuple(float(t) for t in auditor.tpr_at_given_fpr(np.asarray(FPRS))),
        epsilon_lower_bound=epsilon_lower_bound(a, b, delta=delta, significance=significance),
        significance=significance, delta=delta, num_in=a.size, num_out=b.size,
        roc_tpr=empirical_tpr_at_fpr(a, b, ROC_FPRS))


def lira_null(inclusion: np.ndarray, *, kind: str, options: lira.Options = lira.SEED004,
              num_augmentations: int = 1, draws: int = NULL_DRAWS, seed: int = NULL_SEED
              ) -> dict[str, NullBand]:
    """No-leakage bands of LiRA's figures for this ``inclusion [M, N]``: φ drawn iid N(0, 1)
    (``[M, N, A]``), the attack of ``kind`` and ``options`` run on them exactly as on real
    scores; bands of ``"asr_max"``, ``"asr_mean"``, ``"auc"`` and ``"tpr@<fpr>"``. Cached on the
    inclusion's bytes (the seeds of a study reuse one design per seed)."""
    inclusion = np.asarray(inclusion, bool)
    return _lira_null(inclusion.tobytes(), inclusion.shape, kind, options, num_augmentations,
                      draws, seed)


@functools.cache
def _lira_null(packed, shape, kind, options, num_augmentations, draws, seed):
    inclusion = np.frombuffer(packed, bool).reshape(shape)
    rng = np.random.default_rng(seed)
    stats, asr_max, asr_mean = [], [], []
    for _ in range(draws):
        phi = rng.standard_normal((*shape, num_augmentations))
        stat = lira.lira_statistic(phi, inclusion, kind=kind, options=options)
        asr = lira.per_example_asr(lira.member_guess(stat, kind=kind), inclusion)
        asr_max.append(lira.asr_max(asr))
        asr_mean.append(float(asr.mean()))
        stats.append(np.concatenate([stat[inclusion], stat[~inclusion]]))
    is_in = np.zeros((draws, inclusion.size), bool)
    is_in[:, :int(inclusion.sum())] = True
    # tiny jitter breaks exact ties (offline Λ saturates at 0 and 1) as average ranks would.
    stats = np.asarray(stats) + 1e-12 * rng.standard_normal(is_in.shape)
    out = {k: NullBand.of(v) for k, v in _rank_figures(stats, is_in).items()}
    out["asr_max"] = NullBand.of(asr_max)
    out["asr_mean"] = NullBand.of(asr_mean)
    return out


def lira_variants(options: lira.Options, num_queries: int) -> list[tuple[str, str, lira.Options,
                                                                         int]]:
    """The attacks a LiRA audit reports, ``(name, kind, options, queries)``: per kind, Gu & Chen
    2024's own fits on the first query (``"<kind>_seed004"``: per-example σ, mean), ``options``'
    fits on the first query (``"<kind>"``), and, with ``num_queries`` > 1 augmentations,
    ``options``' fits on all of them (``"<kind>_aug"``)."""
    out = [(f"{k}_seed004", k, lira.SEED004, 1) for k in lira.KINDS]
    out += [(k, k, options, 1) for k in lira.KINDS]
    if num_queries > 1:
        out += [(f"{k}_aug", k, options, num_queries) for k in lira.KINDS]
    return out


def lira_attacks(scores: np.ndarray, inclusion: np.ndarray, *, delta: float,
                 options: lira.Options | None = None, null_draws: int | None = None
                 ) -> dict[str, dict]:
    """Every attack of :func:`lira_variants` on ``scores [M, N]`` or ``[M, N, A]``
    (:mod:`maskdp_jax.audit.lira`): Gu & Chen 2024's mean per-example ASR and ASR^M,
    :func:`attack_metrics`, and every figure's null band (:func:`lira_null`, the same attack on iid
    scores). ``options``: default :class:`maskdp_jax.audit.lira.Options` (global σ below 64 shadow
    models). ``null_draws``: default :func:`null_draws_for` the pair count."""
    options = options or lira.Options()
    scores = np.asarray(scores, np.float64)
    if scores.ndim == 2:
        scores = scores[..., None]
    out = {}
    for name, kind, opts, queries in lira_variants(options, scores.shape[-1]):
        phi = scores[..., :queries]
        stat = lira.lira_statistic(phi, inclusion, kind=kind, options=opts)
        asr = lira.per_example_asr(lira.member_guess(stat, kind=kind), inclusion)
        null = lira_null(inclusion, kind=kind, options=opts, num_augmentations=queries,
                         draws=null_draws or null_draws_for(inclusion.size))
        m = attack_metrics(stat, inclusion, delta=delta, null=null)
        out[name] = {"kind": kind, "fit": opts.label(len(phi)), "queries": queries,
                     "asr_mean": float(asr.mean()), "asr_max": lira.asr_max(asr),
                     **m.to_dict()}
    return out
