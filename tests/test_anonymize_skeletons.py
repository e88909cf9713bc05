"""Person boxes from NTU RGB+D's own skeleton files (anonymize/skeletons.py) under the ``boxes``
read mode: the file format as the dataset writes it, the boxes it gives, the segmenter that reads
it, and every malformed file refused with its name and line."""

import numpy as np
import pytest

from maskdp_jax.anonymize import segment, skeletons
from maskdp_jax.anonymize.stages import InputError

# One body's 25 joints in NTU's 1920 x 1080 colour space: a standing person from y = 300 (head
# joint) to 900 (feet), x 800..1000; joint 7 untracked (its coordinates must not count).
JOINTS = [(800 + 8 * j, 300 + 25 * j) for j in range(25)]


def _body(joints, untracked=(7,)):
    lines = ["72057594037931101 0 1 1 1 1 0 0.1 0.1 2", str(len(joints))]
    for j, (x, y) in enumerate(joints):
        state = 0 if j in untracked else 2
        lines.append(f"0.1 0.2 3.0 250.0 200.0 {x} {y} 0.5 0.5 0.5 0.5 {state}")
    return lines


def write_skeleton(path, frames):
    """``frames``: per frame, a list of bodies (each a list of (colorX, colorY))."""
    lines = [str(len(frames))]
    for bodies in frames:
        lines.append(str(len(bodies)))
        for joints in bodies:
            lines += _body(joints)
    path.write_text("\n".join(lines) + "\n")


def test_the_file_names_and_the_boxes_of_tracked_joints_scaled_to_the_video(tmp_path):
    assert skeletons.skeleton_path("d", "S001C001P001R001A001_rgb.avi") == \
        "d/S001C001P001R001A001.skeleton"
    assert skeletons.skeleton_path("d", "a/clip.mp4") == "d/a/clip.skeleton"
    shifted = [(x + 100, y) for x, y in JOINTS]
    far = list(JOINTS)
    far[7] = (5000, 5000)  # untracked: ignored
    write_skeleton(tmp_path / "v.skeleton", [[JOINTS], [], [far, shifted]])
    boxes = skeletons.read_boxes(str(tmp_path / "v.skeleton"), 3, (540, 960))  # half size
    assert [len(b) for b in boxes] == [1, 0, 2]
    xs = [x for j, (x, _) in enumerate(JOINTS) if j != 7]
    ys = [y for j, (_, y) in enumerate(JOINTS) if j != 7]
    tall = (max(ys) - min(ys)) / 2
    top, bottom, side = skeletons.PAD
    np.testing.assert_allclose(boxes[0][0], [min(xs) / 2 - side * tall, min(ys) / 2 - top * tall,
                                             max(xs) / 2 + side * tall,
                                             max(ys) / 2 + bottom * tall])
    np.testing.assert_allclose(boxes[2][0], boxes[0][0])
    np.testing.assert_allclose(boxes[2][1] - boxes[2][0], [50, 0, 50, 0])


def test_grabcut_reads_the_skeleton_when_no_box_file_is_there(tmp_path):
    """The segment's box reader takes NTU's skeleton (after the ``_rgb`` stem rule) where no
    ``.json`` box file exists, clipped to the frame, and reads only boxes."""
    write_skeleton(tmp_path / "S001C001P001R001A001.skeleton", [[JOINTS], [JOINTS]])
    boxes = segment.read_boxes(str(tmp_path), "S001C001P001R001A001_rgb.avi", 2, (108, 192))
    assert [b.shape for b in boxes] == [(1, 4), (1, 4)]
    assert boxes[0].dtype == np.int64 and (boxes[0][:, [0, 2]] <= 192).all()
    seg = segment.GrabCutPeople(boxes_dir=str(tmp_path))
    assert seg.reads == "boxes"
    with pytest.raises(InputError, match=r"no person boxes in .* \(looked for .*other\.json and "
                       r"the NTU skeleton file .*other\.skeleton\)"):
        segment.read_boxes(str(tmp_path), "other.avi", 2, (108, 192))


@pytest.mark.parametrize("text, match", [
    ("2\n1\n", r"ends before its body line of frame 0"),
    ("1\n1\n1 2 3\n", r"line 3: expected 10 numbers \(body line of frame 0\); got 3"),
    ("1\n1\n" + "\n".join(_body(JOINTS[:2])).replace("250.0", "x", 1) + "\n",
     r"line 5: joint of frame 0 is not numbers"),
    ("1.5\n", r"line 1: frame count must be a whole number >= 0; got 1.5"),
    ("", r"ends before its frame count"),
])
def test_a_malformed_skeleton_file_is_refused_with_its_line(tmp_path, text, match):
    path = tmp_path / "v.skeleton"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        skeletons.read_joints(str(path))


def test_a_skeleton_of_another_length_than_the_video_is_refused(tmp_path):
    write_skeleton(tmp_path / "v.skeleton", [[JOINTS]] * 3)
    with pytest.raises(InputError, match="3 skeleton frames for a video of 4 frames"):
        skeletons.read_boxes(str(tmp_path / "v.skeleton"), 4, (1080, 1920))
    with pytest.raises(InputError, match="cannot read"):
        skeletons.read_joints(str(tmp_path / "missing.skeleton"))
