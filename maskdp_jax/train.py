r"""Train a video classifier with MaskDP, DP-SGD or plain SGD, then evaluate and report privacy.

    python train.py                                   # configs/default.py: MaskDP, ε = 1
    python train.py --config=configs/default.py:dp    # DP-SGD on the whole video (its tuning)
    python train.py --config=configs/default.py --workdir=/tmp/run --config.seed=1
    python -m maskdp_jax.train ...                    # the same command, installed anywhere

One file a researcher can read top to bottom (big_vision style). :func:`train_and_evaluate` is a
sequence of sections, each a call: config -> data -> privacy plan (:mod:`maskdp_jax.core.plan`, σ
calibrated once) -> privacy guard (:mod:`maskdp_jax.run.guard`: resume checks, journal, budget,
before the model is built) -> model, optimiser, step -> training loop (host-side Poisson sampling ->
physical batches -> jitted accumulate / noise / update; every metric row and checkpoint leaves
through the guard) -> evaluation on the held-out split -> a JSON and a Markdown run report with
the privacy statement.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from typing import Any

import jax
import ml_collections
import numpy as np
import optax
from absl import flags, logging
from tqdm import tqdm

import maskdp_jax as mdp
from maskdp_jax import configs, data
from maskdp_jax.core import parallel, per_pass, sampling
from maskdp_jax.reporting import plots, run_report
from maskdp_jax.reporting import privacy as privacy_lib
from maskdp_jax.run import command, evaluation, features, views
from maskdp_jax.run import config as run_config
from maskdp_jax.run import datasets as run_datasets
from maskdp_jax.run import metrics as metrics_lib
from maskdp_jax.run import model as run_model
from maskdp_jax.run.guard import PrivacyGuard


# ----------------------------------------------------------------------------------------------
# Model and optimiser
# ----------------------------------------------------------------------------------------------
def build_model(config: ml_collections.ConfigDict, *, num_classes: int) -> run_model.RunModel:
    """The model of ``config.model`` (:func:`maskdp_jax.run.model.build`, which the audits use too),
    with its parameter counts printed. The initial values derive from the public ``config.seed``."""
    built = run_model.build(config.model, num_classes=num_classes, seed=config.seed,
                            compute=config.compute)
    counts = built.counts()
    print(f"Model {config.model.name}: {counts['trainable']:,} trainable of {counts['total']:,} "
          f"parameters (strategy {config.model.finetune!r}).")
    return built


def build_optimizer(config: ml_collections.ConfigDict, *, steps: int, steps_per_epoch: float):
    """The optax optimiser of ``config.optimizer``: SGD (momentum optional) or Adam, on a linear
    warm-up then cosine-decay schedule over ``steps``, with optional weight decay (added to the
    gradient before the optimiser). With ``optimizer.private_learning_rate``
    (:func:`maskdp_jax.run.config.per_pass`):
    one such optimiser per pass (:func:`maskdp_jax.core.per_pass.per_pass`), the private one at
    that peak learning rate and without the weight decay, which the public one applies once."""
    o = config.optimizer

    def one(learning_rate: float, weight_decay: float):
        warmup = min(steps - 1, round(o.warmup_epochs * steps_per_epoch))
        schedule = optax.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=learning_rate, warmup_steps=max(warmup, 0),
            decay_steps=steps, end_value=0.0,
        )
        if o.name == "sgd":
            tx = optax.sgd(schedule, momentum=o.momentum or None)
        elif o.name == "adam":
            # Any optimiser of the noised sum (or of public gradients) is post-processing.
            tx = optax.adam(schedule)
        else:
            raise ValueError(f"optimizer.name must be 'sgd' or 'adam'; got {o.name!r}.")
        if weight_decay:
            tx = optax.chain(optax.add_decayed_weights(weight_decay), tx)
        return tx

    if not run_config.per_pass(config):
        return one(o.learning_rate, o.weight_decay)
    return per_pass.per_pass(one(o.learning_rate, o.weight_decay),
                             one(o.private_learning_rate, 0.0))


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------
def data_parallel_mesh(config: ml_collections.ConfigDict):
    """A data mesh over every device of every process when there is more than one, else None."""
    if jax.device_count() == 1:
        return None
    mesh = parallel.make_mesh()
    parallel.check_divisible(config.physical_batch_size, mesh)
    print(f"Data parallel over {mesh.size} devices ({jax.process_count()} process(es)).")
    return mesh


def load_logical_batch(dataset: data.Dataset, batch: mdp.LogicalBatch, *,
                       config: ml_collections.ConfigDict, step: int, mesh=None):
    """Physical batches of one logical step. Clip offsets are seeded per step.

    The offsets derive from the public ``config.seed`` also in secret mode: they are not privacy
    noise (drawn per batch row, independently of the data; see :mod:`maskdp_jax.core.randomness`).

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
        for j, (idx, weight) in enumerate(mdp.physical_batches(
            indices, physical_batch_size=p
        )):
            b = dataset.get_batch(
                idx[rows], num_clips=config.input.clips_per_video,
                seed=[config.seed, step, stream, j, *block], normalize=False,
            )  # uint8 pixels: the step normalises them on the device
            b["weight"] = weight[rows]
            check_finite(b, idx[rows], name=dataset.name)
            out.append(b if mesh is None else parallel.global_batch(b, mesh, p))
        return out

    return mdp.LogicalBatchData(
        public=cut(batch.public, sampling.PUBLIC_STREAM),
        private=cut(batch.private, sampling.PRIVATE_STREAM),
    )


