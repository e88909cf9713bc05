r"""Our results beside the papers' tables (Schneider et al. 2024a, Tables 1-3), and what a table
costs to train::

    python -m maskdp_jax.paper_tables --table=hmdb51 --anonymized=runs/hmdb51_anon \
        --real=runs/hmdb51_real
    python -m maskdp_jax.paper_tables --table=ntu60     # the paper's table and its cost only

``--anonymized`` and ``--real`` are workdirs of ``python -m maskdp_jax.sweep
--config=configs/sweep_paper.py:<table>`` run on the anonymised videos (masks: the anonymiser's
public masks) and on the raw videos (masks: its person masks, ``--person_dir``), docs/guides/
reproduce.md. Each cell prints ``ours / paper``: ours is the mean over the seeds found of the
table's metric (top-1, or mean per-class accuracy for Toyota Smarthome) in percent, ``—`` where
no run exists. The ∞ column of every row is the non-private run on that row's data, as the paper
prints it.

The papers' numbers are quoted from the seed texts (/work/shared/seeds/): ``PaperRow.quote`` is
the seed's line verbatim (its PDF extraction repeats some numbers four times, "1.91.91.91.9" for
1.9), ``PaperRow.values`` the numbers read from it; tests/test_reporting_paper_tables.py checks one
against the other and, where the seed files are present, the quotes against them.

The GPU-hours are an estimate, not a measurement: the logical steps of the papers' setting
(:mod:`maskdp_jax.accounting.paper_settings`) times the H100 step time measured for ``mvit_v2_s``
with selective fine-tuning at B = 128 (docs/benchmarks.md, "Against Opacus on an H100";
``H100_STEP_SECONDS``), summed over the runs a table needs (one seed). Not counted:
compilation (minutes per process at this size; docs/benchmarks.md, "Compile time"), evaluation,
and decoding (an H100 needs a pre-extracted clip store or many cores to be fed;
docs/benchmarks.md, "Data throughput").
No library covers quoting tables of these papers, so this module is written here.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import numpy as np

from maskdp_jax.accounting import paper_settings
from maskdp_jax.reporting import results

INF = math.inf
# H100 seconds per logical step (B = 128), mvit_v2_s, selective (k = 2), float32;
# docs/benchmarks.md, "Against Opacus on an H100".
H100_STEP_SECONDS = {"maskdp": 1.5692, "dp": 0.8054, "nonprivate": 0.7947}
DATA = ("real", "anonymized")


@dataclasses.dataclass(frozen=True)
class PaperRow:
    """One row of a paper table: ``label`` as printed, the ``data`` it trains on (``real``: the raw
    videos; ``anonymized``: the anonymiser's output), its ``mode``, the ``values`` per column of
    the table (None where the paper prints none) and the seed's line, verbatim."""

    label: str
    data: str
    mode: str
    values: tuple[float | None, ...]
    quote: str
    ours: bool = True  # False: another paper's numbers quoted in the table, not ours to compare


@dataclasses.dataclass(frozen=True)
class PaperTable:
    key: str
    source: str
    setting: str  # accounting.paper_settings name
    metric: str  # report metric: "top1" | "mean_class_accuracy"
    epsilons: tuple[float, ...]  # columns; INF last
    rows: tuple[PaperRow, ...]
    config: str  # the sweep config that trains it

    @property
    def finite_epsilons(self) -> tuple[float, ...]:
        return tuple(e for e in self.epsilons if math.isfinite(e))


_T1 = (0.1, 0.25, 0.5, 0.75, 1.0, 5.0, INF)
_T2 = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, INF)

