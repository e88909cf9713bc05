r"""Privacy-utility sweep: ε × mode × seed (× clips), each run calibrated to its ε; resumable.

    python -m maskdp_jax.sweep --config=configs/sweep_synthetic.py --workdir=docs/results/synthetic

Each run writes ``<workdir>/<run>/report.json`` through ``train.train_and_evaluate``; a run whose
report exists is skipped, so an interrupted sweep continues where it stopped. At the end (and with
``--only_report``) the sweep writes, from the runs' reports only:

* ``results.csv``: one row per run;
* ``results.md``: the papers' table (rows = mode, columns = ε, mean ± std over seeds);
* ``accuracy_vs_epsilon.png``: accuracy vs ε (log x), non-private as a line;
* ``per_class.png``: per-class accuracy of each mode at ``sweep.per_class_epsilon`` (when some
  one-clip, full-view run qualifies).

With ``privacy.randomness = "seeded"`` (configs/sweep_synthetic.py) the runs of one seed at
different ε draw the same batches and the same noise vectors (scaled by each run's σ), so their
results are correlated, not independent samples.
"""

from __future__ import annotations

import contextlib
import copy
import math
import multiprocessing
import os
import shlex
import sys
import warnings

import jax
import ml_collections
import numpy as np
from absl import flags, logging
from tqdm import tqdm

from maskdp_jax import train
from maskdp_jax.core.plan import Mode
from maskdp_jax.reporting import plots, results, run_report
from maskdp_jax.run import command
from maskdp_jax.run import config as run_config


def run_name(mode: str, epsilon: float, seed: int, clips: int, view: str = "full",
             data_seed: int | None = None) -> str:
    """The run's folder name in the sweep's workdir, e.g. ``maskdp_eps1_k1_seed0`` (or
    ``maskdp_eps1_k1_seed0_data2`` in a sweep over data draws)."""
    eps = "inf" if not math.isfinite(epsilon) else f"{epsilon:g}"
    return (f"{mode}_eps{eps}_k{clips}_seed{seed}" + ("" if view == "full" else f"_{view}")
            + ("" if data_seed is None else f"_data{data_seed}"))


def grid(config: ml_collections.ConfigDict) -> list[tuple[str, ml_collections.ConfigDict]]:
    """Every run of the sweep as ``(name, run config)``.

    Runs without a private pass are made once per seed (ε is ∞ for ``nonprivate``, 0 for
    ``public_only``); the optional clips comparison adds runs
    with each K in ``sweep.clips`` at ``sweep.clips_epsilon`` for every mode; the optional
    ``sweep.views`` (context ablation, :mod:`maskdp_jax.run.views`) repeats the non-private runs on
    each view. The optional ``sweep.variants`` (``((name, (("dotted.key", value), ...)), ...)``,
    e.g. a learning rate halved; pairs, as a ConfigDict takes no dotted keys) repeats the whole grid
    once per variant with those keys of the base config changed; the variant's name ends its
    runs' names. ``sweep.mode_overrides`` (same pairs, per mode) sets a mode's own settings, e.g.
    each mode's tuned learning rate, before the variants; ``sweep.data_seeds`` repeats every run
    on each data draw (``input.data_seed``).
    """
    s = config.sweep
    runs = []
    variants = {name: dict(o) for name, o in s.variants} or {"": {}}
    per_mode = {mode: dict(o) for mode, o in s.mode_overrides}
    unknown = set(per_mode) - set(s.modes)
    if unknown:
        raise ValueError(f"sweep.mode_overrides names {sorted(unknown)}, which sweep.modes "
                         f"{tuple(s.modes)} does not run; name a mode of the sweep.")
    draws = tuple(s.data_seeds) or (None,)

    def add(mode, epsilon, seed, clips, view):
        for draw in draws:
            for variant, overrides in variants.items():
                c = copy.deepcopy(config.base)
                c.unlock()
                c.mode, c.seed, c.input.clips_per_video, c.view = mode, seed, clips, view
                if draw is not None:
                    c.input.data_seed = int(draw)
                if Mode(mode).is_private:  # the others' ε (0 or ∞) is the mode's, not a target
                    c.privacy.target_epsilon = float(epsilon)
                for key, value in [*per_mode.get(mode, {}).items(), *overrides.items()]:
                    _override(c, key, value, variant=variant or mode)
                name = run_name(mode, epsilon, seed, clips, view, draw)
                runs.append((f"{name}_{variant}" if variant else name, c))

    for seed in s.seeds:
        for mode in s.modes:
            m = Mode(mode)
            for view in tuple(s.views) if m is Mode.NONPRIVATE else ("full",):
                for eps in list(s.epsilons) if m.is_private else [m.fixed_epsilon]:
                    add(mode, eps, seed, 1, view)
                for clips in s.clips:
                    if clips != 1:
                        add(mode, s.clips_epsilon if m.is_private else m.fixed_epsilon, seed,
                            clips, view)
    return runs


