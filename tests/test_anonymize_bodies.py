"""People found without a face (anonymize/bodies.py and FacePeople's merge of faces and bodies):
the body detector's shipped coefficients, one crop per person, the second pass on the crop the
pose model's alignment gives, the presence check that drops person-like patterns, per-person
carrying over missed frames, and NTU skeleton poses for the avatar."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_anonymize_skeletons import JOINTS, _body  # noqa: E402

from maskdp_jax.anonymize import bodies, pipeline, segment, skeletons
from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.anonymize.stages import InputError


@pytest.fixture(scope="module")
def people():
    """The segmenter with HOG bodies (faces and HOG bodies, BlazePose)."""
    return segment.FacePeople(bodies="hog")


def test_the_body_detector_checks_its_coefficients_and_its_arguments(monkeypatch):
    """The SVM ships inside OpenCV; another build's coefficients fail with what to do."""
    assert bodies.coefficients().shape == (3781,)
    from maskdp_jax.anonymize.opencv import cv2

    real = cv2().HOGDescriptor_getDefaultPeopleDetector
    monkeypatch.setattr(cv2(), "HOGDescriptor_getDefaultPeopleDetector",
                        lambda: np.asarray(real()) * 1.001)
    with pytest.raises(InputError, match=r"other coefficients.*pip install -r requirements"):
        bodies.HOGBodies()
    monkeypatch.undo()
    for bad in (dict(min_height=8), dict(max_side=64), dict(border=2.0), dict(nms=0.0)):
        with pytest.raises(InputError, match="HOGBodies needs"):
            bodies.HOGBodies(**bad)


def test_the_body_detector_scales_pads_and_maps_boxes_back_to_the_frame(monkeypatch):
    """Boxes come back in frame pixels whatever the scale and the padding: a window the
    detector reports at (x, y, w, h) in the scaled, padded image is ``/ s - pad`` in the frame,
    and the scale is capped by ``max_side``."""
    seen = {}

    class FakeHOG:
        def setSVMDetector(self, coef):
            pass

        def detectMultiScale(self, image, **kwargs):
            seen["shape"] = image.shape
            return np.array([[40, 60, 64, 128], [44, 60, 64, 128]]), np.array([[2.0], [1.0]])

    from maskdp_jax.anonymize.opencv import cv2

    monkeypatch.setattr(cv2(), "HOGDescriptor", FakeHOG)
    detector = bodies.HOGBodies(min_height=48, border=0.1)  # scale 2, pad 10 px of 100
    boxes = detector(np.zeros((100, 200, 3), np.uint8))
    assert seen["shape"][:2] == (240, 440)  # (100 + 20) * 2, (200 + 20) * 2
    np.testing.assert_allclose(boxes, [[10, 20, 42, 84, 2.0]])  # the lower score is merged
    found = {}

    def detect(self, image, **kwargs):
        seen["shape"] = image.shape
        return found["boxes"]

    FakeHOG.detectMultiScale = detect
    found["boxes"] = np.array([[40, 60, 64, 128]]), np.array([[0.3]])
    assert len(detector(np.zeros((100, 200, 3), np.uint8))) == 1  # a lone, weak person stays
    found["boxes"] = np.array([[40, 60, 64, 128], [300, 60, 64, 128]]), np.array([[0.3], [0.9]])
    assert len(detector(np.zeros((100, 200, 3), np.uint8))) == 2  # apart: both stay
    bodies.HOGBodies(min_height=48, max_side=330, border=0.1)(np.zeros((100, 200, 3), np.uint8))
    assert seen["shape"][:2] == (180, 330)  # capped at max_side: scale 1.5


