"""Video models: ``get_model(name, num_classes=...)`` returns a Flax module."""

from __future__ import annotations

import flax.linen as nn

from maskdp_jax.models import convert, finetune, ghost_rules
from maskdp_jax.models.mvit import MViT
from maskdp_jax.models.presets import PRESETS, PRETRAINED

__all__ = ["PRESETS", "PRETRAINED", "MViT", "convert", "finetune", "get_model", "ghost_rules"]


def get_model(name: str, *, num_classes: int, **overrides) -> nn.Module:
    """A model by preset name; ``overrides`` replace preset fields (e.g. ``adapters=True``)."""
    if name not in PRESETS:
        raise ValueError(f"unknown model {name!r}; available: {sorted(PRESETS)}.")
    if num_classes <= 0:
        raise ValueError(f"num_classes must be > 0; got {num_classes}.")
    return MViT(num_classes=num_classes, **{**PRESETS[name], **overrides})
