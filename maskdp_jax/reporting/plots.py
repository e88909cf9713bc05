"""Figures a person reads: accuracy vs ε, per-class accuracy, training curves, DP-CDA's accuracy
vs mixing order (PNG).

The one module of the library packages that imports matplotlib (with the non-interactive Agg
backend, so it runs on machines without a display).
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from maskdp_jax.core.plan import Mode  # noqa: E402
from maskdp_jax.reporting.results import (  # noqa: E402
    MODE_ORDER,
    public_only_ceiling,
    summarize,
)
from maskdp_jax.reporting.run_report import COUNTS_HIDDEN  # noqa: E402

_STYLE = {
    "nonprivate": dict(color="black", label="non-private"),
    "public_only": dict(color="tab:green", marker="^", label="public-only (ε = 0)"),
    "dp": dict(color="tab:blue", marker="s", label="DP (whole video private)"),
    "maskdp": dict(color="tab:red", marker="o", label="MaskDP (only private tokens)"),
}


def privacy_utility(
    table_rows: list[dict[str, Any]], path: str, *, delta: float, title: str,
    chance: float | None = None,
) -> None:
    """Accuracy vs ε (log x) per mode, mean ± std over seeds; non-private as a horizontal line.
    Runs trained on one view (the context ablation) are left out."""
    stats = summarize([r for r in table_rows if r["view"] == "full"])
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=120)
    for (mode, k, _), (mean, std, _) in sorted(stats.items()):
        if not Mode(mode).is_private:  # no ε axis: a level line with its ± std band
            clips = f" K={k}" if k > 1 else ""
            color = _STYLE[mode]["color"]
            ax.axhline(100 * mean, color=color, lw=1.5, ls="-" if color == "black" else "--",
                       label=f"{_STYLE[mode]['label']}{clips} ({100 * mean:.1f}%)")
            ax.axhspan(100 * (mean - std), 100 * (mean + std), color=color, alpha=0.08)
    for mode in ("dp", "maskdp"):
        for k in sorted({k for (m, k, _) in stats if m == mode}):
            pts = sorted((e, v) for (m, kk, e), v in stats.items()
                         if m == mode and kk == k and math.isfinite(e))
            if not pts:
                continue
            eps = np.array([p[0] for p in pts])
            mean = np.array([100 * p[1][0] for p in pts])
            std = np.array([100 * p[1][1] for p in pts])
            style = dict(_STYLE[mode])
            if k > 1:
                style["label"] += f", K={k} clips"
                style["linestyle"] = "--"
            ax.errorbar(eps, mean, yerr=std, capsize=3, lw=1.5, ms=5, **style)
    ax.set_xscale("log")
    # One labelled tick per swept ε (log-axis minor labels like "3×10⁻¹" collide).
    swept = sorted({e for (m, _, e) in stats if Mode(m).is_private and math.isfinite(e)})
    if swept:
        ax.set_xticks(swept, [f"{e:g}" for e in swept])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(f"privacy budget ε (δ = {delta:g}, log scale)")
    _save_accuracy_axes(fig, ax, path, title=title, chance=chance)


def _save_accuracy_axes(fig, ax, path: str, *, title: str, chance: float | None) -> None:
    """The shared finish of the accuracy plots: chance line, labels, legend below, save."""
    if chance is not None:
        ax.axhline(100 * chance, color="gray", ls=":", lw=1, label=f"chance ({100 * chance:.1f}%)")
    ax.set_ylabel("test top-1 accuracy (%)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    # Below the axes, so it never hides a curve or the non-private line.
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def accuracy_vs_share(table_rows: list[dict[str, Any]], path: str, *, title: str,
                      chance: float, split: str = "test") -> None:
    """Where MaskDP pays: accuracy vs the label's private share, one panel per ε, each mode
    (non-private where run) as mean ± std over runs, with the public view's ceiling dashed."""
    rows = [r for r in table_rows if r.get("private_share") is not None and r["view"] == "full"]
    epsilons = sorted({r["target_epsilon"] for r in rows if Mode(r["mode"]).is_private})
    shares = sorted({float(r["private_share"]) for r in rows})
    stats = {share: summarize([r for r in rows if float(r["private_share"]) == share])
             for share in shares}  # share -> (mode, K, ε) -> (mean, std, n)
    fig, axes = plt.subplots(1, len(epsilons), figsize=(4.6 * len(epsilons), 4.4), dpi=120,
                             sharey=True, squeeze=False)
    for ax, epsilon in zip(axes[0], epsilons, strict=True):
        for mode in MODE_ORDER:
            target = epsilon if Mode(mode).is_private else Mode(mode).fixed_epsilon
            pts = [(share, 100 * s[0], 100 * s[1]) for share in shares
                   if (s := stats[share].get((mode, 1, target))) is not None]
            if pts:
                style = {"marker": "v", **_STYLE[mode]}
                ax.errorbar(*zip(*[(p[0], p[1]) for p in pts], strict=True),
                            yerr=[p[2] for p in pts], capsize=3, lw=1.5, ms=5, **style)
        ax.plot(shares, [100 * public_only_ceiling(s) for s in shares], color="tab:green",
                ls="--", lw=1, label="the public view's ceiling")
        ax.axhline(100 * chance, color="gray", ls=":", lw=1, label=f"chance ({100 * chance:.0f}%)")
        ax.set_xticks(shares, [f"{s:g}" for s in shares])
        ax.set_xlabel("share of the label in the private part")
        ax.set_title(f"ε = {epsilon:g}")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(f"{split} top-1 accuracy (%)")
    fig.suptitle(title)
    # Below the panels, so it never hides a curve.
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=8, loc="lower center", ncol=3,
               frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def accuracy_vs_clips(
    table_rows: list[dict[str, Any]], path: str, *, epsilon: float, delta: float, title: str,
    chance: float | None = None,
) -> None:
    """Multi-clip (Luo et al. 2024 Fig. 3a): accuracy vs K clips per video (log2 x) per mode at one
    ε, mean ± std over seeds; non-private runs (any K) as their own curve."""
    stats = summarize([r for r in table_rows if r["view"] == "full"])
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    ks = sorted({k for (_, k, _) in stats})
    for mode in MODE_ORDER:
        target = epsilon if Mode(mode).is_private else Mode(mode).fixed_epsilon
        pts = sorted((k, v) for (m, k, e), v in stats.items() if m == mode and e == target)
        if not pts:
            continue
        style = dict(_STYLE[mode])
        if mode == "nonprivate":
            style.update(marker="^")
        ax.errorbar([p[0] for p in pts], [100 * p[1][0] for p in pts],
                    yerr=[100 * p[1][1] for p in pts], capsize=3, lw=1.5, ms=5, **style)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(f"training clips per video K (private modes at ε = {epsilon:g}, δ = {delta:g})")
    _save_accuracy_axes(fig, ax, path, title=title, chance=chance)


