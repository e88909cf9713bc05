"""The results committed under docs/results/ and quoted in the README and the documentation pages
(docs/getting-started.md, docs/guides/) are the runs' own numbers.

Nothing here trains: the run reports are the committed ``report.json`` files, and every table or
quoted cell must be recomputed from them (no hand-typed results).
"""

import functools
import json
import math
import os
import re

import numpy as np
import pytest

from maskdp_jax.configs import default
from maskdp_jax.reporting import results
from maskdp_jax.run import model as run_model

ROOT = os.path.join(os.path.dirname(__file__), "..")
DEFAULT_RUNS = os.path.join(ROOT, "docs", "results", "default")
UNTUNED_RUNS = os.path.join(ROOT, "docs", "results", "headline_untuned")
README = os.path.join(ROOT, "README.md")
GETTING_STARTED = os.path.join(ROOT, "docs", "getting-started.md")


def guide(name: str) -> str:
    """Path of the guide page ``docs/guides/<name>.md``."""
    return os.path.join(ROOT, "docs", "guides", f"{name}.md")


def _read(path: str, *, unwrap: bool = False) -> str:
    """The page's text; ``unwrap`` joins its wrapped lines (a quoted phrase may span two)."""
    with open(path) as f:
        text = f.read()
    return " ".join(text.split()) if unwrap else text


#: Each benchmark topic's full record (commands, machines, dates, verbatim outputs), off the site;
#: docs/benchmarks.md quotes the current figure of each.
RECORDS = os.path.join(ROOT, "benchmarks", "results")


def record(topic: str) -> str:
    """benchmarks/results/<topic>.md: the verbatim outputs that a quoted figure must come from."""
    return _read(os.path.join(RECORDS, f"{topic}.md"))


def _load(directory: str) -> list[dict]:
    found = results.load_reports(directory)
    assert found, f"no run reports under {directory}"
    return found


@pytest.fixture(scope="module")
def reports():
    """The default setting's headline: every mode at its tuned settings, three data draws."""
    return _load(DEFAULT_RUNS)


@pytest.fixture(scope="module")
def untuned_reports():
    """The same grid before the tuning, every mode at the earlier default's settings."""
    return _load(UNTUNED_RUNS)


def _at(reports, mode: str, epsilon: float | None = None) -> list[dict]:
    return [r for r in reports if r["config"]["mode"] == mode
            and (epsilon is None or r["config"]["privacy"]["target_epsilon"] == epsilon)]


def _assert_calibrated(report: dict) -> None:
    """A private run's spent ε is its target, from just below (σ calibrated to it); a
    public-only run's is 0."""
    c = report["config"]
    if c["mode"] == "public_only":
        assert report["privacy"]["epsilon_pld"] == 0.0, report["run"]
    elif c["mode"] != "nonprivate":
        target = c["privacy"]["target_epsilon"]
        assert 0.9 * target < report["privacy"]["epsilon_pld"] <= target + 1e-6, report["run"]


def _assert_headline_grid(reports: list[dict], setting: str) -> None:
    """``reports`` are exactly configs/sweep_headline.py:<setting>'s grid: the earlier default
    run's model, epochs and fill on that setting, each private run calibrated to its ε, 5 seeds
    per private mode and ε."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_headline

    grid = dict(sweep.grid(sweep_headline.get_config(setting)))
    assert {r["run"] for r in reports} == set(grid)
    config = default.untuned()
    for r in reports:
        c = r["config"]
        assert c["input"]["setting"] == setting and c["model"] == config.model.to_dict()
        assert (c["num_epochs"], c["hidden_fill"]) == (config.num_epochs, config.hidden_fill)
        _assert_calibrated(r)
    for mode in ("dp", "maskdp"):
        for eps in (0.5, 1.0, 2.0, 4.0, 8.0):
            assert len(_at(reports, mode, eps)) == 5


def test_the_untuned_headline_is_the_grid_of_the_earlier_default(untuned_reports):
    """docs/results/headline_untuned: exactly the grid of configs/sweep_headline.py:person, every
    run the earlier default config at its ε (seeded), each calibrated to it, 5 seeds per mode
    and ε."""
    _assert_headline_grid(untuned_reports, "person")
    config = default.untuned()
    for r in untuned_reports:
        c = r["config"]
        assert c["privacy"]["l2_clip_norm"] == config.privacy.l2_clip_norm
        assert c["input"]["eval_split"] == "test"
    assert len(_at(untuned_reports, "nonprivate")) == 5


SECOND_RUNS = os.path.join(ROOT, "docs", "results", "headline_context")


@pytest.fixture(scope="module")
def second_reports():
    return _load(SECOND_RUNS)


def test_the_second_setting_is_the_headline_grid_on_the_context_data(second_reports):
    """docs/results/headline_context: configs/sweep_headline.py:context, the default run on the
    context data at each ε (seeded), 5 seeds per mode and ε, each calibrated to its ε."""
    _assert_headline_grid(second_reports, "context")


def test_the_second_settings_tables_and_gap_are_the_reports(second_reports):
    rows = results.rows(second_reports)
    table, gaps = results.markdown_table(rows), results.gap_table(rows)
    for path in (os.path.join(SECOND_RUNS, "results.md"), guide("training")):
        text = _read(path)
        assert table in text and gaps in text, path
    d, lo, hi, *_ = results.gap(rows, epsilon=1.0)
    ceiling = np.mean([r["metrics"]["top1"] for r in _at(second_reports, "nonprivate")])
    sentence = (f"it leads DP by {100 * d:+.1f} points at ε = 1 (95 % interval "
                f"[{100 * lo:+.1f}, {100 * hi:+.1f}]) but stays near 50 % at every ε, as DP "
                f"does from ε = 4 on, against {100 * ceiling:.1f} % without DP")
    assert sentence in _read(README, unwrap=True)
    for mode in ("dp", "maskdp"):  # "near 50 %": within 5 points at every ε from 4 on
        for eps in (4.0, 8.0):
            mean = np.mean([r["metrics"]["top1"] for r in _at(second_reports, mode, eps)])
            assert abs(mean - 0.5) < 0.05, (mode, eps, mean)


@pytest.mark.parametrize("mode,eps", [("nonprivate", None), ("dp", 1.0), ("maskdp", 1.0),
                                      ("dp", 8.0), ("maskdp", 8.0)])
def test_the_guide_quotes_what_each_mode_learns_of_the_second_setting(second_reports, mode,
                                                                      eps):
    chosen = _at(second_reports, mode, eps)
    motion, room = (np.mean([results.factor_accuracy(r["metrics"]["confusion"], factor)
                             for r in chosen]) for factor in (lambda c: c % 4, lambda c: c // 4))
    name = mode if eps is None else f"{mode}, ε = {eps:g}"
    cell = f"| {name} | {100 * motion:.1f} | {100 * room:.1f} |"
    assert cell in _read(guide("training")), cell


def test_the_guide_quotes_the_measured_floor():
    """The floor (pretrained backbone, untrained head) the guide gives is floor.json's, measured
    for the default run's model and setting."""
    with open(os.path.join(DEFAULT_RUNS, "floor.json")) as f:
        floor = json.load(f)
    config = default.get_config()
    assert (floor["model"], floor["setting"]) == (config.model.init_from, config.input.setting)
    assert len(floor["top1_per_seed"]) == 5
    quote = (f"{100 * floor['top1_mean']:.1f} ± {100 * floor['top1_std']:.1f} % (chance "
             f"{100 * floor['chance']:.1f} %")
    assert quote in _read(guide("training"), unwrap=True), quote


def test_the_untuned_headline_and_its_gaps_are_recomputed_from_the_reports(untuned_reports):
    rows = results.rows(untuned_reports)
    table, gaps = results.markdown_table(rows), results.gap_table(rows)
    assert gaps
    for path in (os.path.join(UNTUNED_RUNS, "results.md"), guide("training")):
        text = _read(path)
        assert table in text and gaps in text, path


def _target_sentence(rows: list[dict]) -> str:
    """The design target's verdict: at ε = 1, MaskDP beats the better of public-only and DP by at
    least 5 points, with the (joint) 95 % interval above 0 (results.best_baseline_gap)."""
    g, lo, hi = results.best_baseline_gap(rows, epsilon=1.0)
    verdict = "meets" if g >= 0.05 and lo > 0 else "misses"
    return (f"MaskDP − max(public-only, DP) at ε = 1 is {100 * g:+.1f} points (joint 95 % "
            f"interval [{100 * lo:+.1f}, {100 * hi:+.1f}]): it {verdict} the design target "
            "of at least +5 points with the interval above 0")


