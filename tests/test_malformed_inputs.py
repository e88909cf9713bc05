"""The catalogue of malformed inputs (issue 6): every one gets a clear error, before any compile.

One table per kind of input (config, masks, labels, privacy numbers, videos, checkpoints and the
privacy ledger). Each row names the input, the call that must refuse it, the exception type and a
fragment of the message: the key or file at fault and what to do about it. Every row fails if its
check is removed (the call would return, or fail later with another error).

The rows that go through ``train.train_and_evaluate`` run with ``train.build_model`` replaced by
a function that fails the test: their input must be refused before the model is built (no
compile), and what is already in the workdir must be left as it was ("bad input loses nothing").
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import NamedTuple

import jax
import ml_collections
import numpy as np
import pytest

import accounting
import data
import train
from configs import default
from data import decode, labels, layouts, preprocess, testing
from maskdp_jax import randomness, tokenizer
from maskdp_jax.plan import PrivacyPlan
from run import checkpoint, guard, identity, journal
from run import config as run_config


class Case(NamedTuple):
    id: str
    call: Callable[..., object]  # call(tmp_path)
    error: type[Exception]
    match: str  # regular expression searched in the message


def table(*cases: Case):
    return pytest.mark.parametrize("case", cases, ids=[c.id for c in cases])


def assert_refused(case: Case, tmp_path) -> None:
    with pytest.raises(case.error, match=case.match):
        case.call(tmp_path)


def _set(config: ml_collections.ConfigDict, overrides: dict) -> ml_collections.ConfigDict:
    for key, value in overrides.items():
        *path, last = key.split(".")
        node = config
        for name in path:
            node = node[name]
        node[last] = value
    return config


# ---------------------------------------------------------------------------------------------
# Configs: maskdp_jax.run_config.check_config, the first thing train_and_evaluate does
# ---------------------------------------------------------------------------------------------
def config_case(id: str, overrides: dict, match: str, *, num_devices: int = 1) -> Case:
    def call(_):
        run_config.check_config(_set(default.get_config(), overrides), num_devices=num_devices)

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
    config_case("microbatch-not-dividing", {"privacy.microbatch_size": 3},
                r"--config\.privacy\.microbatch_size must divide the physical batch of each "
                r"device \(80 = physical_batch_size 80 / 1 device"),
    config_case("microbatch-not-dividing-per-device", {"privacy.microbatch_size": 20},
                r"microbatch_size must divide the physical batch of each device \(10 = "
                r"physical_batch_size 80 / 8 device", num_devices=8),
    config_case("microbatch-negative", {"privacy.microbatch_size": -8},
                r"--config\.privacy\.microbatch_size must be an integer >= 0"),
    config_case("log-every-zero", {"log_every_steps": 0},
                r"--config\.log_every_steps must be an integer >= 1"),
    config_case("keep-zero-checkpoints", {"checkpoint.keep": 0},
                r"--config\.checkpoint\.keep must be an integer >= 1"),
    config_case("seed-negative", {"seed": -1}, r"--config\.seed must be an integer >= 0"),
    config_case("unknown-randomness", {"privacy.randomness": "public"},
                r"--config\.privacy\.randomness must be one of \('secret', 'seeded'\)"),
    config_case("clips-per-video-zero", {"input.clips_per_video": 0},
                r"--config\.input\.clips_per_video must be an integer >= 1"),
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
                r"--config\.privacy\.noise_multiplier must be finite: >= 0 to set sigma, < 0 to "
                r"calibrate"),
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
    from configs import (
        hmdb51_maskdp,
        ntu60_xsub_maskdp,
        sweep_synthetic,
        tsh_cs_maskdp,
        ucf101_maskdp,
    )

    configs = [m.get_config() for m in (default, hmdb51_maskdp, ntu60_xsub_maskdp, tsh_cs_maskdp,
                                         ucf101_maskdp)] + [sweep_synthetic.get_config().base]
    for config in configs:
        for mode in ("maskdp", "dp", "nonprivate"):
            config.mode = mode
            run_config.check_config(config)
    config = _set(default.get_config(), {"privacy.microbatch_size": 10})
    run_config.check_config(config, num_devices=8)  # 80 / 8 = 10 per device


def test_rdp_with_replace_is_fine_when_sigma_is_given():
    """The accountant setting is only used to calibrate; with σ given, replace runs (PLD)."""
    run_config.check_config(_set(default.get_config(), {
        "privacy.accountant": "rdp", "privacy.adjacency": "replace",
        "privacy.noise_multiplier": 1.0}))


# ---------------------------------------------------------------------------------------------
# Entry point: train.train_and_evaluate refuses bad input before the model is built
# ---------------------------------------------------------------------------------------------
N_TRAIN, BATCH, STEPS = 32, 8, 6
Q = BATCH / N_TRAIN


def tiny_config(overrides: dict | None = None) -> ml_collections.ConfigDict:
    config = _set(default.get_config(), {
        "model.name": "mvit_test", "input.num_train": N_TRAIN, "input.num_test": 8,
        "batch_size": BATCH, "physical_batch_size": BATCH,
        "num_epochs": STEPS * BATCH / N_TRAIN, "privacy.delta": 1e-3,
        "privacy.noise_multiplier": 1.0, "tensorboard": False,
    })
    return _set(config, overrides or {})


@pytest.fixture
def no_model(monkeypatch):
    def build_model(*args, **kwargs):
        raise AssertionError("the bad input was not refused before the model was built")

    monkeypatch.setattr(train, "build_model", build_model)


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
    train_case("unreachable-epsilon", {"privacy.noise_multiplier": -1.0,
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


# ---------------------------------------------------------------------------------------------
# Masks (public information, but they decide what is protected)
# ---------------------------------------------------------------------------------------------
VIDEO_SHAPE = (4, 8, 8, 3)


def mask_case(id: str, mask, match: str, error: type[Exception] = ValueError) -> Case:
    return Case(f"mask-{id}", lambda _: decode.binarize_mask(
        np.asarray(mask), video_shape=VIDEO_SHAPE, path="clip.npz"), error, match)


def file_mask_case(id: str, mask, match: str) -> Case:
    def call(tmp_path):
        path = str(tmp_path / "m.npy")
        np.save(path, np.asarray(mask))
        return decode.load_mask(path)

    return Case(f"mask-file-{id}", call, decode.BadVideoError, match)


@table(
    mask_case("rank-2", np.ones((8, 8)),
              r"clip\.npz: mask must be \[T, H, W\]; got shape \(8, 8\)"),
    mask_case("shape-not-video", np.ones((4, 8, 6)),
              r"mask shape \(4, 8, 6\) does not match the video's \[T, H, W\] \(4, 8, 8\)"),
    mask_case("fewer-frames", np.ones((3, 8, 8)), r"does not match the video's \[T, H, W\]"),
    mask_case("non-binary", np.arange(4 * 64).reshape(4, 8, 8) % 3,
              r"mask values must be binary, \{0, 1\} or \{0, 255\} \(1/255 = public\); "
              r"found \[0, 1, 2\]"),
    mask_case("lossy-255", np.full((4, 8, 8), 254), r"must be binary.*found \[254\]"),
    mask_case("float-nan", np.full((4, 8, 8), np.nan), r"must be binary.*found \[nan\]"),
    Case("mask-not-divisible-by-patch", lambda _: tokenizer.public_cells(
        np.ones((3, 8, 8)), patch_stride=(2, 4, 4)), ValueError,
         r"mask T=3 is not divisible by the patch stride 2 .*resize or crop clips to a multiple"),
    file_mask_case("float-dtype", np.ones((4, 8, 8), np.float32),
                   r"m\.npy: mask dtype must be uint8 or bool; got float32"),
    file_mask_case("rank-4", np.ones((4, 8, 8, 3), np.uint8),
                   r"m\.npy: mask .*must be \[T, H, W\]"),
    file_mask_case("non-binary", np.full((4, 8, 8), 7, np.uint8), r"m\.npy: .*\{0, 1\}"),
)
def test_bad_mask(case, tmp_path):
    assert_refused(case, tmp_path)


@pytest.mark.parametrize("value,match", [
    (1, r"1/2 videos have no private token cell.*nothing protected \(their content is treated "
        r"as public\)"),
    (0, r"1/2 videos have no public token cell.*MaskDP is ordinary DP-SGD on the whole video"),
], ids=["all-public-mask", "all-private-mask"])
def test_degenerate_mask_warns_what_dp_then_means(value, match):
    masks = np.zeros((2, 4, 8, 8), np.uint8)
    masks[1, :, :4, :4] = 1  # a normal video: one public cell, the rest private
    masks[0] = value
    with pytest.warns(UserWarning, match=match):
        counts = tokenizer.warn_degenerate_masks(masks, patch_stride=(2, 4, 4), source="ds")
    assert counts == ((1, 0) if value else (0, 1))


def test_maskdp_without_masks_is_refused(tmp_path, no_model):
    """A video dataset without mask files trains dp / nonprivate; maskdp refuses it."""
    video_dir = tmp_path / "videos" / "a"
    video_dir.mkdir(parents=True)
    frames, _ = testing.square_video(num_frames=8, height=32, width=32)
    testing.write_video(str(video_dir / "v.avi"), frames)
    (tmp_path / "train.txt").write_text("a/v.avi\n")
    (tmp_path / "test.txt").write_text("a/v.avi\n")
    config = tiny_config()
    config.input = _folder_input(tmp_path)
    with pytest.raises(ValueError, match=r"mode 'maskdp' needs per-video masks.*--config\.mode="
                                         r"dp / nonprivate"):
        train.train_and_evaluate(config, str(tmp_path / "run"))


def _folder_input(root) -> ml_collections.ConfigDict:
    from configs import video_paper

    c = video_paper.paper_config(dataset="folder", num_epochs=1.0, delta=1e-3).input
    c.data_dir, c.split_dir = str(root / "videos"), str(root)
    c.clip_frames, c.stride, c.resize_size, c.crop_size, c.num_workers = 8, 1, 32, 32, 1
    return c


# ---------------------------------------------------------------------------------------------
# Labels (public under masked adjacency, but they must be class indices)
# ---------------------------------------------------------------------------------------------
def label_case(id: str, values, error: type[Exception], match: str, **kw) -> Case:
    return Case(f"labels-{id}", lambda _: labels.check_labels(
        np.asarray(values), num_classes=3, source="train", **kw), error, match)


def _empty_class_folder(tmp_path):
    (tmp_path / "v" / "a").mkdir(parents=True)
    (tmp_path / "v" / "b").mkdir()
    (tmp_path / "v" / "a" / "x.avi").write_bytes(b"")
    return layouts.folder(video_dir=str(tmp_path / "v"), split_dir="", subset="train")


def _empty_class_in_split(tmp_path):
    for c in ("a", "b"):
        (tmp_path / "v" / c).mkdir(parents=True)
        (tmp_path / "v" / c / "x.avi").write_bytes(b"")
    (tmp_path / "train.txt").write_text("a/x.avi\n")
    return layouts.folder(video_dir=str(tmp_path / "v"), split_dir=str(tmp_path), subset="train")


@table(
    label_case("out-of-range", [0, 1, 3], ValueError,
               r"train: labels must be class indices in \[0, 3\); found 1 outside \(e\.g\. 3\)\. "
               r"Check the class index"),
    label_case("negative", [0, -1, 2], ValueError, r"class indices in \[0, 3\).*e\.g\. -1"),
    label_case("float", [0.0, 1.0, 2.0], TypeError,
               r"labels must be integer class indices; got dtype float64\. Map .* to int32"),
    label_case("bool", [True, False], TypeError, r"integer class indices; got dtype bool"),
    label_case("length-mismatch", [0, 1, 2], ValueError,
               r"train: 3 labels for 5 videos; every video needs exactly one label",
               num_examples=5),
    label_case("two-dimensional", [[0, 1], [1, 2]], ValueError,
               r"labels must be a 1-D array \[N\]"),
    Case("labels-empty-class-folder", _empty_class_folder, layouts.LayoutError,
         r"v/b: class folder has no video"),
    Case("labels-empty-class-in-split", _empty_class_in_split, layouts.LayoutError,
         r"train\.txt: 1 class\(es\) have no video: \['b'\]\. Remove them from the class index "
         r"or add videos"),
)
def test_bad_labels(case, tmp_path):
    assert_refused(case, tmp_path)


def test_get_datasets_checks_labels(monkeypatch):
    """get_datasets runs the label check on both splits of any source."""
    original = data.synthetic.make_splits

    def make_splits(**kw):
        train_split, test_split = original(**kw)
        test_split.labels = test_split.labels.astype(np.float32)
        return train_split, test_split

    monkeypatch.setattr(data.synthetic, "make_splits", make_splits)
    with pytest.raises(TypeError, match=r"synthetic/test: labels must be integer class indices"):
        data.get_datasets(tiny_config().input)


# ---------------------------------------------------------------------------------------------
# Privacy numbers: δ, ε, q, σ, steps, accountant (accounting.inputs, via the public API)
# ---------------------------------------------------------------------------------------------
EPS = dict(q=0.01, noise_multiplier=1.0, steps=100, delta=1e-5, method="rdp")
CAL = dict(target_epsilon=1.0, q=0.01, steps=100, delta=1e-5, method="rdp")


def eps_case(id: str, error, match: str, **kw) -> Case:
    return Case(f"epsilon-{id}", lambda _: accounting.epsilon(**{**EPS, **kw}), error, match)


def cal_case(id: str, error, match: str, **kw) -> Case:
    return Case(f"calibrate-{id}", lambda _: accounting.calibrate_noise_multiplier(
        **{**CAL, **kw}), error, match)


@table(
    Case("delta-zero", lambda _: accounting.check_delta(delta=0.0, num_examples=100), ValueError,
         r"delta must satisfy 0 < delta < 1, got 0\.0"),
    Case("delta-negative", lambda _: accounting.check_delta(delta=-1e-5, num_examples=100),
         ValueError, r"0 < delta < 1"),
    Case("delta-not-below-1/N", lambda _: accounting.check_delta(delta=1e-3, num_examples=1000),
         ValueError, r"delta=0\.001 is >= 1/N = 0\.001 \(N=1000\); such a delta allows publishing "
         r"a whole video in the clear\. Use delta << 1/N"),
    Case("delta-nan", lambda _: accounting.check_delta(delta=math.nan, num_examples=100),
         ValueError, r"delta must be finite"),
    cal_case("epsilon-zero", ValueError, r"target_epsilon must be > 0, got 0\.0",
             target_epsilon=0.0),
    cal_case("epsilon-negative", ValueError, r"target_epsilon must be > 0", target_epsilon=-1.0),
    cal_case("epsilon-nan", ValueError, r"target_epsilon must be finite", target_epsilon=math.nan),
    cal_case("epsilon-unreachable", ValueError,
             r"target_epsilon=0\.0001 is unreachable: even noise_multiplier=10000 gives "
             r"epsilon=.* > target\. Raise target_epsilon, or plan fewer steps",
             target_epsilon=1e-4, q=0.25, steps=6),
    cal_case("epsilon-needs-no-noise", ValueError,
             r"target_epsilon=1e\+06 is so large .* nearly non-private run\. Lower "
             r"target_epsilon, or set the noise multiplier", target_epsilon=1e6),
    eps_case("q-zero", ValueError, r"q \(sampling rate B/N\) must be > 0, got 0\.0", q=0.0),
    eps_case("q-negative", ValueError, r"q \(sampling rate B/N\) must be > 0", q=-0.1),
    eps_case("q-above-one", ValueError,
             r"q \(sampling rate B/N\) must be < 1, got 1\.5: .*check batch size and dataset size",
             q=1.5),
    eps_case("q-one", ValueError, r"must be < 1, got 1\.0: the expected batch size is at least "
             r"the dataset size", q=1.0),
    eps_case("q-nan", ValueError, r"q \(sampling rate B/N\) must be finite", q=math.nan),
    eps_case("q-string", TypeError, r"q \(sampling rate B/N\) must be a real number", q="0.1"),
    eps_case("sigma-negative", ValueError, r"noise_multiplier must be >= 0, got -1\.0",
             noise_multiplier=-1.0),
    eps_case("sigma-nan", ValueError, r"noise_multiplier must be finite",
             noise_multiplier=math.nan),
    eps_case("steps-negative", ValueError, r"steps must be >= 0, got -1", steps=-1),
    eps_case("steps-float", TypeError, r"steps must be an integer, got 2\.5", steps=2.5),
    cal_case("steps-zero", ValueError, r"steps must be >= 1, got 0", steps=0),
    eps_case("rdp-with-replace", ValueError,
             r"RDP cannot account Poisson subsampling under the 'replace' adjacency.*Use "
             r"method='pld' \(exact REPLACE_ONE PLD\) or adjacency='special'",
             adjacency="replace"),
    cal_case("rdp-with-replace", ValueError, r"RDP cannot account .*Use method='pld'",
             adjacency="replace"),
    eps_case("unknown-method", ValueError, r"method must be one of \('pld', 'rdp'\)",
             method="moments"),
    eps_case("unknown-adjacency", ValueError, r"adjacency must be one of", adjacency="swap"),
    eps_case("unknown-sampling", ValueError, r"sampling must be one of", sampling="shared"),
    Case("ledger-sigma-negative", lambda _: accounting.Ledger().record(q=0.1, noise_multiplier=-2),
         ValueError, r"noise_multiplier must be >= 0"),
)
def test_bad_privacy_numbers(case, tmp_path):
    assert_refused(case, tmp_path)


# ---------------------------------------------------------------------------------------------
# Videos and datasets on disk
# ---------------------------------------------------------------------------------------------
def _write_folder(root, *, bad: bool) -> ml_collections.ConfigDict:
    frames, _ = testing.square_video(num_frames=8, height=32, width=32)
    (root / "videos" / "a").mkdir(parents=True)
    testing.write_video(str(root / "videos" / "a" / "good.avi"), frames)
    keys = ["a/good.avi"]
    if bad:
        (root / "videos" / "a" / "bad.avi").write_bytes(b"this is not a video" * 10)
        keys.append("a/bad.avi")
    (root / "train.txt").write_text("\n".join(keys) + "\n")
    (root / "test.txt").write_text("a/good.avi\n")
    return _folder_input(root)


def _unreadable_in_dataset(tmp_path):
    return data.get_datasets(_write_folder(tmp_path, bad=True), mode="dp")


def _empty_video_dir(tmp_path):
    (tmp_path / "videos").mkdir()
    return data.get_datasets(_folder_input(tmp_path), mode="dp")


def _missing_video_dir(tmp_path):
    return data.get_datasets(_folder_input(tmp_path), mode="dp")


def _unreadable_file(tmp_path):
    path = tmp_path / "broken.mp4"
    path.write_bytes(b"\x00" * 1000)
    return decode.probe_video(str(path))


@table(
    Case("video-unreadable", _unreadable_file, decode.BadVideoError, r"broken\.mp4: "),
    Case("video-missing", lambda p: decode.probe_video(str(p / "nope.avi")), decode.BadVideoError,
         r"nope\.avi: file not found"),
    Case("video-unreadable-in-dataset", _unreadable_in_dataset, decode.BadVideoError,
         r"a/bad\.avi: .*\[1 bad video\(s\) in folder/train; fix them, or set "
         r"--config\.input\.skip_bad_videos=True"),
    Case("video-wrong-dtype", lambda _: preprocess.k400_transform(
        np.zeros((4, 32, 32, 3), np.int16), resize_size=32, crop_size=32), ValueError,
         r"video must be uint8 \(0\.\.255\) or float in \[0, 1\]; got int16\. Convert"),
    Case("video-wrong-rank", lambda _: preprocess.k400_transform(
        np.zeros((32, 32, 3), np.uint8)), ValueError, r"video must be \[T, H, W, C\]"),
    Case("dataset-empty-directory", _empty_video_dir, layouts.LayoutError,
         r"videos: no class folders"),
    Case("dataset-missing-directory", _missing_video_dir, layouts.LayoutError,
         r"videos: video directory not found"),
    Case("dataset-without-data-dir", lambda _: data.get_datasets(
        _set(_folder_input_blank(), {"data_dir": ""}), mode="dp"), ValueError,
         r"dataset 'folder' needs --config\.input\.data_dir=<video root>"),
)
def test_bad_videos(case, tmp_path):
    assert_refused(case, tmp_path)


def _folder_input_blank():
    from configs import video_paper

    return video_paper.paper_config(dataset="folder", num_epochs=1.0, delta=1e-3).input


# ---------------------------------------------------------------------------------------------
# Checkpoints, the privacy ledger and its journal, the budget
# ---------------------------------------------------------------------------------------------
def write_checkpoint(workdir, config, ledger: accounting.Ledger, *, topology=None) -> None:
    meta = checkpoint_meta(config, ledger.to_dict(), step=ledger.steps, topology=topology)
    ckpt = checkpoint.Checkpointer(str(workdir), keep=2)
    try:
        ckpt.save({"step": np.int32(ledger.steps)}, step=ledger.steps, meta=meta)
    finally:
        ckpt.close()


def for_run(config, restored=None) -> randomness.Randomness:
    """The randomness a run of ``config`` gets (restored from a checkpoint's ``meta``)."""
    return randomness.for_run(mode=config.privacy.randomness, seed=config.seed,
                              restored=(restored or {}).get("randomness"))


def sampler_meta(config) -> dict:
    return guard.sampler_meta(run_config.privacy_plan(config, num_examples=N_TRAIN),
                              seed=config.seed)


def ledger_of(steps: int, sigma: float = 1.0) -> accounting.Ledger:
    ledger = accounting.Ledger()
    ledger.record(q=Q, noise_multiplier=sigma, steps=steps)
    return ledger


def _snapshot(workdir) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(workdir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, workdir)] = f.read()
    return out


