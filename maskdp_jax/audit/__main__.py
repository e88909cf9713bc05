r"""``python -m maskdp_jax.audit --config=configs/audit_coupled.py [--workdir=DIR]``: run the audit
a config names and write ``report.json``, ``report.md`` and its plots to ``--workdir`` (default
``workdir/audit``).

``--only_report`` trains nothing: it writes ``report.md`` and the plots again from the workdir's
``report.json``, with the config that report records (as ``python -m maskdp_jax.sweep
--only_report``), e.g. after a change to how the tables are written::

    python -m maskdp_jax.audit --config=configs/audit_synthetic.py \
        --workdir=docs/results/audit_synthetic --only_report

Bad input stops with the reason on stderr and exit status 2.
"""

from __future__ import annotations

import os
import sys
import time

from absl import flags

from maskdp_jax.audit import runs
from maskdp_jax.run import command


def audit(config, workdir: str, *, only_report: bool = False) -> str:
    """Run the audit ``config`` names into ``workdir`` (or, ``only_report``, rewrite its report
    from ``workdir/report.json``); print its report; return a summary."""
    if only_report:
        report = runs.only_report(workdir)
        if report["audit"] != config.audit:
            raise ValueError(f"--only_report: {workdir}/report.json is a {report['audit']!r} "
                             f"audit, the config names {config.audit!r}.")
    else:
        report = runs.run(config, workdir)
    with open(os.path.join(workdir, "report.md")) as f:
        print(f.read())
    done = "rewritten from its report.json in" if only_report else "written to"
    return f"audit {report['audit']!r} {done} {workdir}"


def cli(argv) -> int:
    """The command as a function of the command line: its exit status (2: bad input)."""

    def define(fv, argv):
        command.config_flag(fv, argv, help="Audit config (configs/audit_*.py).",
                            sections=("audit",), kind="an audit config (configs/audit_*.py)")
        flags.DEFINE_string("workdir", "workdir/audit", "Output directory.", flag_values=fv)
        flags.DEFINE_bool("only_report", False, "Write report.md and the plots again from the "
                          "workdir's report.json; train nothing.", flag_values=fv)

    def go(fv):
        start = time.time()
        summary = audit(fv.config, fv.workdir, only_report=fv.only_report)
        print(f"{summary} ({time.time() - start:.0f} s)")

    return command.run(argv, define=define, work=go, about=ABOUT)


ABOUT = command.About(
    usage="python -m maskdp_jax.audit --config=configs/audit_<name>.py [--workdir=DIR] "
          "[--only_report]",
    summary="Run the empirical privacy audit a config names (coupled sampling, LiRA, canaries, "
            "feature masking) and write report.md and report.json; --only_report rewrites "
            "report.md and the plots from an existing report.json.",
    keys="docs/guides/auditing.md and the config file's docstring")


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
