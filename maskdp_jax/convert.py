r"""Convert torchvision or PySlowFast MViT weights into a ``model.init_from`` checkpoint::

    python -m maskdp_jax.convert --src mvit_v2_s-ae3be167.pth --dst /tmp/mvit_v2_s_k400 \
        --num_classes 60 --preset mvit_v2_s
    python train.py --config.model.name=mvit_v2_s --config.model.init_from=/tmp/mvit_v2_s_k400

The command of :mod:`maskdp_jax.models.convert` (which says what is read and how each tensor is
laid out). The weights are public (pre-trained on Kinetics-400); nothing here touches private
data.
"""

from __future__ import annotations

import os
import sys

import jax
import numpy as np

from maskdp_jax import models
from maskdp_jax.models import convert
from maskdp_jax.run import command


def run_command(args) -> int:
    """Convert ``args.src`` for ``args.preset`` into the orbax checkpoint ``args.dst``."""
    if os.path.exists(args.dst):
        raise FileExistsError(f"{args.dst!r} already exists; choose a new --dst.")
    model = models.get_model(args.preset, num_classes=args.num_classes)
    like = convert.import_template(model, input_shape=(*model.input_size, 3),
                                   key=jax.random.key(args.seed))
    params, info = convert.convert_state_dict(convert.load_state_dict(args.src), like=like,
                                              fmt=args.format)
    info = {**info, "preset": args.preset, "num_classes": args.num_classes,
            "src": os.path.abspath(args.src)}
    convert.save_params(args.dst, params, info=info)
    n = sum(int(np.size(x)) for x in jax.tree.leaves(params))
    print(f"Wrote {n:,} parameters ({info['format']}, head {info['head']}) to {args.dst}:\n"
          f"  python train.py --config.model.name={args.preset} "
          f"--config.model.init_from={os.path.abspath(args.dst)}")
    return 0


def cli(argv) -> int:
    """``python -m maskdp_jax.convert ...`` as a function of the command line (program name
    first): its exit status (2: bad input, with ``error: <reason>`` on stderr)."""
    parser = command.ArgumentParser(prog="python -m maskdp_jax.convert",
                                    description=__doc__.split("\n\n")[0].rstrip(":"))
    parser.add_argument("--src", required=True, help=".pth/.pt/.pyth, .safetensors or .npz file")
    parser.add_argument("--dst", required=True, help="orbax checkpoint directory to create")
    parser.add_argument("--num_classes", type=int, required=True,
                        help="classes of the new task; the head is re-initialised if it differs")
    parser.add_argument("--preset", default="mvit_v2_s", choices=sorted(models.PRESETS),
                        help="the model preset the weights are for")
    parser.add_argument("--format", choices=convert.FORMATS, default=None,
                        help="checkpoint format (default: detected from the key names)")
    parser.add_argument("--seed", type=int, default=0, help="seed of a re-initialised head")
    return command.run_parser(parser, argv, run_command)


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