def test_resume_with_another_config_names_the_differing_keys(tmp_path, no_model):
    workdir = tmp_path / "run"
    write_checkpoint(workdir, tiny_config(), ledger_of(3))
    before = _snapshot(workdir)
    other = tiny_config({"optimizer.learning_rate": 0.1, "privacy.l2_clip_norm": 1.0,
                         "log_every_steps": 5})  # log_every_steps may change on resume
    with pytest.raises(ValueError, match=r"written with a different config") as info:
        train.train_and_evaluate(other, str(workdir))
    message = str(info.value)
    assert "optimizer.learning_rate: checkpoint 0.003 != now 0.1" in message
    assert "privacy.l2_clip_norm: checkpoint 0.1 != now 1.0" in message
    assert "log_every_steps" not in message
    assert "Use a fresh --workdir, or restore the original config values." in message
    assert _snapshot(workdir) == before  # loses nothing


@pytest.mark.parametrize("ledger,match", [
    ({"version": 7, "segments": []}, r"its privacy ledger is corrupt .*Not a ledger dict of "
                                     r"version 1.*Restore the checkpoint from a backup or start "
                                     r"over in a fresh --workdir"),
    ({"version": 1, "segments": [{"q": 0.25, "sigma": 1.0}]},
     r"its privacy ledger is corrupt .*Bad ledger segment"),
    ({"version": 1, "segments": [{"q": 2.0, "noise_multiplier": 1.0, "steps": 3}]},
     r"its privacy ledger is corrupt .*q \(sampling rate B/N\) must be < 1"),
    (ledger_of(2).to_dict(), r"its ledger counts 2 steps but the checkpoint is at step 3; "
                             r"refusing to resume with an inconsistent privacy ledger"),
], ids=["unknown-version", "segment-keys", "segment-values", "fewer-steps-than-checkpoint"])
def test_resume_with_a_corrupt_checkpoint_ledger_is_refused(ledger, match):
    config = tiny_config()
    meta = checkpoint_meta(config, ledger)
    with pytest.raises(ValueError, match=match):
        validate(meta, config)


