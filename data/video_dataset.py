"""Real video datasets: decoded clips and per-video masks behind the synthetic dataset's interface.

``VideoDataset.get_batch(indices, *, num_clips, seed)`` returns the same element format as
:mod:`maskdp_jax.data.synthetic`, so ``train.py``'s Poisson logical -> physical batch splitter, the
train step and the evaluation do not know which dataset they read:

* ``video`` float32 ``[n, V, T, c, c, 3]``, normalised ``(x / 255 - mean) / std``
  (``VideoDataset.pixel_norm``), or with ``normalize=False`` the uint8
  pixels, which the training step normalises on the device;
* ``mask`` uint8 ``[n, V, T, c, c]``, 1 = public (*not protected*), 0 = private (protected under
  MaskDP). A dataset without mask files returns all zeros (everything private), which is what
  ``dp`` assumes; ``maskdp`` refuses such a dataset;
* ``label`` int32 ``[n]``.

Training (``seed`` given): ``V = num_clips`` clips per video, start frames from
``numpy.random.default_rng(seed)`` drawn in index order on the calling thread, so a batch is a pure
function of ``(indices, num_clips, seed)`` however the decoding threads are scheduled.
Evaluation (``seed=None``): ``V = num_clips * eval_crops`` fixed views, temporal-major
(see :mod:`maskdp_jax.data.clips`).

Masks mirror the video paths: the mask of ``<video_dir>/<key>`` is ``<mask_dir>/<key stem>`` with
extension ``.npy``, ``.npz`` or ``.mkv|.avi|.mp4|.mov|.webm`` (a grayscale mask video). A mask must
have its video's frame count and frame size exactly; it goes through the same frame indices,
resize and crop as the video, the resize being conservative
(:func:`maskdp_jax.data.clips.resize_mask`: a resized pixel is public only if every source pixel the
decoder's scaler blends into it is public).

Checks (``validate``): at construction every video is opened (frame count, size) and every mask is
found and its shape compared with its video, in parallel. ``validate="full"`` also reads every
mask's values and decodes each video's last frame (catches truncated files whose index survived).
A bad file raises :class:`~maskdp_jax.data.decode.BadVideoError` naming it; with
``skip_bad_videos=True`` bad videos are left out of the split *before* training (so N, q and the
accounting see the final set), and their count and names are reported. Decoding errors found later,
during training, always raise: dropping a sampled video mid-run would silently change the batch.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import warnings
from typing import Any

import numpy as np

from maskdp_jax.data import clips, decode, store
from maskdp_jax.data.layouts import Layout, VideoRecord

VALIDATE_LEVELS = ("metadata", "full")


@dataclasses.dataclass(frozen=True)
class VideoOptions:
    """How a video dataset is decoded, checked and cut into clips.

    Attributes:
      clip: the clip geometry.
      mean / std: per-channel normalisation in [0, 1] pixel units (set them to the pre-trained
        model's values).
      mask_dir: root of the mask files mirroring the video paths; ``""`` = no masks.
      decoder: ``"decord"`` or ``"pyav"``.
      num_workers: decoding threads.
      eval_crops: spatial evaluation crops, 1 or 3.
      augment: random crop position and horizontal flip per training clip (``nonprivate`` only).
      validate: ``"metadata"`` or ``"full"``.
      skip_bad_videos: leave bad videos out (reported) instead of failing.
      public_part: what the masks' public region shows. ``"anonymised"`` (default): the videos
        are the anonymiser's output, so the public region is the avatar; a mask whose recorded
        source is the video it is paired with is refused (:func:`check_mask_pairing`).
        ``"source"``: the papers' "MaskDP on non-anonymised data", chosen explicitly: the videos
        are the originals, so the public region is the real person, trained without protection
        (the run report says so).
    """

    clip: clips.ClipSpec
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    mask_dir: str = ""
    decoder: str = "decord"
    num_workers: int = 4
    eval_crops: int = 1
    augment: bool = False
    validate: str = "metadata"
    skip_bad_videos: bool = False
    public_part: str = "anonymised"

    def __post_init__(self):
        if self.decoder not in decode.DECODERS:
            raise ValueError(f"decoder must be one of {decode.DECODERS}; got {self.decoder!r}.")
        if self.validate not in VALIDATE_LEVELS:
            raise ValueError(f"validate must be one of {VALIDATE_LEVELS}; got {self.validate!r}.")
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1; got {self.num_workers}.")
        if self.public_part not in PUBLIC_PARTS:
            raise ValueError(f"public_part must be one of {PUBLIC_PARTS}; got "
                             f"{self.public_part!r}.")
        clips.spatial_positions(self.eval_crops)
        clips.PixelNorm(self.mean, self.std)  # refuses a zero std now, not at the first batch

    def clip_settings(self) -> dict[str, Any]:
        """The options that decide a clip's pixels (not where the files are, nor how many
        threads read them): what a feature cache's fingerprint records."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("num_workers", "validate", "skip_bad_videos", "mask_dir",
                             "public_part")}


