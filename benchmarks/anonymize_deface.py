r"""deface (ORB-HD/deface 1.5.0, face blurring) on the held-out anonymisation clips, for the feature
table in docs/guides/anonymize.md.

deface requires ``opencv-python``, which cannot share an environment with our
``opencv-python-headless`` (both write ``cv2``), so run it in a virtual environment of its own::

    python -m venv /tmp/deface && /tmp/deface/bin/pip install deface==1.5.0
    python -m benchmarks.anonymize_quality --heldout --fetch      # fetches the clips once
    /tmp/deface/bin/python benchmarks/anonymize_deface.py         # writes deface.md / .json

With deface's defaults (CenterFace at score 0.2 on the full frame, an ellipse blurred, mask
scale 1.3), per held-out person (``benchmarks/data/anonymize_heldout.json``, test split): whether a
face detection's centre lies in their box (their face is blurred), by the same view and tag
columns as ``benchmarks.anonymize_quality``'s held-out table; and frames over the wall time of
detection and blurring (decoding excluded), this machine, one process. Imports nothing from
maskdp_jax (the environment has none of it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time

import cv2
import numpy as np
from deface.centerface import CenterFace
from deface.deface import anonymize_frame

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The held-out table's columns: (name, test on a person's view and tags).
COLUMNS = (("front", lambda v, t: v == "front" and not t),
           ("side", lambda v, t: v == "side" and not t),
           ("back", lambda v, t: v == "back" and not t),
           ("distant", lambda v, t: "distant" in t),
           ("edge", lambda v, t: "edge" in t),
           ("all", lambda v, t: True))


def frames_of(clip: dict, directory: str) -> list[np.ndarray]:
    """BGR frames of one held-out clip (read, not seeked, as the quality benchmark reads them)."""
    if "files" in clip:
        return [cv2.imread(os.path.join(directory, n)) for n in clip["files"]]
    capture = cv2.VideoCapture(os.path.join(directory, clip["file"]))
    out = []
    for i in range(clip["start"] + clip["frames"]):
        ok, frame = capture.read()
        if not ok:
            raise SystemExit(f"{clip['file']}: frame {i} could not be read.")
        if i >= clip["start"]:
            out.append(frame)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", default=os.path.join(ROOT, "benchmarks", "data",
                                                         "anonymize_heldout.json"))
    parser.add_argument("--samples", default=os.path.expanduser(
        "~/.cache/maskdp_jax/opencv_samples"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results",
                                                      "anonymize_quality"))
    args = parser.parse_args()
    with open(args.labels) as f:
        clips = {k: c for k, c in json.load(f)["clips"].items() if c["split"] == "test"}
    people, seconds, frames_done = [], 0.0, 0
    for name, clip in clips.items():
        frames = frames_of(clip, args.samples)
        h, w = frames[0].shape[:2]
        net = CenterFace(in_shape=(w, h), backend="auto")
        detections = []
        for frame in frames:
            start = time.perf_counter()
            found, _ = net(frame, threshold=0.2)
            anonymize_frame(found, frame.copy(), mask_scale=1.3, replacewith="blur",
                            ellipse=True, draw_scores=False, replaceimg=None, mosaicsize=20)
            seconds += time.perf_counter() - start
            frames_done += 1
            detections.append(found)
        for i, rows in clip["people"].items():
            for x0, y0, x1, y1, view, *tags in rows:
                hit = any(x0 <= (a + c) / 2 < x1 and y0 <= (b + d) / 2 < y1
                          for a, b, c, d, *_ in detections[int(i)])
                people.append({"clip": name, "frame": int(i), "view": view, "tags": tags,
                               "face_blurred": bool(hit)})
    cells = []
    for _, test in COLUMNS:
        chosen = [p for p in people if test(p["view"], p["tags"])]
        cells.append(f"{sum(p['face_blurred'] for p in chosen)}/{len(chosen)}")
    import deface

    version = getattr(deface, "__version__", "1.5.0")
    header = " | ".join(f"{c} blurred" for c, _ in COLUMNS)
    table = (f"| tool | {header} | frames/s |\n" + "|---" * (len(COLUMNS) + 2) + "|\n"
             f"| deface {version} (defaults) | {' | '.join(cells)} | "
             f"{frames_done / seconds:.2f} |")
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs visible; Python "
               f"{platform.python_version()}; OpenCV {cv2.__version__}; load average at the end "
               f"{os.getloadavg()[0]:.1f}")
    with open(os.path.join(args.out, "deface.md"), "w") as f:
        f.write(f"# deface on the held-out clips\n\n{table}\n\nCommand: "
                f"`/tmp/deface/bin/python benchmarks/anonymize_deface.py`  \nMachine: {machine}  \n"
                f"Date: {datetime.date.today().isoformat()}\n")
    with open(os.path.join(args.out, "deface.json"), "w") as f:
        json.dump({"people": people, "frames": frames_done, "seconds": seconds,
                   "machine": machine}, f, indent=1)
        f.write("\n")
    print(table)


if __name__ == "__main__":
    main()