def checkpoint_meta(config, ledger: dict, *, step: int = 3, topology=None) -> dict:
    """A checkpoint's meta as it comes back from disk (JSON)."""
    rand = for_run(config)
    meta = {"step": step, "ledger": ledger, "config": config.to_dict(),
            "noise_key": np.asarray(jax.random.key_data(rand.noise_key())).tolist(),
            "sampler": sampler_meta(config),
            "randomness": rand.to_meta(), "topology": topology or identity.current_topology()}
    return json.loads(json.dumps(meta))


def validate(meta: dict, config) -> accounting.Ledger:
    """validate_meta as the privacy guard calls it on resume (randomness restored from ``meta``)."""
    rand = for_run(config, meta)
    return guard.validate_meta(
        meta, config=config.to_dict(), where="ckpt",
        noise_key_data=jax.random.key_data(rand.noise_key()), sampler=sampler_meta(config),
        randomness=rand.to_meta(), topology=identity.current_topology())


@pytest.mark.parametrize("saved,match", [
    ({"process_count": 2}, r"another topology \(process_count 2 then, 1 now\)"),
    ({"device_count": 8}, r"another topology \(device_count 8 then, 1 now\)"),
    ({"platform": "gpu"}, r"another topology \(platform 'gpu' then, 'cpu' now\)"),
    ({"device_kind": "NVIDIA H100"}, r"another topology \(device_kind 'NVIDIA H100' then, "),
    ({"jax_version": "0.4.30"}, r"another topology \(jax_version '0\.4\.30' then, "),
], ids=["processes", "devices", "platform", "device-kind", "jax-version"])
@pytest.mark.parametrize("mode", ["secret", "seeded"])
def test_resume_on_another_topology_is_refused(saved, match, mode):
    """Re-executed steps are bit-identical (counted once) only on the same topology."""
    config = tiny_config({"privacy.randomness": mode})
    meta = checkpoint_meta(config, ledger_of(3).to_dict())
    validate(meta, config)  # the same topology resumes
    meta["topology"] = {**meta["topology"], **saved}
    with pytest.raises(ValueError, match=match + r".*Resume on the same topology, or start a new "
                                                 r"run in a fresh --workdir"):
        validate(meta, config)


