"""End to end: one real training run per mode through train.py (tiny model, tiny data)."""

import json
import os
import time

import numpy as np
import pytest

import maskdp_jax as mdp
from maskdp_jax import train
from maskdp_jax.configs import default
from maskdp_jax.run import config as run_config
from maskdp_jax.run import datasets as run_datasets
from maskdp_jax.run import evaluation
from maskdp_jax.run import model as run_model

pytestmark = pytest.mark.slow  # every test here trains, audits or compiles a model


def _tiny_config(mode: str):
    config = default.untuned()  # full fine-tuning: the private pass over every weight
    config.mode = mode
    config.model.name = "mvit_test"
    config.model.init_from = ""
    config.input.num_train = 64
    config.input.num_test = 16
    config.batch_size = 16
    config.physical_batch_size = 16
    config.num_epochs = 0.5  # two logical steps
    config.log_every_steps = 1
    config.privacy.delta = 1e-3
    config.privacy.target_epsilon = 8.0
    config.privacy.randomness = "seeded"  # reproducible test runs
    return config


@pytest.mark.parametrize("mode", ["maskdp", "dp", "nonprivate"])
def test_train_and_evaluate_each_mode(mode, tmp_path, capsys, monkeypatch):
    config = _tiny_config(mode)
    # A loader that takes 0.4 s a step: without prefetching (dp here) the step after the first
    # waits for it, with it (the default, 2 steps ahead) the batch is ready when asked for.
    config.input.prefetch = 0 if mode == "dp" else 2
    load = train.load_logical_batch
    monkeypatch.setattr(train, "load_logical_batch",
                        lambda *a, **k: (time.sleep(0.4), load(*a, **k))[1])
    out = train.train_and_evaluate(config, str(tmp_path))
    # The console: full-video accuracy with chance named; maskdp's public view beside it.
    printed = capsys.readouterr().out
    timing = out["timing"]
    assert timing["timed_steps"] == 1, timing
    assert "Training: waiting for data " in printed and " of the 1 step after the first (" \
        in printed, printed
    if mode == "dp":
        assert 0.4 <= timing["data_wait_seconds"] <= timing["timed_seconds"], timing
    else:
        assert 0.0 <= timing["data_wait_seconds"] < 0.4, timing
    with open(tmp_path / "report.md") as f:
        assert "s training, " in (report := f.read()) and "; waiting for data " in report
    assert "% on full videos (chance 12.5 %)" in printed, printed
    assert ("% (diagnostic)" in printed) == (mode == "maskdp"), printed
    with open(os.path.join(tmp_path, "report.json")) as f:
        written = json.load(f)
    assert written == out
    # TensorBoard carries the outcome and the configuration (tests/test_run_metrics.py reads it).
    assert os.path.isdir(tmp_path / "tb" / "hparams") == config.tensorboard
    if mode == "maskdp":  # the same command again: one line, nothing trained or rewritten
        before = {p: os.path.getmtime(tmp_path / p) for p in os.listdir(tmp_path)}
        again = train.train_and_evaluate(config, str(tmp_path))
        printed = capsys.readouterr().out
        assert again == out
        assert "holds a finished maskdp run (2 steps, test top-1" in printed, printed
        assert "give a new --workdir" in printed and "with another config" not in printed
        assert printed.count("\n") == 1, printed
        assert {p: os.path.getmtime(tmp_path / p) for p in os.listdir(tmp_path)} == before
        config.seed += 1
        train.train_and_evaluate(config, str(tmp_path))
        assert "with another config than this one" in capsys.readouterr().out
    assert 0.0 <= written["metrics"]["top1"] <= 1.0
    assert written["timing"]["steps"] == 2
    assert len(written["history"]) == 2
    # maskdp reports accuracy on the test videos' views too (diagnostic); other modes do not.
    assert set(written["view_metrics"]) == ({"public", "two_view"} if mode == "maskdp" else set())
    privacy = written["privacy"]
    assert privacy["mode"] == mode
    # Exact training class counts are not DP: left out in dp mode, where labels are private.
    assert ("train_class_counts" in written) == (mode != "dp")
    if mode == "nonprivate":
        assert privacy["epsilon_pld"] == "inf"
    else:
        # Calibrated to the target: the spent ε is at most the target and close to it.
        assert 0.9 * 8.0 < privacy["epsilon_pld"] <= 8.0 + 1e-6
        # One ε everywhere (issue 19, item 2): the logged ε is the calibrating accountant's
        # (PLD here), the report's headline, not RDP's larger bound.
        assert written["history"][-1]["epsilon"] == pytest.approx(privacy["epsilon_pld"])
        assert privacy["epsilon_rdp"] > privacy["epsilon_pld"] * 1.01
        assert privacy["adjacency"] == "special"
    with open(os.path.join(tmp_path, "report.md")) as f:
        markdown = f.read()
    assert f"{written['metrics']['top1']:.4f}" in markdown
    # Checkpoints (the noise secret in secret mode) live apart from what is published.
    assert "never the `private/` directory" in markdown
    assert os.listdir(tmp_path / "private" / "checkpoints")
    assert "DO_NOT_SHARE.txt" in os.listdir(tmp_path / "private")
    assert not os.path.exists(tmp_path / "checkpoints")
    # The trained model leaves the run outside private/, and reloaded it scores what the report
    # says on the same test videos.
    trained = run_model.load_trained(str(tmp_path / "model"))
    assert trained.info["test_metrics"]["top1"] == written["metrics"]["top1"]
    assert trained.info["privacy"] == written["privacy"]  # strict JSON: ε = ∞ as "inf"
    _, test_ds = run_datasets.get_datasets(config.input, mode=mode, view=config.view)
    logits = evaluation.predict(trained.model.apply_fn, trained.model.params, test_ds,
                                num_clips=config.input.eval_clips,
                                batch_size=config.physical_batch_size)
    again = evaluation.accuracy_metrics(logits, test_ds.labels, test_ds.num_classes)
    assert again["top1"] == written["metrics"]["top1"]
    assert trained.pixel_norm == test_ds.pixel_norm
    assert "(`model/`)" in markdown and "load_trained" in markdown


