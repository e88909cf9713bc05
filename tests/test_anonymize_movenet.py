"""One instance per person (anonymize/movenet.py and FacePeople with ``bodies="movenet"``): the
model's output decoded into frame pixels, a real cyclist found, the skeletons that split a mask
covering two people, two people side by side kept as two people with two poses, the split among
the people kept only, and people the frame cuts (``edge_people``)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_anonymize_bodies import _output

from maskdp_jax.anonymize import movenet, pipeline, segment
from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.anonymize.stages import InputError


def _raw(people):
    """The model's ``[6, 56]`` output for ``people``: (keypoints [17, 3] as (x, y, score) in
    [0, 1], box (x0, y0, x1, y1) in [0, 1], score)."""
    raw = np.zeros((movenet.MAX_PEOPLE, 56), np.float32)
    for i, (kp, box, score) in enumerate(people):
        kp = np.asarray(kp, np.float32)
        raw[i, :51] = np.stack([kp[:, 1], kp[:, 0], kp[:, 2]], 1).ravel()
        raw[i, 51:55] = box[1], box[0], box[3], box[2]
        raw[i, 55] = score
    return raw


def test_the_output_is_decoded_into_frame_pixels_best_first():
    """(y, x) in [0, 1] of the padded input -> (x, y) frame pixels; weak candidates dropped,
    the rest by score."""
    kp = np.tile([[0.25, 0.5, 0.9]], (17, 1))
    raw = _raw([(kp, (0.1, 0.2, 0.3, 0.8), 0.4), (kp * [2, 1, 1], (0.5, 0.2, 0.6, 0.8), 0.9),
                (kp, (0.0, 0.0, 0.1, 0.1), 0.05)])
    people = movenet.decode(raw, height=640, width=1280, threshold=0.2)
    assert people.boxes.shape == (2, 5) and people.keypoints.shape == (2, 17, 3)
    np.testing.assert_allclose(people.boxes[:, 4], [0.9, 0.4], rtol=1e-6)
    np.testing.assert_allclose(people.boxes[1, :4], [128, 128, 384, 512], rtol=1e-6)
    np.testing.assert_allclose(people.keypoints[0, 0], [640, 320, 0.9], rtol=1e-6)
    assert movenet.decode(raw, 640, 1280, threshold=0.95).boxes.shape == (0, 5)


def test_the_input_keeps_the_aspect_in_multiples_of_32_and_bad_settings_are_refused():
    m = movenet.MoveNetPeople(side=256)
    s, ih, iw = m.input_size(480, 640)
    assert (s, ih, iw) == (0.4, 192, 256)
    assert m.input_size(1080, 1920)[1:] == (160, 256)  # 144 rows padded to 160
    for bad in (dict(side=100), dict(side=250), dict(threshold=1.0), dict(threads=0)):
        with pytest.raises(InputError, match="MoveNetPeople needs"):
            movenet.MoveNetPeople(**bad)


def test_movenet_finds_the_cyclist_on_real_footage():
    """On bikes.mp4 frame 125 (hand-labelled fixture) one instance's box holds the cyclist,
    whose face is turned away, and most of its confident keypoints lie on him."""
    from test_anonymize import ROOT, real_clip

    from maskdp_jax.anonymize.opencv import cv2

    frame = pipeline.read_video(real_clip("bikes.mp4"))[125]
    label = cv2().imread(f"{ROOT}/tests/fixtures/anonymize_people/bikes_125.png",
                         cv2().IMREAD_GRAYSCALE) > 0
    people = movenet.MoveNetPeople(side=512)(frame)
    assert len(people.boxes)
    held, on = [], []
    for (x0, y0, x1, y1, _), kp in zip(people.boxes, people.keypoints, strict=True):
        x0, y0, x1, y1 = (int(round(v)) for v in (x0, y0, x1, y1))
        held.append(label[max(y0, 0):y1, max(x0, 0):x1].sum() / label.sum())
        sure = kp[kp[:, 2] > 0.3]
        near = cv2().dilate(label.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0
        on.append(near[sure[:, 1].astype(int).clip(0, label.shape[0] - 1),
                       sure[:, 0].astype(int).clip(0, label.shape[1] - 1)].mean()
                  if len(sure) else 0.0)
    best = int(np.argmax(held))
    assert held[best] > 0.85 and on[best] > 0.7, (held, on)
    again = movenet.MoveNetPeople(side=512)(frame)  # deterministic: the mask is a function
    np.testing.assert_array_equal(again.keypoints, people.keypoints)


def _skeleton(cx: float, top: float, height: float) -> np.ndarray:
    """float32 ``[17, 3]``: an upright person's keypoints, every one confident."""
    rel = {0: (0, 0.06), 1: (-0.02, 0.05), 2: (0.02, 0.05), 3: (-0.04, 0.06), 4: (0.04, 0.06),
           5: (-0.1, 0.2), 6: (0.1, 0.2), 7: (-0.12, 0.35), 8: (0.12, 0.35), 9: (-0.12, 0.48),
           10: (0.12, 0.48), 11: (-0.06, 0.52), 12: (0.06, 0.52), 13: (-0.06, 0.75),
           14: (0.06, 0.75), 15: (-0.06, 0.97), 16: (0.06, 0.97)}
    return np.asarray([[cx + dx * height, top + dy * height, 0.9] for dx, dy in
                       (rel[k] for k in range(17))], np.float32)


