"""The Dataset protocol: every source satisfies it; get_masks / mask_chunks read the centre view."""

import types

import numpy as np
import pytest

from maskdp_jax import data
from maskdp_jax.data import clips, layouts, synthetic, testing, tfds_ucf101
from maskdp_jax.data.video_dataset import VideoDataset, VideoOptions


def _options(**overrides) -> VideoOptions:
    spec = clips.ClipSpec(num_frames=4, stride=2, resize_size=32, crop_size=32)
    return VideoOptions(clip=spec, mean=(0.5,) * 3, std=(0.25,) * 3, num_workers=1, **overrides)


def _assert_raw_pixels_normalise_to_the_batch(ds, indices, **kw):
    """``get_batch(normalize=False)`` is the same batch with uint8 pixels, and the split's
    ``pixel_norm`` turns them into ``get_batch()``'s video bit for bit (training takes the
    first and normalises on the device, evaluation and the audits read the second)."""
    raw, normalised = ds.get_batch(indices, normalize=False, **kw), ds.get_batch(indices, **kw)
    assert raw["video"].dtype == np.uint8 and normalised["video"].dtype == np.float32
    np.testing.assert_array_equal(ds.pixel_norm(raw["video"]), normalised["video"])
    for key in ("mask", "label"):
        np.testing.assert_array_equal(raw[key], normalised[key])
    assert raw["video"].std() > 0  # real pixels, not a constant


def test_synthetic_is_a_dataset_and_get_masks_is_its_centre_view():
    train, _ = synthetic.make_splits(num_train=8, num_test=8, frames=12, clip_frames=4, size=32)
    assert isinstance(train, data.Dataset)
    indices = np.array([5, 0, 3])
    masks = train.get_masks(indices)
    start = (12 - 4) // 2
    np.testing.assert_array_equal(masks, train.masks[indices, start:start + 4])
    assert masks.dtype == np.uint8 and masks.shape == (3, 4, 32, 32)
    np.testing.assert_array_equal(
        masks, train.get_batch(indices, num_clips=1, seed=None)["mask"][:, 0]
    )
    _assert_raw_pixels_normalise_to_the_batch(train, indices, num_clips=2, seed=[0, 1])
    chunks = list(data.mask_chunks(train, chunk=3))
    assert [len(c) for c in chunks] == [3, 3, 2]
    np.testing.assert_array_equal(np.concatenate(chunks), train.get_masks(np.arange(8)))


@pytest.mark.parametrize("recorded, refused", [
    ("source", "un-anonymised source video"),  # the raw video beside the anonymiser's mask
    ("output", None), ("none", None)])          # the anonymiser's own output; a user's json
def test_an_anonymisers_mask_is_refused_beside_its_source_video(tmp_path, recorded, refused):
    """The anonymiser's mask summary records the source video's SHA-256: a split whose video is
    that source (its person would train as the public part) is refused when it is made, naming
    both files; the anonymised output trains."""
    import json
    import os

    from maskdp_jax.data import decode

    paths = testing.make_ucf101_folder(str(tmp_path), train_per_class=1)
    layout = layouts.ucf101(video_dir=paths["video_dir"], split_dir=paths["split_dir"],
                            split=1, subset="train")
    record = layout.records[0]
    digest = decode.file_sha256(record.path)
    sidecar = os.path.splitext(os.path.join(paths["mask_dir"], record.key))[0] + ".json"
    content = {"source": {"sha256": digest if recorded == "source" else "0" * 64,
                          "bytes": os.path.getsize(record.path)}}
    with open(sidecar, "w") as f:
        json.dump(content if recorded != "none" else {"note": "the user's"}, f)
    if refused is None:
        VideoDataset(layout, _options(mask_dir=paths["mask_dir"]), name="ucf101/train").close()
        return
    with pytest.raises(ValueError, match=refused) as caught:
        VideoDataset(layout, _options(mask_dir=paths["mask_dir"]), name="ucf101/train")
    assert record.path in str(caught.value) and "\n" not in str(caught.value)


def test_video_dataset_is_a_dataset_and_get_masks_is_its_centre_view(tmp_path):
    paths = testing.make_ucf101_folder(str(tmp_path), train_per_class=1)
    layout = layouts.ucf101(video_dir=paths["video_dir"], split_dir=paths["split_dir"],
                            split=1, subset="train")
    ds = VideoDataset(layout, _options(mask_dir=paths["mask_dir"]), name="ucf101/train")
    try:
        assert isinstance(ds, data.Dataset) and ds.has_masks
        indices = np.arange(len(ds))
        np.testing.assert_array_equal(
            ds.get_masks(indices), ds.get_batch(indices, num_clips=1, seed=None)["mask"][:, 0]
        )
        _assert_raw_pixels_normalise_to_the_batch(ds, indices, num_clips=2, seed=[0, 3])
        _assert_raw_pixels_normalise_to_the_batch(ds, indices)
    finally:
        ds.close()