def check_finite(batch: dict, indices: np.ndarray, *, name: str) -> None:
    """Refuse a batch whose real rows hold NaN or inf pixels: one such example would turn the
    clipped sum (and with it the update) into NaN, silently. Padding rows (weight 0) may hold
    anything; the step ignores them. uint8 pixels are finite by type, and their normalisation
    cannot make them infinite (:class:`maskdp_jax.data.clips.PixelNorm` refuses a zero std when
    made).

    Raises:
      ValueError: naming the dataset and the video indices.
    """
    bad = np.zeros(len(batch["label"]), bool)
    for key in ("video", "public", "private"):  # pixels, or the feature cache's features
        video = batch.get(key)
        if video is not None and np.issubdtype(video.dtype, np.floating):
            bad |= ~np.isfinite(video.reshape(len(video), -1)).all(axis=1)
    bad &= batch["weight"] > 0
    if bad.any():
        raise ValueError(
            f"{name}: video(s) {sorted({int(i) for i in np.asarray(indices)[bad]})[:10]} hold "
            "non-finite pixel values (NaN or inf) after loading; one such video would make the "
            "update NaN. Fix the source data or its normalisation (std = 0?)."
        )


def load_data(config: ml_collections.ConfigDict):
    """``(train, test)`` :class:`maskdp_jax.data.Dataset` splits, refused early if they cannot serve
    the mode (no masks for ``maskdp``) or the batch size (B >= N).

    Where masks are used (``maskdp``, one-view training) every training mask is read once here,
    before anything is written: a malformed mask file is refused now, not steps into the run.
    For ``maskdp``, videos with no private or no public cells are reported (what DP then means
    for them).
    """
    train_ds, test_ds = run_datasets.get_datasets(config.input, mode=config.mode,
                                                  view=config.view)
    if mdp.Mode(config.mode).uses_views and not train_ds.has_masks:
        raise ValueError(
            f"mode {config.mode!r} needs per-video masks, but dataset {train_ds.name!r} has "
            "none. Provide mask files (docs/guides/own_videos.md) or run "
            "--config.mode=dp / nonprivate."
        )
    if config.view in views.CELL_VIEWS and not train_ds.has_masks:
        raise ValueError(
            f"--config.view={config.view!r} needs per-video masks, but dataset "
            f"{train_ds.name!r} has none. Provide mask files (docs/guides/own_videos.md) "
            "or train on the full view."
        )
    run_config.check_dataset_size(config, num_examples=len(train_ds))
    if mdp.Mode(config.mode).uses_views:
        stride = run_model.patch_stride(config.model.name)
        mdp.warn_degenerate_masks(
            data.mask_chunks(train_ds), source=train_ds.name, patch_stride=stride,
            explain_no_public=lambda: run_datasets.explain_lost_public_regions(
                train_ds, patch_stride=stride))
    elif config.view in views.CELL_VIEWS:
        data.check_masks(train_ds)
    return train_ds, test_ds