def accuracy_vs_mixing_order(
    stats: dict[tuple[str, float, int], tuple[float, float]], path: str, *, delta: float,
    title: str, chance: float | None = None,
) -> None:
    """DP-CDA (Saha et al. 2024 Fig. 2): accuracy vs mixing order l (log2 x), one curve per ε, one
    line style per label variant.

    Args:
      stats: ``(label variant, ε, l) -> (mean, std)`` accuracies over seeds, in [0, 1].
    """
    fig, ax = plt.subplots(figsize=(6.4, 4.8), dpi=120)
    epsilons = sorted({e for (_, e, _) in stats})
    colors = dict(zip(epsilons, plt.cm.viridis(np.linspace(0.0, 0.85, len(epsilons))), strict=True))
    for variant, ls in zip(sorted({v for (v, _, _) in stats}), ("-", "--", ":"), strict=False):
        for eps in epsilons:
            pts = sorted((o, v) for (var, e, o), v in stats.items() if var == variant and e == eps)
            if not pts:
                continue
            label = f"ε = {eps:g}" if math.isfinite(eps) else "ε = ∞ (no noise)"
            ax.errorbar([p[0] for p in pts], [100 * p[1][0] for p in pts],
                        yerr=[100 * p[1][1] for p in pts], capsize=3, lw=1.5, ms=4, marker="o",
                        ls=ls, color=colors[eps], label=f"{label}, {variant}")
    orders = sorted({o for (_, _, o) in stats})
    ax.set_xscale("log", base=2)
    ax.set_xticks(orders, [str(o) for o in orders])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel(f"mixing order l (records per synthetic sample; δ = {delta:g})")
    _save_accuracy_axes(fig, ax, path, title=title, chance=chance)