def test_train_py_gives_the_mechanism_the_private_part_its_config_names():
    """``privacy.private_finetune`` reaches the step: train.py's mechanism carries the mask of
    the named part of the trainable parameters (the step's behaviour under a mask is
    tests/test_maskdp_jax_train_step.py's), the guard's plan and randomness unchanged."""
    import jax

    config = _tiny_config("maskdp")
    built = run_model.build(config.model, num_classes=8, seed=0)
    guard_mechanism = mdp.Mechanism(plan=mdp.PrivacyPlan.calibrate(
        mode="maskdp", num_examples=64, batch_size=16, steps=2, l2_clip_norm=0.1, delta=1e-3,
        noise_multiplier=1.0), randomness=mdp.Randomness(mode="seeded", seed=0))
    assert train.with_private_part(guard_mechanism, built, config).private_mask is None
    config.privacy.private_finetune = "linear"
    mech = train.with_private_part(guard_mechanism, built, config)
    assert (mech.plan, mech.randomness) == (guard_mechanism.plan, guard_mechanism.randomness)
    flat = jax.tree_util.tree_flatten_with_path(mech.private_mask)[0]
    assert {path[0].key for path, trains in flat if trains} == {"head"}
    assert any(not trains for _, trains in flat)  # the rest: the public pass alone
    assert mech.public_weight == 1.0
    config.privacy.public_weight = 0.1  # and the public pass's weight
    assert train.with_private_part(guard_mechanism, built, config).public_weight == 0.1


def test_the_public_weight_is_maskdps_and_positive():
    config = _tiny_config("dp")
    config.privacy.public_weight = 0.5
    with pytest.raises(ValueError, match="privacy.public_weight weighs MaskDP's.*mode 'dp'"):
        run_config.check_config(config)
    config = _tiny_config("maskdp")
    config.privacy.public_weight = -1.0
    with pytest.raises(ValueError, match="privacy.public_weight must be a finite number > 0"):
        run_config.check_config(config)
    config.privacy.public_weight = 0.1
    run_config.check_config(config)


