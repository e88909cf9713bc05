r"""Export the parameters of a run's newest checkpoint as a ``model.init_from`` checkpoint::

    python -m maskdp_jax.export --workdir=workdir/pretrain --dst=/tmp/pretrained --drop_head
    python train.py --config.model.init_from=/tmp/pretrained

A finished run already writes its final parameters to ``<workdir>/model`` (loadable with
:func:`maskdp_jax.run.model.load_trained`, and usable as ``model.init_from`` as it is). This
command exports from the checkpoints instead: mid-run, or without the classifier
(``--drop_head``), so that a run from it learns a fresh head, as when fine-tuning from public
pre-training on other labels. Only the parameters leave, never the optimiser state or the noise
secret (:func:`maskdp_jax.run.checkpoint.export_params`).
"""

from __future__ import annotations

import os
import sys

from maskdp_jax.run import checkpoint, command


def run_command(args) -> int:
    """Export ``args.workdir``'s newest checkpoint to ``args.dst``."""
    n = checkpoint.export_params(args.workdir, args.dst, drop_head=args.drop_head)
    print(f"Wrote {n:,} parameters to {args.dst}: --config.model.init_from="
          f"{os.path.abspath(args.dst)}")
    return 0


def cli(argv) -> int:
    """``python -m maskdp_jax.export ...`` as a function of the command line (program name
    first): its exit status (2: bad input, with ``error: <reason>`` on stderr)."""
    parser = command.ArgumentParser(prog="python -m maskdp_jax.export",
                                    description=__doc__.split("\n\n")[0].rstrip(":"))
    parser.add_argument("--workdir", required=True, help="the run's --workdir")
    parser.add_argument("--dst", required=True, help="orbax checkpoint directory to create")
    parser.add_argument("--drop_head", action="store_true",
                        help="leave the classifier out: a run from it learns a fresh head")
    return command.run_parser(parser, argv, run_command)


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