def test_the_skeletons_split_the_frame_between_people():
    left, right = _skeleton(60, 10, 100), _skeleton(100, 10, 100)
    split = movenet.instance_map(np.stack([left, right]), (120, 200), 0.3)
    assert split[60, 40] == 0 and split[60, 120] == 1 and split[60, 79] == 0
    assert split[60, 81] == 1
    hidden = right.copy()
    hidden[:, 2] = 0.1  # nothing confident: that person owns no pixel
    assert (movenet.instance_map(np.stack([left, hidden]), (120, 200), 0.3) == 0).all()


@pytest.fixture(scope="module")
def movenet_people():
    return segment.FacePeople(bodies="movenet")


def _group_stub(people, instances, faces=()):
    """``people`` whose face detector returns ``faces``, whose body detector returns MoveNet
    ``instances`` (keypoints [17, 3] each) and whose pose model segments both people in every
    crop and always poses the left one (what BlazePose does with a neighbour in its crop)."""
    seg = copy.copy(people)
    kp = np.stack(instances)
    boxes = np.concatenate([kp[:, :, :2].min(1), kp[:, :, :2].max(1),
                            np.linspace(0.9, 0.8, len(kp))[:, None]], 1)
    seg.detector = lambda frame: np.asarray(faces, np.float64).reshape(-1, 5)
    seg.body_detector = lambda frame: movenet.People(boxes.astype(np.float64), kp)
    both = np.zeros((120, 200), bool)
    both[10:110, 45:115] = True
    left_pose = movenet.as_blazepose(instances[0])

    def pose(frame, crop):
        out = _output(both, crop=crop)
        return out._replace(pose=left_pose)

    seg._pose = pose
    return seg, both


def test_two_people_side_by_side_are_two_people_with_their_own_poses(movenet_people):
    """Two MoveNet instances touching: one mask over both, one pose (the left person's) from the
    pose model in both crops. Each keeps their own pose (the right one MoveNet's, since the pose
    model's lies on the left person) and the half of the mask nearer their skeleton; with the
    same boxes and no keypoints (a box detector) the second is dropped as a second box on the
    first, as before."""
    left, right = _skeleton(60, 10, 100), _skeleton(100, 10, 100)
    seg, both = _group_stub(movenet_people, [left, right])
    video = np.zeros((1, 120, 200, 3), np.uint8)
    q = seg(video, "v")
    np.testing.assert_array_equal(q[0], both)
    poses = seg.poses(video, "v")[0]
    assert poses.shape == (2, pose_lib.NUM_KEYPOINTS, 3)
    noses = sorted(poses[:, 0, 0].tolist())
    np.testing.assert_allclose(noses, [60, 100], atol=1e-4)
    boxes_only = copy.copy(seg)
    found = seg.body_detector(video[0])
    boxes_only.body_detector = lambda frame: found.boxes
    boxes_only(video, "v")
    assert len(boxes_only.poses(video, "v")[0]) == 1


