r"""Train a video classifier with MaskDP, DP-SGD or plain SGD, then evaluate and report privacy.

    python train.py                                   # configs/default.py: MaskDP, ε = 1
    python train.py --config=configs/default.py:dp    # DP-SGD on the whole video (its tuning)
    python train.py --help                            # every flag; config keys:
    docs/guides/training.md

The command of a checkout. Its code is :mod:`maskdp_jax.train` (one file to read top to bottom),
so that the installed package runs the same command anywhere as ``python -m maskdp_jax.train``.
"""

import sys

from maskdp_jax.train import cli

if __name__ == "__main__":
    sys.exit(cli(sys.argv))
