"""LiRA against a classifier trained on a DP-CDA release (audit/synthetic_release.py), small."""

import numpy as np
import pytest

from maskdp_jax.audit import lira, runs, synthetic_release
from maskdp_jax.configs import audit_dpcda
from maskdp_jax.release import run


def _config():
    config = audit_dpcda.get_config()
    config.audit_lira.num_shadows = 6
    config.audit_lira.epsilons = (float("inf"),)  # no calibration: seconds
    return config


@pytest.mark.slow
def test_shadows_train_on_their_halves_and_score_every_record():
    config = _config()
    train, _ = run.load(config)
    inclusion = lira.balanced_inclusion(np.random.default_rng(0), 6, len(train.labels))
    scores = synthetic_release.shadow_scores(config, train, inclusion, epsilon=float("inf"),
                                             order=4)
    assert scores.shape == (6, len(train.labels)) and np.all(np.isfinite(scores))
    # the classifiers work (mostly positive log-odds of the true label) and differ per shadow.
    assert np.mean(scores > 0) > 0.8
    assert not np.allclose(scores[0], scores[1])


def test_the_audit_command_writes_a_row_per_epsilon(tmp_path):
    report = runs.run(_config(), str(tmp_path))
    assert [r["epsilon"] for r in report["rows"]] == [float("inf")]
    row = report["rows"][0]
    for kind in lira.KINDS:
        for name in (kind, f"{kind}_seed004"):
            attack = row["attacks"][name]
            assert 0.0 <= attack["asr_mean"] <= attack["asr_max"] <= 1.0
            assert 0.0 <= attack["auc"] <= 1.0
            null = attack["null"]["auc"]
            assert null["low"] < null["mean"] < null["high"]
    # offline's null centres on 0.5; online's sits below it with 6 models (its leave-one-out
    # fits use fewer IN than OUT scores on IN pairs and the reverse on OUT pairs)
    assert row["attacks"]["offline"]["null"]["auc"]["low"] < 0.5 < \
        row["attacks"]["offline"]["null"]["auc"]["high"]
    md = (tmp_path / "report.md").read_text()
    assert "| ∞ | offline, Gu & Chen 2024 | per-example σ, mean, 1 |" in md
    assert "| ∞ | online | pooled σ, mean, 1 |" in md and "binomial chance level" in md
    assert "| ∞ | online, Carlini et al. fixed σ | Carlini's total σ, median, 1 |" in md
    assert "| ∞ | 6 attacks × 1 seed = 6 |" in md and "**indicative**" in md  # one query


def test_a_half_below_the_shadow_class_bound_is_refused(tmp_path):
    config = _config()
    config.audit_lira.shadow_min_class_size = 80  # halves keep about 70 of each class
    with pytest.raises(ValueError, match="fewer than min_class_size=80"):
        runs.run(config, str(tmp_path))
    assert not any(tmp_path.iterdir())  # refused before anything was written
