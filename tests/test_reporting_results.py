"""Sweep outputs: the numbers in the table and plots are the numbers in the runs' reports."""

import json
import math
import os
import subprocess

import numpy as np
import pytest

from maskdp_jax import sweep
from maskdp_jax.configs import sweep_synthetic
from maskdp_jax.reporting import results

NOISELESS = {"nonprivate": "inf", "public_only": 0.0}  # the report's ε of the modes without noise


def _fake_run(root, mode, eps, seed, top1, per_class, *, clips=1, view="full", variant="",
              data_seed=None, private_share=None, public_weight=1.0, private_lr=None):
    """A report with the fields the aggregation reads (as train.py writes them)."""
    name = (sweep.run_name(mode, eps, seed, clips, view, data_seed)
            + (f"_{variant}" if variant else ""))
    os.makedirs(os.path.join(root, name))
    report = {
        "config": {"mode": mode, "seed": seed, "view": view,
                   "input": {"clips_per_video": clips, "data_seed": data_seed or 0,
                             "private_share": private_share},
                   "num_epochs": 16.0, "optimizer": {"learning_rate": 3e-3,
                                                     "private_learning_rate": private_lr},
                   "privacy": {"target_epsilon": 1.0 if mode in NOISELESS else eps,
                               "delta": 1e-5, "l2_clip_norm": 0.1,
                               "public_weight": public_weight}},
        "privacy": {"epsilon_pld": NOISELESS.get(mode, eps * 0.99),
                    "epsilon_rdp": NOISELESS.get(mode, eps * 1.1),
                    "noise_multiplier": 0.0 if mode in NOISELESS else 1.0},
        "metrics": {"top1": top1, "mean_class_accuracy": top1,
                    "per_class_accuracy": per_class},
        "class_names": ["a", "b"],
    }
    if mode != "dp":  # labels are private in dp mode: train.py leaves the counts out
        report["train_class_counts"] = [10, 5]
    with open(os.path.join(root, name, "report.json"), "w") as f:
        json.dump(report, f)


@pytest.fixture()
def sweep_dir(tmp_path):
    rng = np.random.default_rng(0)
    truth = {}
    for seed in range(3):
        _fake_run(tmp_path, "nonprivate", math.inf, seed, 0.9 + 0.01 * seed, [0.9, 0.9])
        for mode in ("dp", "maskdp"):
            for eps in (0.5, 1.0):
                top1 = float(rng.uniform(0.2, 0.8))
                truth.setdefault((mode, eps), []).append(top1)
                _fake_run(tmp_path, mode, eps, seed, top1, [top1, None])
    return tmp_path, truth