def make_views(config: ml_collections.ConfigDict, *, train_ds: data.Dataset,
               test_ds: data.Dataset, tokens: mdp.Tokenizer, clip_shape):
    """``(train_ds, test_ds)`` as the steps and the evaluation read them: the one-view context
    ablation (``config.view``) and the feature masks of Gu & Chen 2024 (``config.feature_masks``),
    both made here in the run layer (:mod:`maskdp_jax.run.views`) so that the DP core receives its
    views made.
    """
    train_ds, test_ds = views.select_view(train_ds, test_ds, tokens=tokens, view=config.view)
    if mdp.Mode(config.mode).uses_views:  # the modes whose steps (and diagnostics) make views
        train_ds, test_ds = (views.public_fill(d, fill=config.hidden_fill,
                                               input_config=config.input)
                             for d in (train_ds, test_ds))
    if config.feature_masks:
        train_ds, test_ds = views.mask_features(
            train_ds, test_ds, path=config.feature_masks, version=config.feature_mask_version,
            views=config.feature_mask_views, tokens=tokens, clip_shape=clip_shape)
    return train_ds, test_ds


def step_inputs(config: ml_collections.ConfigDict, *, built: run_model.RunModel,
                train_ds: data.Dataset, tokens: mdp.Tokenizer, workdir: str):
    """``(dataset, apply_fn, views)`` the training steps read: the clips, the whole model and
    the tokeniser's two views of the pixels, or, with ``config.feature_cache.enabled``, the
    frozen prefix's cached features, the trainable suffix and the cached views
    (:mod:`maskdp_jax.run.features`; the same update, tested)."""
    if not config.feature_cache.enabled:
        return train_ds, built.apply_fn, mdp.PixelViews(tokens)
    cache, cut = features.open_or_build(
        config, train_ds=train_ds, model=built.module, params=built.params, tokens=tokens,
        trainable_mask=built.trainable_mask, workdir=workdir)
    return cache, built.apply_from(cut), features.cached_views


class Preempted(Exception):  # noqa: N818 (a stop, not an error)
    """The run checkpointed and stopped on SIGTERM at ``step``; the same command resumes it."""

    def __init__(self, step: int):
        super().__init__(f"stopped at step {step} on SIGTERM")
        self.step = step


# ----------------------------------------------------------------------------------------------
# Training loop
# ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def sigterm_flag():
    """Record SIGTERM (preemption) in the yielded list instead of dying, while the block runs.

    Installed before the model is built, so a SIGTERM during set-up or the first compilation is
    honoured at the next safe point: before the first step (checkpoint and stop at once), or,
    when it arrives while the first step compiles (XLA compilation cannot be interrupted),
    once that step has run.
    """
    flag: list[bool] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: flag.append(True))
    try:
        yield flag
    finally:
        signal.signal(signal.SIGTERM, previous)


