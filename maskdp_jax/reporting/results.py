"""Aggregate run reports into the papers' tables: rows = mode, columns = ε, mean ± std over seeds.

The numbers in every table and plot are read from the runs' ``report.json`` files, never
recomputed, so a table can always be traced back to the runs that produced it.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import subprocess
from collections import defaultdict
from typing import Any

import numpy as np

import maskdp_jax
from maskdp_jax.core.plan import Mode

MODE_ORDER = ("nonprivate", "public_only", "dp", "maskdp")
COMMAND_FILE = "sweep_command.json"  # the command that trained a sweep's runs, and its commit


RESULTS_DIR = os.path.join("docs", "results")  # the committed studies, relative to the checkout
#: The checkout's code for git: everything but the committed results (a study being regenerated
#: is not code).
_CODE = (".", f":(exclude){RESULTS_DIR}")
#: Recorded beside a study made with ``--allow_uncommitted``: what the code differed by.
UNCOMMITTED_DIFF = "uncommitted.diff"


def _checkout() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(maskdp_jax.__file__)))


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", _checkout(), *args], capture_output=True, text=True,
                          check=True).stdout


def uncommitted_files() -> list[str]:
    """The checkout's files that differ from its commit: tracked files changed and files git
    does not ignore yet does not track, outside the committed results (a study being regenerated
    is not code). Raises ``OSError`` or ``subprocess.CalledProcessError`` without git."""
    lines = _git("status", "--porcelain", "--", *_CODE).splitlines()
    return sorted(line[3:] for line in lines if line.strip())


def code_commit() -> str:
    """The git commit of this checkout (12 hex digits), ``"... with uncommitted changes"`` when
    :func:`uncommitted_files` finds any, or a sentence saying it is unknown (no git, not a
    checkout)."""
    try:
        head = _git("rev-parse", "--short=12", "HEAD").strip()
        dirty = uncommitted_files()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout, or git is missing)"
    return head + (" with uncommitted changes" if dirty else "")


def check_committed(workdir: str, *, allow_uncommitted: bool = False) -> None:
    """Refuse to write a study under ``docs/results/`` from code that git cannot show.

    A committed study must name the commit whose code made it. When ``workdir`` lies under this
    checkout's ``docs/results/`` and :func:`uncommitted_files` finds any, the study is refused;
    with ``allow_uncommitted`` it goes ahead and ``<workdir>/uncommitted.diff`` records the
    difference (``git diff HEAD`` and the untracked files' names), which the results then show
    beside their commit. Elsewhere, and outside a git checkout, nothing is checked.

    Raises:
      ValueError: the tree has uncommitted changes (one line naming the files).
    """
    results_root = os.path.join(_checkout(), RESULTS_DIR)
    if os.path.commonpath([os.path.abspath(workdir), results_root]) != results_root:
        return
    try:
        dirty = uncommitted_files()
    except (OSError, subprocess.CalledProcessError):
        return
    if not dirty:
        return
    if not allow_uncommitted:
        shown = ", ".join(dirty[:8]) + (f" and {len(dirty) - 8} more" if len(dirty) > 8 else "")
        raise ValueError(f"{workdir} is a committed study (under {RESULTS_DIR}/) and the code "
                         f"has uncommitted changes: {shown}. Commit them first, or pass "
                         f"--allow_uncommitted to record the diff in {UNCOMMITTED_DIFF} beside "
                         "the results.")
    diff = _git("diff", "HEAD", "--", *_CODE)
    untracked = _git("ls-files", "--others", "--exclude-standard", "--", *_CODE).splitlines()
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, UNCOMMITTED_DIFF), "w") as f:
        f.write(diff + "".join(f"# untracked: {name}\n" for name in untracked))


#: Vector extensions XLA:CPU picks kernels by: two machines named alike ("AMD EPYC") with and
#: without them round differently in the last bits. Shown in reports; the bit-for-bit identity
#: of a host is :func:`cpu_identity`.
CPU_FEATURES = ("avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")


def _cpuinfo() -> dict[str, str]:
    """The first processor's ``key: value`` lines of /proc/cpuinfo; empty where it is
    unreadable (not Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in
                                                 first.splitlines()) if k.strip()}


def cpu_kind() -> str:
    """The CPU model and its vector extensions, for a person to read; ``"unknown"`` where
    /proc/cpuinfo cannot be read."""
    info = _cpuinfo()
    if not info:
        return "unknown"
    flags = info.get("flags", "").split()
    return (f"{info.get('model name', 'unknown')} "
            f"({' '.join(f for f in CPU_FEATURES if f in flags) or 'no AVX-512'})")


