r"""The GPU suite: what a lent accelerator should measure, in one command and one Markdown file.

    python benchmarks/gpu_suite.py --device=cuda --out=$OUT/gpu_suite.md             # all parts
    python benchmarks/gpu_suite.py --device=cuda --parts=forward,step --out=...        # ≤ 10 min
    python benchmarks/gpu_suite.py --size=tiny --device=cpu --out=/tmp/suite.md        # smoke test

Parts (``--parts``, in this order; each appends its section to ``--out`` as soon as it is done,
so a run cut off by a time limit keeps what it measured):

* ``forward``: our model's forward pass on one physical batch, compiled once: compile seconds,
  median milliseconds, FLOPs of the program (XLA's cost analysis of the *lowered* program, see
  :func:`forward_part`) and the achieved TFLOP/s, the MFU of the forward pass against
  ``--peak_tflops`` when given. Needs only JAX.
* ``step``: ours against Opacus at the size (``benchmarks/opacus_maskdp.py``, selective
  fine-tuning, the four modes, one round): step times, DP overhead, peak device memory.
* ``full``: the same for full fine-tuning, ours against the PyTorch per-example loop
  (``maskdp`` and its two-view non-private baseline).
* ``cache``: epoch time without and with the frozen-prefix feature cache
  (``benchmarks/feature_cache.py``, selective fine-tuning, maskdp) with float32 and with
  bfloat16 compute, and the cache's bytes per clip.
* ``data``: clips per second per core, decoding (decord, PyAV) against reading a clip store
  (``benchmarks/data_throughput.py --sources``), and how many cores would feed the ``step``
  part's measured MaskDP step (2B clips per step).

``step`` and ``full`` need ``requirements-bench.txt`` (torch, torchvision, opacus); without them
the section says so and names the install command (nothing is skipped silently). A worker's
output goes into ``--out`` line by line as it prints, each line stamped with the seconds since
the part began, so a run cut off by a device call's time limit keeps every line it printed. The
JAX workers share one persistent compilation cache (``--cache_dir``), so a second run on the same
machine reuses the programs compiled by the first.

Planning a lease (30 device-minutes, 10 minutes a call). Part times measured on an H100 at the
papers' size (``docs/benchmarks.md``, "Against Opacus on an H100"): ``forward`` 110 s,
``cache`` 200 s per compute dtype, ``data`` 22 s, ``step`` 170-210 s of compilation per
configuration (four modes, two frameworks: more than one call; split it with ``--modes``),
``full``: its first JAX step
(compilation and one step of B = 128) had not finished after 468 s. So: call 1
``--parts=forward,cache,data``; call 2 ``--parts=step --modes=maskdp,nonprivate2``; call 3
``--parts=full --modes=maskdp --steps=1`` alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.opacus_maskdp import SIZES  # noqa: E402

PARTS = ("forward", "step", "full", "cache", "data")


def device_line(device: str) -> str:
    import jax

    dev = jax.devices()[0]
    return (f"{dev.device_kind} ({dev.platform}), {os.cpu_count()} CPUs; Python "
            f"{platform.python_version()}, jax {jax.__version__}; requested device {device}")


def forward_part(size: dict, *, steps: int, peak_tflops: float | None) -> str:
    """Compile and time the forward pass of the size's preset on one physical batch.

    The FLOP count is XLA's cost analysis of the lowered program (StableHLO, before the
    backend's passes), not of the compiled one: on a GPU, XLA rewrites convolutions and most
    matrix products into cuDNN/cuBLAS custom calls, which the compiled program's cost analysis
    counts as zero FLOPs (on an H100 it gave 321 GFLOP for ``mvit_v2_s`` on 16 clips, where the
    lowered program has 2120 GFLOP, 2 x the 66 GMAC per clip torchvision lists for MViTv2-S).
    """
    import jax
    import jax.numpy as jnp

    import models

    model = models.get_model(size["preset"], num_classes=size["classes"], head_dropout=0.0)
    x = jnp.asarray(np.random.default_rng(0).standard_normal(
        (size["physical"], *model.input_size, 3)).astype(np.float32))
    params = jax.jit(model.init)(jax.random.key(0), x[:1])["params"]
    forward = jax.jit(lambda p, v: model.apply({"params": p}, v))
    lowered = forward.lower(params, x)
    cost = lowered.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    flops = float((cost or {}).get("flops", 0.0))
    if not flops > 0:
        raise RuntimeError(f"XLA's cost analysis gave no FLOP count for the forward pass: {cost}")
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    jax.block_until_ready(compiled(params, x))
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        jax.block_until_ready(compiled(params, x))
        times.append(time.perf_counter() - t)
    median = float(np.median(times))
    tflops = flops / median / 1e12
    mfu = f"{100 * tflops / peak_tflops:.1f} %" if peak_tflops else "- (give --peak_tflops)"
    return "\n".join([
        f"Forward pass of `{size['preset']}` ({size['classes']} classes) on a physical batch of "
        f"{size['physical']} clips {tuple(model.input_size)}, float32 "
        f"(`jax_default_matmul_precision` = {jax.config.jax_default_matmul_precision}), median "
        f"of {steps} after one warm-up:", "",
        "| compile [s] | median [ms] | GFLOP per call (XLA cost analysis, lowered) | TFLOP/s "
        "| MFU |",
        "|---:|---:|---:|---:|---:|",
        f"| {compile_s:.1f} | {1e3 * median:.1f} | {flops / 1e9:.4g} | {tflops:.4g} | {mfu} |",
    ])


def _bench_available() -> str | None:
    try:
        import opacus  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        return (f"skipped: {e.name} is not installed here; `pip install -r "
                "requirements-bench.txt` (torch, torchvision, opacus) to run this part.")
    return None


def _run(cmd: list[str], *, env: dict, out: str) -> str:
    """Run a worker, appending each line it prints to ``out`` (and to stdout) as it comes.

    Returns the worker's exit status as a closing line; stderr goes into the same stream, so a
    failure's traceback is in the file. A worker killed with the suite leaves every line it had
    printed (the reason the output is not collected and written at the end).
    """
    t = time.perf_counter()
    with open(out, "a") as f:
        f.write(f"```\n$ {' '.join(cmd[1:])}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(env, PYTHONUNBUFFERED="1"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            line = f"[{time.perf_counter() - t:6.0f} s] {line}"
            f.write(line)
            f.flush()
            print(line, end="", flush=True)
        code = proc.wait()
        status = "" if code == 0 else f"FAILED (exit {code})\n"
        f.write(f"{status}```\n\n")
    return status


def opacus_part(args, *, strategy: str, env: dict) -> str:
    """benchmarks/opacus_maskdp.py at the size: selective FT against Opacus, full FT against the
    PyTorch per-example loop (``--modes``, default: all four for selective, ``maskdp`` and its
    two-view baseline for full)."""
    missing = _bench_available()
    if missing:
        _append(args.out, missing + "\n\n")
        return "skipped"
    modes = args.modes or ("maskdp,nonprivate2" if strategy == "full" else None)
    cmd = [sys.executable, "benchmarks/opacus_maskdp.py", f"--size={args.size}",
           f"--device={args.device}", f"--strategies={strategy}", "--rounds=1",
           f"--steps={args.steps}", "--warmup=2", "--skip_equality",
           f"--precision={args.precision}",
           "--frameworks=" + ("jax,loop" if strategy == "full" else "jax,opacus")]
    if modes:
        cmd.append(f"--modes={modes}")
    if args.physical:
        cmd.append(f"--physical={args.physical}")
    if args.batch:
        cmd.append(f"--batch={args.batch}")
    return _run(cmd, env=env, out=args.out)


def cache_part(size: dict, args, *, env: dict) -> str:
    """benchmarks/feature_cache.py at the size, for each ``--cache_dtypes`` compute dtype."""
    videos = max(2 * size["physical"], args.cache_videos)
    status = ""
    for dtype in args.cache_dtypes.split(","):
        cmd = [sys.executable, "-m", "benchmarks.feature_cache", f"--preset={size['preset']}",
               f"--classes={size['classes']}", f"--videos={videos}",
               f"--batch={size['physical']}", "--grid=2", "--epochs=2",
               f"--compute_dtype={dtype}"]
        status += _run(cmd, env=env, out=args.out)
    return status


def data_part(args, *, env: dict) -> str:
    cmd = [sys.executable, "-m", "benchmarks.data_throughput", "--sources=decord,pyav,store",
           "--mask_format=npy", f"--videos={args.data_videos}", f"--batch={args.data_videos}",
           "--batches=2"]
    status = _run(cmd, env=env, out=args.out)
    _append(args.out, (
        "Cores to feed a MaskDP step: 2B clips per step (public and private batch) ÷ step "
        "seconds (the `step` section) × CPU seconds per clip, uint8 column (training loads uint8 "
        "clips; their normalisation runs inside the step, on the device: timed under the "
        "table).\n\n"))
    return status


def _append(path: str, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)
    print(text, end="", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="paper")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--out", required=True, help="Markdown file to write")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per configuration")
    parser.add_argument("--modes", help="modes of the step and full parts (default: all four "
                        "for step; maskdp,nonprivate2 for full)")
    parser.add_argument("--physical", type=int, help="physical batch (default: the size's)")
    parser.add_argument("--batch", type=int, help="logical batch (default: the size's)")
    parser.add_argument("--precision", choices=("float32", "tf32"), default="float32",
                        help="matmul precision of the step and forward parts, both frameworks")
    parser.add_argument("--peak_tflops", type=float,
                        help="the device's peak for the MFU column (e.g. an H100's dense TF32)")
    parser.add_argument("--data_videos", type=int, default=8, help="videos for the data part")
    parser.add_argument("--cache_videos", type=int, default=32, help="videos for the cache part")
    parser.add_argument("--cache_dtypes", default="float32,bfloat16",
                        help="compute dtypes the cache part measures")
    parser.add_argument("--cache_dir", default=os.path.expanduser("~/.cache/maskdp_jax/xla"),
                        help="persistent compilation cache shared by the JAX workers")
    args = parser.parse_args()
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {PARTS}")
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=args.cache_dir,
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1")
    if args.device == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        os.environ["JAX_PLATFORMS"] = "cpu"
    if args.precision == "tf32":
        import jax

        jax.config.update("jax_default_matmul_precision", "tensorfloat32")
    size = dict(SIZES[args.size])
    size.update({k: v for k, v in (("physical", args.physical), ("batch", args.batch)) if v})
    with open(args.out, "w") as f:
        f.write(f"# GPU suite: size `{args.size}` {size}\n\n{device_line(args.device)}\n\n")
    failed = []
    for part in [p for p in PARTS if p in parts]:
        t = time.perf_counter()
        _append(args.out, f"## {part}\n\n")
        if part == "forward":
            _append(args.out, forward_part(size, steps=args.steps, peak_tflops=args.peak_tflops)
                    + "\n\n")
            status = ""
        elif part in ("step", "full"):
            status = opacus_part(args, strategy="selective" if part == "step" else "full",
                                 env=env)
        elif part == "cache":
            status = cache_part(size, args, env=env)
        else:
            status = data_part(args, env=env)
        if "FAILED" in status:
            failed.append(part)
        _append(args.out, f"({part}: {time.perf_counter() - t:.0f} s)\n\n")
    if failed:
        raise SystemExit(f"parts {failed} failed; their output is in {args.out}")


if __name__ == "__main__":
    main()