def test_the_body_detector_boxes_a_cyclist_on_real_footage():
    """On bikes.mp4 frame 125 (a fixture clip, hand-labelled) one body box holds the labelled
    cyclist, whose face is turned away from the camera."""
    from test_anonymize import ROOT, real_clip

    from maskdp_jax.anonymize.opencv import cv2

    frame = pipeline.read_video(real_clip("bikes.mp4"))[125]
    label = cv2().imread(f"{ROOT}/tests/fixtures/anonymize_people/bikes_125.png",
                         cv2().IMREAD_GRAYSCALE) > 0
    held = []
    for x0, y0, x1, y1, _ in bodies.HOGBodies()(frame):
        x0, y0, x1, y1 = (int(round(v)) for v in (x0, y0, x1, y1))
        held.append(label[max(y0, 0):y1, max(x0, 0):x1].sum() / label.sum())
    assert max(held) > 0.9, held


def _stub(people, faces, found_bodies, outputs):
    """A copy of ``people`` whose detectors return ``faces`` / ``found_bodies`` and whose pose
    model returns ``outputs(crop)`` (a PoseOutput)."""
    seg = copy.copy(people)
    seg.detector = lambda frame: np.asarray(faces, np.float64).reshape(-1, 5)
    seg.body_detector = lambda frame: np.asarray(found_bodies, np.float64).reshape(-1, 5)
    seg._pose = outputs
    return seg


def _output(mask, presence=0.99, roi=None, crop=None):
    pose = np.zeros((pose_lib.NUM_KEYPOINTS, 3), np.float32)
    pose[:] = (45, 40, 1.0)  # every keypoint visible, on the person: anchors the mask
    return pose_lib.PoseOutput(pose, presence, mask, np.asarray(roi if roi is not None
                                                                else crop, np.float64))


def test_a_face_in_a_body_is_one_person_cropped_by_the_body(people):
    """A face whose centre lies in the top of a body box makes one proposal with the body's
    crop; a face elsewhere gets the face crop; a body without a face has no face box."""
    face_in = [40, 12, 50, 24, 0.9]
    face_out = [150, 10, 160, 22, 0.8]
    body_a = [30, 10, 60, 110, 2.0]  # a standing person: the body's crop beats the face's
    body_b = [90, 20, 120, 100, 1.0]
    seg = _stub(people, [face_in, face_out], [body_b, body_a], None)
    rows = seg.proposals(np.zeros((120, 200, 3), np.uint8))
    assert rows.shape == (3, segment.ROW_WIDTH)
    side = segment.FacePeople.BODY_CROP * 100
    np.testing.assert_allclose(rows[0, :4], [45 - side / 2, 60 - side / 2, 45 + side / 2,
                                             60 + side / 2])
    np.testing.assert_allclose(rows[0, 4:9], [40, 12, 50, 24, 1.0])
    assert np.isnan(rows[:, 9:]).all()  # no MoveNet keypoints from a box detector
    assert np.isnan(rows[1, 4:8]).all() and rows[1, 8] == 1.0  # body_b: no face
    np.testing.assert_allclose(rows[2, :4], segment.pose_box(np.asarray(face_out)))
    assert rows[2, 8] == 0.0
    close_up = [30, 15, 90, 55, 0.9]  # a face 40 px tall in a body box of 120: a close-up
    rows = _stub(people, [close_up], [[0, 10, 120, 130, 1.0]], None).proposals(
        np.zeros((200, 200, 3), np.uint8))
    np.testing.assert_allclose(rows[0, :4], segment.pose_box(np.asarray(close_up)))


