"""Our step computes Opacus' step: the same clipped update in every mode (requirements-bench.txt).

Skipped when torch, torchvision or opacus are not installed (CI installs neither; run
``pip install -r requirements-bench.txt`` first). The benchmark ``benchmarks/opacus_maskdp.py``
runs the same check before it times anything.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("opacus")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from benchmarks import opacus_maskdp as bench  # noqa: E402
from benchmarks import opacus_torch_step as ots  # noqa: E402
from maskdp_jax import models  # noqa: E402
from maskdp_jax.core import tokenizer  # noqa: E402

TINY = bench.SIZES["tiny"]


@pytest.fixture(scope="module")
def equality():
    return bench.gradient_equality(TINY)


@pytest.fixture(scope="module")
def full_equality():
    """Full fine-tuning, ours with per-example gradients 2 at a time (``lax.scan``), against the
    PyTorch per-example loop (Opacus cannot hook torchvision's MViT for full fine-tuning)."""
    return bench.gradient_equality(TINY, modes=("maskdp", "dp"), strategy="full", engine="loop",
                                   microbatch=2)


def check(row):
    assert row["rel_error"] <= bench.TOLERANCE
    if "clip" in row:
        # clipping is active (C is the mean norm): some examples clipped, not all, and the
        # comparison sees it (the PyTorch side without clipping is far from our clipped update)
        assert 0 < row["clipped_fraction"] < 1
        assert row["unclipped_rel_diff"] > 100 * bench.TOLERANCE


@pytest.mark.parametrize("mode", bench.MODES)
def test_update_equals_opacus(equality, mode):
    check(next(r for r in equality if r["mode"] == mode))


@pytest.mark.parametrize("mode", ["maskdp", "dp"])
def test_full_finetuning_update_equals_pytorch_loop(full_equality, mode):
    check(next(r for r in full_equality if r["mode"] == mode))


def test_torch_views_equal_tokenizer():
    data = bench.make_data(n=3, input_size=(8, 32, 32), classes=2, seed=5)
    video = torch.from_numpy(data["video"].transpose(0, 4, 1, 2, 3).copy())
    fill = tokenizer.hidden_fill((8, 32, 32, 3), patch_stride=(2, 4, 4), fill_value=0.5)
    public, private = ots.make_views(video, torch.from_numpy(data["mask"]), patch_stride=(2, 4, 4),
                                     fill_value=fill)
    ours = jax.vmap(lambda v, m: tokenizer.make_views(v, m, patch_stride=(2, 4, 4),
                                                      fill_value=0.5))(
        jnp.asarray(data["video"]), jnp.asarray(data["mask"]))
    np.testing.assert_array_equal(public.numpy().transpose(0, 2, 3, 4, 1), ours.public)
    np.testing.assert_array_equal(private.numpy().transpose(0, 2, 3, 4, 1), ours.private)
    assert ours.has_public.all() and ours.has_private.all()


@pytest.mark.parametrize("strategy", ["selective", "full"])
def test_same_parameters_train(strategy):
    model = bench.torch_setup(TINY, strategy)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    _, trainable, frozen, _ = bench.jax_setup(TINY, strategy, state)
    n_torch = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert n_torch == models.finetune.count_params(trainable)
    assert models.finetune.count_params(frozen) == (0 if strategy == "full" else
                                                    sum(p.numel() for p in model.parameters())
                                                    - n_torch)
