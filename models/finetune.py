"""Fine-tuning strategies: which parameters train (Luo et al. 2024 and the MaskDP paper).

* ``full``: every parameter.
* ``selective``: every LayerNorm of the last ``k`` blocks (norm1, norm2 and the q/k/v pooling
  norms), the final norm and the head. The MaskDP paper's setting (k = 2): 8,064 norm parameters
  + 769 per class on ``mvit_v2_s``.
* ``norms``: every LayerNorm of the network (all blocks, their pooling norms, the final norm) and
  the head. Luo et al. 2024's selective fine-tuning (Sec. 3.4: "we choose to train the normalization
  layers in addition to the last linear layer"): 33,216 norm parameters + 769 per class on
  ``mvit_v1_b``, i.e. 110,885 with UCF-101's 101 classes, the "110K" of its Table 2.
* ``linear``: the head only (linear probe).
* ``adapters``: the residual adapters of every block and the head (model built with
  ``adapters=True``; adapters start as the identity).
"""

from __future__ import annotations

from typing import Any

import jax
from flax import traverse_util

STRATEGIES = ("full", "selective", "norms", "linear", "adapters")


def _block_index(path: tuple[str, ...]) -> int | None:
    name = path[0]
    return int(name.split("_")[1]) if name.startswith("blocks_") else None


def _is_layer_norm(path: tuple[str, ...]) -> bool:
    return any(p.startswith("norm") for p in path[:-1]) and path[-1] in ("scale", "bias")


def trainable_mask(params: Any, *, strategy: str, num_last_blocks: int = 2) -> Any:
    """Boolean pytree like ``params``: True where the parameter trains under ``strategy``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown fine-tuning strategy {strategy!r}; choose from {STRATEGIES}.")
    flat = traverse_util.flatten_dict(params)
    blocks = {b for b in map(_block_index, flat) if b is not None}
    if strategy == "selective" and not 0 <= num_last_blocks <= len(blocks):
        raise ValueError(
            f"num_last_blocks must be in [0, {len(blocks)}] for this model; got {num_last_blocks}."
        )
    if strategy == "adapters" and not any("adapter" in path for path in flat):
        raise ValueError("strategy 'adapters' needs a model built with adapters=True.")
    first_tuned = len(blocks) - num_last_blocks

    def trains(path: tuple[str, ...]) -> bool:
        if strategy == "full" or path[0] == "head":
            return True
        if strategy == "linear":
            return False
        if strategy == "adapters":
            return "adapter" in path
        if strategy == "norms":
            return _is_layer_norm(path)
        block = _block_index(path)
        if block is None:
            return path[0] == "norm"
        return block >= first_tuned and _is_layer_norm(path)

    return traverse_util.unflatten_dict({path: trains(path) for path in flat})


def count_params(tree: Any) -> int:
    """Number of scalars in a parameter pytree."""
    return sum(int(x.size) for x in jax.tree.leaves(tree))


def prefix_params(params: Any, *, cut: int) -> dict:
    """The parameters the blocks before ``cut`` read (patch embedding, class token, positions
    and blocks ``[0, cut)``): the frozen prefix of :func:`first_trainable_block`."""
    flat = traverse_util.flatten_dict(params)

    def in_prefix(path):
        block = _block_index(path)
        return block < cut if block is not None else path[0] not in ("norm", "head")

    return traverse_util.unflatten_dict({k: v for k, v in flat.items() if in_prefix(k)})


def first_trainable_block(trainable: Any) -> int:
    """Where the frozen prefix ends: the lowest block holding a trainable parameter, or the
    number of blocks when only the final norm and the head train (``linear``, ``selective`` with
    k = 0). Everything before it is a fixed function of the clip, which the feature cache
    (``run.features``) computes once.

    Args:
      trainable: boolean pytree like the parameters (:func:`trainable_mask`).

    Raises:
      ValueError: a parameter before block 0 trains (patch embedding, class token, positions:
        ``full`` fine-tuning), so there is no frozen prefix.
    """
    flat = traverse_util.flatten_dict(trainable)
    num_blocks = len({b for b in map(_block_index, flat) if b is not None})
    first = num_blocks
    for path, trains in flat.items():
        if not trains:
            continue
        block = _block_index(path)
        if block is not None:
            first = min(first, block)
        elif path[0] not in ("norm", "head"):
            raise ValueError(
                f"parameter {'/'.join(path)} trains, so nothing before block 0 is frozen and "
                "there is no prefix to cache (full fine-tuning); use a strategy that freezes the "
                "patch embedding (selective, norms, linear, adapters) or turn the feature cache "
                "off (--config.feature_cache.enabled=False).")
    return first