def test_a_private_learning_rate_gives_each_pass_its_optimiser():
    """``optimizer.private_learning_rate`` reaches the step: train.py builds an optimiser per
    pass and a mechanism that hands the parts over apart; without it, one of each. It is
    MaskDP's alone and positive."""
    import jax.numpy as jnp

    from maskdp_jax.core import per_pass

    config = _tiny_config("maskdp")
    built = run_model.build(config.model, num_classes=8, seed=0)
    mechanism = mdp.Mechanism(plan=mdp.PrivacyPlan.calibrate(
        mode="maskdp", num_examples=64, batch_size=16, steps=2, l2_clip_norm=0.1, delta=1e-3,
        noise_multiplier=1.0), randomness=mdp.Randomness(mode="seeded", seed=0))
    tx = train.build_optimizer(config, steps=4, steps_per_epoch=2.0)
    assert not isinstance(tx, per_pass.PerPassTransformation)
    assert not train.with_private_part(mechanism, built, config).per_pass
    config.optimizer.private_learning_rate = 0.01
    run_config.check_config(config)
    tx = train.build_optimizer(config, steps=4, steps_per_epoch=2.0)
    assert isinstance(tx, per_pass.PerPassTransformation)
    assert train.with_private_part(mechanism, built, config).per_pass
    # Each pass at its own rate; the weight decay applied once, by the public pass's optimiser.
    config.optimizer.update(name="sgd", momentum=0.0, warmup_epochs=0.0, weight_decay=0.5,
                            learning_rate=0.1)
    tx = train.build_optimizer(config, steps=4, steps_per_epoch=2.0)
    params, g, zero = jnp.full(3, 2.0), jnp.array([1.0, -1.0, 4.0]), jnp.zeros(3)
    state = tx.init(params)
    private, _ = tx.update(per_pass.PassGradients(public=zero, private=g), state, params)
    decay, _ = tx.update(per_pass.PassGradients(public=zero, private=zero), state, params)
    np.testing.assert_allclose(private - decay, -0.01 * g, rtol=1e-6)  # the private rate
    np.testing.assert_allclose(decay, -0.1 * 0.5 * params, rtol=1e-6)  # decay once, public rate
    config.optimizer.private_learning_rate = 0.0
    with pytest.raises(ValueError, match="optimizer.private_learning_rate must be"):
        run_config.check_config(config)
    config = _tiny_config("dp")
    config.optimizer.private_learning_rate = 0.01
    with pytest.raises(ValueError, match="optimizer.private_learning_rate gives.*mode 'dp'"):
        run_config.check_config(config)


def test_a_private_pass_over_part_of_the_parameters_is_refused_where_it_means_nothing():
    config = _tiny_config("dp")
    config.privacy.private_finetune = "linear"
    with pytest.raises(ValueError, match="privacy.private_finetune.*mode 'dp'"):
        run_config.check_config(config)
    config = _tiny_config("maskdp")
    config.privacy.private_finetune = "head"
    with pytest.raises(ValueError, match="privacy.private_finetune"):
        run_config.check_config(config)
    config.privacy.private_finetune = "linear"
    config.compute.per_example = "ghost"
    with pytest.raises(ValueError, match="compute.per_example='vmap'"):
        run_config.check_config(config)
    import jax

    model = _tiny_config("maskdp").model
    model.finetune = "linear"
    built = run_model.build(model, num_classes=8, seed=0)
    with pytest.raises(ValueError, match="freezes"):
        built.private_mask("norms")
    assert built.private_mask("") is None
    assert all(jax.tree.leaves(built.private_mask("linear")))


def test_plan_privacy_divides_by_expected_batch_and_counts_steps():
    config = _tiny_config("maskdp")
    plan = run_config.privacy_plan(config, num_examples=64)
    assert plan.q == 16 / 64 and plan.steps == 2
    assert plan.noise_multiplier > 0
    config.privacy.noise_multiplier = 1.5
    assert run_config.privacy_plan(config, num_examples=64).noise_multiplier == 1.5
    assert np.isfinite(plan.noise_multiplier)