def test_the_default_headline_is_the_tuned_grid_over_three_data_draws(reports):
    """docs/results/default: configs/sweep_headline_tuned.py's grid, each mode at both tuning
    stages' settings, every run on each of the three data draws, tested on the test split,
    each private run calibrated to its ε; its tables (the gap's interval over the draws) are in
    results.md, the README and the training guide."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_headline_tuned, sweep_tuning

    assert {r["run"] for r in reports} == {
        n for n, _ in sweep.grid(sweep_headline_tuned.get_config())}
    for r in reports:
        c = r["config"]
        settings = dict(sweep_tuning.tuned(c["mode"]))
        assert (c["model"]["finetune"], c["optimizer"]["learning_rate"], c["num_epochs"]) == (
            settings["model.finetune"], settings["optimizer.learning_rate"],
            settings["num_epochs"]), r["run"]
        if "privacy.l2_clip_norm" in settings:
            assert c["privacy"]["l2_clip_norm"] == settings["privacy.l2_clip_norm"]
        # What `python train.py --config=configs/default.py:<mode>` trains, but the sweep's seed,
        # ε, draw and seeded randomness.
        ours = default.get_config(c["mode"])
        assert c["model"] == ours.model.to_dict(), r["run"]
        # runs made before the per-pass option had one optimiser: its key's None
        assert {"private_learning_rate": None, **c["optimizer"]} == ours.optimizer.to_dict(), (
            r["run"])
        assert (c["num_epochs"], c["batch_size"], c["hidden_fill"], c["input"]["setting"]) == (
            ours.num_epochs, ours.batch_size, ours.hidden_fill, ours.input.setting), r["run"]
        if c["mode"] in ("dp", "maskdp"):
            assert c["privacy"]["l2_clip_norm"] == ours.privacy.l2_clip_norm, r["run"]
        assert c["input"].get("eval_split", "test") == "test"
        _assert_calibrated(r)
    rows = results.rows(reports)
    assert {r["data_seed"] for r in rows} == set(sweep_headline_tuned.DATA_SEEDS)
    for mode in ("maskdp", "dp", "public_only"):  # ≥ 5 seeds on each draw, at ε = 1
        for draw in sweep_headline_tuned.DATA_SEEDS:
            assert len([r for r in _at(reports, mode, None if mode == "public_only" else 1.0)
                        if r["config"]["input"]["data_seed"] == draw]) >= 5, (mode, draw)
    table, gaps = results.markdown_table(rows), results.gap_table(rows)
    assert "over 3 data draws" in gaps
    for path in (os.path.join(DEFAULT_RUNS, "results.md"), README, guide("training")):
        text = _read(path)
        assert table in text and gaps in text, path


def test_the_readme_states_the_tuned_gap_against_the_design_target(reports, untuned_reports):
    """The README's headline is the tuned one over three data draws; the training guide states
    the verdict of both headlines."""
    tuned = _target_sentence(results.rows(reports))
    untuned = _target_sentence(results.rows(untuned_reports))
    assert tuned in _read(README, unwrap=True)
    dp = 100 * np.mean([r["metrics"]["top1"] for r in _at(untuned_reports, "dp", 1.0)])
    lead = 100 * results.gap(results.rows(untuned_reports), epsilon=1.0)[0]
    before = (f"DP-SGD reached {dp:.1f} % at ε = 1 and MaskDP led it by {lead:.1f} points: the "
              "weak baseline, not the private pass")
    assert before in _read(README, unwrap=True), before
    tuned_dp = 100 * np.mean([r["metrics"]["top1"] for r in _at(reports, "dp", 1.0)])
    assert (f"DP-SGD reaches {tuned_dp:.1f} % at ε = 1 instead of {dp:.1f} %, and MaskDP's lead "
            "is gone") in _read(guide("training"), unwrap=True)
    for sentence in (tuned, untuned):
        assert sentence in _read(guide("training"), unwrap=True), sentence

@pytest.mark.parametrize("mode", ["nonprivate", "public_only", "dp", "maskdp"])
def test_the_guide_quotes_what_each_mode_carries_to_full_videos(reports, mode):
    """The motion and pose accuracies (reporting.results.factor_accuracy of the reports'
    confusion matrices) the training guide gives at ε = 1 are the reports'."""
    chosen = _at(reports, mode, 1.0 if mode in ("dp", "maskdp") else None)
    assert len(chosen) == 15
    motion = np.mean([results.factor_accuracy(r["metrics"]["confusion"], lambda c: c % 4)
                      for r in chosen])
    pose = np.mean([results.factor_accuracy(r["metrics"]["confusion"], lambda c: c // 4)
                    for r in chosen])
    cell = f"| {mode} | {100 * motion:.1f} | {100 * pose:.1f} |"
    assert cell in _read(guide("training")), cell


@pytest.mark.parametrize("view,label", [("public", "public view"), ("two_view", "two views")])
def test_docs_quotes_the_view_diagnostics(reports, view, label):
    page = _read(GETTING_STARTED, unwrap=True)
    chosen = _at(reports, "maskdp", 1.0)
    values = [r["view_metrics"][view]["top1"] for r in chosen]
    assert len(values) == 15
    cell = f"{label} {100 * np.mean(values):.1f} ± {100 * np.std(values, ddof=1):.1f}%"
    assert cell in page, cell


def test_the_fill_was_chosen_on_the_validation_split():
    """docs/results/fill_validation: maskdp with each hidden-cell fill, evaluated on the
    validation part of the training split; the default's fill is the better mean, and the
    variant table in the guide is the reports'."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_fill

    root = os.path.join(ROOT, "docs", "results", "fill_validation")
    found = _load(root)
    assert {r["run"] for r in found} == {n for n, _ in sweep.grid(sweep_fill.get_config())}
    assert all(r["config"]["input"]["eval_split"] == "validation" for r in found)
    rows = results.rows(found)
    mean = {fill: np.mean([r["top1"] for r in rows if r["run"].endswith(f"_{fill}")])
            for fill in sweep_fill.FILLS}
    assert max(mean, key=mean.get) == default.get_config().hidden_fill
    table = results.variant_table(rows, {n: dict(o) for n, o in sweep_fill.get_config()
                                         .sweep.variants})
    for path in (os.path.join(root, "results.md"), guide("training")):
        assert table in _read(path), path


def test_every_mode_was_tuned_with_one_budget_on_the_validation_split():
    """docs/results/tuning: the four modes ran the same 12 variants (strategy × learning rate) on
    the same seeds at ε = 1, evaluated on the validation split; STAGE_ONE is each mode's best by
    its mean, and the variant table in results.md and the guide is the reports'."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_tuning

    root = os.path.join(ROOT, "docs", "results", "tuning")
    found = _load(root)
    config = sweep_tuning.get_config()
    assert {r["run"] for r in found} == {n for n, _ in sweep.grid(config)}
    assert all(r["config"]["input"]["eval_split"] == "validation" for r in found)
    rows = results.rows(found)
    named = {n: dict(o) for n, o in config.sweep.variants}
    best = results.best_variants(rows, named)
    assert {mode: (named[v]["model.finetune"], named[v]["optimizer.learning_rate"])
            for mode, (v, _, _) in best.items()} == sweep_tuning.STAGE_ONE
    table = results.variant_table(rows, named)
    for path in (os.path.join(root, "results.md"), guide("training")):
        assert table in _read(path), path


@pytest.mark.parametrize("mode", ["nonprivate", "public_only", "dp", "maskdp"])
def test_stage_two_tuned_each_mode_from_its_stage_one_best(mode):
    """docs/results/tuning_<mode>: from the mode's stage-one best, C × epochs (the modes without
    a private pass: epochs), on the validation split; the guide quotes each mode's best."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_tuning

    root = os.path.join(ROOT, "docs", "results", f"tuning_{mode}")
    found = _load(root)
    config = sweep_tuning.get_config(mode)
    assert {r["run"] for r in found} == {n for n, _ in sweep.grid(config)}
    finetune, lr = sweep_tuning.STAGE_ONE[mode]
    for r in found:
        c = r["config"]
        assert c["input"]["eval_split"] == "validation"
        assert (c["model"]["finetune"], c["optimizer"]["learning_rate"]) == (finetune, lr)
    rows = results.rows(found)
    named = {n: dict(o) for n, o in config.sweep.variants}
    name, mean, n = results.best_variants(rows, named)[mode]
    assert named[name] == sweep_tuning.STAGE_TWO[mode]  # what the tuned headline trains with
    assert (f"| {mode} | {name} | {finetune}, {lr:g} | {100 * mean:.1f} | {n} |"
            in _read(guide("training"))), (mode, name)
    assert results.variant_table(rows, named) in _read(os.path.join(root, "results.md"))



def test_the_private_pass_over_part_of_the_parameters_was_measured_on_validation():
    """docs/results/tuning_private_part: MaskDP with its public pass at public-only's best and its
    private pass over the head or the last norms × C, on the validation split; the guide's table
    is the reports' (beside public-only's best on the same seeds)."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_tuning

    root = os.path.join(ROOT, "docs", "results", "tuning_private_part")
    found = _load(root)
    config = sweep_tuning.get_config("private_part")
    assert {r["run"] for r in found} == {n for n, _ in sweep.grid(config)}
    assert all(r["config"]["input"]["eval_split"] == "validation" for r in found)
    assert all(r["config"]["model"]["finetune"] == "full" for r in found)
    named = {n: dict(o) for n, o in config.sweep.variants}
    table = results.variant_table(results.rows(found), named)
    for path in (os.path.join(root, "results.md"), guide("training")):
        assert table in _read(path), path


