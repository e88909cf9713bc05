r"""The GPU suite: every GPU figure we report, in one device call and one Markdown file.

On a lent H100 (one call, ≤ 8 minutes including every compilation; the device tool's README
for ``carry`` and the wheels). Here, once, fetch the wheels the device image lacks
(``benchmarks/gpu_wheels.txt``; ``.whl/`` is git-ignored)::

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl -r benchmarks/gpu_wheels.txt

then run, with ``carry=[".whl"]`` and ``timeout_s=600``, this command line::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 && python3 benchmarks/gpu_suite.py --all --out=$OUT/gpu_suite.md

and commit what comes back under ``benchmarks/gpu/<device>-<date>/``. ``--all`` does not fit one
call at the papers' size; ``--lease`` (:func:`lease_plan`) is two calls of at most 8 minutes:
the wheels without av and decord (``.whl``, 5.3 MB) and, since the device image has no
editable install of this checkout, links that map the package's top-level folders into it,
then call 1 (full fine-tuning's DP overhead, the forward, einsum attention)::

    for d in models accounting data configs; do ln -s ../$d maskdp_jax/$d; done; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 && python3 benchmarks/gpu_suite.py --lease --lease_call=1 --budget_s=450 --out=$OUT/gpu_suite_1.md

and, with what the lease has left (a row that does not fit ``--budget_s`` is skipped with a
line), call 2 (the selective step with its profile, against Opacus with the same attention,
its baseline, the step's programs one by one): the same line with ``--lease_call=2
--budget_s=300 --out=$OUT/gpu_suite_2.md``.

Elsewhere::

    python benchmarks/gpu_suite.py --all --size=tiny --device=cpu --out=/tmp/suite.md  # dry run
    python benchmarks/gpu_suite.py --all --dry_run --out=/tmp/plan.md  # the plan, nothing run
    python benchmarks/gpu_suite.py --parts=forward,step --out=...      # some parts

Rows, in priority order (``--all``: every part; ``--parts``: some). Every row but the ``cache``
and ``data`` tools' runs is a fresh process, so its compile time and its peak device memory
(JAX: the allocator's ``peak_bytes_in_use``; PyTorch: ``max_memory_allocated``; on the CPU, the
peak resident memory) are its own:

1. ``forward``: our forward pass on one physical batch in float32 (``highest`` matmul
   precision), TF32 and bfloat16 compute: compile seconds, median milliseconds, the lowered
   program's FLOPs (:func:`forward_row`), TFLOP/s and the percentage of the device's dense peak
   for that precision (:data:`PEAK_TFLOPS`, NVIDIA's datasheet figures).
2. ``step``: the selective fine-tuning step (k = 2), ours against Opacus
   (``benchmarks/opacus_maskdp.py``'s workers: the same torchvision weights converted to ours,
   the same videos, masks, labels and B), modes ``maskdp``, ``nonprivate2`` (its two-view
   non-private baseline), ``dp``, ``nonprivate``, in bfloat16 (ours: ``compute_dtype=bfloat16``
   with cuDNN's fused attention; PyTorch: AMP autocast to bfloat16) and TF32 (float32 with the
   GPU's default TF32 products, both sides), then float32 ``highest`` for ``maskdp``: median step
   milliseconds, the first step's seconds (ours: compilation), peak memory, Opacus / ours.
3. ``full``: one step of full fine-tuning, ours against the PyTorch per-example loop (Opacus 1.6
   cannot hook torchvision's MViT for it; ``docs/benchmarks.md``), ``maskdp``, TF32.
4. ``cache``: epoch time without and with the frozen-prefix feature cache
   (``benchmarks/feature_cache.py``) in bfloat16 and float32 compute.
5. ``data``: clips per second per core, decoding against reading the clip store
   (``benchmarks/data_throughput.py --sources``).
6. ``attention``: the bfloat16 forward with our einsum attention (``attention_impl=einsum``),
   against which the ``forward`` section's bfloat16 row (cuDNN's fused attention) shows the
   fused kernel's gain; last, since it only explains a figure above.

Time plan. A device call has 10 minutes and a lease 15 device-minutes with the machine's
start, so the suite keeps to ``--budget_s`` (default 450 s: with the wheels' install it ends
within 8 minutes). Before a row starts, its estimate (:data:`ESTIMATE_S`, seconds on an H100 at
the papers' size, process start and compilation included; from the first two leases in
``docs/benchmarks.md``: forward compile 37.5 s, a selective step's first step 80 s in TF32 or
bfloat16 and 164-208 s in float32 ``highest``, Opacus' first step 1.5-2.9 s, the cache part 200 s
per dtype, data 22 s, full fine-tuning's first step not done after 468 s) must fit in what is
left of the budget, else the row says ``skipped`` with both numbers; a running row is stopped at
the deadline and says so. Nothing is left out silently. Each row goes into ``--out`` when it is
measured, so a run cut off by the call's limit keeps every row it measured. At these estimates a
cold run at the papers' size fits the forward rows, the ``maskdp`` step in bfloat16 and TF32 (the
issue's headline: ours against Opacus), and the data row, and skips the rest with a line: the
compile time is the limit (about 80-200 s per step configuration), and each row the compile-time
work saves is a row more in the same 8 minutes. The estimates apply at the papers' size only;
other sizes run every row while the budget lasts.

Sizes (``--size``): ``paper`` (``mvit_v2_s``, 16×224², 60 classes): forward on 16 clips; the
selective step B = 32 in physical batches of 16; full fine-tuning B = 16 in physical batches of
8, per-example gradients 4 at a time; the cache 32 videos in steps of 16. ``tiny`` and ``cpu``
(``benchmarks/opacus_maskdp.py``'s sizes) for a dry run on the CPU
(``tests/test_benchmarks_gpu_suite.py``).

The JAX workers share one persistent compilation cache (``--cache_dir``) and, on a GPU, one XLA
autotuning cache (``--xla_gpu_per_fusion_autotune_cache_dir``, checked before the first row: if
XLA refuses the flag, the file says so and the rows run without it), so a fused kernel tuned for
one row is not tuned again for the next. ``step`` and ``full`` need torch, torchvision and
opacus (``requirements-bench.txt``; on the device, the image's torch and the carried opacus
wheel), ``data`` needs decord and av; without them their rows say so and what to install.

What a call carries is limited to 64 MiB (67.1 MB): the wheels are 54.7 MB, av's 35.8 MB and
decord's 13.6 MB of it, and the tracked tree was 12.0 MB when this was written. Check with
``git ls-files -z | xargs -0 du -cb | tail -1`` and ``du -sb .whl``; if the sum is over, fetch
the list without av and decord: the data row then says it is skipped (it measures the host's
CPU, which the first lease measured already: ``docs/benchmarks.md``).
"""  # noqa: E501  (the two commands above are one line each, to be copied whole)

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import program_flops  # noqa: E402
from benchmarks.opacus_maskdp import SIZES  # noqa: E402