def _override(config: ml_collections.ConfigDict, key: str, value, *, variant: str) -> None:
    """Set ``config.<key>`` (dotted) for a sweep variant; a key the config lacks is refused."""
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        node = node.get(part) if isinstance(node, ml_collections.ConfigDict) else None
    if not isinstance(node, ml_collections.ConfigDict) or leaf not in node:
        raise ValueError(f"sweep variant {variant!r} sets {key!r}, which the base config does "
                         "not have; use a dotted key of the training config (e.g. "
                         "'optimizer.learning_rate').")
    node[leaf] = type(node[leaf])(value) if isinstance(node[leaf], float | int) else value


def _per_class_accuracies(config: ml_collections.ConfigDict,
                          reports: list[dict]) -> dict[str, list[float]]:
    """Mode -> per-class accuracy (mean over seeds) of the one-clip, full-view runs at
    ``sweep.per_class_epsilon``; empty when the sweep has no such run (e.g. a context ablation
    of one-view runs only), and then there is no per-class plot."""
    eps = config.sweep.per_class_epsilon
    per_mode = {}
    for mode in config.sweep.modes:
        chosen = [r for r in reports if r["config"]["mode"] == mode
                  and r["config"]["input"]["clips_per_video"] == 1
                  and r["config"].get("view", "full") == "full"
                  and (not Mode(mode).is_private
                       or r["config"]["privacy"]["target_epsilon"] == eps)]
        if chosen:
            with warnings.catch_warnings():  # a class absent from every test split stays NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                per_mode[mode] = np.nanmean(
                    [[np.nan if a is None else a for a in r["metrics"]["per_class_accuracy"]]
                     for r in chosen], axis=0).tolist()
    return per_mode


def _per_class_plot(config: ml_collections.ConfigDict, reports: list[dict],
                    per_mode: dict[str, list[float]], path: str) -> None:
    """Per-class accuracy of each mode in ``per_mode`` (:func:`_per_class_accuracies`)."""
    # Exact class counts are private in dp mode (dp reports leave them out): take them from a
    # maskdp or nonprivate run of the same training split, else show none.
    counts = next((r["train_class_counts"] for r in reports if "train_class_counts" in r), None)
    plots.per_class(per_mode, reports[0]["class_names"], counts, path,
                    title=f"Per-class accuracy at ε = {config.sweep.per_class_epsilon:g} "
                          f"({config.base.input.dataset})")


