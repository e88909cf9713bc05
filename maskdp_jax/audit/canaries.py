r"""Where MaskDP protects and where it does not, measured: canaries in the private region and in
the public region, audited in one training run (Steinke, Nasr and Jagielski
2023, "Privacy auditing with one (1) training run").

    python -m maskdp_jax.audit --config=configs/audit_canaries.py
    --workdir=docs/results/audit_canaries

**The canaries.** m extra videos from the embedded generator, each given a label other than its
own (the "label-flipping" part) and a pattern of its own: a fixed random ±``amplitude`` sign
pattern per canary, added to the normalised pixels of one region only: the background (mask 0,
private) or the avatar (mask 1, public). :func:`make_canaries` returns each canary twice, plain
and patterned; the two differ only inside the chosen region (tested).

**The neighbouring pairs.** Every canary is in the training set with its flipped label in both
worlds; a fair coin per canary decides whether it carries its pattern (IN) or not (OUT). Labels
and the public region are not what MaskDP protects, so they stay fixed; the only thing the coin
changes is the region's pixels of one video. For a private-region canary that is exactly
MaskDP's ``replace`` adjacency (one video's private tokens replaced by other values; docs/design.md,
"What is protected"), so σ is calibrated with ``adjacency="replace"`` and the target ε is the upper
bound the audit is held to. For a public-region canary MaskDP promises nothing (ε = ∞); ``dp``
covers both regions (a change of one video's pixels), ``nonprivate`` neither.

**The audit.** After one training run, each canary's score is how much its pattern raises the
log-odds of its label: φ(y | patterned) − φ(y | plain)
(:func:`maskdp_jax.audit.lira.log_odds_confidence`). A model that learned the pattern scores IN
canaries higher. jax_privacy's ``CanaryScoreAuditor.epsilon_one_run`` turns the scores into the ε
lower bound of Steinke et al. (:func:`one_run_bound`): guess "IN" for the k best-scored canaries,
for each k of a fixed, pre-declared set (:data:`GUESS_FRACTIONS` of m), Bonferroni over the set's
size, 95 % confidence. (jax_privacy's default takes Bonferroni over the ROC hull's vertices, a
number that depends on the scores.) The AUC is the standard (Mann–Whitney) AUC, next to its null:
the mean and 95 % band of the AUC of iid scores with the same IN/OUT counts
(:func:`maskdp_jax.audit.metrics.score_null`); the hull's AUC is kept as ``auc_hull``. With m
canaries the bound cannot exceed what m/2 correct guesses certify
(:func:`largest_certifiable_epsilon`): one run buys rigour, not reach. The bound's p-value also
carries a 2mδ term, so δ must be far below 1/(2m) (the config's 1e-5; at 1e-3 and m = 128 a perfect
attack certifies far less, tested).

Why several runs per setting: each (region, seed) is one run, vmapped together
(:mod:`maskdp_jax.audit.shadows`, the training step, sampler, clipping and noise of training); the
seeds draw new coins and new noise. The runs of a setting share one plan: every run holds the same
number of videos (the base set plus the m canaries).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
import optax

from maskdp_jax.audit import membership, metrics, shadows
from maskdp_jax.core.plan import Mode, PrivacyPlan
from maskdp_jax.data import synthetic
from maskdp_jax.run import model as run_model

REGIONS = ("private", "public")
SIGNIFICANCE = 0.05
#: The one-run bound's numbers of IN guesses, as fractions of m, fixed in advance.
GUESS_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2)


@dataclasses.dataclass(frozen=True)
class Canaries:
    """m canaries, each plain and patterned (``[m, K, T, H, W, C]`` float32 normalised videos).

    Attributes:
      plain / patterned: the videos without and with the canary's pattern.
      mask: ``[m, K, T, H, W]`` the canaries' pixel masks (1 = public), the same in both.
      label: ``[m]`` int32 flipped labels (never the video's own class).
      region: ``"private"`` (pattern on mask 0) or ``"public"`` (on mask 1).
    """

    plain: np.ndarray
    patterned: np.ndarray
    mask: np.ndarray
    label: np.ndarray
    region: str


def make_canaries(batch: dict[str, np.ndarray], *, region: str, num_classes: int,
                  amplitude: float, rng: np.random.Generator) -> Canaries:
    """Canaries from ``batch`` (``video [m, K, T, H, W, C]`` normalised float32, ``mask``,
    ``label``): a flipped label and a per-canary sign pattern inside ``region`` only.

    The pattern is one random ±``amplitude`` image per canary, the same in every frame, added
    where the frame's mask marks ``region``: it moves with the avatar for public canaries.

    Raises:
      ValueError: unknown region, amplitude <= 0, fewer than two classes, or a canary whose
        region is empty in every frame (its pattern would be invisible).
    """
    if region not in REGIONS:
        raise ValueError(f"region must be one of {REGIONS}; got {region!r}.")
    if not amplitude > 0:
        raise ValueError(f"amplitude must be > 0; got {amplitude}.")
    if num_classes < 2:
        raise ValueError(f"label-flipping canaries need >= 2 classes; got {num_classes}.")
    video = np.asarray(batch["video"], np.float32)
    mask = np.asarray(batch["mask"])
    inside = (mask == (1 if region == "public" else 0))[..., None]  # [m, K, T, H, W, 1]
    empty = ~inside.reshape(len(video), -1).any(axis=1)
    if empty.any():
        raise ValueError(f"canaries {np.flatnonzero(empty).tolist()} have no {region} pixel in "
                         "any frame; their pattern would be invisible.")
    m, _, _, h, w, c = video.shape
    signs = rng.choice(np.array([-1.0, 1.0], np.float32), size=(m, 1, 1, h, w, c))
    patterned = np.where(inside, video + amplitude * signs, video).astype(np.float32)
    shift = rng.integers(1, num_classes, size=m)
    label = ((np.asarray(batch["label"]) + shift) % num_classes).astype(np.int32)
    return Canaries(plain=video, patterned=patterned, mask=mask, label=label, region=region)


def largest_certifiable_epsilon(num_canaries: int, *, significance: float = SIGNIFICANCE) -> float:
    """The ε lower bound of a perfect attack that guesses the m/2 IN canaries, all correct: the
    largest ε with P[Binomial(m/2, e^ε/(1+e^ε)) = m/2] <= significance / len(GUESS_FRACTIONS)
    (Steinke et al. 2023 with δ = 0 at :func:`one_run_bound`'s Bonferroni-corrected level), i.e.
    ε = logit((significance / 4)^(2/m)). 0 when even that certifies nothing (fewer than about
    11 canaries at 95 %)."""
    p = (significance / len(GUESS_FRACTIONS)) ** (2.0 / num_canaries)
    return max(0.0, math.log(p / (1.0 - p)))


def perfect_attack_bound(num_canaries: int, *, delta: float,
                         significance: float = SIGNIFICANCE) -> float:
    """The design's reach at ``delta``: :func:`one_run_bound` of a perfect attack on m canaries
    with m/2 IN (every IN canary scored above every OUT one). Unlike
    :func:`largest_certifiable_epsilon` (δ = 0), it counts the bound's 2mδ term, so it is the
    largest ε *this* design, at this δ, could certify: a promised ε above it cannot be refuted."""
    coin = np.arange(num_canaries) % 2 == 0
    return one_run_bound(coin.astype(np.float64), coin, delta=delta, significance=significance)


def design_cap(report: dict) -> float:
    """The cap of an audit's ``report``: :func:`perfect_attack_bound` at its canary count and δ,
    derived from the design whenever the tables are written, so that they follow the current
    rule also for a report.json whose stored ``cap`` an earlier rule (δ = 0) computed."""
    return perfect_attack_bound(report["num_canaries"], delta=report["config"]["delta"])


def one_run_bound(score: np.ndarray, coin: np.ndarray, *, delta: float,
                  significance: float = SIGNIFICANCE) -> float:
    """Steinke et al.'s one-run ε lower bound of ``score [m]`` (higher = IN) against ``coin [m]``:
    the best over k ∈ ⌈f·m⌉ for f in :data:`GUESS_FRACTIONS` of the bound with the k best scores
    guessed IN (jax_privacy's ``epsilon_one_run`` at that explicit threshold), each at
    ``significance / len(GUESS_FRACTIONS)``: a Bonferroni correction over a set fixed before
    the scores are seen."""
    try:
        from jax_privacy import auditing
    except ImportError as err:
        raise ImportError("the canary audit needs jax-privacy: pip install -e '.[audit]'"
                          ) from err
    score, coin = np.asarray(score, np.float64), np.asarray(coin, bool)
    auditor = auditing.CanaryScoreAuditor(score[coin], score[~coin])
    ranked = np.sort(score)[::-1]
    bounds = [auditor.epsilon_one_run(
        significance / len(GUESS_FRACTIONS), delta,
        threshold_strategy=auditing.Explicit(float(ranked[math.ceil(f * len(score)) - 1])))
        for f in GUESS_FRACTIONS]
    return float(max(bounds))


def one_run_metrics(score: np.ndarray, coin: np.ndarray, *, delta: float) -> dict[str, Any]:
    """The one-run ε lower bound (:func:`one_run_bound`), the standard AUC with its null band,
    and the hull's AUC of ``score [m]`` (higher = IN) against the coins ``coin [m]`` (True =
    IN)."""
    score, coin = np.asarray(score, np.float64), np.asarray(coin, bool)
    if coin.all() or not coin.any():
        raise ValueError("the coins put every canary on one side; draw more canaries.")
    m = metrics.attack_metrics(score, coin, delta=delta)
    return {"epsilon_lower_bound": one_run_bound(score, coin, delta=delta),
            "auc": m.auc, "null_auc": dataclasses.asdict(m.null["auc"]),
            "auc_hull": m.auc_hull,
            "in_above_out_median": float(np.mean(score[coin] > np.median(score[~coin])))}


def upper_bound(mode: str, region: str, epsilon: float) -> float:
    """The ε the accountant promises for a change of one canary's ``region`` pixels."""
    m = Mode(mode)
    if m.uses_views and region == "public":  # public pixels are not protected
        return math.inf
    return epsilon if m.is_private else m.fixed_epsilon


def audit(config) -> dict[str, Any]:
    """Run the study of ``configs/audit_canaries.py``: one row per (mode, ε, region, seed)."""
    n_base, m = config.input.num_train, config.num_canaries
    shape = dict(frames=config.input.frames, clip_frames=config.input.clip_frames,
                 size=config.input.size)
    # the study's generator setting (the default experiment's "person": the label in the avatar)
    shape["setting"] = config.input.get("setting", "context")
    train, _ = synthetic.make_splits(num_train=n_base, num_test=8, seed=config.data_seed, **shape)
    source, _ = synthetic.make_splits(num_train=m, num_test=8, seed=config.data_seed + 1000,
                                      **shape)
    regions = tuple(config.get("regions", REGIONS))
    if not regions or set(regions) - set(REGIONS):
        raise ValueError(f"regions must be a non-empty subset of {REGIONS}; got {regions}.")
    base = train.get_batch(np.arange(n_base))
    rng = np.random.default_rng(config.data_seed)
    canaries = {r: make_canaries(source.get_batch(np.arange(m)), region=r,
                                 num_classes=train.num_classes, amplitude=config.amplitude,
                                 rng=rng) for r in regions}
    # One data array: the base videos, then per region the m plain and the m patterned canaries.
    # A run's inclusion row takes the base and, per canary, its plain or its patterned copy.
    parts = [base] + [{"video": v, "mask": c.mask, "label": c.label}
                      for c in canaries.values() for v in (c.plain, c.patterned)]
    data = {k: np.concatenate([p[k] for p in parts]) for k in ("video", "mask", "label")}
    offset = {r: n_base + 2 * m * i for i, r in enumerate(regions)}
    n = n_base + m  # videos per run
    built = run_model.build(config.model, num_classes=train.num_classes, seed=config.seed)
    trainable, frozen, apply_fn = built.trainable, built.frozen, built.apply_fn
    tokens = built.tokenizer()
    tx = optax.adam(config.learning_rate)
    runs = [(r, s) for s in config.seeds for r in regions]
    rows = []
    for mode, eps in membership.settings(config):
        start = time.time()
        plan = PrivacyPlan.calibrate(
            mode=mode, num_examples=n, batch_size=config.batch_size, epochs=config.num_epochs,
            l2_clip_norm=config.l2_clip_norm, delta=config.delta, adjacency="replace",
            target_epsilon=eps if Mode(mode).is_private else None)
        coins, inclusion = {}, np.zeros((len(runs), len(data["label"])), bool)
        for i, (region, seed) in enumerate(runs):
            coin = np.random.default_rng([seed, REGIONS.index(region)]).random(m) < 0.5
            coins[i] = coin
            inclusion[i, :n_base] = True
            inclusion[i, offset[region] + np.arange(m) + m * coin] = True
        setup = shadows.ShadowSetup(plan=plan, physical_batch_size=config.physical_batch_size,
                                    seed=config.data_seed)
        trained = shadows.train(setup, inclusion, data, trainable=trainable, frozen=frozen,
                                apply_fn=apply_fn, tx=tx, tokens=tokens, batching="vmap",
                                chunk=len(runs), mesh=shadows.device_mesh("vmap"))
        phi = shadows.scores(trained, frozen, data, apply_fn=apply_fn)  # [runs, all videos]
        seconds = time.time() - start
        for i, (region, seed) in enumerate(runs):
            lo = offset[region]
            score = phi[i, lo + m:lo + 2 * m] - phi[i, lo:lo + m]  # patterned - plain
            row = {"mode": mode, "epsilon": eps, "region": region, "seed": seed,
                   "noise_multiplier": plan.noise_multiplier, "steps": plan.steps,
                   "upper_bound": upper_bound(mode, region, eps), "num_in": int(coins[i].sum()),
                   "seconds": seconds / len(runs)}
            row.update(one_run_metrics(score, coins[i], delta=config.delta))
            rows.append(row)
            print(f"{mode} ε={eps:g} {region} seed {seed}: ε lower bound "
                  f"{row['epsilon_lower_bound']:.2f} (upper {row['upper_bound']:g}), "
                  f"AUC {row['auc']:.3f}", flush=True)
    return {"audit": "canaries", "config": config.to_dict(), "num_videos": n,
            "num_canaries": m, "cap": perfect_attack_bound(m, delta=config.delta),
            "rows": rows}


def table(report: dict) -> list[dict[str, Any]]:
    """Mean and sample std over seeds per (mode, ε, region). An ε promised (``upper_bound``)
    above the design's cap (:func:`design_cap`) is one no run could refute
    (:func:`maskdp_jax.audit.metrics.cap_cell` says so in the tables)."""
    out = []
    keys = dict.fromkeys((r["mode"], r["epsilon"], r["region"]) for r in report["rows"])
    for mode, eps, region in keys:
        group = [r for r in report["rows"]
                 if (r["mode"], r["epsilon"], r["region"]) == (mode, eps, region)]
        entry = {"mode": mode, "epsilon": eps, "region": region, "seeds": len(group),
                 "upper_bound": group[0]["upper_bound"]}
        for name in ("epsilon_lower_bound", "auc", "auc_hull"):
            entry[name] = metrics.mean_std([r[name] for r in group])
        entry["null_auc"] = {k: float(np.mean([r["null_auc"][k] for r in group]))
                             for k in ("mean", "low", "high")}
        entry["violations"] = sum(r["epsilon_lower_bound"] > r["upper_bound"] for r in group)
        out.append(entry)
    return out


def markdown(config, report: dict) -> str:
    """The canary audit's ``report.md``: setting, the table of lower bounds, what it shows."""
    cap = design_cap(report)
    lines = [
        "# Canaries in the " + " and in the ".join(
            dict.fromkeys(r["region"] for r in report["rows"])) + " region, one-run audit",
        "",
        f"`{config.model.name}` ({config.model.finetune}) "
        + (f"fine-tuned from `{config.model.init_from}`" if config.model.get("init_from")
           else "trained from its initial weights")
        + f" on {config.input.num_train} embedded videos "
        f"(setting `{config.input.get('setting', 'context')}`) plus "
        f"{report['num_canaries']} label-flipped canaries (N = {report['num_videos']}), "
        f"B = {config.batch_size}, "
        f"{config.num_epochs:g} epochs, C = {config.l2_clip_norm:g}, δ = {config.delta:g}, Adam "
        f"{config.learning_rate:g}; σ calibrated for ε under `replace` adjacency (PLD). Each "
        f"canary carries its ±{config.amplitude:g} pattern (IN) or not (OUT) by a fair coin, "
        "in one region only; score: log-odds of its label with the pattern minus without. "
        f"Mean ± sample std over seeds {tuple(config.seeds)}, one training run each.",
        "",
        f"The largest lower bound {report['num_canaries']} canaries can certify at this δ "
        f"(a perfect attack: every IN guess right, 95 %): **{cap:.2f}**; a promised ε "
        "above it cannot be refuted by one run of this size, whatever the model leaks "
        "(\"cannot fail at this ε\" in the table). "
        "The bound guesses IN for the top "
        f"{', '.join(str(math.ceil(f * report['num_canaries'])) for f in GUESS_FRACTIONS)} "
        "scores, "
        f"Bonferroni over those {len(GUESS_FRACTIONS)}. AUC: the standard (Mann–Whitney) AUC; "
        "its null is the mean and 95 % band of the AUC of iid scores at the same IN/OUT counts "
        f"({metrics.NULL_DRAWS} draws), averaged over the runs; the AUC under the ROC's concave "
        "hull (jax_privacy's figure) is last, labelled hull.",
        "",
        "| mode | ε | canaries in | ε promised | ε lower bound (95 %) | AUC | AUC null (95 % "
        "band) | runs with lower > promised | largest certifiable ε | AUC (hull) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in table(report):
        eps = "∞" if math.isinf(e["epsilon"]) else f"{e['epsilon']:g}"
        up = "∞" if math.isinf(e["upper_bound"]) else f"{e['upper_bound']:g}"
        lb, auc, null = e["epsilon_lower_bound"], e["auc"], e["null_auc"]
        lines.append(f"| {e['mode']} | {eps} | {e['region']} region | {up} | "
                     f"{lb[0]:.2f} ± {lb[1]:.2f} | {auc[0]:.3f} ± {auc[1]:.3f} | "
                     f"{null['mean']:.3f} [{null['low']:.3f}, {null['high']:.3f}] | "
                     f"{e['violations']}/{e['seeds']} | "
                     f"{metrics.cap_cell(cap, e['upper_bound'])} | "
                     f"{e['auc_hull'][0]:.3f} |")
    lines += ["", f"Total time: {sum(r['seconds'] for r in report['rows']):.0f} s of training "
              "and scoring.", ""]
    return "\n".join(lines)