PARTS = ("forward", "step", "full", "cache", "data", "attention")
PRECISIONS = ("float32", "tf32", "bfloat16")
# Dense (no sparsity) peak TFLOP/s per precision, NVIDIA's datasheets; the H200 has the H100 SXM's
# chip. Matched against JAX's device_kind.
PEAK_TFLOPS = {
    "H100 80GB HBM3": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4},
    "H100 SXM": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4},
    "H200": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4},
    "H100 PCIe": {"float32": 51.2, "tf32": 378.0, "bfloat16": 756.0},
}
# Seconds per row on an H100 at the papers' size (see the module docstring), by row kind.
ESTIMATE_S = {"forward": 50, "jax:selective": 100, "jax:selective:float32": 220,
              "opacus:selective": 35, "jax:full": 480, "loop:full": 60, "cache": 200,
              "data": 30}
# The suite's own sizes at the papers' scale (the step's B is smaller than the papers' 128: the
# comparison is per step at the same B on both sides, and the budget is compilation-bound).
RUN_SIZES = {"paper": dict(step_batch=32, step_physical=16, full_batch=16, full_physical=8,
                           full_microbatch=4, cache_videos=32, data_videos=8)}
# ``--lease``: the papers' B = 128 for the selective step and full fine-tuning (ghost norms), in
# physical batches that fit an H100's 80 GB.
LEASE_SIZES = dict(step_batch=128, step_physical=32, full_batch=128, full_physical=16,
                   full_microbatch=4, cache_videos=32, data_videos=8)
# ``--lease``'s seconds per row on a GPU, process start and the cold compile included, from
# the H200 lease of 2026-11-28 (first steps: selective maskdp 67 s, nonprivate2 45 s, full
# maskdp with ghost norms 205 s, full nonprivate 80 s); a row runs while the budget lasts and is
# stopped at its deadline.
LEASE_ESTIMATE_S = {"jax:selective": 80, "opacus:selective": 35, "jax:full:pair": 330,
                    "forward": 40, "parts": 150}
# The targets the lease's figures are held against (``docs/benchmarks.md``): (name, op, bound);
# targets_section reads each figure from the rows.
TARGETS = (("Opacus / ours, selective maskdp step, bfloat16, einsum attention on both sides",
            ">=", 2.0),
           ("DP overhead, selective: maskdp / nonprivate2", "<=", 1.15),
           ("DP overhead, full fine-tuning (ghost norms): maskdp / nonprivate2, one process",
            "<=", 1.15),
           ("bfloat16 forward, share of the dense peak", ">=", 15.0))


