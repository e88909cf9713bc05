r"""Feature masking by explainer sensitivity (Gu & Chen 2024, Sec. IV-C and Algorithm 1).

**Features** are the tokeniser's cells (:mod:`maskdp_jax.core.tokenizer`; ``[T', H', W']``, 4 x 8 x
8 for the CPU presets): the unit a view hides. Hiding a cell writes the tokeniser's fill value into
its pixels, the same operation the public view applies to private cells.

**Sensitivities.** An *identity model* predicts the subject z, a *utility model* the action y.
An explainer attributes each model's output on each video, φ = log-odds of the true label
(:func:`maskdp_jax.audit.lira.log_odds_confidence`), to the cells: the coalition game is "φ with
only these cells visible" (every other cell hidden). Positive parts are kept (Gu & Chen 2024: only a
feature's *positive* contribution to a task counts) and averaged per subject into S_z (identity) and
U_z (utility). Gu & Chen 2024 pairs S_z with U_y, the mean over a *utility* class; a mask applied by
subject needs the utility of *that subject's* videos, so U_z is the mean utility sensitivity of
subject z's videos (with one action per subject both readings coincide). Said here because the
paper is vague about it.

**Explainers** (:data:`EXPLAINERS`). ``shap``: the ``shap`` package's permutation explainer
(antithetic permutations; with ``max_evals = p (2K + 1)`` it walks p permutations forward and
back). It is *exact in sum* (Σ_j s_j = φ(all) − φ(none) to float rounding, reported as the
additivity error) and deterministic given its seed. ``lime``: the ``lime`` package's weighted
ridge fit (:class:`lime.lime_base.LimeBase`) on random coalitions (each sample hides a uniformly
random number of random cells, as ``lime_image`` does with superpixels; cosine distance, kernel
width 0.25), reported with its local R². At the same budget of model evaluations SHAP is
cheaper (LIME's weighted ridge fit costs more than SHAP's bookkeeping), exact in sum, and in the
committed audit (``docs/results/audit_feature_masking``, its report's ``explainers``) put more of
the identity sensitivity on the subjects' emblems, the planted ground truth. So SHAP is the
default (Gu & Chen 2024 Fig. 9 also found it the more stable).

**Masks** (:func:`keep_cells`). Per subject, the binary programme
``max mᵀU_z  s.t.  mᵀS_z ≤ (1 − α) ΣS_z`` (m = 1 keeps a cell) by :func:`scipy.optimize.milp`
(HiGHS branch and bound; a 0/1 knapsack). Gu & Chen 2024 writes a strict ``<``; with ``≤`` the empty
mask is always feasible, so the programme can only fail by the solver's time limit (or numerical
trouble), and then the cells with the top-k % identity sensitivity are hidden instead (the paper's
fallback). Cells with S = 0 cost nothing and are always kept. The *random control* hides as many
cells per subject, drawn uniformly (Gu & Chen 2024 Fig. 5/6's random feature masking).

**Class-wise masks** (``classwise``): Gu & Chen 2024's Alg. 1 as written, one mask per *utility*
class y from S_y and U_y (the positive attributions averaged over class y's auxiliary videos),
applied to every video of that action. Per-subject masks (``optimized``, ``random``) differ in shape
from subject to subject, so the mask itself can identify the subject; a class-wise mask is the
same for every subject of an action.

**What the audit asks of the masks.** The identity model the masks were optimised against was
fitted on *unmasked* videos; that it fails on masked ones says little. The audit's headline is
a **retraining adversary**: an identity model refit on the auxiliary videos masked by the same
rule, scored on the masked audited videos (``identity_accuracy_retrained``).

**Explainer stability.** Every explainer runs at every seed of ``config.explain_seeds`` (the
first seed's maps are used); the report gives the Spearman rank agreement of the first two
seeds' attributions, per subject map and per video (:func:`rank_agreement`), for each explainer.
Each explainer has its own budget (``config.evaluations.<explainer>``), chosen so that the two
reach a comparable agreement (the config's docstring has the measurements).

**Where the masks act** (:func:`maskdp_jax.run.views.hide_cells`, ``views``):
``"private"`` hides the chosen cells' *private* part only, i.e. they become additional hidden
cells of the private view (public cells stay; for ``dp`` and ``nonprivate``, which see the whole
video, the same pixels are hidden); ``"both"`` hides the chosen cells everywhere.

**Privacy.** The masks are a function of the data they are fitted on. They are fixed,
data-independent pre-processing of the training set (and DP's guarantee for the training run
stands) only if that data is disjoint from it: :func:`maskdp_jax.audit` fits the identity and
utility models and the explainers on an *auxiliary* split (other videos of the same subjects), never
on the training videos. A per-subject mask applied with ``views="both"`` also writes the subject's
mask shape into the public view; subjects are labels of the data here (as the pixel mask is), not
something the audit protects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import einops
import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize
import scipy.stats

from maskdp_jax.audit import lira, membership, metrics, shadows
from maskdp_jax.core import partition
from maskdp_jax.core.plan import PrivacyPlan
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.data import synthetic
from maskdp_jax.run import model as run_model
from maskdp_jax.run import views as run_views

#: The explainers that attribute a model's log-odds to token cells.
EXPLAINERS = ("shap", "lime")
#: Coalitions per jitted model call (a fixed shape: one compilation).
EVAL_CHUNK = 128


# --------------------------------------------------------------------------- explainers


@dataclasses.dataclass(frozen=True)
class Attributions:
    """Per-video cell attributions of one model.

    Attributes:
      values: ``[N, K']`` attribution of each cell (K' = T' H' W', row-major) to φ of the video's
        true label.
      quality: ``[N]`` the explainer's own check: SHAP's additivity error
        ``|Σ_j s_j − (φ(all) − φ(none))|``, LIME's local R².
      seconds: wall time of the explanations.
      evaluations: model evaluations per video.
    """

    values: np.ndarray
    quality: np.ndarray
    seconds: float
    evaluations: int


def coalition_scorer(apply_fn: Callable, params: Any, *, tokens: Tokenizer,
                     grid: tuple[int, int, int]) -> Callable:
    """``score(video [K, T, H, W, C], label, coalitions [n, K'] bool) -> φ [n]``: the model's
    log-odds of ``label`` with only the coalition's cells visible (mean logits over the K clips).
    Evaluated in fixed chunks of :data:`EVAL_CHUNK` coalitions (one compilation)."""
    st, sh, sw = tokens.patch_stride
    t, h, w = grid

    @jax.jit
    def chunk(video, label, coalitions):
        cells = coalitions.reshape(-1, t, h, w)
        visible = einops.repeat(cells, "n t h w -> n (t st) (h sh) (w sw) 1", st=st, sh=sh, sw=sw)
        clips = jnp.where(visible[:, None], video[None], tokens.fill(video.shape[-4:]))
        n, k = clips.shape[:2]
        logits = apply_fn(params, clips.reshape(n * k, *clips.shape[2:]))
        return lira.log_odds_confidence(logits.reshape(n, k, -1).mean(axis=1),
                                        jnp.full((n,), label))

    def score(video, label, coalitions):
        coalitions = np.asarray(coalitions, bool)
        n = len(coalitions)
        padded = np.concatenate([coalitions, np.ones(((-n) % EVAL_CHUNK, t * h * w), bool)])
        video = jnp.asarray(video)
        out = [chunk(video, label, jnp.asarray(padded[s:s + EVAL_CHUNK]))
               for s in range(0, len(padded), EVAL_CHUNK)]
        return np.asarray(jnp.concatenate(out)[:n], np.float64)

    return score


def explain(score: Callable, videos: np.ndarray, labels: np.ndarray, *, num_cells: int,
            explainer: str = "shap", evaluations: int | None = None, seed: int = 0
            ) -> Attributions:
    """Attributions of ``score`` (:func:`coalition_scorer`) on every video.

    Args:
      score: the coalition game of one model.
      videos / labels: ``[N, K, T, H, W, C]`` and ``[N]`` the explained videos and their labels.
      num_cells: K' = T' H' W'.
      explainer: :data:`EXPLAINERS`.
      evaluations: model evaluations per video (default and minimum ``2 K' + 1``, one SHAP
        permutation forward and back).
      seed: the explainers' randomness (permutations, LIME's coalitions). Video i draws from
        :func:`video_seed` ``(seed, i)``: two seeds share no stream, whichever videos they explain.
    """
    if explainer not in EXPLAINERS:
        raise ValueError(f"explainer must be one of {EXPLAINERS}; got {explainer!r}.")
    budget = max(evaluations or 0, 2 * num_cells + 1)
    one = _shap_one if explainer == "shap" else _lime_one
    start = time.time()
    explained = [one(functools.partial(score, v, int(y)), num_cells, budget, video_seed(seed, i))
                 for i, (v, y) in enumerate(zip(videos, labels, strict=True))]
    return Attributions(values=np.stack([v for v, _ in explained]),
                        quality=np.array([q for _, q in explained]),
                        seconds=time.time() - start, evaluations=budget)


def video_seed(seed: int, index: int) -> int:
    """The explainer's integer seed for video ``index`` at explainer seed ``seed``: a hash of the
    pair (numpy's :class:`~numpy.random.SeedSequence`). ``seed + index`` would give explainer seed
    1's video i the stream of seed 0's video i + 1, so two "independent" seeds would share all but
    one of their streams and their rank agreement would be flattered."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


def _shap_one(game: Callable, k: int, budget: int, seed: int) -> tuple[np.ndarray, float]:
    import shap  # noqa: PLC0415  (imports numba: seconds, only when explaining)

    # The explained "input" is the all-visible coalition; the masker turns shap's feature masks
    # into coalitions, and the game hides the cells they leave out.
    explainer = shap.explainers.Permutation(lambda z: game(z > 0.5),
                                            lambda mask, x: (x * mask)[None], seed=seed)
    result = explainer(np.ones((1, k)), max_evals=budget, batch_size=budget, silent=True)
    values = np.asarray(result.values[0], np.float64)
    full, empty = game(np.stack([np.ones(k, bool), np.zeros(k, bool)]))
    return values, float(abs(values.sum() - (full - empty)))


def _lime_one(game: Callable, k: int, budget: int, seed: int) -> tuple[np.ndarray, float]:
    from lime import lime_base  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    coalitions = np.ones((budget, k), bool)
    for row in coalitions[1:]:  # the first row is the video itself, as lime requires
        row[rng.choice(k, rng.integers(1, k), replace=False)] = False
    outputs = game(coalitions)
    distances = 1.0 - coalitions.sum(axis=1) / np.sqrt(k * coalitions.sum(axis=1))  # cosine
    base = lime_base.LimeBase(lambda d: np.sqrt(np.exp(-(d ** 2) / 0.25 ** 2)),
                              random_state=seed)
    _, weights, r2, _ = base.explain_instance_with_data(
        coalitions.astype(np.float64), outputs[:, None], distances, label=0, num_features=k,
        feature_selection="none")
    values = np.zeros(k)
    for j, w in weights:
        values[j] = w
    return values, float(r2)


def class_sensitivity(values: np.ndarray, classes: np.ndarray, num_classes: int) -> np.ndarray:
    """``[Z, K']``: the positive parts of ``values [N, K']`` averaged over each class's videos
    (Gu & Chen 2024 Alg. 1, lines 8-9).

    Raises:
      ValueError: a class without videos (its mask would rest on nothing).
    """
    counts = np.bincount(classes, minlength=num_classes)
    if np.any(counts == 0):
        raise ValueError(f"classes {np.flatnonzero(counts == 0).tolist()} have no videos to "
                         "explain; give the auxiliary split every subject.")
    sums = np.zeros((num_classes, values.shape[1]))
    np.add.at(sums, classes, np.maximum(values, 0.0))
    return sums / counts[:, None]


# --------------------------------------------------------------------------- masks


@dataclasses.dataclass(frozen=True)
class Choice:
    """One subject's mask. ``keep``: ``[K']`` bool, True = cell kept; ``method``: ``"milp"`` or
    ``"top-k"`` (the fallback)."""

    keep: np.ndarray
    method: str


def keep_cells(sensitivity: np.ndarray, utility: np.ndarray, *, alpha: float,
               fallback_top_k: float, time_limit: float = 60.0) -> Choice:
    """Gu & Chen 2024's utility-optimised mask for one subject (module docstring).

    Args:
      sensitivity: ``[K']`` S_z ≥ 0, identity sensitivity.
      utility: ``[K']`` U_z ≥ 0, utility sensitivity.
      alpha: the share of ΣS_z to remove, in [0, 1].
      fallback_top_k: the share of cells hidden (most identity-sensitive first) when the
        programme has no solution in ``time_limit`` seconds.
    """
    if not 0.0 <= alpha <= 1.0 or not 0.0 <= fallback_top_k <= 1.0:
        raise ValueError(f"alpha and fallback_top_k must be in [0, 1]; got {alpha}, "
                         f"{fallback_top_k}.")
    s, u = np.asarray(sensitivity, np.float64), np.asarray(utility, np.float64)
    if np.any(s < 0) or np.any(u < 0):
        raise ValueError("sensitivities must be the positive parts (class_sensitivity).")
    with _quiet_stdout():
        result = scipy.optimize.milp(
            -u, integrality=np.ones_like(u), bounds=scipy.optimize.Bounds(0, 1),
            constraints=scipy.optimize.LinearConstraint(s[None], -np.inf, (1 - alpha) * s.sum()),
            options={"time_limit": time_limit})
    if result.status != 0 or result.x is None:
        hide = np.argsort(-s, kind="stable")[: int(round(fallback_top_k * len(s)))]
        keep = np.ones(len(s), bool)
        keep[hide] = False
        return Choice(keep=keep, method="top-k")
    return Choice(keep=(result.x > 0.5) | (s == 0), method="milp")


@contextlib.contextmanager
def _quiet_stdout():
    """Silence file descriptor 1: scipy 1.17's HiGHS prints a debug line
    (``HighsMipSolverData::transformNewIntegerFeasibleSolution``) from C for some problems,
    whatever ``disp`` says."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def random_like(keep: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``[Z, K']``: per subject, as many cells hidden as in ``keep`` but drawn uniformly."""
    out = np.ones_like(keep, bool)
    for z, row in enumerate(keep):
        out[z, rng.choice(row.size, int((~row).sum()), replace=False)] = False
    return out


def rank_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman correlation of two flattened sensitivity maps (0 when either is constant)."""
    a, b = np.ravel(a), np.ravel(b)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(scipy.stats.spearmanr(a, b).statistic)


# --------------------------------------------------------------------------- the study

#: The masked versions of the data the study can compare.
VERSIONS = ("original", "optimized", "random", "classwise")


def audit(config) -> dict[str, Any]:
    """The study of ``configs/audit_feature_masking.py`` (Gu & Chen 2024 Table II / Fig. 6 shape).

    1. Embedded videos with subjects (:func:`maskdp_jax.data.synthetic.make_splits`): a training
       split (audited), a test split (accuracy) and an auxiliary split of other videos of the same
       subjects (module docstring, "Privacy").
    2. Identity and utility models fitted non-privately on the auxiliary split; every explainer
       of ``config.explainers`` attributes both on every auxiliary video.
    3. Masks from the first explainer (:func:`keep_cells` per subject; per action class for
       ``classwise``, Gu & Chen 2024's Alg. 1 as written) and the random control.
    4. Per version of ``config.versions``: the **retraining adversary** (an identity model refit
       on the auxiliary split masked by the same rule, scored on the masked training split) and
       the fixed identity model's accuracy there; then per (mode, ε, seed): LiRA on shadow
       models trained on the masked training split
       (:func:`maskdp_jax.audit.membership.attack_setting`) and their accuracy on the masked test
       split.
    """
    _check_config(config)
    z_count = config.input.num_subjects
    geometry = dict(frames=config.input.frames, clip_frames=config.input.clip_frames,
                    size=config.input.size, num_subjects=z_count)
    train, test = synthetic.make_splits(num_train=config.input.num_train,
                                        num_test=config.input.num_test, seed=config.data_seed,
                                        **geometry)
    aux, _ = synthetic.make_splits(num_train=config.input.num_aux,
                                   num_test=max(z_count, len(synthetic.CLASS_NAMES)),
                                   seed=config.data_seed + 1, **geometry)
    data = {name: split.get_batch(np.arange(len(split)))
            for name, split in (("train", train), ("test", test), ("aux", aux))}
    shape = data["train"]["video"].shape[2:]
    built = run_model.build(config.model, num_classes=train.num_classes, seed=config.seed)
    trainable, frozen, apply_fn = built.trainable, built.frozen, built.apply_fn
    tokens = built.tokenizer()
    grid = tokens.grid(shape)
    num_cells = math.prod(grid)

    start = time.time()
    fitted = {}
    for task, num_classes, key in (("identity", z_count, "subject"),
                                   ("utility", train.num_classes, "label")):
        task_model = run_model.build(config.model, num_classes=num_classes, seed=config.seed)
        tr, fr, fn = task_model.trainable, task_model.frozen, task_model.apply_fn
        params = _fit(config, {**data["aux"], "label": data["aux"][key]}, trainable=tr,
                      frozen=fr, apply_fn=fn, tokens=tokens)
        held_out = {**data["train"], "label": data["train"][key]}
        fitted[task] = dict(params=params, frozen=fr, apply_fn=fn, key=key,
                            accuracy=float(shadows.accuracy(
                                _stack1(params), fr, held_out, apply_fn=fn)[0]))
        print(f"{task} model: {fitted[task]['accuracy']:.2f} top-1 on the training split",
              flush=True)
    fit_seconds = time.time() - start

    emblem = emblem_cells(z_count, size=config.input.size, grid=grid, tokens=tokens)
    seeds = _explain_seeds(config)
    explained = {}
    for explainer in config.explainers:
        runs_at = seeds  # every explainer runs at every seed: its stability
        maps = {}
        for task, f in fitted.items():
            score = coalition_scorer(f["apply_fn"], partition.merge(f["params"], f["frozen"]),
                                     tokens=tokens, grid=grid)
            maps[task] = []
            for seed in runs_at:
                attributions = explain(score, data["aux"]["video"], data["aux"][f["key"]],
                                       num_cells=num_cells, explainer=explainer,
                                       evaluations=config.evaluations[explainer], seed=seed)
                maps[task].append((attributions, attributions.values))
        s_map = class_sensitivity(maps["identity"][0][1], data["aux"]["subject"], z_count)
        entry = dict(
            identity=s_map,
            utility=class_sensitivity(maps["utility"][0][1], data["aux"]["subject"], z_count),
            identity_by_class=class_sensitivity(maps["identity"][0][1], data["aux"]["label"],
                                                train.num_classes),
            utility_by_class=class_sensitivity(maps["utility"][0][1], data["aux"]["label"],
                                               train.num_classes),
            seconds_per_video=sum(a.seconds for m in maps.values() for a, _ in m)
            / (2 * len(runs_at) * len(data["aux"]["label"])),
            evaluations=maps["identity"][0][0].evaluations,
            quality_identity=float(np.mean(maps["identity"][0][0].quality)),
            quality_utility=float(np.mean(maps["utility"][0][0].quality)),
            emblem_share=float(np.mean((s_map * emblem).sum(1) / np.maximum(s_map.sum(1),
                                                                               1e-30))))
        if len(runs_at) > 1:
            entry["seeds"] = list(runs_at)
            for task, key in (("identity", "subject"), ("utility", "subject")):
                first, second = (class_sensitivity(v, data["aux"][key], z_count)
                                 for _, v in maps[task][:2])
                entry[f"seed_agreement_{task}"] = rank_agreement(first, second)
                entry[f"seed_agreement_{task}_per_video"] = float(np.mean([
                    rank_agreement(a, b) for a, b in zip(maps[task][0][1], maps[task][1][1],
                                                         strict=True)]))
        explained[explainer] = entry
        print(f"{explainer}: {entry['seconds_per_video']:.2f} s per video and model, "
              f"{entry['emblem_share']:.2f} of S on the emblems, seed agreement "
              f"{entry.get('seed_agreement_identity', float('nan')):.2f}", flush=True)

    chosen = explained[config.explainers[0]]
    choices = [keep_cells(s_z, u_z, alpha=config.alpha, fallback_top_k=config.fallback_top_k)
               for s_z, u_z in zip(chosen["identity"], chosen["utility"], strict=True)]
    by_class = [keep_cells(s_y, u_y, alpha=config.alpha, fallback_top_k=config.fallback_top_k)
                for s_y, u_y in zip(chosen["identity_by_class"], chosen["utility_by_class"],
                                    strict=True)]
    keep = {"original": np.ones((z_count, num_cells), bool),
            "optimized": np.stack([c.keep for c in choices])}
    keep["random"] = random_like(keep["optimized"], np.random.default_rng(config.mask_seed))
    keep["classwise"] = np.stack([c.keep for c in by_class])  # [Y, K'], applied by label
    group = {"original": "subject", "optimized": "subject", "random": "subject",
             "classwise": "label"}

    tx = optax.adam(config.learning_rate)
    identity = fitted["identity"]
    identity_model = run_model.build(config.model, num_classes=z_count, seed=config.seed)
    refit_seconds = 0.0
    versions = []
    for version in config.versions:
        masked = {name: _masked(data[name], keep[version], tokens=tokens, views=config.views,
                                by=group[version]) for name in ("train", "test", "aux")}
        identity_accuracy = float(shadows.accuracy(
            _stack1(identity["params"]), identity["frozen"],
            {**masked["train"], "label": masked["train"]["subject"]},
            apply_fn=identity["apply_fn"])[0])
        # The retraining adversary: an identity model refit on the *masked* auxiliary videos (the
        # same rule applied to them), scored on the masked audited videos.
        start = time.time()
        refit = _fit(config, {**masked["aux"], "label": masked["aux"]["subject"]},
                     trainable=identity_model.trainable, frozen=identity_model.frozen,
                     apply_fn=identity_model.apply_fn, tokens=tokens)
        retrained = float(shadows.accuracy(
            _stack1(refit), identity_model.frozen,
            {**masked["train"], "label": masked["train"]["subject"]},
            apply_fn=identity_model.apply_fn)[0])
        refit_seconds += time.time() - start
        hidden = ~keep[version][data["train"][group[version]]]  # [N, K'] per audited video
        entry = {"version": version, "masks_by": group[version],
                 "hidden_cells": float(hidden.mean()),
                 "emblem_cells_hidden": float((hidden & emblem[data["train"]["subject"]]).sum()
                                              / emblem[data["train"]["subject"]].sum()),
                 "identity_accuracy": identity_accuracy,
                 "identity_accuracy_retrained": retrained, "rows": []}
        for mode, eps in membership.settings(config):
            for seed in config.seeds:
                row, trained = membership.attack_setting(
                    config, mode=mode, epsilon=eps, seed=seed, data=masked["train"],
                    trainable=trainable, frozen=frozen, apply_fn=apply_fn, tokens=tokens, tx=tx)
                row["test_accuracy"] = float(np.mean(shadows.accuracy(
                    trained, frozen, masked["test"], apply_fn=apply_fn)))
                entry["rows"].append(row)
        versions.append(entry)
        print(f"{version}: {entry['hidden_cells']:.1%} cells hidden, identity top-1 "
              f"{identity_accuracy:.2f} (fixed model), {retrained:.2f} (refit on masked data)",
              flush=True)
    explainers = {
        name: {k: v for k, v in e.items() if k not in ("identity", "utility", "identity_by_class",
                                                       "utility_by_class")}
        for name, e in explained.items()}
    if len(explained) > 1:
        first, *others = config.explainers
        for other in others:
            explainers[other]["rank_agreement_with_" + first] = rank_agreement(
                explained[first]["identity"], explained[other]["identity"])
    return {"audit": "feature_masking", "config": config.to_dict(),
            "num_videos": len(train), "num_cells": num_cells, "grid": list(grid),
            "chance_asr_max": lira.chance_asr_max(config.num_shadows, len(train)),
            "roc_fprs": metrics.ROC_FPRS,
            "fit_seconds": fit_seconds,
            "model_accuracy": {t: f["accuracy"] for t, f in fitted.items()},
            "explainers": explainers,
            "refit_seconds": refit_seconds,
            "mask_methods": [c.method for c in choices],
            "mask_methods_classwise": [c.method for c in by_class],
            "identity_sensitivity_by_class": chosen["identity_by_class"].tolist(),
            "utility_sensitivity_by_class": chosen["utility_by_class"].tolist(),
            "keep_classwise": keep.pop("classwise").tolist(),
            "identity_sensitivity": chosen["identity"].tolist(),
            "utility_sensitivity": chosen["utility"].tolist(),
            "keep": {k: v.tolist() for k, v in keep.items()},
            "versions": versions}


def emblem_cells(num_subjects: int, *, size: int, grid: tuple[int, int, int],
                 tokens: Tokenizer) -> np.ndarray:
    """``[Z, K']`` bool: the cells of each subject's emblem (the planted identity features)."""
    _, corners = synthetic.subject_emblems(num_subjects, size=size)
    out = np.zeros((num_subjects, *grid), bool)
    _, sh, sw = tokens.patch_stride
    span = synthetic.EMBLEM_CELLS * synthetic.CELL
    for z, (y, x) in enumerate(corners):
        out[z, :, y // sh:(y + span) // sh, x // sw:(x + span) // sw] = True
    return out.reshape(num_subjects, -1)


def _masked(batch: dict[str, np.ndarray], keep: np.ndarray, *, tokens, views,
            by: str = "subject") -> dict:
    """``batch`` with each video's cells hidden by ``keep [groups, K']``, the row of its
    ``by`` (``"subject"``: per-subject masks; ``"label"``: Gu & Chen 2024's class-wise masks)."""
    return {**batch, "video": run_views.hide_cells(batch["video"], batch["mask"],
                                                   ~keep[batch[by]], tokens=tokens,
                                                   views=views)}


def _explain_seeds(config) -> tuple[int, ...]:
    """``config.explain_seeds``: one seed, or two or more (every explainer then runs at each, and
    the report gives the rank agreement of the first two)."""
    seeds = tuple(int(s) for s in config.explain_seeds)
    if not seeds or len(set(seeds)) < len(seeds):
        raise ValueError(f"config.explain_seeds must name distinct seeds; got {seeds}.")
    return seeds


def _check_config(config) -> None:
    """Bad versions, explainers or seeds fail before anything is fitted."""
    unknown = [v for v in config.versions if v not in VERSIONS]
    if unknown or "original" not in config.versions:
        raise ValueError(f"config.versions must include 'original' and name versions of "
                         f"{VERSIONS}; got {tuple(config.versions)}.")
    bad = [e for e in config.explainers if e not in EXPLAINERS]
    if bad or not config.explainers:
        raise ValueError(f"config.explainers must name explainers of {EXPLAINERS}; got "
                         f"{tuple(config.explainers)}.")
    _explain_seeds(config)
    budgets = config.evaluations
    if not hasattr(budgets, "keys") or any(e not in budgets for e in config.explainers):
        raise ValueError("config.evaluations must give each explainer of config.explainers its "
                         "model evaluations per video (e.g. --config.evaluations.lime=2052; 0: "
                         f"the minimum); got {budgets!r}.")
    membership.lira_config(config)


def _stack1(tree):
    return jax.tree.map(lambda x: x[None], tree)


def _fit(config, data: dict[str, np.ndarray], *, trainable, frozen, apply_fn, tokens):
    """One non-private model on all of ``data`` (train.py's step, Poisson batches), its
    trainable parameters."""
    n = len(data["label"])
    plan = PrivacyPlan.calibrate(mode="nonprivate", num_examples=n,
                                 batch_size=config.fit.batch_size, epochs=config.fit.num_epochs,
                                 l2_clip_norm=1.0, delta=1.0 / (10 * n), target_epsilon=None)
    setup = shadows.ShadowSetup(plan=plan, physical_batch_size=config.fit.batch_size,
                                seed=config.seed)
    trained = shadows.train(setup, np.ones((1, n), bool), data, trainable=trainable,
                            frozen=frozen, apply_fn=apply_fn,
                            tx=_adam(config.fit.learning_rate), tokens=tokens,
                            batching="loop")
    return jax.tree.map(lambda x: x[0], trained)


@functools.cache
def _adam(learning_rate: float) -> optax.GradientTransformation:
    # One optimiser object per rate: the shadows' compiled step is cached on it, so the identity
    # model and its refits on masked data share one compilation.
    return optax.adam(learning_rate)


#: The LiRA attacks the study's table shows.
TABLE_ATTACKS = ("online", "offline_seed004")


def table(report: dict) -> list[dict[str, Any]]:
    """Per (version, mode, ε) and attack of :data:`TABLE_ATTACKS`: the LiRA figures with their
    nulls, the indicative ε lower bound and its cap
    (:func:`maskdp_jax.audit.membership.attack_table`, mean ± sample std over seeds) and the
    shadow models' test top-1."""
    out = []
    for v in report["versions"]:
        for e in membership.attack_table(v["rows"], ("mode", "epsilon")):
            if e["attack"] not in TABLE_ATTACKS:
                continue
            group = [r for r in v["rows"] if (r["mode"], r["epsilon"]) == (e["mode"],
                                                                            e["epsilon"])]
            out.append(e | {"version": v["version"], "hidden_cells": v["hidden_cells"],
                            "identity_accuracy": v["identity_accuracy"],
                            "test_accuracy": metrics.mean_std([r["test_accuracy"]
                                                               for r in group])})
    return out


def markdown(config, report: dict) -> str:
    """The feature-masking study's ``report.md``: explainers, masks, the LiRA table."""
    explainers = report["explainers"]
    first = config.explainers[0]
    fallbacks = report["mask_methods"].count("top-k")
    lines = [
        "# Feature masking by explainer sensitivity (Gu & Chen 2024, Alg. 1)",
        "",
        f"Embedded videos with {config.input.num_subjects} subjects, each with an emblem on the "
        f"background (private region). Features: the {report['num_cells']} token cells "
        f"({' x '.join(map(str, report['grid']))}). Identity and utility models "
        f"(`{config.model.name}`, non-private) fitted on {config.input.num_aux} auxiliary videos "
        "of the same subjects, never on the audited ones; their top-1 on the audited videos: "
        f"identity {report['model_accuracy']['identity']:.2f}, utility "
        f"{report['model_accuracy']['utility']:.2f} ({report['fit_seconds']:.0f} s to fit).",
        "",
        "## Explainers",
        "",
        f"Each explainer runs at explainer seeds {tuple(config.explain_seeds)} (the first "
        "seed's maps are the ones used); the seed agreement columns are the Spearman rank "
        "correlation of two seeds' attributions (per-subject maps S_z / U_z, and per video, "
        "averaged): 1 is a stable ranking.",
        "",
        "| explainer | model evaluations per video | s per video and model | own check | "
        "share of S on the emblems | rank agreement with " + first + " | seed agreement S_z | "
        "seed agreement U_z | seed agreement per video (identity) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def agreement(e, key):
        return "—" if key not in e else f"{e[key]:.2f}"

    for name, e in explainers.items():
        check = (f"additivity error {max(e['quality_identity'], e['quality_utility']):.1e}"
                 if name == "shap" else
                 f"local R² {e['quality_identity']:.2f} / {e['quality_utility']:.2f}")
        lines.append(f"| {name} | {e['evaluations']} | {e['seconds_per_video']:.2f} | {check} | "
                     f"{e['emblem_share']:.2f} | {agreement(e, f'rank_agreement_with_{first}')} | "
                     f"{agreement(e, 'seed_agreement_identity')} | "
                     f"{agreement(e, 'seed_agreement_utility')} | "
                     f"{agreement(e, 'seed_agreement_identity_per_video')} |")
    lines += [
        "",
        f"A subject's emblem covers {_emblem_share(report):.1%} of the cells: a share of its S "
        "above that is identity sensitivity found where it was planted.",
        "",
        f"## Masks ({first}, α = {config.alpha:g}, views = {config.views})",
        "",
        f"MILP per subject; {fallbacks} of {len(report['mask_methods'])} subjects fell back to "
        f"the top-{config.fallback_top_k:.0%} rule ("
        f"{report['mask_methods_classwise'].count('top-k')} of "
        f"{len(report['mask_methods_classwise'])} action classes for the class-wise masks). "
        "`optimized` and `random` masks are per subject (random: as many cells, drawn "
        "uniformly); `classwise` masks are Gu & Chen 2024's Alg. 1 per utility class (S_y, U_y "
        "over each action's videos), applied by action label.",
        "",
        "**Identity top-1 of a retraining adversary** (the headline): an identity model refit "
        f"({report['refit_seconds']:.0f} s for all versions) on the auxiliary videos masked by "
        "the same rule, scored on the masked audited videos; next to it the identity model "
        "fitted once on *unmasked* videos (what the masks were optimised against). Chance: "
        f"{1 / config.input.num_subjects:.3f}.",
        "",
        "| version | masks by | cells hidden | emblem cells hidden | identity top-1, model refit "
        "on masked data | identity top-1, model fitted on unmasked data |",
        "|---|---|---|---|---|---|",
    ]
    for v in report["versions"]:
        lines.append(f"| {v['version']} | {v['masks_by']} | {v['hidden_cells']:.1%} | "
                     f"{v['emblem_cells_hidden']:.1%} | "
                     f"**{v['identity_accuracy_retrained']:.2f}** | "
                     f"{v['identity_accuracy']:.2f} |")
    lines += [
        "",
        "The refit column is what masking hides from an adversary who adapts to it; the last "
        "column, what it hides from a model that does not. A per-subject mask's shape differs "
        "per subject, so the mask itself can be a cue; class-wise masks are the same for every "
        "subject of an action.",
    ]
    if not report["versions"][0]["rows"]:
        lines += ["", "LiRA on the utility model: not run (`config.modes` is empty).", ""]
        return "\n".join(lines)
    lines += [
        "",
        "## LiRA on the utility model",
        "",
        f"{config.num_shadows} shadow models per setting on complementary halves of "
        f"{report['num_videos']} videos, B = {config.batch_size}, {config.num_epochs:g} epochs, "
        f"C = {config.l2_clip_norm:g}, δ = {config.delta:g}; mean ± std over seeds "
        f"{tuple(config.seeds)}. Attacks: online with the configured fits "
        f"({membership.lira_config(config)[0].label(config.num_shadows)}, one query) and Gu "
        "& Chen 2024's offline. Every figure with its null (the same attack on iid scores, mean "
        "and 95 % band); AUC is the standard (Mann–Whitney) AUC. The ε lower bound is "
        "indicative (Clopper–Pearson over the seed's pooled (model, video) trials, which share "
        "models and videos: `audit/metrics.py`); the largest certifiable ε is what a perfect "
        "attack would get with these trial counts, and an ε above it cannot be refuted by this "
        "design.",
        "",
        "| version | mode | ε | attack | AUC (null) | ASR^M (null) | mean ASR | test top-1 | "
        "ε lower bound (indicative) | largest certifiable ε |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in table(report):
        eps = "∞" if math.isinf(e["epsilon"]) else f"{e['epsilon']:g}"
        lines.append(
            f"| {e['version']} | {e['mode']} | {eps} | "
            f"{membership.ATTACK_NAMES[e['attack']]} | {membership.with_null(e, 'auc')} | "
            f"{membership.with_null(e, 'asr_max')} | "
            f"{e['asr_mean'][0]:.3f} ± {e['asr_mean'][1]:.3f} | "
            f"{e['test_accuracy'][0]:.3f} ± {e['test_accuracy'][1]:.3f} | "
            f"{e['epsilon_lower_bound'][0]:.2f} ± {e['epsilon_lower_bound'][1]:.2f} | "
            f"{metrics.cap_cell(e['cap'], e['epsilon'])} |")
    total = sum(r["seconds"] for v in report["versions"] for r in v["rows"])
    lines += ["", f"Shadow training and scoring: {total:.0f} s.", ""]
    return "\n".join(lines)


def _emblem_share(report: dict) -> float:
    return synthetic.EMBLEM_CELLS ** 2 * report["grid"][0] / report["num_cells"]