def test_a_person_cut_by_the_crop_is_segmented_again_and_a_pattern_is_dropped(people):
    """Where the alignment's crop reaches past the first crop the second pass's result is
    used; a face-less body whose second pass sees nobody (a van's front) is dropped, a face's
    person is kept from the first pass; a face-less body with a low presence is dropped."""
    h, w = 120, 200
    first = np.zeros((h, w), bool)
    first[20:60, 30:60] = True
    second = np.zeros((h, w), bool)
    second[20:110, 30:60] = True
    calls = []

    def outputs(second_presence, first_presence=0.99):
        def run(frame, crop):
            calls.append(np.asarray(crop).round(1).tolist())
            if len(calls) % 2:  # first pass: the person runs out of the crop's bottom
                return _output(first, first_presence, roi=[0, 20, 100, 160])
            return _output(second, second_presence, crop=crop)
        return run

    body = [[30, 10, 60, 70, 2.0]]
    video = np.zeros((1, h, w, 3), np.uint8)
    q = _stub(people, [], body, outputs(0.9))(video, "v")
    assert len(calls) == 2 and calls[1] == [0, 20, 100, 160]
    np.testing.assert_array_equal(q[0], second)
    calls.clear()
    assert not _stub(people, [], body, outputs(0.1))(video, "v").any()  # the van rule
    calls.clear()
    face = [[38, 12, 52, 26, 0.9]]
    q = _stub(people, face, [], outputs(0.1))(video, "v")
    np.testing.assert_array_equal(q[0], first)  # a face's person: the first pass stays
    assert len(calls) == 2
    calls.clear()
    assert not _stub(people, [], body, outputs(0.9, first_presence=0.2))(video, "v").any()
    assert len(calls) == 1  # no second pass for a body the model does not see


def test_two_boxes_on_one_person_are_one_person(people):
    """Two proposals one of whose masks lies mostly inside the other (more than SAME_PERSON of
    the smaller) give one pose, not two."""
    mask = np.zeros((120, 200), bool)
    mask[20:100, 30:60] = True
    seg = _stub(people, [], [[28, 10, 62, 100, 2.0], [32, 12, 64, 102, 1.5]],
                lambda frame, crop: _output(mask, crop=crop))
    video = np.zeros((1, 120, 200, 3), np.uint8)
    q = seg(video, "v")
    assert len(seg.poses(video, "v")[0]) == 1
    np.testing.assert_array_equal(q[0], mask)
    part = np.zeros_like(mask)
    part[20:50, 30:60] = True  # a box on the head and chest: its mask lies inside the first
    masks = iter([mask, part])
    seg = _stub(people, [], [[28, 10, 62, 100, 2.0], [30, 10, 60, 50, 1.0]],
                lambda frame, crop: _output(next(masks), crop=crop))
    seg(video, "v")
    assert len(seg.poses(video, "v")[0]) == 1


def test_a_carried_person_needs_the_pose_model_to_see_them_and_a_detected_face_does_not(people):
    """A face carried into a frame where it was not detected is kept only where BlazePose's
    presence reaches ``presence``; a face detected in its frame is kept whatever the score."""
    mask = np.zeros((120, 200), bool)
    mask[20:60, 30:60] = True
    face = [[38, 12, 52, 26, 0.9]]
    faces_per_frame = iter([face, [], face])

    seg = copy.copy(people)
    seg.detector = lambda frame: np.asarray(next(faces_per_frame), np.float64).reshape(-1, 5)
    seg.body_detector = None
    for presence, kept in ((0.2, [True, False, True]), (0.9, [True, True, True])):
        faces_per_frame = iter([face, [], face])
        seg.detector = lambda frame, it=faces_per_frame: np.asarray(
            next(it), np.float64).reshape(-1, 5)
        seg._pose = lambda frame, crop, p=presence: _output(mask, p, crop=crop)
        q = seg(np.zeros((3, 120, 200, 3), np.uint8), "v")
        assert q.any(axis=(1, 2)).tolist() == kept, presence


