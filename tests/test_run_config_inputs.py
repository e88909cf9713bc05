"""Malformed configs (the catalogue of malformed inputs, issue 6; helpers in tests/malformed.py):
``run.config.check_config``, ``run.config.check_dataset_size`` and the entry point refuse them,
before any compile.

The rules of every row are in ``tests/malformed.py``.
"""

from __future__ import annotations

import math

import pytest
from malformed import Case, assert_refused, set_keys, table, tiny_config

from maskdp_jax import train
from maskdp_jax.configs import default
from maskdp_jax.run import config as run_config


# ---------------------------------------------------------------------------------------------
# Configs: run.config.check_config, the first thing train_and_evaluate does
# ---------------------------------------------------------------------------------------------
def config_case(id: str, overrides: dict, match: str, *, num_devices: int = 1) -> Case:
    def call(_):
        run_config.check_config(set_keys(default.get_config(), overrides), num_devices=num_devices)

    return Case(f"config-{id}", call, ValueError, match)


ONE_OF = r"must be one of \("


@table(
    config_case("unknown-mode", {"mode": "private"}, r"--config\.mode " + ONE_OF),
    config_case("unknown-sampling", {"sampling": "poisson"}, r"--config\.sampling " + ONE_OF),
    config_case("unknown-optimizer", {"optimizer.name": "rmsprop"},
                r"--config\.optimizer\.name " + ONE_OF),
    config_case("unknown-finetune", {"model.finetune": "lora"},
                r"--config\.model\.finetune " + ONE_OF + ".*'selective'"),
    config_case("unknown-model", {"model.name": "resnet50"},
                r"--config\.model\.name " + ONE_OF + ".*'mvit_v2_s'"),
    config_case("unknown-dataset", {"input.dataset": "kinetics"},
                r"--config\.input\.dataset " + ONE_OF),
    config_case("model-for-other-clips", {"input.size": 64},
                r"'mvit_cpu' is built for clips .* \(8, 32, 32\) but the input config gives "
                r"\(8, 64, 64\); change the clip size"),
    config_case("selective-too-many-blocks", {"model.finetune": "selective",
                                              "model.num_last_blocks": 3},
                r"--config\.model\.num_last_blocks must be in \[0, 2\]"),
    config_case("batch-size-zero", {"batch_size": 0},
                r"--config\.batch_size must be an integer >= 1"),
    config_case("batch-size-negative", {"batch_size": -64},
                r"--config\.batch_size must be an integer >= 1"),
    config_case("physical-batch-zero", {"physical_batch_size": 0},
                r"--config\.physical_batch_size must be an integer >= 1"),
    config_case("physical-batch-not-multiple-of-devices", {"physical_batch_size": 80},
                r"--config\.physical_batch_size must be a multiple of the number of devices \(3\)",
                num_devices=3),
    config_case("unknown-hidden-fill", {"hidden_fill": "noise"},
                r"--config\.hidden_fill " + ONE_OF + ".*'backgrounds'"),
    config_case("backgrounds-fill-without-a-public-source",
                {"input": default.video_input(dataset="folder"), "hidden_fill": "backgrounds",
                 "input.clip_frames": 8, "input.crop_size": 32},
                r"--config\.hidden_fill 'backgrounds' draws public backgrounds from the embedded "
                r"dataset's public corpus"),
    config_case("backgrounds-fill-with-a-feature-cache",
                {"hidden_fill": "backgrounds", "feature_cache.enabled": True,
                 "model.finetune": "linear"},
                r"--config\.hidden_fill a cached prefix holds features"),
    config_case("epochs-zero", {"num_epochs": 0.0},
                r"--config\.num_epochs must be a finite number > 0"),
    config_case("epochs-negative", {"num_epochs": -1.0}, r"--config\.num_epochs must be .* > 0"),
    config_case("epochs-nan", {"num_epochs": math.nan}, r"--config\.num_epochs must be a finite"),
    config_case("clip-norm-zero", {"privacy.l2_clip_norm": 0.0},
                r"--config\.privacy\.l2_clip_norm must be a finite number > 0"),
    config_case("clip-norm-negative", {"privacy.l2_clip_norm": -1.0},
                r"--config\.privacy\.l2_clip_norm must be a finite number > 0"),
    config_case("lr-negative", {"optimizer.learning_rate": -0.01},
                r"--config\.optimizer\.learning_rate must be a finite number > 0"),
    config_case("lr-nan", {"optimizer.learning_rate": math.nan},
                r"--config\.optimizer\.learning_rate must be a finite number > 0"),
    config_case("lr-inf", {"optimizer.learning_rate": math.inf},
                r"--config\.optimizer\.learning_rate must be a finite number > 0"),
    config_case("momentum-one", {"optimizer.momentum": 1.0},
                r"--config\.optimizer\.momentum must be in \[0, 1\)"),
    config_case("warmup-negative", {"optimizer.warmup_epochs": -1.0},
                r"--config\.optimizer\.warmup_epochs must be a finite number >= 0"),
    config_case("microbatch-not-dividing", {"compute.microbatch_size": 3},
                r"--config\.compute\.microbatch_size must divide the physical batch of each "
                r"device \(80 = physical_batch_size 80 / 1 device"),
    config_case("microbatch-not-dividing-per-device", {"compute.microbatch_size": 20},
                r"microbatch_size must divide the physical batch of each device \(10 = "
                r"physical_batch_size 80 / 8 device", num_devices=8),
    config_case("microbatch-negative", {"compute.microbatch_size": -8},
                r"--config\.compute\.microbatch_size must be an integer >= 0"),
    config_case("unknown-per-example", {"compute.per_example": "hooks"},
                r"--config\.compute\.per_example must be one of \('auto', 'vmap', 'ghost'\)"),
    config_case("log-every-zero", {"log_every_steps": 0},
                r"--config\.log_every_steps must be an integer >= 1"),
    config_case("keep-zero-checkpoints", {"checkpoint.keep": 0},
                r"--config\.checkpoint\.keep must be an integer >= 1"),
    config_case("seed-negative", {"seed": -1}, r"--config\.seed must be an integer >= 0"),
    config_case("unknown-randomness", {"privacy.randomness": "public"},
                r"--config\.privacy\.randomness must be one of \('secret', 'seeded'\)"),
    config_case("clips-per-video-zero", {"input.clips_per_video": 0},
                r"--config\.input\.clips_per_video must be an integer >= 1"),
    config_case("unknown-view", {"view": "avatar", "mode": "nonprivate"},
                r"--config\.view " + ONE_OF + ".*'public'"),
    config_case("view-in-a-private-mode", {"view": "public"},
                r"--config\.view must be 'full' in mode 'maskdp'; got 'public'\. One-view "
                r"training \(the context ablation, Schneider et al\. 2024a Table 3\) is for mode "
                r"'nonprivate'"),
    config_case("unknown-feature-mask-views", {"feature_masks": "m.json",
                                               "feature_mask_views": "public"},
                r"--config\.feature_mask_views " + ONE_OF + ".*'both'"),
    config_case("feature-masks-with-the-feature-cache", {"feature_masks": "m.json",
                                                        "feature_cache.enabled": True},
                r"--config\.feature_masks cannot be combined with feature_cache\.enabled"),
    config_case("unknown-clip-sampling", {"input.clip_sampling": "random"},
                r"--config\.input\.clip_sampling " + ONE_OF + ".*'consecutive'"),
    config_case("delta-zero", {"privacy.delta": 0.0},
                r"--config\.privacy\.delta must satisfy 0 < delta < 1"),
    config_case("delta-one", {"privacy.delta": 1.0},
                r"--config\.privacy\.delta must satisfy 0 < delta < 1"),
    config_case("delta-nan", {"privacy.delta": math.nan},
                r"--config\.privacy\.delta must satisfy 0 < delta < 1"),
    config_case("epsilon-zero", {"privacy.target_epsilon": 0.0},
                r"--config\.privacy\.target_epsilon must be a finite number > 0"),
    config_case("epsilon-negative", {"privacy.target_epsilon": -1.0},
                r"--config\.privacy\.target_epsilon must be a finite number > 0"),
    config_case("epsilon-nan", {"privacy.target_epsilon": math.nan},
                r"--config\.privacy\.target_epsilon must be a finite number > 0"),
    config_case("sigma-nan", {"privacy.noise_multiplier": math.nan},
                r"--config\.privacy\.noise_multiplier must be a finite σ >= 0, or None to "
                r"calibrate"),
    config_case("sigma-negative", {"privacy.noise_multiplier": -1.0},
                r"--config\.privacy\.noise_multiplier must be a finite σ >= 0, or None"),
    config_case("moved-microbatch", {"privacy.microbatch_size": 4},
                r"privacy\.microbatch_size is now compute\.microbatch_size"),
    config_case("moved-compute-dtype", {"model.compute_dtype": "float32"},
                r"model\.compute_dtype is now compute\.dtype"),
    config_case("unknown-attention", {"compute.attention": "flash"},
                r"--config\.compute\.attention " + ONE_OF),
    config_case("unknown-accountant", {"privacy.accountant": "moments"},
                r"--config\.privacy\.accountant " + ONE_OF),
    config_case("unknown-adjacency", {"privacy.adjacency": "substitute"},
                r"--config\.privacy\.adjacency " + ONE_OF),
    config_case("rdp-with-replace", {"privacy.accountant": "rdp", "privacy.adjacency": "replace"},
                r"--config\.privacy\.accountant cannot calibrate this run: RDP cannot account "
                r"Poisson subsampling under the 'replace' adjacency.*Use method='pld'"),
)
def test_bad_config(case, tmp_path):
    assert_refused(case, tmp_path)