def write_outputs(config: ml_collections.ConfigDict, workdir: str) -> dict[str, str]:
    """Table, CSV and figures from the reports under ``workdir``; returns their paths."""
    reports = results.load_reports(workdir)
    if not reports:
        raise FileNotFoundError(f"no run reports under {workdir}; run the sweep first.")
    table_rows = results.rows(reports)
    s = config.sweep
    # Variants are different trainings: their runs are tabled per variant only, never pooled
    # into the ε table or the per-class plot.
    variants = bool(s.variants)
    per_mode = {} if variants else _per_class_accuracies(config, reports)
    names = ["results.csv", "results.md"] + (["per_class.png"] if per_mode else [])
    if len(s.epsilons) > 1 and not variants:  # the variants' runs are not one curve
        names.append("accuracy_vs_epsilon.png")
    if len(set(s.clips) | {1}) > 1:
        names.append("accuracy_vs_clips.png")
    shares = results.share_table(table_rows)
    if shares and len({r["public_weight"] for r in table_rows}) == 1:  # one curve per mode
        names.append("accuracy_vs_share.png")
    paths = {name: os.path.join(workdir, name) for name in names}
    results.write_csv(table_rows, paths["results.csv"])
    delta = config.base.privacy.delta
    dataset = config.base.input.dataset
    num_classes = len(reports[0]["class_names"])
    if "accuracy_vs_epsilon.png" in paths:
        plots.privacy_utility(
            table_rows, paths["accuracy_vs_epsilon.png"], delta=delta, chance=1 / num_classes,
            title=(f"Privacy-utility on {dataset} ({config.base.model.name}, "
                   f"{config.base.num_epochs:g} epochs)"),
        )
    if "accuracy_vs_clips.png" in paths:
        plots.accuracy_vs_clips(
            table_rows, paths["accuracy_vs_clips.png"], epsilon=s.clips_epsilon, delta=delta,
            chance=1 / num_classes,
            title=f"Multi-clip training on {dataset} ({config.base.model.name})",
        )
    if "per_class.png" in paths:
        _per_class_plot(config, reports, per_mode, paths["per_class.png"])
    split = config.base.input.get("eval_split", "test")
    if "accuracy_vs_share.png" in paths:
        plots.accuracy_vs_share(table_rows, paths["accuracy_vs_share.png"], split=split,
                                chance=1 / num_classes,
                                title=f"Where MaskDP pays ({config.base.model.name})")
    recorded = results.recorded_command(workdir)
    if recorded:
        produced = (f"Produced by `{recorded['command']}` at commit `{recorded['commit']}` "
                    "(the last command that trained runs here).")
        earlier = [c for c in recorded.get("commits", []) if c != recorded["commit"]]
        if earlier:
            produced += (" Some runs were trained earlier, at "
                         + ", ".join(f"`{c}`" for c in earlier) + ".")
        if os.path.isfile(os.path.join(workdir, results.UNCOMMITTED_DIFF)):
            produced += (f" The code differed from that commit by "
                         f"[{results.UNCOMMITTED_DIFF}]({results.UNCOMMITTED_DIFF}).")
    else:
        produced = (f"Produced by `python -m maskdp_jax.sweep --config={config.config_path} "
                    f"--workdir={workdir}` (its command line and commit were not recorded).")
    with open(paths["results.md"], "w") as f:
        f.write(f"# {config.title}: {dataset}\n\n")
        f.write(f"δ = {delta:g}, adjacency `{config.base.privacy.adjacency}`, "
                f"sampling `{config.base.sampling}`, model `{config.base.model.name}`, "
                f"{len(reports)} runs. {produced}\n\n")
        if not variants and any(r["view"] == "full" for r in table_rows):
            f.write(results.markdown_table(table_rows) + "\n\n")
            gaps = results.gap_table(table_rows)
            if gaps:
                f.write(gaps + "\n\n")
        paired = "" if variants else results.clips_paired_table(table_rows,
                                                                epsilon=s.clips_epsilon)
        if paired:
            f.write(f"Per seed at ε = {s.clips_epsilon:g} (a seed fixes the initial weights and "
                    "the randomness key at every K), test top-1 in %; per mode, the mean "
                    f"difference K = {max(s.clips)} − K = 1 in points with its 95 % paired t "
                    "interval and the exact two-sided sign test:\n\n" + paired + "\n\n")
        if shares:
            f.write(f"Where MaskDP pays: {split} top-1 by the label's share in the private "
                    "part (the share setting, data/synthetic.py) and ε; the gap's interval "
                    "holds both differences at once (reporting/results.py, "
                    "`best_baseline_gap`).\n\n" + shares + "\n\n")
        if variants:
            f.write("Variants of the base config (`sweep.variants`), each over the same seeds; "
                    f"{split} top-1 in % (input.eval_split = {split}).\n\n")
            named = {n: dict(o) for n, o in s.variants}
            f.write(results.variant_table(table_rows, named) + "\n\n")
            # Variants over the data (the share setting's) are cells of a study, not choices.
            best = "" if shares else results.best_variant_table(table_rows, named, split=split)
            if best:
                f.write(f"The best variant of each mode by its mean {split} top-1 (each mode had "
                        f"the same variants, seeds and ε):\n\n{best}\n\n")
        if any(r["view"] != "full" for r in table_rows):
            f.write("Context ablation (Schneider et al. 2024a Table 3): non-private training and "
                    "testing on one view of every video (`--config.view`, "
                    "maskdp_jax/run/views.py).\n\n")
            f.write(results.view_table(table_rows) + "\n\n")
        for name, caption in (("accuracy_vs_share.png", "accuracy vs private share"),
                              ("accuracy_vs_epsilon.png", "accuracy vs epsilon"),
                              ("accuracy_vs_clips.png", "accuracy vs clips per video"),
                              ("per_class.png", "per-class accuracy")):
            if name in paths:
                f.write(f"![{caption}]({name})\n\n")
    return paths


