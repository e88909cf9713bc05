"""Real video data: layouts and splits, decoding, masks, clip views, loader, bad input, train.py.

Videos are tiny H.264 files written by PyAV into a temporary folder (12 frames at 32x40).
"""

import os
import shutil
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest

from maskdp_jax import data
from maskdp_jax.configs import ucf101_maskdp
from maskdp_jax.data import clips, decode, layouts, testing
from maskdp_jax.run import datasets as run_datasets
from maskdp_jax.run import evaluation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def ucf(tmp_path_factory):
    return testing.make_ucf101_folder(str(tmp_path_factory.mktemp("ucf")))


def _input(paths, **overrides):
    c = ucf101_maskdp.get_config().input
    c.data_dir, c.split_dir, c.mask_dir = paths["video_dir"], paths["split_dir"], paths["mask_dir"]
    c.clip_frames, c.stride, c.resize_size, c.crop_size, c.num_workers = 4, 2, 32, 32, 2
    c.eval_clips = 1
    for k, v in overrides.items():
        c[k] = v
    return c


def _copy(ucf, tmp_path):
    dst = str(tmp_path / "ucf")
    shutil.copytree(os.path.dirname(ucf["video_dir"]), dst)
    return {k: os.path.join(dst, os.path.basename(v)) for k, v in ucf.items()}


def _denormalize(batch, c):
    return batch["video"] * np.array(c.std) + np.array(c.mean)


# ---------------------------------------------------------------------------------------------
# Clip geometry
# ---------------------------------------------------------------------------------------------
def test_clip_geometry():
    assert clips.frame_indices(num_video_frames=5, num_frames=4, stride=2, start=0).tolist() == [
        0, 2, 4, 4]  # short video: the last frame is repeated, the stride kept
    assert clips.train_starts(np.array([0.0, 0.999]), num_video_frames=10, span=7).tolist() == [
        0, 3]
    assert clips.eval_starts(num_video_frames=10, span=10, num_views=1).tolist() == [0]
    assert clips.resized_shape(240, 320, short_side=256) == (256, 341)
    assert clips.crop_box(256, 341, crop_size=224, position=0.5) == (16, 58)
    m = np.zeros((1, 4, 6), np.uint8)
    m[0, :, 3:] = 1
    r = clips.resize_mask(m, (8, 12))  # upscaling: eroded by 1 + CHROMA_MARGIN source px
    assert set(np.unique(r)) <= {0, 1} and r[0, :, 12:].all() and not r[0, :, :12].any()
    plan = clips.plan_views(None, num_clips=2, eval_crops=3)
    assert plan.positions.tolist() == [0.0, 0.5, 1.0, 0.0, 0.5, 1.0]
    spec = clips.ClipSpec(num_frames=16, stride=1, resize_size=32, crop_size=32)  # span 16
    assert plan.starts(num_video_frames=40, clip=spec, num_clips=2).tolist() == [8] * 3 + [16] * 3


# ---------------------------------------------------------------------------------------------
# Layouts and splits
# ---------------------------------------------------------------------------------------------
def test_ucf101_layout(ucf):
    train = layouts.ucf101(video_dir=ucf["video_dir"], split_dir=ucf["split_dir"], split=1,
                           subset="train")
    test = layouts.ucf101(video_dir=ucf["video_dir"], split_dir=ucf["split_dir"], split=1,
                          subset="test")
    assert train.class_names == ("ApplyEyeMakeup", "Biking")
    assert [r.label for r in train.records] == [0, 0, 0, 1, 1, 1]
    assert [r.label for r in test.records] == [0, 1]
    assert not {r.key for r in train.records} & {r.key for r in test.records}


def test_hmdb51_split_codes(tmp_path):
    for cls, codes in (("climb", "1 2 0"), ("walk", "1 1 2")):
        with open(tmp_path / f"{cls}_test_split1.txt", "w") as f:
            f.writelines(f"{cls}_{i}.avi {c}\n" for i, c in enumerate(codes.split()))
    train = layouts.hmdb51(video_dir="/v", split_dir=str(tmp_path), split=1, subset="train")
    test = layouts.hmdb51(video_dir="/v", split_dir=str(tmp_path), split=1, subset="test")
    assert train.class_names == ("climb", "walk")
    assert [r.key for r in train.records] == ["climb/climb_0.avi", "walk/walk_0.avi",
                                              "walk/walk_1.avi"]
    assert [r.key for r in test.records] == ["climb/climb_1.avi", "walk/walk_2.avi"]