def cpu_identity() -> str:
    """What XLA:CPU compiles for: vendor, family, model and stepping, and a digest of every
    feature flag, e.g. ``"AuthenticAMD family 25 model 17 stepping 1, flags 3f2a9c1e07b4"``.

    XLA targets the host's micro-architecture (LLVM picks the vector width, the fused
    multiply-adds and the reduction order from it), so two CPUs of one brand name but different
    generations (AMD EPYC family 25 and 26) round floats differently in the last bits. Seeded
    results are bit-for-bit equal only between hosts of one identity; "unknown" where
    /proc/cpuinfo cannot be read, which matches no other host.
    """
    info = _cpuinfo()
    if not info:
        return "unknown"
    flags = " ".join(sorted(info.get("flags", "").split()))
    return (f"{info.get('vendor_id', '?')} family {info.get('cpu family', '?')} model "
            f"{info.get('model', '?')} stepping {info.get('stepping', '?')}, flags "
            f"{hashlib.sha256(flags.encode()).hexdigest()[:12]}")


def build_environment() -> dict[str, str]:
    """What bit-for-bit results depend on: the JAX and jaxlib versions, the CPU
    (:func:`cpu_identity`; :func:`cpu_kind` for a reader) and the XLA flags. Seeded results are
    exact for one such environment, and equal within rounding across CPUs."""
    import jax
    import jaxlib

    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "cpu": cpu_kind(),
            "cpu_identity": cpu_identity(), "xla_flags": os.environ.get("XLA_FLAGS", "")}


def record_command(workdir: str, command: str, *, fresh: bool) -> None:
    """Write ``<workdir>/sweep_command.json``: the command line that trains the runs (with every
    override, so that it can be rerun), :func:`code_commit`, and ``commits``: every commit whose
    code trained runs that are still in the workdir. Call it only when runs are about to be
    trained; ``fresh``: no run of the workdir is finished, so earlier commits made nothing that
    remains."""
    earlier = None if fresh else recorded_command(workdir)
    commits = [] if earlier is None else earlier.get("commits", [earlier["commit"]])
    commit = code_commit()
    with open(os.path.join(workdir, COMMAND_FILE), "w") as f:
        json.dump({"command": command, "commit": commit,
                   "commits": commits + [c for c in [commit] if c not in commits]}, f, indent=1)
        f.write("\n")


def recorded_command(workdir: str) -> dict[str, str] | None:
    """What :func:`record_command` wrote under ``workdir``, or None."""
    path = os.path.join(workdir, COMMAND_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_reports(root: str) -> list[dict[str, Any]]:
    """Every ``*/report.json`` directly under ``root``, sorted by run directory name."""
    reports = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "report.json")
        if os.path.isfile(path):
            with open(path) as f:
                report = json.load(f)
            report["run"] = name
            reports.append(report)
    return reports


def _epsilon_label(report: dict[str, Any]) -> float:
    """The ε a run was calibrated to (:attr:`~maskdp_jax.core.plan.Mode.fixed_epsilon` without a
    private pass: ∞ for ``nonprivate``, 0 for ``public_only``)."""
    mode = Mode(report["config"]["mode"])
    if not mode.is_private:
        return mode.fixed_epsilon
    return float(report["config"]["privacy"]["target_epsilon"])


def rows(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per run: what the CSV holds."""
    out = []
    for r in reports:
        privacy = r["privacy"]
        out.append({
            "run": r["run"],
            "mode": r["config"]["mode"],
            "target_epsilon": _epsilon_label(r),
            "epsilon_pld": float(privacy["epsilon_pld"]),
            "epsilon_rdp": (math.nan if privacy["epsilon_rdp"] is None
                            else float(privacy["epsilon_rdp"])),
            "delta": float(r["config"]["privacy"]["delta"]),
            "noise_multiplier": float(privacy["noise_multiplier"] or 0.0),
            "clips_per_video": int(r["config"]["input"]["clips_per_video"]),
            "view": r["config"].get("view", "full"),
            "seed": int(r["config"]["seed"]),
            "data_seed": int(r["config"]["input"].get("data_seed", 0)),
            "learning_rate": float(r["config"]["optimizer"]["learning_rate"]),
            "l2_clip_norm": float(r["config"]["privacy"]["l2_clip_norm"]),
            "num_epochs": float(r["config"]["num_epochs"]),
            "top1": float(r["metrics"]["top1"]),
            "mean_class_accuracy": float(r["metrics"]["mean_class_accuracy"]),
            # the embedded dataset's share setting: the label's share in the private part
            "private_share": r["config"]["input"].get("private_share"),
            "public_weight": float(r["config"]["privacy"].get("public_weight", 1.0)),
            # MaskDP with an optimiser per pass: its private pass's learning rate (else None)
            "private_learning_rate": r["config"]["optimizer"].get("private_learning_rate"),
        })
    return out


def write_csv(table_rows: list[dict[str, Any]], path: str) -> None:
    """Write table rows (dicts with the same keys, in column order) as CSV with a header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table_rows[0]))
        writer.writeheader()
        writer.writerows(table_rows)