def test_an_optimiser_per_pass_was_tuned_on_validation_and_lost_to_one():
    """docs/results/tuning_per_pass: MaskDP at its tuned settings with an optimiser per pass ×
    the private pass's learning rate, on the validation split. PER_PASS_LEARNING_RATE is its
    best, and that best is below MaskDP's one-optimiser best on the same seeds (stage two),
    which is why the default keeps one optimiser."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_tuning

    root = os.path.join(ROOT, "docs", "results", "tuning_per_pass")
    found = _load(root)
    config = sweep_tuning.get_config("per_pass")
    assert {r["run"] for r in found} == {n for n, _ in sweep.grid(config)}
    tuned = dict(sweep_tuning.tuned("maskdp"))
    for r in found:
        c = r["config"]
        assert c["input"]["eval_split"] == "validation"
        assert (c["model"]["finetune"], c["optimizer"]["learning_rate"],
                c["privacy"]["l2_clip_norm"], c["num_epochs"]) == (
            tuned["model.finetune"], tuned["optimizer.learning_rate"],
            tuned["privacy.l2_clip_norm"], tuned["num_epochs"])
    named = {n: dict(o) for n, o in config.sweep.variants}
    name, mean, _ = results.best_variants(results.rows(found), named)["maskdp"]
    assert named[name] == {"optimizer.private_learning_rate":
                           sweep_tuning.PER_PASS_LEARNING_RATE}
    stage_two = os.path.join(ROOT, "docs", "results", "tuning_maskdp")
    two = {n: dict(o) for n, o in sweep_tuning.get_config("maskdp").sweep.variants}
    _, one_mean, _ = results.best_variants(results.rows(_load(stage_two)), two)["maskdp"]
    assert mean < one_mean
    quoted = f"({100 * mean:.1f} %) is below MaskDP's one-optimiser best ({100 * one_mean:.1f} %)"
    assert quoted in open(os.path.join(ROOT, "configs", "sweep_tuning.py")).read().replace(
        "\n#: ", " ")
    page = _read(guide("training"), unwrap=True)
    assert results.variant_table(results.rows(found), named) in _read(guide("training"))
    public = os.path.join(ROOT, "docs", "results", "tuning_public_only")
    p_named = {n: dict(o) for n, o in sweep_tuning.get_config("public_only").sweep.variants}
    _, public_mean, _ = results.best_variants(results.rows(_load(public)), p_named)["public_only"]
    loud = np.mean([r["top1"] for r in results.rows(found)
                    if r["private_learning_rate"] == 0.01])
    assert (f"The best, {sweep_tuning.PER_PASS_LEARNING_RATE:g} ({100 * mean:.1f} %), is below "
            f"MaskDP's one-optimiser best ({100 * one_mean:.1f} %) and public-only "
            f"({100 * public_mean:.1f} %)") in page
    assert f"a louder private pass (0.01) costs {100 * (one_mean - loud):.1f} points" in page


def test_the_context_setting_was_tuned_on_its_validation_split_and_the_guide_quotes_it():
    """docs/results/tuning_context_lr and _per_pass: every mode × the same learning rates (and
    MaskDP per pass × its private pass's), on the context data's validation split, from each
    mode's tuned settings; the guide's tables are the reports' and its sentence their bests."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_tuning

    best = {}
    page = _read(guide("training"))
    for arg in ("context_lr", "context_per_pass"):
        found = _load(os.path.join(ROOT, "docs", "results", f"tuning_{arg}"))
        config = sweep_tuning.get_config(arg)
        assert {r["run"] for r in found} == {n for n, _ in sweep.grid(config)}
        for r in found:
            c = r["config"]
            assert (c["input"]["setting"], c["input"]["eval_split"]) == ("context", "validation")
            tuned = dict(sweep_tuning.tuned(c["mode"]))
            assert c["model"]["finetune"] == tuned["model.finetune"]
            assert c["num_epochs"] == tuned["num_epochs"]
        named = {n: dict(o) for n, o in config.sweep.variants}
        rows = results.rows(found)
        table = results.variant_table(rows, named)
        assert table.split("\n\n")[0] in page, arg
        for mode, (_, mean, _) in results.best_variants(rows, named).items():
            best[(arg, mode)] = 100 * mean
    flat = _read(guide("training"), unwrap=True)
    assert (f"DP-SGD comes within a point of public-only ({best['context_lr', 'dp']:.1f} against "
            f"{best['context_lr', 'public_only']:.1f} %") in flat
    assert (f"{best['context_lr', 'maskdp']:.1f} % with one optimiser, "
            f"{best['context_per_pass', 'maskdp']:.1f} % with an optimiser per pass") in flat
    untuned = results.rows(_load(os.path.join(ROOT, "docs", "results", "headline_context")))
    gap = 100 * (np.mean([r["top1"] for r in untuned if r["mode"] == "public_only"])
                 - np.mean([r["top1"] for r in untuned if r["mode"] == "dp"
                            and r["target_epsilon"] == 1.0]))
    assert f"untuned it was {gap:.1f} points below on the test split" in flat
    assert max(best[k] for k in best if k[1] == "maskdp") < best["context_lr", "public_only"]
    assert 0 < best["context_lr", "public_only"] - best["context_lr", "dp"] < 1  # "within a point"
    assert max(best[k] for k in best if k[1] == "maskdp") < best["context_lr", "dp"]
    assert ("tuned on that setting's validation split, DP-SGD comes within a point of "
            "public-only at ε = 1 and MaskDP is below both, with one optimiser or one per pass"
            in _read(README, unwrap=True))


def test_the_floor_is_its_grid_and_the_guide_quotes_it():
    """docs/results/floor: a non-private linear probe and DP-SGD on the head of the frozen shipped
    backbone over the tuned headline's draws and seeds (configs/sweep_floor.py); its table is in
    results.md and the training guide."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_floor

    root = os.path.join(ROOT, "docs", "results", "floor")
    found = _load(root)
    assert {r["run"] for r in found} == {n for n, _ in sweep.grid(sweep_floor.get_config())}
    assert all(r["config"]["model"]["finetune"] == "linear" for r in found)
    for r in found:
        _assert_calibrated(r)
    rows = results.rows(found)
    table = results.markdown_table(rows)
    for path in (os.path.join(root, "results.md"), guide("training")):
        assert table in _read(path), path
    probe = 100 * np.mean([r["top1"] for r in rows if r["mode"] == "nonprivate"])
    head = 100 * np.mean([r["top1"] for r in rows
                          if r["mode"] == "dp" and r["target_epsilon"] == 1.0])
    sentence = (f"On the frozen backbone, a non-private linear probe reaches {probe:.1f} % and "
                f"DP-SGD on the head alone {head:.1f} % at ε = 1")
    for page in (README, guide("training")):
        assert sentence in _read(page, unwrap=True), page

SWEEP_RUNS = os.path.join(ROOT, "docs", "results", "synthetic")


@pytest.fixture(scope="module")
def sweep_reports():
    return _load(SWEEP_RUNS)


def test_sweep_is_the_whole_grid_each_run_calibrated_to_its_epsilon(sweep_reports):
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_synthetic

    expected = {name for name, _ in sweep.grid(sweep_synthetic.get_config())}
    assert {r["run"] for r in sweep_reports} == expected
    for r in sweep_reports:
        if r["config"]["mode"] != "nonprivate":
            target = r["config"]["privacy"]["target_epsilon"]
            assert 0.9 * target < r["privacy"]["epsilon_pld"] <= target + 1e-6, r["run"]


def test_sweep_table_in_results_and_docs_is_recomputed_from_the_reports(sweep_reports):
    table = results.markdown_table(results.rows(sweep_reports))
    for path in (os.path.join(SWEEP_RUNS, "results.md"), guide("sweeps")):
        with open(path) as f:
            assert table in f.read(), path


def test_docs_quotes_the_sweeps_public_view_diagnostic(sweep_reports):
    page = _read(guide("sweeps"), unwrap=True)

    def public_top1(eps):
        return 100 * np.mean([r["view_metrics"]["public"]["top1"] for r in sweep_reports
                              if r["config"]["mode"] == "maskdp"
                              and r["config"]["privacy"]["target_epsilon"] == eps])

    low, high = public_top1(0.25), public_top1(5.0)
    assert f"rises from {low:.0f}% (ε = 0.25" in page and f"to {high:.0f}% (ε = 5" in page


CONTEXT_RUNS = os.path.join(ROOT, "docs", "results", "context")


def test_context_ablation_table_is_recomputed_from_its_reports():
    """Schneider et al. 2024a Table 3 on the embedded data: the committed runs are the sweep_context
    grid, and the table in results.md and the guide is their view_table."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_context

    reports = _load(CONTEXT_RUNS)
    expected = {name for name, _ in sweep.grid(sweep_context.get_config())}
    assert {r["run"] for r in reports} == expected
    assert {r["config"]["view"] for r in reports} == {"full", "public", "background"}
    assert all(r["config"]["mode"] == "nonprivate" and r["config"]["num_epochs"] == 16.0
               for r in reports)
    table = results.view_table(results.rows(reports))
    for path in (os.path.join(CONTEXT_RUNS, "results.md"), guide("context")):
        with open(path) as f:
            assert table in f.read(), path


def test_person_context_ablation_has_table_3s_shape_and_is_recomputed():
    """The default setting's context ablation (configs/sweep_context.py:person): both views
    above the avatar alone, far above the background alone, as NTU in Table 3; the table in
    results.md and the guide is the reports' view_table."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_context

    root = os.path.join(ROOT, "docs", "results", "context_person")
    found = _load(root)
    assert {r["run"] for r in found} == {
        n for n, _ in sweep.grid(sweep_context.get_config("person"))}
    rows = results.rows(found)
    mean = {v: np.mean([r["top1"] for r in rows if r["view"] == v])
            for v in ("full", "public", "background")}
    assert mean["full"] > mean["public"] > mean["background"]
    table = results.view_table(rows)
    for path in (os.path.join(root, "results.md"), guide("context")):
        assert table in _read(path), path


MULTICLIP_RUNS = os.path.join(ROOT, "docs", "results", "multiclip_segment")


def test_multiclip_table_is_recomputed_from_its_reports():
    """Luo et al. 2024 Fig. 3a on the segment-cue embedded data: the committed runs are the
    sweep_multiclip_segment grid, every run of a mode at the same σ (ε does not depend on K), and
    the table in results.md and the guide is theirs, as is the per-seed paired K = 8 − K = 1
    table with its intervals and sign tests (reporting.results.clips_paired_table)."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_multiclip_segment

    reports = _load(MULTICLIP_RUNS)
    expected = {name for name, _ in sweep.grid(sweep_multiclip_segment.get_config())}
    assert {r["run"] for r in reports} == expected
    for mode in ("dp", "maskdp"):
        sigmas = {r["privacy"]["noise_multiplier"] for r in reports if r["config"]["mode"] == mode}
        assert len(sigmas) == 1, (mode, sigmas)  # K clips cost no privacy: same σ for every K
    rows = results.rows(reports)
    table = results.markdown_table(rows)
    paired = results.clips_paired_table(rows, epsilon=1.0)
    assert paired.count("| mean of 5 |") == 2  # both modes paired over the 5 seeds
    for path in (os.path.join(MULTICLIP_RUNS, "results.md"), guide("multiclip")):
        with open(path) as f:
            text = f.read()
        assert table in text and paired in text, path


def test_docs_quotes_the_spread_of_fresh_default_runs():
    """The range that docs/getting-started.md gives for a fresh `python train.py` is the ten
    committed secret-randomness runs of the default config."""
    reports = _load(os.path.join(ROOT, "docs", "results", "spread"))
    config = default.get_config("context_scratch")  # the earlier default, which they measured
    assert len(reports) == 10
    for r in reports:
        c = r["config"]
        assert (c["mode"], c["privacy"]["randomness"], c["num_epochs"]) == (
            "maskdp", "secret", config.num_epochs)
        # "auto" resolves to float32 on the CPU these runs ran on. The committed reports predate
        # the compute section: their model section still holds the compute dtype.
        model = dict(c["model"])
        assert run_model.compute_dtype_name(model.pop("compute_dtype"), "cpu") == "float32"
        assert model == config.model.to_dict()
    top1 = sorted(100 * r["metrics"]["top1"] for r in reports)
    page = _read(GETTING_STARTED, unwrap=True)
    cell = (f"median {np.median(top1):.1f}%, range {top1[0]:.1f}–{top1[-1]:.1f}%** (mean "
            f"{np.mean(top1):.1f} ± {np.std(top1, ddof=1):.1f}")
    assert cell in page, cell
    # the two kinds of run the page tells apart by the public-view diagnostic (≥ 40%: learned)
    pairs = [(100 * r["metrics"]["top1"], 100 * r["view_metrics"]["public"]["top1"])
             for r in reports]
    for learned in (True, False):
        group = [p for p in pairs if (p[1] >= 40) == learned]
        full, public = sorted(f for f, _ in group), sorted(v for _, v in group)
        text = (f"public view {'reaches' if learned else 'stays at'} {public[0]:.1f}–"
                f"{public[-1]:.1f}%")
        assert f"in {'7 of 10' if learned else 'the other 3'} the {text}" in page, text
        assert f"full videos {full[0]:.1f}–{full[-1]:.1f}%" in page, group


def _sweep_reports(root: str, config, *, randomness: str) -> list[dict]:
    """The committed reports of a variant sweep: exactly its grid, with ``randomness``, each
    calibrated to ε = 1."""
    from maskdp_jax import sweep

    reports = _load(root)
    assert {r["run"] for r in reports} == {name for name, _ in sweep.grid(config)}
    for r in reports:
        assert r["config"]["privacy"]["randomness"] == randomness
        assert abs(float(r["privacy"]["epsilon_pld"]) - 1.0) < 0.01
    return reports


def test_docs_quotes_the_robustness_sweep():
    """The variant table in docs/guides/training.md is recomputed from the committed
    reports, which are exactly the sweep's grid (secret randomness, each calibrated to ε = 1)."""
    from maskdp_jax.configs import sweep_robustness

    root = os.path.join(ROOT, "docs", "results", "robustness")
    config = sweep_robustness.get_config()
    reports = _sweep_reports(root, config, randomness="secret")
    table = results.variant_table(results.rows(reports),
                                  {n: dict(o) for n, o in config.sweep.variants})
    for path in (os.path.join(root, "results.md"), guide("training")):
        with open(path) as f:
            assert table in f.read(), path


DPCDA = {name: os.path.join(ROOT, "docs", "results", name)
         for name in ("dpcda_digits", "dpcda_video")}


def _dpcda(name):
    """``(release report, study report, release report.md, study report.md)`` of a committed
    DP-CDA result."""
    out = []
    for path in ("report.json", os.path.join("study", "report.json")):
        with open(os.path.join(DPCDA[name], path)) as f:
            out.append(json.load(f))
    for path in ("report.md", os.path.join("study", "report.md")):
        with open(os.path.join(DPCDA[name], path)) as f:
            out.append(f.read())
    return out


@pytest.mark.parametrize("name", sorted(DPCDA))
def test_dpcda_reports_are_recomputed_from_their_study_rows(name):
    """The study's tables are its rows' tables and cover l = 1 … min_class_size − 1; the release
    met its ε and its report points to the study as outside it."""
    from maskdp_jax.release import run as release_run

    report, study, release_md, study_md = _dpcda(name)
    rows, config = study["sweep"], report["config"]
    for table in (release_run.utility_table(rows), release_run.sigma_table(rows),
                  release_run.flip_table(rows)):
        assert table in study_md
    assert "Not covered by the release's ε" in study_md
    assert "not covered by this release's ε" in release_md and "sweep" not in report
    release = report["release"]
    assert release["privacy"]["epsilon"] <= config["release"]["epsilon"]
    assert release["randomness"].startswith("secret:")  # a release, not a seeded study run
    orders = config["sweep"]["orders"]
    assert min(orders) == 1 and max(orders) == config["min_class_size"] - 1
    assert len(rows) == (len(orders) * len(config["sweep"]["epsilons"])
                         * len(config["sweep"]["seeds"]) * len(config["sweep"]["label_noise"]))


def test_docs_quotes_the_dpcda_results():
    from maskdp_jax.release import run as release_run

    with open(guide("dpcda")) as f:
        page = f.read()
    digits, study, _, _ = _dpcda("dpcda_digits")
    rows = study["sweep"]
    assert release_run.utility_table(rows) in page
    assert release_run.sigma_table(rows) in page
    assert f"{100 * digits['release']['test_accuracy']:.1f} %" in page
    flips = {}
    for r in rows:
        if r["variant"] != "exact label" and math.isfinite(r["epsilon"]):
            flips.setdefault((r["epsilon"], r["order"]), []).append(r["label_flip_rate"])
    means = [np.mean(v) for v in flips.values()]
    assert f"flips {100 * min(means):.0f}–{100 * max(means):.0f} % of the labels" in page
    sigma = next(r["sigma_x"] for r in rows if r["epsilon"] == 1.0
                 and r["order"] == 4 and r["variant"] == "exact label")
    assert f"σx = {sigma:.1f} per pixel" in page
    stats = release_run.summarize(rows)
    for eps in (5.0, 10.0):
        best = release_run.best_order(rows, variant="exact label", epsilon=eps)
        mean = stats[("exact label", eps, best)][0]
        assert f"ε = {eps:g}: l = {best} ({100 * mean:.1f} %)" in page
    _, video_study, _, _ = _dpcda("dpcda_video")
    stats = release_run.summarize(video_study["sweep"])
    best_private = max(m for (_, e, _), (m, _) in stats.items() if math.isfinite(e))
    best_clear = max(m for (_, e, _), (m, _) in stats.items() if not math.isfinite(e))
    assert f"{100 * best_private:.1f} %" in page and f"{100 * best_clear:.1f} %" in page


def test_docs_quotes_the_dpcda_study_at_the_seeds_scale():
    """docs/guides/dpcda.md's 60,000-record tables are docs/results/dpcda_digits60k's study rows
    (utility and σx), the study ran on 60,000 records of 6,000 per class, and the best l at
    ε = 5 and the release's accuracy the text quotes are the report's."""
    from maskdp_jax.release import run as release_run

    root = os.path.join(ROOT, "docs", "results", "dpcda_digits60k")
    with open(os.path.join(root, "study", "report.json")) as f:
        rows = json.load(f)["sweep"]
    with open(os.path.join(root, "report.json")) as f:
        report = json.load(f)
    config = report["config"]
    assert (config["data"]["num_train"], config["min_class_size"]) == (60_000, 6_000)
    assert config["data"]["source"] == "digits_jittered"
    page = _read(guide("dpcda"))
    assert release_run.utility_table(rows) in page and release_run.sigma_table(rows) in page
    best = release_run.best_order(rows, variant="exact label", epsilon=5.0)
    mean = release_run.summarize(rows)[("exact label", 5.0, best)][0]
    assert best == 4 and f"{100 * mean:.1f} % at l = 4" in page
    assert f"scored {100 * report['release']['test_accuracy']:.1f} %" in " ".join(page.split())


def test_docs_quotes_the_coupled_audit():
    with open(os.path.join(ROOT, "docs", "results", "audit_coupled", "report.json")) as f:
        report = json.load(f)
    with open(guide("auditing")) as f:
        page = f.read()
    for r in report["rows"]:
        cells = (f"{r['public_batch_recovered_exactly']}/{r['steps_attacked']} steps | "
                 f"{r['precision']:.2f} | {r['recall']:.2f} | {r['epsilon']:.3g}")
        assert cells in page, cells
    rows = {r["sampling"]: r for r in report["rows"]}
    assert rows["coupled"]["recall"] == 1.0
    assert rows["coupled"]["epsilon"] / rows["decoupled"]["epsilon"] > 2.5  # "about three times"


def test_docs_quotes_the_dpcda_lira_audit():
    """docs/guides/dpcda.md's LiRA sentences are the committed report's figures, and what they
    say about the null bands holds: inside at ε = 1, Gu & Chen 2024's offline AUC just above at 5
    and 10, every attack above without noise; no lower bound above the accountant's ε."""
    with open(os.path.join(ROOT, "docs", "results", "audit_dpcda", "report.json")) as f:
        report = json.load(f)
    with open(guide("dpcda")) as f:
        page = " ".join(f.read().split())  # the page wraps lines
    rows = {r["epsilon"]: r["attacks"] for r in report["rows"]}

    def inside(a):
        return a["null"]["auc"]["low"] <= a["auc"] <= a["null"]["auc"]["high"]

    first = rows[1.0].values()
    assert all(inside(a) for a in first)
    aucs = [a["auc"] for a in first]
    assert f"every attack's AUC ({min(aucs):.3f}–{max(aucs):.3f}) lies inside its null band" in page
    off5, off10 = rows[5.0]["offline_seed004"], rows[10.0]["offline_seed004"]
    assert not inside(off5) and not inside(off10)
    assert (f"offline AUC {off5['auc']:.3f} at ε = 5 and {off10['auc']:.3f} at ε = 10, just above "
            f"its band's {off5['null']['auc']['high']:.3f}") in page
    finite = [a for e, attacks in rows.items() if math.isfinite(e) for a in attacks.values()]
    bound = max(a["epsilon_lower_bound"] for a in finite)
    assert f"an indicative ε lower bound of {bound:.2f} for every attack" in page
    clear = rows[math.inf]
    assert not any(inside(a) for a in clear.values())
    off = clear["offline_seed004"]
    assert f"offline AUC {off['auc']:.3f} and ε ≥ {off['epsilon_lower_bound']:.2f}" in page
    glob = clear["offline"]
    assert f"ε ≥ {glob['epsilon_lower_bound']:.2f} with a pooled σ" in page
    from maskdp_jax.audit import metrics

    cap = metrics.largest_certifiable_epsilon(off["num_in"], off["num_out"], delta=off["delta"],
                                              significance=off["significance"])
    assert f"could certify at most {cap:.2f}" in page  # so ε = 10 cannot fail
    assert f"({report['chance_asr_max']:.3f}," in page
    for attacks in rows.values():  # "every attack's ASR^M sits inside its null band"
        assert all(a["null"]["asr_max"]["low"] <= a["asr_max"] <= a["null"]["asr_max"]["high"]
                   for a in attacks.values())
    on = clear["online_seed004"]
    assert (f"online {on['asr_max']:.3f} without noise (band {on['null']['asr_max']['low']:.2f}–"
            f"{on['null']['asr_max']['high']:.2f})") in page
    for e, attacks in rows.items():  # no lower bound exceeds the accountant's upper bound
        assert all(a["epsilon_lower_bound"] <= e for a in attacks.values())


def test_docs_anonymisation_table_is_the_committed_summary():
    """docs/guides/anonymize.md: each row is recomputed from the committed summary.json,
    and the committed mask is one train.py reads, with the summary's public fraction."""
    from maskdp_jax.data import decode

    directory = os.path.join(ROOT, "docs", "results", "anonymize")
    with open(os.path.join(directory, "summary.json")) as f:
        videos = json.load(f)["videos"]
    with open(guide("anonymize")) as f:
        page = f.read()
    for key, v in videos.items():
        row = (f"| `{key}` | {v['frames']} | {v['public_fraction']:.3f} | "
               f"{len(v['frames_without_person'])} | {v['tubelets']} |")
        assert row in page, row
    mask, info = decode.load_mask(os.path.join(directory, "masks", "talk",
                                               "carphone_pristine.npz"))
    summary = videos["talk/carphone_pristine.mp4"]
    assert (info.num_frames, info.height, info.width) == (summary["frames"], *summary["size"])
    assert mask.mean() == pytest.approx(summary["public_fraction"], abs=1e-12)


def test_docs_anonymisation_quality_table_is_the_committed_benchmark():
    """docs/guides/anonymize.md: the quality table is benchmarks/anonymize_quality's table of the
    committed results.json (as its results.md and the benchmark page have it), and the counts
    quoted in the text are those results'."""
    from benchmarks import anonymize_quality

    directory = os.path.join(ROOT, "docs", "results", "anonymize_quality")
    with open(os.path.join(directory, "results.json")) as f:
        rows = json.load(f)["rows"]
    with open(os.path.join(directory, "results.md")) as f:
        table_md = f.read()
    page = record("anonymisation")  # the guide's measurements live in its record
    table = anonymize_quality.table(rows)
    assert table in table_md and table in page
    by = {(r["clip"], r["method"]): r for r in rows}

    def missed(clip):
        r = by[(clip, "before")]
        return round((1 - r["found"]) * r["frames"])

    flat = " ".join(page.split())
    assert (f"lost him in {missed('carphone_pristine')} of 120 pristine and "
            f"{missed('carphone_distorted')} of 120 distorted frames") in flat
    bbb = by[("bigbuckbunny", "after")]
    assert f"{round(bbb['found'] * bbb['frames'])} of the first {bbb['frames']} in all" in flat
    # The verdict against the 5 % follows the committed figures, and the pre-audit run
    # it is compared with is the kept table of that run.
    off = {clip: by[(clip, "after")]["avatar_off_person"]
           for clip in ("carphone_pristine", "bikes", "carphone_distorted")}
    assert (f"carphone_pristine ({off['carphone_pristine']:.3f}) and bikes ({off['bikes']:.3f}) "
            f"meet it, carphone_distorted ({off['carphone_distorted']:.3f}) does not") in flat
    assert off["carphone_pristine"] <= 0.05 and off["bikes"] <= 0.05
    assert off["carphone_distorted"] > 0.05
    with open(os.path.join(directory, "before_label_audit.json")) as f:
        before_audit = json.load(f)["rows"]
    assert anonymize_quality.table(before_audit) in _read(
        os.path.join(directory, "before_label_audit.md"))
    bikes_before = next(r for r in before_audit if (r["clip"], r["method"]) == ("bikes", "after"))
    assert (f"the default put {bikes_before['avatar_off_person']:.3f} of bikes' avatar" in flat
            and f"the table above has it at {off['bikes']:.3f}" in flat)


def test_the_anonymisation_benchmarks_ran_on_todays_code():
    """The committed anonymisation quality runs (fixtures, held-out, validation) were made at a
    commit with no uncommitted change to the code they measure, and that code has not changed
    since (benchmarks/anonymize_quality.CODE_PATHS): a change to the segmenter makes them stale,
    and this test says to rerun them."""
    import subprocess

    from benchmarks import anonymize_quality

    directory = os.path.join(ROOT, "docs", "results", "anonymize_quality")
    for stem in ("results", "heldout", "validation"):
        with open(os.path.join(directory, f"{stem}.json")) as f:
            run = json.load(f)
        assert not run["uncommitted"], stem
        known = subprocess.run(["git", "cat-file", "-e", run["commit"] + "^{commit}"], cwd=ROOT,
                               capture_output=True)
        if known.returncode:
            pytest.skip(f"commit {run['commit']} is not in this clone's history (a shallow "
                        "clone): git fetch --unshallow to check the runs' code")
        changed = subprocess.run(["git", "diff", "--name-only", run["commit"], "--",
                                  *anonymize_quality.CODE_PATHS], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout.split()
        def then(path, commit=run["commit"]):
            return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT,
                                  capture_output=True, text=True).stdout

        changed = [path for path in changed if not path.endswith(".py")
                   or _code_of(path, ROOT) != _code_of(path, ROOT, then(path))]
        assert not changed, (f"{stem}.json was measured at {run['commit'][:7]}; since then "
                             f"the code of {changed} changed: rerun {run['command']}")


def _code_of(path: str, root: str, text: str | None = None) -> str:
    """The code of a Python file (its syntax tree without docstrings; comments are not in it),
    read from ``root`` or given as ``text``; "" for a file that does not exist or parse."""
    import ast

    if text is None:
        if not os.path.exists(os.path.join(root, path)):
            return ""
        text = _read(os.path.join(root, path))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value,
                                                                             str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def test_docs_anonymisation_heldout_tables_are_the_committed_runs():
    """The anonymisation record (the guide's measurements): the held-out and validation tables are
    benchmarks/anonymize_quality's tables of the committed heldout.json / validation.json (as
    their .md files have them), deface's row is its committed run, the counts and shares quoted
    against the issue's targets are those runs', and the default's body settings are the ones
    that found most people on the validation clips."""
    from benchmarks import anonymize_quality

    directory = os.path.join(ROOT, "docs", "results", "anonymize_quality")
    page = record("anonymisation")  # the guide's measurements live in its record
    flat = " ".join(page.split())
    runs = {}
    for stem in ("heldout", "validation"):
        with open(os.path.join(directory, f"{stem}.json")) as f:
            runs[stem] = json.load(f)["rows"]
        table = anonymize_quality.heldout_table(runs[stem])
        assert table in _read(os.path.join(directory, f"{stem}.md")) and table in page, stem
    held = runs["heldout"]
    after, faces = (anonymize_quality.found(held, m) for m in ("after", "faces"))

    def share(method, key):
        rows = [r for r in held if r["method"] == method]
        return sum(r[f"{key}_covered_px"] for r in rows) / sum(r[f"{key}_px"] for r in rows)

    def frac(counts):
        return f"{counts[0]}/{counts[1]}"

    assert f"The default finds {frac(after['back'])} of the people seen from behind" in flat
    assert f"(the faces-only default: {frac(faces['back'])})" in flat
    assert f"{frac(after['distant'])} of the distant ones" in flat
    assert (f"covers {share('after', 'legs'):.3f} of the standing man's legs (faces only: "
            f"{share('faces', 'legs'):.3f}") in flat
    assert after["back"][0] >= 0.8 * after["back"][1]
    met = share("after", "legs") >= 0.6  # the legs target, stated as met or not as measured
    assert ("covered at least 0.6: " + ("met" if met else f"{share('after', 'legs'):.3f}")) in flat
    rows = [r for r in held if r["method"] == "after" and r["people"]]
    outside = sum(r["avatar_outside_boxes_px"] for r in rows) / sum(r["avatar_px"] for r in rows)
    assert f"({outside:.3f} outside the boxes)" in flat
    assert all(r["avatar_frame_fraction"] == 0 for r in held
               if r["method"] == "after" and not r["people"])
    with open(os.path.join(directory, "results.json")) as f:
        fixtures = {(r["clip"], r["method"]): r for r in json.load(f)["rows"]}
    for clip in ("carphone_pristine", "bikes", "carphone_distorted"):
        assert f"{fixtures[(clip, 'after')]['avatar_off_person']:.3f} ({clip})" in flat, clip
    with open(os.path.join(directory, "deface.json")) as f:
        deface = json.load(f)
    row = _read(os.path.join(directory, "deface.md")).split("\n")[4]
    assert row.startswith("| deface") and f"{deface['frames'] / deface['seconds']:.2f}" in row
    back = [p["face_blurred"] for p in deface["people"] if p["view"] == "back" and not p["tags"]]
    assert f"| {sum(back)}/{len(back)} faces blurred |" in _read(guide("anonymize"))
    validation = runs["validation"]
    # the guide's figures for the body detectors are these runs'
    page_guide = " ".join(_read(guide("anonymize")).split())

    def fps(method):
        rows = [r for r in held if r["method"] == method]
        return sum(r["frames"] for r in rows) / sum(r["seconds"] for r in rows)

    assert (f"| {fps('after'):.2f} frames/s ({fps('faces'):.2f} without the body detector, "
            f"{fps('hog'):.2f} with the HOG detector) |") in page_guide
    assert f"distant held-out people {frac(after['distant'])} found" in page_guide
    own = {m: anonymize_quality.found(validation, m, "found_own")["all"] for m in ("after", "hog")}
    assert (f"on the validation clips {own['after'][0]} of {own['after'][1]} labelled "
            f"person-frames were found with a pose of their own, {own['hog'][0]} with the HOG "
            "detector") in page_guide
    false = {m: [sum(r[k] for r in validation if r["method"] == m and not r["people"])
                 for k in ("frames_with_avatar", "frames")] for m in ("after", "hog")}
    assert false["after"][0] == 0
    assert (f"the HOG detector put an avatar in {false['hog'][0]} of {false['hog'][1]} frames and "
            "MoveNet in none") in page_guide
    assert (f"his legs were covered {share('after', 'legs'):.3f} (the HOG detector's box held "
            f"them: {share('hog', 'legs'):.3f})") in page_guide
    # The default's settings: a candidate replaces them only if it finds more than one
    # person-frame more with a pose of their own (one in 79 is within the clips' noise), puts no
    # avatar on the person-free validation scenes, and no more avatars than the default on the
    # fixtures' cartoon (bigbuckbunny, no human: a false person costs more than a missed one).
    def val_fps(method):
        rows = [r for r in validation if r["method"] == method]
        return sum(r["frames"] for r in rows) / sum(r["seconds"] for r in rows)

    def val_own(method):
        return anonymize_quality.found(validation, method, "found_own")["all"][0]

    def val_false(method):
        return sum(r["frames_with_avatar"] for r in validation
                   if r["method"] == method and not r["people"])

    def cartoon(method):  # frames of the cartoon with an avatar, in the fixture run
        return fixtures[("bigbuckbunny", method)]["found"]

    assert val_false("after") == 0
    for m in dict.fromkeys(r["method"] for r in validation):
        if val_own(m) > val_own("after") + 1 and not val_false(m):
            # vetoed on the fixtures, measured with the same detector settings (tiles aside)
            base, *changes = m.split("+")
            fixture = max((c for _, c in fixtures if c.split("+")[0] == base
                           and set(c.split("+")[1:]) <= set(changes)), key=len)
            assert fixture != "after" and cartoon(fixture) > cartoon("after"), m
            total = fixtures[("bigbuckbunny", "after")]["frames"]
            assert (f"`{fixture}` put an avatar in {round(cartoon(fixture) * total)} of "
                    f"bigbuckbunny's {total} frames (the default: "
                    f"{round(cartoon('after') * total)})") in page_guide
    # the tiles' verdict (the guide and the record): one person-frame more, and slower
    tiles = "after+segment.movenet_tiles=True"
    n = anonymize_quality.found(validation, "after", "found_own")["all"][1]
    assert val_own(tiles) == val_own("after") + 1
    slower = round(100 * (1 - val_fps(tiles) / val_fps("after")))
    assert (f"on the validation clips it found one person-frame more with a pose of their own "
            f"({val_own(tiles)}/{n} against {val_own('after')}/{n}) and ran {slower} % slower"
            ) in page_guide
    assert (f"found one person-frame more with a pose of their own ({val_own(tiles)}/{n}) at "
            f"{val_fps(tiles):.2f} frames/s against {val_fps('after'):.2f}") in " ".join(
                page.split())
    # the targets on the held-out clips, person by person, as the guide and the record state
    held_own = anonymize_quality.found(held, "after", "found_own")
    for column, target in (("group", 0.8), ("edge", 0.6)):
        k, total = held_own[column]
        verdict = "met" if k >= target * total else "not met"
        sentence = f"{column}: {k}/{total} person-frames found with a pose of their own ({verdict})"
        assert sentence in flat and sentence in page_guide, sentence
    k, total = held_own["partial"]
    assert f"legs-only views {k}/{total}" in flat and f"legs-only views {k}/{total}" in page_guide
    empty = [r for r in held if r["method"] == "after" and not r["people"]]
    frames = sum(r["frames"] for r in empty)
    assert f"no avatar in the {frames} frames of the person-free held-out scenes" in page_guide
    stages, _ = anonymize_quality.build("after")  # the default as it is now
    now = {k: v for k, v in vars(stages.segmenter).items()
           if isinstance(v, (str, int, float, bool))}
    for r in held + validation:  # the committed "after" rows ran with today's default
        if r["method"] == "after":
            assert r["segmenter_settings"] == now, r["clip"]


def test_anonymisation_memory_figures_are_the_benchmark_output():
    """The peak memory and speeds quoted in the anonymisation guide are
    benchmarks/anonymize_memory's verbatim output in its record, and the peak does not grow with
    the clip's length (the video is streamed in windows)."""
    bench = record("anonymisation")
    section = bench[bench.index("## Anonymisation memory"):]
    section = section[:section.index("\n## ")]
    line = (r"frames (\d+), {size}: peak RSS ([0-9.]+) GiB = ([0-9.]+) bytes per pixel-frame; "
            r"[0-9]+ s \(([0-9.]+) frames/s\)")
    hd = {int(t): (gib, per, fps) for t, gib, per, fps in
          re.findall(line.format(size="1920 x 1080"), section)}
    assert len(hd) >= 3 and 300 in hd, "the benchmark's output lines are missing from its record"
    peaks = [float(gib) for gib, _, _ in hd.values()]
    assert max(peaks) <= 1.2 * min(peaks), hd  # flat in the length, not proportional to it
    vga = re.findall(line.format(size="640 x 480"), section)
    assert len(vga) == 1, "the 640 x 480 line is missing from the record"
    with open(guide("anonymize")) as f:
        page = " ".join(f.read().split())
    longest = max(hd)
    gib, _, fps = hd[300]
    assert (f"a 300-frame 1920 x 1080 clip anonymises with the default configuration in {gib} "
            f"GiB of peak memory for the whole process") in page
    assert f"{hd[longest][0]} GiB for {longest} frames" in page and f"at {fps} frames/s" in page
    assert f"{vga[0][3]} frames/s at 640 x 480" in page


def lira_page_rows(report: dict) -> list[str]:
    """The guide's LiRA rows from a committed report (audit.membership.table and bound_table):
    per (mode, ε), the standard AUC of Gu & Chen 2024's offline and online attacks, of online with
    the configured (pooled) σ on one query and on every query, then ASR^M of Gu & Chen 2024's
    offline and of the configured online, Gu & Chen 2024's offline (indicative) ε lower bound, the
    best bound of every attack and seed with Bonferroni over them, and the cap at that level with
    "cannot fail at this ε" above it."""
    from maskdp_jax.audit import membership, metrics

    table = membership.table(report)
    best = {(b["mode"], b["epsilon"]): b
            for b in membership.bound_table(report["rows"], ("mode", "epsilon"))}

    def cell(entry, key):
        return f"{entry[key][0]:.2f} ± {entry[key][1]:.2f}"

    rows = []
    for mode, eps in dict.fromkeys((e["mode"], e["epsilon"]) for e in table):
        e = {x["attack"]: x for x in table if (x["mode"], x["epsilon"]) == (mode, eps)}
        b = best[mode, eps]
        shown = "∞" if math.isinf(eps) else f"{eps:g}"
        rows.append(
            f"| {mode} | {shown} | {cell(e['offline_seed004'], 'auc')} | "
            f"{cell(e['online_seed004'], 'auc')} | {cell(e['online'], 'auc')} | "
            f"{cell(e['online_aug'], 'auc')} | {cell(e['offline_seed004'], 'asr_max')} | "
            f"{cell(e['online'], 'asr_max')} | "
            f"{cell(e['offline_seed004'], 'epsilon_lower_bound')} | "
            f"{membership.bound_cell(b['best'])} | {metrics.cap_cell(b['cap'], eps)} |")
    return rows


def lira_page_nulls(report: dict) -> str:
    """The guide's sentence of the LiRA nulls (the first setting's; every setting has the same
    design)."""
    from maskdp_jax.audit import membership

    e = {x["attack"]: x for x in membership.table(report)[:6]}

    def band(entry, key):
        n = entry["null_" + key]
        return f"{n['mean']:.2f} [{n['low']:.2f}, {n['high']:.2f}]"

    return (f"AUC {band(e['offline_seed004'], 'auc')} offline, {band(e['online'], 'auc')} "
            f"online; ASR^M {band(e['offline_seed004'], 'asr_max')} offline, "
            f"{band(e['online'], 'asr_max')} online")


def test_docs_lira_table_is_the_committed_audit():
    """docs/guides/auditing.md, "Membership inference with shadow models": every row recomputed
    from the committed report.json (mean ± sample std over seeds, audit.membership.table), the
    nulls quoted, and no dp attack's lower bound above its ε."""
    with open(os.path.join(ROOT, "docs", "results", "audit_synthetic", "report.json")) as f:
        report = json.load(f)
    with open(guide("auditing")) as f:
        page = f.read()
    for row in lira_page_rows(report):
        assert row in page, row
    flat = " ".join(page.split())
    assert lira_page_nulls(report) in flat
    for r in report["rows"]:
        if r["mode"] == "dp":
            assert all(a["epsilon_lower_bound"] <= r["epsilon"] for a in r["attacks"].values())
    # the caps the page quotes: one bound's (512 + 512 trials, 95 %) and the best-of-all's
    from maskdp_jax.audit import membership, metrics

    first = report["rows"][0]["attacks"]["offline_seed004"]
    cap = metrics.largest_certifiable_epsilon(first["num_in"], first["num_out"],
                                              delta=first["delta"], significance=0.05)
    best = membership.bound_table(report["rows"], ("mode", "epsilon"))
    assert f"indicative; cap {cap:.2f}" in flat
    assert f"caps at {best[0]['cap']:.2f}" in flat
    dp = [membership.bound_cell(b["best"]) for b in best if b["mode"] == "dp"]
    tried = len(report["rows"][0]["attacks"]) * len(report["config"]["seeds"])  # 8 x 3
    assert f"corrected best of {tried} ({', '.join(dp)} at ε = 1, 4, 8)" in flat
    assert f"Bonferroni over those {tried}" in flat
    section = " ".join(page[page.index("## Membership inference"):
                            page.index("## Canaries")].split())
    assert not re.search(r"(lower )?bound[^.|]*95 %", section)  # the pooled bound is indicative


def test_committed_audit_reports_are_their_report_json_written_again():
    """Every committed audit's report.md is what ``python -m maskdp_jax.audit --only_report``
    writes from its report.json (audit.runs.write_outputs' markdown): the tables follow the
    current rules (TPR resolution, indicative pooled bounds, caps) without a retrain."""
    import ml_collections

    from maskdp_jax.audit import canaries, feature_masking, membership, synthetic_release

    writers = {"audit_synthetic": membership.markdown, "audit_canaries": canaries.markdown,
               "audit_canaries_default": canaries.markdown,
               "audit_canaries_full": canaries.markdown,
               "audit_feature_masking": feature_masking.markdown,
               "audit_dpcda": synthetic_release.markdown}
    for name, markdown in writers.items():
        root = os.path.join(ROOT, "docs", "results", name)
        with open(os.path.join(root, "report.json")) as f:
            report = json.load(f)
        assert markdown(ml_collections.ConfigDict(report["config"]), report) == _read(
            os.path.join(root, "report.md")), name
        if report["audit"] == "canaries":  # the cap by the current rule (2mδ counted)
            assert report["cap"] == canaries.perfect_attack_bound(
                report["num_canaries"], delta=report["config"]["delta"]), name


def test_docs_feature_cache_table_is_the_benchmark_output_in_results_md():
    """docs/guides/feature_cache.md's rows quote the benchmark's verbatim output in its record
    (epoch times, speed-ups, bytes per clip, break-even), not hand-typed numbers."""
    section = record("feature_cache")
    runs = {}
    for strategy, block in zip(("selective", "linear"), section.split("$ python -m "
                                                                       "benchmarks.feature_cache")[1:3],
                               strict=True):
        no_cache = float(re.search(r"\| no cache \|.*epoch ([\d.]+) s", block)[1])
        cached = float(re.search(r"\| cache \(blocks .*epoch ([\d.]+) s", block)[1])
        speedup = re.search(r"speed-up with the cache: ([\d.]+)x", block)[1]
        mib = re.search(r"([\d.]+) MiB per clip", block)[1]
        epochs = re.search(r"pays for itself after ([\d.]+) epochs", block)[1]
        runs[strategy] = (no_cache, cached, speedup, mib, epochs)
    with open(guide("feature_cache")) as f:
        page = f.read()
    rows = {"selective": r"\| selective, k = 2 \(the papers'\) \| ([\d.]+) s → ([\d.]+) s \| "
                         r"\*\*([\d.]+)×\*\* \| ([\d.]+) MiB .*\| ([\d.]+) epochs \|",
            "linear": r"\| linear probe \| ([\d.]+) s → ([\d.]+) s \| \*\*([\d.]+)×\*\* \| .* \| "
                      r"([\d.]+) epochs \|"}
    for strategy, pattern in rows.items():
        m = re.search(pattern, page)
        assert m, f"README feature-cache row {strategy!r} not found"
        no_cache, cached, speedup, mib, epochs = runs[strategy]
        assert float(m[1]) == round(no_cache, 1) and float(m[2]) == round(cached, 2 if cached < 1
                                                                           else 1)
        assert float(m[3]) == round(float(speedup)) or m[3] == speedup
        assert m.groups()[-1] == epochs
        if strategy == "selective":
            assert m[4] == mib


def test_docs_quotes_the_precision_sweep():
    """The bfloat16 table in docs/guides/gpu_bf16.md is recomputed from the committed reports:
    the sweep's grid, seeded (paired: a seed's two runs share batches, clips and noise), each
    at ε = 1."""
    from maskdp_jax.configs import sweep_precision

    root = os.path.join(ROOT, "docs", "results", "precision")
    reports = _sweep_reports(root, sweep_precision.get_config(), randomness="seeded")
    for r in reports:
        assert r["config"]["model"]["compute_dtype"] == r["run"].rsplit("_", 1)[1]
    table = results.paired_table(reports, variants=("float32", "bfloat16"))
    with open(guide("gpu_bf16")) as f:
        assert table in f.read()


def test_docs_quotes_the_h100_suite_files():
    """The H100 feature-cache rows (docs/guides/feature_cache.md) and clip-store figures
    (docs/guides/own_videos.md) are the GPU suite's committed output
    (benchmarks/gpu/h100-2026-11-24/), not hand-typed numbers."""
    gpu = os.path.join(ROOT, "benchmarks", "gpu", "h100-2026-11-24")
    with open(os.path.join(gpu, "2-cache.md")) as f:
        runs = f.read().split("$ -m benchmarks.feature_cache")[1:]
    page = _read(guide("feature_cache"))
    assert len(runs) == 2
    for dtype, block in zip(("float32", "bfloat16"), runs, strict=True):
        assert f"{dtype} compute" in block
        (first, epoch), (first_c, epoch_c) = (
            re.search(rf"\| {label} .*first step \(compiles\) ([\d.]+) s \| epoch ([\d.]+) s",
                      block).groups() for label in ("no cache", r"cache \(blocks"))
        speedup = re.search(r"speed-up with the cache: ([\d.]+)x", block)[1]
        row = (rf"\| {dtype} \| {epoch} s → {epoch_c} s \| \*\*{speedup}×\*\* \| "
               rf"{first} s → {first_c} s \|")
        assert re.search(row, page), row
    with open(os.path.join(gpu, "4-data.txt")) as f:
        data = f.read()
    decord = float(re.search(r"\| decord \| [\d.]+ \| ([\d.]+) \|", data)[1])
    store = float(re.search(r"\| store \| [\d.]+ \| ([\d.]+) \|", data)[1])
    clip_store = _read(guide("own_videos"))
    assert f"{store} CPU-ms per store clip against {decord} decoding" in clip_store
    assert f"**{round(decord / store)}× less CPU per clip**" in clip_store


def canary_page_rows(report: dict) -> list[str]:
    """The guide's canary rows (audit.canaries.table): the one-run bound, the standard AUC and its
    null mean and 95 % band, the cap ("cannot fail at this ε" where the promise is above it), and
    the hull's AUC."""
    from maskdp_jax.audit import canaries, metrics

    rows = []
    for e in canaries.table(report):
        eps = "∞" if math.isinf(e["epsilon"]) else f"{e['epsilon']:g}"
        up = "∞" if math.isinf(e["upper_bound"]) else f"{e['upper_bound']:g}"
        lb, auc, null = e["epsilon_lower_bound"], e["auc"], e["null_auc"]
        rows.append(f"| {e['mode']} | {eps} | {e['region']} | {up} | {lb[0]:.2f} ± {lb[1]:.2f} | "
                    f"{auc[0]:.2f} ± {auc[1]:.2f} | {null['mean']:.2f} [{null['low']:.2f}, "
                    f"{null['high']:.2f}] | {metrics.cap_cell(report['cap'], e['upper_bound'])} | "
                    f"{e['auc_hull'][0]:.2f} |")
    return rows


def test_docs_canary_table_is_recomputed_from_the_committed_audit():
    """docs/guides/auditing.md's canary rows are docs/results/audit_canaries/report.json through
    audit.canaries.table, the cap is the report's, and no run's lower bound exceeds what its
    setting promises."""
    with open(os.path.join(ROOT, "docs", "results", "audit_canaries", "report.json")) as f:
        report = json.load(f)
    with open(guide("auditing")) as f:
        page = f.read()
    for row in canary_page_rows(report):
        assert row in page, row
    assert f"no bound can exceed {report['cap']:.2f}" in " ".join(page.split())
    finite = [r for r in report["rows"] if math.isfinite(r["upper_bound"])]
    assert len(finite) == 18 and all(r["epsilon_lower_bound"] <= r["upper_bound"]
                                     for r in finite)
    assert "(0 of the 18 runs that promise a finite ε)" in page
    testable = sum(r["upper_bound"] <= report["cap"] for r in finite)
    assert f"only the {testable} at ε = 1 could have" in " ".join(page.split())


@pytest.mark.parametrize("point", ["default", "full"])
def test_the_canary_audits_are_their_configs(point):
    """docs/results/audit_canaries_<point> was made with configs/audit_canaries_default.py:<point>
    as it is now: the default's operating point follows configs/default.py."""
    from maskdp_jax.configs import audit_canaries_default

    with open(os.path.join(ROOT, "docs", "results", f"audit_canaries_{point}",
                           "report.json")) as f:
        made = json.load(f)["config"]
    assert made == json.loads(json.dumps(audit_canaries_default.get_config(point).to_dict()))


@pytest.mark.parametrize("point", ["default", "full"])
def test_docs_default_point_canary_tables_are_the_committed_audits(point):
    """docs/guides/auditing.md's tables of the canary audits at the default operating point and
    with full fine-tuning are docs/results/audit_canaries_<point>/report.json through
    audit.canaries.table; the design's cap is at least 4 (the ε the private region's audit must
    be able to refute), no run's bound exceeds its promise; with full fine-tuning the
    non-private runs show the attack's power, at the default's point the guide states how little
    it has there."""
    from maskdp_jax.audit import canaries, metrics

    with open(os.path.join(ROOT, "docs", "results", f"audit_canaries_{point}",
                           "report.json")) as f:
        report = json.load(f)
    page = _read(guide("auditing"))
    flat = " ".join(page.split())
    assert report["cap"] >= 4.0 and f"would certify {report['cap']:.2f} at δ = 1e-5" in flat
    # each table under its own heading
    default_part, full_part = page.split("At the earlier default's point, the whole network")
    page = default_part if point == "default" else full_part
    assert {r["region"] for r in report["rows"]} == {"private"}
    assert report["config"]["model"]["init_from"] == "shipped:mvit_cpu_pretrained"
    for e in canaries.table(report):
        eps = "∞" if math.isinf(e["epsilon"]) else f"{e['epsilon']:g}"
        up = "∞" if math.isinf(e["upper_bound"]) else f"{e['upper_bound']:g}"
        lb, auc, null = e["epsilon_lower_bound"], e["auc"], e["null_auc"]
        row = (f"| {e['mode']} | {eps} | {up} | {lb[0]:.2f} ± {lb[1]:.2f} | "
               f"{auc[0]:.3f} ± {auc[1]:.3f} | {null['mean']:.3f} [{null['low']:.3f}, "
               f"{null['high']:.3f}] | {e['violations']}/{e['seeds']} | "
               f"{metrics.cap_cell(report['cap'], e['upper_bound'])} |")
        assert row in page, row
    finite = [r for r in report["rows"] if math.isfinite(r["upper_bound"])]
    assert all(r["epsilon_lower_bound"] <= r["upper_bound"] for r in finite)
    testable = [r for r in finite if r["upper_bound"] <= report["cap"]]
    assert f"at either point (0 of {len(testable)} each)" in flat
    reference = [r for r in report["rows"] if r["mode"] == "nonprivate"]
    bounds = [r["epsilon_lower_bound"] for r in reference]
    if point == "full":
        assert min(bounds) > 3
    else:
        auc = np.mean([r["auc"] for r in reference])
        assert (f"AUC {auc:.3f}, bounds of {min(bounds):.2f} to {max(bounds):.2f} in the three "
                f"seeds). This audit cannot refute an ε above {max(bounds):.2f} there") in flat
        masked = {round(np.mean([r["auc"] for r in report["rows"] if r["mode"] == "maskdp"
                                 and r["epsilon"] == eps]), 3) for eps in (1.0, 4.0, 8.0)}
        assert len(masked) == 1 and f"the same at every ε ({masked.pop():.3f})" in flat


def test_docs_feature_masking_tables_are_recomputed_from_the_committed_audit():
    """docs/results/audit_feature_masking/report.md is audit.feature_masking.markdown of its
    report.json (one run of the three modes), docs/guides/auditing.md shows its explainer,
    retraining-adversary and LiRA tables (every version, class-wise masks included; standard AUC
    with its null), and the committed masks keep the MILP's constraint."""
    import ml_collections

    from maskdp_jax.audit import feature_masking

    root = os.path.join(ROOT, "docs", "results", "audit_feature_masking")
    with open(os.path.join(root, "report.json")) as f:
        report = json.load(f)
    with open(os.path.join(root, "report.md")) as f:
        text = f.read()
    config = ml_collections.ConfigDict(report["config"])
    assert feature_masking.markdown(config, report) in text
    assert [v["version"] for v in report["versions"]] == list(feature_masking.VERSIONS)
    assert {r["mode"] for v in report["versions"] for r in v["rows"]} == {
        "nonprivate", "maskdp", "dp"}
    page = _read(guide("auditing"))
    for head in ("| explainer | model evaluations per video", "| version | masks by |",
                 "| version | mode | ε | attack | AUC (null) |"):
        start = text.index(head)
        table = text[start:text.index("\n\n", start)]
        assert table in page, head
    for name, e in report["explainers"].items():
        assert e["seeds"] == [0, 1], name
    flat = " ".join(page.split())
    shap, lime = report["explainers"]["shap"], report["explainers"]["lime"]
    assert (f"{shap['seed_agreement_identity']:.2f} (SHAP) and "
            f"{lime['seed_agreement_identity']:.2f} (LIME)") in flat
    alpha = report["config"]["alpha"]  # HiGHS's feasibility tolerance: 1e-6 relative
    for name, by in (("", ""), ("_by_class", "_classwise")):
        keep = np.array(report["keep"]["optimized"] if not by else report["keep_classwise"])
        s = np.array(report["identity_sensitivity" + name])
        for z, method in enumerate(report["mask_methods" + by]):
            assert method != "milp" or keep[z] @ s[z] <= (1 - alpha + 1e-6) * s[z].sum()
    s, u = np.array(report["identity_sensitivity"]), np.array(report["utility_sensitivity"])
    for z in range(len(s)):  # the committed per-subject masks, recomputed
        again = feature_masking.keep_cells(s[z], u[z], alpha=alpha,
                                           fallback_top_k=report["config"]["fallback_top_k"])
        np.testing.assert_array_equal(again.keep, np.array(report["keep"]["optimized"])[z])


def test_the_benchmark_page_quotes_its_records():
    """docs/benchmarks.md is the current figure of each topic: every number on it is one that a
    topic's record (benchmarks/results/*.md, the verbatim outputs and their readings; history.md
    the superseded figures) already states, so the page never introduces a figure of its own;
    each topic links its record, and the page stays a summary."""
    page = _read(os.path.join(ROOT, "docs", "benchmarks.md"))
    records = {name: _read(os.path.join(RECORDS, name)) for name in os.listdir(RECORDS)
               if name.endswith(".md")}
    everything = "\n".join(records.values())
    for number in re.findall(r"\d+(?:[.,]\d+)*(?:e-?\d+)?", page):
        assert number in everything, number
    topics = [line[3:] for line in page.splitlines() if line.startswith("## ")]
    linked = set(re.findall(r"\(\.\./benchmarks/results/([a-z0-9_]+\.md)\)", page))
    assert linked <= set(records) and len(linked) >= len(topics) - 2  # two topics are tables
    assert len(page.splitlines()) < 400


def test_accounting_guide_sigma_table_is_the_accountants_output():
    """docs/guides/accounting.md's σ table is `python -m maskdp_jax.accounting table`'s output: its
    settings rows exactly, and the ε = 1 row's RDP cells recomputed (the whole table takes a minute;
    RDP at one ε, a few seconds)."""
    from maskdp_jax.accounting import accountant, paper_settings

    page = _read(guide("accounting"))
    for s in paper_settings.PAPER_SETTINGS:
        row = f"| {s.name} | {s.num_examples} | {s.epochs} | {s.delta:g} | {s.q:.6g} | {s.steps} |"
        assert row in page, row
    cells = next(line for line in page.splitlines() if line.startswith("| 1 | ")).split(" | ")[1:]
    for i, s in enumerate(paper_settings.PAPER_SETTINGS):
        sigma = accountant.calibrate_noise_multiplier(
            target_epsilon=1.0, delta=s.delta, q=s.q, steps=s.steps, method="rdp",
            num_examples=s.num_examples)
        assert cells[2 * i] == f"{sigma:.4f}", (s.name, cells[2 * i], sigma)


def test_the_api_guide_states_the_digits_examples_measured_result():
    """docs/api.md's table of examples/digits.py is its committed output's numbers."""
    with open(os.path.join(ROOT, "docs", "results", "digits_example", "output.txt")) as f:
        out = f.read()
    page = _read(os.path.join(ROOT, "docs", "api.md"))
    for mode in ("nonprivate", "public_only", "dp", "maskdp"):
        per_seed = [100 * float(a) for a in re.findall(
            rf"seed \d {mode} +ε = \S+: test accuracy ([0-9.]+)", out)]
        assert len(per_seed) == 3, mode
        mean = float(re.search(rf"{mode} +mean ([0-9.]+) over 3 seed", out).group(1))
        assert abs(np.mean(per_seed) - 100 * mean) < 0.1  # both rounded to 0.1 point
        row = next(line for line in page.splitlines() if line.startswith(f"| {mode} "))
        assert f"| {100 * mean:.1f} % | " in row and ", ".join(
            f"{a:.1f}" for a in per_seed) + " %" in row, row
    means = {m: 100 * float(re.search(rf"{m} +mean ([0-9.]+) over 3 seed", out).group(1))
             for m in ("public_only", "dp", "maskdp")}
    views = [100 * float(v) for v in re.findall(r"maskdp +ε = \S+: .*public view ([0-9.]+)", out)]
    flat = " ".join(page.split())
    assert f"{means['maskdp'] - means['dp']:+.1f} points on the mean" in flat
    gap = re.search(r"maskdp − max\(public_only, dp\) = ([-+0-9.]+) points", out).group(1)
    assert abs(float(gap) - (means["maskdp"] - max(means["public_only"], means["dp"]))) < 0.11
    assert f"`maskdp − max(public_only, dp) = {gap} points`" in flat
    better = "public-only" if means["public_only"] > means["dp"] else "DP"
    if float(gap) < 0:
        assert f"{-float(gap):.1f} points below {better}" in flat
    assert f"MaskDP models ({min(views):.1f}–{max(views):.1f} %)" in flat


def _digits_validation_outputs(directory: str, flag: str, values) -> dict[str, str]:
    """The committed outputs of ``examples/digits.py --split=validation --<flag>=<value>``, each
    checked to be evaluated on validation and never on test."""
    outs = {}
    for value in values:
        name = f"validation_{value}.txt" if flag == "fill" else f"validation_{flag}{value}.txt"
        with open(os.path.join(ROOT, "docs", "results", directory, name)) as f:
            outs[value] = f.read()
        assert f"--split=validation --{flag}={value}" in outs[value]
        assert "test accuracy" not in outs[value] and "validation accuracy" in outs[value]
    return outs


def _digits_mean(out: str, mode: str) -> float:
    """A mode's mean accuracy in % over the 3 seeds of one digits example output."""
    return 100 * float(re.search(rf"{mode} +mean ([0-9.]+) over 3 seed", out).group(1))


def test_the_api_guide_states_the_digits_private_rate_measured_on_validation():
    """docs/api.md's sentence on the example's optimiser per pass is the four committed
    validation outputs of examples/digits.py (--private_lr ∈ {0, 1e-3, 1e-4, 1e-5}), and the
    example's default rate is the one with the best MaskDP mean there."""
    import ast

    outs = _digits_validation_outputs("digits_per_pass", "private_lr",
                                      ("0", "1e-3", "1e-4", "1e-5"))

    def mean(lr, mode):
        return _digits_mean(outs[lr], mode)

    per_pass = {lr: mean(lr, "maskdp") for lr in ("1e-3", "1e-4", "1e-5")}
    public = [mean(lr, "public_only") for lr in outs]
    flat = " ".join(_read(os.path.join(ROOT, "docs", "api.md")).split())
    assert (f"gave MaskDP {mean('0', 'maskdp'):.1f} %, an optimiser per pass "
            f"{min(per_pass.values()):.1f}–{max(per_pass.values()):.1f} % at 1e-3, 1e-4 and 1e-5 "
            f"(1e-3 the best mean), and public-only {min(public):.1f}–{max(public):.1f} %") in flat
    assert max(per_pass, key=per_pass.get) == "1e-3"
    tree = ast.parse(open(os.path.join(EXAMPLES_DIR, "digits.py")).read())
    default = next(kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and node.args and getattr(node.args[0], "value", None) == "--private_lr"
                   for kw in node.keywords if kw.arg == "default")
    assert default == float(max(per_pass, key=per_pass.get))


def test_the_api_guide_states_the_digits_fill_measured_on_validation():
    """docs/api.md's sentence on the hidden-cell fill is the two committed validation outputs of
    examples/digits.py (--fill=pattern and --fill=backgrounds): their means, seed 0's public
    view of public-only and MaskDP's gap, evaluated on validation, never on test."""
    outs = _digits_validation_outputs("digits_fill", "fill", ("pattern", "backgrounds"))

    def mean(fill, mode):
        return _digits_mean(outs[fill], mode)

    def seed0_view(fill):
        return 100 * float(re.search(r"seed 0 public_only .*public view ([0-9.]+)",
                                     outs[fill]).group(1))

    flat = " ".join(_read(os.path.join(ROOT, "docs", "api.md")).split())
    for mode, name in (("public_only", "public-only"), ("maskdp", "MaskDP")):
        assert (f"{name} from {mean('pattern', mode):.1f} to {mean('backgrounds', mode):.1f} %"
                in flat), mode
    assert f"({seed0_view('pattern'):.1f} → {seed0_view('backgrounds'):.1f} % on seed 0)" in flat
    gaps = [-float(re.search(r"maskdp − max\(public_only, dp\) = ([-+0-9.]+) points",
                             outs[fill]).group(1)) for fill in ("pattern", "backgrounds")]
    assert (f"MaskDP, with one optimiser then, stayed {gaps[0]:.1f} and {gaps[1]:.1f} points "
            "below public-only") in flat
    assert (f"moved from {mean('pattern', 'nonprivate'):.1f} to "
            f"{mean('backgrounds', 'nonprivate'):.1f} %") in flat


def test_the_auditing_guide_quotes_the_default_runs_accuracy(reports):
    """The auditing guide's comparison of the audited shadow models with the default run uses
    the default run's committed accuracies at ε = 1."""
    means = {mode: 100 * np.mean([r["metrics"]["top1"] for r in _at(reports, mode, 1.0)])
             for mode in ("maskdp", "dp")}
    sentence = (f"{means['maskdp']:.1f} % (MaskDP) and {means['dp']:.1f} % (DP) test top-1 at "
                "ε = 1")
    assert sentence in _read(guide("auditing"), unwrap=True), sentence


BANDMF_RUNS = os.path.join(ROOT, "docs", "results", "bandmf")


def test_the_bandmf_study_is_its_grid_and_the_guide_table_its_reports(untuned_reports):
    """docs/results/bandmf is configs/sweep_bandmf.py's grid (banded, 4 bands, each run at its
    ε), and the guide's comparison with the headline's independent-noise runs of the same seeds
    (reporting.results.noise_table) and its σ quotes are the reports'."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_bandmf

    banded = _load(BANDMF_RUNS)
    assert {r["run"] for r in banded} == set(dict(sweep.grid(sweep_bandmf.get_config())))
    for r in banded:
        assert (r["privacy"]["noise"], r["privacy"]["bands"]) == ("banded", sweep_bandmf.BANDS)
        _assert_calibrated(r)
    seeds = {r["config"]["seed"] for r in banded}
    independent = [r for r in untuned_reports if r["config"]["seed"] in seeds]
    table = results.noise_table(results.rows(independent), results.rows(banded))
    page = _read(guide("bandmf"))
    assert table in page
    flat = " ".join(page.split())
    for eps in (1.0, 8.0):
        sb = _at(banded, "dp", eps)[0]["privacy"]["noise_multiplier"]
        si = _at(untuned_reports, "dp", eps)[0]["privacy"]["noise_multiplier"]
        assert f"σ = {sb:.2f} against {si:.2f}" in flat or f"{sb:.2f} against {si:.2f}" in flat


def test_the_bandmf_guide_quotes_the_noise_benchmark():
    out = record("bandmf_noise")
    m = re.search(r"independent ([0-9.]+) ms, banded ([0-9.]+) ms \(([0-9.]+)x\); noise state "
                  r"([0-9]+) MiB", out)
    assert m, "the BandMF noise benchmark's output is not in its record"
    ind, band, ratio, mib = (float(v) for v in m.groups())
    flat = " ".join(_read(guide("bandmf")).split())
    assert (f"{ratio:.2f}× the independent noise's time ({band:.0f} against {ind:.0f} ms), the "
            f"noise state holds {mib:.0f} MiB") in flat


def test_every_committed_study_names_a_clean_commit():
    """A study's recorded commit is the code that made it: no sweep record says "with
    uncommitted changes", no benchmark JSON records ``"uncommitted": true``, and no study carries
    the diff of an ``--allow_uncommitted`` run (results.check_committed)."""
    root = os.path.join(ROOT, "docs", "results")
    dirty = set()
    for study in sorted(os.listdir(root)):
        for directory, _, files in os.walk(os.path.join(root, study)):
            assert results.UNCOMMITTED_DIFF not in files, directory
            for name in files:
                if not name.endswith(".json"):
                    continue
                with open(os.path.join(directory, name)) as f:
                    record = json.load(f)
                if not isinstance(record, dict):
                    continue
                if name == results.COMMAND_FILE:
                    commits = [record["commit"], *record.get("commits", [])]
                    if any("uncommitted" in c for c in commits):
                        dirty.add(study)
                assert record.get("uncommitted", False) is False, os.path.join(directory, name)
    assert not dirty, (
        f"{sorted(dirty)} name a commit with uncommitted changes: make them again from a clean "
        "tree (the sweep refuses a dirty one under docs/results/)")


EXAMPLES_DIR = os.path.join(ROOT, "examples")
WHERE_IT_PAYS = os.path.join(ROOT, "docs", "results", "where_it_pays")
SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)


def _where_it_pays_rows() -> list[dict]:
    """The rows of the where-it-pays slice, of its public-weight grid and of its per-pass
    grid."""
    return [row for d in (WHERE_IT_PAYS, WHERE_IT_PAYS + "_weights", WHERE_IT_PAYS + "_per_pass")
            for row in results.rows(_load(d))]


def _share_mean(rows: list[dict], mode: str, share: float, epsilon: float,
                weight: float = 1.0, private_lr: float | None = None) -> float:
    """Mean top-1 in % of the where-it-pays runs of one cell (MaskDP at public weight λ, with one
    optimiser or, with ``private_lr``, an optimiser per pass)."""
    v = [r["top1"] for r in rows if r["mode"] == mode and r["private_share"] == share
         and r["target_epsilon"] == epsilon and r["public_weight"] == weight
         and r["private_learning_rate"] == private_lr]
    assert v, (mode, share, epsilon, weight, private_lr)
    return 100 * float(np.mean(v))


def test_the_where_it_pays_study_is_its_grids_and_the_guide_its_table():
    """docs/results/where_it_pays and _weights hold configs/sweep_where_it_pays.py's slice and
    weights grids, and the training guide's table is ``share_table`` of both."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_where_it_pays

    for grid, directory in (("slice", WHERE_IT_PAYS), ("weights", WHERE_IT_PAYS + "_weights"),
                            ("per_pass", WHERE_IT_PAYS + "_per_pass"),
                            ("size", WHERE_IT_PAYS + "_size"),
                            ("size_weights", WHERE_IT_PAYS + "_size_weights")):
        names = {name for name, _ in sweep.grid(sweep_where_it_pays.get_config(grid))}
        assert {r["run"] for r in results.rows(_load(directory))} == names, grid
    rows = _where_it_pays_rows()
    assert all(r["private_share"] is not None for r in rows)
    assert results.share_table(rows) in _read(guide("training"))


def test_the_where_it_pays_reading_quotes_its_reports():
    """The figures the training guide's reading of the where-it-pays study quotes are the
    reports' means, and its verdict (MaskDP never above the better baseline) holds in every
    cell."""
    rows = _where_it_pays_rows()

    mean = functools.partial(_share_mean, rows)

    page = _read(guide("training"), unwrap=True)
    expected = (f"(s = 1, ε = 8: MaskDP {mean('maskdp', 1.0, 8.0):.1f} %, public-only "
                f"{mean('public_only', 1.0, 0.0):.1f} %, chance 25 %)",
                f"learns part of it ({mean('dp', 1.0, 8.0):.1f} %) and non-private training all of "
                f"it ({mean('nonprivate', 1.0, math.inf):.1f} %)",
                f"(s = 1, ε = 8: {mean('maskdp', 1.0, 8.0, 0.01):.1f} %)")
    for sentence in expected:
        assert sentence in page, sentence
    costs = [mean("public_only", s, 0.0) - mean("maskdp", s, e) for s in (0.0, 0.25)
             for e in (1.0, 8.0)]
    assert f"costs it {min(costs):.1f} to {max(costs):.1f} points" in page
    for share in (0.0, 0.25, 0.5, 0.75, 1.0):  # with one optimiser, at every λ
        for epsilon in (1.0, 8.0):
            cell = [r for r in rows if r["private_share"] == share]
            for weight in {r["public_weight"] for r in cell if r["mode"] == "maskdp"}:
                runs = [r for r in cell if r["mode"] != "maskdp" or (
                    r["public_weight"] == weight and r["private_learning_rate"] is None)]
                assert results.best_baseline_gap(runs, epsilon=epsilon)[0] < 0


def test_the_where_it_pays_per_pass_reading_quotes_its_reports():
    """The training guide's reading of MaskDP with an optimiser per pass quotes the reports:
    at the private rate 0.01 above the better baseline where most of the label is private, below
    it where the label is mostly public; at the person setting's rate below it everywhere."""
    from maskdp_jax.configs import sweep_tuning

    rows = _where_it_pays_rows()
    mean = functools.partial(_share_mean, rows)
    loud = sweep_tuning.STAGE_ONE["dp"][1]
    assert loud == 0.01

    def pp(share, epsilon, lr=loud):
        return mean("maskdp", share, epsilon, private_lr=lr)

    def gap(share, epsilon, lr):
        cell = [r for r in rows if r["private_share"] == share and (
            r["mode"] != "maskdp" or r["private_learning_rate"] == lr)]
        return results.best_baseline_gap(cell, epsilon=epsilon)

    g = gap(0.75, 8.0, loud)
    page = _read(guide("training"), unwrap=True)
    quoted = (f"s = ¾, ε = 8: {pp(0.75, 8.0):.1f} % against DP's {mean('dp', 0.75, 8.0):.1f} "
              f"({100 * g[0]:+.1f}, interval [{100 * g[1]:+.1f}, {100 * g[2]:+.1f}]",
              f"s = 1: {pp(1.0, 1.0):.1f} % at ε = 1 and {pp(1.0, 8.0):.1f} % at ε = 8 against "
              f"DP's {mean('dp', 1.0, 1.0):.1f} and {mean('dp', 1.0, 8.0):.1f}",
              f"({pp(0.5, 1.0):.1f} % at both ε against DP's {mean('dp', 0.5, 1.0):.1f} and "
              f"{mean('dp', 0.5, 8.0):.1f} and public-only's {mean('public_only', 0.5, 0.0):.1f})")
    for sentence in quoted:
        assert sentence in page, sentence
    assert round(pp(0.5, 1.0), 1) == round(pp(0.5, 8.0), 1)
    public = [-100 * gap(s, e, loud)[0] for s in (0.0, 0.25) for e in (1.0, 8.0)]
    assert f"it stays {min(public):.1f} to {max(public):.1f} points below the better" in page
    for share in (0.75, 1.0):
        for epsilon in (1.0, 8.0):
            assert gap(share, epsilon, loud)[0] > 0
    below = []
    for share in SHARES:
        for epsilon in (1.0, 8.0):
            assert gap(share, epsilon, sweep_tuning.PER_PASS_LEARNING_RATE)[0] < 0
            g = gap(share, epsilon, loud)
            assert g[1] < 0  # "No interval lies above 0"
            if g[2] < 0:  # the whole interval, hence its mean, below 0
                below.append(f"s = {share:g}, ε = {epsilon:g}: {100 * g[0]:.1f} "
                             f"[{100 * g[1]:.1f}, {100 * g[2]:.1f}]")
    assert len(below) == 1 and f"one lies below it ({below[0]})" in page, below
    above = [100 * gap(s, e, loud)[0] for s in (0.75, 1.0) for e in (1.0, 8.0)]
    under = [-100 * gap(s, e, loud)[0] for s in (0.0, 0.25, 0.5) for e in (1.0, 8.0)]
    assert min(under) > 0
    readme = _read(README, unwrap=True)
    assert f"by {min(above):.1f} to {max(above):.1f} points; no interval above 0;" in readme
    assert f"and up to {max(under):.1f} points below the better one elsewhere" in readme
    assert (f"where most of the label is private (s ≥ ¾), by {min(above):.1f} to "
            f"{max(above):.1f} points, no interval above 0") in page


def test_the_where_it_pays_draws_hold_the_per_pass_cells_over_three_draws():
    """docs/results/where_it_pays_draws is configs/sweep_where_it_pays.py's draws grid (draws 1
    and 2); with draw 0's runs of the same cells it is the guide's table, and the reading quotes
    its gaps: at or above the better baseline in every cell, no interval excluding 0."""
    from maskdp_jax import sweep
    from maskdp_jax.configs import sweep_where_it_pays

    directory = WHERE_IT_PAYS + "_draws"
    found = _load(directory)
    grid = sweep_where_it_pays.get_config("draws")
    assert {r["run"] for r in found} == {name for name, _ in sweep.grid(grid)}
    shares = sweep_where_it_pays.DRAWS_SHARES
    rate = sweep_where_it_pays.PER_PASS_LEARNING_RATE
    draw0 = [r for r in _where_it_pays_rows() if r["private_share"] in shares and (
        r["mode"] in ("public_only", "dp") and r["private_learning_rate"] is None
        and r["public_weight"] == 1.0
        or r["mode"] == "maskdp" and r["private_learning_rate"] == rate)]
    rows = draw0 + results.rows(found)
    assert {r["data_seed"] for r in rows} == {0, 1, 2}
    assert results.share_table(rows) in _read(guide("training"))
    gaps = [results.best_baseline_gap([r for r in rows if r["private_share"] == share],
                                      epsilon=e) for share in shares for e in (1.0, 8.0)]
    one = [results.best_baseline_gap([r for r in draw0 if r["private_share"] == share],
                                      epsilon=e)[0] for share in shares for e in (1.0, 8.0)]
    assert all(g[0] > 0 for g in gaps) and all(g[1] < 0 < g[2] for g in gaps)
    page = _read(guide("training"), unwrap=True)
    assert (f"in all four cells (+{100 * min(g[0] for g in gaps):.1f} to "
            f"+{100 * max(g[0] for g in gaps):.1f} points), by less than on draw 0 alone "
            f"(+{100 * min(one):.1f} to +{100 * max(one):.1f})") in page
    assert (f"it gains {100 * gaps[0][0]:.1f} points at ε = 1 and {100 * gaps[1][0]:.1f} at "
            "ε = 8") in page
    assert (f"over three data draws +{100 * min(g[0] for g in gaps):.1f} to "
            f"+{100 * max(g[0] for g in gaps):.1f}") in _read(README, unwrap=True)


def test_the_where_it_pays_size_grid_is_in_the_guide():
    """The training guide's table of the size grids (N = 4,096; MaskDP also at λ = 0.01) is
    ``share_table`` of their runs, every run trained on 4,096 videos at its mode's tuned
    settings; the reading quotes them."""
    from maskdp_jax.configs import sweep_tuning

    reports = (_load(WHERE_IT_PAYS + "_size") + _load(WHERE_IT_PAYS + "_size_weights")
               + _load(WHERE_IT_PAYS + "_size_per_pass"))
    for r in reports:
        c = r["config"]
        assert c["input"]["num_train"] == 4096 and c["input"]["eval_split"] == "validation"
        assert c["model"]["finetune"] == dict(sweep_tuning.tuned(c["mode"]))["model.finetune"]
    rows = results.rows(reports)
    page = _read(guide("training"))
    assert results.share_table(rows) in page
    flat = " ".join(page.split())

    mean = functools.partial(_share_mean, rows)

    quoted = (f"(s = 1: {mean('maskdp', 1.0, 1.0, 0.01):.1f} % at ε = 1, "
              f"{mean('maskdp', 1.0, 8.0, 0.01):.1f} % at ε = 8)",
              f"public-only's level ({mean('maskdp', 0.5, 8.0, 0.01):.1f} % at ε = 8)",
              f"(s = 1) it reaches {mean('dp', 1.0, 1.0):.1f} % at ε = 1 and "
              f"{mean('dp', 1.0, 8.0):.1f} % at ε = 8",
              f"it passes public-only ({mean('dp', 0.5, 8.0):.1f} against "
              f"{mean('public_only', 0.5, 0.0):.1f} % at ε = 8",
              f"{mean('maskdp', 1.0, 1.0):.1f} % at s = 1, ε = 1 and "
              f"{mean('maskdp', 1.0, 8.0):.1f} % at ε = 8 (chance 25 %), the same "
              f"{mean('maskdp', 0.5, 1.0):.1f} % at both ε where the label is split")
    for sentence in quoted:
        assert sentence in flat, sentence
    assert round(mean("maskdp", 0.5, 1.0), 1) == round(mean("maskdp", 0.5, 8.0), 1)
    for share in (0.5, 1.0):  # MaskDP, at either λ or per pass, is below the better baseline
        for epsilon in (1.0, 8.0):
            for weight, lr in ((1.0, None), (0.01, None), (1.0, 0.01)):
                cell = [r for r in rows if r["private_share"] == share and (
                    r["mode"] != "maskdp" or (r["public_weight"], r["private_learning_rate"])
                    == (weight, lr))]
                assert results.best_baseline_gap(cell, epsilon=epsilon)[0] < 0
    pp = functools.partial(mean, "maskdp", private_lr=0.01)
    below = [mean("dp", 1.0, e) - pp(1.0, e) for e in (1.0, 8.0)]
    assert (f"(s = 1: {pp(1.0, 1.0):.1f} % at ε = 1, {pp(1.0, 8.0):.1f} % at ε = 8), still "
            f"{below[0]:.1f} and {below[1]:.1f} points below DP-SGD") in flat
    assert (f"MaskDP is below both baselines at ε = 1 ({pp(0.5, 1.0):.1f} %) and between them "
            f"at ε = 8 ({pp(0.5, 8.0):.1f} %)") in flat
    assert pp(0.5, 1.0) < min(mean("public_only", 0.5, 0.0), mean("dp", 0.5, 1.0))
    assert mean("public_only", 0.5, 0.0) < pp(0.5, 8.0) < mean("dp", 0.5, 8.0)
    slice_rows = results.rows(_load(WHERE_IT_PAYS))  # N = 1,024, the figures in brackets
    dp_small = [_share_mean(slice_rows, "dp", 1.0, e) for e in (1.0, 8.0)]
    assert f"({dp_small[0]:.1f} and {dp_small[1]:.1f} % on N = 1,024)" in flat
    readme = _read(README, unwrap=True)
    assert (f"DP-SGD learns the private room ({mean('dp', 1.0, 8.0):.1f} % at ε = 8 where it "
            f"holds the whole label) and MaskDP's private pass, with one optimiser, still nothing "
            f"({mean('maskdp', 1.0, 8.0):.1f} %, chance 25 %); per pass it reaches "
            f"{pp(1.0, 8.0):.1f} %") in readme