def test_ntu60_protocols(tmp_path):
    names = ["S001C001P001R001A001_rgb.avi", "S001C002P003R001A002_rgb.avi",
             "S002C003P002R002A060_rgb.avi", "S001C001P003R001A001_rgb.avi"]
    names += [f"S001C002P001R001A{a:03d}_rgb.avi" for a in range(1, 61)]  # every class in train
    for n in names:
        (tmp_path / n).write_bytes(b"")
    get = layouts.ntu60
    xsub_test = get(video_dir=str(tmp_path), protocol="xsub", subset="test")
    assert sorted(r.key for r in xsub_test.records) == sorted(n for n in names if "P003" in n)
    xsub_train = get(video_dir=str(tmp_path), protocol="xsub", subset="train")
    assert len(xsub_train.records) == len(names) - 2
    xview_train = get(video_dir=str(tmp_path), protocol="xview", subset="train")
    assert sorted(r.key for r in xview_train.records) == sorted(
        n for n in names if "C002" in n or "C003" in n)
    xview_test = get(video_dir=str(tmp_path), protocol="xview", subset="test")
    assert sorted(r.key for r in xview_test.records) == sorted(n for n in names if "C001" in n)
    assert {r.label for r in xview_test.records} == {0}
    assert len(xsub_test.class_names) == 60 and xsub_test.class_names[0] == "A001 drink water"
    (tmp_path / "S001C002P001R001A061_rgb.avi").write_bytes(b"")
    with pytest.raises(layouts.LayoutError, match="A061_rgb.avi: action A061"):
        get(video_dir=str(tmp_path), protocol="xview", subset="test")


def test_toyota_smarthome_cross_subject(tmp_path):
    for n in ["Walk_p03_r00_v01_c01.mp4", "Drink.Fromcup_p04_r01_v02_c02.mp4",
              "Walk_p02_r00_v01_c05.mp4", "Drink.Fromcup_p10_r00_v03_c02.mp4"]:
        (tmp_path / n).write_bytes(b"")
    train = layouts.toyota_smarthome(video_dir=str(tmp_path), protocol="cs", subset="train")
    test = layouts.toyota_smarthome(video_dir=str(tmp_path), protocol="cs", subset="test")
    assert train.class_names == ("Drink.Fromcup", "Walk")
    assert {r.key[:-4].split("_")[1] for r in train.records} == {"p03", "p04"}
    assert {r.key[:-4].split("_")[1] for r in test.records} == {"p02", "p10"}


def test_folder_layout_and_empty_class(tmp_path):
    for cls, n in (("a", 2), ("b", 2)):
        os.makedirs(tmp_path / cls)
        for i in range(n):
            (tmp_path / cls / f"{i}.mp4").write_bytes(b"")
    (tmp_path / "test.txt").write_text("a/1.mp4\nb/0.mp4\n")
    # Without train.txt, train is every video that test.txt does not list.
    train = layouts.folder(video_dir=str(tmp_path), split_dir="", subset="train")
    assert [r.key for r in train.records] == ["a/0.mp4", "b/1.mp4"]
    assert len(layouts.folder(video_dir=str(tmp_path), split_dir="", subset="test").records) == 2
    (tmp_path / "test.txt").write_text("a/1.mp4\nb/0.mp4\nb/1.mp4\n")  # b left without training
    with pytest.raises(layouts.LayoutError, match=r"1 class\(es\) have no video: \['b'\]"):
        layouts.folder(video_dir=str(tmp_path), split_dir="", subset="train")
    (tmp_path / "test.txt").write_text("c/1.mp4\n")
    with pytest.raises(layouts.LayoutError, match=r"test.txt line 1: class of 'c/1.mp4'"):
        layouts.folder(video_dir=str(tmp_path), split_dir="", subset="test")
    os.makedirs(tmp_path / "empty")
    with pytest.raises(layouts.LayoutError, match=r"empty: class folder has no video"):
        layouts.folder(video_dir=str(tmp_path), split_dir="", subset="train")


