r"""LiRA against shadow models trained with our step (seed 004, Sec. III): per-example ASR, ASR^M,
AUC, TPR at low FPR and an ε lower bound, for ``nonprivate``, ``dp`` and ``maskdp`` at several ε.

Per (mode, ε, seed): M shadow models on complementary halves of the embedded training videos
(:mod:`audit.shadows`: the training step, sampler, clipping, noise; σ calibrated by
:meth:`~maskdp_jax.plan.PrivacyPlan.calibrate` for ε on N/2 videos), every video scored on every
model (:func:`audit.shadows.scores`), the offline and online LiRA statistics with leave-one-out
fits (:mod:`audit.lira`), and the audit metrics (:mod:`audit.metrics`). ASR^M is reported next to
its chance level, the ASR^M of random guessing for the same M and N.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import optax

from audit import lira, metrics, shadows
from data import synthetic
from maskdp_jax.plan import Mode, PrivacyPlan
from run import model as run_model


def settings(config) -> list[tuple[str, float]]:
    """``(mode, ε)`` of the study: ``nonprivate`` once (ε = ∞), each private mode at each ε."""
    out = []
    for mode in config.modes:
        eps = (math.inf,) if not Mode(mode).is_private else tuple(config.epsilons)
        out += [(mode, float(e)) for e in eps]
    return out


def audit(config) -> dict[str, Any]:
    """Run the study of ``configs/audit_synthetic.py``; the report's ``rows`` hold one entry per
    (mode, ε, seed)."""
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
            "chance_asr_max": lira.chance_asr_max(config.num_shadows, n), "rows": rows}


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
    phi = shadows.scores(trained, frozen, data, apply_fn=apply_fn)
    row = {"mode": mode, "epsilon": epsilon, "seed": seed,
           "noise_multiplier": plan.noise_multiplier, "steps": plan.steps,
           "train_accuracy_in": float(np.mean((phi > 0)[inclusion])),
           "seconds": time.time() - start}
    row.update(metrics.lira_attacks(phi, inclusion, delta=config.delta))
    print(f"{mode} ε={epsilon:g} seed {seed}: ASR^M {row['online']['asr_max']:.3f} (online), "
          f"AUC {row['online']['auc']:.3f}, {row['seconds']:.0f} s", flush=True)
    return row, trained


def table(report: dict) -> list[dict[str, Any]]:
    """Mean and sample std over seeds per (mode, ε, kind)."""
    out = []
    for mode, eps in dict.fromkeys((r["mode"], r["epsilon"]) for r in report["rows"]):
        group = [r for r in report["rows"] if r["mode"] == mode and r["epsilon"] == eps]
        for kind in lira.KINDS:
            entry = {"mode": mode, "epsilon": eps, "kind": kind, "seeds": len(group)}
            for name in ("asr_max", "asr_mean", "auc", "epsilon_lower_bound"):
                entry[name] = metrics.mean_std([r[kind][name] for r in group])
            out.append(entry)
    return out


def markdown(config, report: dict) -> str:
    """The LiRA study's ``report.md``: setting and the table over modes and ε."""
    chance = report["chance_asr_max"]
    lines = [
        "# LiRA against shadow models (seed 004)",
        "",
        f"`{config.model.name}` ({config.model.finetune}) trained from its initial weights on "
        f"half of {report['num_videos']} embedded videos each, {config.num_shadows} shadow models "
        f"per setting (complementary halves), B = {config.batch_size}, "
        f"{config.num_epochs:g} epochs, C = {config.l2_clip_norm:g}, δ = {config.delta:g}, Adam "
        f"{config.learning_rate:g}; mean ± sample std over seeds {tuple(config.seeds)}. Score: "
        "log-odds of the true label on the full video; leave-one-out Gaussian fits.",
        "",
        f"ASR^M of random guessing with {config.num_shadows} models and {report['num_videos']} "
        f"videos: **{chance:.3f}** (the median maximum of {report['num_videos']} "
        f"Binomial({config.num_shadows}, 1/2)/{config.num_shadows}).",
        "",
        "| mode | ε | LiRA | ASR^M | mean ASR | AUC | ε lower bound (95 %) |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in table(report):
        eps = "∞" if math.isinf(e["epsilon"]) else f"{e['epsilon']:g}"
        cells = [f"{e[k][0]:.3f} ± {e[k][1]:.3f}" for k in ("asr_max", "asr_mean", "auc",
                                                           "epsilon_lower_bound")]
        lines.append(f"| {e['mode']} | {eps} | {e['kind']} | " + " | ".join(cells) + " |")
    lines += ["", f"Total time: {sum(r['seconds'] for r in report['rows']):.0f} s of training "
              "and scoring.", ""]
    return "\n".join(lines)
