r"""Per-video gradient norms at initial weights: full video against its public and private views.

    python benchmarks/public_view_grad.py                              # mvit_test, mvit_cpu
    python benchmarks/public_view_grad.py --presets=mvit_v2_s --videos=2

For each preset, initial weights from ``run.model.build`` (``config.seed`` 0, fine-tuning
``full``) and ``--videos`` videos of the embedded synthetic dataset drawn at the preset's clip
size, it prints, per video, the L2 norm of the gradient of the video's loss w.r.t. every
parameter for the full video and for each view, the parameter that holds most of the public
gradient's squared norm, and ``min_var``: the smallest per-token variance over channels of the
patch tokens entering block 0's first LayerNorm (eps 1e-6). A token whose variance is near or below
eps gets a LayerNorm Jacobian of about ``1 / sqrt(var + eps)``, up to 1e3.

``--fill`` compares ways a hidden cell can enter the model, at the same weights and videos:

* ``model``: the views as the training step makes them (``maskdp_jax.core.train_step.PixelViews``
  of the model's tokeniser);
* ``constant``: hidden pixels set to the constant 0 (mid-grey, ``fill_texture=0``), the patch
  embedding left to see them; the tokens of fully hidden cells are then the patch embedding's
  bias;
* ``mask_token``: hidden cells' tokens replaced, after the patch embedding, by one vector
  drawn like the class token (truncated normal, std 0.02, as MAE and BEiT initialise theirs).

The gradient of each view is the one the step takes of it (``maskdp_jax.core.train_step``); nothing
here is private data (synthetic videos, random weights).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from flax import traverse_util  # noqa: E402

from maskdp_jax.configs import default  # noqa: E402
from maskdp_jax.core import tokenizer, train_step  # noqa: E402
from maskdp_jax.data import synthetic  # noqa: E402
from maskdp_jax.run import model as run_model  # noqa: E402

FILLS = ("model", "constant", "mask_token")
VIEWS = ("full", "public", "private")


def videos(input_shape: tuple[int, ...], num_videos: int, seed: int = 0) -> dict:
    """``video [n, 1, T, H, W, 3]`` float32 (normalised), ``mask [n, 1, T, H, W]`` uint8,
    ``label [n]`` of the embedded dataset's training split at the clip size ``input_shape``,
    one video per class first."""
    t, h, w, _ = input_shape
    train, _ = synthetic.make_splits(num_train=max(num_videos, 8), num_test=8, frames=t,
                                     clip_frames=t, size=h, seed=seed)
    if h != w:
        raise ValueError(f"the embedded dataset has square frames; got {input_shape}.")
    return train.get_batch(np.arange(num_videos), num_clips=1, seed=None)


def build(preset: str, *, num_classes: int, seed: int = 0,
          input_size: tuple[int, int, int] | None = None) -> run_model.RunModel:
    """The preset at its initial weights, every parameter trainable; built for clips
    ``input_size`` ``(T, H, W)`` instead of the preset's own when given."""
    config = default.get_config().model
    config.name, config.finetune, config.init_from = preset, "full", ""
    return run_model.build(config, num_classes=num_classes, seed=seed, input_size=input_size)


def _loss_fn(built: run_model.RunModel, fill: str):
    """``(view, loss)``. ``view(clip [T, H, W, 3], mask [T, H, W] (1 = public), which) ->
    (x [1, T, H, W, 3], hidden [L] bool)``: the input ``which`` (``full``, ``public`` or
    ``private``) and, with ``mask_token``, the patch tokens its hidden cells become (all False
    otherwise). ``loss(params, x, hidden, label []) -> (loss, min_var)``. With ``mask_token`` the
    hidden tokens are replaced after the position embedding of MViTv1 (the probe is meant for the
    v2 presets, which have none)."""
    module = built.module
    tokens = built.tokenizer()
    if fill != "model":
        tokens = dataclasses.replace(tokens, fill_texture=0.0)

    def view(clip, mask, which):
        cells = tokenizer.public_cells(mask, patch_stride=tokens.patch_stride).reshape(-1)
        if which == "full":
            return clip[None], jnp.zeros_like(cells)
        views = train_step.PixelViews(tokens)({"video": clip[None, None],
                                               "mask": mask[None, None]})
        x = (views.public if which == "public" else views.private)[0]
        hidden = (~cells if which == "public" else cells) & (fill == "mask_token")
        return x, hidden

    def loss(params, x, hidden, label):
        embedded = module.apply({"params": params}, x, stop_block=0)
        if fill == "mask_token":
            token = params["mask_token_probe"]
            patches = jnp.where(hidden[None, :, None], token, embedded[:, 1:])
            embedded = jnp.concatenate([embedded[:, :1], patches], axis=1)
        min_var = jnp.min(jnp.var(embedded[:, 1:], axis=-1))  # patch tokens
        logits = module.apply({"params": params}, embedded, start_block=0)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, label[None])[0]
        return ce, min_var

    return view, loss