@dataclasses.dataclass
class Row:
    """One measurement: a fresh process (``cmd``) whose last stdout line is a JSON result, or a
    tool whose output is copied into the file as it prints (``stream``)."""

    part: str
    label: str
    cmd: list[str]
    estimate_s: float
    stream: bool = False
    needs_torch: bool = False
    needs_video: bool = False
    meta: dict = dataclasses.field(default_factory=dict)


def device_line(device: str) -> str:
    import jax

    dev = jax.devices()[0]
    return (f"{dev.device_kind} ({dev.platform}), {os.cpu_count()} CPUs; Python "
            f"{platform.python_version()}, jax {jax.__version__}; requested device {device}")


def peak_tflops(device_kind: str, precision: str) -> float | None:
    for name, peaks in PEAK_TFLOPS.items():
        if name in device_kind:
            return peaks[precision]
    return None


def _peak_memory_mib() -> float:
    """This process's peak device memory (the JAX allocator's), or on the CPU its peak RSS."""
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"] / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def forward_row(preset: str, classes: int, physical: int, precision: str, steps: int, *,
                attention_impl: str = "auto") -> dict:
    """Compile and time the forward pass of ``preset`` on ``physical`` clips (a worker's body).

    ``precision``: ``float32`` (``jax_default_matmul_precision="highest"``), ``tf32``
    (``"tensorfloat32"``) or ``bfloat16`` (``compute_dtype`` bfloat16, default precision);
    ``attention_impl``: the model's (``models.mvit.attention_implementation``). The
    FLOP count is that of the *lowered* program's matrix products, counted on the host
    (:mod:`benchmarks.program_flops`), not XLA's cost analysis: of the compiled GPU program it
    counts cuDNN/cuBLAS custom calls as zero FLOPs (on an H100 it gave 321 GFLOP for
    ``mvit_v2_s`` on 16 clips, where the lowered program has 2120 GFLOP), and of the lowered
    program jax 0.11.2 on an H200 gave none.
    """
    import jax
    import jax.numpy as jnp

    from maskdp_jax import models

    if precision != "bfloat16":
        jax.config.update("jax_default_matmul_precision",
                          "highest" if precision == "float32" else "tensorfloat32")
    dtype = jnp.bfloat16 if precision == "bfloat16" else jnp.float32
    model = models.get_model(preset, num_classes=classes, head_dropout=0.0, dtype=dtype,
                             attention_impl=attention_impl)
    x = jnp.asarray(np.random.default_rng(0).standard_normal(
        (physical, *model.input_size, 3)).astype(np.float32))
    params = jax.jit(model.init)(jax.random.key(0), x[:1])["params"]
    forward = jax.jit(lambda p, v: model.apply({"params": p}, v))
    lowered = forward.lower(params, x)
    flops = program_flops.count(lowered).total or None
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
    return dict(compile_s=compile_s, median_ms=1e3 * median,
                gflop=None if flops is None else flops / 1e9,
                tflops=None if flops is None else flops / median / 1e12,
                device_kind=jax.devices()[0].device_kind,
                peak_mib=_peak_memory_mib())


def _data_missing() -> str | None:
    import importlib.util

    absent = [m for m in ("decord", "av") if importlib.util.find_spec(m) is None]
    if absent:
        return (f"{', '.join(absent)} not installed here (the data row encodes videos with av and "
                "decodes them with decord: carry their wheels, benchmarks/gpu_wheels.txt)")
    return None


def _bench_missing() -> str | None:
    try:
        import opacus  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as e:
        return (f"{e.name} is not installed here; `pip install -r requirements-bench.txt` "
                "(torch, torchvision, opacus) to run this row")
    return None


# ----------------------------------------------------------------------------------------------
# The plan
# ----------------------------------------------------------------------------------------------
def run_sizes(args) -> dict:
    """Batch sizes of the rows: :data:`LEASE_SIZES` for ``--lease``, :data:`RUN_SIZES` at the
    papers' size, else the size's own."""
    size = SIZES[args.size]
    if args.lease and args.size == "paper":
        return dict(LEASE_SIZES)
    run = dict(RUN_SIZES.get(args.size, dict(
        step_batch=size["batch"], step_physical=size["physical"], full_batch=size["batch"],
        full_physical=size["physical"], full_microbatch=size["microbatch"],
        cache_videos=2 * size["physical"], data_videos=2)))
    for key in ("cache_videos", "data_videos"):
        run[key] = getattr(args, key) or run[key]
    return run