def test_resume_of_a_checkpoint_without_topology_is_refused():
    config = tiny_config()
    meta = checkpoint_meta(config, ledger_of(3).to_dict())
    del meta["topology"]
    with pytest.raises(ValueError, match=r"another topology \(process_count '<absent>' then"):
        validate(meta, config)


@pytest.mark.parametrize("saved,now", [(False, True), (True, False)], ids=["on", "off"])
def test_log_private_metrics_cannot_change_on_resume(saved, now, tmp_path, no_model):
    """Non-DP rows once in metrics.jsonl stay there: the report must not say none were logged."""
    workdir = tmp_path / "run"
    write_checkpoint(workdir, tiny_config({"log_private_metrics": saved}), ledger_of(3))
    with pytest.raises(ValueError, match=rf"log_private_metrics: checkpoint {saved} != now {now}"):
        train.train_and_evaluate(tiny_config({"log_private_metrics": now}), str(workdir))


@pytest.mark.parametrize("content,match", [
    ('{"ledger": {"version": 1, "segm', r"privacy-ledger journal is corrupt \(JSONDecodeError"),
    ('{"steps": 3}', r"privacy-ledger journal is corrupt \(KeyError"),
    ('{"ledger": {"version": 1, "segments": [{"q": 0.25, "noise_multiplier": -1.0, "steps": 3}]}'
     ', "privacy": {}}', r"journal is corrupt .*noise_multiplier must be >= 0"),
], ids=["truncated-json", "no-ledger", "negative-sigma"])
def test_corrupt_journal_is_refused(content, match, tmp_path, no_model):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / journal.JOURNAL).write_text(content)
    full = match + r".*training cannot continue here without under-counting: restore the file " \
                   r"from a backup, or start over in a fresh --workdir"
    with pytest.raises(ValueError, match=full):
        train.train_and_evaluate(tiny_config(), str(workdir))
    with pytest.raises(ValueError, match=match):
        journal.read_ledger_journal(str(workdir))
    assert (workdir / journal.JOURNAL).read_text() == content  # loses nothing


