"""Feature masking (issue 17 part 4, Gu & Chen 2024 Alg. 1): the explainers on games with
a known answer, the MILP's constraint and optimality, the fallback, the random control, the
embedded subjects, and the audit end to end at a tiny size. Hiding the chosen cells is the
tokeniser's (``tests/test_maskdp_jax_tokenizer.py``)."""

import functools
import itertools
import json
import os

import ml_collections
import numpy as np
import pytest
import scipy.optimize

from maskdp_jax.audit import feature_masking as fm
from maskdp_jax.audit import runs
from maskdp_jax.configs import audit_feature_masking
from maskdp_jax.core.tokenizer import Tokenizer
from maskdp_jax.data import synthetic


def _linear_game(weights, bias=0.3):
    def score(video, label, coalitions):
        return np.asarray(coalitions, np.float64) @ weights + bias
    return score


def test_shap_recovers_a_linear_game_exactly_and_lime_closely():
    rng = np.random.default_rng(0)
    weights = rng.normal(size=12)
    videos, labels = np.zeros((2, 1)), np.zeros(2, int)
    shap_values = fm.explain(_linear_game(weights), videos, labels, num_cells=12,
                             explainer="shap")
    np.testing.assert_allclose(shap_values.values, np.stack([weights] * 2), atol=1e-12)
    assert shap_values.evaluations == 25 and np.all(shap_values.quality < 1e-12)
    lime_values = fm.explain(_linear_game(weights), videos, labels, num_cells=12,
                             explainer="lime", evaluations=200)
    assert fm.rank_agreement(lime_values.values[0], weights) > 0.95
    assert np.all(lime_values.quality > 0.9)  # local R²
    with pytest.raises(ValueError, match="explainer must be one of"):
        fm.explain(_linear_game(weights), videos, labels, num_cells=12, explainer="gradcam")


def _noisy_game(weights):
    """A linear game plus a fixed pseudo-random interaction term: LIME's fit then depends on
    which coalitions it draws."""
    def score(video, label, coalitions):
        c = np.asarray(coalitions, np.float64)
        return c @ weights + np.sin(7.0 * (c @ np.arange(len(weights))))
    return score


@pytest.mark.parametrize("explainer", fm.EXPLAINERS)
def test_explainer_seeds_draw_their_own_streams(explainer):
    """Another explainer seed gives other attributions on every video (not the same seed twice),
    the same seed the same ones, and no video at seed 1 reuses the stream of any video at seed 0
    (with ``seed + i`` video 0 at seed 1 would be video 1 at seed 0: one game, same values)."""
    weights = np.random.default_rng(1).normal(size=12)
    game, videos, labels = _noisy_game(weights), np.zeros((3, 1)), np.zeros(3, int)
    run = functools.partial(fm.explain, game, videos, labels, num_cells=12, explainer=explainer,
                            evaluations=50)
    zero, again, one = run(seed=0).values, run(seed=0).values, run(seed=1).values
    np.testing.assert_array_equal(zero, again)
    for i, j in itertools.product(range(3), range(3)):
        assert not np.array_equal(one[i], zero[j]), (i, j)
    seeds = {fm.video_seed(s, i) for s in range(3) for i in range(100)}
    assert len(seeds) == 300


def test_shap_is_exact_in_sum_on_a_game_with_interactions():
    def score(video, label, coalitions):
        c = np.asarray(coalitions, np.float64)
        return c[:, 0] * c[:, 1] * 2.0 + c[:, 2] - 0.5 * c[:, 3] * c[:, 4]

    values = fm.explain(score, np.zeros((1, 1)), np.zeros(1, int), num_cells=6,
                        explainer="shap").values[0]
    np.testing.assert_allclose(values.sum(), 2.0 + 1.0 - 0.5, atol=1e-12)
    np.testing.assert_allclose(values[[0, 1, 2, 3, 4, 5]], [1.0, 1.0, 1.0, -0.25, -0.25, 0.0],
                               atol=1e-12)