def _worker_init(cpu_sets, cache_dir: str) -> None:
    """Pin a sweep worker to its share of the CPUs before JAX starts its thread pool."""
    cpus = cpu_sets.get()
    os.sched_setaffinity(0, cpus)
    jax.config.update("jax_compilation_cache_dir", cache_dir)


def _train_run(task: tuple[str, ml_collections.ConfigDict, str]) -> str:
    """One run in a worker process; its console output goes to ``<run>/train.log``."""
    name, run_config, run_dir = task
    os.makedirs(run_dir, exist_ok=True)
    with (open(os.path.join(run_dir, "train.log"), "w") as log,
          contextlib.redirect_stdout(log), contextlib.redirect_stderr(log)):
        train.train_and_evaluate(run_config, run_dir)
    return name


def cpu_shares(num_workers: int) -> list[set[int]]:
    """Split this process's CPUs into ``num_workers`` disjoint, non-empty sets."""
    cpus = sorted(os.sched_getaffinity(0))
    if not 1 <= num_workers <= len(cpus):
        raise ValueError(f"--workers must be between 1 and the {len(cpus)} CPUs available to this "
                         f"process; got {num_workers}.")
    return [set(cpus[i::num_workers]) for i in range(num_workers)]


# Relative cost of one run per mode (measured: a maskdp step runs a public and a private pass).
_MODE_COST = {"maskdp": 2.0, "dp": 1.1, "public_only": 1.0, "nonprivate": 1.0}


def longest_first(tasks: list) -> list:
    """Order runs for a pool of workers: the most expensive first, so the workers finish together.

    The second run is of another mode than the first, so two workers do not compile the same
    programs at the same time (the second finds them in the persistent cache later).
    """
    ordered = sorted(tasks, key=lambda t: -_MODE_COST.get(t[1].mode, 1.0) * t[1].num_epochs
                     * t[1].input.clips_per_video)
    other = next((i for i, t in enumerate(ordered) if t[1].mode != ordered[0][1].mode), None)
    if other is not None and other > 1:
        ordered.insert(1, ordered.pop(other))
    return ordered


def run_all(todo, workdir: str, *, num_workers: int) -> None:
    """Train the runs in ``todo``, in this process or in ``num_workers`` pinned processes.

    Worth it where one run cannot use every core: XLA:CPU's intra-op threading stops scaling on
    small models long before 16 or 64 cores. With few cores it does not pay: a step pinned to one
    core takes more than twice as long as on all of them (benchmarks/results/sweep_wall_time.md),
    so the default is one worker. Each worker keeps its compiled programs between runs; all share
    the persistent cache.
    """
    cache_dir = os.path.join(workdir, ".jax_cache")
    tasks = [(n, c, os.path.join(workdir, n)) for n, c in todo]
    if num_workers > 1:
        tasks = longest_first(tasks)
    if num_workers == 1:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        for name, run_config, run_dir in tqdm(tasks, desc="sweep", unit="run"):
            tqdm.write(f"== {name}")
            train.train_and_evaluate(run_config, run_dir)
        return
    ctx = multiprocessing.get_context("spawn")
    cpu_sets = ctx.Queue()
    for share in cpu_shares(num_workers):
        cpu_sets.put(share)
    print(f"{num_workers} worker processes; each run's output is in <workdir>/<run>/train.log.")
    with ctx.Pool(num_workers, initializer=_worker_init, initargs=(cpu_sets, cache_dir)) as pool:
        done = pool.imap_unordered(_train_run, tasks)
        for name in tqdm(done, total=len(tasks), desc="sweep", unit="run"):
            tqdm.write(f"done {name}")