def _fake_tfds(num_videos: int = 3) -> types.SimpleNamespace:
    """Just enough of tensorflow_datasets for TfdsUcf101 to be built without TensorFlow."""
    rng = np.random.default_rng(0)
    elements = [{"video": rng.integers(0, 256, (8, 16, 16, 3), np.uint8), "label": i % 2}
                for i in range(num_videos)]
    label = types.SimpleNamespace(names=["a", "b"])
    return types.SimpleNamespace(
        builder=lambda name, data_dir: types.SimpleNamespace(
            info=types.SimpleNamespace(features={"label": label})),
        data_source=lambda name, split, data_dir, decoders=None: elements,
        decode=types.SimpleNamespace(SkipDecoding=lambda: None),
    )


def test_tfds_ucf101_is_a_dataset_without_masks(monkeypatch):
    monkeypatch.setattr(tfds_ucf101, "_tfds", _fake_tfds)
    ds = tfds_ucf101.TfdsUcf101(data_dir="", config_name="ucf101_1_256", split="train",
                                options=_options())
    assert isinstance(ds, data.Dataset)
    assert not ds.has_masks and len(ds) == 3 and ds.num_classes == 2
    with pytest.raises(ValueError, match="has no masks"):
        ds.get_masks(np.array([0]))
    _assert_raw_pixels_normalise_to_the_batch(ds, np.array([2, 0]), seed=[1])


def test_segment_cue_shows_the_label_in_one_window_only():
    """cue='segment': the avatar moves and the stripes show only inside one window of
    cue_frames frames, placed where the evaluation views see it, so clips of a video differ;
    outside it the avatar stands still. The constant cue keeps every frame informative."""
    frames, clip, cue = 24, 8, 4
    train, _ = synthetic.make_splits(num_train=32, num_test=8, frames=frames, clip_frames=clip,
                                     cue="segment", cue_frames=cue)
    for i in range(len(train)):
        mask = train.masks[i].astype(bool)
        corner = np.array([np.argwhere(m).min(axis=0) for m in mask])  # (top, left) per frame
        moving = np.flatnonzero(np.any(np.diff(corner, axis=0) != 0, axis=1))
        assert len(moving) == cue - 1  # one pixel per frame inside the window only
        start = moving[0]
        assert np.array_equal(moving, np.arange(start, start + cue - 1))
        assert clip // 2 <= start and start + cue <= frames - clip // 2
    constant, _ = synthetic.make_splits(num_train=8, num_test=8, frames=16, clip_frames=clip)
    corner = np.array([np.argwhere(m).min(axis=0) for m in constant.masks[0].astype(bool)])
    assert np.all(np.any(np.diff(corner, axis=0) != 0, axis=1))
    with pytest.raises(ValueError, match="cue must be one of"):
        synthetic.make_splits(num_train=8, num_test=8, cue="sometimes")
    with pytest.raises(ValueError, match="needs 2 <= cue_frames"):
        synthetic.make_splits(num_train=8, num_test=8, frames=16, clip_frames=8,
                              cue="segment", cue_frames=12)


def test_the_validation_split_is_a_seeded_stratified_part_of_the_training_split():
    train_split, _ = synthetic.make_splits(num_train=80, num_test=8, setting="person")
    kept, held = data.dataset.validation_split(train_split, fraction=0.2, seed=0)
    assert len(kept) + len(held) == len(train_split) and len(held) == 16
    assert not set(kept.indices) & set(held.indices)
    np.testing.assert_array_equal(np.bincount(held.labels, minlength=8), [2] * 8)
    again = data.dataset.validation_split(train_split, fraction=0.2, seed=0)[1]
    np.testing.assert_array_equal(again.indices, held.indices)
    assert not np.array_equal(
        data.dataset.validation_split(train_split, fraction=0.2, seed=1)[1].indices, held.indices)
    batch = held.get_batch(np.array([1, 0]), seed=3)
    whole = train_split.get_batch(held.indices[[1, 0]], seed=3)
    for key in ("video", "mask", "label"):
        np.testing.assert_array_equal(batch[key], whole[key])
    np.testing.assert_array_equal(held.get_masks(np.array([2])),
                                  train_split.get_masks(held.indices[[2]]))
    assert isinstance(held, data.Dataset) and held.fingerprint() != kept.fingerprint()
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        data.dataset.validation_split(train_split, fraction=1.0, seed=0)


def test_eval_split_validation_never_reads_the_test_split():
    from maskdp_jax.configs import default
    from maskdp_jax.run import datasets as run_datasets

    config = default.get_config().input
    config.num_train, config.num_test = 40, 8
    config.eval_split = "validation"
    train_part, held = run_datasets.get_datasets(config)
    assert held.name.endswith("[validation]") and len(train_part) + len(held) == 40
    config.eval_split = "val"
    with pytest.raises(ValueError, match="input.eval_split must be one of"):
        run_datasets.get_datasets(config)