def train_loop(config: ml_collections.ConfigDict, *, guard: PrivacyGuard, state: mdp.TrainState,
               train_step, batch_at, workdir: str, stop: list, mesh=None,
               timing: dict | None = None):
    """Run the planned steps from ``state.step``; ``(state, history, preempted)``.

    ``timing`` (a dict, filled in): how long the loop waited for its batches. The loader
    prepares ``input.prefetch`` steps ahead in threads while the steps run; the loop keeps at
    most one step in flight besides the one it dispatches (it waits for the step before the last
    to finish), so the seconds it spends blocked on the next batch are seconds the device had
    at most that one step to work on. ``data_wait_seconds`` counts them over the steps after the
    first (which compiles), ``timed_seconds`` is those steps' wall time, ``timed_steps`` their
    number.

    Every step runs on the guard's mechanism (its batches drawn by ``batch_at`` from
    :meth:`~maskdp_jax.core.mechanism.Mechanism.batch_at`, which refuses a step past the plan; its
    counter, ``state.privacy.step``, is the ledger); every metric row and checkpoint leaves
    through the guard (journal first). On SIGTERM (preemption; ``stop`` is the flag of
    :func:`sigterm_flag`) the current step is finished and checkpointed, and the loop returns
    with ``preempted=True``; a SIGTERM that came before the first step stops before it.
    """
    plan = guard.plan
    start = int(state.step)
    if mesh is not None:
        state = parallel.replicate(state, mesh)
    primary = jax.process_index() == 0  # process 0 alone writes metrics into the shared workdir
    every = config.checkpoint.every_steps
    history = []
    # Only process 0 shows progress: a metric row must not leave before it has journaled.
    with (tqdm(total=plan.steps, initial=start, desc=f"train[{plan.mode.value}]",
               dynamic_ncols=True, disable=not primary) as bar,
          (metrics_lib.MetricWriter(workdir, tensorboard=config.tensorboard,
                                    resume_step=start) if primary
           else contextlib.nullcontext()) as writer,
          data.StepPrefetcher(batch_at, depth=config.input.prefetch,
                              num_steps=plan.steps) as batches):
        if writer is not None:  # a resumed run's history starts at step 1, not at `start`
            history = list(writer.history)
        if parallel.any_process(bool(stop)):  # SIGTERM during set-up
            guard.save(parallel.to_host(state))
            print(f"SIGTERM before step {start + 1}: checkpointed step {start} of "
                  f"{plan.steps} in {guard.checkpoint_dir}; run the same command again to "
                  "resume.")
            return state, history, True
        waited, clock, previous = 0.0, None, None
        for step in range(start, plan.steps):
            t = time.perf_counter()
            batch = batches(step)
            if clock is not None:
                waited += time.perf_counter() - t
            state, metrics = train_step(state, batch)
            if previous is not None:  # one step in flight: a wait for data is the step's
                jax.block_until_ready(previous)
            previous = metrics
            if (step + 1) % config.log_every_steps == 0 or step + 1 == plan.steps:
                row = public_metrics(jax.device_get(metrics), config)
                row["epsilon"] = guard.epsilon_spent(state)
                row["steps_per_second"] = bar.format_dict["rate"] or 0.0
                history.append({"step": step + 1, **row})

                def emit(done=step + 1, row=row):
                    if writer is not None:
                        writer.write(done, row)
                    bar.set_postfix({
                        k: privacy_lib.format_epsilon(v, plan.accountant) if k == "epsilon"
                        else f"{v:.3g}" for k, v in row.items()})

                guard.release(state, emit)
            bar.update(1)
            if step == start:  # compiled now: the rate and estimate start from here
                restart_clock(bar, done=step + 1)
                jax.block_until_ready(metrics)
                clock = time.perf_counter()
            # Hosts may see SIGTERM at different steps and the save is a collective: all
            # processes agree on the flag every step (no communication with one process).
            if parallel.any_process(bool(stop)):
                guard.save(parallel.to_host(state))
                print(f"SIGTERM: checkpointed step {step + 1} of {plan.steps} in "
                      f"{guard.checkpoint_dir}; run the same command again to resume.")
                return state, history, True
            if every and ((step + 1) % every == 0 or step + 1 == plan.steps):
                guard.save(parallel.to_host(state))
        if timing is not None and clock is not None:
            jax.block_until_ready(state)
            timing.update(data_wait_seconds=waited, timed_steps=plan.steps - start - 1,
                          timed_seconds=time.perf_counter() - clock)
    return parallel.to_host(state), history, False


def restart_clock(bar: tqdm, *, done: int) -> None:
    """Start ``bar``'s clock again with ``done`` steps counted, so that its rate and time
    estimate leave out what came before (the first step's compilation, tens of seconds on a CPU,
    would otherwise inflate the estimate for the rest of a short run)."""
    bar.reset()
    bar.n = bar.last_print_n = bar.initial = done
    bar.refresh()


def public_metrics(metrics: dict[str, Any], config: ml_collections.ConfigDict) -> dict[str, float]:
    """Metrics safe to print: private-data metrics only when the user opted in (they are not DP)."""
    mode = mdp.Mode(config.mode)
    row = {}
    if mode.has_public_pass:
        name = "public_loss" if mode.uses_views else "loss"
        row[name] = float(metrics["public/loss"])
    if config.log_private_metrics and mode.has_private_pass:
        row["private_loss(non-DP)"] = float(metrics["private/loss"])
        row["clipped(non-DP)"] = float(metrics["private/clipped_fraction"])
    return row