def check_runs(runs: list[tuple[str, ml_collections.ConfigDict]]) -> None:
    """Refuse the sweep when any of its run configs is bad, before the first run writes or
    compiles anything (:func:`maskdp_jax.run.config.check_config`; the error names the run)."""
    for name, config in runs:
        try:
            run_config.check_config(config, num_devices=jax.device_count())
        except ValueError as err:
            raise ValueError(f"run {name}: {err}") from err


def run_command(f: flags.FlagValues, argv=("maskdp_jax.sweep",)) -> int:
    """The sweep the parsed flags ``f`` name; the exit status (75: a run was preempted).
    ``argv``, the command line, is recorded with the commit in the workdir
    (:func:`maskdp_jax.reporting.results.record_command`) when runs are trained."""
    config, workdir = f.config, f.workdir
    logging.set_verbosity(logging.WARNING)  # as train.py: no per-checkpoint INFO lines from orbax
    if not f.only_report:
        runs = grid(config)
        check_runs(runs)
        results.check_committed(workdir, allow_uncommitted=f.allow_uncommitted)
        os.makedirs(workdir, exist_ok=True)
        todo = [(n, c) for n, c in runs
                if not run_report.finished(os.path.join(workdir, n))]
        if todo:  # the commit of the code that trains them, beside those of the runs kept
            results.record_command(
                workdir, shlex.join(["python", "-m", "maskdp_jax.sweep", *argv[1:]]),
                fresh=len(todo) == len(runs))
        print(f"Sweep: {len(runs)} runs, {len(runs) - len(todo)} already done.")
        # Runs of one mode share their expensive XLA programs (σ only enters the cheap update
        # step), so a persistent compilation cache lets later runs skip most compilation.
        try:
            run_all(todo, workdir, num_workers=f.workers)
        except train.Preempted as e:  # the run checkpointed; the sweep resumes it when rerun
            print(f"Stopped at step {e.step} of a run on SIGTERM (exit status "
                  f"{train.PREEMPTED_EXIT_CODE}); run the same command again to resume.")
            return train.PREEMPTED_EXIT_CODE
    for name, path in write_outputs(config, workdir).items():
        print(f"{name}: {path}")
    return 0


def define_flags(fv: flags.FlagValues, argv) -> None:
    """The sweep's flags (on ``fv``); ``--config`` and its keys are checked first."""
    command.config_flag(fv, argv, help="Sweep configuration.", sections=("base", "sweep"),
                        kind="a sweep config (configs/sweep_*.py)")
    flags.DEFINE_string("workdir", None, "Sweep output directory.", required=True,
                        flag_values=fv)
    flags.DEFINE_bool("only_report", False, "Aggregate existing runs, train nothing.",
                      flag_values=fv)
    flags.DEFINE_bool("allow_uncommitted", False, "Train into docs/results/ from a tree with "
                      "uncommitted changes (refused otherwise), recording the diff beside the "
                      "results (uncommitted.diff).", flag_values=fv)
    flags.DEFINE_integer("workers", 1, "Runs trained at once, each in its own process pinned to "
                         "its share of the CPUs (for many-core hosts; measure first).",
                         flag_values=fv)


def cli(argv) -> int:
    """``python -m maskdp_jax.sweep ...`` as a function of the command line: its exit status (0
    done, 2 bad input with ``error: <reason>`` on stderr and nothing written, 75 preempted)."""
    return command.run(argv, define=define_flags, work=lambda f: run_command(f, argv),
                       about=ABOUT)


ABOUT = command.About(
    usage="python -m maskdp_jax.sweep --config=configs/sweep_<name>.py --workdir=DIR",
    summary="Train a grid of runs (ε × mode × seed, and the config's variants), resumably, then "
            "write the sweep's tables and plots from the runs' reports.",
    keys="docs/guides/sweeps.md (the `sweep` section); `base` is a training config, "
         "docs/guides/training.md")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