def test_where_it_pays_is_tabled_per_share_and_epsilon_with_the_best_baseline_gap(tmp_path):
    """The where-it-pays study's outputs: one row per (share, ε) whose cells are the reports'
    means, the gap MaskDP − max(public-only, DP) of that cell's runs alone, the public view's
    ceiling, its figure, and no "best variant" (a share is a cell of the study, not a choice)."""
    from maskdp_jax.configs import sweep_where_it_pays

    value = {("nonprivate", math.inf): .95, ("public_only", 0.0): .70, ("dp", 1.0): .40,
             ("dp", 8.0): .60, ("maskdp", 1.0): .74, ("maskdp", 8.0): .80}
    for share in (0.0, 0.5):
        for (mode, eps), top1 in value.items():
            for seed in range(3):
                _fake_run(tmp_path, mode, eps, seed, top1 - share / 5 + 0.01 * seed, [top1, None],
                          variant=f"share{share:g}", private_share=share)
    config = sweep_where_it_pays.get_config()
    paths = sweep.write_outputs(config, str(tmp_path))
    assert os.path.getsize(paths["accuracy_vs_share.png"]) > 0
    md = open(paths["results.md"]).read()
    row = next(line for line in md.splitlines() if line.startswith("| 0.5 | 8 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:7] == ["86.0 ± 1.0", "61.0 ± 1.0", "51.0 ± 1.0", "71.0 ± 1.0", "62.5"]
    gap, low, high = results.best_baseline_gap(
        [r for r in results.rows(results.load_reports(str(tmp_path)))
         if r["private_share"] == 0.5], epsilon=8.0)
    assert round(gap, 6) == 0.1
    assert cells[7] == f"{100 * gap:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
    assert "The best variant" not in md and "accuracy_vs_epsilon" not in md
    # MaskDP with its public sum weighted (λ = 0.1) at one share: a λ column, the baselines
    # shared, a row only where λ was run, and no figure (one curve per mode would mix them).
    for seed in range(3):
        _fake_run(tmp_path, "maskdp", 8.0, seed, 0.9 + 0.01 * seed, [0.9, None],
                  variant="share0.5_w0.1", private_share=0.5, public_weight=0.1)
    os.remove(paths["accuracy_vs_share.png"])
    paths = sweep.write_outputs(config, str(tmp_path))
    assert "accuracy_vs_share.png" not in paths
    table = open(paths["results.md"]).read()
    assert "| MaskDP's λ |" in table
    row = next(line for line in table.splitlines() if line.startswith("| 0.5 | 8 | 0.1 |"))
    assert [c.strip() for c in row.strip("|").split("|")][3:7] == [
        "86.0 ± 1.0", "61.0 ± 1.0", "51.0 ± 1.0", "91.0 ± 1.0"]
    assert not any(line.startswith(("| 0 | 8 | 0.1 |", "| 0.5 | 1 | 0.1 |"))
                   for line in table.splitlines())
    # And with an optimiser per pass (private learning rate 0.01, λ = 1): a column of its own,
    # "—" on the one-optimiser rows, the baselines shared.
    for seed in range(3):
        _fake_run(tmp_path, "maskdp", 1.0, seed, 0.5 + 0.01 * seed, [0.5, None],
                  variant="share0.5_pp0.01", private_share=0.5, private_lr=0.01)
    table = open(sweep.write_outputs(config, str(tmp_path))["results.md"]).read()
    assert "| MaskDP's λ | MaskDP's private lr |" in table
    row = next(line for line in table.splitlines() if line.startswith("| 0.5 | 1 | 1 | 0.01 |"))
    assert [c.strip() for c in row.strip("|").split("|")][4:8] == [
        "86.0 ± 1.0", "61.0 ± 1.0", "31.0 ± 1.0", "51.0 ± 1.0"]
    assert any(line.startswith("| 0.5 | 1 | 1 | — |") for line in table.splitlines())
    assert any(line.startswith("| 0.5 | 8 | 0.1 | — |") for line in table.splitlines())


def test_table_cells_are_the_reports_mean_and_std(sweep_dir):
    root, truth = sweep_dir
    table_rows = results.rows(results.load_reports(str(root)))
    assert len(table_rows) == 15
    md = results.markdown_table(table_rows)
    for (mode, eps), values in truth.items():
        cell = f"{100 * np.mean(values):.1f} ± {100 * np.std(values, ddof=1):.1f}"
        row = next(line for line in md.splitlines() if line.startswith(f"| {mode} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        column = 2 + [0.5, 1.0].index(eps)
        assert cells[column] == cell
    nonprivate = next(line for line in md.splitlines() if line.startswith("| nonprivate |"))
    assert nonprivate.count("91.0 ± 1.0") == 3  # ε = 0.5, 1, ∞ columns


def test_sweep_outputs_from_reports(sweep_dir):
    root, truth = sweep_dir
    config = sweep_synthetic.get_config()
    config.sweep.epsilons = (0.5, 1.0)
    paths = sweep.write_outputs(config, str(root))
    for path in paths.values():
        assert os.path.getsize(path) > 0
    with open(paths["results.csv"]) as f:
        lines = f.read().splitlines()
    assert len(lines) == 16 and lines[0].startswith("run,mode,target_epsilon")
    with open(paths["results.md"]) as f:
        md = f.read()
    dp_1 = truth[("dp", 1.0)]
    assert f"{100 * np.mean(dp_1):.1f} ± {100 * np.std(dp_1, ddof=1):.1f}" in md
    assert "accuracy_vs_epsilon.png" in md


def test_grid_calibrates_every_run_and_skips_nothing():
    config = sweep_synthetic.get_config()
    runs = sweep.grid(config)
    # 3 seeds × (1 nonprivate + 5 ε × 2 private modes)
    assert len(runs) == 33
    names = [n for n, _ in runs]
    assert len(set(names)) == len(names)
    eps = {c.privacy.target_epsilon for n, c in runs if c.mode == "maskdp"}
    assert eps == {0.25, 0.5, 1.0, 2.0, 5.0}
    config.sweep.clips = (1, 4)
    assert len(sweep.grid(config)) == 33 + 9


def test_public_only_runs_once_per_seed_at_its_epsilon_of_zero():
    config = sweep_synthetic.get_config()
    config.sweep.modes = ("public_only", "maskdp")
    runs = dict(sweep.grid(config))
    public = sorted(n for n in runs if n.startswith("public_only"))
    assert public == [f"public_only_eps0_k1_seed{s}" for s in config.sweep.seeds]
    for name in public:  # no target: the base config's ε is left alone, and the plan ignores it
        assert runs[name].privacy.target_epsilon == config.base.privacy.target_epsilon


def test_public_only_fills_every_column_and_enters_the_gap_to_the_better_baseline(tmp_path):
    """public_only (ε = 0) is one row across the ε columns (no ε = 0 column); the gap table adds
    MaskDP − public-only and MaskDP − max(public-only, DP) with the joint interval: the smaller
    difference, bounded by both differences' 97.5 % Welch intervals."""
    values = {"public_only": [0.50, 0.54, 0.52], "dp": [0.30, 0.34, 0.32],
              "maskdp": [0.55, 0.60, 0.58]}
    for mode, tops in values.items():
        for seed, top1 in enumerate(tops):
            _fake_run(tmp_path, mode, 0.0 if mode == "public_only" else 1.0, seed, top1,
                      [top1, top1])
    rows = results.rows(results.load_reports(str(tmp_path)))
    assert {r["target_epsilon"] for r in rows if r["mode"] == "public_only"} == {0.0}
    table = results.markdown_table(rows).splitlines()
    assert table[0] == "| mode | K | ε = 1 | ε = ∞ |"
    assert table[2] == "| public_only | 1 | 52.0 ± 2.0 | 52.0 ± 2.0 |"
    gaps = results.gap_table(rows).splitlines()
    assert "MaskDP − max(public-only, DP) (joint 95 %)" in gaps[0]
    to_public = results.welch(values["maskdp"], values["public_only"], level=0.975)
    to_dp = results.welch(values["maskdp"], values["dp"], level=0.975)
    g, lo, hi = results.best_baseline_gap(rows, epsilon=1.0)
    assert g == pytest.approx(to_public[0]) and g < to_dp[0]
    assert (lo, hi) == (pytest.approx(min(to_public[1], to_dp[1])),
                        pytest.approx(min(to_public[2], to_dp[2])))
    assert gaps[2].startswith(f"| 1 | {100 * (0.5767 - 0.32):+.1f} ")
    assert gaps[2].endswith(f"| {100 * g:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] | 3 / 3 / 3 |")
    assert results.best_baseline_gap(rows, epsilon=2.0) is None  # no run at ε = 2


def test_multiclip_and_context_sweeps_table_and_plot(tmp_path):
    """K clips at one ε and one-view runs: the clips plot, the view table (Schneider et al. 2024a
    Table 3) from the reports, and the ε table without the one-view runs."""
    from maskdp_jax.configs import sweep_context, sweep_multiclip

    truth = {}
    for seed in range(3):
        for k in (1, 2, 4, 8):
            top1 = 0.3 + 0.05 * k + 0.01 * seed
            truth.setdefault(k, []).append(top1)
            _fake_run(tmp_path, "dp", 1.0, seed, top1, [top1, top1], clips=k)
        for view, top1 in (("full", 0.8), ("public", 0.5), ("background", 0.6),
                           ("private", 0.7)):
            _fake_run(tmp_path, "nonprivate", math.inf, seed, top1 + 0.01 * seed, [0.5, 0.5],
                      view=view)
    config = sweep_multiclip.get_config()
    config.sweep.views = (*sweep_context.get_config().sweep.views, "private")
    paths = sweep.write_outputs(config, str(tmp_path))
    assert "accuracy_vs_clips.png" in paths and "accuracy_vs_epsilon.png" not in paths
    for path in paths.values():
        assert os.path.getsize(path) > 0
    with open(paths["results.md"]) as f:
        md = f.read()
    for k, values in truth.items():
        cell = f"{100 * np.mean(values):.1f} ± {100 * np.std(values, ddof=1):.1f}"
        assert f"| dp | {k} | {cell}" in md
    assert "| nonprivate | 1 | 81.0 ± 1.0 | 81.0 ± 1.0 |" in md  # the full view only
    assert "| Avatar only | `public` | 51.0 ± 1.0 | 51.0 ± 1.0 | 3 |" in md
    assert "| Background only (inpainted) | `background` | 61.0 ± 1.0 | 61.0 ± 1.0 | 3 |" in md
    assert "| private view (not in Table 3) | `private` | 71.0 ± 1.0 |" in md
    assert "| Anonymized (both) | `full` | 81.0 ± 1.0 |" in md
    assert "![accuracy vs clips per video](accuracy_vs_clips.png)" in md


def test_multiclip_and_context_grids():
    from maskdp_jax.configs import sweep_context, sweep_multiclip

    runs = dict(sweep.grid(sweep_multiclip.get_config()))
    assert len(runs) == 24 and {c.mode for c in runs.values()} == {"dp", "maskdp"}
    assert sorted({c.input.clips_per_video for c in runs.values()}) == [1, 2, 4, 8]
    assert {c.privacy.target_epsilon for c in runs.values()} == {1.0}
    # The segment-cue study fine-tunes the committed public backbone: it must exist, and the
    # frozen-backbone check accepts its runs.
    from maskdp_jax.configs import sweep_multiclip_segment

    runs = sweep.grid(sweep_multiclip_segment.get_config())
    assert len(runs) == 40 and {c.input.cue for _, c in runs} == {"segment"}
    assert os.path.isdir(sweep_multiclip_segment.PRETRAINED)
    sweep.check_runs(runs)
    runs = dict(sweep.grid(sweep_context.get_config()))
    assert sorted(runs) == sorted(f"nonprivate_epsinf_k1_seed{s}{v}" for s in range(3)
                                  for v in ("", "_public", "_background"))
    assert {(c.mode, c.view) for c in runs.values()} == {
        ("nonprivate", "full"), ("nonprivate", "public"), ("nonprivate", "background")}


def test_variants_repeat_the_grid_with_the_named_keys_changed_and_get_a_table(tmp_path):
    """sweep.variants: each variant's runs have exactly its keys changed (the rest is the base),
    a key the config lacks is refused, and results.md has one row per variant from the reports."""
    from maskdp_jax.configs import sweep_robustness

    config = sweep_robustness.get_config()
    runs = dict(sweep.grid(config))
    assert len(runs) == 3 * 6
    base = config.base
    for name, run in runs.items():
        variant = dict(config.sweep.variants)[name.split("_seed", 1)[1].split("_", 1)[1]]
        changed = {"optimizer.learning_rate": run.optimizer.learning_rate,
                   "privacy.l2_clip_norm": run.privacy.l2_clip_norm,
                   "num_epochs": run.num_epochs}
        defaults = {"optimizer.learning_rate": base.optimizer.learning_rate,
                    "privacy.l2_clip_norm": base.privacy.l2_clip_norm,
                    "num_epochs": base.num_epochs}
        for key, value in changed.items():
            assert value == dict(variant).get(key, defaults[key]), (name, key)
        assert run.privacy.randomness == "secret" and run.privacy.target_epsilon == 1.0
    config.sweep.variants = (("typo", (("optimizer.learnig_rate", 1.0),)),)
    with pytest.raises(ValueError, match="variant 'typo' sets 'optimizer.learnig_rate', which"):
        sweep.grid(config)

    config = sweep_robustness.get_config()
    truth = {}
    for seed in range(3):
        for i, (variant, _) in enumerate(config.sweep.variants):
            top1 = 0.1 + 0.02 * i + 0.01 * seed
            truth.setdefault(variant, []).append(top1)
            _fake_run(tmp_path, "maskdp", 1.0, seed, top1, [top1, top1], variant=variant)
    with open(sweep.write_outputs(config, str(tmp_path))["results.md"]) as f:
        md = f.read()
    for variant, values in truth.items():
        assert (f"| {variant} | `" in md and f"| 3 | {100 * np.median(values):.1f} | "
                f"{100 * min(values):.1f}–{100 * max(values):.1f} |" in md), variant
    assert "| lr_half | `optimizer.learning_rate` = 0.0015 | 3 |" in md


def test_the_tuned_headline_runs_each_mode_at_its_own_settings_on_every_data_draw():
    """sweep.mode_overrides gives each mode its tuned settings (both stages of
    configs/sweep_tuning.py) and sweep.data_seeds repeats every run on each data draw; a mode
    the sweep does not run is refused."""
    from maskdp_jax.configs import sweep_headline_tuned, sweep_tuning

    config = sweep_headline_tuned.get_config()
    runs = dict(sweep.grid(config))
    per_draw = 5 * (1 + 1 + 5 + 5)  # seeds × (nonprivate, public_only, 5 ε of dp and maskdp)
    assert len(runs) == per_draw * len(sweep_headline_tuned.DATA_SEEDS)
    for name, run in runs.items():
        assert name.endswith(f"_data{run.input.data_seed}")
        settings = dict(sweep_tuning.tuned(run.mode))
        assert run.model.finetune == settings["model.finetune"]
        assert run.optimizer.learning_rate == settings["optimizer.learning_rate"]
        assert run.num_epochs == settings["num_epochs"]
        if "privacy.l2_clip_norm" in settings:
            assert run.privacy.l2_clip_norm == settings["privacy.l2_clip_norm"]
    assert {r.model.finetune for r in runs.values()} == {"full", "selective"}
    config.sweep.mode_overrides = (("bandmf", (("num_epochs", 1.0),)),)
    with pytest.raises(ValueError, match=r"names \['bandmf'\], which sweep.modes"):
        sweep.grid(config)


def test_the_floor_trains_the_head_alone_over_the_headline_draws():
    """configs/sweep_floor.py: a non-private probe and DP-SGD on the head of the frozen
    backbone, each at its linear learning rate, on the tuned headline's draws and seeds."""
    from maskdp_jax.configs import sweep_floor, sweep_headline_tuned

    runs = dict(sweep.grid(sweep_floor.get_config()))
    assert {r.mode for r in runs.values()} == {"nonprivate", "dp"}
    assert all(r.model.finetune == "linear" for r in runs.values())
    assert {r.input.data_seed for r in runs.values()} == set(sweep_headline_tuned.DATA_SEEDS)
    assert len(runs) == 5 * 3 * (1 + 2)


def test_over_data_draws_the_gap_interval_is_taken_over_the_draws(tmp_path):
    """With several data draws the difference is taken within each draw and its interval over
    the draws' differences (J − 1 degrees of freedom): a draw effect shared by both modes
    cancels, and a draw-to-draw swing of the difference widens the interval where pooling the
    runs as independent would not."""
    import scipy.stats

    shift = {0: 0.0, 1: -0.2, 2: 0.1}  # each draw moves both modes alike
    gaps = {0: 0.02, 1: 0.10, 2: 0.06}  # ... and MaskDP's lead differs by draw
    for draw in shift:
        for seed in range(3):
            jitter = 0.002 * seed
            _fake_run(tmp_path, "dp", 1.0, seed, 0.5 + shift[draw] + jitter, [0.5, 0.5],
                      data_seed=draw)
            _fake_run(tmp_path, "maskdp", 1.0, seed, 0.5 + shift[draw] + gaps[draw] + jitter,
                      [0.5, 0.5], data_seed=draw)
    rows = results.rows(results.load_reports(str(tmp_path)))
    assert {r["data_seed"] for r in rows} == {0, 1, 2}
    d, lo, hi, na, nb = results.gap(rows, epsilon=1.0)
    diffs = np.array([gaps[k] for k in sorted(gaps)])
    half = scipy.stats.t.ppf(0.975, 2) * diffs.std(ddof=1) / math.sqrt(3)
    assert (d, lo, hi, na, nb) == (pytest.approx(diffs.mean()), pytest.approx(diffs.mean() - half),
                                   pytest.approx(diffs.mean() + half), 9, 9)
    pooled = results.welch([r["top1"] for r in rows if r["mode"] == "maskdp"],
                           [r["top1"] for r in rows if r["mode"] == "dp"])
    assert pooled[2] - pooled[1] > hi - lo  # the shared shift inflated the pooled runs' spread
    table = results.gap_table(rows)
    assert "per-draw differences" in table and "over 3 data draws" in table
    assert "3 data draws" in results.markdown_table(rows)
    # One draw: Welch over the runs, as before.
    one = [r for r in rows if r["data_seed"] == 1]
    assert results.gap(one, epsilon=1.0)[:3] == pytest.approx(results.welch(
        [r["top1"] for r in one if r["mode"] == "maskdp"],
        [r["top1"] for r in one if r["mode"] == "dp"])[:3])


def test_empty_sweep_directory_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="run the sweep first"):
        sweep.write_outputs(sweep_synthetic.get_config(), str(tmp_path))


def test_worker_count_must_fit_the_cpus():
    available = len(os.sched_getaffinity(0))
    shares = sweep.cpu_shares(available)
    assert sorted(c for s in shares for c in s) == sorted(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="--workers must be between 1 and"):
        sweep.cpu_shares(available + 1)


@pytest.mark.slow
@pytest.mark.heavy  # two worker processes, each starting JAX (25 s): in .ci/run, out of the suite
def test_worker_processes_train_every_run(tmp_path):
    """--workers: runs trained in pinned worker processes, each writing its report and its log."""
    workers = min(2, len(os.sched_getaffinity(0)))
    config = sweep_synthetic.get_config()
    base = config.base
    base.model.name, base.input.num_train, base.input.num_test = "mvit_test", 32, 16
    base.batch_size = base.physical_batch_size = 16
    base.num_epochs = 0.5  # one step
    config.sweep.modes, config.sweep.seeds = ("nonprivate",), (0, 1)
    runs = sweep.grid(config)
    sweep.run_all(runs, str(tmp_path), num_workers=workers)
    for name, run_config in runs:
        with open(tmp_path / name / "report.json") as f:
            report = json.load(f)
        assert report["config"]["seed"] == run_config.seed
        assert "Test top-1" in (tmp_path / name / "train.log").read_text()


def test_workers_start_with_the_longest_runs_of_two_modes():
    config = sweep_synthetic.get_config()
    tasks = [(n, c, n) for n, c in sweep.grid(config)]
    ordered = sweep.longest_first(tasks)
    assert sorted(t[0] for t in ordered) == sorted(t[0] for t in tasks)  # nothing lost
    modes = [t[1].mode for t in ordered]
    assert modes[0] == "maskdp" and modes[1] == "dp"
    assert modes[2:17] == ["maskdp"] * 14 + ["dp"] and modes[-3:] == ["nonprivate"] * 3


@pytest.mark.parametrize("modes", [("dp", "maskdp", "nonprivate"), ("dp",)])
def test_per_class_plot_takes_counts_from_a_non_dp_run(tmp_path, monkeypatch, modes):
    # The first report (sorted by name) is a dp run, which has no class counts.
    for mode in modes:
        _fake_run(tmp_path, mode, math.inf if mode == "nonprivate" else 1.0, 0, 0.5, [0.5, 0.5])
    assert results.load_reports(str(tmp_path))[0]["config"]["mode"] == "dp"
    seen = []
    real = sweep.plots.per_class
    monkeypatch.setattr(sweep.plots, "per_class",
                        lambda acc, names, counts, *a, **k: seen.append(counts)
                        or real(acc, names, counts, *a, **k))
    config = sweep_synthetic.get_config()
    config.sweep.epsilons = (1.0,)
    config.sweep.modes = modes
    paths = sweep.write_outputs(config, str(tmp_path))
    assert seen == [[10, 5] if len(modes) > 1 else None]
    assert os.path.getsize(paths["per_class.png"]) > 0


def test_sweep_without_a_full_view_run_writes_its_table_and_no_per_class_plot(tmp_path):
    """A context ablation of one-view runs only (no full view) used to divide by zero in the
    per-class plot after the runs had finished; its table is written and the plot left out."""
    from maskdp_jax.configs import sweep_context

    for seed in range(2):
        for view, top1 in (("public", 0.5), ("background", 0.6)):
            _fake_run(tmp_path, "nonprivate", math.inf, seed, top1 + 0.01 * seed, [0.5, 0.5],
                      view=view)
    config = sweep_context.get_config()
    config.sweep.views = ("public", "background")
    paths = sweep.write_outputs(config, str(tmp_path))
    assert "per_class.png" not in paths
    assert not os.path.exists(os.path.join(tmp_path, "per_class.png"))
    with open(paths["results.md"]) as f:
        md = f.read()
    assert "| Avatar only | `public` | 50.5 ± 0.7 |" in md and "per_class.png" not in md
    with pytest.raises(ValueError, match="no mode has per-class accuracies"):
        sweep.plots.per_class({}, ["a", "b"], None, str(tmp_path / "x.png"), title="t")


def test_results_name_the_recorded_command_and_commit(tmp_path):
    """A sweep that trains records its whole command line and the commit (results.md shows both,
    so a results directory says how to rerun it); without a record it says so."""
    for seed in range(2):
        _fake_run(tmp_path, "nonprivate", math.inf, seed, 0.5, [0.5, 0.5])
    config = sweep_synthetic.get_config()
    config.sweep.modes, config.sweep.epsilons = ("nonprivate",), ()
    with open(sweep.write_outputs(config, str(tmp_path))["results.md"]) as f:
        assert "its command line and commit were not recorded" in f.read()
    commit = results.code_commit()
    assert len(commit.split()[0]) == 12 and int(commit.split()[0], 16) >= 0
    command = ("python -m maskdp_jax.sweep --config=configs/sweep_synthetic.py "
               "--config.base.num_epochs=16")
    results.record_command(str(tmp_path), command, fresh=True)
    with open(sweep.write_outputs(config, str(tmp_path))["results.md"]) as f:
        md = f.read()
    assert f"Produced by `{command}` at commit `{commit}`" in md
    assert "Some runs were trained earlier" not in md


def test_the_record_keeps_the_commits_of_every_run_still_there(tmp_path, monkeypatch):
    """A sweep resumed at another commit names both; one that starts afresh only its own."""
    for commit, fresh in (("aaa", True), ("bbb", False), ("bbb", False)):
        monkeypatch.setattr(results, "code_commit", lambda c=commit: c)
        results.record_command(str(tmp_path), "python -m maskdp_jax.sweep", fresh=fresh)
    assert results.recorded_command(str(tmp_path))["commits"] == ["aaa", "bbb"]
    config = sweep_synthetic.get_config()
    config.sweep.modes, config.sweep.epsilons = ("nonprivate",), ()
    _fake_run(tmp_path, "nonprivate", math.inf, 0, 0.5, [0.5, 0.5])
    with open(sweep.write_outputs(config, str(tmp_path))["results.md"]) as f:
        assert "at commit `bbb` (the last command that trained runs here). Some runs were " \
               "trained earlier, at `aaa`." in f.read()
    results.record_command(str(tmp_path), "python -m maskdp_jax.sweep", fresh=True)
    assert results.recorded_command(str(tmp_path))["commits"] == ["bbb"]


def _checkout_with_results(tmp_path, monkeypatch):
    """A git checkout (one committed code file and a committed study) that ``results`` takes
    for this project's."""
    repo = tmp_path / "checkout"
    (repo / "docs" / "results" / "study").mkdir(parents=True)
    (repo / "code.py").write_text("committed\n")
    (repo / "docs" / "results" / "study" / "report.json").write_text("{}\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "study"]):
        subprocess.run([*git, *args], check=True)
    monkeypatch.setattr(results, "_checkout", lambda: str(repo))
    return repo


def test_a_study_is_written_under_docs_results_only_from_committed_code(tmp_path, monkeypatch):
    """A clean tree passes, also while the study itself is rewritten; a changed or untracked
    code file is refused with one line naming them; ``allow_uncommitted`` records the diff;
    a workdir outside docs/results/ is not checked."""
    repo = _checkout_with_results(tmp_path, monkeypatch)
    study = repo / "docs" / "results" / "study"
    results.check_committed(str(study))
    (study / "report.json").write_text('{"regenerated": true}\n')
    results.check_committed(str(study))
    assert not results.code_commit().endswith("uncommitted changes")
    (repo / "code.py").write_text("changed\n")
    (repo / "new.py").write_text("")
    with pytest.raises(ValueError, match=r"uncommitted changes: code.py, new.py\. Commit them "
                                         r"first, or pass --allow_uncommitted"):
        results.check_committed(str(study))
    assert results.code_commit().endswith("with uncommitted changes")
    assert not (study / results.UNCOMMITTED_DIFF).exists()
    results.check_committed(str(tmp_path / "elsewhere"))
    results.check_committed(str(study / "run"), allow_uncommitted=True)
    diff = (study / "run" / results.UNCOMMITTED_DIFF).read_text()
    assert "-committed\n+changed\n" in diff and "# untracked: new.py\n" in diff


def test_a_sweep_into_docs_results_refuses_a_dirty_tree_before_it_writes(tmp_path, monkeypatch,
                                                                          capsys):
    repo = _checkout_with_results(tmp_path, monkeypatch)
    (repo / "code.py").write_text("changed\n")
    workdir = repo / "docs" / "results" / "synthetic"
    status = sweep.cli(["maskdp_jax.sweep", "--config=configs/sweep_synthetic.py",
                        f"--workdir={workdir}"])
    assert status == 2
    assert "uncommitted changes: code.py" in capsys.readouterr().err
    assert not workdir.exists()


def test_clips_paired_table_pairs_each_seed_and_gives_the_interval_and_sign_test():
    """Per (mode, seed) the top-1 at every K and K_max − K = 1; a seed missing a K is left out;
    per mode the mean difference with its paired t interval (scipy's) and the exact sign test
    (5 of 5 positive: p = 2 / 32)."""
    import scipy.stats

    from maskdp_jax.reporting import results

    gains = [0.033, 0.057, 0.018, 0.02, 0.01]
    rows = [{"mode": "dp", "target_epsilon": 1.0, "view": "full", "clips_per_video": k,
             "seed": s, "top1": 0.3 + 0.05 * s + (g if k == 8 else 0.0)}
            for s, g in enumerate(gains) for k in (1, 2, 8)]
    rows.append({"mode": "dp", "target_epsilon": 1.0, "view": "full", "clips_per_video": 1,
                 "seed": 9, "top1": 0.9})  # no K = 2, 8: not paired
    rows.append({"mode": "dp", "target_epsilon": 4.0, "view": "full", "clips_per_video": 8,
                 "seed": 0, "top1": 0.9})  # another ε: not this table's
    table = results.clips_paired_table(rows, epsilon=1.0)
    lines = table.splitlines()
    assert lines[0] == "| mode | seed | K = 1 | K = 2 | K = 8 | K = 8 − K = 1 | |"
    assert lines[2] == "| dp | 0 | 30.0 | 30.0 | 33.3 | +3.3 | |"
    assert len(lines) == 2 + 5 + 1
    d = 100 * np.asarray(gains)
    lo, hi = scipy.stats.t.interval(0.95, len(d) - 1, loc=d.mean(),
                                    scale=d.std(ddof=1) / np.sqrt(len(d)))
    assert lines[-1] == (f"| dp | mean of 5 |  |  |  | {d.mean():+.1f} [{lo:+.1f}, {hi:+.1f}] | "
                         "sign test p = 0.062 |")
    assert results.clips_paired_table(rows, epsilon=2.0) == ""