@pytest.mark.parametrize("setting,classes", [("person", 8), ("pretrain", 8), ("context", 8)])
def test_every_setting_draws_its_labels_and_the_person_pose_shows_in_the_mask(setting, classes):
    train_split, _ = synthetic.make_splits(num_train=64, num_test=8, setting=setting)
    assert len(train_split.class_names) == classes
    np.testing.assert_array_equal(np.bincount(train_split.labels), [8] * classes)
    if setting == "person":  # a shown pose is the avatar's aspect: standing taller than wide
        masks = train_split.masks[:, 0]
        tall = [np.ptp(np.nonzero(m)[0]) > np.ptp(np.nonzero(m)[1]) for m in masks]
        wide = [np.ptp(np.nonzero(m)[0]) < np.ptp(np.nonzero(m)[1]) for m in masks]
        pose = train_split.labels // 4
        assert not any(t and p == 1 for t, p in zip(tall, pose, strict=True))
        assert not any(w and p == 0 for w, p in zip(wide, pose, strict=True))
        assert 0 < sum(tall) + sum(wide) < len(masks)  # shown in some videos, not all


def _room_orientation(rooms: np.ndarray) -> np.ndarray:
    """Per room of ``uint8 [N, F, S, S, 3]`` the orientation (synthetic.ORIENTATIONS) its
    stripes run in: the neighbour step along which its pixels change least."""
    r = rooms.astype(np.float32).mean(-1)
    steps = (r[..., :, 1:] - r[..., :, :-1],      # along x: horizontal stripes
             r[..., 1:, :] - r[..., :-1, :],      # along y: vertical stripes
             r[..., 1:, :-1] - r[..., :-1, 1:],   # down-left: stripes of constant y + x
             r[..., 1:, 1:] - r[..., :-1, :-1])   # down-right: stripes of constant y - x
    return np.argmin([np.abs(d).mean(axis=(1, 2, 3)) for d in steps], axis=0)


def _avatar_steps(masks: np.ndarray) -> np.ndarray:
    """``[N, 2]`` the avatar's (dy, dx) from the first frame to the second (its mask's corner)."""
    def corner(m):
        ys, xs = np.nonzero(m)
        return ys.min(), xs.min()
    return np.array([np.subtract(corner(m[1]), corner(m[0])) for m in masks])


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_the_share_setting_shows_each_label_in_the_room_or_in_the_avatar(share):
    """In a fraction ``private_share`` of the videos the room's orientation is the label and the
    avatar stands still; in the others the avatar moves in the label's direction."""
    train_split, _ = synthetic.make_splits(num_train=64, num_test=8, setting="share",
                                           private_share=share)
    rooms, _ = synthetic.make_splits(num_train=64, num_test=8, setting="share",
                                     private_share=share, background=True)
    labels = train_split.labels
    np.testing.assert_array_equal(np.bincount(labels), [16] * 4)
    steps = _avatar_steps(train_split.masks)
    still = (steps == 0).all(axis=1)
    np.testing.assert_array_equal(steps[~still],
                                  np.reshape([synthetic._VELOCITY[int(y)] for y in labels[~still]],
                                             (-1, 2)))
    assert abs(still.mean() - share) <= 0.15
    # The stripes' orientation read from the rooms (a room of two near colours reads as noise)
    # is the label where the avatar stands still, and independent of it where it moves.
    read = _room_orientation(rooms.frames) == labels
    if share > 0:
        assert read[still].mean() >= 0.9
    if share < 1:
        assert read[~still].mean() <= 0.5


def test_private_share_is_the_share_settings_alone_and_a_fraction():
    with pytest.raises(ValueError, match="private_share .* is the 'share' setting's"):
        synthetic.make_splits(num_train=8, num_test=8, setting="share")
    with pytest.raises(ValueError, match="private_share .* is the 'share' setting's"):
        synthetic.make_splits(num_train=8, num_test=8, setting="person", private_share=0.5)
    with pytest.raises(ValueError, match=r"in \[0, 1\]; got 1.5"):
        synthetic.make_splits(num_train=8, num_test=8, setting="share", private_share=1.5)


def test_the_public_rooms_hold_no_avatar_and_no_label():
    rooms = synthetic.public_rooms(frames=16, size=32)
    assert rooms.dtype == np.uint8 and rooms.shape == (synthetic.NUM_PUBLIC_ROOMS, 16, 32, 32, 3)
    train_split, _ = synthetic.make_splits(num_train=8, num_test=8, setting="person")
    assert not any(np.array_equal(rooms[0], v) for v in train_split.frames)