def test_every_shipped_config_passes_the_checks():
    """The checks are not stricter than the configs we ship (all modes)."""
    from maskdp_jax.configs import (
        hmdb51_maskdp,
        ntu60_xsub_maskdp,
        sweep_synthetic,
        tsh_cs_maskdp,
        ucf101_maskdp,
    )

    paper = (hmdb51_maskdp, ntu60_xsub_maskdp, tsh_cs_maskdp, ucf101_maskdp)
    configs = [default.get_config(), sweep_synthetic.get_config().base]
    for module in paper:
        # Their frozen backbones need the converted K400 weights, which their commands pass.
        assert "--config.model.init_from=" in module.__doc__, module.__name__
        config = module.get_config()
        config.model.init_from = "/ckpt/mvit_v2_s_k400"
        configs.append(config)
    for config in configs:
        for mode in ("maskdp", "dp", "nonprivate"):
            config.mode = mode
            run_config.check_config(config)
    config = set_keys(default.get_config(), {"compute.microbatch_size": 10})
    run_config.check_config(config, num_devices=8)  # 80 / 8 = 10 per device


def test_rdp_with_replace_is_fine_when_sigma_is_given():
    """The accountant setting is only used to calibrate; with σ given, replace runs (PLD)."""
    run_config.check_config(set_keys(default.get_config(), {
        "privacy.accountant": "rdp", "privacy.adjacency": "replace",
        "privacy.noise_multiplier": 1.0}))

