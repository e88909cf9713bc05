r"""Our results beside the papers' tables, and what a table costs to train::

    python -m maskdp_jax.paper_tables --table=hmdb51 --anonymized=runs/hmdb51_anon \
        --real=runs/hmdb51_real
    python -m maskdp_jax.paper_tables --table=ntu60     # the paper's table and its cost only

The command of :mod:`maskdp_jax.reporting.paper_tables` (which says what each cell is and where
the papers' numbers are quoted from); docs/guides/reproduce.md walks through the whole pipeline.
"""

from __future__ import annotations

import sys

from maskdp_jax.reporting import paper_tables
from maskdp_jax.run import command


def run_command(args) -> int:
    """Print the table ``args.table`` (ours beside the paper's) and its cost."""
    table = paper_tables.TABLES[args.table]
    runs = {d: paper_tables.load(getattr(args, d), metric=table.metric)
            for d in paper_tables.DATA if getattr(args, d)}
    print(paper_tables.markdown(table, runs))
    print()
    print(paper_tables.estimate(table))
    return 0


def cli(argv) -> int:
    """``python -m maskdp_jax.paper_tables ...`` as a function of the command line (program
    name first): its exit status (2 with ``error: <reason>`` when a given workdir holds no
    reports)."""
    parser = command.ArgumentParser(prog="python -m maskdp_jax.paper_tables",
                                    description=__doc__.split("\n\n")[0].rstrip(":"))
    parser.add_argument("--table", required=True, choices=sorted(paper_tables.TABLES),
                        help="which paper table")
    for data in paper_tables.DATA:
        parser.add_argument(f"--{data}", default="",
                            help=f"sweep workdir of the runs on the {data} videos")
    return command.run_parser(parser, argv, run_command)


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
