r"""The private pass by ghost norms (``maskdp_jax.core.ghost``) against per-example gradients
(``vmap``): every per-example norm, the clipped sum and the statistics.

    python benchmarks/ghost_equality.py --model=mvit_tiny --examples=6
    python benchmarks/ghost_equality.py --model=mvit_v1_parity --examples=6
    python benchmarks/ghost_equality.py --model=mvit_v2_s --examples=5 --clips=1 --microbatch=1 \
        --whole-batch-only

One physical batch of ``--examples`` videos (``--clips`` clips each) with random pixels and
random private boxes, seen two ways: ``maskdp`` (the private views of ``train_step.PixelViews``,
weight 0 for a video without private cells) and ``dp`` (the whole videos). The batch holds
examples whose gradient is clipped and ones whose gradient is not (each example's loss is
multiplied by 1e2 or 1e-4, alternately, which scales its gradient), a padding row (weight 0), a
video without private cells, and a video with a NaN private pixel (non-finite: zeroed and counted
by both). Each path's ``clipping.clipped_grad_sum`` is compiled once and run on the whole batch
and on each example alone (one-hot weights: the statistics then hold that example's norm, the sum
its clipped gradient, whose norm must be <= C). ``tests/test_maskdp_jax_ghost.py`` runs
:func:`compare` on ``mvit_test`` and on its tiny convolutional model.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from benchmarks.finetune_cost import random_params  # noqa: E402
from maskdp_jax import models  # noqa: E402
from maskdp_jax.core import clipping, compilation, gradient, partition  # noqa: E402
from maskdp_jax.core import train_step as ts  # noqa: E402
from maskdp_jax.core.tokenizer import Tokenizer  # noqa: E402
from maskdp_jax.run import model as run_model  # noqa: E402

CLIP_NORM = 1.0


def make_batch(input_size, *, examples: int, clips: int, seed: int) -> dict[str, np.ndarray]:
    """A physical batch (``train_step``'s layout, float pixels) with every case of the module
    docstring: example 0 padding, example 1 without private cells, example 2 with a NaN private
    pixel (when ``examples >= 4``); the loss factor of odd examples 1e-4, of even ones 1e2 (with
    5 examples or more, both factors reach real examples in both modes)."""
    rng = np.random.default_rng(seed)
    t, h, w = input_size
    video = rng.normal(size=(examples, clips, t, h, w, 3)).astype(np.float32)
    mask = np.ones((examples, clips, t, h, w), np.uint8)
    for i in range(examples):
        bh, bw = int(0.5 * h), int(0.5 * w)
        mask[i, :, :, h // 4:h // 4 + bh, w // 4:w // 4 + bw] = 0
    weight = np.ones(examples, np.float32)
    weight[0] = 0.0
    mask[1] = 1
    if examples >= 4:
        video[2, 0, 0, h // 2, w // 2, 0] = np.nan
    return {"video": video, "mask": mask,
            "label": rng.integers(0, 3, examples).astype(np.int32),
            "factor": np.where(np.arange(examples) % 2, 1e-4, 1e2).astype(np.float32),
            "weight": weight}


def pass_inputs(model, batch, mode: str):
    """``(examples, weights)`` of the private pass of ``mode`` (``maskdp``: private views)."""
    views = ts.PixelViews(Tokenizer(patch_stride=tuple(model.patch_stride)))
    if mode == "maskdp":
        made = views({k: jnp.asarray(v) for k, v in batch.items()})
        video, weights = gradient.pass_view(made, jnp.asarray(batch["weight"]), public=False)
    else:
        video, weights = batch["video"], batch["weight"]
    return (jnp.asarray(video), jnp.asarray(batch["label"]), jnp.asarray(batch["factor"])), \
        jnp.asarray(weights, jnp.float32)


def compare_preset(model_name: str, *, strategy: str = "full", seed: int = 0, **kwargs) -> dict:
    """:func:`compare` on the preset ``model_name`` with random weights (LayerNorm scales 1) and
    ``strategy``'s trainable parameters."""
    model = models.get_model(model_name, num_classes=3)
    params = random_params(model, (*model.input_size, 3), seed=seed)
    mask = models.finetune.trainable_mask(params, strategy=strategy, num_last_blocks=2)
    trainable, frozen = partition.split(params, mask)
    return compare(model, trainable, frozen, input_size=model.input_size, seed=seed, **kwargs)


def compare(model, trainable, frozen, *, input_size, examples: int = 6, clips: int = 2,
            microbatch: int | None = None, seed: int = 0, rules=None,
            each_example: bool = True) -> dict:
    """Both paths on the batch of :func:`make_batch` in ``maskdp`` and ``dp``.

    Args:
      model: a Flax video classifier (``patch_stride``: the views' cell geometry) of 3 classes;
        ``trainable``/``frozen`` its parameters; ``input_size`` ``(T, H, W)`` of its clips.
      rules: the ghost path's rules (default ``run.model.ghost_rules()``; a test passes broken
        ones).
      microbatch: the ``vmap`` path's micro-batch (the ghost path takes the whole batch).
      each_example: also run each real example alone (its norm, its clipped contribution);
        False compares the whole batch only (``norm_rel`` and ``max_contribution`` are then
        None), for a model whose passes take minutes.

    Returns:
      ``{mode: {...}}`` with the largest relative difference of the per-example norms
      (``norm_rel``), of the clipped sum over all trainable leaves (``sum_rel``: ``‖ghost -
      vmap‖ / ‖vmap‖``), of ``norm_sum``/``loss_sum`` (``stats_rel``), whether the counts agree
      (``counts_equal``), the largest norm of one example's clipped contribution on the ghost
      path (``max_contribution``), the number of clipped / unclipped / non-finite real examples
      and the seconds of compilation per path.
    """
    def loss_fn(tr, example):
        video, label, factor = example
        merged = partition.merge(tr, frozen)
        apply = lambda p, x: model.apply({"params": p}, x)  # noqa: E731
        return factor * ts.video_losses(apply, merged, video[None], label[None])[0]

    batch = make_batch(input_size, examples=examples, clips=clips, seed=seed + 1)
    engines = {"vmap": (None, microbatch), "ghost": (rules or run_model.ghost_rules(), None)}
    programs, compile_s = {}, {}
    for name, (engine_rules, micro) in engines.items():
        fn = compilation.jit(lambda tr, ex, w, r=engine_rules, m=micro: clipping.clipped_grad_sum(
            loss_fn, tr, ex, w, l2_clip_norm=CLIP_NORM, microbatch_size=m, ghost_rules=r))
        ex, w = pass_inputs(model, batch, "dp")
        t = time.perf_counter()
        programs[name] = fn.lower(trainable, ex, w).compile()
        compile_s[name] = time.perf_counter() - t

    def norm(tree):
        return float(np.sqrt(sum(np.sum(np.square(np.asarray(x, np.float64)))
                                 for x in jax.tree.leaves(tree))))

    out = {}
    for mode in ("maskdp", "dp"):
        ex, w = pass_inputs(model, batch, mode)
        whole = {k: programs[k](trainable, ex, w) for k in programs}
        (g_v, s_v), (g_g, s_g) = whole["vmap"], whole["ghost"]
        diff = jax.tree.map(lambda a, b: np.asarray(a, np.float64) - np.asarray(b), g_g, g_v)
        stats_rel = max(abs(float(a) - float(b)) / max(abs(float(b)), 1e-30)
                        for a, b in ((s_g.norm_sum, s_v.norm_sum), (s_g.loss_sum, s_v.loss_sum)))
        counts_equal = all(int(a) == int(b) for a, b in
                           ((s_g.num_nonfinite, s_v.num_nonfinite),
                            (s_g.num_clipped, s_v.num_clipped), (s_g.count, s_v.count)))
        norm_rel, contribution, clipped, unclipped = 0.0, 0.0, 0, 0
        for i in np.flatnonzero(np.asarray(w) > 0) if each_example else []:
            one_hot = jnp.zeros_like(w).at[i].set(1.0)
            (_, sv), (gg, sg) = (programs[k](trainable, ex, one_hot) for k in ("vmap", "ghost"))
            nv, ng = float(sv.norm_sum), float(sg.norm_sum)
            if nv > 0:
                norm_rel = max(norm_rel, abs(ng - nv) / nv)
            elif ng != 0:
                norm_rel = float("inf")
            contribution = max(contribution, norm(gg))
            clipped += int(sv.num_clipped)
            unclipped += int(sv.num_nonfinite == 0 and sv.num_clipped == 0)
        if not each_example:
            norm_rel = contribution = None
            clipped = int(s_v.num_clipped)
            unclipped = int(s_v.count - s_v.num_clipped - s_v.num_nonfinite)
        out[mode] = {"norm_rel": norm_rel, "sum_rel": norm(diff) / norm(g_v),
                     "stats_rel": stats_rel, "counts_equal": counts_equal,
                     "max_contribution": contribution, "clipped": clipped,
                     "unclipped": unclipped, "nonfinite": int(s_v.num_nonfinite),
                     "compile_s": compile_s}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="mvit_tiny")
    parser.add_argument("--strategy", default="full")
    parser.add_argument("--examples", type=int, default=6)
    parser.add_argument("--clips", type=int, default=2)
    parser.add_argument("--microbatch", type=int, default=None,
                        help="the vmap path's micro-batch (default: the whole batch)")
    parser.add_argument("--whole-batch-only", action="store_true",
                        help="compare the whole batch's sum and statistics only, not each "
                             "example alone (mvit_v2_s on a CPU: minutes per pass)")
    args = parser.parse_args()
    print(f"{args.model}, {args.strategy} fine-tuning, {args.examples} examples x {args.clips} "
          f"clips, C = {CLIP_NORM}; jax {jax.__version__} on {jax.devices()[0].platform}")
    result = compare_preset(args.model, strategy=args.strategy, examples=args.examples,
                            clips=args.clips, microbatch=args.microbatch,
                            each_example=not args.whole_batch_only)
    for mode, r in result.items():
        each = ("not run alone" if r["norm_rel"] is None else
                f"per-example norms rel {r['norm_rel']:.1e}, largest clipped contribution "
                f"{r['max_contribution']:.6f} (C = {CLIP_NORM})")
        print(f"  {mode:6s}: clipped sum rel {r['sum_rel']:.1e}, norm/loss sums rel "
              f"{r['stats_rel']:.1e}, counts equal {r['counts_equal']}; {r['clipped']} clipped, "
              f"{r['unclipped']} unclipped, {r['nonfinite']} non-finite; {each}")
    print("  compile [s]: " + ", ".join(f"{k} {v:.1f}" for k, v in r["compile_s"].items()))


if __name__ == "__main__":
    main()