TABLES = {t.key: t for t in (
    PaperTable(
        "ntu60", "Schneider et al. 2024a, Table 1 (NTU RGB+D, accuracy)", "NTU RGB+D 60 (CS)",
        "top1", _T1, (
            PaperRow("Real World DP", "real", "dp", (1.9, 2.43, 15.9, 49.9, 55.2, 70.8, 83.8),
                     "NTU RGB Real World DP 1.91.91.91.9 2.432.432.432.43 15.915.915.915.9 "
                     "49.9 55.2 70.8 83.883.883.883.8"),
            PaperRow("Anonymized DP", "anonymized", "dp",
                     (1.7, 2.29, 14.3, 30.65, 39.2, 52.9, 68.3),
                     "Anonymized DP 1.71.71.71.7 2.292.292.292.29 14.314.314.314.3 "
                     "30.6530.6530.6530.65 39.239.239.239.2 52.952.952.952.9 68.3"),
            PaperRow("Anonymized MaskDP", "anonymized", "maskdp",
                     (4.2, 16.18, 35.5, 48.30, 51.0, 58.0, 68.3),
                     "Anonymized MaskDP 4.2 16.18 35.5 48.3048.3048.3048.30 51.051.051.051.0 "
                     "58.058.058.058.0 68.3"),
            PaperRow("Real World MaskDP", "real", "maskdp",
                     (4.6, 26.6, 60.8, 61.0, 72.1, 77.3, 83.8),
                     "Real World MaskDP 4.6 26.6 60.8 61.0 72.1 77.3 83.8"),
        ), "configs/sweep_paper.py:ntu60"),
    PaperTable(
        "toyota_smarthome",
        "Schneider et al. 2024a, Table 1 (Toyota Smarthome, mean per-class accuracy)",
        "Toyota Smarthome (CS)", "mean_class_accuracy", _T1, (
            PaperRow("Real World DP", "real", "dp", (2.6, 3.8, 8.0, 14.0, 20.2, 29.9, 52.7),
                     "TSH Real World DP 2.62.62.62.6 3.83.83.83.8 8.08.08.08.0 14.014.014.014.0 "
                     "20.2 29.9 52.752.752.752.7"),
            PaperRow("Anonymized DP", "anonymized", "dp", (3.0, 3.6, 4.4, 4.7, 7.3, 16.9, 26.7),
                     "Anonymized DP 3.03.03.03.0 3.63.63.63.6 4.44.44.44.4 4.74.74.74.7 "
                     "7.37.37.37.3 16.916.916.916.9 26.726.726.726.7"),
            PaperRow("Anonymized MaskDP", "anonymized", "maskdp",
                     (3.2, 9.1, 11.1, 14.4, 16.9, 17.1, 26.7),
                     "Anonymized MaskDP 3.2 9.1 11.1 14.4 16.916.916.916.9 17.117.117.117.1 "
                     "26.726.726.726.7"),
            PaperRow("Real World MaskDP", "real", "maskdp",
                     (3.9, 15.3, 18.9, 24.3, 27.3, 32.3, 52.7),
                     "Real World MaskDP 3.9 15.3 18.9 24.3 27.3 32.3 52.7"),
        ), "configs/sweep_paper.py:toyota_smarthome"),
    PaperTable(
        "hmdb51", "Schneider et al. 2024a, Table 2 (HMDB-51, accuracy)", "HMDB-51 (split 1)",
        "top1", _T2, (
            PaperRow("[41] Real World DP", "real", "dp",
                     (None, None, None, None, 51.7, 56.5, None),
                     "HMDB [41] Real World DP \u2014\u2014 51.7 56.5", ours=False),
            PaperRow("Real World DP", "real", "dp", (2.3, 3.9, 6.6, 36.7, 65.8, 73.3, 76.1),
                     "| Real World DP 2.3 3.9 6.6 36.7 65.8 73.3 76.1"),
            PaperRow("Anonymized DP", "anonymized", "dp", (2.4, 3.3, 4.5, 13.5, 45.7, 57.7, 60.9),
                     "Ours Anonymized DP 2.4 3.3 4.5 13.5 45.7 57.7 60.9"),
            PaperRow("Anonymized MaskDP", "anonymized", "maskdp",
                     (8.2, 7.8, 26.2, 39.67, 51.5, 50.9, 60.9),
                     "| Anonymized MaskDP 8.2 7.8 26.2 39.67 51.5 50.9 60.9"),
        ), "configs/sweep_paper.py:hmdb51"),
    PaperTable(
        "ucf101", "Schneider et al. 2024a, Table 2 (UCF-101, accuracy)", "UCF-101 (split 1)",
        "top1", _T2, (
            PaperRow("[41] Real World DP", "real", "dp",
                     (None, None, None, None, 75.1, 78.2, None),
                     "UCF [41] Real World DP \u2014\u2014 75.1 78.2", ours=False),
            PaperRow("Real World DP", "real", "dp", (1.2, 2.0, 66.7, 85.5, 93.1, 95.3, 97.2),
                     "| Real World DP 1.2 2.0 66.7 85.5 93.1 95.3 97.2"),
            PaperRow("Anonymized DP", "anonymized", "dp", (0.7, 1.5, 19.5, 65.6, 77.1, 82.1, 85.9),
                     "Ours Anonymized DP 0.7 1.5 19.5 65.6 77.1 82.1 85.9"),
            PaperRow("Anonymized MaskDP", "anonymized", "maskdp",
                     (5.0, 15.4, 36.6, 63.9, 74.5, 73.9, 85.9),
                     "| Anonymized MaskDP 5.0 15.4 36.6 63.9 74.5 73.9 85.9"),
        ), "configs/sweep_paper.py:ucf101"),
)}


