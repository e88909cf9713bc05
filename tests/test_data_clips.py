"""Where training clips start: ``uniform`` offsets and Luo et al. 2024's ``consecutive`` clips.

``consecutive`` (Luo et al. 2024, Sec. 3.2) cuts a video into its consecutive, non-overlapping clips
and trains on K of them; these tests hold it to that on every source that samples training clips.
"""

from __future__ import annotations

import numpy as np
import pytest

from maskdp_jax.data import clips, layouts, synthetic, testing
from maskdp_jax.data.video_dataset import VideoDataset, VideoOptions


def _grid(num_video_frames: int, num_frames: int, stride: int) -> tuple[int, int, int]:
    """(period, number of clips N, slack) of the video's consecutive-clip grid."""
    span, period = (num_frames - 1) * stride + 1, num_frames * stride
    room = max(num_video_frames - span, 0)
    n = room // period + 1
    return period, n, room - (n - 1) * period


@pytest.mark.parametrize("frames,t,s,k", [(186, 16, 4, 8), (186, 16, 4, 2), (300, 8, 2, 5),
                                          (16, 8, 1, 4), (5, 4, 2, 3)])
def test_consecutive_clips_are_grid_clips_without_replacement(frames, t, s, k):
    period, n, slack = _grid(frames, t, s)
    span = (t - 1) * s + 1
    rng = np.random.default_rng(0)
    phases = set()
    for _ in range(2000):
        starts = clips.consecutive_starts(rng.random(k + 1), num_video_frames=frames,
                                          num_frames=t, stride=s)
        assert starts.shape == (k,) and starts.dtype == np.int64
        phase = int(starts.min()) % period
        phases.add(phase)
        assert 0 <= phase <= slack
        chunk = (starts - phase) // period
        np.testing.assert_array_equal(starts, phase + period * chunk)  # all on one grid
        assert chunk.min() >= 0 and chunk.max() < n
        if frames >= span:
            assert starts.max() + span <= frames  # no clip is padded
        counts = np.bincount(chunk, minlength=n)
        # Without replacement: K <= N distinct clips; K > N: each clip floor or ceil(K / N) times.
        assert counts.max() - counts.min() <= 1 if k >= n else counts.max() == 1
    assert phases == set(range(slack + 1))  # every grid phase is drawn


def test_consecutive_clips_never_overlap_when_k_fits():
    """K <= N: the K clips' frames are disjoint (the paper's c_i^j), unlike uniform offsets."""
    rng = np.random.default_rng(1)
    t, s, frames, k = 16, 4, 186, 2
    overlaps = {"uniform": 0, "consecutive": 0}
    for _ in range(200):
        plan_c = clips.plan_views(rng, num_clips=k, sampling="consecutive")
        plan_u = clips.plan_views(rng, num_clips=k, sampling="uniform")
        spec = clips.ClipSpec(num_frames=t, stride=s, resize_size=32, crop_size=32)
        for name, plan in (("consecutive", plan_c), ("uniform", plan_u)):
            a, b = (set(range(int(x), int(x) + t * s)) for x in
                    plan.starts(num_video_frames=frames, clip=spec, num_clips=k))
            overlaps[name] += bool(a & b)
    assert overlaps["consecutive"] == 0
    assert overlaps["uniform"] > 0  # the test can tell the two apart


def test_plan_views_draws_one_phase_more_for_consecutive():
    a = clips.plan_views(np.random.default_rng(3), num_clips=4, sampling="consecutive")
    b = clips.plan_views(np.random.default_rng(3), num_clips=4)
    assert a.uniforms.shape == (5,) and b.uniforms.shape == (4,)
    assert a.sampling == "consecutive" and b.sampling == "uniform"
    with pytest.raises(ValueError, match=r"clip sampling must be one of \('uniform', "
                                         r"'consecutive'\); got 'random'"):
        clips.ClipSpec(num_frames=4, stride=1, resize_size=8, crop_size=8, sampling="random")


def test_synthetic_consecutive_clips_tile_the_video():
    """16 frames, T = 4: four consecutive clips, no slack; K = 4 draws all four, so the clips
    (sorted) concatenate back to the video, and K = 8 draws each one twice."""
    train, _ = synthetic.make_splits(num_train=8, num_test=8, frames=16, clip_frames=4, size=32,
                                     clip_sampling="consecutive")
    idx = np.array([2, 5])
    batch = train.get_batch(idx, num_clips=4, seed=7)
    for row, i in enumerate(idx):
        clips_ = batch["mask"][row]  # [K, T, S, S]
        starts = [int(np.flatnonzero([(train.masks[i, o:o + 4] == c).all() for o in range(13)])[0])
                  for c in clips_]
        assert sorted(starts) == [0, 4, 8, 12]
        np.testing.assert_array_equal(np.concatenate(clips_[np.argsort(starts)]), train.masks[i])
    offsets = train._frame_offsets(3, num_clips=8, seed=1)[:, :, 0]
    assert all(sorted(o.tolist()) == [0, 0, 4, 4, 8, 8, 12, 12] for o in offsets)
    uniform, _ = synthetic.make_splits(num_train=8, num_test=8, frames=16, clip_frames=4, size=32)
    assert any(o % 4 for o in uniform._frame_offsets(3, num_clips=8, seed=1)[:, :, 0].ravel())