def summarize(
    table_rows: list[dict[str, Any]], *, metric: str = "top1"
) -> dict[tuple[str, int, float], tuple[float, float, int]]:
    """``(mode, clips_per_video, ε) -> (mean, std, num_seeds)``; std is the sample std (ddof=1)."""
    groups: dict[tuple[str, int, float], list[float]] = defaultdict(list)
    for row in table_rows:
        groups[(row["mode"], row["clips_per_video"], row["target_epsilon"])].append(row[metric])
    return {
        key: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0, len(v))
        for key, v in groups.items()
    }


def markdown_table(table_rows: list[dict[str, Any]], *, metric: str = "top1") -> str:
    """Papers' format: one row per (mode, K), one column per ε, cells ``mean ± std`` in percent.

    The rows without a private pass fill every column with their one value, as the papers print
    the non-private row (ε = ∞; ``public_only``: ε = 0, it reads no private pixel). Runs trained
    on one view (:func:`view_table`) are left out.
    """
    stats = summarize([r for r in table_rows if r["view"] == "full"], metric=metric)
    epsilons = sorted({e for (m, _, e) in stats if Mode(m).is_private})
    header = ["mode", "K"] + [f"ε = {e:g}" for e in epsilons] + ["ε = ∞"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    keys = sorted({(m, k) for (m, k, _) in stats},
                  key=lambda mk: (MODE_ORDER.index(mk[0]), mk[1]))
    for mode, k in keys:
        cells = []
        for e in [*epsilons, math.inf]:
            if not Mode(mode).is_private:
                s = stats.get((mode, k, Mode(mode).fixed_epsilon))
            else:
                s = stats.get((mode, k, e))
            cells.append("—" if s is None else f"{100 * s[0]:.1f} ± {100 * s[1]:.1f}")
        lines.append(f"| {mode} | {k} | " + " | ".join(cells) + " |")
    seeds = sorted({s[2] for s in stats.values()})
    draws = {r.get("data_seed", 0) for r in table_rows}
    lines.append("")
    lines.append(f"Test {metric} in %, mean ± sample std over {'/'.join(map(str, seeds))} "
                 + (f"runs ({len(draws)} data draws, each with its seeds)." if len(draws) > 1
                    else "seeds."))
    return "\n".join(lines)



def gap(table_rows: list[dict[str, Any]], *, epsilon: float,
        metric: str = "top1") -> tuple[float, float, float, int, int] | None:
    """MaskDP − DP at ``epsilon`` (one-clip, full-view runs): ``(difference of the means, low,
    high, n_maskdp, n_dp)``, the bounds a 95 % t interval (:func:`difference`: Welch's over the
    runs of one data draw, the per-draw differences' over several); None without enough runs.

    >>> rows = [{"mode": m, "target_epsilon": 1.0, "view": "full", "clips_per_video": 1,
    ...          "top1": v} for m, v in [("dp", .3), ("dp", .32), ("maskdp", .5), ("maskdp", .54)]]
    >>> d, lo, hi, *_ = gap(rows, epsilon=1.0)
    >>> round(d, 3), lo < d < hi
    (0.21, True)
    """
    return difference(_full_view_runs(table_rows, "maskdp", epsilon),
                      _full_view_runs(table_rows, "dp", epsilon), metric=metric)


def _full_view_runs(table_rows: list[dict[str, Any]], mode: str,
                    epsilon: float) -> list[dict[str, Any]]:
    """The one-clip, full-view runs of ``mode`` at ``epsilon``."""
    return [r for r in table_rows if r["mode"] == mode and r["target_epsilon"] == epsilon
            and r["view"] == "full" and r["clips_per_video"] == 1]


def _full_view_values(table_rows: list[dict[str, Any]], mode: str, epsilon: float,
                      metric: str) -> list[float]:
    """``metric`` of the one-clip, full-view runs of ``mode`` at ``epsilon``."""
    return [r[metric] for r in _full_view_runs(table_rows, mode, epsilon)]


def difference(a: list[dict[str, Any]], b: list[dict[str, Any]], *, metric: str = "top1",
               level: float = 0.95) -> tuple[float, float, float, int, int] | None:
    """Mean ``metric`` of runs ``a`` minus that of runs ``b``, with its t interval at ``level``:
    ``(difference, low, high, len(a), len(b))``, or None without enough runs.

    On one data draw (every run has the same ``data_seed``) the runs of each side are its
    replicates and the interval is Welch's (:func:`welch`, ≥ 2 runs a side): it covers the
    training seed's spread on that draw only. Over several draws, the runs of a draw share its
    training and test videos, so they are not independent replicates: the difference is taken
    within each draw (its ``a`` mean minus its ``b`` mean, ≥ 1 run of each) and the interval is
    the one-sample t interval of those per-draw differences (J − 1 degrees of freedom for J ≥ 2
    draws). That interval carries both the draw's and the seed's variance (each per-draw
    difference holds both), and it pairs the modes on the same videos. Its point estimate is
    the mean over draws, which equals the mean over runs when every draw has as many runs.

    >>> runs = [{"data_seed": d, "top1": t} for d, t in [(0, .5), (0, .52), (1, .4), (1, .42)]]
    >>> base = [{"data_seed": d, "top1": t} for d, t in [(0, .45), (0, .45), (1, .37), (1, .37)]]
    >>> d, lo, hi, na, nb = difference(runs, base)
    >>> round(d, 3), lo < d < hi, (na, nb)
    (0.05, True, (4, 4))
    """
    import scipy.stats

    draws = sorted({r.get("data_seed", 0) for r in a} | {r.get("data_seed", 0) for r in b})
    if len(draws) == 1:
        return welch([r[metric] for r in a], [r[metric] for r in b], level=level)
    per_draw = []
    for draw in draws:
        va = [r[metric] for r in a if r.get("data_seed", 0) == draw]
        vb = [r[metric] for r in b if r.get("data_seed", 0) == draw]
        if va and vb:
            per_draw.append(float(np.mean(va)) - float(np.mean(vb)))
    if len(per_draw) < 2:
        return None
    d = np.asarray(per_draw)
    diff = float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(len(d))
    half = float(scipy.stats.t.ppf(0.5 + level / 2, len(d) - 1)) * se
    return diff, diff - half, diff + half, len(a), len(b)


def welch(a, b, *, level: float = 0.95) -> tuple[float, float, float, int, int] | None:
    """``mean(a) − mean(b)`` with its Welch t interval at ``level`` (95 %): ``(difference, low,
    high, len(a), len(b))``; None without at least 2 values on each side."""
    import scipy.stats

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    diff = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff, len(a), len(b)
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(scipy.stats.t.ppf(0.5 + level / 2, dof)) * se
    return diff, diff - half, diff + half, len(a), len(b)


def best_baseline_gap(table_rows: list[dict[str, Any]], *, epsilon: float,
                      metric: str = "top1") -> tuple[float, float, float] | None:
    """MaskDP − max(public-only, DP) at ``epsilon`` (one-clip, full-view runs): ``(gap, low,
    high)``, or None without at least 2 runs of each of the three modes.

    The gap is the smaller of the two differences of means, MaskDP − public-only (its runs have
    ε = 0 at every ε) and MaskDP − DP at ``epsilon``. Its interval covers both differences at
    once: each is :func:`difference`'s interval at 97.5 % (Bonferroni: both hold with
    probability ≥ 95 %), and since the minimum is increasing in each argument,
    ``[min of the lows, min of the highs]`` then holds the true gap. Picking the better
    baseline by its observed mean and reporting a single 95 % interval would favour MaskDP;
    this does not.

    >>> rows = [{"mode": m, "target_epsilon": e, "view": "full", "clips_per_video": 1, "top1": v}
    ...         for m, e, v in [("dp", 1.0, .30), ("dp", 1.0, .34), ("public_only", 0.0, .45),
    ...                         ("public_only", 0.0, .47), ("maskdp", 1.0, .50),
    ...                         ("maskdp", 1.0, .52)]]
    >>> g, lo, hi = best_baseline_gap(rows, epsilon=1.0)
    >>> round(g, 3), lo < g < hi
    (0.05, True)
    """
    maskdp = _full_view_runs(table_rows, "maskdp", epsilon)
    pairs = [difference(maskdp, _full_view_runs(table_rows, mode, eps), metric=metric,
                        level=0.975)
             for mode, eps in (("public_only", 0.0), ("dp", epsilon))]
    if any(p is None for p in pairs):
        return None
    return tuple(min(p[i] for p in pairs) for i in range(3))


def public_only_ceiling(private_share: float, num_classes: int = 4) -> float:
    """The best accuracy of a model of the public view in the share setting
    (:mod:`maskdp_jax.data.synthetic`, "Settings"): right on the videos whose label the avatar
    shows, a guess among ``num_classes`` on the others (it sees that the avatar stands still).

    >>> public_only_ceiling(0.5)
    0.625
    """
    return 1.0 - private_share + private_share / num_classes


def _maskdp_step(row: dict[str, Any]) -> tuple[float, float | None]:
    """A MaskDP run's step: (λ, its private pass's learning rate with an optimiser per pass, or
    None with one optimiser)."""
    lr = row.get("private_learning_rate")
    return row["public_weight"], None if lr is None else float(lr)


def share_table(table_rows: list[dict[str, Any]], *, metric: str = "top1") -> str:
    """Where MaskDP pays (configs/sweep_where_it_pays.py): one row per (private share, ε) of
    the one-clip, full-view runs: non-private (what the full video allows this model without
    privacy), public-only, DP and MaskDP as ``mean ± std`` in %, the public
    view's ceiling (:func:`public_only_ceiling`), and MaskDP − max(public-only, DP) with its
    simultaneous 95 % interval (:func:`best_baseline_gap`); "" without share runs. A row per
    MaskDP step where the runs hold several (λ, and the private learning rate of an optimiser
    per pass, each a column where some run set it)."""
    at_share = defaultdict(list)
    for r in table_rows:
        if r.get("private_share") is not None and r["view"] == "full" and (
                r["clips_per_video"] == 1):
            at_share[float(r["private_share"])].append(r)
    if not at_share:
        return ""
    epsilons = sorted({r["target_epsilon"] for runs in at_share.values() for r in runs
                       if Mode(r["mode"]).is_private})
    # MaskDP's step: its public weight λ (privacy.public_weight) and, with an optimiser per
    # pass, its private pass's learning rate; a column each where some run set it
    steps = sorted({_maskdp_step(r) for v in at_share.values() for r in v
                    if r["mode"] == "maskdp"}, key=lambda s: (s[0], s[1] or 0.0))
    by_weight = {w for w, _ in steps} != {1.0}
    by_lr = any(lr is not None for _, lr in steps)
    split = by_weight or by_lr
    lines = ["| private share | ε | " + ("MaskDP's λ | " if by_weight else "")
             + ("MaskDP's private lr | " if by_lr else "")
             + "non-private | public-only | DP | MaskDP | public view's ceiling | "
             "MaskDP − max(public-only, DP) [95 % CI] |",
             "|" + "---|" * (8 + by_weight + by_lr)]

    for share in sorted(at_share):
        # per MaskDP step: the baselines' runs and that step's MaskDP runs, and their
        # (mode, K = 1, ε) -> (mean, std, n)
        runs_at = {step: [r for r in at_share[share] if r["mode"] != "maskdp"
                          or _maskdp_step(r) == step] for step in steps}
        stats_at = {step: summarize(runs, metric=metric) for step, runs in runs_at.items()}
        for epsilon in epsilons:
            for step in steps:
                runs, stats = runs_at[step], stats_at[step]
                if split and ("maskdp", 1, epsilon) not in stats:
                    continue  # this step was not run at this share
                cells = [stats.get((mode, 1, epsilon if Mode(mode).is_private
                                    else Mode(mode).fixed_epsilon)) for mode in MODE_ORDER]
                g = best_baseline_gap(runs, epsilon=epsilon, metric=metric)
                gap_cell = "—" if g is None else (f"{100 * g[0]:+.1f} [{100 * g[1]:+.1f}, "
                                                  f"{100 * g[2]:+.1f}]")
                lines.append(f"| {share:g} | {epsilon:g} | "
                             + (f"{step[0]:g} | " if by_weight else "")
                             + ((f"{step[1]:g} | " if step[1] is not None else "— | ")
                                if by_lr else "")
                             + "".join("— | " if c is None else
                                       f"{100 * c[0]:.1f} ± {100 * c[1]:.1f} | " for c in cells)
                             + f"{100 * public_only_ceiling(share):.1f} | {gap_cell} |")
    per_cell = [len({(r["seed"], r["data_seed"]) for r in v}) for v in at_share.values()]
    draws = len({r["data_seed"] for v in at_share.values() for r in v})
    lines.append("")
    lines.append(f"{metric} in %, mean ± sample std over {min(per_cell)} runs a cell ({draws} data "
                 f"draw{'s' if draws > 1 else ''}); public-only reads no private pixel, so its "
                 "row is the same at every ε.")
    return "\n".join(lines)


def clips_paired_table(table_rows: list[dict[str, Any]], *, epsilon: float,
                       metric: str = "top1") -> str:
    """The multi-clip effect per seed: one row per (mode, seed) with ``metric`` in % at every K
    (``clips_per_video``) at ``epsilon`` (full view) and the largest K minus K = 1; then per mode
    the mean of that difference with its 95 % paired t interval and the two-sided exact sign
    test's p-value. Paired because a seed fixes the initial weights and the randomness key at
    every K, so the seed's level (the largest source of spread) cancels. Empty without at least
    two K; the summary rows need at least 2 seeds with every K.

    >>> rows = [{"mode": "dp", "target_epsilon": 1.0, "view": "full", "clips_per_video": k,
    ...          "seed": s, "top1": b + 0.01 * k} for s, b in enumerate((.3, .4, .2))
    ...         for k in (1, 8)]
    >>> print(clips_paired_table(rows, epsilon=1.0).splitlines()[-1])
    | dp | mean of 3 |  |  | +7.0 [+7.0, +7.0] | sign test p = 0.25 |
    """
    import scipy.stats

    picked = [r for r in table_rows if r["target_epsilon"] == epsilon and r["view"] == "full"]
    ks = sorted({r["clips_per_video"] for r in picked})
    if len(ks) < 2 or ks[0] != 1:
        return ""
    head = " | ".join(f"K = {k}" for k in ks)
    lines = [f"| mode | seed | {head} | K = {ks[-1]} − K = 1 | |",
             "|---|---|" + "---|" * len(ks) + "---|---|"]
    for mode in dict.fromkeys(r["mode"] for r in picked):
        by_seed: dict[int, dict[int, float]] = defaultdict(dict)
        for r in picked:
            if r["mode"] == mode:
                by_seed[r["seed"]][r["clips_per_video"]] = 100 * r[metric]
        diffs = []
        for seed in sorted(by_seed):
            v = by_seed[seed]
            if set(v) != set(ks):
                continue
            diffs.append(v[ks[-1]] - v[1])
            lines.append(f"| {mode} | {seed} | " + " | ".join(f"{v[k]:.1f}" for k in ks)
                         + f" | {diffs[-1]:+.1f} | |")
        if len(diffs) < 2:
            continue
        d = np.asarray(diffs)
        half = float(scipy.stats.t.ppf(0.975, len(d) - 1)) * d.std(ddof=1) / math.sqrt(len(d))
        positive, nonzero = int((d > 0).sum()), int((d != 0).sum())
        p = float(scipy.stats.binomtest(positive, nonzero, 0.5).pvalue) if nonzero else 1.0
        lines.append(f"| {mode} | mean of {len(d)} | " + " | " * (len(ks) - 1)
                     + f" | {d.mean():+.1f} [{d.mean() - half:+.1f}, {d.mean() + half:+.1f}] | "
                     f"sign test p = {p:.2g} |")
    return "\n".join(lines)


def noise_table(independent: list[dict[str, Any]], banded: list[dict[str, Any]], *,
                metric: str = "top1") -> str:
    """Independent against banded noise: one row per private mode and ε present in both sets
    of table rows (:func:`rows`; one-clip, full-view runs), each mean ± sample std over its
    runs, and banded − independent in points with its 95 % Welch interval (the two noises
    draw other batches and noise, so the runs are not paired)."""
    lines = ["| mode | ε | independent | banded | banded − independent (points) | "
             "95 % interval | runs |", "|---|---|---|---|---|---|---|"]
    for mode in ("dp", "maskdp"):
        for eps in sorted({r["target_epsilon"] for r in banded if r["mode"] == mode}):
            a = _full_view_values(banded, mode, eps, metric)
            b = _full_view_values(independent, mode, eps, metric)
            w = welch(a, b)
            if w is None:
                continue
            d, lo, hi, na, nb = w
            cells = [f"{100 * np.mean(v):.1f} ± {100 * np.std(v, ddof=1):.1f}" for v in (b, a)]
            lines.append(f"| {mode} | {eps:g} | {cells[0]} | {cells[1]} | {100 * d:+.1f} | "
                         f"[{100 * lo:+.1f}, {100 * hi:+.1f}] | {nb} / {na} |")
    return "\n".join(lines)


def factor_accuracy(confusion, factor) -> float:
    """The accuracy of one factor of a label: the fraction of examples whose prediction has the
    true label's ``factor(label)``, from a ``[true][predicted]`` confusion matrix (a report's
    ``metrics.confusion``). On the embedded ``person`` setting, ``factor=lambda c: c % 4`` is the
    motion and ``lambda c: c // 4`` the pose (data/synthetic.py): which part of the label a model
    carries to full videos.

    >>> factor_accuracy([[3, 1], [0, 4]], lambda c: 0)
    1.0
    >>> factor_accuracy([[3, 1], [0, 4]], lambda c: c)
    0.875
    """
    confusion = np.asarray(confusion)
    k = len(confusion)
    same = np.array([[factor(i) == factor(j) for j in range(k)] for i in range(k)])
    return float(confusion[same].sum() / confusion.sum())


def gap_table(table_rows: list[dict[str, Any]], *, metric: str = "top1") -> str:
    """One row per ε with both private modes: MaskDP − DP in points with its 95 % interval
    (:func:`gap`) and, where ``public_only`` runs exist, MaskDP − public-only and MaskDP −
    max(public-only, DP) (:func:`best_baseline_gap`); "" when no ε has enough runs of both."""
    epsilons = sorted({r["target_epsilon"] for r in table_rows
                       if r["mode"] == "maskdp" and math.isfinite(r["target_epsilon"])})
    public = len(_full_view_values(table_rows, "public_only", 0.0, metric))
    lines = []
    for e in epsilons:
        g = gap(table_rows, epsilon=e, metric=metric)
        if g is None:
            continue
        d, lo, hi, na, nb = g
        cells = [f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]" if public
                 else f"{100 * d:+.1f} | [{100 * lo:+.1f}, {100 * hi:+.1f}]"]
        if public:
            p = difference(_full_view_runs(table_rows, "maskdp", e),
                           _full_view_runs(table_rows, "public_only", 0.0), metric=metric)
            b = best_baseline_gap(table_rows, epsilon=e, metric=metric)
            cells += ["—" if v is None else
                      f"{100 * v[0]:+.1f} [{100 * v[1]:+.1f}, {100 * v[2]:+.1f}]" for v in (p, b)]
        lines.append(f"| {e:g} | " + " | ".join(cells) + f" | {na} / {nb}"
                     + (f" / {public}" if public else "") + " |")
    if not lines:
        return ""
    num_draws = len({r.get("data_seed", 0) for r in table_rows})
    interval = ("the t interval of the per-draw differences of two modes' means (over "
                f"{num_draws} data draws: it holds the draw's variance)" if num_draws > 1 else "")
    if public:
        head = ["| ε | MaskDP − DP (points, 95 %) | MaskDP − public-only (95 %) | "
                "MaskDP − max(public-only, DP) (joint 95 %) | runs (MaskDP / DP / public-only) |",
                "|---|---|---|---|---|"]
        note = ("Test {metric}; an interval is "
                + (interval or "Welch's t interval of the difference of two modes' means over "
                   "their runs") + ". The last gap is the smaller difference, its "
                "interval from both differences' 97.5 % intervals (Bonferroni), so that choosing "
                "the better baseline after the fact cannot favour MaskDP; public-only (ε = 0) "
                "is the same runs at every ε.")
    else:
        head = ["| ε | MaskDP − DP (points) | 95 % interval | runs (MaskDP / DP) |",
                "|---|---|---|---|"]
        note = ("Test {metric}; the interval is "
                + (interval or "Welch's t interval of the difference of the two modes' means "
                   "over their seeds") + ".")
    return "\n".join([*head, *lines, "", note.format(metric=metric)])


