r"""LiRA against shadow models trained with our step (Gu & Chen 2024, Sec. III): per-example ASR,
ASR^M, AUC, TPR at low FPR and an ε lower bound, for ``nonprivate``, ``dp`` and ``maskdp`` at
several ε.

Per (mode, ε, seed): M shadow models on complementary halves of the embedded training videos
(:mod:`maskdp_jax.audit.shadows`: the training step, sampler, clipping, noise; σ calibrated by
:meth:`~maskdp_jax.core.plan.PrivacyPlan.calibrate` for ε on N/2 videos), every video scored on
every model (:func:`maskdp_jax.audit.shadows.scores`, once per query augmentation of
``config.lira``), the offline and online LiRA statistics with leave-one-out fits
(:mod:`maskdp_jax.audit.lira`; Gu & Chen 2024's per-example fits, the configured fits, Carlini et
al.'s released fixed variance, the configured fits on every query:
:func:`maskdp_jax.audit.metrics.lira_variants`), and the audit metrics
(:mod:`maskdp_jax.audit.metrics`). Every figure is reported next to its null: the same attack on iid
scores with the same inclusion (:func:`maskdp_jax.audit.metrics.lira_null`), per attack, because
offline and online differ there.

The ε lower bound pools a seed's M × N (model, video) trials, which share models and videos: it
is **indicative**, never called "95 %". The best bound of a setting, a maximum over attacks and
seeds, is evaluated with Bonferroni over them (:func:`bound_table`), and every table states the
largest ε the design could certify, marking an ε above it "cannot fail at this ε".
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import optax

from maskdp_jax.audit import lira, metrics, shadows
from maskdp_jax.core.plan import Mode, PrivacyPlan
from maskdp_jax.data import synthetic
from maskdp_jax.run import model as run_model


def lira_config(config) -> tuple[lira.Options, tuple[str, ...]]:
    """``config.lira``'s fits and query augmentations, checked.

    Raises:
      ValueError: no ``config.lira``, an unknown variance, estimator or augmentation, or
        augmentations that do not start with ``"none"`` (the first query is the video itself:
        Gu & Chen 2024's reference attack uses it alone) or repeat one.
    """
    spec = config.get("lira")
    if spec is None:
        raise ValueError("config.lira is missing: add ml_collections.ConfigDict(dict("
                         "variance='auto', estimator='mean', augmentations=('none',)))")
    options = lira.Options(variance=spec.get("variance", "auto"),
                           estimator=spec.get("estimator", "mean"))
    augmentations = tuple(spec.get("augmentations", ("none",)))
    unknown = [a for a in augmentations if a not in shadows.QUERY_AUGMENTATIONS]
    if unknown:
        raise ValueError(f"config.lira.augmentations: unknown {unknown}; choose from "
                         f"{shadows.QUERY_AUGMENTATIONS}.")
    if not augmentations or augmentations[0] != "none" or len(set(augmentations)) < len(
            augmentations):
        raise ValueError("config.lira.augmentations must start with 'none' (the video itself) "
                         f"and name each one once; got {augmentations}.")
    return options, augmentations


def settings(config) -> list[tuple[str, float]]:
    """``(mode, ε)`` of the study: a mode without a private pass once (``nonprivate`` ε = ∞,
    ``public_only`` ε = 0), each private mode at each ε."""
    out = []
    for mode in config.modes:
        m = Mode(mode)
        eps = tuple(config.epsilons) if m.is_private else (m.fixed_epsilon,)
        out += [(mode, float(e)) for e in eps]
    return out


def audit(config) -> dict[str, Any]:
    """Run the study of ``configs/audit_synthetic.py``; the report's ``rows`` hold one entry per
    (mode, ε, seed)."""
    lira_config(config)  # bad options fail before any training
    n = config.input.num_train
    train, _ = synthetic.make_splits(num_train=n, num_test=8, frames=config.input.frames,
                                     clip_frames=config.input.clip_frames,
                                     size=config.input.size, seed=config.data_seed)
    data = train.get_batch(np.arange(n))  # the centre clip of every video
    built = run_model.build(config.model, num_classes=train.num_classes, seed=config.seed)
    trainable, frozen, apply_fn = built.trainable, built.frozen, built.apply_fn
    tokens = built.tokenizer()
    tx = optax.adam(config.learning_rate)  # one object: the compiled steps are reused
    rows = []
    for mode, eps in settings(config):
        for seed in config.seeds:
            row, _ = attack_setting(config, mode=mode, epsilon=eps, seed=seed, data=data,
                                    trainable=trainable, frozen=frozen, apply_fn=apply_fn,
                                    tokens=tokens, tx=tx)
            rows.append(row)
    return {"audit": "lira", "config": config.to_dict(), "num_videos": n,
            "chance_asr_max": lira.chance_asr_max(config.num_shadows, n),
            "roc_fprs": metrics.ROC_FPRS, "rows": rows}


def attack_setting(config, *, mode: str, epsilon: float, seed: int, data: dict[str, np.ndarray],
                   trainable, frozen, apply_fn, tokens, tx) -> tuple[dict[str, Any], Any]:
    """Train the ``config.num_shadows`` shadow models of one (mode, ε, seed) on ``data`` (N
    videos) and attack them: ``(row, trained)``, ``trained`` the models' stacked parameters."""
    n = len(data["label"])
    start = time.time()
    plan = PrivacyPlan.calibrate(
        mode=mode, num_examples=n // 2, batch_size=config.batch_size,
        epochs=config.num_epochs, l2_clip_norm=config.l2_clip_norm, delta=config.delta,
        target_epsilon=epsilon if Mode(mode).is_private else None)
    setup = shadows.ShadowSetup(plan=plan, physical_batch_size=config.physical_batch_size,
                                seed=seed)
    inclusion = shadows.complementary_inclusion(np.random.default_rng(seed),
                                                config.num_shadows, n)
    trained = shadows.train(setup, inclusion, data, trainable=trainable, frozen=frozen,
                            apply_fn=apply_fn, tx=tx, tokens=tokens, batching=config.batching,
                            chunk=config.chunk, mesh=shadows.device_mesh(config.batching))
    options, augmentations = lira_config(config)
    phi = shadows.scores(trained, frozen, data, apply_fn=apply_fn, augmentations=augmentations)
    row = {"mode": mode, "epsilon": epsilon, "seed": seed,
           "noise_multiplier": plan.noise_multiplier, "steps": plan.steps,
           "train_accuracy_in": float(np.mean((phi[..., 0] > 0)[inclusion])),
           "seconds": time.time() - start}
    row["attacks"] = metrics.lira_attacks(phi, inclusion, delta=config.delta, options=options)
    print(f"{mode} ε={epsilon:g} seed {seed}: AUC online {row['attacks']['online']['auc']:.3f}, "
          f"offline (Gu & Chen 2024) {row['attacks']['offline_seed004']['auc']:.3f}, "
          f"{row['seconds']:.0f} s", flush=True)
    return row, trained


#: The figures :func:`attack_table` summarises over seeds.
FIGURES = ("asr_max", "asr_mean", "auc", "tpr_at_fpr_0.001", "tpr_at_fpr_0.01",
           "epsilon_lower_bound", "auc_hull")
#: The TPR figures of :data:`FIGURES` and their FPR levels.
TPR_FIGURES = {f"tpr_at_fpr_{f:g}": f for f in metrics.FPRS}


def attack_figure(attack: dict, name: str) -> float | None:
    """One figure of an attack's summary (:func:`maskdp_jax.audit.metrics.lira_attacks`), the TPRs
    by ``tpr_at_fpr_<fpr>`` (``None`` where the OUT trials do not resolve it)."""
    if name in TPR_FIGURES:
        return attack["tpr_at_fpr"][list(attack["fprs"]).index(TPR_FIGURES[name])]
    return attack[name]


def null_figure(attack: dict, name: str) -> dict:
    """The null band of :func:`attack_figure`'s ``name`` (``asr_max``, ``asr_mean``, ``auc``,
    ``tpr_at_fpr_<fpr>``)."""
    key = f"tpr@{TPR_FIGURES[name]:g}" if name in TPR_FIGURES else name
    return attack["null"][key]


def fit_label(fit: str) -> str:
    """A stored ``fit`` label as the tables name it now: reports written before the variance was
    renamed call the pooled within-example σ "global σ"
    (:data:`maskdp_jax.audit.lira.RENAMED_VARIANCES`)."""
    return fit.replace("global σ", lira.VARIANCE_LABELS["pooled"])


def attack_table(rows: list[dict], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Mean and sample std over seeds of every attack's :data:`FIGURES` per group of ``rows``
    sharing ``keys`` (e.g. mode and ε), with the null bands averaged over the seeds' designs.

    Each entry also has ``num_in`` / ``num_out`` (trials per side), ``unresolved`` (the TPR
    levels ``num_out`` does not resolve, :func:`maskdp_jax.audit.metrics.resolves`: their
    figure is ``None``), ``earlier_tpr_rule`` (the report predates
    :data:`maskdp_jax.audit.metrics.TPR_RULE`) and ``cap`` (the largest bound the design could
    certify at the bound's level, :func:`maskdp_jax.audit.metrics.largest_certifiable_epsilon`)."""
    out = []
    for group_key in dict.fromkeys(tuple(r[k] for k in keys) for r in rows):
        group = [r for r in rows if tuple(r[k] for k in keys) == group_key]
        for attack in group[0]["attacks"]:
            first = group[0]["attacks"][attack]
            n_in, n_out = first["num_in"], first["num_out"]
            entry = dict(zip(keys, group_key, strict=True)) | {
                "attack": attack, "kind": first["kind"], "fit": fit_label(first["fit"]),
                "queries": first["queries"], "seeds": len(group), "num_in": n_in,
                "num_out": n_out, "earlier_tpr_rule": "tpr_rule" not in first,
                "unresolved": {name: metrics.unresolved_reason(f, n_out)
                               for name, f in TPR_FIGURES.items()
                               if not metrics.resolves(f, n_out)},
                "cap": metrics.largest_certifiable_epsilon(
                    n_in, n_out, delta=first["delta"], significance=first["significance"])}
            for name in FIGURES:
                entry[name] = None if name in entry["unresolved"] else metrics.mean_std(
                    [attack_figure(r["attacks"][attack], name) for r in group])
            for name in ("asr_max", "asr_mean", "auc", *TPR_FIGURES):
                bands = [null_figure(r["attacks"][attack], name) for r in group]
                entry["null_" + name] = {k: float(np.mean([b[k] for b in bands]))
                                         for k in ("mean", "low", "high")}
            entry["roc_tpr"] = np.mean([r["attacks"][attack]["roc_tpr"] for r in group],
                                       axis=0).tolist()
            out.append(entry)
    return out


def table(report: dict) -> list[dict[str, Any]]:
    """:func:`attack_table` per (mode, ε)."""
    return attack_table(report["rows"], ("mode", "epsilon"))


def bound_table(rows: list[dict], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per group of ``rows`` sharing ``keys``: the best ε lower bound over every attack and seed,
    **Bonferroni over that family** (each bound at significance / (attacks × seeds);
    :func:`maskdp_jax.audit.metrics.bound_range`), and the cap at the same level.

    Returns:
      entries with ``keys``, ``attacks`` and ``seeds`` (the family), ``best`` ``(low, high)``
      (equal unless a report predating stored counts only brackets them), ``uncorrected`` (the
      largest stored bound, each at the nominal level), ``cap`` and ``cannot_fail`` (the group's
      ``epsilon`` is above the cap).
    """
    out = []
    for group_key in dict.fromkeys(tuple(r[k] for k in keys) for r in rows):
        group = [r for r in rows if tuple(r[k] for k in keys) == group_key]
        trials = [a for r in group for a in r["attacks"].values()]
        first = trials[0]
        level = first["significance"] / len(trials)
        ranges = [metrics.bound_range(a, significance=level) for a in trials]
        cap = metrics.largest_certifiable_epsilon(first["num_in"], first["num_out"],
                                                  delta=first["delta"], significance=level)
        entry = dict(zip(keys, group_key, strict=True))
        out.append(entry | {
            "attacks": len(group[0]["attacks"]), "seeds": len(group),
            "significance": first["significance"],
            "best": (max(lo for lo, _ in ranges), max(hi for _, hi in ranges)),
            "uncorrected": max(a["epsilon_lower_bound"] for a in trials), "cap": cap,
            "cannot_fail": entry["epsilon"] > cap})
    return out


def with_null(entry: dict, name: str, digits: int = 3) -> str:
    """``"0.615 ± 0.020 (null 0.49 [0.44, 0.54])"``: a figure, its spread over seeds, and its
    null mean and 95 % band."""
    (m, sd), null = entry[name], entry["null_" + name]
    return (f"{m:.{digits}f} ± {sd:.{digits}f} (null {null['mean']:.2f} "
            f"[{null['low']:.2f}, {null['high']:.2f}])")


def tpr_cell(entry: dict, name: str) -> str:
    """A TPR figure with its null, "not resolved at n = …" where the OUT trials do not resolve
    it, and a † where it was read by the earlier threshold rule (:data:`EARLIER_TPR_NOTE`)."""
    if entry[name] is None:
        return f"not resolved at n = {entry['num_out']}"
    return with_null(entry, name) + (" †" if entry["earlier_tpr_rule"] else "")


#: The footnote of a † TPR (:func:`tpr_cell`).
EARLIER_TPR_NOTE = (
    "† Read, with its null, by the earlier threshold rule, at the ⌊α·n⌋-th largest OUT score, "
    "which counts that "
    "score as a false positive but drops the IN scores just below it: the TPR of one false "
    "positive fewer, biased low. report.json keeps the attack summaries, not the scores, so it "
    "cannot be read again on the ROC (`audit.metrics.empirical_tpr_at_fpr`); a rerun does.")


def bound_cell(best: tuple[float, float]) -> str:
    """``"0.27"``, or ``"0.27–0.31"`` when only a bracket is known."""
    low, high = best
    return f"{low:.2f}" if high - low < 0.005 else f"{low:.2f}–{high:.2f}"


#: How the tables name each attack of :func:`maskdp_jax.audit.metrics.lira_variants`.
ATTACK_NAMES = {"offline_seed004": "offline, Gu & Chen 2024",
                "online_seed004": "online, Gu & Chen 2024",
                "offline": "offline", "online": "online",
                "offline_carlini": "offline, Carlini et al. fixed σ",
                "online_carlini": "online, Carlini et al. fixed σ",
                "offline_aug": "offline, augmented", "online_aug": "online, augmented"}


def _eps(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:g}"


def table_lines(entries: list[dict], keys: tuple[str, ...]) -> list[str]:
    """The markdown table of :func:`attack_table` entries (first columns: ``keys``, one of them
    ``epsilon``), with :data:`EARLIER_TPR_NOTE` below it where a † cell is shown."""
    lines = [
        "| " + " | ".join(keys) + " | attack | fit, queries | AUC (null, 95 % band) | "
        "TPR @ 0.1 % FPR (null) | TPR @ 1 % FPR (null) | ASR^M (null) | mean ASR | "
        "ε lower bound (indicative) | largest certifiable ε | AUC (hull) |",
        "|" + "---|" * (len(keys) + 10),
    ]
    for e in entries:
        cells = [(_eps(e[k]) if k == "epsilon" else
                  f"{e[k]:g}" if isinstance(e[k], float) else str(e[k])) for k in keys]
        lines.append(
            "| " + " | ".join(cells) + f" | {ATTACK_NAMES.get(e['attack'], e['attack'])} | "
            f"{e['fit']}, {e['queries']} | {with_null(e, 'auc')} | "
            f"{tpr_cell(e, 'tpr_at_fpr_0.001')} | {tpr_cell(e, 'tpr_at_fpr_0.01')} | "
            f"{with_null(e, 'asr_max')} | {with_null(e, 'asr_mean')} | "
            f"{e['epsilon_lower_bound'][0]:.3f} ± {e['epsilon_lower_bound'][1]:.3f} | "
            f"{metrics.cap_cell(e['cap'], e['epsilon'])} | {e['auc_hull'][0]:.3f} |")
    if any(e["earlier_tpr_rule"] and any(e[n] is not None for n in TPR_FIGURES)
           for e in entries):
        lines += ["", EARLIER_TPR_NOTE]
    return lines


def bound_lines(entries: list[dict], keys: tuple[str, ...]) -> list[str]:
    """The markdown table of :func:`bound_table` entries (first columns: ``keys``)."""
    lines = [
        "| " + " | ".join(keys) + " | bounds compared | best ε lower bound (indicative, "
        "Bonferroni over the bounds compared) | largest certifiable ε at that level |",
        "|" + "---|" * (len(keys) + 3),
    ]
    for e in entries:
        cells = [(_eps(e[k]) if k == "epsilon" else str(e[k])) for k in keys]
        family = e["attacks"] * e["seeds"]
        lines.append(
            "| " + " | ".join(cells) + f" | {e['attacks']} attacks × {e['seeds']} "
            f"seed{'s' if e['seeds'] > 1 else ''} = {family} | {bound_cell(e['best'])} | "
            f"{metrics.cap_cell(e['cap'], e['epsilon'])} |")
    return lines


def missing_variants_note(rows: list[dict]) -> list[str]:
    """A paragraph for a report run before Carlini et al.'s fixed-variance attack was added
    (:func:`maskdp_jax.audit.metrics.lira_variants`); none when it is there."""
    if all(f"{k}_carlini" in rows[0]["attacks"] for k in lira.KINDS):
        return []
    return ["Carlini et al. 2022's released fixed-variance attack (one total σ of the scores, "
            "median centres: `lira.CARLINI`, attacks `offline_carlini` and `online_carlini`) is "
            "not in this report: the audit ran before it was added, and report.json keeps the "
            "attack summaries, not the shadow models' scores. A rerun reports it.", ""]


def markdown(config, report: dict) -> str:
    """The LiRA study's ``report.md``: setting, the table over every attack, the best bound per
    setting with its Bonferroni correction and its cap."""
    options, augmentations = lira_config(config)
    entries = table(report)
    n_out = entries[0]["num_out"]
    missing = missing_variants_note(report["rows"])
    carlini = "" if missing else (", Carlini et al. 2022's released fixed variance (one "
                                  "total σ, median) on one query")
    significance = report["rows"][0]["attacks"]["online"]["significance"]
    lines = [
        "# LiRA against shadow models (Gu & Chen 2024)",
        "",
        f"`{config.model.name}` ({config.model.finetune}) trained from its initial weights on "
        f"half of {report['num_videos']} embedded videos each, {config.num_shadows} shadow models "
        f"per setting (complementary halves), B = {config.batch_size}, "
        f"{config.num_epochs:g} epochs, C = {config.l2_clip_norm:g}, δ = {config.delta:g}, Adam "
        f"{config.learning_rate:g}; mean ± sample std over seeds {tuple(config.seeds)}. Score: "
        "log-odds of the true label on the full video; leave-one-out Gaussian fits. Attacks: "
        "Gu & Chen 2024's (per-example σ and mean, one query), the configured fits "
        f"({options.label(config.num_shadows)}) on one query{carlini}, and the configured fits "
        f"on the queries {', '.join(augmentations)} (`audit.shadows.augment`).",
        "",
        "Every figure is shown with its **null**: the mean and 95 % band of the same attack run "
        f"on iid scores with the same inclusion "
        f"({metrics.null_draws_for(config.num_shadows * report['num_videos'])} draws, seed "
        f"{metrics.NULL_SEED}): a figure inside its band is what an attack that finds nothing "
        "scores. AUC is the standard (Mann–Whitney) AUC; TPRs are read on the empirical ROC (the "
        "largest TPR with observed FPR ≤ α), and only where the OUT trials resolve the level, "
        f"n ≥ {metrics.MIN_FALSE_POSITIVES}/α (here n = {n_out} OUT trials per attack); the AUC "
        "under the ROC's concave hull (jax_privacy) is shown last, labelled hull. "
        f"The binomial chance level of ASR^M ({report['chance_asr_max']:.3f}) fits Gu & Chen "
        "2024's offline rule only; online ASR^M's null is higher.",
        "",
        "**The ε lower bound is indicative.** It is Clopper–Pearson at the pre-declared FPRs "
        f"{metrics.BOUND_FPRS}, Bonferroni over the {len(metrics.BOUND_FPRS)} of them, over the "
        f"{entries[0]['num_in']} + {n_out} (model, video) trials of a seed as if they were "
        f"independent; they share {config.num_shadows} models and {report['num_videos']} "
        "videos, so its nominal 95 % is not a confidence level. **Largest certifiable ε**: the "
        "bound a perfect attack would get with these trial counts at the same level; an ε above "
        "it cannot be refuted by this design (\"cannot fail at this ε\").",
        "",
        *table_lines(entries, ("mode", "epsilon")),
        "",
        "**The best bound of each setting**, the maximum over every attack and seed above, "
        "evaluated with Bonferroni over that family (each bound at "
        f"{100 * significance:g} % divided by the number of bounds compared, then by the "
        f"grid's {len(metrics.BOUND_FPRS)} levels), next to the cap at that level:",
        "",
        *bound_lines(bound_table(report["rows"], ("mode", "epsilon")), ("mode", "epsilon")),
        "",
        *missing,
        f"Total time: {sum(r['seconds'] for r in report['rows']):.0f} s of training "
        "and scoring.", "",
    ]
    return "\n".join(lines)
