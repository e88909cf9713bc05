"""The paper configs run the papers' recipe (issue 16): optimiser, schedule, C, batch, epochs, δ,
the calibrating accountant, and one rule for the number of steps."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from maskdp_jax import accounting, train
from maskdp_jax.accounting import paper_settings
from maskdp_jax.configs import (
    hmdb51_maskdp,
    ntu60_xsub_maskdp,
    tsh_cs_maskdp,
    ucf101_maskdp,
    ucf101_multiclip,
    video_paper,
)
from maskdp_jax.run import config as run_config

SEED_000 = ("a 0.01 learning rate over 150 epochs. The training includes a 20-epoch warmup and "
            "a 130-epoch cosine decay. Non-private training uses standard SGD")
# module -> (paper setting name, epochs, δ)
PAPER = {
    ucf101_maskdp: ("UCF-101 (split 1)", 300, 1e-5),
    hmdb51_maskdp: ("HMDB-51 (split 1)", 150, 1e-5),
    ntu60_xsub_maskdp: ("NTU RGB+D 60 (CS)", 150, 1e-6),
    tsh_cs_maskdp: ("Toyota Smarthome (CS)", 150, 1e-5),
}


def _setting(name):
    return next(s for s in paper_settings.PAPER_SETTINGS if s.name == name)


@pytest.mark.parametrize("module", [*PAPER, ucf101_multiclip],
                         ids=lambda m: m.__name__.split(".")[-1])
def test_paper_config_runs_the_papers_recipe(module):
    config = module.get_config()
    if module is ucf101_multiclip:  # Luo et al. 2024 on the MaskDP papers' UCF-101 recipe
        _check_multiclip(config)
        return
    name, epochs, delta = PAPER[module]
    o, p = config.optimizer, config.privacy
    assert (o.name, o.learning_rate, o.momentum, o.weight_decay, o.warmup_epochs) == (
        "sgd", 0.01, 0.0, 0.0, 20.0)
    assert (p.l2_clip_norm, config.batch_size, config.num_epochs, p.delta) == (
        1.0, 128, epochs, delta)
    # the papers' accountant (Schneider et al. 2024a App. E, Luo et al. 2024 Sec. 2)
    assert p.accountant == "rdp"
    assert (config.model.name, config.model.finetune, config.model.num_last_blocks) == (
        "mvit_v2_s", "selective", 2)
    assert not config.input.augment
    assert " ".join(video_paper.__doc__.split()).count(SEED_000) == 1
    setting = _setting(name)
    assert (setting.epochs, setting.delta, setting.batch_size) == (epochs, delta, 128)


SEED_003 = (
    "MViT-B/16x4 model pre-trained on the Kinetics-400",
    "we choose to train the normalization layers in addition to the last linear layer",
    "we first average the gradients from all the clips before clipping the gradient",
    "we fix the clipping norm as C = 1",
    "Our work uses the accounting method based on Rényi differential privacy",
    "Selective fine-tune  110K     8       80.86   82.81",
)


def _check_multiclip(config):
    o, p = config.optimizer, config.privacy
    assert (o.name, o.learning_rate, o.momentum, o.weight_decay, o.warmup_epochs) == (
        "sgd", 0.01, 0.0, 0.0, 20.0)
    assert (p.l2_clip_norm, config.batch_size, config.num_epochs, p.delta) == (
        1.0, 128, 300, 1e-5)
    assert (p.accountant, p.target_epsilon, config.mode) == ("rdp", 5.0, "dp")
    assert (config.model.name, config.model.finetune) == ("mvit_v1_b", "norms")
    assert (config.input.clips_per_video, config.input.clip_sampling) == (8, "uniform")
    assert not config.input.augment
    doc = " ".join(ucf101_multiclip.__doc__.split())
    for quote in SEED_003:
        assert " ".join(quote.split()) in doc, quote
    # Its frozen backbone needs the converted Kinetics-400 weights (the docstring's command).
    with pytest.raises(ValueError, match=r"--config\.model\.init_from is empty"):
        run_config.check_config(config)
    config.model.init_from = "/ckpt/mvit_v1_b_k400"
    run_config.check_config(config)


@pytest.mark.parametrize("module", [*PAPER, ucf101_multiclip],
                         ids=lambda m: m.__name__.split(".")[-1])
def test_docstring_states_the_configs_delta_and_epochs(module):
    """The numbers a reader sees in the docstring's summary are the config's."""
    import re

    summary = " ".join(module.__doc__.split("\n\n")[0].split())
    found = re.search(r"δ = ([0-9.e-]+), (\d+) epochs", summary)
    assert found, summary
    config = module.get_config()
    assert float(found[1]) == config.privacy.delta
    assert int(found[2]) == config.num_epochs


def test_paper_optimizer_is_plain_sgd_with_warmup_then_cosine():
    """The built optimiser: plain SGD (update = -lr_t · g, no momentum, no Adam scaling), lr rising
    linearly to 0.01 over 20 epochs, then a cosine decay to 0."""
    config = ucf101_maskdp.get_config()
    steps, per_epoch = 300, 10.0  # 30 epochs of 10 steps: warm-up 200 steps
    tx = train.build_optimizer(config, steps=steps, steps_per_epoch=per_epoch)
    params = {"w": jnp.zeros(3)}
    state = tx.init(params)
    grad = {"w": jnp.array([1.0, -2.0, 0.5])}
    lrs = []
    for _ in range(steps):
        updates, state = tx.update(grad, state, params)
        ratio = np.asarray(-updates["w"] / grad["w"])
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-5)  # same lr for every coordinate
        lrs.append(float(ratio[0]))
    expected = optax.warmup_cosine_decay_schedule(0.0, 0.01, 200, steps, 0.0)
    np.testing.assert_allclose(lrs, [float(expected(t)) for t in range(steps)], atol=1e-9)
    assert max(lrs) == pytest.approx(0.01, rel=1e-6) and int(np.argmax(lrs)) == 200


def test_hmdb51_config_states_the_papers_numbers():
    doc = hmdb51_maskdp.__doc__
    # Schneider et al. 2024a Table 2, the MaskDP row
    assert "8.2   7.8   26.2  39.67  51.5  50.9  60.9" in doc
    assert "do not report" not in doc
    assert "no epoch count" not in paper_settings.__doc__


@pytest.mark.parametrize("module", list(PAPER), ids=lambda m: m.__name__.split(".")[-1])
def test_trainer_cli_and_paper_table_count_the_same_steps(module):
    """One rule (accounting.steps_for_epochs): UCF-101 split 1, 300 epochs is 22,500 steps for
    the trainer, the accounting CLI and the paper table alike (the trainer used to take 22,352)."""
    config = module.get_config()
    setting = _setting(PAPER[module][0])
    config.privacy.noise_multiplier = 1.0  # fixed σ: no calibration needed to count steps
    plan = run_config.privacy_plan(config, num_examples=setting.num_examples)
    assert plan.steps == setting.steps == accounting.steps_for_epochs(
        num_examples=setting.num_examples, batch_size=128, epochs=setting.epochs)
    out = subprocess.run(
        [sys.executable, "-m", "maskdp_jax.accounting", "epsilon", "--num-examples",
         str(setting.num_examples), "--batch-size", "128", "--epochs", str(setting.epochs),
         "--sigma", "1.0", "--delta", str(setting.delta), "--method", "rdp"],
        capture_output=True, text=True, check=True)
    assert f"steps={plan.steps} " in out.stdout
    if module is ucf101_maskdp:
        assert plan.steps == 22500