def test_class_sensitivity_averages_positive_parts_and_refuses_empty_classes():
    values = np.array([[1.0, -2.0], [3.0, 4.0], [-1.0, 2.0]])
    out = fm.class_sensitivity(values, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(out, [[2.0, 2.0], [0.0, 2.0]])
    with pytest.raises(ValueError, match=r"classes \[2\] have no videos"):
        fm.class_sensitivity(values, np.array([0, 0, 1]), 3)


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
def test_milp_respects_its_constraint_and_is_optimal(alpha):
    rng = np.random.default_rng(int(alpha * 10))
    s = rng.exponential(size=10) * (rng.random(10) > 0.2)  # some cells with S = 0
    u = rng.exponential(size=10)
    choice = fm.keep_cells(s, u, alpha=alpha, fallback_top_k=0.3)
    assert choice.method == "milp"
    budget = (1 - alpha) * s.sum()
    assert choice.keep @ s <= budget + 1e-9
    assert np.all(choice.keep[s == 0])
    best = max(np.dot(m, u) for m in itertools.product((0, 1), repeat=10)
               if np.dot(m, s) <= budget + 1e-9)
    np.testing.assert_allclose(choice.keep @ u, best, rtol=1e-6)


def test_milp_falls_back_to_top_k_when_it_finds_no_solution(monkeypatch):
    failed = scipy.optimize.OptimizeResult(status=1, x=None, message="time limit")
    monkeypatch.setattr(scipy.optimize, "milp", lambda *a, **k: failed)
    s = np.array([0.1, 5.0, 0.2, 3.0, 0.0, 0.3, 0.4, 0.5, 0.6, 0.7])
    choice = fm.keep_cells(s, np.ones(10), alpha=0.5, fallback_top_k=0.2)
    assert choice.method == "top-k"
    np.testing.assert_array_equal(np.flatnonzero(~choice.keep), [1, 3])


def test_keep_cells_refuses_bad_arguments():
    with pytest.raises(ValueError, match="alpha and fallback_top_k"):
        fm.keep_cells(np.ones(3), np.ones(3), alpha=1.5, fallback_top_k=0.3)
    with pytest.raises(ValueError, match="positive parts"):
        fm.keep_cells(-np.ones(3), np.ones(3), alpha=0.5, fallback_top_k=0.3)


def test_random_control_hides_as_many_cells_per_subject():
    keep = np.ones((3, 20), bool)
    keep[0, :5] = keep[1, 10:12] = False
    out = fm.random_like(keep, np.random.default_rng(0))
    np.testing.assert_array_equal((~out).sum(axis=1), [5, 2, 0])
    assert not np.array_equal(out, keep)


def test_subjects_paint_only_the_background_and_leave_other_data_unchanged():
    kwargs = dict(num_train=16, num_test=8, frames=4, clip_frames=4, size=16, seed=3)
    plain, _ = synthetic.make_splits(**kwargs)
    with_subjects, _ = synthetic.make_splits(**kwargs, num_subjects=4)
    aux, _ = synthetic.make_splits(**{**kwargs, "seed": 4}, num_subjects=4)
    assert plain.subjects is None and "subject" not in plain.get_batch(np.arange(2))
    np.testing.assert_array_equal(plain.masks, with_subjects.masks)
    np.testing.assert_array_equal(plain.labels, with_subjects.labels)
    changed = np.any(plain.frames != with_subjects.frames, axis=-1)
    assert changed.any() and not np.any(changed & (with_subjects.masks == 1))
    np.testing.assert_array_equal(np.bincount(with_subjects.subjects), [4, 4, 4, 4])
    # A subject's emblem is the same in every split, inside its cells (emblem_cells).
    cells = fm.emblem_cells(4, size=16, grid=(2, 4, 4), tokens=Tokenizer((2, 4, 4)))
    patches, corners = synthetic.subject_emblems(4, size=16)
    for split in (with_subjects, aux):
        i = int(np.flatnonzero(split.subjects == 2)[0])
        y, x = corners[2]
        window = split.frames[i, :, y:y + 8, x:x + 8]
        seen = split.masks[i, :, y:y + 8, x:x + 8] == 0
        np.testing.assert_array_equal(window[seen], np.broadcast_to(
            np.round(patches[2] * 255).astype(np.uint8), window.shape)[seen])
        assert cells[2].reshape(2, 4, 4)[:, y // 4, x // 4].all()
    assert cells.sum(axis=1).tolist() == [8] * 4
    with pytest.raises(ValueError, match="num_subjects must be in"):
        synthetic.make_splits(**kwargs, num_subjects=9)


def _tiny_config():
    config = audit_feature_masking.get_config()
    config.input.update(num_train=16, num_test=8, num_aux=8, num_subjects=4)
    config.fit.num_epochs = 2.0
    config.modes = ("nonprivate",)
    config.seeds = (0,)
    config.num_shadows = 6
    config.chunk = 6
    config.num_epochs = 1.0
    config.evaluations.update(dict(shap=0, lime=0))  # the minimum: seconds
    config.versions = ("original", "optimized", "classwise")  # random: its mask is still drawn
    return config


@pytest.mark.slow
@pytest.mark.heavy  # ~1 min of explainer evaluations and compiles (two aux videos per subject)
@pytest.mark.release  # .ci/release: run it when the feature-masking audit or the models change
def test_audit_feature_masking_end_to_end_tiny(tmp_path):
    config = _tiny_config()
    report = runs.run(config, str(tmp_path))
    for name in ("report.md", "report.json", "feature_masking.png"):
        assert os.path.getsize(tmp_path / name) > 0
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["audit"] == "feature_masking" and saved["num_cells"] == 256
    keep = {k: np.array(v) for k, v in report["keep"].items()}
    s = np.array(report["identity_sensitivity"])
    assert keep["original"].all()
    for z, method in enumerate(report["mask_methods"]):
        if method == "milp":  # the constraint holds per subject
            assert keep["optimized"][z] @ s[z] <= (1 - config.alpha) * s[z].sum() + 1e-9
    np.testing.assert_array_equal((~keep["random"]).sum(1), (~keep["optimized"]).sum(1))
    versions = [v["version"] for v in report["versions"]]
    assert versions == list(config.versions)
    assert set(report["explainers"]) == {"shap", "lime"}
    for name, e in report["explainers"].items():  # two explainer seeds each: rank agreement
        assert e["seeds"] == [0, 1], name
        for key in ("identity", "utility", "identity_per_video", "utility_per_video"):
            # 1 (identical rankings) is what one seed run twice would give
            assert -1 <= e[f"seed_agreement_{key}"] < 1, (name, key, e)
    lime = report["explainers"]["lime"]
    lime_row = (f"| lime | 513 | {lime['seconds_per_video']:.2f} | local R² "
                f"{lime['quality_identity']:.2f} / {lime['quality_utility']:.2f} | "
                f"{lime['emblem_share']:.2f} | {lime['rank_agreement_with_shap']:.2f} | "
                f"{lime['seed_agreement_identity']:.2f} | {lime['seed_agreement_utility']:.2f} | "
                f"{lime['seed_agreement_identity_per_video']:.2f} |")
    # class-wise masks: one per action class, applied by label; the constraint holds per class
    classwise = np.array(report["keep_classwise"])
    s_y = np.array(report["identity_sensitivity_by_class"])
    assert classwise.shape == (len(synthetic.CLASS_NAMES), 256)
    for y, method in enumerate(report["mask_methods_classwise"]):
        if method == "milp":
            assert classwise[y] @ s_y[y] <= (1 - config.alpha + 1e-6) * s_y[y].sum()  # HiGHS tol.
    by = {v["version"]: v for v in report["versions"]}
    assert by["classwise"]["masks_by"] == "label" and by["optimized"]["masks_by"] == "subject"
    assert all(0 <= v["identity_accuracy_retrained"] <= 1 for v in report["versions"])
    text = (tmp_path / "report.md").read_text()
    assert lime_row in text
    for version in config.versions:
        assert f"| {version} | nonprivate | ∞ | online |" in text
    assert "model refit on masked data" in text
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for v in report["versions"] for r in v["rows"])


def test_bad_feature_masking_config_is_refused(tmp_path):
    for key, value, match in (("versions", ("optimized",), "must include 'original'"),
                              ("versions", ("original", "blurred"), "must include 'original'"),
                              ("explainers", ("gradcam",), "config.explainers"),
                              ("explain_seeds", (0, 0), "distinct seeds"),
                              ("evaluations", ml_collections.ConfigDict({"shap": 513}),
                               "each explainer of config.explainers")):
        config = _tiny_config()
        config[key] = value
        with pytest.raises(ValueError, match=match):
            runs.run(config, str(tmp_path))
    assert not any(tmp_path.iterdir())
