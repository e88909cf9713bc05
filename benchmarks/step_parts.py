r"""Where a logical step's time goes: each jitted piece of the step, timed alone (needs torch).

    python benchmarks/step_parts.py --size=cpu --strategy=selective

Builds the model of ``benchmarks/opacus_maskdp.py``'s size (torchvision weights converted, so the
numbers belong to that benchmark's table) and times, for one physical batch, the forward pass, the
public pass (ordinary gradient of the batch sum) and the private pass (per-example gradients,
clipped, summed), each median of 10 after its compile.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from benchmarks import opacus_maskdp as bench  # noqa: E402
from maskdp_jax import partition  # noqa: E402
from maskdp_jax import train_step as ts  # noqa: E402


def median_ms(fn, *args, repeats: int = 10) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(bench.SIZES), default="cpu")
    parser.add_argument("--strategy", choices=("selective", "full"), default="selective")
    args = parser.parse_args()
    size = bench.SIZES[args.size]
    model = bench.torch_setup(size, args.strategy)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    jmodel, trainable, frozen, apply_fn = bench.jax_setup(size, args.strategy, state)
    data = bench.make_data(n=size["physical"], input_size=jmodel.input_size,
                           classes=size["classes"], seed=1)
    batch = bench.jax_batches(data, size["physical"])[0]
    micro = size["microbatch"] if args.strategy == "full" else None
    cfg = bench.dp_config(size, jmodel, sigma=1.0, clip=1.0, microbatch=micro)
    acc = ts.zeros_accumulator(trainable)
    forward = jax.jit(apply_fn)
    print(f"{args.size} ({size['preset']}), {args.strategy} FT, physical batch {size['physical']}, "
          f"jax {jax.__version__} on {jax.devices()[0].platform}:")
    ms = median_ms(forward, partition.merge(trainable, frozen), batch["video"][:, 0])
    print(f"  {'forward only':33s} {ms:7.1f} ms")
    for mode, piece in [("maskdp", ts.accumulate_public), ("nonprivate", ts.accumulate_public),
                        ("maskdp", ts.accumulate_private), ("dp", ts.accumulate_private)]:
        extra = {"microbatch_size": cfg.microbatch} if piece is ts.accumulate_private else {}
        fn = ts.jit(functools.partial(piece, apply_fn=apply_fn, plan=bench.step_plan(cfg, mode),
                                      tokens=cfg.tokens, **extra))
        name = f"{piece.__name__.removeprefix('accumulate_')} pass, {mode}"
        print(f"  {name:33s} {median_ms(fn, acc, trainable, frozen, batch):7.1f} ms")


if __name__ == "__main__":
    main()
