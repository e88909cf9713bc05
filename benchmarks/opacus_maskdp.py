r"""Our MaskDP step against the same step in PyTorch/Opacus: same gradients, step time, memory.

    pip install -r requirements-dev.txt -r requirements-bench.txt  # + torch, torchvision, opacus
    python benchmarks/opacus_maskdp.py --size=cpu  # this CPU machine, a few minutes
    python benchmarks/opacus_maskdp.py --size=paper --device=cuda   # MViTv2-S 16x224^2, B=128

1. **Gradient equality** (always, before any timing): torchvision's ``MViT`` (MViTv2-S mode, the
   size's block setting, random weights) and our Flax model with the converted weights
   (``models.convert``) take one logical step on the same videos, masks and labels with the noise
   off; the gradient each framework hands its optimiser (ours: ``make_train_step``'s, read through
   an optimiser that stores it; Opacus': ``p.grad`` after ``DPOptimizer.pre_step``) must agree to
   ``max |ours - opacus| / max |opacus| <= 1e-4`` for every mode. A control run with Opacus'
   clipping off shows the comparison is sensitive to clipping.
2. **Timing**: every (framework, mode, fine-tuning strategy) runs in a fresh process: median
   logical-step time after warm-up (the first step, which compiles in JAX, is reported
   separately) and peak memory (GPU: the framework's peak allocation; CPU: the process's peak RSS
   and its growth over the state before the first step). Ratios are computed within one run of
   this script.

Modes: ``maskdp`` (public pass + per-example clipped private pass + noise), ``dp`` (standard
DP-SGD on whole videos), ``nonprivate2`` (both views, ordinary gradients: the non-private step
with the same work, the DP-overhead baseline) and ``nonprivate`` (whole videos, one pass). The
logical batch is a fixed ``B`` examples (sampling is not timed) in physical batches of ``P``.
Full fine-tuning runs ours with per-example gradients computed ``--microbatch`` at a time.
"""

from __future__ import annotations

import argparse
import dataclasses
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
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, ROOT)

SIZES = {
    # the committed parity preset (every block type of mvit_v2_s at tiny width)
    "tiny": dict(preset="mvit_parity", classes=5, batch=8, physical=4, microbatch=2),
    # a CPU size that runs here in minutes: three blocks of width 32-64 on 8 x 32^2 clips
    "cpu": dict(preset="mvit_tiny", classes=10, batch=32, physical=16, microbatch=4),
    # the papers' setting: MViTv2-S, 16 x 224^2, B = 128 (physical batch: what fits)
    "paper": dict(preset="mvit_v2_s", classes=60, batch=128, physical=16, microbatch=4),
}
MODES = ("maskdp", "dp", "nonprivate2", "nonprivate")
TOLERANCE = 1e-4