# ---------------------------------------------------------------------------------------------
# Clips and masks
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mask_videos", [False, True])
def test_masks_aligned_with_video_in_time_and_space(tmp_path, mask_videos):
    paths = testing.make_ucf101_folder(str(tmp_path), mask_videos=mask_videos,
                                       train_per_class=1)
    c = _input(paths)
    train, _ = run_datasets.get_datasets(c, mode="maskdp")
    assert train.has_masks
    for seed in ([0], [1]):
        batch = train.get_batch(np.array([0, 1]), num_clips=3, seed=seed)
        pixels, mask = _denormalize(batch, c).mean(-1), batch["mask"]
        assert batch["video"].shape == (2, 3, 4, 32, 32, 3) and mask.shape == (2, 3, 4, 32, 32)
        assert mask.any() and not mask.all()
        # The bright moving square is exactly the public region in every frame of every view.
        assert pixels[mask == 1].min() > 0.6 and pixels[mask == 0].max() < 0.3
    # The square moves: different frames have different masks (the frame indices match).
    assert not np.array_equal(mask[0, 0, 0], mask[0, 0, -1])


def _two_videos_differing_in_private_pixels(tmp_path, pix_fmt):
    """Two lossless videos equal on public pixels, different on private ones, and the mask.

    The private region is a block aligned to 2 x 2 pixels (so that with 4:2:0 every chroma sample
    is either public or private) holding a distinctive value next to the public boundary.
    """
    h, w, frames = 48, 64, 2
    rng = np.random.default_rng(0)
    mask = np.ones((frames, h, w), np.uint8)
    mask[:, 10:34, 14:42] = 0
    paths = []
    for private_value in (255, 0):
        if pix_fmt == "yuv420p":  # planes written as is: Y [h, w], U and V [h/2, w/2]
            y = rng.integers(16, 236, (frames, h, w)).astype(np.uint8)
            uv = rng.integers(16, 240, (frames, 2, h // 2, w // 2)).astype(np.uint8)
            y[mask == 0] = private_value
            uv[:, :, 5:17, 7:21] = private_value
            video = np.concatenate(
                [y, uv.reshape(frames, 2, h // 4, w).reshape(frames, h // 2, w)], axis=1)
        else:
            video = rng.integers(0, 256, (frames, h, w, 3)).astype(np.uint8)
            video[mask == 0] = private_value
        rng = np.random.default_rng(0)  # the same public pixels in both videos
        path = str(tmp_path / f"private{private_value}_{pix_fmt}.mkv")
        testing.write_video(path, video, codec="ffv1", pix_fmt=pix_fmt)
        paths.append(path)
    return paths, mask


@pytest.mark.parametrize("pix_fmt", ["bgr0", "yuv420p"])
def test_resized_public_pixels_depend_on_public_source_pixels_only(tmp_path, pix_fmt):
    # The public view must be a function of public pixels. The decoder blends neighbouring
    # source pixels when it resizes; the mask resize must mark public only output pixels whose
    # whole footprint is public: changing private source pixels changes no public output pixel.
    (a_path, b_path), mask = _two_videos_differing_in_private_pixels(tmp_path, pix_fmt)
    idx = np.arange(mask.shape[0])
    for size in ((12, 21), (20, 27), (52, 69), (72, 90)):  # downscale x3-4, x2.4; upscale
        public = clips.resize_mask(mask, size) == 1
        assert public.any() and not public.all()
        for decoder in decode.DECODERS:
            a = decode.read_video(a_path, idx, size=size, decoder=decoder)
            b = decode.read_video(b_path, idx, size=size, decoder=decoder)
            assert not np.array_equal(a, b)
            np.testing.assert_array_equal(a[public], b[public], err_msg=f"{size} {decoder}")


def test_flip_augmentation_keeps_alignment_and_is_refused_under_dp(ucf):
    c = _input(ucf, augment=True)
    with pytest.raises(ValueError, match="augment=True is for mode 'nonprivate' only"):
        run_datasets.get_datasets(c, mode="dp")
    train, _ = run_datasets.get_datasets(c, mode="nonprivate")
    batch = train.get_batch(np.arange(6), num_clips=4, seed=[3])
    pixels, mask = _denormalize(batch, c).mean(-1), batch["mask"]
    assert pixels[mask == 1].min() > 0.6 and pixels[mask == 0].max() < 0.3
    # Some clips are flipped: the square (moving right) then moves left.
    cols = [np.argmax(m.any(0)) for m in mask.reshape(-1, *mask.shape[2:])[:, [0, -1]].reshape(
        -1, 32, 32)]
    assert len(set(cols)) > 1


def test_get_batch_deterministic_and_independent_of_threads(ucf):
    one, _ = run_datasets.get_datasets(_input(ucf, num_workers=1, clip_frames=2, stride=1))
    many, _ = run_datasets.get_datasets(_input(ucf, num_workers=4, clip_frames=2, stride=1))
    idx = np.array([5, 0, 3, 3, 1])
    a = one.get_batch(idx, num_clips=2, seed=[7, 1])
    b = many.get_batch(idx, num_clips=2, seed=[7, 1])
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    c = many.get_batch(idx, num_clips=2, seed=[8, 1])
    assert not np.array_equal(a["mask"], c["mask"])  # other offsets for another seed


def test_dataset_without_masks_runs_dp_but_not_maskdp(ucf, tmp_path):
    from maskdp_jax import train

    c = _input(ucf, mask_dir="")
    ds, _ = run_datasets.get_datasets(c, mode="dp")
    assert not ds.has_masks
    assert not ds.get_batch(np.array([0]), seed=[0])["mask"].any()  # all private
    config = ucf101_maskdp.get_config()
    config.input = c
    config.input.clip_frames = 8
    config.model.name = "mvit_test"  # a model for these clips: the masks are what is missing
    config.model.init_from = ""
    with pytest.raises(ValueError, match="mode 'maskdp' needs per-video masks"):
        train.train_and_evaluate(config, str(tmp_path))


def test_evaluation_averages_logits_over_temporal_and_spatial_views(ucf):
    _, test = run_datasets.get_datasets(_input(ucf, eval_crops=3, resize_size=40))

    def apply_fn(params, x):  # "logits" = one pixel row of each frame: no rounding
        return x[:, :, 8, :, 0].reshape(x.shape[0], -1)

    logits = evaluation.predict(apply_fn, None, test, num_clips=2, batch_size=4)
    views = test.get_batch(np.arange(len(test)), num_clips=2)["video"]
    assert views.shape[1] == 6  # 2 temporal x 3 spatial views, all different
    per_view = np.stack([np.asarray(apply_fn(None, views[:, v])) for v in range(6)], axis=1)
    assert np.ptp(per_view, axis=1).max(axis=-1).min() > 1.0  # views differ
    np.testing.assert_allclose(logits, per_view.mean(axis=1), rtol=1e-6)


def test_step_prefetcher_gives_the_same_batches(ucf):
    ds, _ = run_datasets.get_datasets(_input(ucf))

    def load(step):
        return ds.get_batch(np.array([step % 6, 2]), seed=[0, step])

    with data.StepPrefetcher(load, depth=3, num_steps=5) as prefetched:
        got = [prefetched(s) for s in range(5)]
    for s in range(5):
        np.testing.assert_array_equal(got[s]["video"], load(s)["video"])


# ---------------------------------------------------------------------------------------------
# Bad input: each a clear error naming the file
# ---------------------------------------------------------------------------------------------
def _key(paths, i=0):
    with open(os.path.join(paths["split_dir"], "trainlist01.txt")) as f:
        return f.read().split("\n")[i].split()[0]


def _mask_path(paths, i=0):
    return os.path.join(paths["mask_dir"], _key(paths, i)[:-4] + ".npz")


def _corrupt_video(paths, how):
    path = os.path.join(paths["video_dir"], _key(paths))
    raw = open(path, "rb").read()
    open(path, "wb").write(b"not a video at all" if how == "junk" else raw[: len(raw) // 2])
    return path


@pytest.mark.parametrize("how", ["junk", "truncated"])
def test_unreadable_or_truncated_video(ucf, tmp_path, how):
    paths = _copy(ucf, tmp_path)
    path = _corrupt_video(paths, how)
    with pytest.raises(decode.BadVideoError, match="unreadable video|truncated") as e:
        run_datasets.get_datasets(_input(paths))
    assert e.value.path == path and "skip_bad_videos" in str(e.value)


def test_decord_width_bug_falls_back_to_pyav_and_a_broken_file_names_both(tmp_path,
                                                                         monkeypatch):
    """Issue 19, item 9: decord 0.6 fails on 48-px-wide frames of a valid H.264 file (it copies
    FFmpeg's row-padded buffer as packed: 4 bytes per pixel). The file is decoded with PyAV, once
    announced; only a file neither decoder reads is called corrupt."""
    monkeypatch.setattr(decode, "_DECORD_FALLBACK_WARNED", set())
    frames = np.random.default_rng(0).integers(0, 256, (6, 48, 48, 3)).astype(np.uint8)
    path = str(tmp_path / "small.mp4")
    testing.write_video(path, frames)
    import decord

    with pytest.raises(decord.DECORDError, match="size must exactly match"):
        decord.VideoReader(path, width=48, height=48, num_threads=1).get_batch([0])
    with pytest.warns(UserWarning, match=r"decord could not decode .*small\.mp4 at 48x48 "
                                         r"\(DECORDError: .*\); decoded with PyAV instead"):
        out = decode.read_video(path, np.array([0, 5]), size=(48, 48), decoder="decord")
    np.testing.assert_array_equal(
        out, decode.read_video(path, np.array([0, 5]), size=(48, 48), decoder="pyav"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # announced once per size
        decode.read_video(path, np.array([1]), size=(48, 48), decoder="decord")
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(open(path, "rb").read()[:300])
    with pytest.raises(decode.BadVideoError, match=r"file truncated or corrupt \(decord: .*; "
                                                   r"PyAV: "):
        decode.read_video(str(broken), np.array([0]), size=(48, 48), decoder="decord")


def test_skip_bad_videos_reports_a_count(ucf, tmp_path):
    paths = _copy(ucf, tmp_path)
    path = _corrupt_video(paths, "junk")
    os.remove(_mask_path(paths, 1))
    with pytest.warns(UserWarning, match="skipped 2 bad video"):
        train, _ = run_datasets.get_datasets(_input(paths, skip_bad_videos=True))
    assert len(train) == 4 and len(train.skipped) == 2 and train.skipped[0][0] == path
    assert train.labels.tolist() == [0, 1, 1, 1]


def test_short_video_policy(ucf):
    c = _input(ucf, clip_frames=8, stride=2)  # span 15 > 12 frames
    with pytest.warns(UserWarning, match="[62]/[62] videos are shorter than the clip span 15"):
        padded, _ = run_datasets.get_datasets(c)
    assert padded.num_short == len(padded)
    batch = padded.get_batch(np.array([0]), seed=[0])
    np.testing.assert_array_equal(batch["mask"][0, 0, -1], batch["mask"][0, 0, -2])  # repeated
    c.short_videos = "error"
    with pytest.raises(decode.BadVideoError, match=r"v_ApplyEyeMakeup_g01_c01.avi: video has 12 "
                       r"frames, fewer than the clip span 15"):
        run_datasets.get_datasets(c)


def test_missing_mask(ucf, tmp_path):
    paths = _copy(ucf, tmp_path)
    os.remove(_mask_path(paths))
    with pytest.raises(decode.BadVideoError, match="mask file not found") as e:
        run_datasets.get_datasets(_input(paths))
    assert e.value.path == _mask_path(paths)


@pytest.mark.parametrize("change", ["frames", "size"])
def test_mask_shape_mismatch(ucf, tmp_path, change):
    paths = _copy(ucf, tmp_path)
    mask = np.load(_mask_path(paths))["mask"]
    mask = mask[:-1] if change == "frames" else mask[:, :, :-2]
    np.savez(_mask_path(paths), mask=mask)
    with pytest.raises(decode.BadVideoError, match="must match its video") as e:
        run_datasets.get_datasets(_input(paths))
    assert e.value.path == _mask_path(paths)
    assert ("frames=11" if change == "frames" else "w=38") in str(e.value)


def test_mask_values_outside_0_1_or_0_255(ucf, tmp_path):
    paths = _copy(ucf, tmp_path)
    mask = np.load(_mask_path(paths))["mask"] * 128
    np.savez(_mask_path(paths), mask=mask)
    # Found at construction with validate="full", else when the video is first loaded.
    with pytest.raises(decode.BadVideoError, match=r"mask values must be \{0, 1\} or \{0, 255\}; "
                       r"found \[128\]") as e:
        run_datasets.get_datasets(_input(paths, validate="full"))
    assert e.value.path == _mask_path(paths)
    train, _ = run_datasets.get_datasets(_input(paths))
    with pytest.raises(decode.BadVideoError, match="found \\[128\\]"):
        train.get_batch(np.array([0]), seed=[0])
    np.savez(_mask_path(paths), mask=mask // 128 * 255)  # {0, 255}: fine
    train, _ = run_datasets.get_datasets(_input(paths, validate="full"))
    assert train.get_batch(np.array([0]), seed=[0])["mask"].max() == 1


def test_unknown_class_and_contradicting_label(ucf, tmp_path):
    paths = _copy(ucf, tmp_path)
    split = os.path.join(paths["split_dir"], "trainlist01.txt")
    lines = open(split).read().splitlines()
    open(split, "w").write("\n".join(lines + ["Rowing/v_Rowing_g01_c01.avi 3"]))
    with pytest.raises(layouts.LayoutError, match=r"trainlist01.txt line 7: class 'Rowing'"):
        run_datasets.get_datasets(_input(paths))
    open(split, "w").write("\n".join([lines[0][:-1] + "2", *lines[1:]]))
    with pytest.raises(layouts.LayoutError, match="label 2 contradicts the class directory"):
        run_datasets.get_datasets(_input(paths))
    # A label that is not a number names the file and the line (issue 19, item 11).
    open(split, "w").write("\n".join([lines[0].rsplit(" ", 1)[0] + " one", *lines[1:]]))
    with pytest.raises(layouts.LayoutError, match=r"trainlist01.txt line 1: label 'one' of "
                                                  r"'ApplyEyeMakeup/.*' is not a class number "
                                                  r"\(1 to 2 in .*classInd.txt\)"):
        run_datasets.get_datasets(_input(paths))


def test_split_file_naming_a_missing_video(ucf, tmp_path):
    paths = _copy(ucf, tmp_path)
    os.remove(os.path.join(paths["video_dir"], _key(paths, 2)))
    with pytest.raises(decode.BadVideoError, match=r"video not found \(.*trainlist01.txt line 3\)"):
        run_datasets.get_datasets(_input(paths))


def test_empty_class(ucf, tmp_path):
    paths = _copy(ucf, tmp_path)
    split = os.path.join(paths["split_dir"], "trainlist01.txt")
    kept = [line for line in open(split).read().splitlines() if "Biking" not in line]
    open(split, "w").write("\n".join(kept))
    with pytest.raises(layouts.LayoutError, match=r"class\(es\) have no video: \['Biking'\]"):
        run_datasets.get_datasets(_input(paths))


@pytest.mark.parametrize(
    "mask, match",
    [
        (np.ones((4, 8)), r"must be \[T, H, W\]"),
        (np.ones((4, 8, 9)), "does not match"),
        (np.full((4, 8, 8), 7), "must be binary"),
    ],
)
def test_bad_masks_are_rejected(mask, match):
    with pytest.raises(ValueError, match=match):
        decode.binarize_mask(mask, video_shape=(4, 8, 8, 3), path="clip.npz")


def test_mask_value_conventions():
    m = np.zeros((2, 4, 4), np.uint8)
    m[0] = 255
    out = decode.binarize_mask(m, video_shape=(2, 4, 4), path="m")
    assert out.dtype == np.uint8 and out.max() == 1 and out[0].all() and not out[1].any()
    np.testing.assert_array_equal(
        decode.binarize_mask(m > 0, video_shape=(2, 4, 4), path="m"), out
    )


def test_npz_with_two_arrays_is_refused(tmp_path):
    path = str(tmp_path / "m.npz")
    np.savez(path, a=np.zeros((2, 2, 2)), b=np.zeros((2, 2, 2)))
    with pytest.raises(decode.BadVideoError, match="one array or one named 'mask'"):
        decode.probe_mask(path)
    with zipfile.ZipFile(path) as z:
        assert len(z.namelist()) == 2


# ---------------------------------------------------------------------------------------------
# TFDS ucf101 (optional dependency)
# ---------------------------------------------------------------------------------------------
def test_tfds_ucf101_with_mock_data(ucf):
    tfds = pytest.importorskip(
        "tensorflow_datasets",
        reason="optional: pip install -r requirements-tfds.txt to test the TFDS ucf101 source",
    )
    c = _input(ucf, dataset="tfds_ucf101", mask_dir="", tfds_config="ucf101_1_256",
               resize_size=40, crop_size=32)
    with tfds.testing.mock_data(num_examples=6):
        train, test = run_datasets.get_datasets(c, mode="dp")
        assert not train.has_masks and train.num_classes == 101 and len(train) == 6
        a = train.get_batch(np.array([1, 4]), num_clips=2, seed=[0])
        b = train.get_batch(np.array([1, 4]), num_clips=2, seed=[0])
        assert a["video"].shape == (2, 2, 4, 32, 32, 3) and not a["mask"].any()
        np.testing.assert_array_equal(a["video"], b["video"])
        assert test.get_batch(np.array([0]), num_clips=2)["video"].shape[1] == 2
    c.mask_dir = ucf["mask_dir"]
    with pytest.raises(ValueError, match="no stable video key"):
        run_datasets.get_datasets(c, mode="maskdp")


# ---------------------------------------------------------------------------------------------
# End to end: train.py with the UCF-101 MaskDP config on the generated folder
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_train_py_ucf101_maskdp_end_to_end(ucf, tmp_path):
    workdir = tmp_path / "run"
    cmd = [
        sys.executable, "train.py", "--config=configs/ucf101_maskdp.py",
        f"--config.input.data_dir={ucf['video_dir']}",
        f"--config.input.split_dir={ucf['split_dir']}",
        f"--config.input.mask_dir={ucf['mask_dir']}",
        "--config.input.clip_frames=8", "--config.input.stride=1",
        "--config.input.resize_size=32", "--config.input.crop_size=32",
        "--config.input.num_workers=2", "--config.input.eval_clips=2",
        "--config.input.clips_per_video=2",
        "--config.model.name=mvit_test", "--config.model.init_from=",
        "--config.model.finetune=linear",
        "--config.batch_size=3", "--config.physical_batch_size=4", "--config.num_epochs=1.0",
        "--config.optimizer.warmup_epochs=0", "--config.privacy.delta=1e-3",
        "--config.privacy.target_epsilon=8", "--config.log_every_steps=1",
        "--config.tensorboard=False", f"--workdir={workdir}",
    ]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)  # hang guard
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    report = json.loads((workdir / "report.json").read_text())
    assert report["privacy"]["mode"] == "maskdp" and report["timing"]["steps"] == 2
    assert report["metrics"]["num_examples"] == 2
    assert report["config"]["input"]["dataset"] == "ucf101"
    # The paper config calibrates σ with RDP, as the papers did: the RDP ε meets the target, the
    # tighter PLD ε is below it, and the report names the calibrating accountant.
    privacy = report["privacy"]
    assert 0.9 * 8 < privacy["epsilon_rdp"] <= 8 + 1e-6
    assert privacy["epsilon_pld"] <= privacy["epsilon_rdp"]
    assert (privacy["calibrated_by"], privacy["target_epsilon"]) == ("rdp", 8.0)
