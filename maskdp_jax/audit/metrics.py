"""What the auditing literature reports for an attack: AUC, TPR at low FPR, an ε lower bound, each
next to what an attack that finds nothing would score, and what the design could certify at best.

**Reported figures.** The **standard AUC** (the Mann–Whitney statistic: the probability that an
IN score beats an OUT score, ties counting half; :func:`standard_auc`) and the **TPR at a fixed
FPR on the empirical ROC** (:func:`empirical_tpr_at_fpr`): at level α, the largest TPR over the
thresholds whose observed FPR is at most α, never interpolated (scikit-learn's ``roc_curve``
read as ``max(tpr[fpr <= α])``). With k = ⌊α·n_out⌋ that threshold sits just above the
(k+1)-th largest OUT score, so k OUT scores pass. (Reports written before ``tpr_rule`` was
stored put it *at* the k-th largest OUT score instead, which also counts k false positives but
drops the IN scores between the k-th and the (k+1)-th: the TPR of k − 1 false positives, biased
low; see :data:`TPR_RULE`.) jax_privacy's ``CanaryScoreAuditor`` reports the area under the
ROC's *concave hull* and the TPR interpolated on that hull; kept as ``auc_hull`` /
``tpr_at_fpr_hull`` and named "hull" wherever shown. The hull lies above every ROC point, so
with no leakage its AUC is above 0.5 (0.57 on average at 64 IN / 64 OUT).

**Resolution.** A TPR at FPR α is reported only where the OUT trials resolve it,
n_out ≥ :data:`MIN_FALSE_POSITIVES` / α (at least ten false positives' worth of negatives at the
level): below that the figure is a count of a handful of OUT scores, or of none. An unresolved
figure is ``None`` in report.json, with the reason beside it (``unresolved``), and "not resolved
at n = …" in the tables; the log-log ROC plots shade FPR < 1/n_out.

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
threshold is the ⌊f·n_out⌋-th largest OUT score (``_bound_threshold``), so it depends on the
OUT scores only: the IN count is then binomial given the threshold (the TPR interval is exact),
and the true FPR of an order-statistic threshold is Beta-distributed and stochastically below
the Clopper–Pearson upper limit at the observed count (the FPR interval is conservative).
jax_privacy's default instead takes Bonferroni over the vertices of the ROC's hull, a number that
depends on the data. The bound's counts at each level are kept (:func:`bound_counts`), so it can
be evaluated again at another confidence (:func:`bound_from_counts`).

**The pooled LiRA bound is indicative.** Clopper–Pearson treats every (model, example) guess as
an independent trial. That holds exactly when each trial is its own training run with one
target (Jagielski et al. 2020); LiRA's M × N pairs share M shadow models and N examples (16 and
64 here: 1,024 trials), so the interval is too narrow and its nominal 95 % is not a confidence
level. The LiRA tables call it "indicative" and never "95 %". The one-run audit (Steinke et al.
2023, :mod:`maskdp_jax.audit.canaries`) is the rigorous alternative. **The best of several
bounds** (attack variants, seeds) is a maximum over a family: it is evaluated at
significance / (variants × seeds) per bound, Bonferroni over the family
(:func:`maskdp_jax.audit.membership.bound_table`).

**Power** (:func:`largest_certifiable_epsilon`). With n_in / n_out trials at a given confidence,
no attack can certify more than a perfect one: every IN trial above every OUT trial, no false
positive at any level. An audit of a guarantee ε above that cap cannot fail, whatever the model
leaks; the tables say so ("cannot fail at this ε"). 512 / 512 trials at 95 % over the six
levels: 4.53.

Written here (standard AUC, empirical TPR, the nulls, the counts' re-evaluation): a few lines of
numpy each; scikit-learn has ``roc_auc_score`` and ``roc_curve`` (the tests check against them)
but is not a dependency, and no library simulates these nulls.
"""

from __future__ import annotations