def test_each_person_is_carried_over_the_frames_they_are_missed():
    """A person missed in a frame where others are found is carried from the nearest frame
    that has them, at most max_gap frames; people elsewhere do not block it."""
    a = np.array([[10.0, 10, 30, 70]])
    b = np.array([[100.0, 10, 120, 70]])
    both = np.concatenate([a, b])
    frames = [both, b, b, b, both]  # a missed in frames 1..3
    out = segment.fill_gaps(frames, max_gap=1)
    assert [len(f) for f in out] == [2, 2, 1, 2, 2]
    np.testing.assert_array_equal(out[1][1], a[0])  # own rows first, then the carried
    np.testing.assert_array_equal(out[3][1], a[0])
    assert [len(f) for f in segment.fill_gaps(frames, max_gap=2)] == [2] * 5
    assert [len(f) for f in segment.fill_gaps(frames, max_gap=0)] == [2, 1, 1, 1, 2]
    moved = np.array([[14.0, 12, 34, 72]])  # the same person a few px on: not a second one
    assert len(segment.fill_gaps([a, moved], max_gap=1)[1]) == 1
    walker = [a + [6.0 * t, 0, 6.0 * t, 0] for t in range(9)]  # a tenth of their height a frame
    assert [len(f) for f in segment.fill_gaps(walker, max_gap=4)] == [1] * 9  # no ghosts
    assert [len(t) for t in segment.tracks(walker, max_gap=4)] == [9]
    empty = [np.zeros(0), a]  # an empty frame may come as a flat array
    assert [f.shape for f in segment.fill_gaps(empty, max_gap=1)] == [(1, 4), (1, 4)]
    nobody = [np.zeros((0, segment.ROW_WIDTH))] * 2  # rows of their width, even without a row
    assert [f.shape for f in segment.fill_gaps(nobody, max_gap=1)] == [(0, segment.ROW_WIDTH)] * 2


def test_the_gap_filler_holds_a_few_frames_whatever_the_video_s_length():
    """Streamed frame by frame, the filler returns each frame once, max_gap frames later, and
    keeps the rows of O(max_gap) frames and only the people who can still be linked or
    carried: a long video with a walker and a person flashing in and out does not grow it."""
    g = 3
    filler = segment.GapFiller(g)
    walker = np.array([[10.0, 10, 30, 70]])
    flash = np.array([[150.0, 10, 170, 70]])
    rows = [walker + [0.5 * t, 0, 0.5 * t, 0] if t % 50 else
            np.concatenate([walker + [0.5 * t, 0, 0.5 * t, 0], flash]) for t in range(2000)]
    out, held = [], 0
    for t, frame in enumerate(rows):
        out += filler.push(frame)
        assert len(out) == max(t + 1 - g, 0)  # a frame is final g frames later
        held = max(held, len(filler.tracks.rows), len(filler.tracks.people))
    out += filler.close()
    assert len(out) == len(rows) and held <= 2 * g + 2
    # the flash of frame 50 carried g frames either side, the walker never doubled
    assert [len(f) for f in out[45:56]] == [1, 1] + [2] * 7 + [1, 1]
    assert max(len(f) for f in out[54:]) == 2 and min(len(f) for f in out) == 1


def test_the_segmenter_streamed_in_windows_equals_the_whole_video(people):
    """FacePeople over windows of 1, 2 or 5 frames gives the whole video's masks and poses
    (what the pipeline reads a long video with): a person found from frame 2 on is carried
    back to frames 0 and 1, and one missed in frame 5 over it, which a window that ended
    before has not seen yet."""
    face = [[40, 12, 50, 24, 0.9]]
    seen = [[], [], face, face, face, [], face]
    masks = [np.zeros((120, 200), bool) for _ in range(7)]
    for i, m in enumerate(masks):
        m[30 + i: 100, 35:60] = True

    def make():
        seg = _stub(people, [], [], None)
        seg.detector = lambda frame: np.asarray(seen[int(frame[0, 0, 0])],
                                                np.float64).reshape(-1, 5)
        seg._pose = lambda frame, crop: _output(masks[int(frame[0, 0, 0])], crop=crop)
        return seg

    video = np.zeros((7, 120, 200, 3), np.uint8)
    video[:, 0, 0, 0] = np.arange(7)  # the stubs read the frame's index here
    seg = make()
    whole = seg(video, "v")
    poses = seg.poses(video, "v")
    assert whole.any(axis=(1, 2)).all()  # carried back, and over the gap
    for window in (1, 2, 5):
        stream = make().stream("v")
        parts = [stream.push(video[lo:lo + window]) for lo in range(0, 7, window)]
        parts.append(stream.close())
        np.testing.assert_array_equal(np.concatenate([q for q, _ in parts]), whole)
        got = [p for _, found_poses in parts for p in found_poses]
        assert len(got) == 7
        for a, b in zip(got, poses, strict=True):
            np.testing.assert_array_equal(a, b)


