r"""``python -m maskdp_jax.anonymize --src VIDEO_DIR --dst OUT_DIR --mask_dir MASK_DIR
[--config=...] [--background_dir=BG_DIR] [--person_dir=PERSON_DIR]``:
anonymise every video under ``VIDEO_DIR`` (package docstring; settings in
``configs/anonymize.py``, overridable with ``--config.<key>=...``).

Then train on the result unchanged::

    python train.py --config=configs/folder_maskdp.py \
        --config.input.data_dir=OUT_DIR --config.input.mask_dir=MASK_DIR

Bad input (an unreadable video, person masks or boxes that do not fit their video, box or mask
files given to a method that does not read them, a segmenter that reads more than
``max_reads``) prints the reason on stderr and exits with status 2; videos already written stay,
and a rerun resumes after them. A video with no person is written unchanged with an all-private
mask and listed as "no person found" (``--config.refuse_no_person=True``: bad input instead).
"""

from __future__ import annotations

import os
import sys
import time

from absl import flags

from maskdp_jax import configs
from maskdp_jax.anonymize import pipeline
from maskdp_jax.run import command

DEFAULT_CONFIG = os.path.join(os.path.dirname(configs.__file__), "anonymize.py")


def define_flags(fv: flags.FlagValues, argv) -> None:
    """The command's flags (on ``fv``); ``--config`` and its keys are checked first."""
    command.config_flag(fv, argv, default=DEFAULT_CONFIG, help="Pipeline settings.",
                        sections=("segment",),
                        kind="an anonymisation config (configs/anonymize.py)")
    flags.DEFINE_string("src", None, "Folder of source videos (any nesting, e.g. "
                        "<class>/<video>). Required.", required=True, flag_values=fv)
    flags.DEFINE_string("dst", None, "Output folder: the anonymised videos, same relative "
                        "paths, named for their container (.mkv lossless, .mp4 h264). "
                        "Required.", required=True, flag_values=fv)
    flags.DEFINE_string("mask_dir", None, "Output folder of the public masks (train.py's "
                        "input.mask_dir). Required.", required=True, flag_values=fv)
    flags.DEFINE_bool("overwrite", False, "Redo videos whose outputs exist.", flag_values=fv)
    flags.DEFINE_string("preview_dir", "", "Also write a PNG strip per video here: source, "
                        "anonymised, public mask.", flag_values=fv)
    flags.DEFINE_bool("skip_bad", False, "Leave unreadable source videos out (listed in the "
                      "summary).", flag_values=fv)
    flags.DEFINE_string("background_dir", "", "Also write the inpainted backgrounds (person "
                        "removed, no avatar; private) here, same relative paths: the context "
                        "ablation's background view (train.py --config.view=background "
                        "--config.input.background_dir=...).", flag_values=fv)
    flags.DEFINE_string("person_dir", "", "Also write the person masks (npz, 1 = person) here: "
                        "the public masks of MaskDP on the unanonymised source videos.",
                        flag_values=fv)


def run_command(f: flags.FlagValues) -> int:
    """Anonymise every video under ``--src`` as the parsed flags ``f`` say; prints a summary."""
    start = time.time()
    stages, options = pipeline.build_stages(f.config)
    summary = pipeline.anonymize_folder(f.src, f.dst, f.mask_dir, stages, options,
                                        overwrite=f.overwrite, skip_bad=f.skip_bad,
                                        preview_dir=f.preview_dir,
                                        background_dir=f.background_dir,
                                        person_dir=f.person_dir)
    videos = summary["videos"]
    missing = summary["videos_with_frames_without_person"]
    nobody = summary["videos_no_person_found"]
    named = ", ".join(nobody[:5]) + (f" and {len(nobody) - 5} more" if len(nobody) > 5 else "")
    print(f"anonymised {len(videos)} videos to {f.dst} (masks in {f.mask_dir}): mean public "
          f"fraction {summary['public_fraction_mean']:.3f}; {len(missing)} with frames where no "
          f"person was found; {len(nobody)} with no person found (written unchanged, mask all "
          f"private{': ' + named if nobody else ''}); {len(summary['skipped_unreadable'])} "
          f"unreadable skipped; summary in {os.path.join(f.dst, 'summary.json')} "
          f"({time.time() - start:.0f} s)")
    return 0


ABOUT = command.About(
    usage="python -m maskdp_jax.anonymize --src=VIDEO_DIR --dst=OUT_DIR --mask_dir=MASK_DIR",
    summary="Replace the people of every video under --src by avatars and write the public "
            "masks MaskDP trains with (the layout train.py reads).",
    keys="docs/guides/anonymize.md; every key and its default: configs/anonymize.py")


def cli(argv) -> int:
    """``python -m maskdp_jax.anonymize ...`` as a function of the command line: its exit
    status (2: bad input, with ``error: <reason>`` on stderr; videos already written stay)."""
    return command.run(argv, define=define_flags, work=run_command, about=ABOUT)


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