import dataclasses
import functools
import math

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
#: A TPR at FPR α is resolved by n_out OUT trials when n_out ≥ MIN_FALSE_POSITIVES / α.
MIN_FALSE_POSITIVES = 10
#: The rule of the reported TPRs, stored as ``tpr_rule`` with each attack: ``"roc"``, the largest
#: TPR with observed FPR ≤ α (:func:`empirical_tpr_at_fpr`). An attack without ``tpr_rule`` was
#: summarised by the earlier rule (threshold at the ⌊α·n_out⌋-th largest OUT score, biased low).
TPR_RULE = "roc"
#: What the pooled ε lower bound is (stored as ``epsilon_lower_bound_note`` with each attack).
BOUND_NOTE = ("indicative: Clopper-Pearson over pooled (model, example) trials that share shadow "
              "models and examples, not a 95 % confidence bound (audit/metrics.py)")


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


def resolves(fpr: float, num_out: int) -> bool:
    """Whether ``num_out`` OUT trials resolve a TPR at FPR ``fpr``: n_out ≥
    :data:`MIN_FALSE_POSITIVES` / fpr."""
    return num_out * fpr >= MIN_FALSE_POSITIVES - 1e-9


def unresolved_reason(fpr: float, num_out: int) -> str:
    """Why a TPR at FPR ``fpr`` is not reported (:func:`resolves`)."""
    return (f"not resolved at n = {num_out}: a TPR at FPR {fpr:g} needs n >= "
            f"{math.ceil(MIN_FALSE_POSITIVES / fpr - 1e-9)} OUT trials")


def _roc_threshold(out_sorted_desc: np.ndarray, fpr: float) -> float:
    """The smallest threshold t (guess IN for scores ≥ t) whose observed FPR is at most ``fpr``:
    just above the (k+1)-th largest OUT score, k = ⌊fpr·n_out⌋ (−∞ when k = n_out), so at most k
    OUT scores pass whatever the ties; every smaller threshold passes more."""
    k = int(np.floor(fpr * out_sorted_desc.size + 1e-9))
    if k >= out_sorted_desc.size:
        return -np.inf
    return float(np.nextafter(out_sorted_desc[k], np.inf))


def _bound_threshold(out_sorted_desc: np.ndarray, fpr: float) -> float:
    """The ε lower bound's threshold at level ``fpr``: the ⌊fpr·n_out⌋-th largest OUT score (the
    smallest float above the largest when that is 0; above any ties at it, so at most k OUT
    scores pass). An order statistic of the OUT scores: the module docstring says why the
    bound's FPR interval is then conservative."""
    k = int(np.floor(fpr * out_sorted_desc.size + 1e-9))
    if k == 0:
        return float(np.nextafter(out_sorted_desc[0], np.inf))
    # the k-th largest; with ties at it, move above them so the count stays <= k.
    t = out_sorted_desc[k - 1]
    if k < out_sorted_desc.size and out_sorted_desc[k] == t:
        return float(np.nextafter(t, np.inf))
    return float(t)


def empirical_tpr_at_fpr(in_scores, out_scores, fprs=FPRS) -> tuple[float, ...]:
    """TPR at each FPR level on the empirical ROC: the largest TPR over thresholds whose observed
    FPR is at most the level (scikit-learn's ``max(tpr[fpr <= level])``), whether or not the
    OUT count resolves it (:func:`resolves`).

    >>> out = np.array([5.0, 4.0] + [-1.0] * 98)  # 100 OUT scores
    >>> empirical_tpr_at_fpr([4.5], out, (0.01,))  # one false positive (5) allowed
    (1.0,)
    """
    a, b = _split(in_scores, out_scores)
    out = np.sort(b)[::-1]
    return tuple(float(np.mean(a >= _roc_threshold(out, f))) for f in fprs)


def bound_counts(in_scores, out_scores, fprs=BOUND_FPRS) -> tuple[tuple[int, int], ...]:
    """``(TP, FP)`` at the threshold of each level of :func:`epsilon_lower_bound`: the counts the
    bound is a function of (:func:`bound_from_counts`)."""
    a, b = _split(in_scores, out_scores)
    out = np.sort(b)[::-1]
    thresholds = [_bound_threshold(out, f) for f in fprs]
    return tuple((int(np.sum(a >= t)), int(np.sum(b >= t))) for t in thresholds)


