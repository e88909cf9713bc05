r"""``python -m maskdp_jax.audit --config=configs/audit_coupled.py [--workdir=DIR]``: run the audit
a config names and write ``report.md`` and ``report.json`` to ``--workdir`` (default
``workdir/audit``).

Bad input stops with the reason on stderr and exit status 2.
"""

from __future__ import annotations

import os
import sys

from maskdp_jax.audit import runs
from maskdp_jax.run import command


def audit(config, workdir: str) -> str:
    """Run the audit ``config`` names into ``workdir``; print its report; return a summary."""
    report = runs.run(config, workdir)
    with open(os.path.join(workdir, "report.md")) as f:
        print(f.read())
    return f"audit {report['audit']!r} written to {workdir}"


def cli(argv) -> int:
    """The command as a function of the command line: its exit status (2: bad input)."""
    return command.cli(argv, audit, config_help="Audit config (configs/audit_*.py).",
                       default_workdir="workdir/audit", sections=("audit",),
                       kind="an audit config (configs/audit_*.py)", about=ABOUT)


ABOUT = command.About(
    usage="python -m maskdp_jax.audit --config=configs/audit_<name>.py [--workdir=DIR]",
    summary="Run the empirical privacy audit a config names (coupled sampling, LiRA, canaries, "
            "feature masking) and write report.md and report.json.",
    keys="docs/guides/auditing.md and the config file's docstring")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