def find_mask(mask_dir: str, key: str) -> str:
    """Path of the mask mirroring video ``key``; raises
    :class:`~maskdp_jax.data.decode.BadVideoError` if there is none."""
    stem = os.path.splitext(os.path.join(mask_dir, key))[0]
    for ext in (".npy", ".npz", *decode.MASK_VIDEO_EXTENSIONS):
        if os.path.isfile(stem + ext):
            return stem + ext
    raise decode.BadVideoError(
        stem + ".npz",
        f"mask file not found for video {key!r} (looked for {os.path.basename(stem)}.npy/.npz and "
        f"{os.path.basename(stem)}.{{{','.join(e[1:] for e in decode.MASK_VIDEO_EXTENSIONS)}}}).",
    )


#: What a mask's public region shows (``VideoOptions.public_part``).
PUBLIC_PARTS = ("anonymised", "source")


def check_mask_pairing(video_path: str, mask_path: str) -> None:
    """Refuse an anonymiser's mask beside the un-anonymised video it was made from.

    The anonymiser (:mod:`maskdp_jax.anonymize`) writes a summary ``<mask stem>.json`` beside
    each mask, recording the source video's SHA-256 (``source.sha256``). The avatar region of the
    mask is public only in the anonymised video: in the source video the same pixels are the real
    person, who would train as the unprotected public part. Training the source videos on purpose
    (the papers' "MaskDP on non-anonymised data") is ``public_part="source"``, which skips this
    check. A mask without such a summary (the user's own) is not checked. A video is read for
    its digest only when its size is the source's (``source.bytes``): an anonymised video's size
    differs.

    Raises:
      ValueError: the video is the mask's source: one line naming both files.
    """
    sidecar = os.path.splitext(mask_path)[0] + ".json"
    if not os.path.isfile(sidecar):
        return
    try:
        with open(sidecar) as f:
            meta = json.load(f)
        source = meta.get("source") or {}
        digest, size = source.get("sha256"), source.get("bytes")
    except (ValueError, AttributeError):  # not the anonymiser's summary
        return
    if digest is None or (size is not None and os.path.getsize(video_path) != size):
        return
    if decode.file_sha256(video_path) == digest:
        raise ValueError(
            f"{video_path} is the un-anonymised source video of the mask {mask_path} (its sidecar "
            f"{sidecar} says so): the mask's public region would be the real person, trained "
            "without protection. Train on the anonymiser's output videos (its --dst folder), or "
            "set --config.input.public_part=source to train the source videos on purpose (the "
            "papers' 'MaskDP on non-anonymised data').")


