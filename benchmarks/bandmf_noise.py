r"""What banded noise costs per step at ``mvit_v2_s`` size: time of one step's noise and the
noise state's memory, against independent noise.

    python benchmarks/bandmf_noise.py --bands 4 --params 34500000 --steps 22500

The noise of one logical step for a flat parameter vector of ``--params`` float32 (the trainable
parameters of a full fine-tuning of ``mvit_v2_s``; ``python -c "from maskdp_jax.run import model;
..."`` counts them), jitted, timed over ``--repeats`` calls after one warm-up:
:func:`maskdp_jax.core.noise.gaussian_noise_like` (independent) and
:meth:`maskdp_jax.core.bandmf.BandedNoise.noise_like` (``--bands`` bands; the strategy for
``--steps`` steps, optimised once and cached in the process). The state's memory is its buffers'
bytes (``bands × params × 4``). Prints the load average before and after: run it alone.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from maskdp_jax.core import bandmf, noise


def _time(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # compile and warm up
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=34_500_000)
    parser.add_argument("--bands", type=int, default=4)
    parser.add_argument("--steps", type=int, default=22_500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    tree = jnp.zeros((args.params,), jnp.float32)
    key = jax.random.key(0)
    independent = jax.jit(lambda k: noise.gaussian_noise_like(
        tree, k, noise_multiplier=1.0, l2_clip_norm=1.0))
    t_opt = time.perf_counter()
    banded = bandmf.BandedNoise(steps=args.steps, bands=args.bands)
    t_opt = time.perf_counter() - t_opt
    state = banded.init(tree)
    step = jax.jit(lambda k, s: banded.noise_like(tree, k, s, noise_multiplier=1.0,
                                                  l2_clip_norm=1.0))
    t_ind = _time(independent, key, repeats=args.repeats)
    t_band = _time(step, key, state, repeats=args.repeats)
    state_mb = np.asarray(state.buffers).nbytes / 2**20
    print(f"params {args.params:,}, bands {args.bands}, steps {args.steps}: strategy optimised in "
          f"{t_opt:.1f} s; noise per step: independent {1000 * t_ind:.1f} ms, banded "
          f"{1000 * t_band:.1f} ms ({t_band / t_ind:.2f}x); noise state {state_mb:.0f} MiB "
          f"(bands x params x 4 bytes)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