def plan(args) -> list[Row]:
    """Every row of ``args.parts``, in priority order (see the module docstring)."""
    size, run = dict(SIZES[args.size]), run_sizes(args)
    paper, lease = args.size == "paper", args.lease

    def est(kind):
        return (LEASE_ESTIMATE_S if lease else ESTIMATE_S)[kind] if paper else 0.0

    py, bench = sys.executable, os.path.join(ROOT, "benchmarks", "opacus_maskdp.py")
    rows: list[Row] = []
    parts = set(args.parts)

    def forward_row(part, worker):
        """A forward worker's row (``worker``: ``forward:<precision>[:<attention>]``)."""
        return Row(part, worker.split(":")[1], [
            py, os.path.abspath(__file__), f"--worker={worker}", f"--size={args.size}",
            f"--device={args.device}", f"--steps={args.steps}", "--out=-"], est("forward"))

    if "forward" in parts and not lease:
        rows += [forward_row("forward", f"forward:{p}") for p in args.forward_precisions]

    def step_rows(part, strategy, modes, precisions, frameworks, batch, physical, micro,
                  steps, warmup, per_example="vmap", attention="auto", extra=()):
        out = []
        for precision in precisions:
            for mode in modes:
                for fw in frameworks:
                    kind = f"{fw}:{strategy}" + (":float32" if precision == "float32"
                                                 and fw == "jax" else "")
                    kind += ":pair" if "+" in mode else ""
                    cmd = [py, bench, f"--size={args.size}", f"--batch={batch}",
                           f"--physical={physical}", f"--microbatch={micro}",
                           f"--steps={steps}", f"--warmup={warmup}", f"--device={args.device}",
                           f"--precision={'float32' if precision == 'float32' else 'tf32'}",
                           "--compute_dtype="
                           + ("bfloat16" if precision == "bfloat16" else "float32"),
                           f"--worker={fw}:{mode}:{strategy}"]
                    if fw == "jax" and per_example != "vmap":
                        cmd.append(f"--per_example={per_example}")
                    if fw == "jax" and attention != "auto":
                        cmd.append(f"--attention={attention}")
                    cmd += list(extra) if fw == "jax" else []
                    label = precision + (f", {attention} attention" if attention != "auto"
                                         else "")
                    out.append(Row(part, f"{label} {mode} {fw}", cmd, est(kind),
                                   needs_torch="+" not in mode,
                                   meta=dict(precision=label, mode=mode, framework=fw)))
        return out

    if lease:
        return lease_plan(args, step_rows, forward_row)
    if "step" in parts:
        step = dict(batch=run["step_batch"], physical=run["step_physical"], micro=1,
                    steps=args.steps, warmup=2)
        # priority: the headline pair first, then the DP-overhead baseline, then the rest
        for modes, precisions in ((("maskdp",), ("bfloat16", "tf32")),
                                  (("nonprivate2",), ("bfloat16", "tf32")),
                                  (("dp", "nonprivate"), ("bfloat16", "tf32")),
                                  (("maskdp",), ("float32",))):
            rows += step_rows("step", "selective", modes, precisions, ("jax", "opacus"), **step)
    if "full" in parts:
        rows += step_rows("full", "full", ("maskdp",), ("tf32",), ("jax", "loop"),
                          batch=run["full_batch"], physical=run["full_physical"],
                          micro=run["full_microbatch"], steps=1, warmup=1)
    if "cache" in parts:
        for dtype in args.cache_dtypes:
            rows.append(Row("cache", dtype, [
                py, "-m", "benchmarks.feature_cache", f"--preset={size['preset']}",
                f"--classes={size['classes']}", f"--videos={run['cache_videos']}",
                f"--batch={size['physical']}", "--grid=2", "--epochs=2",
                f"--compute_dtype={dtype}"], est("cache"), stream=True))
    if "data" in parts:
        rows.append(Row("data", "decoding against the clip store", [
            py, "-m", "benchmarks.data_throughput", "--sources=decord,pyav,store",
            "--mask_format=npy", f"--videos={run['data_videos']}",
            f"--batch={run['data_videos']}", "--batches=2"], est("data"), stream=True,
            needs_video=True))
    if "attention" in parts:
        rows.append(forward_row("attention", "forward:bfloat16:einsum"))
    return rows