def _clopper_pearson_upper(k: int, n: int, significance: float) -> float:
    """One-sided upper limit on a binomial rate after k successes in n trials."""
    from scipy import stats  # noqa: PLC0415

    return 1.0 if k >= n else float(stats.beta.ppf(1 - significance, k + 1, n - k))


def bound_from_counts(counts, *, num_in: int, num_out: int, delta: float,
                      significance: float) -> float:
    """The ε lower bound of :func:`epsilon_lower_bound` from its :func:`bound_counts`, at any
    ``significance`` (Bonferroni over the ``len(counts)`` levels, each interval at half of a
    level's share, as jax_privacy's ``epsilon_clopper_pearson``).

    Args:
      counts: ``(TP, FP)`` per level.
      num_in / num_out: the IN and OUT trials.
      delta: the δ of the guarantee being audited.
      significance: one minus the confidence, for the whole grid.
    """
    if not 0 < significance < 0.5:
        raise ValueError(f"significance must be in (0, 0.5); got {significance}.")
    share = significance / len(counts) / 2
    best = 0.0
    for tp, fp in counts:
        tpr_low = 1.0 - _clopper_pearson_upper(num_in - tp, num_in, share)
        if tpr_low > delta:
            fpr_high = _clopper_pearson_upper(fp, num_out, share)
            best = max(best, math.log(tpr_low - delta) - math.log(fpr_high))
    return best


def largest_certifiable_epsilon(num_in: int, num_out: int, *, delta: float,
                                significance: float, fprs=BOUND_FPRS) -> float:
    """The cap of :func:`epsilon_lower_bound` with these trial counts: the bound of a perfect
    attack, every IN trial passing and no OUT trial at any level. No outcome certifies more, so
    a guarantee ε above it cannot be refuted by this design.

    >>> round(largest_certifiable_epsilon(512, 512, delta=1e-3, significance=0.05), 2)
    4.53
    """
    return bound_from_counts([(num_in, 0)] * len(fprs), num_in=num_in, num_out=num_out,
                             delta=delta, significance=significance)


def cap_cell(cap: float, epsilon: float) -> str:
    """A table cell of an audit's power: ``"4.53"``, or ``"4.53: cannot fail at this ε"`` when
    the audited ε is above the largest one the design could certify (every audit table)."""
    return f"{cap:.2f}" + (": cannot fail at this ε" if epsilon > cap else "")


