r"""deface (ORB-HD/deface 1.5.0, face blurring) on the held-out anonymisation clips, for the feature
table in docs/guides/anonymize.md.

deface requires ``opencv-python``, which cannot share an environment with our
``opencv-python-headless`` (both write ``cv2``), so run it in a virtual environment of its own::

    python -m venv /tmp/deface && /tmp/deface/bin/pip install deface==1.5.0
    python -m benchmarks.anonymize_quality --heldout --fetch      # fetches the clips once
    /tmp/deface/bin/python benchmarks/anonymize_deface.py         # writes deface.md / .json

With deface's defaults (CenterFace at score 0.2 on the full frame, an ellipse blurred, mask
scale 1.3), per held-out person (``benchmarks/data/anonymize_heldout.json``, test split, read by
``benchmarks/anonymize_heldout.py``): whether a face detection's centre lies in their box (their
face is blurred), in the held-out table's columns; and frames over the wall time of
detection and blurring (decoding excluded), this machine, one process. Imports nothing from
maskdp_jax (the environment has none of it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time

import cv2
import numpy as np
from deface.centerface import CenterFace
from deface.deface import anonymize_frame

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from deface's environment: benchmarks/ by path
from benchmarks import anonymize_heldout as heldout_lib  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", default=heldout_lib.SAMPLES_DIR)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "results",
                                                      "anonymize_quality"))
    args = parser.parse_args()
    people, seconds, frames_done = [], 0.0, 0
    for name, clip in heldout_lib.clips("test").items():
        frames = [np.ascontiguousarray(f[..., ::-1])  # deface works on BGR
                  for f in heldout_lib.frames(clip, args.samples)]
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
    cells = [f"{k}/{n}" for k, n in heldout_lib.count(people, "face_blurred").values()]
    import deface

    version = getattr(deface, "__version__", "1.5.0")
    header = " | ".join(f"{c} blurred" for c, _ in heldout_lib.CATEGORIES)
    table = (f"| tool | {header} | frames/s |\n" + "|---" * (len(heldout_lib.CATEGORIES) + 2)
             + "|\n"
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
