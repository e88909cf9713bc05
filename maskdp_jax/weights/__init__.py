"""Pretrained weights that ship with the package, named for ``config.model.init_from``.

``init_from = "shipped:<name>"`` reads the folder ``maskdp_jax/weights/<name>`` of the installed
package (:func:`resolve`), so a config names the weights the same way in a checkout and in a
wheel, and a report does not record a machine's path. Each folder is a trained-model directory
(:func:`maskdp_jax.run.model.save_trained`: ``params.safetensors`` and ``model.json``) written
by ``python -m maskdp_jax.pretrain``, without its classifier: a run from it learns a fresh head.

* ``mvit_cpu_pretrained``: ``mvit_cpu`` trained without DP on the public corpus of the embedded
  dataset (configs/pretrain.py says what the corpus is and why it is disjoint from every private
  training set; tests/test_pretrain.py checks the command reproduces the file).
"""

from __future__ import annotations

import os

PREFIX = "shipped:"
NAMES = ("mvit_cpu_pretrained",)


def resolve(init_from: str) -> str:
    """The directory ``init_from`` names: ``"shipped:<name>"`` becomes the shipped folder's path;
    any other value is returned unchanged.

    >>> os.path.basename(resolve("shipped:mvit_cpu_pretrained"))
    'mvit_cpu_pretrained'
    >>> resolve("/ckpt/mvit_v2_s_k400")
    '/ckpt/mvit_v2_s_k400'

    Raises:
      ValueError: an unknown shipped name (the message lists the names).
    """
    if not init_from.startswith(PREFIX):
        return init_from
    name = init_from[len(PREFIX):]
    if name not in NAMES:
        raise ValueError(f"model.init_from={init_from!r}: no shipped weights named {name!r}; "
                         f"the package ships {', '.join(PREFIX + n for n in NAMES)}.")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