def epsilon_lower_bound(in_scores, out_scores, *, delta: float, significance: float = 0.05,
                        fprs=BOUND_FPRS) -> float:
    """Clopper–Pearson ε lower bound over the fixed FPR grid ``fprs``, Bonferroni over its size
    (module docstring: why this is valid for independent trials, and only indicative for LiRA's
    pooled ones).

    Args:
      in_scores / out_scores: attack scores, higher = member.
      delta: the δ of the guarantee being audited.
      significance: one minus the nominal confidence (0 < s < 0.5).
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
        threshold_strategy=auditing.Explicit(_bound_threshold(out, f)))) for f in fprs)


def stored_bound_counts(attack: dict) -> tuple[tuple[int, int, int], ...]:
    """``(TP low, TP high, FP)`` at each level of a stored attack summary's bound
    (``AttackMetrics.to_dict``): exact (low = high) from ``bound_counts``.

    Summaries written before the counts were stored have ``roc_tpr``, read by the earlier TPR
    rule, whose thresholds are the bound's own (``_bound_threshold``): a level whose k =
    ⌊f·n_out⌋ is a grid point's gives its TP exactly, any other is bracketed by the grid points
    around it (TP grows with k), and FP = k (continuous scores). Checked: the stored bound must
    lie within what the counts give at the stored significance.

    Raises:
      ValueError: the recovered counts do not reproduce the stored bound.
    """
    if "bound_counts" in attack:
        return tuple((tp, tp, fp) for tp, fp in attack["bound_counts"])
    n_in, n_out = attack["num_in"], attack["num_out"]
    grid = [(int(np.floor(f * n_out + 1e-9)), int(round(t * n_in)))
            for f, t in zip(ROC_FPRS, attack["roc_tpr"], strict=True)]
    out = []
    for f in attack["bound_fprs"]:
        k = int(np.floor(f * n_out + 1e-9))
        low = max((tp for g, tp in grid if g <= k), default=0)
        high = min((tp for g, tp in grid if g >= k), default=n_in)
        out.append((low, high, k))
    fit = dict(num_in=n_in, num_out=n_out, delta=attack["delta"],
               significance=attack["significance"])
    low = bound_from_counts([(lo, fp) for lo, _, fp in out], **fit)
    high = bound_from_counts([(hi, fp) for _, hi, fp in out], **fit)
    if not low - 1e-9 <= attack["epsilon_lower_bound"] <= high + 1e-9:
        raise ValueError(f"the stored bound {attack['epsilon_lower_bound']} is not what its "
                         f"ROC points give ([{low}, {high}]): the counts cannot be recovered.")
    return tuple(out)


def bound_range(attack: dict, *, significance: float) -> tuple[float, float]:
    """A stored attack's ε lower bound evaluated at ``significance`` (:func:`stored_bound_counts`):
    ``(low, high)``, equal when its counts are known exactly."""
    counts = stored_bound_counts(attack)
    fit = dict(num_in=attack["num_in"], num_out=attack["num_out"], delta=attack["delta"],
               significance=significance)
    return (bound_from_counts([(lo, fp) for lo, _, fp in counts], **fit),
            bound_from_counts([(hi, fp) for _, hi, fp in counts], **fit))


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
        k = int(np.floor(f * n_out + 1e-9))  # as _roc_threshold: pass scores above the (k+1)-th
        passed = np.ones_like(is_in) if k >= n_out else scores > out_desc[:, k, None]
        figures[f"tpr@{f:g}"] = (passed & is_in).sum(axis=1) / n_in
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
      tpr_at_fpr: TPR at each FPR of :data:`FPRS` (0.1 %, 1 %) on the empirical ROC; ``None``
        where ``num_out`` does not resolve the level (:func:`resolves`).
      unresolved: the reason per unresolved level, keyed ``"0.001"``, ...
      null: the figures' no-leakage bands, keyed ``"auc"``, ``"tpr@0.001"``, ... (and, for
        LiRA, ``"asr_max"``, ``"asr_mean"``; :func:`lira_null`).
      auc_hull / tpr_at_fpr_hull: jax_privacy's figures on the ROC's concave hull (``None``
        where unresolved, as ``tpr_at_fpr``).
      epsilon_lower_bound: ε such that the attack would be impossible under (ε', δ)-DP for
        every ε' < ε, at confidence 1 − ``significance`` *if* the trials were independent
        (:func:`epsilon_lower_bound`); over LiRA's pooled trials it is indicative
        (:data:`BOUND_NOTE`).
      bound_counts: ``(TP, FP)`` at each level of the bound's grid (:func:`bound_counts`).
      cap: the bound a perfect attack would get with these counts
        (:func:`largest_certifiable_epsilon`).
      significance, delta: the bound's inputs; bound_fprs: its grid.
      num_in, num_out: trials per side.
      roc_tpr: the empirical TPR at each FPR of :data:`ROC_FPRS` (the log-log ROC plots, which
        mark FPR < 1/``num_out`` as unresolved).
    """

    auc: float
    tpr_at_fpr: tuple[float | None, ...]
    unresolved: dict[str, str]
    null: dict[str, NullBand]
    auc_hull: float
    tpr_at_fpr_hull: tuple[float | None, ...]
    epsilon_lower_bound: float
    bound_counts: tuple[tuple[int, int], ...]
    cap: float
    significance: float
    delta: float
    num_in: int
    num_out: int
    roc_tpr: tuple[float, ...]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"fprs": FPRS, "bound_fprs": BOUND_FPRS,
                                           "tpr_rule": TPR_RULE,
                                           "epsilon_lower_bound_note": BOUND_NOTE}


