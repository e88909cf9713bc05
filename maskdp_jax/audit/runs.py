"""The audits ``python -m maskdp_jax.audit`` runs, each from a config, each writing report.json,
report.md and its plots to its workdir; :func:`only_report` writes report.md and the plots again
from a report.json alone (``--only_report``: no training)."""

from __future__ import annotations

import json
import os
from typing import Any

import ml_collections
import numpy as np

from maskdp_jax import models
from maskdp_jax.accounting import accountant, events
from maskdp_jax.audit import canaries, coupled, feature_masking, membership, synthetic_release
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.randomness import Randomness
from maskdp_jax.data import synthetic
from maskdp_jax.reporting import plots
from maskdp_jax.run import model as run_model

#: The audits ``python -m maskdp_jax.audit`` runs, by the name a config gives in ``config.audit``.
AUDITS = ("canaries", "coupled", "dpcda_lira", "feature_masking", "lira")


def coupled_audit(config) -> dict[str, Any]:
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
        sampler = Randomness(mode="seeded", seed=config.seed).sampler(
            num_examples=n, expected_batch_size=config.batch_size)
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
    return {"audit": "coupled", "config": config.to_dict(), "num_videos": n, "q": q,
            "trainable_parameters": models.finetune.count_params(trainable),
            "training_steps": steps_for_training, "rows": rows}


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


#: Each audit's study (``config -> report``), by :data:`AUDITS` name.
_STUDIES = {"canaries": canaries.audit, "coupled": coupled_audit,
            "dpcda_lira": synthetic_release.audit, "feature_masking": feature_masking.audit,
            "lira": membership.audit}


def _check_audit(name: str) -> None:
    if name not in AUDITS:
        raise ValueError(f"config.audit must be one of {AUDITS}; got {name!r}.")


def run(config, workdir: str) -> dict[str, Any]:
    """Run the audit ``config.audit`` names (:data:`AUDITS`) and write report.json, report.md and
    its plots to ``workdir``; the report."""
    _check_audit(config.audit)
    report = _STUDIES[config.audit](config)
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "report.json"), "w") as f:  # compact: report.md is the page
        json.dump(report, f, separators=(",", ":"))
    write_outputs(config, workdir, report)
    return report


def only_report(workdir: str) -> dict[str, Any]:
    """Write ``workdir``'s report.md and plots again from its report.json, with the config the
    report records (what ran, whatever the config file says now); train nothing. The report.

    Raises:
      FileNotFoundError: no report.json in ``workdir``.
      ValueError: a report.json that no audit wrote.
    """
    path = os.path.join(workdir, "report.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"--only_report: no {path}; run the audit first.")
    with open(path) as f:
        report = json.load(f)
    if "config" not in report or report.get("audit") not in AUDITS:
        raise ValueError(f"--only_report: {path} is not an audit's report (its 'audit' is "
                         f"{report.get('audit')!r}; one of {AUDITS}).")
    write_outputs(ml_collections.ConfigDict(report["config"]), workdir, report)
    return report


def write_outputs(config, workdir: str, report: dict[str, Any]) -> None:
    """``report.md`` and the plots of an audit's ``report`` (what :func:`run` returns), into
    ``workdir``: a function of the report and its config only."""
    _check_audit(config.audit)
    if config.audit == "coupled":
        _write_markdown(workdir, _coupled_markdown(config, report))
    elif config.audit == "lira":
        _write_markdown(workdir, membership.markdown(config, report))
        table = membership.table(report)
        plots.asr_vs_epsilon(table, os.path.join(workdir, "asr_vs_epsilon.png"),
                             title=f"LiRA on {config.num_shadows} shadow models per setting")
        earlier = any(e["earlier_tpr_rule"] for e in table)
        plots.roc_loglog(table, report["roc_fprs"], os.path.join(workdir, "roc_loglog.png"),
                         title="LiRA, empirical ROC per setting (mean TPR over seeds)"
                               + ("\nTPR read by the earlier threshold rule (biased low; "
                                  "report.md)" if earlier else ""))
    elif config.audit == "canaries":
        _write_markdown(workdir, canaries.markdown(config, report))
        plots.canary_bounds(canaries.table(report), os.path.join(workdir, "canary_bounds.png"),
                            cap=canaries.design_cap(report),
                            title="Canaries, one-run audit")
    elif config.audit == "feature_masking":
        _write_markdown(workdir, feature_masking.markdown(config, report))
        plots.feature_masking(feature_masking.table(report), report["versions"],
                              os.path.join(workdir, "feature_masking.png"),
                              chance_accuracy=1 / len(synthetic.CLASS_NAMES),
                              chance_identity=1 / config.input.num_subjects,
                              title="Feature masking (Gu & Chen 2024 Alg. 1): identity, LiRA, "
                                    "accuracy")
    else:
        _write_markdown(workdir, synthetic_release.markdown(config, report))


def _write_markdown(workdir: str, markdown: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "report.md"), "w") as f:
        f.write(markdown)
