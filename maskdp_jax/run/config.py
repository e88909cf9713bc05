"""A training config, read once: up-front checks, then the typed objects the library takes.

The run layer is where ``ml_collections`` config dicts end: the library below
(:mod:`maskdp_jax`, :mod:`maskdp_jax.accounting`, :mod:`maskdp_jax.models`, :mod:`maskdp_jax.data`'s
sources) takes typed keyword arguments, built here from the config.

``train.train_and_evaluate`` calls :func:`check_config` first (nothing is read, built or written
before it), then :func:`check_dataset_size` once the training split is loaded, so a mistyped
option costs seconds and loses nothing. Each error names the config key (as a
``--config.<key>`` flag) and the accepted values. :func:`privacy_plan` then builds the run's
:class:`~maskdp_jax.core.plan.PrivacyPlan` (which validates the privacy numbers once more, with N
known: δ < 1/N, q < 1) and calibrates σ.

What is checked here is only what the config alone decides. Checks that need the data or the
model live with them: masks from files in :func:`maskdp_jax.data.decode.binarize_mask` (their token
cells in :mod:`maskdp_jax.core.tokenizer`), labels in
:mod:`maskdp_jax.data.labels`, dataset layouts in :mod:`maskdp_jax.data.layouts`, the privacy
numbers in :class:`~maskdp_jax.core.plan.PrivacyPlan` (:mod:`maskdp_jax.accounting.inputs`), the
resume of a checkpoint in :mod:`maskdp_jax.run.guard`.

>>> from maskdp_jax.configs import default
>>> config = default.get_config()
>>> check_config(config)
>>> config.batch_size = 0
>>> check_config(config)
Traceback (most recent call last):
...
ValueError: --config.batch_size must be an integer >= 1; got 0.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import ml_collections

from maskdp_jax import models
from maskdp_jax.accounting import accountant, inputs
from maskdp_jax.core import mechanism, randomness
from maskdp_jax.core.plan import MODES, Mode, PrivacyPlan
from maskdp_jax.data import clips
from maskdp_jax.run import command, views
from maskdp_jax.run import datasets as run_datasets
from maskdp_jax.run import model as run_model

OPTIMIZERS = ("sgd", "adam")


def _fail(key: str, message: str) -> None:
    raise ValueError(f"--config.{key} {message}")


def _choice(key: str, value: Any, choices) -> None:
    if value not in choices:
        _fail(key, f"must be one of {tuple(choices)}; got {value!r}.")


def _integer(key: str, value: Any, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        _fail(key, f"must be an integer >= {minimum}; got {value!r}.")


def _is_real(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


def _real(key: str, value: Any, *, minimum: float, strict: bool) -> None:
    """A finite real ``> minimum`` (``strict``) or ``>= minimum``."""
    ok = (_is_real(value) and math.isfinite(value)
          and (value > minimum if strict else value >= minimum))
    if not ok:
        _fail(key, f"must be a finite number {'>' if strict else '>='} {minimum}; "
                   f"got {value!r}.")


def _clip_shape(config: ml_collections.ConfigDict) -> tuple[int, int, int] | None:
    """``(T, H, W)`` of the training clips, or None when the config does not fix it."""
    i = config.input
    if i.dataset == "synthetic":
        return (i.clip_frames, i.size, i.size)
    if "crop_size" in i:
        return (i.clip_frames, i.crop_size, i.crop_size)
    return None


def check_config(config: ml_collections.ConfigDict, *, num_devices: int = 1) -> None:
    """Refuse a training config that cannot run or would run something else than it says.

    Args:
      config: a ``configs/*.py`` training config (``train.py --config``).
      num_devices: devices the physical batch is split over (the microbatch must divide each
        device's share).

    Raises:
      ValueError: naming the key, the accepted values and the value given.
    """
    _choice("mode", config.mode, MODES)
    _choice("sampling", config.sampling, inputs.SAMPLINGS)
    _choice("input.dataset", config.input.dataset, run_datasets.DATASETS)
    _integer("seed", config.seed, minimum=0)
    _choice("privacy.randomness", config.privacy.randomness, randomness.MODES)
    check_no_moved_keys(config)

    # Model and fine-tuning.
    m = config.model
    _choice("model.name", m.name, sorted(models.PRESETS))
    _choice("model.finetune", m.finetune, models.finetune.STRATEGIES)
    preset = models.PRESETS[m.name]
    if (m.finetune != "full" and m.name in models.PRETRAINED and not m.init_from
            and not m.allow_random_init):
        _fail("model.init_from",
              f"is empty, so model.finetune={m.finetune!r} would freeze a randomly initialised "
              f"{m.name!r} and train only its last layers; give {models.PRETRAINED[m.name]}, "
              "or set --config.model.finetune=full or --config.model.allow_random_init=True to "
              "train from scratch anyway.")
    if m.finetune == "selective":
        blocks = len(preset["blocks"])
        if not 0 <= m.num_last_blocks <= blocks:
            _fail("model.num_last_blocks",
                  f"must be in [0, {blocks}] ({m.name!r} has {blocks} blocks); "
                  f"got {m.num_last_blocks!r}.")
    private = config.privacy.private_finetune
    if private:
        _choice("privacy.private_finetune", private, ("", *models.finetune.STRATEGIES))
        problem = mechanism.private_part_problem(
            config.mode, banded=config.privacy.noise != "independent")
        if problem:
            _fail("privacy.private_finetune", problem)
        if config.compute.per_example == "ghost":
            _fail("privacy.private_finetune", "needs compute.per_example='vmap' (ghost norms "
                  "follow every trainable layer).")
    problem = mechanism.public_weight_problem(config.mode, config.privacy.public_weight)
    if problem:
        _fail("privacy.public_weight", problem)
    clip = _clip_shape(config)
    if clip is not None and tuple(clip) != tuple(preset["input_size"]):
        _fail("model.name",
              f"{m.name!r} is built for clips (T, H, W) = {tuple(preset['input_size'])} but the "
              f"input config gives {tuple(clip)}; change the clip size (input.clip_frames and "
              "input.size / input.crop_size) or the model.")

    # Batches and schedule.
    _integer("batch_size", config.batch_size, minimum=1)
    _integer("physical_batch_size", config.physical_batch_size, minimum=1)
    if config.physical_batch_size % num_devices:
        _fail("physical_batch_size",
              f"must be a multiple of the number of devices ({num_devices}) for data "
              f"parallelism; got {config.physical_batch_size}.")
    _real("num_epochs", config.num_epochs, minimum=0.0, strict=True)
    _integer("log_every_steps", config.log_every_steps, minimum=1)
    _integer("input.clips_per_video", config.input.clips_per_video, minimum=1)
    _integer("input.eval_clips", config.input.eval_clips, minimum=1)
    _choice("input.clip_sampling", config.input.clip_sampling,
            clips.CLIP_SAMPLINGS)
    if config.input.dataset == "folder":
        fraction = config.input.test_fraction
        if not (_is_real(fraction) and 0.0 < fraction < 1.0):
            _fail("input.test_fraction", f"must be in (0, 1); got {fraction!r}.")
        _integer("input.split_seed", config.input.split_seed, minimum=0)
    _choice("view", config.view, views.VIEWS)
    if config.view != "full" and Mode(config.mode) is not Mode.NONPRIVATE:
        _fail("view", f"must be 'full' in mode {config.mode!r}; got {config.view!r}. One-view "
              "training (the context ablation, Schneider et al. 2024a Table 3) is for mode "
              "'nonprivate'; dp trains on the whole video, maskdp on both views and "
              "public_only on the public view.")
    if config.feature_masks:
        _choice("feature_mask_views", config.feature_mask_views, views.HIDE_VIEWS)
        if config.feature_cache.enabled:
            _fail("feature_masks", "cannot be combined with feature_cache.enabled yet: the cache "
                  "stores the frozen prefix's features of unmasked clips. Turn one off.")
    _real("fill_value", config.fill_value, minimum=-math.inf, strict=True)
    _choice("hidden_fill", config.hidden_fill, views.FILLS)
    if config.hidden_fill == "backgrounds":
        if config.input.dataset != "synthetic":
            _fail("hidden_fill", f"'{config.hidden_fill}' draws public backgrounds from the "
                  "embedded dataset's public corpus; a video dataset has no public background "
                  "source here. Use 'texture'.")
        if config.feature_cache.enabled:
            _fail("hidden_fill", "a cached prefix holds features of clips with the fixed "
                  "pattern; turn feature_cache off or use hidden_fill='texture'.")
    _integer("checkpoint.every_steps", config.checkpoint.every_steps, minimum=0)
    _integer("checkpoint.keep", config.checkpoint.keep, minimum=1)

    _check_feature_cache(config)

    o = config.optimizer
    _choice("optimizer.name", o.name, OPTIMIZERS)
    _real("optimizer.learning_rate", o.learning_rate, minimum=0.0, strict=True)
    _real("optimizer.warmup_epochs", o.warmup_epochs, minimum=0.0, strict=False)
    _real("optimizer.weight_decay", o.weight_decay, minimum=0.0, strict=False)
    if per_pass(config):
        _real("optimizer.private_learning_rate", o.private_learning_rate, minimum=0.0,
              strict=True)
        problem = mechanism.per_pass_problem(config.mode, True)
        if problem:
            _fail("optimizer.private_learning_rate", problem)
    if not (_is_real(o.momentum) and 0.0 <= o.momentum < 1.0):
        _fail("optimizer.momentum", f"must be in [0, 1) (0 = plain SGD); got {o.momentum!r}.")

    if not Mode(config.mode).is_private:
        return
    _check_privacy(config, num_devices=num_devices)


def per_pass(config: ml_collections.ConfigDict) -> bool:
    """Whether MaskDP's passes each have an optimiser (``optimizer.private_learning_rate`` set):
    what the check above, the optimiser and the mechanism of a run all follow."""
    return config.optimizer.get("private_learning_rate") is not None


def _check_feature_cache(config: ml_collections.ConfigDict) -> None:
    """Refuse a feature cache that could not serve the run as configured (data/feature_cache.py)."""
    c = config.feature_cache
    if not c.enabled:
        return
    if config.model.finetune == "full":
        _fail("feature_cache.enabled", "needs a frozen prefix, but model.finetune='full' trains "
              "every parameter; use selective, norms, linear or adapters, or turn the cache off.")
    if config.mode == "public_only":
        _fail("feature_cache.enabled", "is not built for mode 'public_only' (the cache of maskdp "
              "holds private-view features, which public_only must never compute); turn the "
              "cache off.")
    _integer("feature_cache.clips_per_video", c.clips_per_video, minimum=1)
    if c.clips_per_video < config.input.clips_per_video:
        _fail("feature_cache.clips_per_video",
              f"must be >= input.clips_per_video ({config.input.clips_per_video}): each step "
              f"draws K distinct cached clips per video; got {c.clips_per_video}.")
    _choice("feature_cache.dtype", c.dtype, ("float32", "bfloat16"))
    _integer("feature_cache.batch_size", c.batch_size, minimum=0)
    fixed = [("input.clip_sampling", config.input.clip_sampling, "uniform",
              "the cache draws K of its G fixed clips"),
             ("view", config.view, "full", "one-view training reads pixels")]
    if config.input.dataset != "synthetic":  # real videos: augmentation and crops
        fixed += [("input.augment", config.input.augment, False,
                   "augmented clips are not a fixed function of the video"),
                  ("input.eval_crops", config.input.eval_crops, 1,
                   "the cache holds the centre crop only")]
    for key, value, fine, why in fixed:
        if value != fine:
            _fail(key, f"must be {fine!r} with the feature cache ({why}); got {value!r}.")


def _check_privacy(config: ml_collections.ConfigDict, *, num_devices: int) -> None:
    p = config.privacy
    # The rules are the plan's (accounting.inputs), checked here before any data is read, under
    # the key the user typed.
    try:
        inputs.check_clip_norm(p.l2_clip_norm)
    except (TypeError, ValueError):
        _fail("privacy.l2_clip_norm", f"must be a finite number > 0; got {p.l2_clip_norm!r}.")
    try:
        inputs.check_delta_range(p.delta)
    except (TypeError, ValueError):
        _fail("privacy.delta", f"must satisfy 0 < delta < 1 (and delta << 1/N); got {p.delta!r}.")
    _choice("privacy.adjacency", p.adjacency, inputs.ADJACENCIES)
    _choice("privacy.accountant", p.accountant, inputs.METHODS)
    if p.noise_multiplier is not None and not (
            _is_real(p.noise_multiplier) and math.isfinite(p.noise_multiplier)
            and p.noise_multiplier >= 0):
        _fail("privacy.noise_multiplier",
              f"must be a finite σ >= 0, or None to calibrate σ to privacy.target_epsilon; got "
              f"{p.noise_multiplier!r}.")
    if p.noise_multiplier is None:  # calibrated: the target and the accountant are used
        _real("privacy.target_epsilon", p.target_epsilon, minimum=0.0, strict=True)
        scheme = Mode(config.mode).sampling_scheme(config.sampling)
        try:
            accountant.check_combination(p.accountant, p.adjacency, scheme)
        except ValueError as e:
            _fail("privacy.accountant", f"cannot calibrate this run: {e}")
    c = config.compute
    _choice("compute.dtype", c.dtype, run_model.COMPUTE_DTYPE_CHOICES)
    _choice("compute.attention", c.attention, models.mvit.ATTENTION_IMPLS)
    _choice("compute.per_example", c.per_example, run_model.PER_EXAMPLE)
    microbatch = c.microbatch_size
    _integer("compute.microbatch_size", microbatch, minimum=0)
    per_device = config.physical_batch_size // num_devices
    if microbatch and per_device % microbatch:
        _fail("compute.microbatch_size",
              f"must divide the physical batch of each device ({per_device} = "
              f"physical_batch_size {config.physical_batch_size} / {num_devices} device(s)), "
              f"or be 0 for the whole batch at once; got {microbatch}.")


def check_dataset_size(config: ml_collections.ConfigDict, *, num_examples: int) -> None:
    """Refuse an expected batch larger than the training set (q = B/N must be at most 1).

    Args:
      config: the training config.
      num_examples: N, the number of training videos.

    Raises:
      ValueError: if ``batch_size > N``, or ``== N`` in a private mode (no subsampling to
        account for; :func:`maskdp_jax.accounting.inputs.check_q`).
    """
    b = config.batch_size
    private = Mode(config.mode).is_private
    if b > num_examples or (private and b == num_examples):
        bound = "smaller than" if private else "at most"
        raise ValueError(
            f"--config.batch_size={b} must be {bound} the number of training videos N="
            f"{num_examples} (q = B/N = {b / num_examples:.3g}); lower the batch size or use a "
            "larger training set."
        )


def privacy_plan(config: ml_collections.ConfigDict, *, num_examples: int) -> PrivacyPlan:
    """The run's privacy plan: σ from ``privacy.noise_multiplier`` or, when it is None,
    calibrated to ``privacy.target_epsilon`` over the planned steps.

    Args:
      config: a checked training config (:func:`check_config`).
      num_examples: N, training videos.
    """
    p = config.privacy
    calibrate = p.noise_multiplier is None
    return PrivacyPlan.calibrate(
        mode=config.mode, num_examples=num_examples, batch_size=config.batch_size,
        epochs=config.num_epochs, l2_clip_norm=p.l2_clip_norm, delta=p.delta,
        adjacency=p.adjacency, sampling=config.sampling, accountant=p.accountant,
        target_epsilon=p.target_epsilon if calibrate else None,
        noise_multiplier=None if calibrate else p.noise_multiplier,
        noise=p.get("noise", "independent"), bands=p.get("bands", 1),
    )


def check_no_moved_keys(config: ml_collections.ConfigDict) -> None:
    """Refuse a config (a user's own config file) that still sets a moved key.

    Raises:
      ValueError: naming the old and the new key.
    """
    for key in command.MOVED_KEYS:
        section, name = key.split(".")
        if section in config and name in config[section]:
            raise ValueError(f"config key {command.moved_key_message(key)}")