def journal_run(config, *, randomness_id: str | None = None, topology=None) -> dict:
    """The run identity train.py writes into the journal for ``config`` (a fresh run)."""
    randomness_id = randomness_id or for_run(config).public_id()
    return identity.run_identity(config.to_dict(), randomness_id=randomness_id,
                                 topology=topology or identity.current_topology())


SEEDED = {"privacy.randomness": "seeded"}


@pytest.mark.parametrize("privacy,sigma,run,match", [
    ({"delta": 1e-5}, 1.0, {}, r"delta: journal 1e-05 != now 0\.001"),
    ({}, 2.0, {}, r"a segment of 4 step\(s\) at q=0\.25, sigma=2 != now q=0\.25, sigma=1"),
    ({}, 1.0, {"seed": 1}, r"config fingerprint: journal [0-9a-f]{64} != now [0-9a-f]{64} "
                           r"\(another config: seed, model"),
    ({}, 1.0, {"optimizer.learning_rate": 0.1}, r"config fingerprint: journal"),
    ({}, 1.0, {"model.name": "mvit_cpu"}, r"config fingerprint: journal"),
    ({}, 1.0, {"id": "secret:sha256:00"}, r"randomness: journal secret:sha256:00 != now "
                                          r"seeded:0 \(the journal's steps used noise and batches"),
    ({}, 1.0, {"topology": {**identity.current_topology(), "process_count": 2}},
     r"topology: journal \{'process_count': 2, 'device_count': 1, .*\} != now \{'process_"),
], ids=["other-delta", "other-sigma", "other-seed", "other-lr", "other-model",
        "other-randomness", "other-topology"])
