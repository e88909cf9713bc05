r"""The training loader end to end: the prefetching loader, from a clip store or decoding the
videos, overlapped with the running step, as ``python -m maskdp_jax.train`` runs them.

    python benchmarks/loader_overlap.py --videos=64 --epochs=2 --size=64

Writes a folder of ``--videos`` textured H.264 videos (320×240, four classes) with masks
(``benchmarks/data_throughput.py``'s), writes their clip store with ``python -m
maskdp_jax.prepare``, then trains ``configs/folder_maskdp.py`` on them (MaskDP, ``mvit_cpu``,
clips of 8 frames every 2 at ``--size`` px, B = N / 16) three ways, each a fresh ``python -m
maskdp_jax.train`` process:

1. ``store, prefetch 2``: the default loader reading the clip store, two steps ahead;
2. ``store, prefetch 0``: the same loads, synchronously: the loop waits for every batch, so
   the wait is the loader's time per step and the rest the step's own;
3. ``decode, prefetch 2``: decoding the videos instead of reading the store.

A first, untimed run (store, prefetch 2) fills the persistent compilation cache: in the first
process on a cold cache some programs compile after the first step (the last step's checkpoint
and ε, the evaluation), which would otherwise count in that run's step time alone.

Each run's report gives the seconds the training loop waited for its batches and the wall time
of the steps after the first (which compiles): ``timing`` in ``report.json``, the time line of
``report.md`` (:func:`maskdp_jax.train.train_loop` says what the wait means). The table prints
them per step; the load average is printed before and after (run it alone: the loader's threads
and the step share this machine's cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

RUNS = (("store", 2), ("store", 0), ("decode", 2))


def overrides(root: str, *, videos: int, epochs: float, size: int) -> list[str]:
    batch = max(videos // 16, 1)
    return [f"--config.input.data_dir={root}/videos", f"--config.input.mask_dir={root}/masks",
            "--config.input.public_part=source", f"--config.num_epochs={epochs}",
            f"--config.batch_size={batch}", f"--config.physical_batch_size={batch}",
            f"--config.input.resize_size={size}", f"--config.input.crop_size={size}",
            "--config.model.name=mvit_cpu", "--config.privacy.randomness=seeded",
            "--config.log_every_steps=1000"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--videos", type=int, default=64)
    parser.add_argument("--frames", type=int, default=60, help="frames per video")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--size", type=int, default=32,
                        help="clip side in pixels (mvit_cpu's is 32; larger clips, more work "
                        "for both the loader and the step)")
    args = parser.parse_args()
    from benchmarks.data_throughput import make_videos

    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as root:
        t = time.perf_counter()
        make_videos(root, num_videos=args.videos, num_frames=args.frames, mask_format="npy")
        common = ["--config=configs/folder_maskdp.py", *overrides(
            root, videos=args.videos, epochs=args.epochs, size=args.size)]
        store = os.path.join(root, "store")
        subprocess.run([sys.executable, "-m", "maskdp_jax.prepare", *common,
                        f"--config.input.store_dir={store}"], cwd=ROOT, check=True,
                       capture_output=True, text=True)
        print(f"{args.videos} videos of {args.frames} frames and their clip store written in "
              f"{time.perf_counter() - t:.0f} s", flush=True)
        rows = []
        for source, prefetch in (("warm-up", 2), *RUNS):
            workdir = os.path.join(root, f"run_{source}_{prefetch}")
            cmd = [sys.executable, "-m", "maskdp_jax.train", *common, f"--workdir={workdir}",
                   f"--config.input.prefetch={prefetch}",
                   f"--config.input.store_dir={'' if source == 'decode' else store}"]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"{source}, prefetch {prefetch} failed:\n{proc.stderr[-3000:]}")
            if source == "warm-up":
                continue
            with open(os.path.join(workdir, "report.json")) as f:
                timing = json.load(f)["timing"]
            n = timing["timed_steps"]
            rows.append((source, prefetch, n, 1e3 * timing["timed_seconds"] / n,
                         1e3 * timing["data_wait_seconds"] / n,
                         timing["data_wait_seconds"] / timing["timed_seconds"]))
            print(f"  {source}, prefetch {prefetch}: done", flush=True)
    print(f"\nfolder_maskdp, mvit_cpu, {args.size} px clips, B = {max(args.videos // 16, 1)}, "
          f"{args.videos} videos; per step after the first:\n")
    print("| loader | prefetch | steps | wall [ms/step] | waiting for data [ms/step] | "
          "waiting share |\n|---|---:|---:|---:|---:|---:|")
    for source, prefetch, n, wall, wait, share in rows:
        print(f"| {source} | {prefetch} | {n} | {wall:.1f} | {wait:.1f} | {100 * share:.1f} % |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