def test_a_face_belongs_to_the_instance_whose_head_keypoints_it_holds(movenet_people):
    """A face around the right person's nose is theirs, though its centre also lies in the top
    of the left person's box (wide boxes of people side by side overlap)."""
    left, right = _skeleton(60, 10, 100), _skeleton(70, 10, 100)
    seg, _ = _group_stub(movenet_people, [left, right], faces=[[65, 11, 77, 21, 0.9]])
    rows = seg.proposals(np.zeros((120, 200, 3), np.uint8))
    assert rows.shape == (2, segment.ROW_WIDTH)
    owner = rows[~np.isnan(rows[:, 4])]
    assert len(owner) == 1
    np.testing.assert_allclose(owner[0, 9:12], right[0])  # the right person's nose


def test_movenet_settings_reach_the_segmenter():
    from maskdp_jax.configs import anonymize as config_lib

    config = config_lib.get_config()
    config.segment.bodies = "movenet"
    config.segment.movenet_side = 384
    config.segment.movenet_score = 0.3
    config.segment.movenet_tiles = True
    config.segment.edge_people = True
    seg = pipeline.build_stages(config)[0].segmenter
    assert isinstance(seg.body_detector, movenet.MoveNetPeople)
    assert (seg.body_detector.side, seg.body_detector.threshold) == (384, 0.3)
    assert seg.body_detector.tiles and seg.edge_people
    assert "movenet_multipose_lightning.tflite" in seg.model and "Apache-2.0" in seg.model
    config.segment.refine = "grabcut"
    with pytest.raises(InputError, match="bodies='movenet' needs refine='pose'"):
        pipeline.build_stages(config)