class VideoDataset:
    """One split of a folder-layout video dataset (see the module docstring).

    Attributes:
      name: ``"<dataset>/<subset>"`` for messages.
      class_names: the class index.
      labels: ``[N]`` int32.
      has_masks: whether mask files were given.
      pixel_norm: how the uint8 pixels become the model's input (``options.mean``/``std``).
      skipped: ``[(path, reason)]`` of videos left out by ``skip_bad_videos``.
    """

    def __init__(self, layout: Layout, options: VideoOptions, *, name: str, store_dir: str = ""):
        """Scan (and check) the split's videos and masks.

        Args:
          layout: the split's records.
          options: decoding, checks and clip geometry.
          name: ``"<dataset>/<subset>"``.
          store_dir: this split's clip store (:mod:`maskdp_jax.data.store`, written by
            ``python -m maskdp_jax.prepare``): frames and resized masks are then read from it
            instead of decoded, with the same result; ``""`` decodes the files.
        """
        self.name = name
        self.options = options
        self.pixel_norm = clips.PixelNorm(options.mean, options.std)
        self.class_names = layout.class_names
        self.has_masks = bool(options.mask_dir)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            options.num_workers, thread_name_prefix=f"decode-{name}"
        )
        results = list(self._pool.map(self._scan, layout.records))
        bad = [r for r in results if isinstance(r, decode.BadVideoError)]
        if bad and not options.skip_bad_videos:
            raise decode.BadVideoError(
                bad[0].path,
                f"{bad[0].reason} [{len(bad)} bad video(s) in {name}; fix them, or set "
                "--config.input.skip_bad_videos=True to leave them out of the split]",
            )
        self.skipped = [(e.path, e.reason) for e in bad]
        kept = [(rec, r) for rec, r in zip(layout.records, results, strict=True)
                if not isinstance(r, decode.BadVideoError)]
        if not kept:
            raise ValueError(f"{name}: no usable video left ({len(bad)} bad).")
        if bad:
            warnings.warn(
                f"{name}: skipped {len(bad)} bad video(s) of {len(layout.records)} "
                f"(skip_bad_videos=True); first: {bad[0]}", stacklevel=2,
            )
        self.records: tuple[VideoRecord, ...] = tuple(rec for rec, _ in kept)
        self._info: tuple[decode.VideoInfo, ...] = tuple(r[0] for _, r in kept)
        self._masks: tuple[str | None, ...] = tuple(r[1] for _, r in kept)
        self.labels = np.array([rec.label for rec in self.records], np.int32)
        self._store = (store.ClipStore(store_dir, expected_fingerprint=store.fingerprint(
            self.store_entries(), **self.store_settings())) if store_dir else None)
        self.num_short = sum(i.num_frames < options.clip.span for i in self._info)
        if self.num_short:
            warnings.warn(
                f"{name}: {self.num_short}/{len(self.records)} videos are shorter than the clip "
                f"span {options.clip.span}; their clips repeat the last frame "
                "(short_videos='pad').", stacklevel=2,
            )

    # ------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def store_settings(self) -> dict[str, Any]:
        """The store-wide preprocessing of this split, as :func:`maskdp_jax.data.store.fingerprint`
        and :func:`maskdp_jax.data.store.prepare` take it (one place, so writer and reader
        agree)."""
        o = self.options
        return {"decoder": o.decoder, "resize_size": o.clip.resize_size,
                "frame_step": o.clip.frame_step}

    def fingerprint(self) -> str:
        """sha256 of the videos and of everything that decides a clip (the clip store's
        fingerprint: files, decoder, resize, frame step; and the clip geometry, normalisation
        and views): what a feature cache made from this split is checked against."""
        blob = json.dumps({"store": store.fingerprint(self.store_entries(),
                                                      **self.store_settings()),
                           "options": self.options.clip_settings()}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def store_entries(self) -> tuple[store.VideoEntry, ...]:
        """What :func:`maskdp_jax.data.store.prepare` writes for this split: every video in index
        order, only the centre crop when every view is that crop (no augmentation, one evaluation
        crop)."""
        o = self.options
        crop = o.clip.crop_size if not o.augment and o.eval_crops == 1 else None
        return tuple(
            store.VideoEntry(key=r.key, label=int(r.label), path=r.path, mask_path=m,
                             num_frames=info.num_frames, crop_size=crop,
                             size=clips.resized_shape(info.height, info.width,
                                                      short_side=o.clip.resize_size))
            for r, info, m in zip(self.records, self._info, self._masks, strict=True)
        )

    # ------------------------------------------------------------------------------------------
    def _scan(self, record: VideoRecord):
        """``(VideoInfo, mask path | None)`` of a record, or the BadVideoError it raised."""
        o = self.options
        try:
            if not os.path.isfile(record.path):
                raise decode.BadVideoError(record.path, f"video not found ({record.source}).")
            info = decode.probe_video(record.path, decoder=o.decoder)
            if info.num_frames < o.clip.span and o.clip.short_videos == "error":
                raise decode.BadVideoError(
                    record.path, f"video has {info.num_frames} frames, fewer than the clip span "
                    f"{o.clip.span} = (T - 1) * stride + 1 (short_videos='error'; 'pad' repeats "
                    "the last frame)."
                )
            mask_path = None
            if o.mask_dir:
                mask_path = find_mask(o.mask_dir, record.key)
                if o.public_part == "anonymised":
                    check_mask_pairing(record.path, mask_path)
                minfo = decode.probe_mask(mask_path)
                _check_mask_shape(mask_path, minfo, info)
                if o.validate == "full":
                    decode.load_mask(mask_path)  # checks every frame's values
            if o.validate == "full":
                decode.read_video(
                    record.path, np.array([info.num_frames - 1]),
                    size=(info.height, info.width), decoder=o.decoder,
                )
            return info, mask_path
        except decode.BadVideoError as e:
            return e

    def _load_one(self, i: int, plan: clips.ViewPlan, num_clips: int, normalize: bool):
        """Clips of video ``i``: ``[V, T, c, c, 3]`` (normalised float32, or uint8 pixels) and
        their masks uint8 ``[V, T, c, c]``."""
        wanted, sel, size = self._view_frames(i, plan, num_clips)
        if self._store is not None:
            frames = self._store.frames(i, wanted)
        else:
            frames = decode.read_video(self.records[i].path, wanted, size=size,
                                       decoder=self.options.decoder)
        masks = self._read_masks(i, wanted, size)
        crop = self.options.clip.crop_size
        out_v = _crop_views(frames, sel, plan, crop_size=crop)
        out_m = _crop_views(masks, sel, plan, crop_size=crop)
        # Normalised here (when asked), on the decoding thread, so that it runs in parallel too.
        return (self.pixel_norm(out_v) if normalize else out_v), out_m

    def _view_frames(self, i: int, plan: clips.ViewPlan, num_clips: int):
        """``(wanted, sel, (h, w))`` for the views of video ``i``: the distinct source frames
        ``wanted`` to read, ``sel [V, T]`` indexing them per view, and the resized frame size."""
        spec, info = self.options.clip, self._info[i]
        starts = plan.starts(num_video_frames=info.num_frames, clip=spec, num_clips=num_clips)
        idx = np.stack([
            clips.frame_indices(
                num_video_frames=info.num_frames, num_frames=spec.num_frames, stride=spec.stride,
                start=int(s),
            ) for s in starts
        ])  # [V, T]
        wanted, inverse = np.unique(idx, return_inverse=True)
        size = clips.resized_shape(info.height, info.width, short_side=spec.resize_size)
        return wanted, inverse.reshape(idx.shape), size

    def _read_masks(self, i: int, wanted: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """Frames ``wanted`` of video ``i``'s mask resized (conservatively) to ``size``: uint8
        ``[n, h, w]``; all zeros (everything private) without mask files."""
        mask_path = self._masks[i]
        if mask_path is None:
            return np.zeros((len(wanted), *size), np.uint8)
        if self._store is not None:
            return self._store.masks(i, wanted)
        raw, minfo = decode.load_mask(mask_path, wanted)
        _check_mask_shape(mask_path, minfo, self._info[i])
        return clips.resize_mask(raw, size)

    def get_batch(
        self, indices: np.ndarray, *, num_clips: int = 1, seed=None, normalize: bool = True
    ) -> dict[str, np.ndarray]:
        """Clips of videos ``indices`` (see the module docstring for shapes and views);
        ``normalize=False`` leaves ``video`` uint8
        (``pixel_norm`` normalises it)."""
        indices = np.asarray(indices, np.int64)
        rng = None if seed is None else np.random.default_rng(seed)
        o = self.options
        plans = [clips.plan_views(rng, num_clips=num_clips, eval_crops=o.eval_crops,
                                  augment=o.augment, sampling=o.clip.sampling) for _ in indices]
        loaded = list(self._pool.map(
            lambda args: self._load_one(*args, num_clips, normalize),
            zip((int(i) for i in indices), plans, strict=True),
        ))
        return {
            "video": np.stack([v for v, _ in loaded]),
            "mask": np.stack([m for _, m in loaded]),
            "label": self.labels[indices],
        }

    def mask_coverage(self, indices: np.ndarray) -> np.ndarray:
        """Where the public region goes, for the centre view of videos ``indices``: float
        ``[n, 3]`` = (public fraction of the source mask frames, public fraction after the
        conservative resize and the crop, resize factor source / resized short side). The
        public region shrinks by ``max(s, 1) + 2`` source pixels per side in the resize
        (:func:`maskdp_jax.data.clips.resize_mask`), then to whole token cells in the tokeniser."""
        if not self.has_masks:
            raise ValueError(f"{self.name} has no masks.")
        plan = clips.plan_views(None, num_clips=1)

        def one(i):
            wanted, sel, size = self._view_frames(i, plan, 1)
            raw, _ = decode.load_mask(self._masks[i], wanted)
            resized = _crop_views(clips.resize_mask(raw, size), sel, plan,
                                  crop_size=self.options.clip.crop_size)[0]
            info = self._info[i]
            return raw.mean(), resized.mean(), min(info.height, info.width) / min(size)

        return np.array(list(self._pool.map(one, [int(i) for i in indices])), np.float64)

    def get_masks(self, indices: np.ndarray) -> np.ndarray:
        """Masks only of the centre evaluation view: uint8 ``[n, T, c, c]`` (no video decoding),
        ``get_batch(indices, num_clips=1, seed=None)["mask"][:, 0]`` when ``eval_crops=1``."""
        if not self.has_masks:
            raise ValueError(f"{self.name} has no masks.")
        plan = clips.plan_views(None, num_clips=1)

        def one(i):
            wanted, sel, size = self._view_frames(i, plan, 1)
            masks = self._read_masks(i, wanted, size)
            return _crop_views(masks, sel, plan, crop_size=self.options.clip.crop_size)[0]

        return np.stack(list(self._pool.map(one, [int(i) for i in indices])))


def _crop_views(frames: np.ndarray, sel: np.ndarray, plan: clips.ViewPlan, *, crop_size: int):
    """The views of one video cut from its resized frames (video ``[n, h, w, 3]`` or mask
    ``[n, h, w]``): ``[V, T, c, c, ...]``, view ``v`` being frames ``sel[v]`` cropped at
    ``plan.positions[v]`` and flipped if ``plan.flips[v]``, so a mask stays aligned with its video.
    """
    h, w = frames.shape[1:3]
    c = crop_size
    out = np.empty((*sel.shape, c, c, *frames.shape[3:]), frames.dtype)
    for v, (pos, flip) in enumerate(zip(plan.positions, plan.flips, strict=True)):
        y, x = clips.crop_box(h, w, crop_size=c, position=float(pos))
        view = frames[sel[v], y:y + c, x:x + c]
        out[v] = view[:, :, ::-1] if flip else view
    return out


def _check_mask_shape(path: str, mask: decode.VideoInfo, video: decode.VideoInfo) -> None:
    if mask != video:
        raise decode.BadVideoError(
            path, f"mask is [frames={mask.num_frames}, h={mask.height}, w={mask.width}] but its "
            f"video is [frames={video.num_frames}, h={video.height}, w={video.width}]; a mask "
            "must match its video frame for frame and pixel for pixel."
        )