# The rows of Schneider et al. 2024a's Table 3 (context ablation) that a view of our videos
# reproduces, and the
# private view, which is no row of it (the avatar's filled cells keep its silhouette visible).
VIEW_ROWS = {"public": "Avatar only", "background": "Background only (inpainted)",
             "full": "Anonymized (both)", "private": "private view (not in Table 3)"}


def view_table(table_rows: list[dict[str, Any]]) -> str:
    """The context ablation (Schneider et al. 2024a Table 3): one row per trained view of the
    non-private runs, test top-1 and mean class accuracy in percent, ``mean ± std`` over seeds."""
    lines = ["| Table 3 row | view | top-1 | mean class accuracy | seeds |",
             "|---|---|---|---|---|"]
    for view, label in VIEW_ROWS.items():
        chosen = [r for r in table_rows if r["view"] == view and r["mode"] == "nonprivate"
                  and r["clips_per_video"] == 1]
        if not chosen:
            continue
        cells = []
        for metric in ("top1", "mean_class_accuracy"):
            v = [r[metric] for r in chosen]
            std = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
            cells.append(f"{100 * float(np.mean(v)):.1f} ± {100 * std:.1f}")
        lines.append(f"| {label} | `{view}` | {cells[0]} | {cells[1]} | {len(chosen)} |")
    return "\n".join(lines)