def lease_plan(args, step_rows, forward_row) -> list[Row]:
    """``--lease``: the GPU figures in two device calls of at most 8 minutes
    (``--lease_call``), each row's compile cold (its own compilation and autotuning caches), in
    priority order (``step_rows`` and ``forward_row``: :func:`plan`'s row makers, with the
    lease's estimates).

    Call 1, the targets never measured as defined:

    1. full fine-tuning with ghost norms, ``maskdp`` and its two-view baseline ``nonprivate2``
       in ONE process, their timed steps alternating (the DP overhead's definition);
    2. the bfloat16 forward's FLOP/s and share of the dense peak, FLOPs counted on the host;
    3. the same forward with our einsum attention (the ``attention`` ablation: what cuDNN's
       fused kernel is worth).

    Call 2, the selective step:

    1. ``maskdp`` in bfloat16 with a profile: after its timed steps two more are traced and
       summarised by operation (``profile/summary.md`` beside ``--out``, appended to the file);
    2. ``maskdp`` with einsum attention against Opacus (the same unfused attention on both
       sides: the like-for-like ratio);
    3. its two-view baseline ``nonprivate2`` (the selective DP overhead);
    4. ``benchmarks/step_parts.py --compute_dtype=bfloat16`` on full fine-tuning: each program's
       compile, peak memory and time, the finalisation donated and not.

    What it leaves out, said in the file: TF32 and float32 rows, ``dp`` and ``nonprivate``, the
    PyTorch full fine-tuning loop, the feature cache, the data row (``--all`` has them).
    """
    run = run_sizes(args)
    step = dict(batch=run["step_batch"], physical=run["step_physical"], micro=1,
                steps=args.steps, warmup=2)
    if args.lease_call == 1:
        rows = step_rows("full", "full", ("maskdp+nonprivate2",), ("bfloat16",), ("jax",),
                         batch=run["full_batch"], physical=run["full_physical"],
                         micro=run["full_microbatch"], steps=3, warmup=1, per_example="ghost")
        return rows + [forward_row("forward", "forward:bfloat16"),
                       forward_row("attention", "forward:bfloat16:einsum")]
    profile_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "profile")
    rows = step_rows("step", "selective", ("maskdp",), ("bfloat16",), ("jax",), **step,
                     extra=(f"--profile_dir={profile_dir}",))
    rows += step_rows("step", "selective", ("maskdp",), ("bfloat16",), ("jax", "opacus"), **step,
                      attention="einsum")
    rows += step_rows("step", "selective", ("nonprivate2",), ("bfloat16",), ("jax",), **step)
    parts = "public-nonprivate,private-maskdp-ghost,finalize,finalize-undonated"
    rows.append(Row("parts", "step_parts", [
        sys.executable, os.path.join(ROOT, "benchmarks", "step_parts.py"), "--size=paper",
        "--strategy=full", "--weights=random", f"--physical={run['full_physical']}",
        f"--parts={parts}", "--compute_dtype=bfloat16", "--repeats=3"],
        LEASE_ESTIMATE_S["parts"], stream=True))
    return rows


def _autotune_dir(cache_dir: str) -> str:
    """The XLA autotuning cache kept beside the compilation cache ``cache_dir``."""
    return os.path.join(cache_dir, "autotune")


def _cold_env(env: dict, args, index: int) -> dict:
    """``env`` with row ``index``'s own persistent compilation cache and XLA autotuning cache:
    its first step is a cold compile, whatever ran before it in the call."""
    row_dir = os.path.join(args.cache_dir, f"row{index}")
    flags = env.get("XLA_FLAGS", "")
    return dict(env, JAX_COMPILATION_CACHE_DIR=row_dir,
                XLA_FLAGS=flags.replace(_autotune_dir(args.cache_dir), _autotune_dir(row_dir)))


def targets_section(done: dict) -> str:
    """The lease's ratios against :data:`TARGETS`, each met, not met or not measured (a call
    measures some of them; the other call's are "not measured" in its file)."""
    def median(part, precision, mode, fw):
        r = done.get((part, precision, mode, fw))
        return None if r is None else r["median_s"]

    def ratio(num, den):
        return None if num is None or den is None else num / den

    forward = done.get(("forward", "bfloat16"))
    peak = forward and forward.get("tflops") and peak_tflops(forward["device_kind"], "bfloat16")
    einsum = "bfloat16, einsum attention"
    values = [ratio(median("step", einsum, "maskdp", "opacus"),
                    median("step", einsum, "maskdp", "jax")),
              ratio(median("step", "bfloat16", "maskdp", "jax"),
                    median("step", "bfloat16", "nonprivate2", "jax")),
              ratio(median("full", "bfloat16", "maskdp", "jax"),
                    median("full", "bfloat16", "nonprivate2", "jax")),
              100 * forward["tflops"] / peak if peak else None]
    out = "## targets\n\n| figure | target | measured | met |\n|---|---|---:|---|\n"
    for (name, op, bound), value in zip(TARGETS, values, strict=True):
        unit = " %" if "share" in name else ""
        if value is None:
            out += f"| {name} | {op} {bound}{unit} | not measured | - |\n"
            continue
        met = value >= bound if op == ">=" else value <= bound
        shown = f"{value:.1f} %" if unit else f"{value:.2f}×"
        out += f"| {name} | {op} {bound}{unit} | {shown} | {'met' if met else 'not met'} |\n"
    return out + "\n"