def _people(boxes):
    """People with these boxes ``(x0, y0, x1, y1, score)`` and a keypoint at each box centre."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 5)
    kp = np.zeros((len(boxes), 17, 3), np.float32)
    kp[:, :, 0] = ((boxes[:, 0] + boxes[:, 2]) / 2)[:, None]
    kp[:, :, 1] = ((boxes[:, 1] + boxes[:, 3]) / 2)[:, None]
    kp[:, :, 2] = 0.9
    return movenet.People(boxes, kp)


def test_a_crowd_past_the_models_six_is_searched_again_in_halves(monkeypatch):
    """Six people in the whole frame (the model's limit) -> two overlapping halves are searched
    too, their people moved to frame pixels and merged by their joints: a person found twice
    (whole frame and a tile, cut by its edge) is kept once, the better instance, and a small
    person inside another's box stays; fewer than six -> no tiles."""
    detector = movenet.MoveNetPeople(side=256, tiles=True)
    whole = [[20 + 60 * i, 10, 50 + 60 * i, 90, 0.5] for i in range(6)]  # x 20 .. 350
    calls, crowd = [], {"size": 6}

    def people(frame):
        calls.append(frame.shape[:2])
        if frame.shape[1] == 600:
            return _people(whole[:crowd["size"]])
        if len(calls) == 2:  # the left tile (0 .. 360): person 5 again, cut; someone new;
            # a small person in front of person 2, inside their box, their joints elsewhere
            return _people([[320, 10, 360, 90, 0.7], [100, 100, 130, 190, 0.6],
                            [150, 20, 160, 40, 0.3]])
        return _people([[400 - 240, 10, 430 - 240, 90, 0.8]])  # the right tile (240 .. 600)

    monkeypatch.setattr(detector, "_people", people)
    found = detector(np.zeros((200, 600, 3), np.uint8))
    assert calls == [(200, 600), (200, 360), (200, 360)]
    boxes = found.boxes
    assert len(boxes) == 9 and list(boxes[:, 4]) == sorted(boxes[:, 4], reverse=True)
    np.testing.assert_allclose(boxes[0], [400, 10, 430, 90, 0.8])  # shifted by the tile's start
    np.testing.assert_allclose(found.keypoints[0, 0, :2], [415, 50])
    assert [320, 10, 360, 90, 0.7] in boxes.tolist()  # better than the whole frame's person 5
    assert [320, 10, 350, 90, 0.5] not in boxes.tolist()
    assert [150, 20, 160, 40, 0.3] in boxes.tolist()
    calls.clear()
    crowd["size"] = 5
    assert len(detector(np.zeros((200, 600, 3), np.uint8)).boxes) == 5 and len(calls) == 1
    no_tiles = movenet.MoveNetPeople(side=256)  # the default
    monkeypatch.setattr(no_tiles, "_people", lambda frame: _people(whole))
    assert len(no_tiles(np.zeros((200, 600, 3), np.uint8)).boxes) == 6


def test_a_dropped_instance_takes_no_pixel_from_its_kept_neighbour(movenet_people):
    """Two instances over one mask: the right one's crop holds nobody (the pose model's presence
    is low there: a person-like pattern), so it is dropped, and the skeletons split the mask
    among the people kept only: the left person keeps all of it (private), none of it goes
    to the dropped one's side and becomes public."""
    left, right = _skeleton(60, 10, 100), _skeleton(100, 10, 100)
    seg, both = _group_stub(movenet_people, [left, right])
    posed = seg._pose
    seg._pose = lambda frame, crop: posed(frame, crop)._replace(
        presence=0.9 if (crop[0] + crop[2]) / 2 < 80 else 0.1)
    video = np.zeros((1, 120, 200, 3), np.uint8)
    np.testing.assert_array_equal(seg(video, "v")[0], both)
    assert len(seg.poses(video, "v")[0]) == 1


def test_a_person_movenet_barely_sees_keeps_the_pose_models_pose_and_mask(movenet_people):
    """An instance none of whose keypoints MoveNet is sure of (scores under
    ``KEYPOINT_SCORE``) cannot be compared with the pose model's pose: it keeps that pose, and
    its own mask is not split away by its neighbour's skeleton; it stays private."""
    left, right = _skeleton(60, 10, 100), _skeleton(100, 10, 100)
    seen_right = right.copy()
    right[:, 2] = 0.2
    seg, both = _group_stub(movenet_people, [left, right])
    halves = {True: np.zeros_like(both), False: np.zeros_like(both)}
    halves[True][:, :80], halves[False][:, 80:] = both[:, :80], both[:, 80:]

    def pose(frame, crop):  # each crop: that person's half and a pose on it
        is_left = (crop[0] + crop[2]) / 2 < 80
        return _output(halves[is_left], crop=crop)._replace(
            pose=movenet.as_blazepose(left if is_left else seen_right))

    seg._pose = pose
    video = np.zeros((1, 120, 200, 3), np.uint8)
    np.testing.assert_array_equal(seg(video, "v")[0], both)
    poses = seg.poses(video, "v")[0]
    assert len(poses) == 2 and (poses[:, :, 2] > segment.VISIBLE).any(1).all()


def test_edge_people_keeps_a_person_whose_alignment_leaves_the_frame(movenet_people):
    """A face-less instance at the bottom edge (legs only) whose pose the model aligns past the
    frame: the crop made from that alignment is mostly outside and finds nobody. Dropped by
    default; kept with ``edge_people``. An alignment that leaves the crop but stays inside the
    frame (a van's front) is dropped either way."""
    legs = _skeleton(100, 40, 100)  # the person's feet lie below the 120 px frame
    video = np.zeros((1, 120, 200, 3), np.uint8)

    def run(roi, edge_people):
        seg, both = _group_stub(movenet_people, [legs])
        seg.edge_people = edge_people

        def pose(frame, crop):
            regrown = np.allclose(crop, roi)  # the second crop, from the alignment
            return _output(both, presence=0.05 if regrown else 0.9, roi=roi)

        seg._pose = pose
        return seg(video, "v")[0], both

    past_frame = np.asarray([30.0, -20.0, 170.0, 120.0])  # leaves the frame's top edge
    q, both = run(past_frame, edge_people=False)
    assert not q.any()
    q, both = run(past_frame, edge_people=True)
    np.testing.assert_array_equal(q, both)
    inside = np.asarray([10.0, 0.0, 118.0, 108.0])  # past the crop, inside the frame
    for edge_people in (False, True):
        assert not run(inside, edge_people)[0].any()
