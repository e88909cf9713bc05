"""The audits ``python -m maskdp_jax.audit`` runs, each from a config, each writing report.md and
report.json to its workdir."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from maskdp_jax import models, sampling
from maskdp_jax.accounting import accountant, events
from maskdp_jax.audit import canaries, coupled, feature_masking, membership, synthetic_release
from maskdp_jax.data import synthetic
from maskdp_jax.plan import PrivacyPlan
from maskdp_jax.reporting import plots
from maskdp_jax.run import model as run_model

#: The audits ``python -m maskdp_jax.audit`` runs, by the name a config gives in ``config.audit``.
AUDITS = ("canaries", "coupled", "dpcda_lira", "feature_masking", "lira")


def coupled_audit(config, workdir: str) -> dict[str, Any]:
    """The coupled-sampling attack on the embedded dataset, coupled vs decoupled sampling, next to
    the ε each scheme is accounted with (:mod:`maskdp_jax.audit.coupled`)."""
    train, _ = synthetic.make_splits(num_train=config.input.num_train, num_test=8,
                                     frames=config.input.frames,
                                     clip_frames=config.input.clip_frames,
                                     size=config.input.size, seed=config.seed)
    data = train.get_batch(np.arange(len(train)))  # centre clips [N, 1, T, S, S, 3]
    built = run_model.build(config.model, num_classes=train.num_classes, seed=config.seed)
    trainable, frozen, apply_fn = built.trainable, built.frozen, built.apply_fn
    n = len(train)
    q = config.batch_size / n
    steps_for_training = events.steps_for_epochs(num_examples=n, batch_size=config.batch_size,
                                                 epochs=config.num_epochs)
    plan = PrivacyPlan(mode="maskdp", num_examples=n, batch_size=config.batch_size,
                       steps=steps_for_training, l2_clip_norm=1.0,
                       noise_multiplier=config.noise_multiplier, delta=config.delta)
    common = dict(apply_fn=apply_fn, plan=plan, tokens=built.tokenizer())
    rows = []
    for scheme in ("coupled", "decoupled"):
        sampler = sampling.PoissonSampler(num_examples=n, expected_batch_size=config.batch_size,
                                          seed=config.seed)
        outcomes = coupled.attack_steps(trainable, frozen, data, sampler,
                                        steps=config.attack_steps, sampling_scheme=scheme,
                                        physical_batch_size=config.physical_batch_size, **common)
        hits = sum(o.hits for o in outcomes)
        rows.append({
            "sampling": scheme,
            "steps_attacked": len(outcomes),
            "public_batch_recovered_exactly": sum(o.public_exact for o in outcomes),
            "precision": hits / max(1, sum(o.recovered for o in outcomes)),
            "recall": hits / max(1, sum(o.private for o in outcomes)),
            "epsilon": accountant.epsilon(q=q, noise_multiplier=config.noise_multiplier,
                                          steps=steps_for_training, delta=config.delta,
                                          method="pld", sampling=scheme),
            "epsilon_method": ("PLD, revealed-sample bound" if scheme == "coupled"
                               else "PLD, Theorem 4.1's mechanism"),
        })
    report = {"audit": "coupled", "config": config.to_dict(), "num_videos": n, "q": q,
              "trainable_parameters": models.finetune.count_params(trainable),
              "training_steps": steps_for_training, "rows": rows}
    _write(workdir, report, _coupled_markdown(config, report))
    return report


def _coupled_markdown(config, report) -> str:
    lines = [
        "# Coupled-sampling attack",
        "",
        f"`{config.model.name}` ({config.model.finetune}: {report['trainable_parameters']:,} "
        f"trainable parameters) at its initial weights, {report['num_videos']} embedded videos, "
        f"q = {report['q']:.3g}. For each of {config.attack_steps} steps the attacker explains "
        "the step's noise-free public gradient by the videos' own public gradients (least "
        "squares) and guesses that the recovered batch is the private batch.",
        "",
        "| sampling | public batch recovered exactly | precision | recall | ε accounted "
        f"({config.num_epochs:g} epochs, σ = {config.noise_multiplier:g}, δ = "
        f"{config.delta:g}) |",
        "|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(f"| {r['sampling']} | {r['public_batch_recovered_exactly']}/"
                     f"{r['steps_attacked']} steps | {r['precision']:.2f} | {r['recall']:.2f} | "
                     f"{r['epsilon']:.3g} ({r['epsilon_method']}) |")
    lines += ["", "Coupled sampling hands the attacker the private batch; the accountant's "
              "revealed-sample bound is what that costs. Decoupled, the same attack finds only "
              "the public batch, whose overlap with the private one is chance (≈ q).", ""]
    return "\n".join(lines)


def _write(workdir: str, report: dict, markdown: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(workdir, "report.md"), "w") as f:
        f.write(markdown)


def run(config, workdir: str) -> dict[str, Any]:
    """Dispatch on ``config.audit`` (:data:`AUDITS`)."""
    if config.audit == "coupled":
        return coupled_audit(config, workdir)
    if config.audit == "lira":
        report = membership.audit(config)
        _write(workdir, report, membership.markdown(config, report))
        table = membership.table(report)
        plots.asr_vs_epsilon(table, os.path.join(workdir, "asr_vs_epsilon.png"),
                             title=f"LiRA on {config.num_shadows} shadow models per setting")
        plots.roc_loglog(table, report["roc_fprs"], os.path.join(workdir, "roc_loglog.png"),
                         title="LiRA, empirical ROC per setting (mean TPR over seeds)")
        return report
    if config.audit == "canaries":
        report = canaries.audit(config)
        _write(workdir, report, canaries.markdown(config, report))
        plots.canary_bounds(canaries.table(report), os.path.join(workdir, "canary_bounds.png"),
                            cap=report["cap"], title="Canaries, one-run audit")
        return report
    if config.audit == "feature_masking":
        report = feature_masking.audit(config)
        _write(workdir, report, feature_masking.markdown(config, report))
        plots.feature_masking(feature_masking.table(report), report["versions"],
                              os.path.join(workdir, "feature_masking.png"),
                              chance_accuracy=1 / len(synthetic.CLASS_NAMES),
                              chance_identity=1 / config.input.num_subjects,
                              title="Feature masking (Gu & Chen 2024 Alg. 1): identity, LiRA, "
                                    "accuracy")
        return report
    if config.audit == "dpcda_lira":
        report = synthetic_release.audit(config)
        _write(workdir, report, synthetic_release.markdown(config, report))
        return report
    raise ValueError(f"config.audit must be one of {AUDITS}; got {config.audit!r}.")