def variant_table(table_rows: list[dict[str, Any]], variants: dict[str, dict[str, Any]]) -> str:
    """One row per sweep variant (``{name: {"dotted.key": value}}`` of a sweep config), and per
    mode when the runs have several: its changes, top-1 in percent as median, range and
    ``mean ± std`` over its runs (matched by the run name's suffix ``_<name>``)."""
    modes = [m for m in MODE_ORDER if any(r["mode"] == m for r in table_rows)]
    by_mode = len(modes) > 1
    lines = ["| " + ("mode | " if by_mode else "") + "variant | changes | runs | median | range | "
             "mean ± std |", "|---" * (6 + by_mode) + "|"]
    for mode in modes if by_mode else [None]:
        for name, overrides in variants.items():
            v = _variant_values(table_rows, name, mode)
            if not v:
                continue
            std = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
            lines.append("| " + (f"{mode} | " if by_mode else "") + f"{name} | "
                         f"{_changes(overrides)} | {len(v)} | {100 * float(np.median(v)):.1f} | "
                         f"{100 * min(v):.1f}–{100 * max(v):.1f} | "
                         f"{100 * float(np.mean(v)):.1f} ± {100 * std:.1f} |")
    return "\n".join(lines)


def _variant_values(table_rows: list[dict[str, Any]], name: str, mode: str | None) -> list[float]:
    """Top-1 of the runs of variant ``name`` (run names ending ``_<name>``), of ``mode`` unless
    None."""
    return [r["top1"] for r in table_rows
            if r["run"].endswith(f"_{name}") and mode in (None, r["mode"])]