# ---------------------------------------------------------------------------------------------
# Entry point: train.train_and_evaluate refuses bad input before the model is built
# ---------------------------------------------------------------------------------------------
def train_case(id: str, overrides: dict, error: type[Exception], match: str) -> Case:
    def call(tmp_path):
        train.train_and_evaluate(tiny_config(overrides), str(tmp_path / "run"))

    return Case(f"train-{id}", call, error, match)


@table(
    train_case("unknown-mode", {"mode": "private"}, ValueError, r"--config\.mode must be one of"),
    train_case("batch-larger-than-dataset", {"batch_size": 64, "physical_batch_size": 64},
               ValueError, r"--config\.batch_size=64 must be smaller than the number of training "
               r"videos N=32 .*lower the batch size or use a larger training set"),
    train_case("batch-equal-to-dataset", {"batch_size": 32, "physical_batch_size": 32},
               ValueError, r"--config\.batch_size=32 must be smaller than .* N=32"),
    train_case("delta-not-below-1/N", {"privacy.delta": 0.05}, ValueError,
               r"delta=0\.05 is >= 1/N = 0\.03125 .*Use delta << 1/N"),
    train_case("empty-synthetic-dataset", {"input.num_train": 0}, ValueError,
               r"need at least 8 videos per split \(one per class\); got num_train=0"),
    train_case("unreachable-epsilon", {"privacy.noise_multiplier": None,
                                       "privacy.accountant": "rdp", "privacy.delta": 1e-5,
                                       "privacy.target_epsilon": 1e-6}, ValueError,
               r"target_epsilon=1e-06 is unreachable.*Raise target_epsilon"),
)
def test_train_refuses_before_the_model_is_built(case, tmp_path, no_model):
    assert_refused(case, tmp_path)
    if case.id == "train-unknown-mode":  # refused before anything is written
        assert not (tmp_path / "run").exists()


def test_batch_equal_to_dataset_is_fine_without_privacy():
    run_config.check_dataset_size(tiny_config({"mode": "nonprivate", "batch_size": 32}),
                                  num_examples=32)


def test_the_default_runs_each_mode_at_its_tuned_settings():
    """``configs/default.py:<mode>`` is the person setting in that mode at the settings that won
    its tuning (configs/sweep_tuning.py, ``tuned``); plain ``default.py`` is MaskDP's; the untuned
    base and the other settings keep the earlier default's; a name that is neither is refused."""
    from maskdp_jax.configs import sweep_tuning

    for mode in default.MODES:
        config = default.get_config(mode)
        assert (config.mode, config.input.setting) == (mode, "person")
        flat = {"model.finetune": config.model.finetune,
                "optimizer.learning_rate": config.optimizer.learning_rate,
                "privacy.l2_clip_norm": config.privacy.l2_clip_norm,
                "num_epochs": config.num_epochs}
        for key, value in sweep_tuning.tuned(mode):
            assert flat[key] == value, (mode, key)
        run_config.check_config(config)
    assert default.get_config().to_dict() == default.get_config("maskdp").to_dict()
    ours = default.get_config()  # MaskDP's stage-one and stage-two winners
    assert (ours.model.finetune, ours.optimizer.learning_rate, ours.privacy.l2_clip_norm,
            ours.num_epochs) == ("selective", 3e-3, 0.03, 16.0)
    assert default.get_config("dp").model.finetune != default.untuned().model.finetune
    for setting in ("context", "context_scratch"):
        assert default.get_config(setting).to_dict() == default.untuned(setting).to_dict()
    untuned = default.untuned()
    assert (untuned.model.finetune, untuned.privacy.l2_clip_norm) == ("full", 0.1)
    with pytest.raises(ValueError, match="setting or mode 'private'"):
        default.get_config("private")
