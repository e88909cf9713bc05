r"""``python -m maskdp_jax.release --config=configs/dpcda_digits.py [--workdir=DIR]``: one DP-CDA
release (``synthetic.npz``, ``report.md``, ``report.json``, recorded first in
``release_ledger.json``) in ``--workdir`` (default ``workdir/dpcda``) and, on benchmark data or
with ``--config.sweep.enabled=yes``, its utility study in ``<workdir>/study/`` (outside the
release's ε).

A workdir that already holds a release refuses a second one (``error: ...``, exit status 2): the
same private data released twice has the ε of both. ``--config.release.another=True`` releases
again (``synthetic_2.npz``, ...) and reports the composed ε of every release in the workdir
(:mod:`maskdp_jax.release.ledger`).

Your own data: ``--config=configs/dpcda_npz.py --config.data.path=my.npz ...`` (that config's
docstring). Bad input (an unreadable or malformed data file, an unset public constant, an empty
class or one below min_class_size, l ≥ min_class_size, c ≤ 0, ε ≤ 0, δ ≥ 1/N, an unreachable ε, a
workdir that holds a release) stops before anything is written, with ``error: <reason>`` on
stderr and exit status 2.
"""

from __future__ import annotations

import os
import sys

from maskdp_jax.release import run
from maskdp_jax.run import command


def release(config, workdir: str) -> str:
    """Release a DP-CDA dataset into ``workdir`` (and its study, if on); return a summary (with
    the composed ε of the workdir's releases from its second release on)."""
    outcome = run.run(config, workdir)
    privacy = outcome.release["privacy"]
    accuracy = outcome.release["test_accuracy"]
    tested = ("no held-out data" if accuracy is None else f"test accuracy {100 * accuracy:.1f} %")
    study = (f"{len(outcome.sweep)} study runs in {os.path.join(workdir, run.STUDY_DIR)}"
             if outcome.sweep else "no study")
    total = outcome.ledger["composition"]
    composed = ("" if total["releases"] == 1 else
                f"; release {outcome.release['index']} of this workdir: its {total['releases']} "
                f"releases compose to epsilon = {total['epsilon']:.4g}, delta = "
                f"{total['delta']:g} (basic composition: "
                + " + ".join(f"{r['epsilon']:.4g}" for r in outcome.ledger["releases"]) + ")")
    return (f"released {outcome.release['num_samples']} samples to "
            f"{os.path.join(workdir, outcome.release['file'])}: epsilon = "
            f"{privacy['epsilon']:.4g}, delta = {privacy['delta']:g}{composed}, {tested}; "
            f"{study}")


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