def test_private_metrics_are_off_by_default_and_labelled_non_dp():
    """Metrics computed from private data are not DP: never logged unless opted in, then named
    ``(non-DP)``; the run report says which kind was logged."""
    from maskdp_jax.configs import hmdb51_maskdp, ntu60_xsub_maskdp, tsh_cs_maskdp, ucf101_maskdp
    from maskdp_jax.reporting import run_report as report

    for module in (default, hmdb51_maskdp, ntu60_xsub_maskdp, tsh_cs_maskdp, ucf101_maskdp):
        assert module.get_config().log_private_metrics is False
    metrics = {"public/loss": 1.0, "private/loss": 2.0, "private/clipped_fraction": 0.5}
    public_rows = {"maskdp": {"public_loss": 1.0}, "dp": {}, "nonprivate": {"loss": 1.0}}
    for mode, expected in public_rows.items():
        config = _tiny_config(mode)
        assert train.public_metrics(metrics, config) == expected
        assert "not private" in report.logged_metrics_note(config.to_dict()) or (
            "nothing computed from private data is logged"
            in report.logged_metrics_note(config.to_dict()))
        config.log_private_metrics = True
        row = train.public_metrics(metrics, config)
        private = {k: v for k, v in row.items() if k not in expected}
        if mode == "nonprivate":  # nothing is private: nothing to label
            assert row == expected
            continue
        assert private == {"private_loss(non-DP)": 2.0, "clipped(non-DP)": 0.5}
        note = report.logged_metrics_note(config.to_dict())
        assert "`(non-DP)`" in note and "**NOT differentially private**" in note
        run = report.RunReport(
            config=config.to_dict(), privacy={}, privacy_markdown="", history=[],
            metrics={"top1": 0.5, "top5": 1.0, "mean_class_accuracy": 0.5, "num_examples": 2,
                     "per_class_accuracy": [0.5], "confusion": [[2]]},
            class_names=["a"], train_class_counts=[2], parameters={"trainable": 1, "total": 1},
            timing={"train_seconds": 1.0, "total_seconds": 1.0, "steps": 1},
        )
        assert f"- logged training metrics: {note}" in run.to_markdown()
        # dp: labels are private, so the class counts are left out of both report files.
        run.train_class_counts = None if mode == "dp" else [2]
        assert ("train_class_counts" in run.to_dict()) == (mode != "dp")
        assert ("| a | 2 | 2 | 0.5000 |" in run.to_markdown()) == (mode != "dp")
        assert (report.COUNTS_HIDDEN in run.to_markdown()) == (mode == "dp")


@pytest.mark.parametrize("classes", [2, 6])
def test_the_report_names_test_videos_per_class_and_top5_only_above_five_classes(classes):
    """With 5 classes or fewer every label is in the top 5, so top-5 (always 1) is left out of
    report.md; the per-class table counts each class's test videos beside its training ones."""
    from maskdp_jax.reporting import run_report as report

    names = [f"c{i}" for i in range(classes)]
    confusion = [[3 if i == j else 0 for j in range(classes)] for i in range(classes)]
    confusion[0][1] = 1
    run = report.RunReport(
        config=_tiny_config("maskdp").to_dict(), privacy={}, privacy_markdown="", history=[],
        metrics={"top1": 0.9, "top5": 1.0, "mean_class_accuracy": 0.9,
                 "num_examples": 3 * classes + 1, "per_class_accuracy": [0.75] + [1.0] * (
                     classes - 1), "confusion": confusion},
        class_names=names, train_class_counts=[5] * classes,
        parameters={"trainable": 1, "total": 1},
        timing={"train_seconds": 1.0, "total_seconds": 1.0, "steps": 1},
        view_metrics={"public": {"top1": 0.5, "top5": 1.0, "mean_class_accuracy": 0.5}})
    md = run.to_markdown()
    assert ("top-5" in md) == (classes > 5)
    assert "| class | train videos | test videos | test accuracy |" in md
    assert "| c0 | 5 | 4 | 0.7500 |" in md and "| c1 | 5 | 3 | 1.0000 |" in md
    assert ("| public view | 0.5000 | 1.0000 |" in md) == (classes > 5)


@pytest.mark.heavy  # two trainings with their compiles: about 90 s on a 2-core CPU
def test_a_banded_run_resumes_with_the_same_noise(tmp_path, monkeypatch):
    """Banded noise keeps past noise in the train state: a run preempted at step 1 (SIGTERM:
    checkpoint, stop) and resumed ends exactly as an uninterrupted one (metrics rows, test
    predictions), and reports its ε by the amplified BandMF bound with its noise kind. The
    runs give each pass its optimiser (``optimizer.private_learning_rate``), so the two
    optimiser states and the banded noise's both come back from the checkpoint."""
    from conftest import train_rows

    outs = []
    for name in ("uninterrupted", "resumed"):
        config = _tiny_config("maskdp")
        config.privacy.noise, config.privacy.bands = "banded", 2
        config.optimizer.private_learning_rate = 0.01
        config.num_epochs, config.tensorboard = 1.0, False  # 4 steps
        rows, out = train_rows(config, str(tmp_path / name), monkeypatch,
                               preempted=name == "resumed")
        outs.append((rows, out["metrics"], out["privacy"]))
    assert len(outs[0][0]) == 4
    assert outs[0][0] == outs[1][0] and outs[0][1] == outs[1][1]
    privacy = outs[1][2]
    assert (privacy["noise"], privacy["bands"]) == ("banded", 2)
    assert 0.9 * 8.0 < privacy["epsilon_pld"] <= 8.0 + 1e-6
    assert "banded matrix factorization with 2 bands" in privacy["statement"]
