"""The held-out anonymisation benchmark's labels and counting (benchmarks/anonymize_heldout.py,
benchmarks/anonymize_quality.py --heldout): the label file's layout, the split that defaults were
chosen on kept apart from the one reported, the columns a person counts in, and the message when
the sample frames are missing."""

from __future__ import annotations

import pytest

from benchmarks import anonymize_heldout, anonymize_quality


def test_the_labels_are_well_formed_and_the_splits_disjoint():
    views = {"front", "side", "back"}
    tags = {"edge", "distant", "occluded"}
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
        if "file" in clip:
            ranges.setdefault(clip["file"], []).append(
                (clip["start"], clip["start"] + clip["frames"], clip["split"]))
    for file, spans in ranges.items():  # no frame of a video in both splits
        for a0, a1, sa in spans:
            for b0, b1, sb in spans:
                assert sa == sb or a1 <= b0 or b1 <= a0, file


def test_people_count_in_their_view_or_their_tags_and_in_all():
    people = [{"view": "back", "tags": [], "found": True},
              {"view": "back", "tags": ["edge"], "found": False},
              {"view": "front", "tags": ["distant"], "found": True},
              {"view": "side", "tags": ["occluded"], "found": False}]
    counts = anonymize_heldout.count(people, "found")
    assert counts == {"front": (0, 0), "side": (0, 0), "back": (1, 1), "distant": (1, 1),
                      "edge": (0, 1), "all": (2, 4)}
    rows = [{"method": "m", "people": people[:2]}, {"method": "m", "people": people[2:]},
            {"method": "other", "people": people}]
    assert anonymize_quality.found(rows, "m") == counts


def test_missing_sample_frames_say_how_to_fetch_them(tmp_path):
    with pytest.raises(SystemExit, match=r"lacks .*vtest\.avi.*--fetch"):
        anonymize_heldout.samples(str(tmp_path), fetch=False)