# ----------------------------------------------------------------------------------------------
# Evaluation and report
# ----------------------------------------------------------------------------------------------
def evaluate(config: ml_collections.ConfigDict, *, apply_fn, params, test_ds, plan: mdp.PrivacyPlan,
             tokens: mdp.Tokenizer) -> tuple[dict, dict]:
    """``(metrics, view_metrics)`` on the held-out split (full videos; for ``maskdp`` also the
    test videos' public view and both views, a diagnostic of the view -> full-video shift; the
    same for ``public_only``, MaskDP's control)."""
    kw = dict(num_clips=config.input.eval_clips, batch_size=config.physical_batch_size)
    logits = evaluation.predict(apply_fn, params, test_ds, **kw)
    metrics = evaluation.accuracy_metrics(logits, test_ds.labels, test_ds.num_classes)
    view_metrics = {}
    if plan.mode.uses_views:
        for view in ("public", "two_view"):
            view_logits = evaluation.predict(apply_fn, params, test_ds, view=view, tokens=tokens,
                                             **kw)
            m = evaluation.accuracy_metrics(view_logits, test_ds.labels, test_ds.num_classes)
            view_metrics[view] = {k: m[k] for k in ("top1", "top5", "mean_class_accuracy")}
    return metrics, view_metrics


#: What a run on the source videos says (``input.public_part = "source"``).
SOURCE_VIDEOS = (
    "WARNING: trained on the source videos, not anonymised ones (input.public_part = 'source', "
    "the papers' 'MaskDP on non-anonymised data'): the masks' public region is the real person, "
    "trained without protection; only the private region is covered by this guarantee.")


def build_report(config: ml_collections.ConfigDict, *, guard: PrivacyGuard,
                 ledger: mdp.Ledger, train_ds, test_ds, metrics, view_metrics, history, timing,
                 parameters, split: str | None = None) -> run_report.RunReport:
    """The run report: the accuracy, the privacy statement of the ``ledger`` (the steps the
    mechanism charged) under the guard's plan."""
    plan = guard.plan
    privacy = privacy_lib.privacy_report(plan=plan, ledger=ledger,
                                         randomness=guard.randomness.mode)
    if config.input.get("public_part") == "source":
        privacy = dataclasses.replace(privacy, statement=f"{privacy.statement} {SOURCE_VIDEOS}")
    counts = None  # labels are private in dp mode: exact class counts are not DP
    if plan.mode is not mdp.Mode.DP:
        counts = np.bincount(train_ds.labels, minlength=train_ds.num_classes).tolist()
    return run_report.RunReport(
        config=config.to_dict(), privacy=privacy.to_dict(), privacy_markdown=privacy.to_markdown(),
        metrics=metrics, class_names=list(test_ds.class_names), history=history,
        train_class_counts=counts, timing=timing, parameters=parameters,
        view_metrics=view_metrics, split=split,
    )


# ----------------------------------------------------------------------------------------------
# Train and evaluate
# ----------------------------------------------------------------------------------------------
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
    """Train, evaluate, write report.json / report.md into ``workdir``; return the report.

    Every check of the inputs (config, data, privacy plan, a checkpoint to resume, the privacy
    journal, the budget) runs before the model is built, so bad input fails in seconds.

    Raises:
      Preempted: SIGTERM arrived; the run checkpointed and stopped (run it again to resume).
    """
    t_start = time.time()
    # --- Config and data ---------------------------------------------------------------------
    run_config.check_config(config, num_devices=jax.device_count())
    finished = finished_run(workdir, config)
    if finished is not None:
        return finished
    train_ds, test_ds = load_data(config)

    # --- Privacy plan: q, steps, σ (calibrated once) -----------------------------------------
    plan = run_config.privacy_plan(config, num_examples=len(train_ds))
    print(plan.summary())
    os.makedirs(workdir, exist_ok=True)  # every input is checked: the first write

    # --- Guard: resume checks, journal, budget (before the model is built) -------------------
    with (PrivacyGuard(workdir, plan=plan, config=config.to_dict(),
                       randomness=config.privacy.randomness, seed=config.seed,
                       keep=config.checkpoint.keep) as guard,
          sigterm_flag() as stop):
        split = run_datasets.describe_split(train_ds, test_ds, workdir)
        if split:
            print(f"Held-out split: {split}.")
        # --- Model, views, optimiser, step ---------------------------------------------------
        built = build_model(config, num_classes=train_ds.num_classes)
        tokens = built.tokenizer(fill_value=config.fill_value,
                                 fill_texture=views.fill_texture(config.hidden_fill))
        train_ds, test_ds = make_views(config, train_ds=train_ds, test_ds=test_ds,
                                       tokens=tokens, clip_shape=built.input_shape[:3])
        step_ds, step_apply, step_views = step_inputs(config, built=built, train_ds=train_ds,
                                                      tokens=tokens, workdir=workdir)
        tx = build_optimizer(config, steps=plan.steps,
                             steps_per_epoch=plan.num_examples / plan.batch_size)
        mesh, mechanism = data_parallel_mesh(config), with_private_part(guard.mechanism, built,
                                                                         config)
        train_step = make_step(config, apply_fn=step_apply, views=step_views, tx=tx,
                               mechanism=mechanism, mesh=mesh, pixel_norm=step_ds.pixel_norm)
        state = initial_state(guard, built=built, tx=tx, mechanism=mechanism)

        # --- Train ---------------------------------------------------------------------------
        def batch_at(step):  # a pure function of the step, so it can be prepared ahead
            return load_logical_batch(step_ds, mechanism.batch_at(step), config=config,
                                      step=step, mesh=mesh)

        t_train, data_timing = time.time(), {}
        state, history, preempted = train_loop(config, guard=guard, state=state, mesh=mesh,
                                               train_step=train_step, batch_at=batch_at,
                                               workdir=workdir, stop=stop, timing=data_timing)
        if preempted:
            raise Preempted(int(state.step))
        train_seconds = time.time() - t_train

        # --- Evaluate and report -------------------------------------------------------------
        metrics, view_metrics = evaluate(config, apply_fn=built.apply_fn, params=state.params,
                                         test_ds=test_ds, plan=plan, tokens=tokens)
        run = build_report(config, guard=guard, ledger=guard.ledger(state), train_ds=train_ds,
                           test_ds=test_ds,
                           metrics=metrics, view_metrics=view_metrics, history=history,
                           parameters=built.counts(), split=split,
                           timing={"train_seconds": train_seconds, "steps": plan.steps,
                                   "total_seconds": time.time() - t_start, **data_timing})
        # The trained model, the report and the curve leave only once the journal covers the
        # last step (the guard's rule).
        guard.release(state, lambda: write_outputs(
            run, workdir, config, params=state.params, class_names=list(test_ds.class_names),
            pixel_norm=test_ds.pixel_norm))
    announce(run, config, plan=plan, workdir=workdir, num_classes=test_ds.num_classes)
    return json.loads(json.dumps(run.to_dict()))