#: The LiRA attacks the plots draw, with their line styles.
PLOTTED_ATTACKS = (("online", "-"), ("offline_seed004", "--"))


def _null_band(ax, entry: dict, name: str, *, ls: str, label: str) -> None:
    """An attack's no-leakage mean (a gray line in the attack's style) and 95 % band (shaded)."""
    null = entry["null_" + name]
    ax.axhline(null["mean"], color="gray", ls=ls, lw=1, label=f"{label}: null (95 % band)")
    ax.axhspan(null["low"], null["high"], color="gray", alpha=0.10 if ls == "-" else 0.06)


def asr_vs_epsilon(table: list[dict[str, Any]], path: str, *, title: str) -> None:
    """LiRA vs ε (Gu & Chen 2024 Fig. 3 shape), two panels: the standard AUC and ASR^M per mode for
    the configured online attack (solid) and Gu & Chen 2024's offline one (dashed), mean ± std over
    seeds; the non-private models as a horizontal line; each attack's null (the same attack on iid
    scores: mean and 95 % band, :func:`maskdp_jax.audit.metrics.lira_null`) in gray, in its line
    style.

    Args:
      table: rows of :func:`maskdp_jax.audit.membership.table` (``mode``, ``epsilon``, ``attack``,
        ``auc`` and ``asr_max`` as ``(mean, std)``, ``null_auc`` and ``null_asr_max``).
    """
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4.6), dpi=120)
    for ax, name, ylabel in zip(axes, ("auc", "asr_max"),
                                ("AUC (standard, Mann–Whitney)", "ASR^M (the most exposed video)"),
                                strict=True):
        for attack, ls in PLOTTED_ATTACKS:
            entries = [r for r in table if r["attack"] == attack]
            if not entries:
                continue
            for mode in MODE_ORDER:
                pts = sorted((r["epsilon"], r[name]) for r in entries if r["mode"] == mode)
                if not pts:
                    continue
                style = dict(_STYLE[mode], label=f"{_STYLE[mode]['label']}, {attack}")
                if not Mode(mode).is_private:
                    ax.axhline(pts[0][1][0], ls=ls, lw=1.2, color=style["color"],
                               label=style["label"])
                    continue
                ax.errorbar([p[0] for p in pts], [p[1][0] for p in pts],
                            yerr=[p[1][1] for p in pts], capsize=3, lw=1.5, ms=5, ls=ls, **style)
            _null_band(ax, entries[0], name, ls=ls, label=attack)
        ax.set_xlabel("ε (δ fixed)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.legend(handles, labels, fontsize=6.5, loc="lower center", ncol=4, frameon=False)
    fig.savefig(path)
    plt.close(fig)


def roc_loglog(table: list[dict[str, Any]], fprs, path: str, *, title: str,
               attacks=PLOTTED_ATTACKS, group: str = "mode", curve: str = "epsilon") -> None:
    """Empirical ROC curves on log-log axes (Carlini et al. 2022's view: the low-FPR corner),
    one panel per ``group`` value, one colour per ``curve`` value, the attacks in their line
    styles; TPR averaged over seeds at each FPR of ``fprs``; the diagonal is guessing. The
    resolution floor is shaded: below FPR = 1/n_out no OUT trial can pass, so the curve there
    only repeats its value at zero false positives.

    Args:
      table: entries with ``roc_tpr`` and ``num_out``
        (:func:`maskdp_jax.audit.membership.attack_table`).
      fprs: the FPR grid of ``roc_tpr`` (:data:`maskdp_jax.audit.metrics.ROC_FPRS`).
    """
    groups = list(dict.fromkeys(r[group] for r in table))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.6 * len(groups), 3.8), dpi=120,
                             squeeze=False)
    fprs = np.asarray(fprs)
    for ax, g in zip(axes[0], groups, strict=True):
        values = list(dict.fromkeys(r[curve] for r in table if r[group] == g))
        for c, value in enumerate(values):
            for attack, ls in attacks:
                rows = [r for r in table if (r[group], r[curve], r["attack"]) == (g, value, attack)]
                if not rows:
                    continue
                tpr = np.maximum(np.asarray(rows[0]["roc_tpr"]), 1e-4)
                shown = "∞" if isinstance(value, float) and math.isinf(value) else f"{value}"
                ax.plot(fprs, tpr, ls=ls, color=f"C{c}", lw=1.3, label=f"{curve} {shown}, {attack}")
        ax.plot(fprs, fprs, color="gray", ls=":", lw=1, label="guessing")
        n_out = min(r["num_out"] for r in table if r[group] == g)
        if 1 / n_out > fprs[0]:
            ax.axvspan(fprs[0], 1 / n_out, color="gray", alpha=0.18, lw=0,
                       label=f"FPR < 1/{n_out}: not resolved")
            ax.axvline(1 / n_out, color="gray", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(fprs[0], 1)
        ax.set_ylim(1e-4, 1.05)
        ax.set_title(f"{g}", fontsize=9)
        ax.set_xlabel("FPR")
        ax.grid(True, which="both", alpha=0.2)
        ax.legend(fontsize=5.5, loc="lower right")
    axes[0][0].set_ylabel("TPR")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def canary_bounds(table: list[dict[str, Any]], path: str, *, cap: float, title: str) -> None:
    """The canary audit, two panels, private-region canaries beside public-region ones (or the
    one region a study audited) per setting, mean ± std over seeds: the one-run ε lower bound
    (with the ε each setting promises as a line on its bars, or, above the panel's range, an
    arrow at its top edge labelled with the value; none where it promises nothing; the largest
    certifiable bound as a dotted line) and the attack's standard AUC with each bar's null (mean
    and 95 % band of iid scores at its IN/OUT counts) drawn across it in gray. One legend for
    the regions, below both panels.

    Args:
      table: rows of :func:`maskdp_jax.audit.canaries.table` (``mode``, ``epsilon``, ``region``,
        ``upper_bound``, ``epsilon_lower_bound`` and ``auc`` as ``(mean, std)``, ``null_auc``).
    """
    settings = list(dict.fromkeys((r["mode"], r["epsilon"]) for r in table))
    # the regions the study audited (one bar per region and setting), in a fixed order
    regions = [g for g in ("private", "public") if any(r["region"] == g for r in table)]
    width, offsets = 0.76 / len(regions), {g: (i - (len(regions) - 1) / 2) * 0.38
                                           for i, g in enumerate(regions)}
    x = np.arange(len(settings))
    fig, axes = plt.subplots(1, 2, figsize=(max(9.6, 2.0 * len(settings)), 4.6), dpi=120)
    left, right = axes
    region_handles = []
    for ax, name in zip(axes, ("epsilon_lower_bound", "auc"), strict=True):
        for region in regions:
            hatch = "" if region == "private" else "//"
            rows = {(r["mode"], r["epsilon"]): r for r in table if r["region"] == region}
            xs = x + offsets[region]
            bars = ax.bar(xs, [rows[s][name][0] for s in settings], width - 0.02,
                          yerr=[rows[s][name][1] for s in settings], capsize=3,
                          color=[_STYLE[m]["color"] for m, _ in settings], alpha=0.75,
                          hatch=hatch, edgecolor="white")
            if ax is left:
                region_handles.append((bars, f"canaries in the {region} region"))
        ax.set_xticks(x, [f"{m}\nε={'∞' if math.isinf(e) else f'{e:g}'}" for m, e in settings])
        ax.grid(True, axis="y", alpha=0.3)
    tops = [r["epsilon_lower_bound"][0] + r["epsilon_lower_bound"][1] for r in table]
    top = 1.15 * max(cap, *tops)
    left.set_ylim(0.0, top)
    half = width / 2 - 0.01
    for region in regions:
        rows = {(r["mode"], r["epsilon"]): r for r in table if r["region"] == region}
        for xi, s in zip(x + offsets[region], settings, strict=True):
            up = rows[s]["upper_bound"]
            if not math.isfinite(up):
                continue
            if up <= top:
                left.plot([xi - half, xi + half], [up, up], color="black", lw=1.5)
            else:  # promised more than the panel shows: an arrow at the top edge, and the value
                left.annotate(f"{up:g}", (xi, top), xytext=(xi, 0.9 * top), ha="center",
                              fontsize=7, arrowprops=dict(arrowstyle="->", lw=1))
    left.axhline(cap, color="gray", ls=":", lw=1, label=f"largest certifiable ({cap:.2f})")
    left.plot([], [], color="black", lw=1.5, label="ε promised (arrow: above the panel)")
    left.set_ylabel("ε lower bound, one run (95 %)")
    for xi, r in zip(np.concatenate([x + offsets[g] for g in regions]), [
            next(r for r in table if (r["mode"], r["epsilon"], r["region"]) == (*s, region))
            for region in regions for s in settings], strict=True):
        null = r["null_auc"]  # this bar's no-leakage band (iid scores, its IN/OUT counts)
        right.plot([xi - half, xi + half], [null["mean"]] * 2, color="gray", lw=1)
        right.fill_between([xi - half, xi + half], null["low"], null["high"], color="gray",
                           alpha=0.25, lw=0)
    right.fill_between([], [], [], color="gray", alpha=0.25, label="null AUC (95 % band)")
    right.set_ylim(0.3, 1.02)
    right.set_ylabel("AUC of the canary score (standard)")
    fig.suptitle(title)
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2,
                frameon=False)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1,
                 frameon=False)
    fig.legend([h for h, _ in region_handles], [name for _, name in region_handles],
               fontsize=7, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def feature_masking(table: list[dict[str, Any]], versions: list[dict[str, Any]], path: str, *,
                    chance_accuracy: float, chance_identity: float, title: str) -> None:
    """The feature-masking study (Gu & Chen 2024 Fig. 6 shape), three panels, the versions side by
    side: the identity top-1 of a retraining adversary (refit on masked data; hatched: the model
    fitted on unmasked data) against chance; LiRA's standard AUC (online, configured fits) per
    setting with each bar's null band (the same attack on iid scores) across it in gray; and the
    shadow models' test top-1, mean ± std over seeds.

    Args:
      table: rows of :func:`maskdp_jax.audit.feature_masking.table` (``version``, ``mode``,
        ``epsilon``, ``attack``, ``auc`` and ``test_accuracy`` as ``(mean, std)``, ``null_auc``).
      versions: the report's ``versions`` (``identity_accuracy``,
        ``identity_accuracy_retrained``).
    """
    table = [r for r in table if r["attack"] == "online"]
    settings = list(dict.fromkeys((r["mode"], r["epsilon"]) for r in table))
    names = [v["version"] for v in versions]
    x = np.arange(len(settings))
    width = 0.8 / len(names)
    if settings:
        fig, axes = plt.subplots(1, 3, figsize=(max(12.8, 2.6 * len(settings) + 4), 4.4),
                                 dpi=120, gridspec_kw=dict(width_ratios=[1, len(settings),
                                                                         len(settings)]))
    else:  # no LiRA settings (config.modes empty): the identity panel alone
        fig, ax = plt.subplots(figsize=(4.8, 4.4), dpi=120)
        axes = [ax]
    ident = axes[0]
    for i, v in enumerate(versions):
        ident.bar(i - 0.2, v["identity_accuracy_retrained"], 0.4, color=f"C{i}", alpha=0.85)
        ident.bar(i + 0.2, v["identity_accuracy"], 0.4, color=f"C{i}", alpha=0.4, hatch="//",
                  edgecolor="white")
    ident.axhline(chance_identity, color="gray", ls=":", lw=1,
                  label=f"chance ({chance_identity:.3f})")
    ident.bar([], [], color="gray", label="refit on masked data")
    ident.bar([], [], color="gray", alpha=0.4, hatch="//", label="fitted on unmasked data")
    ident.set_xticks(range(len(names)), names, rotation=30, fontsize=7)
    ident.set_ylim(0, 1.02)
    ident.set_ylabel("identity top-1 on the masked audited videos")
    for ax, name, label in zip(axes[1:], ("auc", "test_accuracy"),
                               ("AUC (online LiRA, standard)", "test top-1 of the shadow models"),
                               strict=False):
        for i, version in enumerate(names):
            rows = {(r["mode"], r["epsilon"]): r for r in table if r["version"] == version}
            xs = x + (i - (len(names) - 1) / 2) * width
            ax.bar(xs, [rows[s][name][0] for s in settings], width * 0.95,
                   yerr=[rows[s][name][1] for s in settings], capsize=3, color=f"C{i}",
                   alpha=0.8, label=version)
            if name == "auc":
                for xi, s in zip(xs, settings, strict=True):
                    null = rows[s]["null_auc"]
                    ax.fill_between([xi - width / 2, xi + width / 2], null["low"], null["high"],
                                    color="gray", alpha=0.3, lw=0)
        ax.set_xticks(x, [f"{m}\nε={'∞' if math.isinf(e) else f'{e:g}'}" for m, e in settings])
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
    if settings:
        axes[1].fill_between([], [], [], color="gray", alpha=0.3, label="null AUC (95 % band)")
        axes[1].set_ylim(0.3, 1.02)
        axes[2].axhline(chance_accuracy, color="gray", ls=":", lw=1,
                        label=f"chance ({chance_accuracy:.3f})")
        axes[2].set_ylim(0, 1.02)
    for ax in axes:
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3,
                  frameon=False)
    fig.suptitle(title, fontsize=12 if settings else 9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def per_class(
    accuracies: dict[str, list[float]], class_names: list[str], class_counts: list[int] | None,
    path: str, *, title: str,
) -> None:
    """Grouped bars of per-class accuracy per mode; class frequency in the training set on top.

    Args:
      accuracies: mode -> per-class accuracy in [0, 1] (already averaged over seeds).
      class_names: names in class-index order.
      class_counts: training videos per class (the papers show frequency for unbalanced data);
        None when only dp runs are plotted (labels are private in dp mode): the panel says so.
    """
    modes = [m for m in MODE_ORDER if m in accuracies]
    if not modes:
        raise ValueError("per_class: no mode has per-class accuracies to plot (the caller "
                         "leaves the plot out when no run qualifies).")
    x = np.arange(len(class_names))
    width = 0.8 / len(modes)
    fig, (top, ax) = plt.subplots(2, 1, figsize=(max(6.4, 0.6 * len(class_names)), 5.2), dpi=120,
                                  sharex=True, gridspec_kw={"height_ratios": [1, 3]})
    if class_counts is None:
        top.text(0.5, 0.5, f"train videos per class {COUNTS_HIDDEN}",
                 transform=top.transAxes, ha="center", va="center", fontsize=9)
        top.set_yticks([])
    else:
        top.bar(x, class_counts, color="gray")
    top.set_ylabel("train videos")
    for i, mode in enumerate(modes):
        style = _STYLE[mode]
        ax.bar(x + (i - (len(modes) - 1) / 2) * width, 100 * np.asarray(accuracies[mode], float),
               width, color=style["color"], label=style["label"])
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_xticks(x, class_names, rotation=45, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    top.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def training_curve(history: list[dict[str, float]], path: str, *, title: str,
                   accountant: str = "pld") -> None:
    """Public loss and ε spent (by ``accountant``, the one that calibrated σ) against the step."""
    steps = [h["step"] for h in history]
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    for key in ("loss", "public_loss", "private_loss(non-DP)"):
        if any(key in h for h in history):
            ax.plot(steps, [h.get(key, np.nan) for h in history], label=key)
    ax.set_xlabel("logical step")
    ax.set_ylabel("training loss")
    eps = [h.get("epsilon", math.inf) for h in history]
    if any(math.isfinite(e) for e in eps):
        twin = ax.twinx()
        twin.plot(steps, eps, color="tab:green", ls="--", label="ε spent")
        twin.set_ylabel(f"ε spent ({accountant.upper()})", color="tab:green")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper center")
    else:  # dp mode: every training loss is computed from private data
        ax.text(0.03, 0.95, "no DP-safe training loss to show\n(all training pixels are private;\n"
                "log_private_metrics=True shows a non-DP one)", transform=ax.transAxes,
                ha="left", va="top", fontsize=8, color="0.3",
                bbox={"facecolor": "white", "edgecolor": "0.8"})
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def views_figure(panels: list[tuple[str, np.ndarray]], path: str, *, title: str) -> None:
    """Images side by side, each with its caption: e.g. a frame, its public mask, and the public
    and private views a MaskDP step trains on (``docs/figures/public_private.py``).

    Args:
      panels: ``(caption, image)`` pairs; an image is ``[H, W, 3]`` uint8 or ``[H, W]`` in [0, 1]
        (drawn in greys, white = 1).
      title: the figure's title.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(2.4 * len(panels), 2.9), dpi=100)
    for ax, (caption, image) in zip(np.atleast_1d(axes), panels, strict=True):
        ax.imshow(image, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
        ax.set_title(caption, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