HEADERS = {
    "forward": ("Forward pass of `{preset}` ({classes} classes) on a physical batch of {physical} "
                "clips, median of {steps} after one warm-up; float32 = `highest` matmul "
                "precision, tf32 = `tensorfloat32`, bfloat16 = `compute_dtype=bfloat16`; % of "
                "the device's dense peak for that precision:\n\n"
                "| precision | compile [s] | median [ms] | GFLOP per call (products of the "
                "lowered program) | TFLOP/s | % of peak | peak device memory [MiB] |\n"
                "|---|---:|---:|---:|---:|---:|---:|\n"),
    "step": ("Selective fine-tuning (k = 2), B = {step_batch} in physical batches of "
             "{step_physical}, one logical step, median of {steps} after 2 warm-up steps, each "
             "row a fresh process; ours = first step compiles; bfloat16: ours compute_dtype "
             "bfloat16 (cuDNN fused attention on a GPU), PyTorch AMP autocast; tf32: float32 "
             "with TF32 products on both sides; float32: `highest` / TF32 off:\n\n"
             "| precision | mode | framework | median step [ms] | first step [s] | "
             "peak memory [MiB] | Opacus / ours |\n|---|---|---|---:|---:|---:|---:|\n"),
    "full": ("Full fine-tuning, B = {full_batch} in physical batches of {full_physical}, ours "
             "with {full_engine}, {full_timing}; {full_precision}:\n\n"
             "| precision | mode | framework | step [ms] | first step [s] | peak memory [MiB] | "
             "loop / ours |\n|---|---|---|---:|---:|---:|---:|\n"),
    "cache": "Epoch time without and with the frozen-prefix feature cache, per compute dtype:\n\n",
    "parts": ("Each program of the full fine-tuning step alone in bfloat16 "
              "(`benchmarks/step_parts.py`): lowering and compile seconds, fusions, peak memory by "
              "XLA's memory analysis, median milliseconds; the finalisation donated and not:\n\n"),
    "attention": ("The bfloat16 forward pass with our einsum attention instead of cuDNN's fused "
                  "kernel (`attention_impl=einsum`; the `forward` section's bfloat16 row is the "
                  "default, `auto`): the fused kernel's gain is the ratio of the two:\n\n"
                  "| precision | compile [s] | median [ms] | GFLOP per call (products of the "
                  "lowered program) | TFLOP/s | % of peak | peak device memory [MiB] |\n"
                  "|---|---:|---:|---:|---:|---:|---:|\n"),
    "data": ("Clips per second per core: decoding against reading the clip store. Cores to feed "
             "a MaskDP step: 2B clips per step ÷ step seconds (the `step` rows) × CPU seconds "
             "per clip, uint8 column.\n\n"),
}


def format_row(row: Row, r: dict, done: dict) -> str:
    if row.part in ("forward", "attention"):
        peak = peak_tflops(r["device_kind"], row.label)
        if r["tflops"] is None:
            flop_cells = "no product counted | - | -"
        else:
            share = f"{100 * r['tflops'] / peak:.1f} %" if peak else "- (peak unknown)"
            flop_cells = f"{r['gflop']:.4g} | {r['tflops']:.4g} | {share}"
        return (f"| {row.label} | {r['compile_s']:.1f} | {r['median_ms']:.2f} | {flop_cells} | "
                f"{r['peak_mib']:.0f} |\n")
    m = row.meta
    mem = r.get("peak_device_mib", r.get("timed_peak_rss_mib", float("nan")))
    ours = done.get((row.part, m["precision"], m["mode"], "jax"))
    ratio = "-"
    if m["framework"] != "jax" and ours is not None:
        ratio = f"{r['median_s'] / ours['median_s']:.2f}×"
    return (f"| {m['precision']} | {m['mode']} | {m['framework']} | {1e3 * r['median_s']:.1f} | "
            f"{r['first_step_s']:.1f} | {mem:.0f} | {ratio} |\n")


def _cells(row: Row, text: str) -> str:
    """A table row that holds a message instead of figures."""
    if row.part in ("forward", "attention"):
        return f"| {row.label} | {text} | | | | | |\n"
    m = row.meta
    return f"| {m['precision']} | {m['mode']} | {m['framework']} | {text} | | | |\n"


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------
def _append(path: str, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)
    print(text, end="", flush=True)