def initial_state(guard: PrivacyGuard, *, built: run_model.RunModel, tx, mechanism):
    """The state the run starts from: the last checkpoint's (the guard's resume checks) or a
    fresh one from the built model."""
    state, resumed = guard.resume(
        mdp.TrainState.create(trainable=built.trainable, frozen=built.frozen, tx=tx,
                              mechanism=mechanism))
    if resumed:
        print(f"Resumed from {guard.checkpoint_dir} at step {int(state.step)} of "
              f"{mechanism.plan.steps}.")
    return state


def with_private_part(mechanism: mdp.Mechanism, built: run_model.RunModel,
                      config: ml_collections.ConfigDict) -> mdp.Mechanism:
    """The guard's mechanism, its private pass over the part of the trainable parameters that
    ``privacy.private_finetune`` names (all of them when it is empty), its public sum weighted
    by ``privacy.public_weight``, each pass's part handed over apart when each pass has an
    optimiser (``optimizer.private_learning_rate``)."""
    return mechanism.with_private_mask(built.private_mask(
        config.privacy.private_finetune, num_last_blocks=config.model.num_last_blocks)
    ).with_public_weight(config.privacy.public_weight).with_per_pass(run_config.per_pass(config))


def make_step(config: ml_collections.ConfigDict, *, apply_fn, views, tx, mechanism, mesh,
              pixel_norm):
    """The run's ``train_step(state, batch)`` on ``mechanism``, with the config's compute
    settings (micro-batches, the per-example gradient's rules)."""
    return mdp.make_train_step(
        apply_fn=apply_fn, views=views, tx=tx, mechanism=mechanism, mesh=mesh,
        microbatch_size=config.compute.microbatch_size or None, pixel_norm=pixel_norm,
        ghost_rules=run_model.per_example_rules(
            config.compute, config.model, private_part=config.privacy.private_finetune))