def test_journal_of_another_run_is_refused(privacy, sigma, run, match, tmp_path, no_model):
    """A workdir whose journal (no checkpoint yet: the run was killed before its first one) was
    written by a run with other settings, randomness or topology."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    meta = {"delta": 1e-3, "adjacency": "special", "sampling": "decoupled", "mode": "maskdp"}
    run = dict(run)
    journal_config = tiny_config({**SEEDED, **{k: v for k, v in run.items()
                                               if k not in ("id", "topology")}})
    journal.write_ledger_journal(
        str(workdir), ledger_of(4, sigma), privacy={**meta, **privacy},
        run=journal_run(journal_config, randomness_id=run.get("id"), topology=run.get("topology")))
    before = _snapshot(workdir)
    with pytest.raises(ValueError, match=r"(?s)holds the privacy ledger of another run.*" + match
                       + r".*Use a fresh --workdir"):
        train.train_and_evaluate(tiny_config(SEEDED), str(workdir))
    assert _snapshot(workdir) == before


def test_journal_of_a_secret_run_without_checkpoint_is_refused(tmp_path, no_model):
    """Secret mode, same config: a rerun would draw a new secret, so the journal's steps cannot
    be re-executed identically (they would have to be counted again): refused."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    config = tiny_config()
    meta = {"delta": 1e-3, "adjacency": "special", "sampling": "decoupled", "mode": "maskdp"}
    journal.write_ledger_journal(str(workdir), ledger_of(4), privacy=meta,
                                    run=journal_run(config))
    with pytest.raises(ValueError, match=r"randomness: journal secret:sha256:[0-9a-f]{32} != now "
                                         r"secret:sha256:[0-9a-f]{32}"):
        train.train_and_evaluate(config, str(workdir))


