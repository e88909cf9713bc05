"""Named MViTv2 configurations: the papers' ``mvit_v2_s`` and CPU-sized presets of the same code."""

from __future__ import annotations

from models.mvit import BlockSpec


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


def _cpu_preset(width: int) -> dict:
    """Two blocks with the block types of mvit_v2_s (width change with q pooling, kv pooling) on
    8 x 32^2 clips. The patch embedding's kernel equals its stride, so each token sees exactly its
    own token cell, and XLA:CPU runs it ~20x faster than the overlapping (3, 7, 7) kernel."""
    return dict(
        blocks=(
            BlockSpec(1, width, 2 * width, stride_q=(1, 2, 2), stride_kv=(1, 2, 2)),
            BlockSpec(2, 2 * width, 2 * width),
        ),
        input_size=(8, 32, 32),
        patch_kernel=(2, 4, 4),
        patch_padding=(0, 0, 0),
    )


PRESETS: dict[str, dict] = {
    # The papers' network (34.5M parameters with the 400-class Kinetics head), 16 x 224^2 clips.
    "mvit_v2_s": dict(blocks=_mvit_v2_s_blocks(), input_size=(16, 224, 224), head_dropout=0.5),
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
    # Default CPU run (31k parameters with 8 classes) and the unit-test preset (its half width).
    "mvit_cpu": _cpu_preset(16),
    "mvit_test": _cpu_preset(8),
}