def _run(cmd: list[str], *, env: dict, out: str, timeout: float | None = None) -> str:
    """Run a tool, appending each line it prints to ``out`` (and to stdout) as it comes.

    Returns "" or a closing status line (``FAILED (exit N)`` or the deadline's); stderr goes
    into the same stream, so a failure's traceback is in the file. A tool killed with the suite
    leaves every line it had printed (the reason the output is not collected and written at the
    end); one still running at ``timeout`` seconds is stopped and the file says so.
    """
    t = time.perf_counter()
    with open(out, "a") as f:
        f.write(f"```\n$ {' '.join(cmd[1:])}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(env, PYTHONUNBUFFERED="1"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def copy():
            for line in proc.stdout:
                line = f"[{time.perf_counter() - t:6.0f} s] {line}"
                f.write(line)
                f.flush()
                print(line, end="", flush=True)

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout)
            status = "" if code == 0 else f"FAILED (exit {code})\n"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status = f"stopped at the suite's deadline after {time.perf_counter() - t:.0f} s\n"
        reader.join(timeout=5)
        f.write(f"{status}```\n\n")
    return status


def _run_json(cmd: list[str], *, env: dict, timeout: float) -> tuple[dict | None, str]:
    """Run a worker to its JSON line: ``(result, "")`` or ``(None, why not)``."""
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired:
        return None, (f"stopped at the suite's deadline after {time.perf_counter() - t:.0f} s "
                      "(not finished: the first step had not ended)")
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:300].replace("|", "/")
        return None, f"FAILED (exit {proc.returncode}): {tail}"
    lines = proc.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1]), ""
    except (IndexError, json.JSONDecodeError):
        return None, f"FAILED: no result line in the worker's output ({lines[-1:]})"


def _preflight(env: dict, args) -> dict:
    """On a GPU, check that XLA accepts the shared autotuning cache flag before every worker
    relies on it; without it the rows still run (each tunes its own kernels)."""
    if args.device != "cuda":
        return env
    flag = f"--xla_gpu_per_fusion_autotune_cache_dir={_autotune_dir(args.cache_dir)}"
    trial = dict(env, XLA_FLAGS=f"{env.get('XLA_FLAGS', '')} {flag}".strip())
    proc = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.jit(lambda x: x + 1)(1.0))"],
        env=trial, capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        _append(args.out, f"XLA autotuning cache shared by the rows: `{flag}`.\n\n")
        return trial
    tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:300]
    _append(args.out, f"XLA refused `{flag}` ({tail}); the rows run without a shared "
            "autotuning cache.\n\n")
    return env


