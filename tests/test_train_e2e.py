"""End to end: one real training run per mode through train.py (tiny model, tiny data)."""

import json
import os

import numpy as np
import pytest

import train
from configs import default


def _tiny_config(mode: str):
    config = default.get_config()
    config.mode = mode
    config.model.name = "mvit_test"
    config.input.num_train = 64
    config.input.num_test = 16
    config.batch_size = 16
    config.physical_batch_size = 16
    config.num_epochs = 0.5  # two logical steps
    config.log_every_steps = 1
    config.privacy.delta = 1e-3
    config.privacy.target_epsilon = 8.0
    return config


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["maskdp", "dp", "nonprivate"])
def test_train_and_evaluate_each_mode(mode, tmp_path):
    config = _tiny_config(mode)
    out = train.train_and_evaluate(config, str(tmp_path))
    with open(os.path.join(tmp_path, "report.json")) as f:
        written = json.load(f)
    assert written == out
    assert 0.0 <= written["metrics"]["top1"] <= 1.0
    assert written["timing"]["steps"] == 2
    assert len(written["history"]) == 2
    # maskdp reports accuracy on the test videos' views too (diagnostic); other modes do not.
    assert set(written["view_metrics"]) == ({"public", "two_view"} if mode == "maskdp" else set())
    privacy = written["privacy"]
    assert privacy["mode"] == mode
    if mode == "nonprivate":
        assert privacy["epsilon_pld"] == "inf"
    else:
        # Calibrated to the target: the spent ε is at most the target and close to it.
        assert 0.9 * 8.0 < privacy["epsilon_pld"] <= 8.0 + 1e-6
        assert privacy["adjacency"] == "special"
    with open(os.path.join(tmp_path, "report.md")) as f:
        markdown = f.read()
    assert f"{written['metrics']['top1']:.4f}" in markdown


def test_plan_privacy_divides_by_expected_batch_and_counts_steps():
    config = _tiny_config("maskdp")
    plan = train.plan_privacy(config, num_examples=64)
    assert plan["q"] == 16 / 64 and plan["steps"] == 2
    assert plan["noise_multiplier"] > 0
    config.privacy.noise_multiplier = 1.5
    assert train.plan_privacy(config, num_examples=64)["noise_multiplier"] == 1.5
    assert np.isfinite(plan["noise_multiplier"])