def load(workdir: str, *, metric: str) -> dict[tuple[str, float], list[float]]:
    """``(mode, ε) -> [metric per seed]`` of the one-clip, full-view runs under a sweep workdir
    (ε = ∞ for non-private runs); refuses a workdir without run reports."""
    reports = results.load_reports(workdir)
    if not reports:
        raise FileNotFoundError(f"no run reports under {workdir}: run `python -m maskdp_jax.sweep "
                                "--config=configs/sweep_paper.py:<table> --workdir=...` first.")
    cells: dict[tuple[str, float], list[float]] = defaultdict(list)
    for row in results.rows(reports):
        if row["view"] == "full" and row["clips_per_video"] == 1:
            cells[(row["mode"], row["target_epsilon"])].append(row[metric])
    return dict(cells)


def ours(table: PaperTable, row: PaperRow, epsilon: float,
         runs: dict[str, dict[tuple[str, float], list[float]]]) -> list[float] | None:
    """Our values (fractions, one per seed) for one cell, or None."""
    found = runs.get(row.data)
    if found is None or not row.ours:
        return None
    return found.get(("nonprivate" if math.isinf(epsilon) else row.mode, epsilon))


def _cell(values: list[float] | None, paper: float | None) -> str:
    mine = "—" if not values else f"{100 * float(np.mean(values)):.1f}"
    return f"{mine} / {'—' if paper is None else f'{paper:g}'}"


def markdown(table: PaperTable, runs: dict[str, dict[tuple[str, float], list[float]]]) -> str:
    """The table, each cell ``ours / paper`` in percent; the seeds per cell below it."""
    header = ["data, privacy"] + [("ε = ∞" if math.isinf(e) else f"ε = {e:g}")
                                  for e in table.epsilons]
    lines = [f"{table.source}: ours / paper ({'top-1' if table.metric == 'top1' else 'mean per-class accuracy'}, %)",  # noqa: E501
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    seeds = set()
    for row in table.rows:
        cells = []
        for e, paper in zip(table.epsilons, row.values, strict=True):
            values = ours(table, row, e, runs)
            if values:
                seeds.add(len(values))
            cells.append(_cell(values, paper))
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Ours: mean over " + ("/".join(map(str, sorted(seeds))) if seeds else "no")
                 + " seed(s); paper: single values as printed.")
    return "\n".join(lines)


def runs_needed(table: PaperTable) -> dict[str, int]:
    """Mode -> runs of one seed the table needs: every (data, mode, finite ε) of its own rows
    and one non-private run per data."""
    needed: set[tuple[str, str, float]] = set()
    for row in table.rows:
        if not row.ours:
            continue
        for e, paper in zip(table.epsilons, row.values, strict=True):
            if paper is None:
                continue
            needed.add((row.data, "nonprivate", INF) if math.isinf(e) else (row.data, row.mode, e))
    counts: dict[str, int] = defaultdict(int)
    for _, mode, _ in needed:
        counts[mode] += 1
    return dict(counts)


def gpu_hours(table: PaperTable) -> float:
    """Estimated H100-hours of one seed of ``table`` (module docstring for what is counted)."""
    setting = next(s for s in paper_settings.PAPER_SETTINGS if s.name == table.setting)
    return sum(n * setting.steps * H100_STEP_SECONDS[mode]
               for mode, n in runs_needed(table).items()) / 3600


def estimate(table: PaperTable) -> str:
    """One sentence: the runs of one seed of ``table``, their steps and :func:`gpu_hours`."""
    setting = next(s for s in paper_settings.PAPER_SETTINGS if s.name == table.setting)
    counts = runs_needed(table)
    parts = ", ".join(f"{n} {m}" for m, n in sorted(counts.items()))
    return (f"Estimated cost of one seed: {parts} runs × {setting.steps:,} steps "
            f"({setting.epochs} epochs of N = {setting.num_examples:,}, B = {setting.batch_size}) "
            f"≈ {gpu_hours(table):,.0f} H100-hours (step times of mvit_v2_s selective, "
            "docs/benchmarks.md; compilation, evaluation and decoding not counted).")