def null_draws_for(num_trials: int) -> int:
    """Simulations for a null of ``num_trials`` scores: :data:`NULL_DRAWS` up to 4,000 trials,
    fewer above (at least 200: the band's 2.5 % point is then the 5th value) so that a null
    costs about as much as at 4,000 trials."""
    return int(max(200, min(NULL_DRAWS, 4_000_000 // max(1, num_trials))))


def attack_metrics(statistic: np.ndarray, inclusion: np.ndarray, *, delta: float,
                   significance: float = 0.05, null: dict[str, NullBand] | None = None
                   ) -> AttackMetrics:
    """Standard AUC, empirical TPR at 0.1 % and 1 % FPR (where resolved), their null bands, the
    hull figures, the ε lower bound with its counts and its cap.

    Args:
      statistic: ``[M, N]`` (or ``[m]``) higher = member
        (:func:`maskdp_jax.audit.lira.lira_statistic`).
      inclusion: the same shape, bool ground truth.
      delta: the δ of the guarantee being audited.
      significance: one minus the (nominal) confidence of the lower bound (0 < s < 0.5).
      null: the no-leakage bands; default :func:`score_null` at the same counts.
    """
    statistic = np.asarray(statistic, np.float64)
    inclusion = np.asarray(inclusion, bool)
    if statistic.shape != inclusion.shape:
        raise ValueError(f"statistic {statistic.shape} and inclusion {inclusion.shape} differ.")
    a, b = _split(statistic[inclusion], statistic[~inclusion])
    auditor = _auditing().CanaryScoreAuditor(a, b)
    shown = [resolves(f, b.size) for f in FPRS]
    hull = auditor.tpr_at_given_fpr(np.asarray(FPRS))
    return AttackMetrics(
        auc=standard_auc(a, b),
        tpr_at_fpr=tuple(t if ok else None for t, ok in zip(empirical_tpr_at_fpr(a, b), shown,
                                                            strict=True)),
        unresolved={f"{f:g}": unresolved_reason(f, b.size) for f, ok in zip(FPRS, shown,
                                                                             strict=True)
                    if not ok},
        null=null if null is not None else score_null(
            a.size, b.size, draws=null_draws_for(a.size + b.size)),
        auc_hull=float(auditor.attack_auroc()),
        tpr_at_fpr_hull=tuple(float(t) if ok else None for t, ok in zip(hull, shown,
                                                                        strict=True)),
        epsilon_lower_bound=epsilon_lower_bound(a, b, delta=delta, significance=significance),
        bound_counts=bound_counts(a, b),
        cap=largest_certifiable_epsilon(a.size, b.size, delta=delta, significance=significance),
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
    fits on the first query (``"<kind>"``), Carlini et al. 2022's released fixed-variance fits on
    the first query (``"<kind>_carlini"``: one total σ, median;
    :data:`maskdp_jax.audit.lira.CARLINI`), and, with
    ``num_queries`` > 1 augmentations, ``options``' fits on all of them (``"<kind>_aug"``)."""
    out = [(f"{k}_seed004", k, lira.SEED004, 1) for k in lira.KINDS]
    out += [(k, k, options, 1) for k in lira.KINDS]
    out += [(f"{k}_carlini", k, lira.CARLINI, 1) for k in lira.KINDS]
    if num_queries > 1:
        out += [(f"{k}_aug", k, options, num_queries) for k in lira.KINDS]
    return out


def lira_attacks(scores: np.ndarray, inclusion: np.ndarray, *, delta: float,
                 options: lira.Options | None = None, null_draws: int | None = None
                 ) -> dict[str, dict]:
    """Every attack of :func:`lira_variants` on ``scores [M, N]`` or ``[M, N, A]``
    (:mod:`maskdp_jax.audit.lira`): Gu & Chen 2024's mean per-example ASR and ASR^M,
    :func:`attack_metrics`, and every figure's null band (:func:`lira_null`, the same attack on iid
    scores). ``options``: default :class:`maskdp_jax.audit.lira.Options` (pooled σ below 64 shadow
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