def announce(run: run_report.RunReport, config: ml_collections.ConfigDict, *, plan: mdp.PrivacyPlan,
             workdir: str, num_classes: int) -> None:
    """The run's last lines: its accuracy (full video and public view), ε and where its outputs
    are."""
    eps = run.privacy[f"epsilon_{plan.accountant}"]
    accuracy = accuracy_line(run.metrics, run.view_metrics, num_classes=num_classes,
                             split=split_name(config))
    wait = run_report.data_wait_note(run.timing)
    if wait:
        print(f"Training: {wait[2:]}.")  # e.g. "waiting for data 1.2 s of the 30.0 s ..."
    print(f"{accuracy} | ε = "
          f"{privacy_lib.format_epsilon(eps, plan.accountant)} at δ = {plan.delta:g} "
          f"(both accountants in the report)\n"
          f"report: {os.path.join(workdir, 'report.md')} | trained model: "
          f"{os.path.join(workdir, MODEL_DIR)} (maskdp_jax.run.model.load_trained)")


def split_name(config: ml_collections.ConfigDict) -> str:
    """``"Test"`` or ``"Validation"``: what the run is evaluated on (``input.eval_split``)."""
    return config.input.get("eval_split", "test").capitalize()


def accuracy_line(metrics: dict, view_metrics: dict, *, num_classes: int,
                  split: str = "Test") -> str:
    """The console's accuracy: full-video top-1 (what a run is judged on) with chance named, and
    for ``maskdp`` the public-view diagnostic beside it (what the noise-free pass learned).

    >>> accuracy_line({"top1": 0.5}, {"public": {"top1": 0.7}}, num_classes=8)
    'Test top-1 50.0 % on full videos (chance 12.5 %); public view 70.0 % (diagnostic)'
    """
    line = (f"{split} top-1 {100 * metrics['top1']:.1f} % on full videos "
            f"(chance {100 / num_classes:.1f} %)")
    if "public" in view_metrics:
        line += f"; public view {100 * view_metrics['public']['top1']:.1f} % (diagnostic)"
    return line


#: Where a run writes its trained model in its workdir (outside ``private/``: it is the release).
MODEL_DIR = "model"


def summary_scalars(report: dict[str, Any]) -> dict[str, float]:
    """The test metrics of a run's report as TensorBoard scalars: ``test/top1``, ...; the view
    diagnostics as ``test_<view>_view/top1``."""
    keys = ("top1", "top5", "mean_class_accuracy")
    scalars = {f"test/{k}": report["metrics"][k] for k in keys if k in report["metrics"]}
    for view, found in report.get("view_metrics", {}).items():
        scalars.update({f"test_{view}_view/{k}": found[k] for k in keys if k in found})
    return scalars


def summary_hparams(report: dict[str, Any]) -> dict[str, bool | int | float | str]:
    """The run's configuration and its privacy outcome (σ, ε spent) as TensorBoard hparams."""
    privacy = report["privacy"]
    hparams = metrics_lib.flat_hparams(report["config"])
    for key in ("noise_multiplier", f"epsilon_{report['config']['privacy']['accountant']}"):
        if key in privacy:
            value = privacy[key]
            hparams[f"outcome.{key}"] = float(value) if isinstance(value, str) else value
    return hparams


def finished_run(workdir: str, config: ml_collections.ConfigDict) -> dict[str, Any] | None:
    """The report of the finished run in ``workdir`` (None when there is none), said in one
    line: a rerun trains nothing, reports nothing again and writes nothing.

    A run is finished once its ``report.json`` is written (the last output, released only after
    the journal covers the last step), so the same command run again, e.g. requeued by a
    scheduler after the run ended, returns at once. Training again needs a new ``--workdir``.
    """
    report = run_report.read(workdir)
    if report is None:
        return None
    same = report.get("config") == json.loads(json.dumps(config.to_dict()))
    top1 = report.get("metrics", {}).get("top1")
    print(f"{workdir} holds a finished {report.get('privacy', {}).get('mode', '')} run "
          f"({report.get('timing', {}).get('steps')} steps"
          + (f", test top-1 {100 * top1:.1f} %" if top1 is not None else "")
          + ("" if same else ", with another config than this one")
          + f"): nothing to train. Its report: {os.path.join(workdir, 'report.md')}. To train "
          "again, give a new --workdir=DIR (or delete this one).")
    return report


