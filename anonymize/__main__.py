r"""``python -m anonymize --src VIDEO_DIR --dst OUT_DIR --mask_dir MASK_DIR [--config=...]
[--background_dir=BG_DIR] [--person_dir=PERSON_DIR]``:
anonymise every video under ``VIDEO_DIR`` (package docstring; settings in
``configs/anonymize.py``, overridable with ``--config.<key>=...``).

Then train on the result unchanged::

    python train.py --config=configs/folder_maskdp.py \
        --config.input.data_dir=OUT_DIR --config.input.mask_dir=MASK_DIR

Bad input (an unreadable video, a video with no person, person masks or boxes that do not fit
their video, a segmenter that reads more than ``max_reads``) prints the reason on stderr and
exits with status 2; videos already written stay, and a rerun resumes after them.
"""

from __future__ import annotations

import os
import sys
import time

from absl import app, flags
from ml_collections import config_flags

from anonymize import pipeline
from anonymize.stages import InputError
from data.decode import BadVideoError

_DEFAULT_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "configs", "anonymize.py")

config_flags.DEFINE_config_file("config", _DEFAULT_CONFIG, "Pipeline settings.",
                                lock_config=True)
flags.DEFINE_string("src", None, "Folder of source videos (any nesting, e.g. <class>/<video>).")
flags.DEFINE_string("dst", None, "Output folder: the anonymised videos, same relative paths.")
flags.DEFINE_string("mask_dir", None, "Output folder of the public masks (train.py's mask_dir).")
flags.DEFINE_bool("overwrite", False, "Redo videos whose outputs exist.")
flags.DEFINE_string("preview_dir", "", "Also write a PNG strip per video here: source, "
                    "anonymised, public mask.")
flags.DEFINE_bool("skip_bad", False, "Leave unreadable source videos out (listed in the summary).")
flags.DEFINE_string("background_dir", "", "Also write the inpainted backgrounds (person removed, "
                    "no avatar; private) here, same relative paths: Table 3's background row "
                    "(train.py --config.view=background --config.input.background_dir=...).")
flags.DEFINE_string("person_dir", "", "Also write the person masks (npz, 1 = person) here: the "
                    "public masks of MaskDP on the source videos (seed 000's Real World MaskDP).")
flags.mark_flags_as_required(["src", "dst", "mask_dir"])


def main(argv) -> int:
    """``python -m anonymize``: anonymise every video under ``--src`` (flags: ``--help``)."""
    del argv
    f = flags.FLAGS
    start = time.time()
    try:
        stages, options = pipeline.build_stages(f.config)
        summary = pipeline.anonymize_folder(f.src, f.dst, f.mask_dir, stages, options,
                                            overwrite=f.overwrite, skip_bad=f.skip_bad,
                                            preview_dir=f.preview_dir,
                                            background_dir=f.background_dir,
                                            person_dir=f.person_dir)
    except (InputError, BadVideoError) as err:  # bad input; anything else is a bug
        print(f"error: {err}", file=sys.stderr)
        return 2
    videos = summary["videos"]
    missing = summary["videos_with_frames_without_person"]
    print(f"anonymised {len(videos)} videos to {f.dst} (masks in {f.mask_dir}): mean public "
          f"fraction {summary['public_fraction_mean']:.3f}; {len(missing)} with frames where no "
          f"person was found; {len(summary['skipped_unreadable'])} unreadable skipped; summary in "
          f"{os.path.join(f.dst, 'summary.json')} ({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    app.run(main)