def test_body_settings_reach_the_segmenter_and_bad_ones_are_refused():
    from maskdp_jax.configs import anonymize as config_lib

    config = config_lib.get_config()
    assert config.segment.bodies == "movenet"  # the default; HOG's settings below
    config.segment.bodies = "hog"
    config.segment.body_min_height = 64
    config.segment.presence = 0.7
    seg = pipeline.build_stages(config)[0].segmenter
    assert seg.body_detector.min_height == 64 and seg.presence == 0.7
    assert "HOG people detector" in seg.model
    config.segment.refine = "grabcut"
    with pytest.raises(InputError, match="bodies='hog' needs refine='pose'"):
        pipeline.build_stages(config)
    config.segment.bodies = "none"
    assert pipeline.build_stages(config)[0].segmenter.body_detector is None
    config.segment.bodies = "yolo"
    with pytest.raises(InputError, match="bodies must be .movenet., .hog. or .none."):
        pipeline.build_stages(config)


def test_ntu_skeletons_give_the_avatar_its_poses(tmp_path):
    """Kinect joints land on the BlazePose keypoints they correspond to, scaled to the video,
    visibility from the tracking state; PoseFiles reads the skeleton where no .json exists."""
    body = _body(JOINTS, untracked=(5,))  # the left elbow untracked
    body[2 + 4] = body[2 + 4][:-1] + "1"  # the left shoulder (joint 4) inferred
    (tmp_path / "S001C001P001R001A001.skeleton").write_text(
        "\n".join(["2", "1", *body, "0"]) + "\n")
    video = np.zeros((2, 540, 960, 3), np.uint8)  # half of NTU's 1920 x 1080
    poses = pose_lib.PoseFiles(str(tmp_path))(video, "S001C001P001R001A001_rgb.avi")
    assert [p.shape for p in poses] == [(1, 33, 3), (0, 33, 3)]
    pose = poses[0][0]
    kinect = {"head": 3, "left_shoulder": 4, "left_elbow": 5, "left_wrist": 6,
              "right_shoulder": 8, "right_elbow": 9, "right_wrist": 10, "left_hip": 12,
              "left_knee": 13, "left_ankle": 14, "left_foot": 15, "right_hip": 16,
              "right_knee": 17, "right_ankle": 18, "right_foot": 19, "left_hand_tip": 21,
              "left_thumb": 22, "right_hand_tip": 23, "right_thumb": 24}  # NTU's joint order
    blazepose = {"head": "nose", "left_foot": "left_foot_index",
                 "right_foot": "right_foot_index", "left_hand_tip": "left_index",
                 "right_hand_tip": "right_index"}
    assert len(skeletons.TO_BLAZEPOSE) == len(kinect)
    for name, joint in kinect.items():
        keypoint = pose_lib.KEYPOINTS.index(blazepose.get(name, name))
        assert skeletons.TO_BLAZEPOSE[joint] == keypoint, name
        x, y = JOINTS[joint]
        expected = {5: 0.0, 4: 0.5}.get(joint, 1.0)
        np.testing.assert_allclose(pose[keypoint], [x / 2, y / 2, expected])
    assert pose[1:11, 2].max() == 0  # eyes, ears, mouth: no Kinect joint
    assert len(pose_lib.check_poses(poses, 2, "k")) == 2
    joints = np.array([[x, y, 2.0] for x, y in JOINTS])
    joints[4, :2] = np.nan  # a joint without coordinates: invisible, not a NaN pose
    one = pose_lib.pose_from_joints(joints, (540, 960))
    assert np.isfinite(one).all() and one[11, 2] == 0