def test_resume_past_the_planned_steps_is_refused(tmp_path, no_model):
    workdir = tmp_path / "run"
    write_checkpoint(workdir, tiny_config(), ledger_of(STEPS + 1))
    with pytest.raises(RuntimeError, match=rf"Refusing to train past the planned {STEPS} steps "
                                           rf"\({STEPS + 1} done, 0 more requested\)"):
        train.train_and_evaluate(tiny_config(), str(workdir))


def test_resume_past_the_target_epsilon_is_refused(tmp_path, no_model):
    """σ calibrated to ε = 2; the checkpoint's ledger holds 3 steps at σ = 0.5 (e.g. written
    with another accounting library version): the plan would end above the target."""
    config = tiny_config({"privacy.noise_multiplier": -1.0, "privacy.accountant": "rdp",
                          "privacy.target_epsilon": 2.0})
    workdir = tmp_path / "run"
    write_checkpoint(workdir, config, ledger_of(3, sigma=0.5))
    with pytest.raises(RuntimeError, match=r"Refusing to train: the privacy ledger \(3 steps, "
                                           r"ε = .*\) plus the 3 remaining planned steps would "
                                           r"spend ε = .* > target ε = 2 at δ = 0\.001 \(rdp"):
        train.train_and_evaluate(config, str(workdir))


