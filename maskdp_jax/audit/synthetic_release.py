"""LiRA against a classifier trained on a DP-CDA synthetic release.

The attacked pipeline is the product's: :mod:`maskdp_jax.release.run` mixes a private set at a
calibrated σx and a classifier is trained on the synthetic samples. Each of M shadow pipelines runs
on a random half of the private training set (balanced inclusion,
:func:`maskdp_jax.audit.lira.balanced_inclusion`); every private record is then scored on every
shadow classifier by the log-odds of its true label, and LiRA (offline and online,
leave-one-out) guesses membership.
The records' membership in the *release's* input is what the accountant's ε bounds, and the
classifier is post-processing of the release, so the attack's ε lower bound must stay below the
accountant's ε.

A study, not a release: shadows use seeded randomness (reproducible), and the class-size lower
bound of a half is ``shadow_min_class_size`` (public: half of the release's bound, less a
margin for the random split).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm import tqdm

from maskdp_jax.accounting import dpcda
from maskdp_jax.audit import lira, membership, metrics
from maskdp_jax.core import randomness
from maskdp_jax.release import datasets, run


def shadow_scores(config, train: datasets.Split, inclusion: np.ndarray, *, epsilon: float,
                  order: int) -> np.ndarray:
    """``[M, N]`` log-odds of every private record's label on each shadow classifier.

    Args:
      train: the private training split, clipped (:func:`maskdp_jax.release.run.load`).
    """
    shadow_config = config.copy_and_resolve_references()
    with shadow_config.unlocked():
        shadow_config.min_class_size = config.audit_lira.shadow_min_class_size
    scores = np.empty(inclusion.shape)
    for m, members in enumerate(tqdm(inclusion, desc=f"shadows at ε={epsilon:g}", unit="model")):
        half = datasets.Split(train.features[members], train.labels[members], train.class_names)
        privacy = run.privacy_for(shadow_config, half, order=order, epsilon=epsilon,
                                  label_noise=False)
        key = randomness.Randomness(mode="seeded", seed=1000 + m).noise_key()
        mixture = run.synthesize(key, shadow_config, half, privacy)
        model = run.make_classifier(config.classifier, m).fit(mixture.features, mixture.labels)
        logits = model.decision_function(train.features)
        scores[m] = np.asarray(lira.log_odds_confidence(logits, train.labels))
    return scores


def audit(config) -> dict[str, Any]:
    """LiRA at every ε of ``config.audit_lira.epsilons``: per-example ASR (mean, ASR^M), AUC,
    TPR at low FPR and the (indicative) ε lower bound, next to the accountant's ε."""
    spec = config.audit_lira
    train, _ = run.load(config)
    inclusion = lira.balanced_inclusion(np.random.default_rng(spec.seed), spec.num_shadows,
                                        len(train.labels))
    for members in inclusion:  # every half against the public bound its accounting assumes
        dpcda.check_class_sizes(
            class_sizes=np.bincount(train.labels[members], minlength=train.num_classes),
            min_class_size=spec.shadow_min_class_size)
    rows = []
    for eps in spec.epsilons:
        scores = shadow_scores(config, train, inclusion, epsilon=eps, order=spec.order)
        rows.append({"epsilon": eps,
                     "attacks": metrics.lira_attacks(scores, inclusion, delta=config.delta)})
    return {"audit": "dpcda_lira", "config": config.to_dict(), "num_records": len(train.labels),
            "chance_asr_max": lira.chance_asr_max(spec.num_shadows, len(train.labels)),
            "rows": rows}


def markdown(config, report) -> str:
    """The ``report.md`` of LiRA against a classifier trained on a DP-CDA release."""
    spec = config.audit_lira
    lines = [
        f"# LiRA against a classifier trained on a DP-CDA release ({config.data.source})",
        "",
        f"{spec.num_shadows} shadow pipelines (DP-CDA at l = {spec.order}, exact labels, then "
        f"`{config.classifier}`), each on a random half of the {report['num_records']} private "
        f"records; every record scored on every shadow. δ = {config.delta:g}. The ε lower "
        "bound is **indicative**: Clopper–Pearson over all model × record trials as if they were "
        f"independent (they share {spec.num_shadows} shadows and {report['num_records']} "
        f"records), at the pre-declared FPRs {metrics.BOUND_FPRS}, Bonferroni over them; the "
        "largest certifiable ε is what a perfect attack would get with these trial counts, and "
        "an ε above it cannot be refuted by this design. Every figure next to its null: the "
        "mean and 95 % band of the same attack on iid scores with the same inclusion. AUC is "
        "the standard (Mann–Whitney) AUC; TPRs are read on the empirical ROC (the largest TPR "
        f"with observed FPR ≤ α, where n ≥ {metrics.MIN_FALSE_POSITIVES}/α OUT trials resolve "
        "it). The binomial "
        f"chance level of ASR^M, {report['chance_asr_max']:.3f} (the median maximum of "
        f"{report['num_records']} binomial ASRs over {spec.num_shadows} models), fits Gu & "
        "Chen 2024's offline rule only.",
        "",
        *membership.table_lines(membership.attack_table(report["rows"], ("epsilon",)),
                                ("epsilon",)),
        "",
        "The best bound at each ε, the maximum over the attacks above, with Bonferroni over them "
        "(each bound at the significance divided by their number):",
        "",
        *membership.bound_lines(membership.bound_table(report["rows"], ("epsilon",)),
                                ("epsilon",)),
        "",
        *membership.missing_variants_note(report["rows"]),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"