# ----------------------------------------------------------------------------------------------
# Shared setup: one torch model, its converted Flax weights, one batch
# ----------------------------------------------------------------------------------------------
def make_data(*, n: int, input_size, classes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random videos ``[n, T, H, W, 3]``, each with a random private box (mask 0) covering
    20-60% of each side in the middle frames, and labels. Every video has public and private
    token cells."""
    rng = np.random.default_rng(seed)
    t, h, w = input_size
    mask = np.ones((n, t, h, w), np.uint8)
    for i in range(n):
        bh, bw = (rng.uniform(0.2, 0.6, 2) * (h, w)).astype(int) + 8
        y, x = rng.integers(0, h - bh + 1), rng.integers(0, w - bw + 1)
        t0 = rng.integers(0, t // 2)
        mask[i, t0:, y:y + bh, x:x + bw] = 0
    return dict(video=rng.standard_normal((n, t, h, w, 3)).astype(np.float32), mask=mask,
                label=rng.integers(0, classes, n).astype(np.int64))


def torch_setup(size: dict, strategy: str, *, seed: int = 0):
    """torchvision's MViT in the size's preset, random weights from ``seed``, ``strategy`` applied
    (the parity fixture's builder, so the benchmark and the fixture test the same model)."""
    import torch

    from benchmarks import opacus_torch_step as ots
    from maskdp_jax import models

    if FIXTURES not in sys.path:
        sys.path.insert(0, FIXTURES)
    from make_mvit_fixture import randomise, torchvision_mvit

    preset = models.PRESETS[size["preset"]]
    model = torchvision_mvit(preset["blocks"], input_size=preset["input_size"],
                             num_classes=size["classes"])
    randomise(model, torch.Generator().manual_seed(seed))
    ots.set_strategy(model, strategy)
    return model


def jax_setup(size: dict, strategy: str, torch_state: dict[str, np.ndarray] | None, *,
              compute_dtype: str = "float32", attention: str = "auto"):
    """Our model (:func:`maskdp_jax.run.model.build`, as train.py builds it) with the torch weights
    (``torch_state=None``: our own random initialisation, for measurements that do not depend on
    the weights, such as compile cost); returns ``(model, trainable, frozen, apply_fn)``.
    ``compute_dtype``: ``config.compute.dtype`` (parameters, norms and gradients stay
    float32 whatever it is); ``attention``: ``config.compute.attention`` (``einsum``: our
    unfused attention, the kernel torchvision's MViT runs)."""
    import jax

    from maskdp_jax import models
    from maskdp_jax.configs import default
    from maskdp_jax.run import model as run_model

    config = default.model()
    config.update(dict(name=size["preset"], finetune=strategy, num_last_blocks=2))
    compute = default.compute()
    compute.dtype = compute_dtype
    compute.attention = attention
    params = None
    if torch_state is not None:
        module = models.get_model(size["preset"], num_classes=size["classes"])
        x = np.zeros((1, *module.input_size, 3), np.float32)
        like = jax.eval_shape(module.init, jax.random.key(0), x)["params"]
        params, _ = models.convert.convert_state_dict(torch_state, like=like, fmt="torchvision")
    built = run_model.build(config, num_classes=size["classes"], seed=0, compute=compute,
                            params=params)
    return built.module, built.trainable, built.frozen, built.apply_fn


def torch_batches(data, physical: int, device: str):
    import torch

    out = []
    for s in range(0, len(data["label"]), physical):
        sl = slice(s, s + physical)
        out.append((torch.from_numpy(data["video"][sl].transpose(0, 4, 1, 2, 3).copy()).to(device),
                    torch.from_numpy(data["mask"][sl]).to(device),
                    torch.from_numpy(data["label"][sl]).to(device)))
    return out


def jax_batches(data, physical: int):
    import jax.numpy as jnp

    out = []
    for s in range(0, len(data["label"]), physical):
        sl = slice(s, s + physical)
        n = len(data["label"][sl])
        out.append(dict(video=jnp.asarray(data["video"][sl][:, None]),
                        mask=jnp.asarray(data["mask"][sl][:, None]),
                        label=jnp.asarray(data["label"][sl], jnp.int32),
                        weight=jnp.ones((n,), jnp.float32)))
    return out


def gradient_capture():
    """An optax "optimiser" whose state after ``update`` is the gradient it was given (and whose
    update is zero): reads the exact gradient of ``finalize`` without parameter round-off."""
    import jax
    import optax

    def init(params):
        return jax.tree.map(jax.numpy.zeros_like, params)

    def update(grad, state, params=None):
        del state, params
        return jax.tree.map(jax.numpy.zeros_like, grad), grad

    return optax.GradientTransformation(init, update)


def make_jax_step(mode: str, *, apply_fn, tx, cfg):
    """``step(state, batches)`` for one of :data:`MODES` (a state of :func:`jax_state`).
    ``nonprivate2`` is built from the same pieces as ``make_train_step``: per physical batch, two
    ordinary (public-pass)
    accumulations, on the public and on the private view, each its own program as the public and
    the private pass of ``maskdp`` are (both views in one program measured 1.14x slower in one
    process on this CPU; why was not profiled). Like ``make_train_step``'s passes,
    each program cuts its view from the batch itself."""

    from maskdp_jax.core import compilation, gradient
    from maskdp_jax.core import train_step as ts

    if mode != "nonprivate2":
        step = ts.make_train_step(apply_fn=apply_fn, tx=tx, **step_args(cfg, mode))

        def run(state, batches):
            return step(state, ts.LogicalBatchData(
                public=batches if mode != "dp" else [],
                private=batches if mode != "nonprivate" else []))

        run.train_step = step  # its programs, for a profile (program_texts)
        return run

    plain = step_args(cfg, "nonprivate")

    def one_view(public: bool):
        def accumulate(acc, trainable, frozen, batch):
            video, weight = gradient.pass_view(ts.PixelViews(cfg.tokens)(batch),
                                               batch["weight"], public=public)
            return ts.accumulate(acc, trainable, frozen,
                                 {**batch, "video": video, "weight": weight}, public=True,
                                 apply_fn=apply_fn, mechanism=plain["mechanism"],
                                 views=ts.PixelViews(cfg.tokens))

        return compilation.jit(accumulate, donate_argnums=0)

    passes = (one_view(public=True), one_view(public=False))
    final = compilation.jit(lambda s, a: ts.finalize(s, a, tx=tx, mechanism=plain["mechanism"]),
                            donate_argnums=0)  # as make_train_step's finalisation

    def step(state, batches):
        acc = ts.zeros_accumulator(state.trainable)
        for b in batches:
            for accumulate in passes:
                acc = accumulate(acc, state.trainable, state.frozen, b)
        new, metrics = final(state.replace(frozen=None), acc)  # frozen: not donated
        return new.replace(frozen=state.frozen), metrics

    return step


def program_texts(step, state, batch) -> dict[str, str]:
    """The compiled HLO text of each program of ``step`` (a
    :class:`~maskdp_jax.core.train_step.TrainStep`) by module name, for
    :func:`benchmarks.trace_summary.summarize` (compiled again: with the persistent compilation
    cache on, as in the GPU suite, a read of what the step compiled)."""
    acc = step.zeros(state.trainable)
    lowered = [step.zeros.lower(state.trainable),
               step.public.lower(acc, state.trainable, state.frozen, batch),
               step.private.lower(acc, state.trainable, state.frozen, batch),
               step.finalize.lower(state.replace(frozen=None), acc)]
    texts = {}
    for program in lowered:
        try:
            text = program.compile().as_text()
        except ValueError:  # a pass this mode has not: refused as it is traced
            continue
        texts[text.split()[1].rstrip(",")] = text
    return texts


def profile(run, holder, batches, *, log_dir: str, steps: int = 2) -> str:
    """Trace ``steps`` steps of ``run`` (:func:`make_jax_step`'s, on ``holder[0]``'s state) into
    ``log_dir`` and write the summary of its top operations (:mod:`benchmarks.trace_summary`)
    to ``log_dir/summary.md``; returns that path."""
    import jax

    from benchmarks import trace_summary

    texts = program_texts(run.train_step, holder[0], batches[0])
    with jax.profiler.trace(log_dir, create_perfetto_trace=True):
        for _ in range(steps):
            holder[0], _ = run(holder[0], batches)
            jax.block_until_ready(holder[0])
    path = os.path.join(log_dir, "summary.md")
    with open(path, "w") as f:
        f.write(trace_summary.summarize(log_dir, texts, steps=steps))
    return path


@dataclasses.dataclass(frozen=True)
class StepSettings:
    """What the benchmark's JAX steps share across modes (the plan is made per mode)."""

    sigma: float
    clip: float
    batch: int
    tokens: object  # maskdp_jax.core.tokenizer.Tokenizer
    microbatch: int | None
    ghost: bool = False  # the private pass' per-example norms by ghost rules, not vmap


def dp_config(size, model, *, sigma: float, clip: float, microbatch=None,
              ghost: bool = False) -> StepSettings:
    from maskdp_jax.core.tokenizer import Tokenizer

    return StepSettings(sigma=sigma, clip=clip, batch=size["batch"],
                        tokens=Tokenizer(patch_stride=tuple(model.patch_stride)),
                        microbatch=microbatch, ghost=ghost)


def step_plan(cfg: StepSettings, mode: str):
    """A privacy plan for ``mode`` with the benchmark's σ, C and expected batch (N and δ only
    satisfy the plan's checks: a benchmark step is never accounted)."""
    from maskdp_jax.core.plan import Mode, PrivacyPlan

    private = Mode(mode).is_private
    return PrivacyPlan(mode=mode, num_examples=10**6, batch_size=cfg.batch, steps=10**6,
                       l2_clip_norm=cfg.clip, noise_multiplier=cfg.sigma if private else 0.0,
                       delta=1e-7)


def step_args(cfg: StepSettings, mode: str) -> dict:
    """Keyword arguments of ``make_train_step`` (less apply_fn, tx) for ``mode``."""
    from maskdp_jax.core.mechanism import Mechanism
    from maskdp_jax.core.randomness import Randomness
    from maskdp_jax.core.train_step import PixelViews
    from maskdp_jax.run import model as run_model

    return {"mechanism": Mechanism(plan=step_plan(cfg, mode),
                                   randomness=Randomness(mode="seeded", seed=0)),
            "views": PixelViews(cfg.tokens),
            "microbatch_size": cfg.microbatch,
            "ghost_rules": run_model.ghost_rules() if cfg.ghost else None}


def jax_state(trainable, frozen, tx):
    """The JAX step's state before its first step (seeded noise: a benchmark is never
    released)."""
    from maskdp_jax.core.mechanism import Mechanism
    from maskdp_jax.core.plan import PrivacyPlan
    from maskdp_jax.core.randomness import Randomness
    from maskdp_jax.core.train_step import TrainState

    plan = PrivacyPlan(mode="nonprivate", num_examples=2, batch_size=1, steps=1,
                       l2_clip_norm=1.0, noise_multiplier=0.0, delta=0.1)
    return TrainState.create(trainable=trainable, frozen=frozen, tx=tx, mechanism=Mechanism(
        plan=plan, randomness=Randomness(mode="seeded", seed=0)))


def relative_error(ours: dict, ref: dict) -> float:
    """``max |ours - ref| / max |ref|`` over every trainable leaf jointly."""
    diff = max(float(np.abs(np.asarray(ours[k], np.float64) - ref[k]).max()) for k in ref)
    return diff / max(float(np.abs(ref[k]).max()) for k in ref)


def gradient_equality(size: dict, *, modes=MODES, strategy="selective", engine="opacus",
                      microbatch=None, seed=0) -> list[dict]:
    """One step per mode in both frameworks with the noise off.

    Args:
      size: a :data:`SIZES` entry (model, classes, B, P).
      strategy: ``selective`` or ``full`` fine-tuning.
      engine: the PyTorch side's per-example gradients: ``opacus`` or ``loop``
        (see :class:`benchmarks.opacus_torch_step.OpacusStep`).
      microbatch: ours: per-example gradients this many at a time.

    Returns:
      One row per mode: ``mode, rel_error`` (max |ours - torch| / max |torch|) and for private
      modes ``clip`` (C: the mean per-example gradient norm of that mode's private pass, so that
      some examples are clipped and some not), ``clipped_fraction`` and the control
      ``unclipped_rel_diff``: ours against the PyTorch side with C = 1e9 (no clipping).
    """
    import jax
    import torch
    from flax import traverse_util

    from benchmarks import opacus_torch_step as ots
    from maskdp_jax import models
    from maskdp_jax.core import partition

    torch.manual_seed(seed)
    model = torch_setup(size, strategy, seed=seed).train()
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    jmodel, trainable, frozen, apply_fn = jax_setup(size, strategy, state)
    data = make_data(n=size["batch"], input_size=jmodel.input_size, classes=size["classes"],
                     seed=seed + 1)
    tx = gradient_capture()
    # The hidden cells' fill of our views, handed to the PyTorch side so both see the same pixels.
    fill = dp_config(size, jmodel, sigma=0.0, clip=1.0).tokens.fill((*jmodel.input_size, 3))

    def ours(mode, c):
        cfg = dp_config(size, jmodel, sigma=0.0, clip=c, microbatch=microbatch)
        step = make_jax_step(mode, apply_fn=apply_fn, tx=tx, cfg=cfg)
        new, metrics = step(jax_state(trainable, frozen, tx), jax_batches(data, size["physical"]))
        flat = traverse_util.flatten_dict(jax.device_get(new.opt_state))
        return {"/".join(k): v for k, v in flat.items()}, metrics

    def theirs(mode, c):
        m = torch_setup(size, strategy, seed=seed)
        step = ots.OpacusStep(m, mode, l2_clip_norm=c, noise_multiplier=0.0,
                              expected_batch_size=size["batch"], patch_stride=jmodel.patch_stride,
                              fill_value=fill, engine=engine)
        step(torch_batches(data, size["physical"], "cpu"))
        grads = step.gradient()
        full = {k: grads.get(k, np.zeros_like(v)) for k, v in state.items()}
        params, _ = models.convert.convert_state_dict(
            full, like=partition.merge(trainable, frozen), fmt="torchvision")
        flat = traverse_util.flatten_dict(params)
        return {"/".join(k): flat[k] for k in traverse_util.flatten_dict(trainable)}

    rows = []
    for mode in modes:
        row = dict(mode=mode)
        clip = 1.0
        if mode in ("maskdp", "dp"):
            clip = row["clip"] = ots.mean_per_example_norm(
                model, torch_batches(data, size["physical"], "cpu"), mode=mode,
                patch_stride=jmodel.patch_stride, fill_value=fill)
        g, metrics = ours(mode, clip)
        row["rel_error"] = relative_error(g, theirs(mode, clip))
        if mode in ("maskdp", "dp"):
            row["clipped_fraction"] = float(metrics["private/clipped_fraction"])
            row["unclipped_rel_diff"] = relative_error(g, theirs(mode, 1e9))
        rows.append(row)
    return rows


def print_equality(rows, *, title: str) -> None:
    print(f"\n{title}\n")
    print("| mode | max rel. error | C | clipped fraction | control: vs unclipped |")
    print("|---|---|---|---|---|")
    for r in rows:
        fields = [f"{r['rel_error']:.2e}"] + (
            [f"{r['clip']:.4g}", f"{r['clipped_fraction']:.2f}", f"{r['unclipped_rel_diff']:.2e}"]
            if "clip" in r else ["-"] * 3)
        print(f"| {r['mode']} | " + " | ".join(fields) + " |")


# ----------------------------------------------------------------------------------------------
# Timing, one (framework, mode, strategy) per process
# ----------------------------------------------------------------------------------------------
def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class PeakRss:
    """Samples this process's resident memory every 2 ms while active; ``peak`` in MiB."""

    def __init__(self):
        self.peak, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_mib())
            time.sleep(0.002)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def time_one(framework: str, mode: str, strategy: str, size: dict, *, steps: int, warmup: int,
             device: str, microbatch: int | None, compute_dtype: str = "float32",
             ghost: bool = False, attention: str = "auto", profile_dir: str = "") -> dict:
    """Median logical-step seconds of one configuration, in this process. ``profile_dir``
    (ours): after the timed steps, trace two more and summarise them there (:func:`profile`).
    ``compute_dtype`` ``"bfloat16"``: ours with ``compute.dtype="bfloat16"``, PyTorch under
    ``torch.autocast`` to bfloat16 (AMP); parameters, gradients, clipping and noise float32 on
    both sides. ``ghost``: ours takes the private pass' per-example norms by ghost rules
    (``compute.per_example="ghost"``; ``microbatch`` is then unused by that pass)."""
    import torch

    model = torch_setup(size, strategy)
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    from maskdp_jax import models

    preset_input = models.PRESETS[size["preset"]]["input_size"]
    data = make_data(n=size["batch"], input_size=preset_input, classes=size["classes"], seed=1)
    sigma, clip = 1.0, 1.0
    if framework in ("opacus", "loop"):
        from benchmarks import opacus_torch_step as ots

        model.to(device)
        patch_stride = (2, 4, 4)  # torchvision's conv_proj stride
        fn = ots.OpacusStep(model, mode, l2_clip_norm=clip, noise_multiplier=sigma,
                            expected_batch_size=size["batch"], patch_stride=patch_stride,
                            engine=framework,
                            autocast=torch.bfloat16 if compute_dtype == "bfloat16" else None)
        batches = torch_batches(data, size["physical"], device)

        def run():
            fn(batches)
            if device == "cuda":
                torch.cuda.synchronize()
    else:
        import jax


        del model
        jmodel, trainable, frozen, apply_fn = jax_setup(size, strategy, state,
                                                        compute_dtype=compute_dtype,
                                                        attention=attention)
        import optax

        tx = optax.sgd(0.1)
        cfg = dp_config(size, jmodel, sigma=sigma, clip=clip, microbatch=microbatch, ghost=ghost)
        fn = make_jax_step(mode, apply_fn=apply_fn, tx=tx, cfg=cfg)
        batches = jax_batches(data, size["physical"])
        holder = [jax_state(trainable, frozen, tx)]

        def run():
            holder[0], _ = fn(holder[0], batches)
            jax.block_until_ready(holder[0])

    rss_before = _rss_mib()
    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    for _ in range(warmup - 1):
        run()
    times = []
    with PeakRss() as rss:
        for _ in range(steps):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    profiled = {}
    if profile_dir and framework == "jax":
        profiled["profile"] = profile(fn, holder, batches, log_dir=profile_dir)
    out = dict(framework=framework, mode=mode, strategy=strategy, compute_dtype=compute_dtype,
               **profiled,
               first_step_s=first,
               median_s=float(np.median(times)), min_s=float(np.min(times)),
               max_s=float(np.max(times)), steps=steps,
               # CPU: resident memory during the timed steps, and before the first step (both
               # frameworks' libraries, the model, the batch); allocators keep what they freed,
               # XLA's compilation memory included, so this bounds the step's working set
               timed_peak_rss_mib=rss.peak, rss_before_mib=rss_before,
               peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    if device == "cuda":
        if framework != "jax":
            out["peak_device_mib"] = torch.cuda.max_memory_allocated() / 2**20
        else:
            import jax

            out["peak_device_mib"] = jax.devices()[0].memory_stats()["peak_bytes_in_use"] / 2**20
    return out


def time_pair(modes: list[str], strategy: str, size: dict, *, steps: int, warmup: int,
              device: str, microbatch: int | None, compute_dtype: str = "float32",
              ghost: bool = False, attention: str = "auto") -> dict:
    """Ours in several modes in ONE process, on the same model and batches (our own random
    weights: the time does not depend on them), their timed steps alternating: ``{"modes":
    {mode: {median_s, min_s, max_s, first_step_s, steps}}}``. A ratio of two modes is then free
    of what differs between processes (``docs/benchmarks.md``, "Two speeds per process") and of
    the device's state drifting between calls. Each mode's first step compiles it."""
    import jax
    import optax

    from maskdp_jax import models

    jmodel, trainable, frozen, apply_fn = jax_setup(size, strategy, None,
                                                    compute_dtype=compute_dtype,
                                                    attention=attention)
    preset_input = models.PRESETS[size["preset"]]["input_size"]
    data = make_data(n=size["batch"], input_size=preset_input, classes=size["classes"], seed=1)
    batches = jax_batches(data, size["physical"])
    tx = optax.sgd(0.1)
    cfg = dp_config(size, jmodel, sigma=1.0, clip=1.0, microbatch=microbatch, ghost=ghost)
    runs, states, first, times = {}, {}, {}, {m: [] for m in modes}
    for mode in modes:
        runs[mode] = make_jax_step(mode, apply_fn=apply_fn, tx=tx, cfg=cfg)
        states[mode] = jax_state(jax.tree.map(jax.numpy.copy, trainable), frozen, tx)

    def run(mode):
        states[mode], _ = runs[mode](states[mode], batches)
        jax.block_until_ready(states[mode])

    for mode in modes:
        t = time.perf_counter()
        run(mode)
        first[mode] = time.perf_counter() - t
        for _ in range(warmup - 1):
            run(mode)
    for _ in range(steps):
        for mode in modes:
            t = time.perf_counter()
            run(mode)
            times[mode].append(time.perf_counter() - t)
    out = {"modes": {m: dict(median_s=float(np.median(times[m])), min_s=float(np.min(times[m])),
                             max_s=float(np.max(times[m])), first_step_s=first[m], steps=steps)
                     for m in modes},
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device == "cuda":
        out["peak_device_mib"] = jax.devices()[0].memory_stats()["peak_bytes_in_use"] / 2**20
    return out


def machine_line(device: str) -> str:
    import jax
    import opacus
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name() if device == "cuda" else "no GPU"
    return (f"{cpu}, {os.cpu_count()} CPUs, {gpu}; Python {platform.python_version()}, "
            f"jax {jax.__version__} ({jax.devices()[0].platform}), torch {torch.__version__}, "
            f"opacus {opacus.__version__}; torch threads {torch.get_num_threads()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="cpu")
    parser.add_argument("--batch", type=int, help="logical batch B (default: the size's)")
    parser.add_argument("--physical", type=int, help="physical batch P (default: the size's)")
    parser.add_argument("--microbatch", type=int, help="ours, full FT: per-example grads at a time")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--strategies", default="selective,full")
    parser.add_argument("--frameworks", default="jax,opacus,loop",
                        help="loop: PyTorch per-example loop, timed for the private modes")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps, the first included")
    parser.add_argument("--rounds", type=int, default=2,
                        help="time every configuration this many times, alternating the order; "
                        "a configuration's time is its lowest round median (robust to other "
                        "jobs on a shared machine)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("float32", "tf32"), default="float32",
                        help="GPU matmuls/convolutions of the timed steps, both frameworks alike")
    parser.add_argument("--compute_dtype", choices=("float32", "bfloat16"), default="float32",
                        help="the timed steps' products, both frameworks alike (bfloat16: ours "
                        "compute.dtype, PyTorch AMP autocast)")
    parser.add_argument("--per_example", choices=("vmap", "ghost"), default="vmap",
                        help="ours: the private pass' per-example norms (compute.per_example)")
    parser.add_argument("--attention", choices=("auto", "einsum", "xla", "cudnn"), default="auto",
                        help="ours: the attention kernel (config.compute.attention; einsum: "
                        "unfused, as torchvision's MViT)")
    parser.add_argument("--profile_dir", default="",
                        help="ours: trace two steps after the timed ones and write the summary "
                        "of their top operations there (summary.md)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--skip_equality", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # framework:mode:strategy
    args = parser.parse_args()

    size = dict(SIZES[args.size])
    size.update({k: v for k, v in (("batch", args.batch), ("physical", args.physical),
                                   ("microbatch", args.microbatch)) if v})
    if size["batch"] % size["physical"]:
        parser.error(f"--batch {size['batch']} is not a multiple of --physical {size['physical']}")
    if args.device == "cuda":
        # JAX would otherwise reserve 75% of the GPU in every process that touches it (this one
        # runs the equality check while the workers time): allocate on demand, in all processes
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    # The same matmul/conv precision on both sides: on NVIDIA GPUs JAX's default float32 matmul
    # uses TF32 and PyTorch's does not (its cuDNN convolutions do). The equality check always runs
    # in full float32.
    tf32 = args.precision == "tf32" and bool(args.worker)
    if not (args.worker or "").startswith("jax:"):  # ours alone needs no torch
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    import jax

    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest")
    if args.worker:
        framework, mode, strategy = args.worker.split(":")
        micro = size["microbatch"] if strategy == "full" else None
        if "+" in mode:  # ours in several modes in one process: jax:maskdp+nonprivate2:full
            print(json.dumps(time_pair(mode.split("+"), strategy, size, steps=args.steps,
                                       warmup=args.warmup, device=args.device, microbatch=micro,
                                       compute_dtype=args.compute_dtype,
                                       ghost=args.per_example == "ghost",
                                       attention=args.attention)))
            return
        print(json.dumps(time_one(framework, mode, strategy, size, steps=args.steps,
                                  warmup=args.warmup, device=args.device, microbatch=micro,
                                  compute_dtype=args.compute_dtype,
                                  ghost=args.per_example == "ghost", attention=args.attention,
                                  profile_dir=args.profile_dir)))
        return

    print(f"# {args.size}: {size}, precision {args.precision}\n# {machine_line(args.device)}")
    if not args.skip_equality:
        # the papers' size checks equality on the tiny preset (MViTv2-S on the CPU is too slow)
        eq = {**(SIZES["tiny"] if args.size == "paper" else size), "classes": size["classes"]}
        eq.update(batch=min(eq["batch"], 8), physical=min(eq["physical"], 4))
        t = time.perf_counter()
        rows = gradient_equality(eq)
        full_rows = gradient_equality(eq, modes=("maskdp", "dp"), strategy="full", engine="loop",
                                      microbatch=2)
        print_equality(rows, title=f"Gradient equality, selective FT, ours vs Opacus "
                       f"({eq['preset']}, B={eq['batch']} in physical batches of "
                       f"{eq['physical']}, noise off):")
        print_equality(full_rows, title="Gradient equality, full FT, ours (per-example gradients "
                       "2 at a time) vs a PyTorch per-example loop (Opacus 1.6 cannot hook "
                       f"torchvision's MViT for full FT; {time.perf_counter() - t:.0f} s for both "
                       "tables):")
        bad = [r["mode"] for r in rows + full_rows if not r["rel_error"] <= TOLERANCE]
        if bad:
            sys.exit(f"gradient equality failed for {bad} (tolerance {TOLERANCE}); not timing.")

    configs = [(fw, mode, st) for st in args.strategies.split(",")
               for mode in args.modes.split(",") for fw in args.frameworks.split(",")
               # without per-example gradients the loop is the same as the Opacus column
               if not (fw == "loop" and mode not in ("maskdp", "dp"))]
    runs: dict[tuple, list[dict]] = {c: [] for c in configs}
    for round_ in range(args.rounds):
        print(f"\nround {round_ + 1} of {args.rounds}", flush=True)
        for config in configs if round_ % 2 == 0 else configs[::-1]:
            r = run_worker(*config, size, args)
            runs[config].append(r)
            print(f"  {config[0]:6s} {config[1]:11s} {config[2]:9s} "
                  + (f"median {r['median_s'] * 1e3:8.1f} ms, first {r['first_step_s']:.1f} s"
                     if "error" not in r else f"FAILED: {r['error']}"), flush=True)
    results = []
    for config in configs:
        good = [r for r in runs[config] if "error" not in r]
        best = min(good, key=lambda r: r["median_s"]) if good else runs[config][0]
        results.append({**best, "round_medians_s": [r["median_s"] for r in good]})
    print_tables(results, size, args)


def run_worker(framework: str, mode: str, strategy: str, size: dict, args) -> dict:
    """Times one configuration in a fresh process (its own compile, allocator and threads)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--size", args.size,
           "--batch", str(size["batch"]), "--physical", str(size["physical"]),
           "--microbatch", str(size["microbatch"]), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--device", args.device, "--precision", args.precision,
           "--compute_dtype", args.compute_dtype, "--worker", f"{framework}:{mode}:{strategy}"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return dict(framework=framework, mode=mode, strategy=strategy, error=err[:300])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_tables(results, size, args) -> None:
    by = {(r["framework"], r["mode"], r["strategy"]): r for r in results}
    ok = lambda r: r is not None and "error" not in r  # noqa: E731

    def ms(r):
        return f"{r['median_s'] * 1e3:.1f}" if ok(r) else ("failed" if r else "-")

    def ratio(a, b):
        return f"{a['median_s'] / b['median_s']:.2f}×" if ok(a) and ok(b) else "-"

    def mib(r):
        if not ok(r):
            return "-"
        if args.device == "cuda":
            return f"{r['peak_device_mib']:.0f}"
        return f"{r['timed_peak_rss_mib']:.0f} ({r['rss_before_mib']:.0f})"

    mem = ("peak device memory [MiB]" if args.device == "cuda"
           else "peak RSS (before 1st step) [MiB]")
    print(f"\nStep time, B={size['batch']} in physical batches of {size['physical']} "
          f"(median of {args.steps} after {args.warmup} warm-up steps, lowest of {args.rounds} "
          f"rounds; ours first = compile + run; ours full FT: per-example gradients "
          f"{size['microbatch']} at a time):\n")
    print(f"| strategy | mode | ours [ms] | Opacus [ms] | Opacus / ours | PyTorch loop [ms] | "
          f"loop / ours | ours first [s] | ours {mem} | Opacus {mem} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if r["framework"] != "jax":
            continue
        o, lp = (by.get((fw, r["mode"], r["strategy"])) for fw in ("opacus", "loop"))
        first = f"{r['first_step_s']:.1f}" if ok(r) else "-"
        print(f"| {r['strategy']} | {r['mode']} | {ms(r)} | {ms(o)} | {ratio(o, r)} | {ms(lp)} | "
              f"{ratio(lp, r)} | {first} | {mib(r)} | {mib(o)} |")
    print("\nDP overhead: maskdp / nonprivate2 (the same two-view step without DP), dp / "
          "nonprivate (one view):\n")
    print("| framework | strategy | maskdp / nonprivate2 | dp / nonprivate |")
    print("|---|---|---|---|")
    for fw in args.frameworks.split(","):
        for st in args.strategies.split(","):
            g = {m: by.get((fw, m, st)) for m in MODES}
            if fw == "loop":  # the loop's non-private baselines are plain autograd = Opacus'
                g.update({m: by.get(("opacus", m, st)) for m in ("nonprivate2", "nonprivate")})
            print(f"| {fw} | {st} | {ratio(g['maskdp'], g['nonprivate2'])} | "
                  f"{ratio(g['dp'], g['nonprivate'])} |")
    print("\nmaskdp step time, full / selective fine-tuning: " + ", ".join(
        f"{fw} {ratio(by.get((fw, 'maskdp', 'full')), by.get((fw, 'maskdp', 'selective')))}"
        for fw in args.frameworks.split(",")))
    failed = [r for r in results if "error" in r]
    for r in failed:
        print(f"\n{r['framework']} {r['mode']} {r['strategy']} failed: {r['error']}")


if __name__ == "__main__":
    main()
