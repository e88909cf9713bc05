"""Named MViT configurations: the papers' ``mvit_v2_s`` (MaskDP) and ``mvit_v1_b`` (Multi-Clip
DP-SGD, Luo et al. 2024), and CPU-sized presets of the same code."""

from __future__ import annotations

from maskdp_jax.models.mvit import BlockSpec


def _mvit_v2_s_blocks() -> tuple[BlockSpec, ...]:
    """torchvision ``mvit_v2_s``: 16 blocks, widths 96-192-384-768, q strided at blocks 1, 3, 14."""
    heads = (1, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8)
    dim_in = (96, 96, 192, 192) + (384,) * 11 + (768,)
    dim_out = (96, 192, 192, 384) + (384,) * 10 + (768, 768)
    stride_q = {1: (1, 2, 2), 3: (1, 2, 2), 14: (1, 2, 2)}
    stride_kv = [(1, 8, 8), (1, 4, 4), (1, 4, 4)] + [(1, 2, 2)] * 11 + [(1, 1, 1)] * 2
    return tuple(
        BlockSpec(heads[i], dim_in[i], dim_out[i], stride_q=stride_q.get(i, (1, 1, 1)),
                  stride_kv=stride_kv[i])
        for i in range(16)
    )


# MViTv1's switches in torchvision's MViT (models/mvit.py module docstring).
MVIT_V1 = dict(rel_pos_embed=False, residual_pool=False, proj_after_attn=False)
_NO_POOL = (1, 1, 1)


def _mvit_v1_b_blocks() -> tuple[BlockSpec, ...]:
    """torchvision ``mvit_v1_b`` (MViT-B 16x4): 16 blocks; the width changes at the *end* of
    blocks 0, 2 and 13 (96 -> 192 -> 384 -> 768); q pooled (kernel 3, stride (1, 2, 2)) only in
    blocks 1, 3 and 14, not pooled elsewhere; k/v pooled everywhere (kernel 3)."""
    heads = (1, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8)
    dim_in = (96, 192, 192) + (384,) * 11 + (768, 768)
    dim_out = (192, 192) + (384,) * 11 + (768,) * 3
    strided = {1, 3, 14}
    stride_kv = [(1, 8, 8), (1, 4, 4), (1, 4, 4)] + [(1, 2, 2)] * 11 + [(1, 1, 1)] * 2
    return tuple(
        BlockSpec(heads[i], dim_in[i], dim_out[i],
                  kernel_q=(3, 3, 3) if i in strided else _NO_POOL,
                  stride_q=(1, 2, 2) if i in strided else _NO_POOL, stride_kv=stride_kv[i])
        for i in range(16)
    )


def _cpu_preset(width: int) -> dict:
    """Two blocks with the block types of mvit_v2_s (width change with q pooling, kv pooling) on
    8 x 32^2 clips. The patch embedding's kernel equals its stride, so each token sees exactly its
    own token cell: a reshape and a matmul, an order of magnitude faster on XLA:CPU than the
    overlapping (3, 7, 7) kernel."""
    return dict(
        blocks=(
            BlockSpec(1, width, 2 * width, stride_q=(1, 2, 2), stride_kv=(1, 2, 2)),
            BlockSpec(2, 2 * width, 2 * width),
        ),
        input_size=(8, 32, 32),
        patch_kernel=(2, 4, 4),
        patch_padding=(0, 0, 0),
    )


_CONVERTED = ("the checkpoint of `python -m maskdp_jax.convert` (the papers fine-tune from "
              "Kinetics-400 weights)")
#: The presets whose runs start from pretrained weights, and where those weights come from: with
#: a frozen backbone and no ``model.init_from`` such a run would train a random network's last
#: layers, so ``run.config.check_config`` refuses that and names the weights.
PRETRAINED: dict[str, str] = {
    "mvit_v2_s": _CONVERTED, "mvit_v1_b": _CONVERTED,
    "mvit_cpu": "shipped:mvit_cpu_pretrained (the default's public backbone)",
}

#: Architecture of each model preset, by name (``config.model.name``).
PRESETS: dict[str, dict] = {
    # The papers' network (34.5M parameters with the 400-class Kinetics head), 16 x 224^2 clips.
    "mvit_v2_s": dict(blocks=_mvit_v2_s_blocks(), input_size=(16, 224, 224), head_dropout=0.5),
    # Luo et al. 2024's network, MViT-B 16x4 (36.6M parameters with the 400-class head), 16 x 224^2.
    "mvit_v1_b": dict(blocks=_mvit_v1_b_blocks(), input_size=(16, 224, 224), head_dropout=0.5,
                      **MVIT_V1),
    # CPU preset that trains in minutes: 8 x 32^2 clips, 4x8x8 tokens, two stages.
    "mvit_tiny": dict(
        blocks=(
            BlockSpec(1, 32, 32, stride_kv=(1, 2, 2)),
            BlockSpec(2, 32, 64, stride_q=(1, 2, 2)),
            BlockSpec(2, 64, 64),
        ),
        input_size=(8, 32, 32),
    ),
    # Parity preset: the block types of mvit_v2_s (width change with q stride, kv pooling including
    # temporal, q and kv of different sizes in the relative position bias) at tiny width. The
    # committed fixture tests/fixtures/mvit_tiny_torchvision.npz was made with torchvision's MViT
    # in this setting by tests/fixtures/make_mvit_fixture.py.
    "mvit_parity": dict(
        blocks=(
            BlockSpec(1, 8, 8, stride_kv=(1, 4, 4)),
            BlockSpec(2, 8, 16, stride_q=(1, 2, 2), stride_kv=(1, 2, 2)),
            BlockSpec(2, 16, 16, stride_kv=(2, 2, 2)),
            BlockSpec(4, 16, 32, stride_q=(1, 2, 2)),
            BlockSpec(4, 32, 32),
        ),
        input_size=(8, 32, 32),
    ),
    # Parity preset of MViTv1 (committed fixture tests/fixtures/mvit_v1_tiny_torchvision.npz):
    # widening at the end of a block, strided q pooling, blocks without q pooling, temporal kv
    # pooling, a kv pooling without stride, a block without any pooling, absolute positions.
    "mvit_v1_parity": dict(
        blocks=(
            BlockSpec(1, 8, 16, kernel_q=_NO_POOL, stride_kv=(1, 4, 4)),
            BlockSpec(2, 16, 16, stride_q=(1, 2, 2), stride_kv=(1, 2, 2)),
            BlockSpec(2, 16, 32, kernel_q=_NO_POOL, stride_kv=(2, 2, 2)),
            BlockSpec(4, 32, 32, stride_q=(1, 2, 2)),
            BlockSpec(4, 32, 32, kernel_q=_NO_POOL, kernel_kv=_NO_POOL),
        ),
        input_size=(8, 32, 32),
        **MVIT_V1,
    ),
    # Default CPU run (31k parameters with 8 classes) and the unit-test preset (its half width).
    "mvit_cpu": _cpu_preset(16),
    "mvit_test": _cpu_preset(8),
}
