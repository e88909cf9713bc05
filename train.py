r"""Train a video classifier with MaskDP, DP-SGD or plain SGD, then evaluate and report privacy.

    python train.py                                   # configs/default.py: MaskDP, ε = 1
    python train.py --config.mode=dp                  # DP-SGD on the whole video
    python train.py --config=configs/default.py --workdir=/tmp/run --config.seed=1

One file a researcher can read top to bottom (big_vision style): build data, model, privacy
calibration, optimiser; loop over logical steps (host-side Poisson sampling -> physical batches ->
jitted accumulate / noise / update); evaluate on the held-out split; write a JSON and a Markdown run
report with the privacy statement.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import app, flags, logging
from ml_collections import config_flags
from tqdm import tqdm

import accounting
import data
import models
from maskdp_jax import (
    checkpoint,
    evaluation,
    metric_writer,
    parallel,
    partition,
    plots,
    randomness,
    report,
    sampling,
    validation,
)
from maskdp_jax.train_step import DPConfig, LogicalBatchData, TrainState, make_train_step


# ----------------------------------------------------------------------------------------------
# Privacy set-up
# ----------------------------------------------------------------------------------------------
def plan_privacy(config: ml_collections.ConfigDict, *, num_examples: int) -> dict[str, Any]:
    """Sampling rate, number of steps and noise multiplier of the run.

    The noise multiplier is calibrated (smallest σ reaching ``target_epsilon`` at ``delta`` over the
    planned steps) unless ``privacy.noise_multiplier >= 0`` is given.
    """
    q = config.batch_size / num_examples
    steps = max(1, round(config.num_epochs * num_examples / config.batch_size))
    p = config.privacy
    if config.mode == "nonprivate":
        return {"q": q, "steps": steps, "noise_multiplier": 0.0}
    if config.mode == "maskdp" and config.sampling not in sampling.SAMPLING_SCHEMES:
        raise ValueError(f"sampling must be one of {sampling.SAMPLING_SCHEMES}.")
    accounting.check_delta(delta=p.delta, num_examples=num_examples)
    scheme = config.sampling if config.mode == "maskdp" else "decoupled"
    if p.noise_multiplier >= 0:
        sigma = float(p.noise_multiplier)
    else:
        sigma = accounting.calibrate_noise_multiplier(
            target_epsilon=p.target_epsilon, delta=p.delta, q=q, steps=steps,
            method=p.accountant, adjacency=p.adjacency, sampling=scheme,
        )
    return {"q": q, "steps": steps, "noise_multiplier": sigma}


# ----------------------------------------------------------------------------------------------
# Model and optimiser
# ----------------------------------------------------------------------------------------------
def build_model(config: ml_collections.ConfigDict, *, num_classes: int, input_shape, key):
    """Model, ``(trainable, frozen)`` parameters and the apply function."""
    overrides = {"adapters": True} if config.model.finetune == "adapters" else {}
    model = models.get_model(config.model.name, num_classes=num_classes, **overrides)
    if config.model.init_from:
        # Pre-trained (public) weights; adapters, and a head for other classes, start fresh.
        like = models.convert.import_template(model, input_shape=input_shape, key=key)
        params = models.convert.restore_params(config.model.init_from, like=like)
    else:
        params = init_params(model, input_shape=input_shape, key=key)
    mask = models.finetune.trainable_mask(
        params, strategy=config.model.finetune, num_last_blocks=config.model.num_last_blocks
    )
    trainable, frozen = partition.split(params, mask)

    def apply_fn(params, x):
        return model.apply({"params": params}, x)

    return model, trainable, frozen, apply_fn


def init_params(model, *, input_shape, key):
    """Random initial parameters, initialised under ``jit`` with an RBG key drawn from ``key``.

    Deterministic given ``key``. With the default threefry key, compiling ``model.init`` took
    ~60 s on 2 CPU cores even for the tiny presets (vs ~15 s with RBG); the initial values carry
    no privacy meaning, so the cheaper generator is used here only.
    """
    seed = int(jax.random.randint(key, (), 0, jnp.iinfo(jnp.int32).max))
    init_key = jax.random.key(seed, impl="rbg")
    return jax.jit(model.init)(init_key, jnp.zeros((1, *input_shape), jnp.float32))["params"]


def build_optimizer(config: ml_collections.ConfigDict, *, steps: int, steps_per_epoch: float):
    o = config.optimizer
    warmup = min(steps - 1, round(o.warmup_epochs * steps_per_epoch))
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=o.learning_rate, warmup_steps=max(warmup, 0),
        decay_steps=steps, end_value=0.0,
    )
    if o.get("name", "sgd") == "sgd":
        tx = optax.sgd(schedule, momentum=o.momentum or None)
    elif o.name == "adam":
        # Adam on the noised gradient is post-processing of the DP sum, so privacy is unchanged.
        tx = optax.adam(schedule)
    else:
        raise ValueError(f"optimizer.name must be 'sgd' or 'adam'; got {o.name!r}.")
    if o.weight_decay:
        tx = optax.chain(optax.add_decayed_weights(o.weight_decay), tx)
    return tx


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------
def load_logical_batch(dataset, batch: sampling.LogicalBatch, *, config, step: int, mesh=None):
    """Physical batches of one logical step. Clip offsets are seeded per step.

    The offsets derive from the public ``config.seed`` also in secret mode: they are not privacy
    noise (drawn per batch row, independently of the data; see :mod:`maskdp_jax.randomness`).

    Without a mesh: host numpy. With a mesh: global arrays sharded over the data axis, of which this
    process loads only its own rows (every process cuts the same physical batches, since the
    Poisson draw is a pure function of seed and step). With several processes each draws the
    temporal clip offsets of its rows from a seed that includes its first row, so offsets (not
    the sampled videos, weights or noise) depend on the number of processes.
    """
    p = config.physical_batch_size
    rows = slice(None) if mesh is None else parallel.process_rows(p, mesh)
    block = [] if jax.process_count() == 1 else [rows.start]

    def cut(indices, stream):
        if indices is None:
            return []
        out = []
        for j, (idx, weight) in enumerate(sampling.physical_batches(
            indices, physical_batch_size=p
        )):
            b = dataset.get_batch(
                idx[rows], num_clips=config.input.clips_per_video,
                seed=[config.seed, step, stream, j, *block],
            )
            b["weight"] = weight[rows]
            out.append(b if mesh is None else parallel.global_batch(b, mesh, p))
        return out

    return LogicalBatchData(
        public=cut(batch.public, sampling.PUBLIC_STREAM),
        private=cut(batch.private, sampling.PRIVATE_STREAM),
    )


# ----------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------
def sampler_meta(config: ml_collections.ConfigDict, *, num_examples: int) -> dict[str, Any]:
    """Everything the Poisson sampler depends on (it has no other state). Stored in checkpoints."""
    return {"num_examples": num_examples, "expected_batch_size": config.batch_size,
            "seed": config.seed, "sampling": config.sampling}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
    """Train, evaluate, write report.json / report.md into ``workdir``; return the report.

    Every check of the inputs (config, data, privacy plan, a checkpoint to resume, the privacy
    journal, the budget) runs before the model is built, so bad input fails in seconds.
    """
    validation.check_config(config, num_devices=jax.device_count())
    t_start = time.time()
    os.makedirs(workdir, exist_ok=True)
    train_ds, test_ds = data.get_datasets(config.input, mode=config.mode)
    if config.mode == "maskdp":
        if not train_ds.has_masks:
            raise ValueError(
                f"mode 'maskdp' needs per-video masks, but dataset {train_ds.name!r} has none. "
                "Provide mask files (README: 'Your own videos and masks') or run "
                "--config.mode=dp / nonprivate."
            )

    n = len(train_ds)
    validation.check_dataset_size(config, num_examples=n)
    plan = plan_privacy(config, num_examples=n)
    sigma, steps, q = plan["noise_multiplier"], plan["steps"], plan["q"]
    print(f"Mode {config.mode}: N={n}, B={config.batch_size}, q={q:.5f}, steps={steps}, "
          f"noise multiplier σ={sigma:.4f}, C={config.privacy.l2_clip_norm}.")

    # The model-init key is public on purpose (initial values are not privacy noise); the noise
    # key and the Poisson seeds come from the run's randomness (secret by default, restored from
    # the checkpoint on resume).
    model_key, _ = jax.random.split(jax.random.key(config.seed))
    meta = checkpoint.read_latest_meta(workdir)
    rand = randomness.for_run(config, restored=meta)
    noise_key = rand.noise_key()
    noise_key_data = jax.random.key_data(noise_key)
    sampler_state = sampler_meta(config, num_examples=n)
    topology = checkpoint.current_topology()
    scheme = config.sampling if config.mode == "maskdp" else "decoupled"
    privacy_meta = {"delta": config.privacy.delta, "adjacency": config.privacy.adjacency,
                    "sampling": scheme, "mode": config.mode}
    run_identity = checkpoint.run_identity(config, randomness_id=rand.public_id(),
                                           topology=topology)

    # Resume checks: a checkpoint of another config or topology, a journal of another run, or a
    # ledger that is already past the planned steps or would pass the target ε are refused here.
    ledger = accounting.Ledger()
    if meta is not None:
        ledger = checkpoint.validate_meta(meta, config=config, noise_key_data=noise_key_data,
                                          sampler=sampler_state, randomness=rand.to_meta(),
                                          topology=topology,
                                          where=os.path.join(workdir, "checkpoints"))
    checkpoint.check_journal(workdir, privacy=privacy_meta, run=run_identity, q=q,
                             noise_multiplier=sigma)
    checkpoint.check_budget(steps_done=ledger.steps, planned_steps=steps, next_steps=0)
    if config.mode != "nonprivate" and config.privacy.noise_multiplier < 0:
        checkpoint.check_epsilon_budget(
            ledger, remaining_steps=steps - ledger.steps, q=q, noise_multiplier=sigma,
            target_epsilon=config.privacy.target_epsilon, delta=config.privacy.delta,
            method=config.privacy.accountant, adjacency=config.privacy.adjacency,
            sampling=scheme,
        )

    input_shape = train_ds.get_batch(np.array([0]))["video"].shape[2:]
    model, trainable, frozen, apply_fn = build_model(
        config, num_classes=train_ds.num_classes, input_shape=input_shape, key=model_key
    )
    num_trainable = models.finetune.count_params(trainable)
    num_total = num_trainable + models.finetune.count_params(frozen)
    print(f"Model {config.model.name}: {num_trainable:,} trainable of {num_total:,} parameters "
          f"(strategy {config.model.finetune!r}).")
    if config.mode == "maskdp":
        data.warn_degenerate_masks(train_ds, patch_stride=model.patch_stride)

    tx = build_optimizer(config, steps=steps, steps_per_epoch=n / config.batch_size)
    state = TrainState.create(trainable=trainable, frozen=frozen, tx=tx)
    dp_cfg = DPConfig(
        mode=config.mode, l2_clip_norm=config.privacy.l2_clip_norm, noise_multiplier=sigma,
        expected_batch_size=config.batch_size, patch_stride=tuple(model.patch_stride),
        fill_value=config.fill_value,
        microbatch_size=config.privacy.get("microbatch_size", 0) or None,
    )
    # Data parallel over every device of every process when there is more than one.
    mesh = parallel.make_mesh() if jax.device_count() > 1 else None
    if mesh is not None:
        parallel.check_divisible(config.physical_batch_size, mesh)
        print(f"Data parallel over {mesh.size} devices ({jax.process_count()} process(es)).")
    train_step = make_train_step(apply_fn=apply_fn, tx=tx, cfg=dp_cfg, mesh=mesh)
    sampler = rand.sampler(num_examples=n, expected_batch_size=config.batch_size)

    # Process 0 alone writes the journal, metrics, report and plots into the (shared) workdir;
    # every process takes part in the checkpoints (orbax coordinates them).
    primary = jax.process_index() == 0
    # Resume from the newest checkpoint of this workdir, if any (checked above; refused if the
    # config differs).
    ckpt = checkpoint.Checkpointer(workdir, keep=config.checkpoint.keep)
    restored = ckpt.restore_latest(parallel.to_host(state))
    if restored is not None:
        state, meta = restored
        ledger = checkpoint.validate_meta(meta, config=config, noise_key_data=noise_key_data,
                                          sampler=sampler_state, randomness=rand.to_meta(),
                                          topology=topology, where=ckpt.directory)
        print(f"Resumed from {ckpt.directory} at step {meta['step']} of {steps}.")
    start = int(state.step)
    if mesh is not None:
        state = parallel.replicate(state, mesh)

    def release(step_done: int) -> None:
        """Journal the ledger of every executed step BEFORE anything derived from them leaves."""
        if primary:
            checkpoint.write_ledger_journal(workdir, ledger, privacy=privacy_meta,
                                            run=run_identity)

    def save(step_done: int) -> None:
        release(step_done)
        ckpt.save(parallel.to_host(state), step=step_done, ledger=ledger, config=config,
                  noise_key_data=noise_key_data, sampler=sampler_state,
                  randomness=rand.to_meta(), topology=topology)

    if restored is None and rand.mode == "secret":
        # The secret goes to disk (checkpoint meta) before anything is released, so that a run
        # killed before its first periodic checkpoint resumes with the same noise and batches.
        save(start)

    def epsilon_so_far() -> float:
        """ε spent so far for the progress display: RDP (an upper bound, ~1 ms) when it supports
        the adjacency, else PLD (tight, ~1 s). The final report gives both."""
        if config.mode == "nonprivate":
            return float("inf")
        method = "pld" if config.privacy.adjacency == "replace" else "rdp"
        return ledger.epsilon(
            delta=config.privacy.delta, method=method, adjacency=config.privacy.adjacency,
            sampling=scheme,
        )

    def batch_at(step):  # a pure function of the step, so it can be prepared ahead
        logical = sampler.logical_batch(step, mode=config.mode, sampling=config.sampling)
        return load_logical_batch(train_ds, logical, config=config, step=step, mesh=mesh)

    # SIGTERM (preemption): finish the current step, checkpoint, exit cleanly.
    preempted = []
    previous_handler = signal.signal(signal.SIGTERM, lambda *_: preempted.append(True))
    every = config.checkpoint.every_steps
    history = []
    t_train = time.time()
    try:
        # Only process 0 shows progress: a metric row must not leave before it has journaled.
        with (tqdm(total=steps, initial=start, desc=f"train[{config.mode}]",
                   dynamic_ncols=True, disable=not primary) as bar,
              (metric_writer.MetricWriter(workdir, tensorboard=config.tensorboard) if primary
               else contextlib.nullcontext()) as writer,
              data.StepPrefetcher(batch_at, depth=config.input.get("prefetch", 0),
                                  num_steps=steps) as batches):
            for step in range(start, steps):
                checkpoint.check_budget(steps_done=ledger.steps, planned_steps=steps)
                batch = batches(step)
                state, metrics = train_step(state, batch, noise_key)
                ledger.record(q=q, noise_multiplier=sigma)
                if (step + 1) % config.log_every_steps == 0 or step + 1 == steps:
                    row = public_metrics(jax.device_get(metrics), config)
                    row["epsilon"] = epsilon_so_far()
                    row["steps_per_second"] = bar.format_dict["rate"] or 0.0
                    release(step + 1)
                    if writer is not None:
                        writer.write(step + 1, row)
                    history.append({"step": step + 1, **row})
                    bar.set_postfix({k: f"{v:.3g}" for k, v in row.items()})
                bar.update(1)
                # Hosts may see SIGTERM at different steps and the save is a collective: all
                # processes agree on the flag every step (no communication with one process).
                if parallel.any_process(bool(preempted)):
                    save(step + 1)
                    print(f"SIGTERM: checkpointed step {step + 1} of {steps} in {ckpt.directory}; "
                          "run the same command again to resume.")
                    return {"preempted": True, "step": step + 1}
                if every and ((step + 1) % every == 0 or step + 1 == steps):
                    save(step + 1)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        ckpt.close()
    state = parallel.to_host(state)
    train_seconds = time.time() - t_train

    logits = evaluation.predict(
        apply_fn, state.params, test_ds, num_clips=config.input.eval_clips,
        batch_size=config.physical_batch_size,
    )
    metrics = evaluation.accuracy_metrics(logits, test_ds.labels, test_ds.num_classes)
    view_metrics = {}
    if config.mode == "maskdp":
        # Diagnostic: how much of the gap to non-private training is the shift from the training
        # views (avatar on fill, room with a hole) to full test videos.
        for view in ("public", "two_view"):
            view_logits = evaluation.predict(
                apply_fn, state.params, test_ds, num_clips=config.input.eval_clips,
                batch_size=config.physical_batch_size, view=view,
                patch_stride=tuple(model.patch_stride), fill_value=config.fill_value,
            )
            m = evaluation.accuracy_metrics(view_logits, test_ds.labels, test_ds.num_classes)
            view_metrics[view] = {k: m[k] for k in ("top1", "top5", "mean_class_accuracy")}
    release(steps)  # the final parameters and report
    privacy = accounting.privacy_report(
        mode=config.mode, ledger=ledger, delta=config.privacy.delta, num_examples=n,
        adjacency=config.privacy.adjacency, sampling=scheme,
        randomness=config.privacy.randomness,
    )
    run = report.RunReport(
        config=config.to_dict(), privacy=privacy.to_dict(), privacy_markdown=privacy.to_markdown(),
        metrics=metrics, class_names=list(test_ds.class_names), history=history,
        train_class_counts=(None if config.mode == "dp"  # labels are private in dp mode
                            else np.bincount(train_ds.labels, minlength=train_ds.num_classes)
                            .tolist()),
        timing={"train_seconds": train_seconds, "total_seconds": time.time() - t_start,
                "steps": steps},
        parameters={"trainable": num_trainable, "total": num_total},
        view_metrics=view_metrics,
    )
    if primary:
        report.write(run, workdir)
        plots.training_curve(history, os.path.join(workdir, "training_curve.png"),
                             title=f"{config.mode} on {config.input.dataset}")
    print(f"Test top-1 {metrics['top1']:.4f} | ε = {privacy.epsilon_pld} (PLD), "
          f"{privacy.epsilon_rdp} (RDP) at δ = {config.privacy.delta} | report: {workdir}")
    return json.loads(json.dumps(run.to_dict()))


def public_metrics(metrics: dict[str, Any], config: ml_collections.ConfigDict) -> dict[str, float]:
    """Metrics safe to print: private-data metrics only when the user opted in (they are not DP)."""
    row = {}
    if config.mode != "dp":
        name = "loss" if config.mode == "nonprivate" else "public_loss"
        row[name] = float(metrics["public/loss"])
    if config.log_private_metrics and config.mode != "nonprivate":
        row["private_loss(non-DP)"] = float(metrics["private/loss"])
        row["clipped(non-DP)"] = float(metrics["private/clipped_fraction"])
    return row


def main(argv):
    del argv
    f = flags.FLAGS
    if f.cpu_devices:
        jax.config.update("jax_num_cpu_devices", f.cpu_devices)
    if f.distributed:
        parallel.initialize_distributed(
            coordinator_address=f.coordinator_address, num_processes=f.num_processes,
            process_id=f.process_id, cpu_collectives="gloo" if f.cpu_devices else "",
        )
    config = flags.FLAGS.config
    workdir = flags.FLAGS.workdir or os.path.join("workdir", config.mode)
    logging.set_verbosity(logging.WARNING)
    enable_compilation_cache(config.get("compilation_cache_dir", ""))
    train_and_evaluate(config, workdir)


def enable_compilation_cache(path: str) -> None:
    """Persist compiled XLA programs under ``path`` (no-op for ""). Runs that differ only in
    σ, ε, learning rate or seed share their expensive accumulation programs."""
    if path:
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


if __name__ == "__main__":
    # Flags are defined only when run as a script, so that sweep.py and tests can import this file.
    config_flags.DEFINE_config_file(
        "config", os.path.join(os.path.dirname(__file__), "configs", "default.py"),
        "Training configuration (a configs/*.py file).",
    )
    flags.DEFINE_string("workdir", None, "Output directory (default: ./workdir/<mode>).")
    flags.DEFINE_bool("distributed", False, "Multi-host run: call jax.distributed.initialize.")
    flags.DEFINE_string("coordinator_address", "", "host:port of process 0 (with --distributed).")
    flags.DEFINE_integer("num_processes", 1, "Number of processes (with --distributed).")
    flags.DEFINE_integer("process_id", 0, "This process's index (with --distributed).")
    flags.DEFINE_integer("cpu_devices", 0, "Number of host CPU devices (testing; 0 = default); "
                         "with --distributed it also selects gloo CPU collectives.")
    app.run(main)
