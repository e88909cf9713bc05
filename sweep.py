r"""Privacy-utility sweep: ε × mode × seed (× clips), each run calibrated to its ε; resumable.

    python sweep.py --config=configs/sweep_synthetic.py --workdir=docs/results/synthetic

Each run writes ``<workdir>/<run>/report.json`` through ``train.train_and_evaluate``; a run whose
report exists is skipped, so an interrupted sweep continues where it stopped. At the end (and with
``--only_report``) the sweep writes, from the runs' reports only:

* ``results.csv``: one row per run;
* ``results.md``: the papers' table (rows = mode, columns = ε, mean ± std over seeds);
* ``accuracy_vs_epsilon.png``: accuracy vs ε (log x), non-private as a line;
* ``per_class.png``: per-class accuracy of each mode at ``sweep.per_class_epsilon``.
"""

from __future__ import annotations

import copy
import math
import os

import jax
import ml_collections
import numpy as np
from absl import app, flags
from ml_collections import config_flags
from tqdm import tqdm

import train
from maskdp_jax import plots, results


def run_name(mode: str, epsilon: float, seed: int, clips: int) -> str:
    eps = "inf" if not math.isfinite(epsilon) else f"{epsilon:g}"
    return f"{mode}_eps{eps}_k{clips}_seed{seed}"


def grid(config: ml_collections.ConfigDict) -> list[tuple[str, ml_collections.ConfigDict]]:
    """Every run of the sweep as ``(name, run config)``.

    Non-private runs are made once per seed (their ε is ∞); the optional clips comparison adds runs
    with each K in ``sweep.clips`` at ``sweep.clips_epsilon`` for every mode.
    """
    s = config.sweep
    runs = []

    def add(mode, epsilon, seed, clips):
        c = copy.deepcopy(config.base)
        c.unlock()
        c.mode, c.seed, c.input.clips_per_video = mode, seed, clips
        if math.isfinite(epsilon):
            c.privacy.target_epsilon = float(epsilon)
        runs.append((run_name(mode, epsilon, seed, clips), c))

    for seed in s.seeds:
        for mode in s.modes:
            epsilons = [math.inf] if mode == "nonprivate" else list(s.epsilons)
            for eps in epsilons:
                add(mode, eps, seed, 1)
            for clips in s.clips:
                if clips != 1:
                    add(mode, math.inf if mode == "nonprivate" else s.clips_epsilon, seed, clips)
    return runs


def write_outputs(config: ml_collections.ConfigDict, workdir: str) -> dict[str, str]:
    """Table, CSV and figures from the reports under ``workdir``; returns their paths."""
    reports = results.load_reports(workdir)
    if not reports:
        raise FileNotFoundError(f"no run reports under {workdir}; run the sweep first.")
    table_rows = results.rows(reports)
    paths = {name: os.path.join(workdir, name) for name in
             ("results.csv", "results.md", "accuracy_vs_epsilon.png", "per_class.png")}
    results.write_csv(table_rows, paths["results.csv"])
    delta = config.base.privacy.delta
    dataset = config.base.input.dataset
    num_classes = len(reports[0]["class_names"])
    plots.privacy_utility(
        table_rows, paths["accuracy_vs_epsilon.png"], delta=delta, chance=1 / num_classes,
        title=f"Privacy-utility on {dataset} ({config.base.model.name})",
    )
    eps = config.sweep.per_class_epsilon
    per_mode = {}
    for mode in config.sweep.modes:
        chosen = [r for r in reports if r["config"]["mode"] == mode
                  and r["config"]["input"]["clips_per_video"] == 1
                  and (mode == "nonprivate" or r["config"]["privacy"]["target_epsilon"] == eps)]
        if chosen:
            per_mode[mode] = np.nanmean(
                [[np.nan if a is None else a for a in r["metrics"]["per_class_accuracy"]]
                 for r in chosen], axis=0).tolist()
    counts = reports[0].get("train_class_counts") or [0] * num_classes
    plots.per_class(per_mode, reports[0]["class_names"], counts, paths["per_class.png"],
                    title=f"Per-class accuracy at ε = {eps:g} ({dataset})")
    with open(paths["results.md"], "w") as f:
        f.write(f"# Privacy-utility sweep: {dataset}\n\n")
        f.write(f"δ = {delta:g}, adjacency `{config.base.privacy.adjacency}`, "
                f"sampling `{config.base.sampling}`, model `{config.base.model.name}`, "
                f"{len(reports)} runs. Produced by `python sweep.py "
                f"--config={config.get('config_path', 'configs/sweep_synthetic.py')} "
                f"--workdir={workdir}`.\n\n")
        f.write(results.markdown_table(table_rows) + "\n\n")
        f.write("![accuracy vs epsilon](accuracy_vs_epsilon.png)\n\n")
        f.write("![per-class accuracy](per_class.png)\n")
    return paths


def main(argv):
    del argv
    config, workdir = flags.FLAGS.config, flags.FLAGS.workdir
    os.makedirs(workdir, exist_ok=True)
    # Runs of one mode share their expensive XLA programs (σ only enters the cheap update step),
    # so a persistent compilation cache makes every run after the first skip most compilation.
    jax.config.update("jax_compilation_cache_dir", os.path.join(workdir, ".jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    if not flags.FLAGS.only_report:
        runs = grid(config)
        todo = [(n, c) for n, c in runs
                if not os.path.isfile(os.path.join(workdir, n, "report.json"))]
        print(f"Sweep: {len(runs)} runs, {len(runs) - len(todo)} already done.")
        for name, run_config in tqdm(todo, desc="sweep", unit="run"):
            tqdm.write(f"== {name}")
            train.train_and_evaluate(run_config, os.path.join(workdir, name))
    for name, path in write_outputs(config, workdir).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    config_flags.DEFINE_config_file("config", None, "Sweep configuration.", lock_config=True)
    flags.DEFINE_string("workdir", None, "Sweep output directory.", required=True)
    flags.DEFINE_bool("only_report", False, "Aggregate existing runs, train nothing.")
    app.run(main)