def write_outputs(run: run_report.RunReport, workdir: str, config, *, params,
                  class_names: list[str], pixel_norm) -> None:
    """The trained model (``<workdir>/model``), report.json, report.md and the training curve
    (process 0 alone writes them)."""
    if jax.process_index() != 0:
        return
    published = run.to_dict()  # JSON-safe: ε = ∞ as "inf"
    run_model.save_trained(
        os.path.join(workdir, MODEL_DIR), params, model_config=config.model,
        num_classes=len(class_names), class_names=class_names, pixel_norm=pixel_norm,
        about={"mode": config.mode, "steps": run.timing["steps"],
               "privacy": published["privacy"], "test_metrics": published["metrics"]})
    run_report.write(run, workdir)
    if config.tensorboard:
        metrics_lib.write_summary(workdir, step=run.timing["steps"],
                                  scalars=summary_scalars(published),
                                  hparams=summary_hparams(published))
    plots.training_curve(run.history, os.path.join(workdir, "training_curve.png"),
                         title=f"{config.mode} on {config.input.dataset}",
                         accountant=config.privacy.accountant)


# Exit status of a run that checkpointed and stopped on SIGTERM (preemption): EX_TEMPFAIL of
# sysexits.h, "try again later". Not 0, so that `&&` chains and schedulers do not read a stopped
# run as finished; running the same command again resumes it (BUILD.md: requeue on SLURM).
PREEMPTED_EXIT_CODE = 75


DEFAULT_CONFIG = os.path.join(os.path.dirname(configs.__file__), "default.py")


def define_flags(fv: flags.FlagValues, argv) -> None:
    """train.py's flags (on ``fv``); ``--config`` and its keys are checked first."""
    command.config_flag(fv, argv, default=DEFAULT_CONFIG,
                        help="Training configuration (a configs/*.py file).",
                        sections=("mode", "input", "model", "privacy"),
                        kind="a training config (configs/*.py with get_config())")
    flags.DEFINE_string("workdir", None, "Output directory (default: ./workdir/<mode>).",
                        flag_values=fv)
    flags.DEFINE_bool("distributed", False, "Multi-host run: call jax.distributed.initialize.",
                      flag_values=fv)
    flags.DEFINE_string("coordinator_address", "", "host:port of process 0 (with --distributed).",
                        flag_values=fv)
    flags.DEFINE_integer("num_processes", 1, "Number of processes (with --distributed).",
                         flag_values=fv)
    flags.DEFINE_integer("process_id", 0, "This process's index (with --distributed).",
                         flag_values=fv)
    flags.DEFINE_integer("cpu_devices", 0, "Number of host CPU devices (testing; 0 = default); "
                         "with --distributed it also selects gloo CPU collectives.",
                         flag_values=fv)


def run_command(f: flags.FlagValues) -> int:
    """Train and evaluate as the parsed flags ``f`` say; the exit status (75: preempted)."""
    if f.cpu_devices:
        jax.config.update("jax_num_cpu_devices", f.cpu_devices)
    if f.distributed:
        parallel.initialize_distributed(
            coordinator_address=f.coordinator_address, num_processes=f.num_processes,
            process_id=f.process_id, cpu_collectives="gloo" if f.cpu_devices else "",
        )
    config = f.config
    workdir = f.workdir or os.path.join("workdir", config.mode)
    logging.set_verbosity(logging.WARNING)
    enable_compilation_cache(config.compilation_cache_dir)
    try:
        train_and_evaluate(config, workdir)
    except Preempted as e:
        print(f"Stopped at step {e.step} on SIGTERM (exit status {PREEMPTED_EXIT_CODE}); "
              "run the same command again to resume.")
        return PREEMPTED_EXIT_CODE
    return 0


def cli(argv) -> int:
    """``python train.py ...`` as a function of the command line: its exit status (0 done,
    2 bad input with ``error: <reason>`` on stderr and nothing written, 75 preempted)."""
    return command.run(argv, define=define_flags, work=run_command, about=ABOUT)


ABOUT = command.About(
    usage="python train.py",
    summary="Train a video classifier with MaskDP, DP-SGD or plain SGD, evaluate it on the "
            "held-out split, and write the run report and the trained model into --workdir. "
            "Installed, the same command is python -m maskdp_jax.train.",
    keys="docs/guides/training.md; every key and its default: configs/default.py")


def enable_compilation_cache(path: str) -> None:
    """Persist compiled XLA programs under ``path`` (no-op for ""). Runs that differ only in
    σ, ε, learning rate or seed share their expensive accumulation programs. Programs that
    compile faster than ``jax_persistent_cache_min_compile_time_secs`` (JAX's default 1 s, or
    the environment's ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``) are not stored."""
    if path:
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser(path))


if __name__ == "__main__":
    sys.exit(cli(sys.argv))
