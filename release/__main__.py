r"""``python -m release --config=configs/dpcda_digits.py [--workdir=DIR]``: one DP-CDA release
(``synthetic.npz``) and its utility study (``report.md``, ``report.json``, ``utility.csv``,
``accuracy_vs_order.png``) in ``--workdir`` (default ``workdir/dpcda``).

Bad input (an empty class or one below min_class_size, l ≥ min_class_size, c ≤ 0, ε ≤ 0,
δ ≥ 1/N, an unreachable ε) stops before anything is written, with the reason on stderr and exit
status 2.
"""

from __future__ import annotations

import os
import sys

from release import run
from run import command


def release(config, workdir: str) -> str:
    outcome = run.run(config, workdir)
    privacy = outcome.release["privacy"]
    return (f"released {outcome.release['num_samples']} samples to "
            f"{os.path.join(workdir, outcome.release['file'])}: epsilon = "
            f"{privacy['epsilon']:.4g}, delta = {privacy['delta']:g}, test accuracy "
            f"{100 * outcome.release['test_accuracy']:.1f} %; {len(outcome.sweep)} study runs")


def cli(argv) -> int:
    """The command as a function of the command line: its exit status (2: bad input)."""
    return command.cli(argv, release, config_help="Release config (configs/dpcda_*.py).",
                       default_workdir="workdir/dpcda", sections=("data", "release"),
                       kind="a release config (configs/dpcda_*.py)")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
