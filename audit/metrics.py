"""What the auditing literature reports for an attack: AUC, TPR at low FPR, an ε lower bound.

Computed by jax_privacy's ``auditing.CanaryScoreAuditor`` (a well-kept implementation of the
Clopper–Pearson bound of Jagielski et al. 2020 with Bonferroni-corrected threshold search, and of
the randomised-threshold ROC) from the attack statistic of :mod:`audit.lira` split by ground
truth.

**What the ε lower bound assumes.** Clopper–Pearson treats every (model, example) guess as an
independent trial. That holds exactly when each trial is its own training run with one
target (Jagielski et al.); pooling the M×N pairs of one shadow-model experiment shares models
across trials, so the interval is optimistic in its width, not in its centre. Report it as an
indication; the one-run audit (Steinke et al. 2023, many canaries in one run) is the rigorous
alternative for large models.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from audit import lira

#: The false-positive rates at which the true-positive rate is reported (0.1 % and 1 %).
FPRS = (0.001, 0.01)


def mean_std(values) -> tuple[float, float]:
    """``(mean, sample std)`` of a study's per-seed values (std 0 for a single seed)."""
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


@dataclasses.dataclass(frozen=True)
class AttackMetrics:
    """Attack quality over all (model, example) pairs.

    Attributes:
      auc: area under the ROC curve (0.5 = guessing).
      tpr_at_fpr: TPR at each FPR of :data:`FPRS` (0.1 %, 1 %).
      epsilon_lower_bound: ε such that the attack would be impossible under (ε', δ)-DP for
        every ε' < ε, at confidence 1 − ``significance`` (Clopper–Pearson).
      significance, delta: the bound's inputs.
      num_in, num_out: trials per side.
    """

    auc: float
    tpr_at_fpr: tuple[float, ...]
    epsilon_lower_bound: float
    significance: float
    delta: float
    num_in: int
    num_out: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"fprs": FPRS}


def attack_metrics(statistic: np.ndarray, inclusion: np.ndarray, *, delta: float,
                   significance: float = 0.05) -> AttackMetrics:
    """AUC, TPR at 0.1 % and 1 % FPR, and the Clopper–Pearson ε lower bound.

    Args:
      statistic: ``[M, N]`` higher = member (:func:`audit.lira.lira_statistic`).
      inclusion: ``[M, N]`` bool ground truth.
      delta: the δ of the guarantee being audited.
      significance: one minus the confidence of the lower bound (0 < s < 0.5).
    """
    try:
        from jax_privacy import auditing
    except ImportError as err:
        raise ImportError("audit metrics need jax-privacy: pip install -r requirements.txt"
                          ) from err
    statistic = np.asarray(statistic, np.float64)
    inclusion = np.asarray(inclusion, bool)
    auditor = auditing.CanaryScoreAuditor(statistic[inclusion], statistic[~inclusion])
    return AttackMetrics(
        auc=float(auditor.attack_auroc()),
        tpr_at_fpr=tuple(float(t) for t in auditor.tpr_at_given_fpr(np.asarray(FPRS))),
        epsilon_lower_bound=float(auditor.epsilon_clopper_pearson(significance, delta)),
        significance=significance, delta=delta,
        num_in=int(inclusion.sum()), num_out=int((~inclusion).sum()),
    )


def lira_attacks(scores: np.ndarray, inclusion: np.ndarray, *, delta: float) -> dict[str, dict]:
    """Offline and online LiRA on ``scores [M, N]`` (:mod:`audit.lira`): per kind, seed 004's mean
    per-example ASR and ASR^M, and :func:`attack_metrics`."""
    out = {}
    for kind in lira.KINDS:
        stat = lira.lira_statistic(scores, inclusion, kind=kind)
        asr = lira.per_example_asr(lira.member_guess(stat, kind=kind), inclusion)
        out[kind] = {"asr_mean": float(asr.mean()), "asr_max": lira.asr_max(asr),
                     **attack_metrics(stat, inclusion, delta=delta).to_dict()}
    return out