def _changes(overrides: dict[str, Any]) -> str:
    """A variant's overrides as ```key` = value`` pairs, ``none`` without any."""
    return ", ".join(f"`{k}` = {v:g}" if isinstance(v, float | int) else f"`{k}` = {v}"
                     for k, v in dict(overrides).items()) or "none"


def best_variants(table_rows: list[dict[str, Any]],
                  variants: dict[str, dict[str, Any]]) -> dict[str, tuple[str, float, int]]:
    """Per mode, the variant with the highest mean top-1 over its runs: ``{mode: (variant,
    mean, runs)}`` (ties: the first variant listed). What a tuning sweep on the validation split
    hands to the runs that read the test split.

    >>> rows = [{"mode": "dp", "run": f"dp_eps1_k1_seed{s}_{v}", "top1": t}
    ...         for s, (v, t) in enumerate([("a", .3), ("b", .4), ("a", .35), ("b", .38)])]
    >>> best_variants(rows, {"a": {}, "b": {}})
    {'dp': ('b', 0.39, 2)}
    """
    best = {}
    for mode in MODE_ORDER:
        means = [(name, float(np.mean(v)), len(v)) for name in variants
                 if (v := _variant_values(table_rows, name, mode))]
        if means:  # max keeps the first of equal means
            best[mode] = max(means, key=lambda t: t[1])
    return best


