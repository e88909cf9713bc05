"""Malformed masks, labels, videos and datasets on disk (the catalogue of malformed inputs,
issue 6; helpers in tests/malformed.py): ``data`` (and the tokenizer, for masks) refuse them.

The rules of every row are in ``tests/malformed.py``.
"""

from __future__ import annotations

import os
import re

import ml_collections
import numpy as np
import pytest
from malformed import Case, assert_refused, set_keys, table, tiny_config

from maskdp_jax import data, train
from maskdp_jax.core import tokenizer
from maskdp_jax.data import decode, labels, layouts, preprocess, testing
from maskdp_jax.run import datasets as run_datasets

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
    testing.write_video(str(video_dir / "w.avi"), frames)
    (tmp_path / "train.txt").write_text("a/v.avi\n")
    (tmp_path / "test.txt").write_text("a/w.avi\n")
    config = tiny_config()
    config.input = _folder_input(tmp_path)
    config.hidden_fill = "texture"  # public backgrounds are the embedded dataset's only
    with pytest.raises(ValueError, match=r"mode 'maskdp' needs per-video masks.*--config\.mode="
                                         r"dp / nonprivate"):
        train.train_and_evaluate(config, str(tmp_path / "run"))
    # The context ablation's one-view training needs the masks too.
    config.mode, config.view = "nonprivate", "public"
    with pytest.raises(ValueError, match=r"--config\.view='public' needs per-video masks.*full "
                                         r"view"):
        train.train_and_evaluate(config, str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run" / "private")


def _folder_input(root) -> ml_collections.ConfigDict:
    from maskdp_jax.configs import video_paper

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
        run_datasets.get_datasets(tiny_config().input)


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
    testing.write_video(str(root / "videos" / "a" / "held_out.avi"), frames)
    (root / "test.txt").write_text("a/held_out.avi\n")
    return _folder_input(root)


def _unreadable_in_dataset(tmp_path):
    return run_datasets.get_datasets(_write_folder(tmp_path, bad=True), mode="dp")


def _empty_video_dir(tmp_path):
    (tmp_path / "videos").mkdir()
    return run_datasets.get_datasets(_folder_input(tmp_path), mode="dp")


def _missing_video_dir(tmp_path):
    return run_datasets.get_datasets(_folder_input(tmp_path), mode="dp")


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
    Case("dataset-without-data-dir", lambda _: run_datasets.get_datasets(
        set_keys(_folder_input_blank(), {"data_dir": ""}), mode="dp"), ValueError,
         r"dataset 'folder' needs --config\.input\.data_dir=<video root>"),
)
def test_bad_videos(case, tmp_path):
    assert_refused(case, tmp_path)


def _folder_input_blank():
    from maskdp_jax.configs import video_paper

    return video_paper.paper_config(dataset="folder", num_epochs=1.0, delta=1e-3).input


def test_nan_pixels_are_refused_naming_the_video(monkeypatch, tmp_path):
    """Issue 19: a video with NaN pixels (a custom source, a normalisation by std = 0) would make
    the clipped sum NaN; the batch loader refuses it, naming the video, before the step."""
    original = data.synthetic.SyntheticMaskedActions.get_batch

    def with_nan(self, indices, *, num_clips=1, seed=None, normalize=True):
        del normalize  # a custom source returning float clips (normalised by itself)
        batch = original(self, indices, num_clips=num_clips, seed=seed)
        if seed is not None:  # training batches
            batch["video"][np.asarray(indices) == 5, 0, 0, 0, 0, 0] = np.nan
        return batch

    monkeypatch.setattr(data.synthetic.SyntheticMaskedActions, "get_batch", with_nan)
    config = tiny_config({"input.num_train": 16, "batch_size": 16, "physical_batch_size": 16})
    train_ds, _ = run_datasets.get_datasets(config.input)
    batch = train_ds.get_batch(np.arange(16), seed=0)
    batch["weight"] = np.ones(16, np.float32)
    with pytest.raises(ValueError, match=r"synthetic/train: video\(s\) \[5\] hold non-finite "
                                         r"pixel values \(NaN or inf\)"):
        train.check_finite(batch, np.arange(16), name=train_ds.name)
    batch["weight"][5] = 0.0  # a padding row may hold anything
    train.check_finite(batch, np.arange(16), name=train_ds.name)
    # The trainer's batch loader runs the check on every physical batch.
    from maskdp_jax.core import sampling

    logical = sampling.LogicalBatch(public=None, private=np.array([3, 5, 7]))
    with pytest.raises(ValueError, match=r"video\(s\) \[5\] hold non-finite"):
        train.load_logical_batch(train_ds, logical, config=config, step=0)


def test_a_public_region_lost_to_resize_and_cells_is_explained(tmp_path):
    """Issue 19, item 12: a 14-px avatar in 64x64 frames resized to 32 keeps public pixels after
    the conservative resize but no whole 4x4 token cell: the warning says how much was lost
    where, and what to change."""
    video_dir = tmp_path / "videos"
    for c in ("a", "b"):
        for i in range(2):
            frames, mask = testing.square_video(num_frames=8, height=64, width=64, box=14,
                                                top=20, left=20)
            key = f"{c}/{i}.avi"
            testing.write_video(str(video_dir / key), frames)
            os.makedirs(tmp_path / "masks" / c, exist_ok=True)
            np.savez_compressed(tmp_path / "masks" / c / f"{i}.npz", mask=mask)
    (tmp_path / "test.txt").write_text("a/1.avi\nb/1.avi\n")
    c = _folder_input(tmp_path)
    c.mask_dir = str(tmp_path / "masks")
    train_ds, _ = run_datasets.get_datasets(c, mode="maskdp")
    cov = train_ds.mask_coverage(np.arange(2))
    assert (cov[:, 0] > 0.04).all() and (cov[:, 1] > 0).all() and (cov[:, 2] == 2).all()
    why = run_datasets.explain_lost_public_regions(train_ds, patch_stride=(2, 4, 4))
    assert why is not None
    assert re.search(r"Of 2 videos checked, 2 have public pixels in their masks but "
                     r"no public token cell\. Median public area: 4\.\d% of the source frames, "
                     r"\d\.\d% after the conservative resize \(factor 2: the public region "
                     r"shrinks by 4 source px per side\), 0% after the erosion.*Lost at: the "
                     r"erosion to whole 2x4x4 token cells\. To keep them: make the public "
                     r"regions larger \(at least 22 source px across", why), why
    # A large enough avatar keeps its cells: nothing to explain.
    assert run_datasets.explain_lost_public_regions(train_ds, patch_stride=(1, 1, 1)) is None
    # The trainer's check says it in one warning: the count, where it was lost, the fix.
    from maskdp_jax.configs import video_paper

    config = video_paper.paper_config(dataset="folder", num_epochs=1.0, delta=1e-3)
    config.input, config.batch_size, config.model.name = c, 1, "mvit_test"
    with pytest.warns(UserWarning) as record:
        train.load_data(config)
    said = [str(w.message) for w in record if "token cell" in str(w.message)]
    assert len(said) == 1, said
    assert re.search(r"folder/train: 2/2 videos have no public token cell .*ordinary DP-SGD.* "
                     r"Of 2 videos checked, 2 have public pixels .*To keep them", said[0])