def test_budget_checks_pass_within_the_plan_and_refuse_beyond():
    guard.check_budget(steps_done=STEPS - 1, planned_steps=STEPS)
    guard.check_budget(steps_done=STEPS, planned_steps=STEPS, next_steps=0)  # finished run
    with pytest.raises(RuntimeError, match=r"Refusing to train past the planned 6 steps \(6 done, "
                                           r"1 more requested\).*Start a new run"):
        guard.check_budget(steps_done=STEPS, planned_steps=STEPS)

    plan = PrivacyPlan.calibrate(mode="maskdp", num_examples=N_TRAIN, batch_size=BATCH,
                                 epochs=STEPS * BATCH / N_TRAIN, l2_clip_norm=0.1, delta=1e-3,
                                 accountant="rdp", target_epsilon=2.0)
    sigma = plan.noise_multiplier
    assert (plan.q, plan.steps) == (Q, STEPS)
    for done in (0, 3, STEPS):  # a ledger on the plan: every prefix is within the target
        eps = guard.check_epsilon_budget(
            ledger_of(done, sigma) if done else accounting.Ledger(), plan)
        assert eps <= 2.0
    with pytest.raises(RuntimeError, match=r"would spend ε = .* > target ε = 2"):
        # 3 steps more than planned (the old call: a 3-step ledger plus STEPS remaining steps)
        guard.check_epsilon_budget(ledger_of(3 + STEPS, sigma), plan)