def measure(preset: str, *, num_videos: int, fill: str, seed: int = 0,
            views: tuple[str, ...] = VIEWS,
            input_size: tuple[int, int, int] | None = None) -> list[dict]:
    """Per video: the gradient norm of each of ``views`` (``full`` / ``public`` / ``private``),
    ``min_var_<view>``, the smallest variance over channels of its patch tokens entering block 0
    (the class token, a parameter drawn with std 0.02, left out), and with ``public``, ``top``:
    the parameter holding most of the public gradient's squared norm, and that share.
    ``input_size``: clips ``(T, H, W)`` to build the preset for (:func:`build`); None: its own.
    """
    if fill not in FILLS:
        raise ValueError(f"--fill must be one of {FILLS}; got {fill!r}.")
    built = build(preset, num_classes=len(synthetic.CLASS_NAMES), seed=seed,
                  input_size=input_size)
    batch = videos(built.input_shape, num_videos, seed=seed)
    params = built.params
    if fill == "mask_token":
        dim = built.module.blocks[0].dim_in
        params = {**params, "mask_token_probe": jax.random.truncated_normal(
            jax.random.key(seed), -2.0, 2.0, (dim,)) * 0.02}
    view, loss = _loss_fn(built, fill)

    @jax.jit
    def norms(params, clip, mask, label):
        """Per view: squared gradient norm of every parameter, and min_var. One program, whose
        gradient is compiled once and looped over the views (``lax.map``): compiling it per view
        multiplied the compile time, most of this probe's time at ``mvit_v2_s``."""
        inputs = [view(clip, mask, which) for which in views]

        def one(x_hidden):
            (_, min_var), g = jax.value_and_grad(loss, has_aux=True)(params, *x_hidden, label)
            return ({"/".join(k): jnp.sum(v.astype(jnp.float32) ** 2)
                     for k, v in traverse_util.flatten_dict(g).items()}, min_var)

        sq, min_var = jax.lax.map(one, jax.tree.map(lambda *a: jnp.stack(a), *inputs))
        return {which: ({k: v[i] for k, v in sq.items()}, min_var[i])
                for i, which in enumerate(views)}

    rows = []
    for i in range(num_videos):
        clip, mask = batch["video"][i, 0], batch["mask"][i, 0]
        cells = tokenizer.public_cells(mask, patch_stride=built.tokenizer().patch_stride)
        row = {"video": i, "cells": int(cells.size), "public_cells": int(cells.sum())}
        for which, (sq, min_var) in jax.device_get(
                norms(params, clip, mask, jnp.asarray(batch["label"][i]))).items():
            sq = {k: float(v) for k, v in sq.items()}
            row[which] = math.sqrt(sum(sq.values()))
            row[f"min_var_{which}"] = float(min_var)
            if which == "public":
                top = max(sq, key=sq.get)
                row["top"] = (top, sq[top] / max(sum(sq.values()), 1e-30))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="mvit_test,mvit_cpu")
    parser.add_argument("--videos", type=int, default=8)
    parser.add_argument("--fill", default=",".join(FILLS), help=f"comma-separated, of {FILLS}")
    parser.add_argument("--views", default=",".join(VIEWS),
                        help=f"comma-separated, of {VIEWS}; full and public needed")
    args = parser.parse_args()
    views = tuple(args.views.split(","))
    if not {"full", "public"} <= set(views) <= set(VIEWS):
        raise SystemExit(f"--views must include full and public, from {VIEWS}; got {views}.")
    print(f"jax {jax.__version__}, {jax.default_backend()}: {jax.devices()[0].device_kind}")
    for preset in args.presets.split(","):
        for fill in args.fill.split(","):
            rows = measure(preset, num_videos=args.videos, fill=fill, views=views)
            ratio = [r["public"] / r["full"] for r in rows]
            print(f"\n{preset}, fill={fill}: public/full gradient norm "
                  f"median {np.median(ratio):.3g}, max {max(ratio):.3g}")
            print("video  cells  " + "".join(f"{v:>11s} " for v in views)
                  + " min_var " + "/".join(views) + "   top public parameter (share)")
            for r in rows:
                print(f"{r['video']:5d}  {r['public_cells']:5d}  "
                      + "".join(f"{r[v]:11.4g} " for v in views) + " "
                      + "/".join(f"{r['min_var_' + v]:.2g}" for v in views)
                      + f"   {r['top'][0]} ({r['top'][1]:.3f})")


if __name__ == "__main__":
    main()