def best_variant_table(table_rows: list[dict[str, Any]], variants: dict[str, dict[str, Any]], *,
                       split: str) -> str:
    """:func:`best_variants` as a table (each mode's best, its changes and mean ``split``
    top-1); "" with fewer than two modes."""
    best = best_variants(table_rows, variants)
    if len(best) < 2:
        return ""
    return "\n".join([f"| mode | variant | changes | mean {split} top-1 | runs |",
                      "|---|---|---|---|---|",
                      *(f"| {mode} | {name} | {_changes(variants[name])} | {100 * mean:.1f} | "
                        f"{n} |" for mode, (name, mean, n) in best.items())])


def paired_table(reports: list[dict[str, Any]], *, variants: tuple[str, str]) -> str:
    """One row per seed of two sweep variants (run names ending ``_<variant>``): test top-1 in
    percent of each, their difference, and each run's training seconds, then the mean
    difference. A paired comparison when the runs are seeded: the two runs of a seed share
    batches, clips and noise."""
    a, b = variants
    by_seed: dict[int, dict[str, dict]] = defaultdict(dict)
    for r in reports:
        for v in variants:
            if r["run"].endswith(f"_{v}"):
                by_seed[int(r["config"]["seed"])][v] = r
    lines = [f"| seed | top-1 {a} | top-1 {b} | {b} − {a} | train s {a} | train s {b} |",
             "|---|---|---|---|---|---|"]
    diffs = []
    for seed in sorted(by_seed):
        pair = by_seed[seed]
        if set(pair) != set(variants):
            continue
        ta, tb = (100 * float(pair[v]["metrics"]["top1"]) for v in variants)
        diffs.append(tb - ta)
        sa, sb = (float(pair[v]["timing"]["train_seconds"]) for v in variants)
        lines.append(f"| {seed} | {ta:.1f} | {tb:.1f} | {tb - ta:+.1f} | {sa:.0f} | {sb:.0f} |")
    lines.append(f"| mean | | | {float(np.mean(diffs)):+.1f} | | |")
    return "\n".join(lines)
