"""The held-out anonymisation benchmark's labels and counting (benchmarks/anonymize_heldout.py,
benchmarks/anonymize_quality.py --heldout): the label file's layout, the split that defaults were
chosen on kept apart from the one reported, the columns a person counts in, and the message when
the sample frames are missing."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from benchmarks import anonymize_heldout, anonymize_quality


def test_the_labels_are_well_formed_and_the_splits_disjoint():
    views = {"front", "side", "back"}
    tags = {"edge", "distant", "occluded", "group", "partial"}
    test, validation = anonymize_heldout.clips("test"), anonymize_heldout.clips("validation")
    assert test and validation and not set(test) & set(validation)
    ranges = {}
    for name, clip in {**test, **validation}.items():
        num = len(clip["files"]) if "files" in clip else clip["frames"]
        for frame, rows in clip["people"].items():
            assert 0 <= int(frame) < num, name
            for x0, y0, x1, y1, view, *extra in rows:
                assert x0 < x1 and y0 < y1 and view in views and set(extra) <= tags, name
        for frame, polygons in clip.get("legs", {}).items():
            assert frame in clip["people"] and all(len(p) >= 3 for p in polygons), name
        if "still" in clip:  # its people per labelled frame, inside the frame
            width, height = clip["size"]
            assert set(clip["people"]) == {str(i) for i in clip["labelled"]}, name
            for rows in clip["people"].values():
                assert all(0 <= r[0] < r[2] <= width and 0 <= r[1] < r[3] <= height
                           and set(clip["tags"]) <= set(r[5:]) for r in rows), name
        if "file" in clip:
            ranges.setdefault(clip["file"], []).append(
                (clip["start"], clip["start"] + clip["frames"], clip["split"]))
    for file, spans in ranges.items():  # no frame of a video in both splits
        for a0, a1, sa in spans:
            for b0, b1, sb in spans:
                assert sa == sb or a1 <= b0 or b1 <= a0, file


def test_the_groups_and_partial_people_are_split_by_person_not_by_frame():
    """The team photo's people are validation on its left, test on its right: no person is
    labelled in both splits (the photograph is shared, its people are not)."""
    with open(anonymize_heldout.LABELS) as f:
        labelled = json.load(f)["clips"]
    raw = {}
    for clip in labelled.values():
        if "still" in clip:
            seen = {k for k, row in clip["people"].items()  # labelled in a frame of the clip
                    if any(anonymize_heldout.camera_people({**clip, "people": {k: row}}).values())}
            raw.setdefault(clip["still"], {}).setdefault(clip["split"], set()).update(seen)
    assert {"group3.jpg", "group1.jpg"} <= set(raw)
    assert raw["group3.jpg"]["validation"] and raw["group3.jpg"]["test"]
    assert not raw["group3.jpg"]["validation"] & raw["group3.jpg"]["test"]
    assert set(raw["group1.jpg"]) == {"test"}


def _still_clip(**extra) -> dict:
    return {"still": "still.png", "frames": 3, "size": [80, 60], "labelled": [0, 2],
            "camera": [[0, 0, 160, 120], [40, 30, 120, 90]], "tags": ["group"],
            "people": {"a": [50, 40, 70, 100, "front"],      # inside every window
                       "b": [0, 0, 30, 50, "back", "occluded"],  # left by the zoom
                       "c": [100, 20, 130, 110, "side"]},   # cut by the zoom's right edge
            **extra}


def test_a_stills_people_follow_the_camera_window():
    people = anonymize_heldout.camera_people(_still_clip())
    # frame 0 shows the whole 160 x 120 still at half size: every box halved, none cut
    assert people["0"] == [[25, 20, 35, 50, "front", "group"],
                           [0, 0, 15, 25, "back", "occluded", "group"],
                           [50, 10, 65, 55, "side", "group"]]
    # frame 2 shows [40, 30, 120, 90] at full size: a moved and cut, b gone, c cut on the
    # right and bottom, 20/30 x 60/90 of it showing (0.44 < MIN_VISIBLE): gone as well
    assert people["2"] == [[10, 10, 30, 60, "front", "group", "edge"]]
    wide = anonymize_heldout.camera_people(_still_clip(camera=[[0, 0, 160, 120],
                                                               [20, 0, 120, 75]]))
    # c keeps 20/30 x 55/90 = 0.41 of its box: still gone; a loses 25/60 of its height: edge
    assert wide["2"] == [[24, 32, 40, 60, "front", "group", "edge"]]


def test_a_stills_frames_are_its_camera_windows(tmp_path):
    rng = np.random.default_rng(0)
    still = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    cv2.imwrite(str(tmp_path / "still.png"), still[..., ::-1])
    clip = _still_clip(camera=[[0, 0, 160, 120], [40, 30, 120, 90]], size=[160, 120])
    frames = anonymize_heldout.frames(clip, str(tmp_path))
    assert frames.shape == (3, 120, 160, 3)
    np.testing.assert_array_equal(frames[0], still)  # the whole still, unscaled
    # the last frame is the window [40, 30, 120, 90] twice as large: its pixel (2x, 2y) is the
    # still's (40 + x, 30 + y)
    np.testing.assert_array_equal(frames[2][::2, ::2], still[30:90, 40:120])


def test_people_count_in_their_view_or_their_tags_and_in_all():
    people = [{"view": "back", "tags": [], "found": True},
              {"view": "back", "tags": ["edge"], "found": False},
              {"view": "front", "tags": ["distant"], "found": True},
              {"view": "side", "tags": ["occluded"], "found": False}]
    people += [{"view": "front", "tags": ["group", "edge"], "found": True},
               {"view": "front", "tags": ["partial"], "found": False}]
    counts = anonymize_heldout.count(people, "found")
    assert counts == {"front": (0, 0), "side": (0, 0), "back": (1, 1), "distant": (1, 1),
                      "edge": (1, 2), "group": (1, 1), "partial": (0, 1), "all": (3, 6)}
    rows = [{"method": "m", "people": people[:2]}, {"method": "m", "people": people[2:]},
            {"method": "other", "people": people}]
    assert anonymize_quality.found(rows, "m") == counts


def test_missing_sample_frames_say_how_to_fetch_them(tmp_path):
    with pytest.raises(SystemExit, match=r"lacks .*vtest\.avi.*--fetch"):
        anonymize_heldout.samples(str(tmp_path), fetch=False)
