r"""First-step compile time of our step, cold and from the persistent compilation cache.

    python benchmarks/compile_time.py                               # mvit_v2_s, selective, maskdp
    python benchmarks/compile_time.py --preset=mvit_test --batch=2  # seconds, a smoke run

Runs the step of ``benchmarks/opacus_maskdp.py`` (:func:`benchmarks.opacus_maskdp.make_jax_step`,
the same programs ``train.py`` compiles) twice, each in a fresh process sharing one fresh
persistent compilation cache directory: the first process compiles everything (cold), the second
loads the programs the first wrote (warm). Each process times its first step (compilation and one
step) and its second (one step); the compile time is their difference. Batch and physical batch
are small, so the step itself is a small part of the first-step time; compilation does not depend
on the batch beyond its shapes.

On the CPU this is the proxy of the GPU's compile time between leases (the GPU compiles the same
programs, with autotuning on top): it shows whether a change makes the program cheaper to
compile. The machine's load average is printed with the figures: on a shared machine they vary.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def worker(args) -> dict:
    """One process: build the model and step, time the first and the second step."""
    import jax
    import optax

    from benchmarks import opacus_maskdp as om

    jax.config.update("jax_compilation_cache_dir", args.cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    size = dict(preset=args.preset, classes=args.classes, batch=args.batch,
                physical=args.physical, microbatch=args.microbatch)
    model, trainable, frozen, apply_fn = om.jax_setup(size, args.strategy, None,
                                                     compute_dtype=args.compute_dtype)
    tx = optax.sgd(0.1)
    cfg = om.dp_config(size, model, sigma=1.0, clip=1.0,
                       microbatch=args.microbatch if args.strategy == "full" else None)
    step = om.make_jax_step(args.mode, apply_fn=apply_fn, tx=tx, cfg=cfg)
    data = om.make_data(n=args.batch, input_size=model.input_size, classes=args.classes, seed=1)
    batches = om.jax_batches(data, args.physical)
    state = om.jax_state(trainable, frozen, tx)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        state, _ = step(state, batches)
        jax.block_until_ready(state)
        times.append(time.perf_counter() - t)
    return dict(first_s=times[0], second_s=times[1], compile_s=times[0] - times[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="mvit_v2_s")
    parser.add_argument("--classes", type=int, default=60)
    parser.add_argument("--strategy", choices=("selective", "full"), default="selective")
    parser.add_argument("--mode", default="maskdp",
                        choices=("maskdp", "dp", "nonprivate2", "nonprivate"))
    parser.add_argument("--batch", type=int, default=2, help="logical batch")
    parser.add_argument("--physical", type=int, default=2, help="physical batch")
    parser.add_argument("--microbatch", type=int, default=1, help="full FT: per-example at a time")
    parser.add_argument("--compute_dtype", default="float32")
    parser.add_argument("--cache_dir", help="persistent cache (default: a fresh temporary one)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    cache = args.cache_dir or tempfile.mkdtemp(prefix="maskdp-compile-")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"--cache_dir={cache}"] + [
        f"--{k}={getattr(args, k)}" for k in ("preset", "classes", "strategy", "mode", "batch",
                                               "physical", "microbatch", "compute_dtype")]
    print(f"# {args.preset}, {args.strategy}, {args.mode}, B={args.batch} in physical batches of "
          f"{args.physical}, {args.compute_dtype}; {os.cpu_count()} CPUs; cache {cache}")
    rows = []
    for run in ("cold", "from the persistent cache"):
        load = os.getloadavg()[0]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"worker failed:\n{proc.stderr[-3000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(f"| {run} | {r['first_s']:.1f} | {r['second_s']:.2f} | {r['compile_s']:.1f} "
                    f"| {load:.1f} |")
        print(rows[-1], flush=True)
    print("\n| run | first step [s] | second step [s] | compile = first - second [s] "
          "| load average (1 min) at start |\n|---|---:|---:|---:|---:|\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