def test_video_dataset_consecutive_clips(tmp_path):
    """A decoded video (12 frames) with T = 2, stride 2: grid of N = 3 clips, K = 3 reads each of
    them once: together they are frames {phase, phase + 2, ..., phase + 10}."""
    paths = testing.make_ucf101_folder(str(tmp_path), train_per_class=1)
    layout = layouts.ucf101(video_dir=paths["video_dir"], split_dir=paths["split_dir"], split=1,
                            subset="train")
    spec = clips.ClipSpec(num_frames=2, stride=2, resize_size=32, crop_size=32,
                          sampling="consecutive")
    ds = VideoDataset(layout, VideoOptions(clip=spec, mean=(0.5,) * 3, std=(0.25,) * 3,
                                           num_workers=1), name="ucf101/train")
    try:
        plan = clips.plan_views(np.random.default_rng(0), num_clips=3, sampling="consecutive")
        wanted, sel, _ = ds._view_frames(0, plan, 3)
        frames = wanted[sel]  # [K, T] source frame indices
        phase = int(frames.min())
        assert phase in (0, 1)
        assert sorted(frames.ravel().tolist()) == list(range(phase, phase + 12, 2))
        assert ds.get_batch(np.array([0, 1]), num_clips=3, seed=0)["video"].shape[:3] == (2, 3, 2)
    finally:
        ds.close()


@pytest.mark.parametrize("sampling", ["uniform", "consecutive"])
def test_starts_on_stride_puts_every_clip_frame_on_the_stride_grid(sampling):
    """starts_on_stride: training (both samplings) and evaluation starts are multiples of the
    stride, so every clip frame is one too, or the last frame of a padded clip; without it the
    starts take other values."""
    rng = np.random.default_rng(0)
    for frames in (5, 30, 61, 100):
        for on in (True, False):
            spec = clips.ClipSpec(num_frames=4, stride=3, resize_size=8, crop_size=8,
                                  sampling=sampling, starts_on_stride=on)
            starts = []
            for _ in range(50):
                plan = clips.plan_views(rng, num_clips=2, sampling=sampling)
                starts += plan.starts(num_video_frames=frames, clip=spec, num_clips=2).tolist()
            starts += clips.plan_views(None, num_clips=3).starts(
                num_video_frames=frames, clip=spec, num_clips=3).tolist()
            idx = np.concatenate([clips.frame_indices(num_video_frames=frames, num_frames=4,
                                                      stride=3, start=s) for s in starts])
            on_grid = (idx % 3 == 0) | (idx == frames - 1)
            if on:
                assert on_grid.all(), (frames, sampling)
                assert spec.frame_step == 3
            elif frames >= 61:
                assert not on_grid.all() and spec.frame_step == 1


def test_pixel_norm_gives_the_same_float32_on_the_host_and_in_a_jitted_step():
    """The loader ships uint8 and the step normalises on the device: both read one lookup table
    of correctly rounded values, so the device gives the host's values bit for bit (with
    arithmetic, XLA's reciprocal and fused multiply-add differ from NumPy in the last bit)."""
    import jax

    norm = clips.PixelNorm((0.45, 0.4, 0.35), (0.225, 0.25, 0.3))
    pixels = np.random.default_rng(0).integers(0, 256, (2, 3, 5, 7, 3), dtype=np.uint8)
    host = norm(pixels)
    device = np.asarray(jax.jit(norm)(pixels))
    assert host.dtype == device.dtype == np.float32
    np.testing.assert_array_equal(device, host)
    expected = (pixels / 255.0 - np.array([0.45, 0.4, 0.35])) / np.array([0.225, 0.25, 0.3])
    np.testing.assert_allclose(host, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mean, std, match", [
    ((0.5,), (0.0,), "std must be finite and > 0"),
    ((0.5, 0.5, 0.5), (0.2, float("nan"), 0.2), "std must be finite and > 0"),
    ((0.5, 0.5), (0.2, 0.2), "1 or 3 values"),
])
def test_pixel_norm_refuses_a_normalisation_that_is_not_one(mean, std, match):
    with pytest.raises(ValueError, match=match):
        clips.PixelNorm(mean, std)


def test_pixel_norm_refuses_pixels_that_are_already_floats():
    with pytest.raises(TypeError, match="normalises uint8 pixels; got float32"):
        clips.PixelNorm((0.5,), (0.25,))(np.zeros((2, 3), np.float32))
