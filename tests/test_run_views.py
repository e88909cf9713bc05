"""One-view training (context ablation, Schneider et al. 2024a Table 3): ``config.view`` reaches the
model.

The views are the tokeniser's; here we check that ``run.views`` shows the model only that view in
training *and* evaluation, and that a run trained on the public view never reads a private pixel.
Feature masking (``hide_cells``) hides only the chosen cells, and in ``"private"`` mode leaves the
public view bit-identical.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from maskdp_jax import train
from maskdp_jax.configs import context_ablation, default
from maskdp_jax.core import tokenizer
from maskdp_jax.data import synthetic
from maskdp_jax.run import views

TOKENS = tokenizer.Tokenizer(patch_stride=(2, 4, 4), fill_value=0.0)
POISON = np.float32(1e30)


@pytest.fixture(scope="module")
def split():
    train_split, _ = synthetic.make_splits(num_train=16, num_test=8, frames=12, clip_frames=8,
                                           size=32)
    return train_split


@pytest.mark.parametrize("view", ["public", "private"])
def test_view_dataset_shows_only_that_views_cells(split, view):
    wrapped = views.ViewDataset(split, view=view, tokens=TOKENS)
    idx = np.array([3, 0, 7])
    full = split.get_batch(idx, num_clips=2, seed=5)
    seen = wrapped.get_batch(idx, num_clips=2, seed=5)
    np.testing.assert_array_equal(seen["mask"], full["mask"])
    np.testing.assert_array_equal(seen["label"], full["label"])
    cells = tokenizer._erode(full["mask"] > 0, patch_stride=TOKENS.patch_stride)
    public = np.repeat(np.repeat(np.repeat(cells, 2, -3), 4, -2), 4, -1)[..., None]
    shown = public if view == "public" else ~public
    fill = TOKENS.fill(full["video"].shape[-4:])  # what the views write into hidden cells
    np.testing.assert_array_equal(seen["video"], np.where(shown, full["video"], fill))
    assert 0 < shown.mean() < 1  # both kinds of cell occur, so the check can fail
    assert len(wrapped) == len(split) and wrapped.num_classes == split.num_classes
    assert wrapped.class_names == split.class_names and wrapped.name.endswith(f"[{view} view]")


def test_view_dataset_needs_masks_and_a_view(split):
    class NoMasks:
        name, has_masks = "folder/train", False

    with pytest.raises(ValueError, match="view 'public' needs per-video masks.*'folder/train'"):
        views.ViewDataset(NoMasks(), view="public", tokens=TOKENS)
    with pytest.raises(ValueError, match=r"view must be one of \('public', 'private'\)"):
        views.ViewDataset(split, view="full", tokens=TOKENS)
    assert views.select_view(split, split, view="full", tokens=TOKENS) == (split, split)


def test_context_ablation_rows():
    # Table 3's rows: avatar only, the inpainted background (not the private view), both.
    assert {context_ablation.get_config(r).view for r in context_ablation.ROWS} == {
        "public", "background", "full"}
    for row in context_ablation.ROWS:
        c = context_ablation.get_config(row)
        assert c.mode == "nonprivate" and c.num_epochs == default.get_config().num_epochs
    with pytest.raises(ValueError, match="unknown Table 3 row 'real_world'"):
        context_ablation.get_config("real_world")


@pytest.mark.slow
def test_public_view_run_never_reads_a_private_pixel(tmp_path, monkeypatch):
    """Private pixels are NaN in every clip: the public-view run trains and evaluates on finite
    numbers (a run that fed the full clip to the model would get a NaN loss)."""
    original = synthetic.SyntheticMaskedActions.get_batch

    def poisoned(self, indices, *, num_clips=1, seed=None):
        batch = original(self, indices, num_clips=num_clips, seed=seed)
        batch["video"] = np.where(batch["mask"][..., None] > 0, batch["video"], np.nan)
        return batch

    monkeypatch.setattr(synthetic.SyntheticMaskedActions, "get_batch", poisoned)
    config = default.untuned()
    config.mode, config.view = "nonprivate", "public"
    config.model.name = "mvit_test"
    config.model.init_from = ""
    config.input.num_train, config.input.num_test = 32, 8
    config.batch_size = config.physical_batch_size = 16
    config.num_epochs, config.log_every_steps = 1.0, 1
    config.tensorboard = False
    evaluated = []
    evaluate = train.evaluate

    def spy(config, **kw):
        evaluated.append(kw["test_ds"].name)
        return evaluate(config, **kw)

    monkeypatch.setattr(train, "evaluate", spy)
    probe, _ = synthetic.make_splits(num_train=32, num_test=8, frames=16, clip_frames=8, size=32)
    assert np.isnan(probe.get_batch(np.arange(8), seed=0)["video"]).any()  # the poison is there
    out = train.train_and_evaluate(config, str(tmp_path))
    losses = [h["loss"] for h in out["history"]]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
    with open(os.path.join(tmp_path, "report.json")) as f:
        report = json.load(f)
    assert report["config"]["view"] == "public"
    assert evaluated == ["synthetic/test[public view]"]  # tested on the same view


@pytest.mark.slow
def test_public_only_run_never_reads_a_private_training_pixel(tmp_path, monkeypatch):
    """``mode=public_only``: every private pixel of the training videos is 1e30. The run trains
    on finite losses (one private pixel in any forward pass would overflow the loss), reports
    ε = 0 and is tested, as MaskDP is, on the full test videos and their public view."""
    original = synthetic.SyntheticMaskedActions.get_batch

    def poisoned(self, indices, *, num_clips=1, seed=None, normalize=True):
        if self.name != "synthetic/train":
            return original(self, indices, num_clips=num_clips, seed=seed, normalize=normalize)
        # The model's float input (the step passes a float video through unchanged) with 1e30 in
        # every private pixel: finite, so the loader's check of the pixels passes, and a forward
        # pass that reads one overflows its loss.
        batch = original(self, indices, num_clips=num_clips, seed=seed, normalize=True)
        batch["video"] = np.where(batch["mask"][..., None] > 0, batch["video"], POISON)
        return batch

    monkeypatch.setattr(synthetic.SyntheticMaskedActions, "get_batch", poisoned)
    config = default.get_config()
    config.mode = "public_only"
    config.model.name = "mvit_test"
    config.model.init_from = ""
    config.input.num_train, config.input.num_test = 32, 8
    config.batch_size = config.physical_batch_size = 16
    config.num_epochs, config.log_every_steps = 1.0, 1
    config.tensorboard, config.log_private_metrics = False, True
    out = train.train_and_evaluate(config, str(tmp_path))
    losses = [h["public_loss"] for h in out["history"]]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
    with open(os.path.join(tmp_path, "report.json")) as f:
        report = json.load(f)
    assert report["privacy"]["epsilon_pld"] == report["privacy"]["epsilon_rdp"] == 0.0
    assert report["privacy"]["statement"].startswith("(0, 0)-MaskDP")
    assert set(report["view_metrics"]) == {"public", "two_view"}
    probe, _ = synthetic.make_splits(num_train=32, num_test=8, frames=16, clip_frames=8, size=32)
    assert (probe.get_batch(np.arange(8), seed=0, normalize=False)["video"] == POISON).any()
    # No private pass ran: with the private metrics asked for, none is logged.
    assert not [k for h in out["history"] for k in h if "private" in k], out["history"][0]


def _report(path, keep):
    with open(path, "w") as f:
        json.dump({"audit": "feature_masking", "keep": {"optimized": keep.tolist(),
                                                        "random": keep.tolist()}}, f)
    return str(path)


def test_feature_masked_dataset_hides_each_subjects_cells_and_refuses_bad_input(tmp_path):
    subjects_split, _ = synthetic.make_splits(num_train=16, num_test=8, frames=12, clip_frames=8,
                                              size=32, num_subjects=4)
    keep = np.ones((4, 4 * 8 * 8), bool)
    keep[2, :64] = False  # subject 2 loses its first temporal slice of cells
    path = _report(tmp_path / "report.json", keep)
    masked, _ = views.mask_features(subjects_split, subjects_split, path=path,
                                    version="optimized", views="both", tokens=TOKENS,
                                    clip_shape=(8, 32, 32, 3))
    batch = masked.get_batch(np.arange(16))
    plain = subjects_split.get_batch(np.arange(16))
    two = batch["subject"] == 2
    fill = TOKENS.fill((8, 32, 32, 3))
    assert np.all(batch["video"][two][:, :, :2] == fill[:2])  # frames 0-1 = temporal cell 0
    np.testing.assert_array_equal(batch["video"][two][:, :, 2:], plain["video"][two][:, :, 2:])
    np.testing.assert_array_equal(batch["video"][~two], plain["video"][~two])
    assert masked.name == "synthetic/train[feature-masked, both]"
    split_without, _ = synthetic.make_splits(num_train=16, num_test=8, frames=12, clip_frames=8,
                                             size=32)
    with pytest.raises(ValueError, match="has no subjects"):
        views.mask_features(split_without, split_without, path=path, version="optimized",
                            views="both", tokens=TOKENS, clip_shape=(8, 32, 32, 3))
    with pytest.raises(ValueError, match="cells per subject"):
        views.mask_features(subjects_split, subjects_split, path=path, version="optimized",
                            views="both", tokens=TOKENS, clip_shape=(8, 16, 16, 3))
    with pytest.raises(ValueError, match="subjects up to 3, the feature masks only 2"):
        views.mask_features(subjects_split, subjects_split,
                            path=_report(tmp_path / "two.json", keep[:2]), version="optimized",
                            views="both", tokens=TOKENS, clip_shape=(8, 32, 32, 3))
    with pytest.raises(ValueError, match="feature_mask_version must be one of"):
        views.load_feature_masks(path, version="best")
    with pytest.raises(FileNotFoundError, match="configs/audit_feature_masking.py"):
        views.load_feature_masks(str(tmp_path / "missing.json"))
    (tmp_path / "other.json").write_text(json.dumps({"audit": "lira"}))
    with pytest.raises(ValueError, match="not a feature-masking audit report"):
        views.load_feature_masks(str(tmp_path / "other.json"))


@pytest.mark.slow
def test_feature_masked_maskdp_run_never_reads_a_hidden_pixel(tmp_path, monkeypatch):
    """The hidden cells' private pixels are NaN in every clip: a maskdp run with the feature masks
    trains on finite numbers (without the masks train.py refuses the NaN pixels, and a step
    that read them would make the private sum, the parameters and step 2's loss NaN)."""
    config = default.get_config()
    config.mode = "maskdp"
    config.model.name = "mvit_test"
    config.model.init_from = ""
    config.input.num_train, config.input.num_test, config.input.num_subjects = 32, 8, 4
    config.batch_size = config.physical_batch_size = 16
    config.num_epochs, config.log_every_steps = 1.0, 1
    config.privacy.target_epsilon = 8.0
    config.tensorboard = False
    keep = np.ones((4, 4 * 8 * 8), bool)
    keep[:, ::3] = False  # every third cell, every subject
    config.feature_masks = _report(tmp_path / "masks.json", keep)
    hidden_pixels = np.repeat(np.repeat(np.repeat(
        (~keep[0]).reshape(4, 8, 8), 2, axis=0), 4, axis=1), 4, axis=2)
    original = synthetic.SyntheticMaskedActions.get_batch

    def poisoned(self, indices, *, num_clips=1, seed=None, normalize=True):
        del normalize  # float32 model input: the step takes it as already normalised
        batch = original(self, indices, num_clips=num_clips, seed=seed)
        private_cells = ~tokenizer.host_public_cells(batch["mask"], patch_stride=(2, 4, 4))
        private = np.repeat(np.repeat(np.repeat(private_cells, 2, axis=-3), 4, axis=-2), 4,
                            axis=-1)
        batch["video"] = np.where((hidden_pixels & private)[..., None], np.nan, batch["video"])
        return batch

    monkeypatch.setattr(synthetic.SyntheticMaskedActions, "get_batch", poisoned)
    probe, _ = synthetic.make_splits(num_train=32, num_test=8, frames=16, clip_frames=8, size=32,
                                     num_subjects=4)
    assert np.isnan(probe.get_batch(np.arange(8), seed=0)["video"]).any()  # the poison is there
    out = train.train_and_evaluate(config, str(tmp_path / "run"))
    # Step 2's public loss is computed with the parameters step 1's private sum updated.
    losses = [h["public_loss"] for h in out["history"]]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
    with open(os.path.join(tmp_path, "run", "report.json")) as f:
        assert json.load(f)["config"]["feature_masks"] == config.feature_masks


HIDE = tokenizer.Tokenizer(patch_stride=(2, 2, 2))  # cells of 2x2x2 pixels


def _clips(rng):
    video = rng.normal(size=(3, 1, 4, 4, 4, 3)).astype(np.float32)
    mask = np.zeros((3, 1, 4, 4, 4), np.uint8)
    mask[:, :, :, :2, :2] = 1  # cell (., 0, 0) public in every frame pair
    mask[:, :, :, 2, 2] = 1  # a public pixel in a private cell: the cell stays private
    return video, mask


def test_hide_private_leaves_public_cells_and_unchosen_cells_alone():
    video, mask = _clips(np.random.default_rng(0))
    hidden = np.zeros((3, 2, 2, 2), bool)
    hidden[:, 0, 0, 0] = True  # a public cell: untouched with views="private"
    hidden[:, 1, 1, 1] = True  # a private (mixed) cell: hidden
    out = views.hide_cells(video, mask, hidden, tokens=HIDE, views="private")
    fill = HIDE.fill(video.shape[-4:])
    np.testing.assert_array_equal(out[:, :, :2, :2, :2], video[:, :, :2, :2, :2])
    assert np.all(out[:, :, 2:, 2:, 2:] == fill[2:, 2:, 2:])
    untouched = np.ones(video.shape[:-1], bool)
    untouched[:, :, 2:, 2:, 2:] = False
    np.testing.assert_array_equal(out[untouched], video[untouched])
    both = views.hide_cells(video, mask, hidden, tokens=HIDE, views="both")
    assert np.all(both[:, :, :2, :2, :2] == fill[:2, :2, :2])
    assert np.all(both[:, :, 2:, 2:, 2:] == fill[2:, 2:, 2:])
    with pytest.raises(ValueError, match="views must be one of"):
        views.hide_cells(video, mask, hidden, tokens=HIDE, views="public")


def test_hide_private_keeps_the_public_view_bit_identical():
    video, mask = _clips(np.random.default_rng(1))
    hidden = np.ones((3, 2, 2, 2), bool)  # every cell chosen
    out = views.hide_cells(video, mask, hidden, tokens=HIDE, views="private")
    views_before = HIDE.views(video, mask)
    views_after = HIDE.views(out, mask)
    np.testing.assert_array_equal(np.asarray(views_after.public), np.asarray(views_before.public))
    assert np.all(np.asarray(views_after.private) == HIDE.fill(video.shape[-4:]))


def test_background_view_is_the_room_without_the_avatar():
    """view=background (Table 3's "Background Only", Schneider et al. 2024b's "Inpainted
    Background"): the embedded splits show the room the avatar hides, pixel for pixel the anonymised
    video wherever the avatar is not, with no trace of the avatar; labels and masks unchanged;
    select_view leaves them as loaded. A folder dataset without input.background_dir is refused."""
    from maskdp_jax.run import datasets as run_datasets

    config = default.get_config()
    config.input.num_train, config.input.num_test = 16, 8
    full, _ = run_datasets.get_datasets(config.input, view="full")
    room, room_test = run_datasets.get_datasets(config.input, view="background")
    outside = full.masks == 0
    assert np.array_equal(room.frames[outside], full.frames[outside])
    assert np.mean(room.frames[~outside] != full.frames[~outside]) > 0.9  # the avatar is gone
    assert np.array_equal(room.labels, full.labels) and np.array_equal(room.masks, full.masks)
    # The room behind the avatar continues the background: its stripes, not a uniform hole.
    frame = room.frames[0, 0].astype(float)
    hidden = full.masks[0, 0] > 0
    assert frame[hidden].std() > 10
    assert views.select_view(room, room_test, view="background", tokens=None) == (room, room_test)
    folder = default.get_config()
    folder.input = default.video_input(dataset="folder")
    folder.input.data_dir = "/nonexistent"
    with pytest.raises(ValueError, match="set --config.input.background_dir"):
        run_datasets.get_datasets(folder.input, view="background")


def test_public_fill_draws_backgrounds_from_the_public_seed_alone(split):
    bank = synthetic.public_rooms(frames=12, size=32)
    filled = views.PublicFill(split, bank=bank)
    a = filled.get_batch(np.array([3, 0, 7]), num_clips=2, seed=[5, 1], normalize=False)
    assert a["fill"].shape == a["video"].shape and a["fill"].dtype == np.uint8
    # Which background a row gets depends on the seed, not on the video in the row.
    b = filled.get_batch(np.array([1, 2, 4]), num_clips=2, seed=[5, 1], normalize=False)
    np.testing.assert_array_equal(a["fill"], b["fill"])
    c = filled.get_batch(np.array([3, 0, 7]), num_clips=2, seed=[6, 1], normalize=False)
    assert not np.array_equal(a["fill"], c["fill"])
    # Every fill clip is a clip of a public room.
    rows = a["fill"].reshape(-1, *a["fill"].shape[2:])
    assert all(any(np.array_equal(clip, room[s:s + 8]) for room in bank for s in range(5))
               for clip in rows[:2])
    np.testing.assert_array_equal(a["video"], split.get_batch(
        np.array([3, 0, 7]), num_clips=2, seed=[5, 1], normalize=False)["video"])
    # Evaluation views: a fixed background per video.
    e1 = filled.get_batch(np.array([3, 0]), seed=None)["fill"]
    e2 = filled.get_batch(np.array([0, 3]), seed=None)["fill"]
    np.testing.assert_array_equal(e1[::-1], e2)
    with pytest.raises(ValueError, match="do not fit clips"):
        views.PublicFill(split, bank=bank[:, :, :16, :16]).get_batch(np.array([0]), seed=1)
    with pytest.raises(ValueError, match="must be uint8"):
        views.PublicFill(split, bank=bank.astype(np.float32))


def test_the_constant_fill_is_the_flat_fill_value_and_the_others_keep_the_texture(split):
    assert views.fill_texture("constant") == 0.0
    assert views.fill_texture("texture") == views.fill_texture("backgrounds") == 1.0
    flat = tokenizer.Tokenizer(patch_stride=(2, 4, 4), fill_texture=views.fill_texture("constant"))
    assert set(np.unique(flat.fill((8, 32, 32, 3)))) == {0.0}
    assert views.public_fill(split, fill="constant", input_config=None) is split
    with pytest.raises(ValueError, match="hidden_fill must be one of"):
        views.fill_texture("grey")
