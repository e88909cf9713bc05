"""The MaskDP step written the way a careful Opacus user would write it (the PyTorch side).

Used by ``benchmarks/opacus_maskdp.py`` and ``tests/test_benchmarks_opacus_equivalence.py``; needs
``requirements-bench.txt`` (torch, torchvision, opacus), which CI does not install.

The model (built by ``benchmarks/opacus_maskdp.py`` with the parity fixture's ``torchvision_mvit``
and ``randomise``) is torchvision's ``MViT`` class in MViTv2-S mode with the block setting of one
of our presets, so that ``models.convert`` maps its ``state_dict`` onto our Flax parameters.

One logical step, with ``B`` the expected batch size, the private pass split into physical
batches, Opacus' own machinery for everything DP:

* private pass (``maskdp``: private views; ``dp``: whole videos): ``GradSampleModule`` hooks give
  per-example gradients of the trainable parameters; after each physical batch but the last,
  ``DPOptimizer.signal_skip_step`` + ``step`` clips and accumulates them (what Opacus'
  ``BatchMemoryManager`` does); the last one's ``pre_step`` clips, adds ``N(0, (sigma C)^2)`` once
  and divides by ``B``;
* public pass (``maskdp`` only): ordinary autograd (``torch.autograd.grad`` with the Opacus hooks
  disabled) of ``sum_i L(public view_i) / B``, added to the noised private gradient;
* the optimiser step (``DPOptimizer.original_optimizer``).

``nonprivate`` (one view, the whole video) and ``nonprivate2`` (both views, no clipping, no noise:
the same two-pass work as ``maskdp`` without DP, the baseline of the DP overhead) are plain
autograd.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer
from torchvision.models.video.mvit import MViT

MODES = ("maskdp", "dp", "nonprivate2", "nonprivate")


def is_trainable(name: str, *, strategy: str, num_blocks: int, num_last_blocks: int = 2) -> bool:
    """``models.finetune.trainable_mask`` in torchvision names: ``selective`` trains every
    LayerNorm of the last ``k`` blocks (norm1, norm2, the q/k/v pooling norms), the final norm and
    the head."""
    if strategy == "full" or name.startswith(("head.", "norm.")):
        return True
    if strategy != "selective":
        raise ValueError(f"strategy must be 'full' or 'selective'; got {strategy!r}.")
    parts = name.split(".")
    if parts[0] != "blocks" or int(parts[1]) < num_blocks - num_last_blocks:
        return False
    return parts[2] in ("norm1", "norm2") or parts[2:5:2] == ["attn", "norm_act"]


def set_strategy(model: MViT, strategy: str) -> list[torch.nn.Parameter]:
    """Freeze what ``strategy`` does not train; returns the trainable parameters in order."""
    num_blocks = len(model.blocks)
    for name, p in model.named_parameters():
        p.requires_grad_(is_trainable(name, strategy=strategy, num_blocks=num_blocks))
    return [p for p in model.parameters() if p.requires_grad]


def make_views(video: torch.Tensor, mask: torch.Tensor, *, patch_stride: Sequence[int],
               fill_value: float | np.ndarray = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``maskdp_jax.core.tokenizer.make_views`` in torch: a token cell is public iff all its pixels
    are.

    Args:
      video: ``[P, 3, T, H, W]``; mask: ``[P, T, H, W]``, 1 = public pixel.
      fill_value: what hidden cells hold: a constant, or the tokeniser's ``[T, H, W, 3]`` fill
        (``maskdp_jax.core.tokenizer.Tokenizer.fill``, channels last as there).

    Returns:
      ``(public view, private view)``, each ``[P, 3, T, H, W]``.
    """
    private = 1.0 - mask.to(video.dtype)[:, None]
    cells = F.max_pool3d(private, kernel_size=patch_stride, stride=patch_stride)
    for axis, s in zip((2, 3, 4), patch_stride, strict=True):
        cells = cells.repeat_interleave(s, dim=axis)
    public = cells == 0
    fill = torch.as_tensor(np.asarray(fill_value, np.float32), device=video.device).to(video.dtype)
    if fill.ndim:
        fill = fill.permute(3, 0, 1, 2)  # [T, H, W, 3] -> [3, T, H, W]
    return torch.where(public, video, fill), torch.where(public, fill, video)


