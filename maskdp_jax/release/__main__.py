r"""``python -m maskdp_jax.release --config=configs/dpcda_digits.py [--workdir=DIR]``: one DP-CDA
release (``synthetic.npz``, ``report.md``, ``report.json``) in ``--workdir`` (default
``workdir/dpcda``) and, on benchmark data or with ``--config.sweep.enabled=yes``, its utility study
in ``<workdir>/study/`` (outside the release's ε).

Your own data: ``--config=configs/dpcda_npz.py --config.data.path=my.npz ...`` (that config's
docstring). Bad input (an unreadable or malformed data file, an unset public constant, an empty
class or one below min_class_size, l ≥ min_class_size, c ≤ 0, ε ≤ 0, δ ≥ 1/N, an unreachable ε)
stops before anything is written, with ``error: <reason>`` on stderr and exit status 2.
"""

from __future__ import annotations

import os
import sys

from maskdp_jax.release import run
from maskdp_jax.run import command


def release(config, workdir: str) -> str:
    """Release a DP-CDA dataset into ``workdir`` (and its study, if on); return a summary."""
    outcome = run.run(config, workdir)
    privacy = outcome.release["privacy"]
    accuracy = outcome.release["test_accuracy"]
    tested = ("no held-out data" if accuracy is None else f"test accuracy {100 * accuracy:.1f} %")
    study = (f"{len(outcome.sweep)} study runs in {os.path.join(workdir, run.STUDY_DIR)}"
             if outcome.sweep else "no study")
    return (f"released {outcome.release['num_samples']} samples to "
            f"{os.path.join(workdir, outcome.release['file'])}: epsilon = "
            f"{privacy['epsilon']:.4g}, delta = {privacy['delta']:g}, {tested}; {study}")


def cli(argv) -> int:
    """The command as a function of the command line: its exit status (2: bad input)."""
    return command.cli(argv, release, config_help="Release config (configs/dpcda_*.py).",
                       default_workdir="workdir/dpcda", sections=("data", "release"),
                       kind="a release config (configs/dpcda_*.py)", about=ABOUT)


ABOUT = command.About(
    usage="python -m maskdp_jax.release --config=configs/dpcda_<name>.py [--workdir=DIR]",
    summary="Release a DP-CDA synthetic dataset (class-centric mixing plus Gaussian noise) with "
            "its own accountant, and its utility study on benchmark data.",
    keys="docs/guides/dpcda.md and the config file's docstring")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