def run_plan(rows: list[Row], args, env: dict, *, start: float) -> list[str]:
    """Run (or with ``--dry_run`` list) every row, writing each to ``args.out`` as it ends."""
    deadline = start + args.budget_s
    size, run = SIZES[args.size], run_sizes(args)
    done: dict = {}
    failed: list[str] = []
    part = None
    missing = _bench_missing() if any(r.needs_torch for r in rows) else None
    part_start = time.perf_counter()
    profiles = []
    for index, row in enumerate(rows):
        row_env = _cold_env(env, args, index) if args.lease else env
        if row.part != part:
            if part is not None:
                _append(args.out, f"\n({part}: {time.perf_counter() - part_start:.0f} s)\n\n")
            part, part_start = row.part, time.perf_counter()
            _append(args.out, f"## {part}\n\n" + HEADERS[part].format(
                preset=size["preset"], classes=size["classes"], physical=size["physical"],
                steps=args.steps, full_engine=(
                    "ghost norms" if args.lease else
                    f"per-example gradients {run['full_microbatch']} at a time"),
                full_timing=("maskdp and nonprivate2 in one process, 3 timed steps each, "
                             "alternating, after each one's first (which compiles)" if args.lease
                             else "one timed step after the first (which compiles)"),
                full_precision=("bfloat16, maskdp against its two-view non-private step"
                                if args.lease else
                                "TF32 both sides; PyTorch: the per-example loop"), **run))
        left = deadline - time.time()
        if args.dry_run:
            text = f"dry run, not measured: `{' '.join(os.path.basename(c) for c in row.cmd)}`"
            _append(args.out, f"{text}\n" if row.stream else _cells(row, text))
            continue
        if row.needs_torch and missing:
            _append(args.out, _cells(row, f"skipped: {missing}"))
            continue
        if row.needs_video and _data_missing():
            _append(args.out, f"skipped: {_data_missing()}\n")
            continue
        if left <= 0 or row.estimate_s > left:
            text = (f"skipped: needs ≈ {row.estimate_s:.0f} s (H100 estimate), {max(left, 0):.0f}"
                    f" s left of the {args.budget_s:.0f} s budget")
            _append(args.out, f"{text}\n" if row.stream else _cells(row, text))
            continue
        if row.stream:
            _append(args.out, f"{row.label}:\n\n")
            status = _run(row.cmd, env=row_env, out=args.out, timeout=left)
            if status:
                failed.append(f"{row.part} {row.label}")
            continue
        result, why = _run_json(row.cmd, env=row_env, timeout=left)
        if result is None:
            failed.append(f"{row.part} {row.label}")
            _append(args.out, _cells(row, why))
            continue
        if "profile" in result:
            profiles.append((row.label, result["profile"]))
        if row.part in ("forward", "attention"):
            done[(row.part, row.label)] = result
        if row.part in ("step", "full") and "modes" in result:  # modes timed in one process
            m = row.meta
            memory = {k: result[k] for k in ("peak_device_mib",) if k in result}
            for mode, r in result["modes"].items():
                r = dict(r, **memory, timed_peak_rss_mib=result.get("peak_rss_mib"))
                done[(row.part, m["precision"], mode, m["framework"])] = r
                _append(args.out, format_row(dataclasses.replace(row, meta=dict(m, mode=mode)),
                                             r, done))
            continue
        if row.part in ("step", "full"):
            m = row.meta
            done[(row.part, m["precision"], m["mode"], m["framework"])] = result
        _append(args.out, format_row(row, result, done))
    if part is not None:
        _append(args.out, f"\n({part}: {time.perf_counter() - part_start:.0f} s)\n\n")
    for label, path in profiles:
        with open(path) as f:
            _append(args.out, f"## profile: {label}\n\nTwo traced steps after the timed ones "
                    f"(`{os.path.relpath(path, os.path.dirname(os.path.abspath(args.out)))}`, the "
                    f"trace beside it):\n\n{f.read()}\n")
    if args.lease:
        _append(args.out, targets_section(done))
    _append(args.out, f"Suite: {time.time() - start:.0f} s of the {args.budget_s:.0f} s "
            "budget.\n")
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="every part (overrides --parts)")
    parser.add_argument("--lease", action="store_true",
                        help="one device call of about 8 minutes: the priority rows at B = 128 "
                        "in bfloat16 and the targets (overrides --all and --parts)")
    parser.add_argument("--lease_call", type=int, choices=(1, 2), default=1,
                        help="--lease: call 1 (full fine-tuning's DP overhead, the forward, "
                        "einsum attention) or call 2 (the selective step: profile, against "
                        "Opacus with the same attention, its baseline; step_parts)")
    parser.add_argument("--parts", default="forward,step",
                        help=f"comma-separated, from {PARTS}")
    parser.add_argument("--size", choices=sorted(SIZES), default="paper")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--out", required=True, help="Markdown file to write")
    parser.add_argument("--budget_s", type=float, default=450.0,
                        help="global deadline in seconds from the start; rows that would not "
                        "fit are skipped with a line, a running one is stopped")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per row")
    parser.add_argument("--forward_precisions", default=",".join(PRECISIONS))
    parser.add_argument("--cache_dtypes", default="bfloat16,float32",
                        help="compute dtypes of the cache rows")
    parser.add_argument("--cache_videos", type=int, help="videos of the cache rows")
    parser.add_argument("--data_videos", type=int, help="videos of the data row")
    parser.add_argument("--cache_dir", default=os.path.expanduser("~/.cache/maskdp_jax/xla"),
                        help="persistent compilation (and on a GPU, autotuning) cache")
    parser.add_argument("--dry_run", action="store_true",
                        help="write the plan (every section and row) without running anything")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # forward:<precision>
    args = parser.parse_args()
    args.parts = list(PARTS) if args.all else args.parts.split(",")
    args.forward_precisions = args.forward_precisions.split(",")
    args.cache_dtypes = args.cache_dtypes.split(",")
    unknown = sorted(set(args.parts) - set(PARTS)) + sorted(
        set(args.forward_precisions) - set(PRECISIONS)) + sorted(
        set(args.cache_dtypes) - {"float32", "bfloat16"})
    if unknown:
        parser.error(f"unknown parts, precisions or dtypes {unknown}; parts: {PARTS}, "
                     f"precisions: {PRECISIONS}")
    start = time.time()
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=args.cache_dir,
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1")
    if args.device == "cpu":
        env["JAX_PLATFORMS"] = os.environ["JAX_PLATFORMS"] = "cpu"
    else:
        # allocate on demand: the rows' peak memory is then what each needs
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if args.worker:
        _, precision, *impl = args.worker.split(":")
        size = SIZES[args.size]
        print(json.dumps(forward_row(size["preset"], size["classes"], size["physical"],
                                     precision, args.steps, attention_impl=(impl or ["auto"])[0])))
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "not a git checkout"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    with open(args.out, "w") as f:
        f.write(f"# GPU suite: size `{args.size}` {SIZES[args.size]}\n\n"
                f"{device_line(args.device)}\n\n{now}, commit {commit}, budget "
                f"{args.budget_s:.0f} s{' (dry run)' if args.dry_run else ''}\n\n")
    if not args.dry_run:
        env = _preflight(env, args)
    failed = run_plan(plan(args), args, env, start=start)
    if failed:
        raise SystemExit(f"rows {failed} failed; their lines are in {args.out}")


if __name__ == "__main__":
    main()
