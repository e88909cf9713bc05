r"""Where a logical step's time goes: each jitted piece of the step, compiled and timed alone.

    python benchmarks/step_parts.py --size=cpu --strategy=selective          # needs torch
    python benchmarks/step_parts.py --size=paper --strategy=full --weights=random \
        --physical=2 --microbatch=1 --parts=private-maskdp --repeats=0       # compile cost only
    python benchmarks/step_parts.py --size=paper --strategy=full --weights=random \
        --physical=2 --microbatch=1 \
        --parts=public-nonprivate,private-maskdp,private-maskdp-ghost --repeats=3  # ghost norms
    python benchmarks/step_parts.py --size=tiny --weights=random --compute_dtype=bfloat16

Builds the model of ``benchmarks/opacus_maskdp.py``'s size and, for one physical batch, lowers,
compiles and times each piece of the step: the forward pass, the public pass (ordinary gradient
of the batch sum) and the private pass (per-example gradients, clipped, summed). Per piece it
prints the seconds spent tracing and lowering to StableHLO, the seconds XLA spends compiling,
the number of fusions in the compiled program (a rough measure of how much code XLA generated),
the compiled program's peak memory by XLA's memory analysis (arguments + outputs + temporaries
- aliased) and the median of ``--repeats`` calls after the first. A part ending in ``-ghost`` is
the private pass with per-example norms by ghost rules (``maskdp_jax.core.ghost``, no per-example
gradient, whole physical batch at once); without it, per-example gradients by ``vmap`` in
micro-batches of ``--microbatch`` (full fine-tuning). ``finalize`` is the step's last program
(:func:`maskdp_jax.core.train_step.finalize`: the noise once, the division by B, Adam's update) of
a ``maskdp`` plan with ``--bands`` bands of banded noise (0: independent noise), compiled as the
step compiles it, the state donated (its new parameters, optimiser and noise state written over
the old: what it aliases is subtracted from its peak), and ``finalize-undonated`` the same
program without donation, the state's second copy included: the pair measures donation in one
run. ``--compute_dtype=bfloat16`` builds the model with bfloat16 products, as
``config.compute.dtype`` does. The process' peak host memory (compilation dominates it at the
papers' size on a CPU) and the load average, printed before and after (run it alone), come
last.

``--weights=torchvision`` (default) converts the torch model's weights so the times belong to
``opacus_maskdp.py``'s table; ``--weights=random`` initialises our model instead, which needs no
torch and leaves the compile cost unchanged (XLA sees the same shapes). Run one piece per process
when comparing compile times: the persistent compilation cache is off here, but later pieces can
reuse traced sub-computations of earlier ones.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from benchmarks import opacus_maskdp as bench  # noqa: E402
from maskdp_jax.core import compilation, partition  # noqa: E402
from maskdp_jax.core import train_step as ts  # noqa: E402
from maskdp_jax.run import model as run_model  # noqa: E402

PARTS = ("forward", "public-maskdp", "public-nonprivate", "private-maskdp", "private-dp",
         "private-maskdp-ghost", "private-dp-ghost", "finalize", "finalize-undonated")


def compile_and_time(fn, *args, repeats: int, carry: bool = False) -> dict:
    """Lower, compile and (``repeats`` > 0) time ``fn(*args)``; ``fn`` is a ``jax.jit`` object.
    ``carry``: each call takes the first output of the call before as its first argument (a
    program that consumes its state: a donated argument cannot be passed twice)."""
    t = time.perf_counter()
    lowered = fn.lower(*args)
    lower_s = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    memory = compiled.memory_analysis()
    peak = (memory.argument_size_in_bytes + memory.output_size_in_bytes
            + memory.temp_size_in_bytes - memory.alias_size_in_bytes)
    out = {"lower_s": lower_s, "compile_s": compile_s,
           "fusions": compiled.as_text().count(" fusion("), "peak_mib": peak / 2**20,
           "median_ms": None}
    if repeats > 0:
        result = jax.block_until_ready(compiled(*args))
        times = []
        for _ in range(repeats):
            if carry:
                args = (result[0], *args[1:])
            t = time.perf_counter()
            result = jax.block_until_ready(compiled(*args))
            times.append(time.perf_counter() - t)
        out["median_ms"] = 1e3 * float(np.median(times))
    return out


def finalize_and_time(size: dict, trainable, frozen, *, bands: int, donate: bool,
                      repeats: int) -> dict:
    """:func:`compile_and_time` for the finalisation of a ``maskdp`` step over ``trainable``
    (``bands`` > 0: banded noise with that many bands), donated as the step donates it or not;
    each timed call takes the state the previous one returned (the donated program consumes
    its state), both ways alike."""
    import jax.numpy as jnp
    import optax

    from maskdp_jax.core.mechanism import Mechanism
    from maskdp_jax.core.plan import PrivacyPlan
    from maskdp_jax.core.randomness import Randomness

    plan = PrivacyPlan(mode="maskdp", num_examples=10**6, batch_size=size["batch"], steps=1000,
                       l2_clip_norm=1.0, noise_multiplier=1.0, delta=1e-7,
                       noise="banded" if bands else "independent", bands=max(bands, 1))
    mechanism = Mechanism(plan=plan, randomness=Randomness(mode="seeded", seed=0))
    tx = optax.adam(1e-3)
    state = ts.TrainState.create(trainable=trainable, frozen=None, tx=tx, mechanism=mechanism)
    acc = jax.tree.map(jnp.ones_like, ts.zeros_accumulator(trainable))
    fn = functools.partial(ts.finalize, tx=tx, mechanism=mechanism)
    program = compilation.jit(fn, donate_argnums=0) if donate else compilation.jit(fn)
    return compile_and_time(program, state, acc, repeats=repeats, carry=True)


def build(size: dict, strategy: str, weights: str, compute_dtype: str = "float32"):
    """``(model, trainable, frozen, apply_fn)`` at ``size``: torchvision's weights converted, or
    our own random initialisation (no torch needed); products in ``compute_dtype``
    (``config.compute.dtype``)."""
    state = None
    if weights == "torchvision":
        model = bench.torch_setup(size, strategy)
        state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return bench.jax_setup(size, strategy, state, compute_dtype=compute_dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(bench.SIZES), default="cpu")
    parser.add_argument("--strategy", choices=("selective", "full"), default="selective")
    parser.add_argument("--weights", choices=("torchvision", "random"), default="torchvision")
    parser.add_argument("--physical", type=int, default=None,
                        help="physical batch (default: the size's)")
    parser.add_argument("--microbatch", type=int, default=None,
                        help="private pass micro-batch for --strategy=full (default: the size's)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated pieces, from {', '.join(PARTS)}")
    parser.add_argument("--compute_dtype", choices=("float32", "bfloat16"), default="float32",
                        help="the products' precision (config.compute.dtype; parameters, norms "
                             "and gradients stay float32)")
    parser.add_argument("--bands", type=int, default=4,
                        help="finalize parts: bands of banded noise (0: independent noise)")
    parser.add_argument("--repeats", type=int, default=10,
                        help="timed calls per piece after the first; 0 = compile cost only")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown --parts {unknown}; choose from {', '.join(PARTS)}")
    if args.weights == "torchvision":
        try:
            import torch  # noqa: F401
            import torchvision  # noqa: F401
        except ImportError as e:
            parser.error(f"--weights=torchvision needs torch and torchvision ({e}): "
                         "pip install -r requirements-bench.txt, or pass --weights=random")
    size = dict(bench.SIZES[args.size])
    if args.physical is not None:
        size["physical"] = args.physical
    if args.microbatch is not None:
        size["microbatch"] = args.microbatch

    print(f"load average before: {os.getloadavg()}")
    jmodel, trainable, frozen, apply_fn = build(size, args.strategy, args.weights,
                                                args.compute_dtype)
    data = bench.make_data(n=size["physical"], input_size=jmodel.input_size,
                           classes=size["classes"], seed=1)
    batch = bench.jax_batches(data, size["physical"])[0]
    micro = size["microbatch"] if args.strategy == "full" else None
    cfg = bench.dp_config(size, jmodel, sigma=1.0, clip=1.0, microbatch=micro)
    acc = ts.zeros_accumulator(trainable)
    n_params = sum(x.size for x in jax.tree.leaves(trainable))
    print(f"{args.size} ({size['preset']}), {args.strategy} FT, physical batch {size['physical']}"
          f"{f', micro-batches of {micro}' if micro else ''}, {args.weights} weights, "
          f"{args.compute_dtype} products, {n_params:,} trainable parameters, finalize: "
          f"{f'{args.bands} bands of banded noise' if args.bands else 'independent noise'}, Adam, "
          f"jax {jax.__version__} on {jax.devices()[0].platform}:")
    print(f"  {'piece':22s} {'lower [s]':>9s} {'compile [s]':>11s} {'fusions':>7s} "
          f"{'peak [MiB]':>10s} {'median [ms]':>11s}")
    for part in parts:
        if part.startswith("finalize"):
            row = finalize_and_time(size, trainable, frozen, bands=args.bands,
                                    donate=part == "finalize", repeats=args.repeats)
        elif part == "forward":
            row = compile_and_time(jax.jit(apply_fn), partition.merge(trainable, frozen),
                                   batch["video"][:, 0], repeats=args.repeats)
        else:
            kind, mode, *engine = part.split("-")
            extra = {"microbatch_size": None, "ghost_rules": None}
            if engine:
                extra["ghost_rules"] = run_model.ghost_rules()
            elif kind == "private":
                extra["microbatch_size"] = cfg.microbatch
            fn = compilation.jit(functools.partial(
                ts.accumulate, public=kind != "private", apply_fn=apply_fn,
                **bench.step_args(cfg, mode) | extra))
            row = compile_and_time(fn, acc, trainable, frozen, batch, repeats=args.repeats)
        median = "-" if args.repeats == 0 else f"{row['median_ms']:.1f}"
        print(f"  {part:22s} {row['lower_s']:9.1f} {row['compile_s']:11.1f} {row['fusions']:7d} "
              f"{row['peak_mib']:10.0f} {median:>11s}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"  peak host memory (RSS) {peak:.0f} MiB")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
