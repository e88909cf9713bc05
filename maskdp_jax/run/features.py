"""Writing the feature cache (:mod:`maskdp_jax.data.feature_cache`): one pass of the frozen prefix.

``train.py`` with ``--config.feature_cache.enabled=True`` calls :func:`open_or_build` before the
first step. It writes the cache if it is missing, continues it if a previous build was stopped,
and refuses a cache made for other videos, model, weights or settings. Training then runs only
the trainable suffix (``model.apply(tokens, start_block=cut)``), with the cache's views read by
:func:`cached_views`. The sampler, clipping, noise and accountant are unchanged. The privacy
argument is in :mod:`maskdp_jax.data.feature_cache`.

The build reads the split's fixed evaluation views for ``num_clips=G``: G clips evenly spread,
centre crop, uint8. It normalises them, cuts the tokeniser's views for ``maskdp``, and runs
blocks ``[0, cut)`` jitted, ``feature_cache.batch_size`` videos at a time, split over every local
device when there are several. Each finished chunk is recorded, so a killed build continues
where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import traverse_util
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from maskdp_jax import data
from maskdp_jax.core import parallel, tokenizer, train_step
from maskdp_jax.data import feature_cache, store
from maskdp_jax.models import finetune
from maskdp_jax.run.metrics import progress_bar

CACHE_VERSION = 1


def cached_views(batch: dict) -> tokenizer.Views:
    """The step's views (:data:`maskdp_jax.core.train_step.ViewFn`) of a ``maskdp`` batch from the
    feature cache: made before the frozen prefix by the run's tokeniser (:func:`make_prefix`), so
    read, not cut. ``public`` / ``private [P, K, tokens, dim]`` float32 features, ``has_public`` /
    ``has_private [P, K]`` bool. The public features are a function of public pixels only."""
    return tokenizer.Views(batch["public"], batch["private"], batch["has_public"],
                           batch["has_private"])


def fingerprint(*, source: data.Dataset, model, params: Any, cut: int, layout, tokens) -> str:
    """sha256 of what decides the cache's bytes: the source split (its own fingerprint), the
    model's architecture, the prefix's weights, the cut, the grid, the views and the dtype, the
    tokeniser and the normalisation."""
    if not hasattr(source, "fingerprint"):
        raise ValueError(f"{source.name} cannot fingerprint its videos, so a feature cache made "
                         "from it could not be checked; train without the cache.")
    h = hashlib.sha256()
    weights = traverse_util.flatten_dict(finetune.prefix_params(params, cut=cut))
    for path in sorted(weights):
        h.update("/".join(path).encode())
        h.update(np.ascontiguousarray(jax.device_get(weights[path])).tobytes())
    blob = json.dumps({
        "version": CACHE_VERSION, "source": source.fingerprint(), "weights": h.hexdigest(),
        "model": [type(model).__name__, repr(model.blocks), list(model.input_size),
                  list(model.patch_kernel), list(model.patch_stride), model.rel_pos_embed,
                  str(jnp.dtype(model.dtype))],
        "cut": cut, "layout": layout.settings,
        "tokens": [list(tokens.patch_stride), tokens.fill_value, tokens.fill_texture],
        "pixels": repr(source.pixel_norm),
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def make_prefix(model, *, cut: int, views: tuple[str, ...], tokens: tokenizer.Tokenizer,
                pixel_norm):
    """``prefix(params, video uint8 [n, G, T, H, W, 3], mask [n, G, T, H, W]) -> {view:
    [n, G, tokens, dim], "flags": [n, G, 2] (maskdp)}``, unjitted."""
    keep_class_token = cut == len(model.blocks)

    def run(params, clips):
        n, g = clips.shape[:2]
        out = model.apply({"params": params}, clips.reshape(n * g, *clips.shape[2:]),
                          stop_block=cut)
        out = out[:, :1] if keep_class_token else out
        return out.reshape(n, g, *out.shape[1:])

    def prefix(params, video, mask):
        video = train_step.model_video(video, pixel_norm)
        if views == ("full",):
            return {"full": run(params, video)}
        split = tokens.views(video, mask)
        flags = jnp.stack([split.has_public, split.has_private], -1).astype(jnp.uint8)
        return {"public": run(params, split.public), "private": run(params, split.private),
                "flags": flags}

    return prefix


def build(directory: str, *, source: data.Dataset, layout: feature_cache.CacheLayout, prefix,
          params: Any, fp: str, batch_size: int, progress=None) -> dict:
    """Write (or finish) the cache of ``source`` in ``directory``; returns its meta.

    ``prefix`` is :func:`make_prefix`'s function; ``batch_size`` videos go through it at a time,
    split over the local devices when there are several (padded to a multiple of them).
    """
    meta, done = store.begin(directory, kind=feature_cache.CACHE, fingerprint=fp,
                             files=layout.files(),
                             meta={"version": CACHE_VERSION, "num_videos": layout.num_videos,
                                   "layout": layout.settings})
    if meta["complete"]:
        return meta
    devices = jax.local_devices()
    batch_size = -(-batch_size // len(devices)) * len(devices)
    fn = jax.jit(prefix)
    if len(devices) > 1:
        sharding = NamedSharding(parallel.make_mesh(devices), P(parallel.DATA_AXIS))
        fn = jax.jit(prefix, in_shardings=(None, sharding, sharding))
    arrays = layout.open(directory, "r+")
    todo = np.array([i for i in range(layout.num_videos) if i not in done], np.int64)
    with store.DoneLog(directory) as log:
        for start in range(0, len(todo), batch_size):
            idx = todo[start:start + batch_size]
            padded = np.concatenate([idx, np.full(batch_size - len(idx), idx[-1])])
            clips = source.get_batch(padded, num_clips=layout.grid, seed=None, normalize=False)
            if clips["video"].shape[1] != layout.grid:
                raise ValueError(f"{source.name} gives {clips['video'].shape[1]} evaluation "
                                 f"views for {layout.grid} clips; the feature cache needs one "
                                 "crop per clip (input.eval_crops=1).")
            out = jax.device_get(fn(params, clips["video"], clips["mask"]))
            for name, array in arrays.items():
                array[idx] = np.asarray(out[name][:len(idx)], array.dtype)
            for array in arrays.values():
                array.flush()
            for i in idx:
                log(int(i))
            done.update(int(i) for i in idx)
            if progress is not None:
                progress(len(done), layout.num_videos)
    return store.complete(directory, meta)


def open_or_build(config: ml_collections.ConfigDict, *, train_ds: data.Dataset, model,
                  params: Any, trainable_mask: Any, tokens: tokenizer.Tokenizer,
                  workdir: str) -> tuple[feature_cache.FeatureCache, int]:
    """The run's feature cache, written first if needed, and the cut (the first trainable
    block, where training starts).

    ``config.feature_cache``: ``dir`` (default ``<workdir>/private/feature_cache``: beside the
    checkpoints, as private as the videos; share one between runs of the same model and data),
    ``clips_per_video`` (G), ``dtype`` (``float32`` | ``bfloat16``), ``batch_size`` (videos per
    prefix call; 0: ``physical_batch_size``).

    Raises:
      ValueError: a strategy without a frozen prefix (``full``), or a cache made for something
        else in ``dir``.
    """
    c = config.feature_cache
    cut = finetune.first_trainable_block(trainable_mask)
    directory = c.dir or os.path.join(workdir, "private", "feature_cache")
    views = feature_cache.VIEWS_BY_MODE[config.mode]
    probe = train_ds.get_batch(np.array([0]), num_clips=1, seed=None, normalize=False)
    prefix = make_prefix(model, cut=cut, views=views, tokens=tokens,
                         pixel_norm=train_ds.pixel_norm)
    shape = jax.eval_shape(prefix, params, jax.ShapeDtypeStruct(probe["video"].shape, jnp.uint8),
                           jax.ShapeDtypeStruct(probe["mask"].shape, jnp.uint8))[views[0]]
    layout = feature_cache.CacheLayout(
        num_videos=len(train_ds), grid=int(c.clips_per_video), tokens=int(shape.shape[2]),
        dim=int(shape.shape[3]), views=views, dtype=c.dtype)
    fp = fingerprint(source=train_ds, model=model, params=params, cut=cut, layout=layout,
                     tokens=tokens)
    meta = store.read_meta(directory)
    if meta is None or not meta["complete"]:
        print(f"Feature cache: blocks [0, {cut}) of {len(model.blocks)} for {len(train_ds)} "
              f"videos x {layout.grid} clips x {views} -> {directory} "
              f"({sum(layout.files().values()) / 2**30:.2f} GiB).")
        with progress_bar(layout.num_videos, "feature cache") as progress:
            build(directory, source=train_ds, layout=layout, prefix=prefix, params=params,
                  fp=fp, batch_size=int(c.batch_size or config.physical_batch_size),
                  progress=progress)
    return feature_cache.FeatureCache(directory, layout=layout, fingerprint=fp,
                                      source=train_ds), cut