def per_example_gradients(model: MViT, batches, *, mode: str, patch_stride: Sequence[int],
                          fill_value: float | np.ndarray = 0.0):
    """Yields ``(grads, norm)`` for every example of ``mode``'s private pass (``maskdp``: its
    private view; ``dp``: the video), one ``torch.autograd.grad`` per example; ``grads`` are
    w.r.t. the trainable parameters in order, ``norm`` their joint L2 norm."""
    params = [p for p in model.parameters() if p.requires_grad]
    for video, mask, label in batches:
        if mode == "maskdp":
            video = make_views(video, mask, patch_stride=patch_stride, fill_value=fill_value)[1]
        for x, y in zip(video, label, strict=True):
            grads = torch.autograd.grad(F.cross_entropy(model(x[None]), y[None]), params)
            yield grads, torch.linalg.vector_norm(torch.stack(
                [torch.linalg.vector_norm(g) for g in grads]))


def mean_per_example_norm(model: MViT, batches, **kwargs) -> float:
    """Mean per-example gradient norm of the private pass (``kwargs`` as
    :func:`per_example_gradients`): a clip norm at which some examples are clipped, some not."""
    return float(np.mean([float(norm) for _, norm in per_example_gradients(model, batches,
                                                                           **kwargs)]))


class OpacusStep:
    """One logical step of ``mode`` for a torchvision MViT (see the module docstring).

    Args:
      model: the torchvision model, strategy already applied (``set_strategy``).
      mode: one of :data:`MODES`.
      l2_clip_norm / noise_multiplier: C and sigma (private modes).
      expected_batch_size: B, the divisor (Opacus' ``expected_batch_size``).
      patch_stride: token-cell size of the views.
      lr: SGD learning rate.
      engine: ``"opacus"`` (GradSampleModule + DPOptimizer) or ``"loop"``: per-example gradients
        by one ``torch.autograd.grad`` per example, clipped and summed by hand, Gaussian noise
        once. The loop is what remains for full fine-tuning of torchvision's MViT, which Opacus
        1.6 cannot hook (its attention module takes a ``(T, H, W)`` tuple, on which Opacus'
        activation hook calls ``.detach()``).
      autocast: ``torch.bfloat16``: the step runs under ``torch.autocast`` (PyTorch's mixed
        precision, AMP: products in bfloat16, parameters, gradients, clipping and noise in
        float32; Opacus supports it with its hooks), the counterpart of our
        ``compute_dtype="bfloat16"``; None: float32.
    """

    def __init__(self, model: MViT, mode: str, *, l2_clip_norm: float, noise_multiplier: float,
                 expected_batch_size: int, patch_stride: Sequence[int], lr: float = 0.1,
                 fill_value: float | np.ndarray = 0.0, engine: str = "opacus",
                 autocast: torch.dtype | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
        if engine not in ("opacus", "loop"):
            raise ValueError(f"engine must be 'opacus' or 'loop'; got {engine!r}.")
        if autocast is not None and engine == "loop":
            raise ValueError("autocast is for the Opacus engine and the non-private modes; the "
                             "per-example loop runs in float32.")
        self.mode, self.patch_stride, self.fill_value = mode, tuple(patch_stride), fill_value
        self.expected_batch_size, self.engine = expected_batch_size, engine
        self.autocast = autocast
        self.l2_clip_norm, self.noise_multiplier = l2_clip_norm, noise_multiplier
        self.params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(self.params, lr=lr)
        model.train()  # Opacus records activations in training mode only (dropout is 0)
        if mode in ("maskdp", "dp") and engine == "opacus":
            self.model = GradSampleModule(model, batch_first=True, loss_reduction="mean")
            self.dp_optimizer = DPOptimizer(
                optimizer, noise_multiplier=noise_multiplier, max_grad_norm=l2_clip_norm,
                expected_batch_size=expected_batch_size, loss_reduction="mean")
        else:
            self.model, self.dp_optimizer = model, None
        self.optimizer = optimizer

    def _forward(self, video: torch.Tensor) -> torch.Tensor:
        """The model's logits; with ``autocast`` the forward alone runs under ``torch.autocast``
        (PyTorch's AMP recipe: backward, clipping, noise and the optimiser outside it)."""
        with torch.autocast(video.device.type, dtype=self.autocast or torch.bfloat16,
                            enabled=self.autocast is not None):
            return self.model(video)

    def _private_gradient(self, batches) -> None:
        """Clipped, summed, noised, divided by B: into ``p.grad`` (Opacus DPOptimizer)."""
        self.model.enable_hooks()
        last = len(batches) - 1
        for i, (video, mask, label) in enumerate(batches):
            if self.mode == "maskdp":
                video = make_views(video, mask, patch_stride=self.patch_stride,
                                   fill_value=self.fill_value)[1]
            loss = F.cross_entropy(self._forward(video).float(), label)  # mean: Opacus / P
            loss.backward()
            if i < last:  # clip and accumulate this physical batch, no noise, no update
                self.dp_optimizer.signal_skip_step(do_skip=True)
                self.dp_optimizer.step()
                self.dp_optimizer.zero_grad(set_to_none=True)  # keeps the summed clipped grads
        if not self.dp_optimizer.pre_step():
            raise RuntimeError("Opacus skipped the final pre_step of a logical batch.")

    def _loop_private_gradient(self, batches) -> None:
        """The same as :meth:`_private_gradient` with one backward pass per example."""
        total = [torch.zeros_like(p) for p in self.params]
        for grads, norm in per_example_gradients(self.model, batches, mode=self.mode,
                                                 patch_stride=self.patch_stride,
                                                 fill_value=self.fill_value):
            scale = self.l2_clip_norm / torch.clamp(norm, min=self.l2_clip_norm)
            for t, g in zip(total, grads, strict=True):
                t.add_(g, alpha=float(scale))
        std = self.noise_multiplier * self.l2_clip_norm
        for p, t in zip(self.params, total, strict=True):
            p.grad = (t + std * torch.randn_like(t)) / self.expected_batch_size

    def _plain_gradient(self, batches, views: Sequence[int]) -> list[torch.Tensor]:
        """``sum_i L(view_i) / B`` over the given views (0 = public, 1 = private), no clipping."""
        grads = [torch.zeros_like(p) for p in self.params]
        for video, mask, label in batches:
            inputs = (make_views(video, mask, patch_stride=self.patch_stride,
                                 fill_value=self.fill_value) if views else (video,))
            loss = sum(F.cross_entropy(self._forward(inputs[v]).float(), label, reduction="sum")
                       for v in views or (0,))
            for g, d in zip(grads, torch.autograd.grad(loss / self.expected_batch_size,
                                                       self.params), strict=True):
                g += d
        return grads

    def __call__(self, batches) -> None:
        """``batches``: the logical batch as physical ``(video [P,3,T,H,W], mask [P,T,H,W],
        label [P])`` tuples; the same examples feed the public and the private pass."""
        (self.dp_optimizer or self.optimizer).zero_grad(set_to_none=True)
        if self.mode in ("maskdp", "dp"):
            if self.engine == "loop":
                self._loop_private_gradient(batches)
            else:
                self._private_gradient(batches)
                self.model.disable_hooks()
            if self.mode == "maskdp":
                for p, g in zip(self.params, self._plain_gradient(batches, (0,)), strict=True):
                    p.grad += g
        else:
            grads = self._plain_gradient(batches, (0, 1) if self.mode == "nonprivate2" else ())
            for p, g in zip(self.params, grads, strict=True):
                p.grad = g
        self.optimizer.step()

    def gradient(self) -> dict[str, np.ndarray]:
        """``{torchvision name: p.grad}`` of the last step (the update is ``-lr`` times it)."""
        module = self.model._module if isinstance(self.model, GradSampleModule) else self.model
        return {n: p.grad.detach().cpu().numpy().copy()
                for n, p in module.named_parameters() if p.requires_grad}
