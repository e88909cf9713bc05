"""Clip geometry: which frames and which pixels of a video make one clip (host-side NumPy).

A clip is ``T`` frames taken every ``stride`` frames, so it spans ``(T - 1) * stride + 1`` source
frames. The spatial pipeline is: resize so that the short side is ``resize_size`` (aspect kept),
then crop ``crop_size x crop_size``. Video frames and mask frames go through exactly the same
indices, resize size and crop box, so mask pixel (t, y, x) labels video pixel (t, y, x); the mask
is resized conservatively (:func:`resize_mask`): a resized pixel is public only if every source
pixel the video's resampling filter blends into it is public.

Views:

* training: K clips per video drawn from a seeded generator, spatial centre crop (no augmentation;
  the papers' choice under DP). ``augment=True`` (``nonprivate`` only) adds a random crop position
  and a random horizontal flip per clip. Where the K clips start (``ClipSpec.sampling``):

  - ``"uniform"``: K independent start frames, each uniform over the video (clips may overlap);
  - ``"consecutive"``: Luo et al. 2024's model of a video (Sec. 3.2: "Each video can be temporally
    chunk into N_i clips ... we assume that the clips are consecutive and non-overlapping"). The
    video is cut into its N_i consecutive, non-overlapping clips (each owns ``T * stride`` frames;
    the grid starts at a random phase so that no frame is always left over) and the K training clips
    are K of them drawn without replacement. The paper does not say how K clips are drawn from the
    N_i (nor what happens when K > N_i, e.g. K = 8 clips of 16 x 4 frames from a 7-second UCF-101
    video, N_i = 2 or 3); we draw them without replacement and, when K > N_i, start over with a
    new draw once all N_i are used, so every clip appears ``floor(K / N_i)`` or ``ceil(K / N_i)``
    times (see :func:`consecutive_starts`);
* evaluation: fixed views, ``K`` evenly spread temporal windows x ``S`` spatial crops (S = 1:
  centre; S = 3: both ends and the centre along the long side), ordered temporal-major
  ``[k * S + s]``. The evaluation averages the logits over the ``K * S`` views.

Starts on the stride (``ClipSpec.starts_on_stride``, default off): every start above (training,
consecutive, evaluation) is rounded down to a multiple of the stride, so every clip frame is a
multiple of the stride (or the last frame, for a padded clip). A clip still holds T frames every
``stride``; only where it may begin is coarser. This is what lets a clip store
(:mod:`maskdp_jax.data.store`) hold every ``stride``-th frame instead of all of them.

Short videos (fewer frames than the clip span): ``short_videos = "pad"`` keeps the stride and
clamps indices past the end to the last frame (the clip is padded by repeating the last frame, the
motion speed is unchanged); ``"error"`` refuses the video by name. A video with no frame is always
an error.

>>> frame_indices(num_video_frames=10, num_frames=4, stride=3, start=0).tolist()
[0, 3, 6, 9]
>>> frame_indices(num_video_frames=5, num_frames=4, stride=2, start=0).tolist()  # padded
[0, 2, 4, 4]
>>> eval_starts(num_video_frames=40, span=16, num_views=3).tolist()
[6, 12, 18]
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

SHORT_VIDEO_POLICIES = ("pad", "error")
#: Where a video's K training clips start: independent ``uniform`` offsets, or K of its
#: ``consecutive`` non-overlapping clips.
CLIP_SAMPLINGS = ("uniform", "consecutive")


@dataclasses.dataclass(frozen=True)
class ClipSpec:
    """How clips are cut.

    Attributes:
      num_frames: T, frames per clip.
      stride: s, source frames between two clip frames.
      resize_size: short side after resizing (pixels), before cropping.
      crop_size: side of the square crop fed to the model.
      short_videos: ``"pad"`` (repeat the last frame) or ``"error"``.
      sampling: where the K training clips of a video start, ``"uniform"`` or ``"consecutive"``
        (module docstring).
      starts_on_stride: round every start down to a multiple of ``stride`` (module docstring).
    """

    num_frames: int
    stride: int
    resize_size: int
    crop_size: int
    short_videos: str = "pad"
    sampling: str = "uniform"
    starts_on_stride: bool = False

    def __post_init__(self):
        if min(self.num_frames, self.stride, self.resize_size, self.crop_size) < 1:
            raise ValueError(f"clip sizes must be >= 1; got {self}.")
        if self.crop_size > self.resize_size:
            raise ValueError(
                f"crop_size={self.crop_size} must be <= resize_size={self.resize_size}."
            )
        if self.short_videos not in SHORT_VIDEO_POLICIES:
            raise ValueError(
                f"short_videos must be one of {SHORT_VIDEO_POLICIES}; got {self.short_videos!r}."
            )
        check_sampling(self.sampling)

    @property
    def span(self) -> int:
        """Source frames covered by one clip."""
        return (self.num_frames - 1) * self.stride + 1

    @property
    def frame_step(self) -> int:
        """Every clip frame is a multiple of this (or a video's last frame): ``stride`` with
        ``starts_on_stride``, else 1."""
        return self.stride if self.starts_on_stride else 1


def frame_indices(*, num_video_frames: int, num_frames: int, stride: int, start: int) -> np.ndarray:
    """``[T]`` source frame indices of the clip starting at ``start``, clamped to the last frame."""
    return np.minimum(start + stride * np.arange(num_frames), num_video_frames - 1)


def train_starts(uniforms: np.ndarray, *, num_video_frames: int, span: int) -> np.ndarray:
    """``[K]`` start frames uniform on ``{0, ..., max(F - span, 0)}`` from ``uniforms`` in [0, 1).

    The uniforms are drawn before the video is opened (on the caller's thread), so the clip choice
    does not depend on which decoding thread runs first.
    """
    room = max(num_video_frames - span, 0)
    return np.minimum((np.asarray(uniforms) * (room + 1)).astype(np.int64), room)


def check_sampling(sampling: str) -> None:
    """Raises ValueError unless ``sampling`` is one of :data:`CLIP_SAMPLINGS`."""
    if sampling not in CLIP_SAMPLINGS:
        raise ValueError(
            f"clip sampling must be one of {CLIP_SAMPLINGS}; got {sampling!r}."
        )


def num_uniforms(sampling: str, num_clips: int) -> int:
    """How many [0, 1) draws one video's K training clips use (drawn before it is opened)."""
    return num_clips + 1 if sampling == "consecutive" else num_clips


def consecutive_starts(
    uniforms: np.ndarray, *, num_video_frames: int, num_frames: int, stride: int
) -> np.ndarray:
    """``[K]`` start frames of K of the video's consecutive, non-overlapping clips.

    Clip ``j`` of the video starts at ``phase + j * T * stride`` and the grid holds every clip
    whose span fits, ``N = (F - span) // (T * stride) + 1`` of them (1 if the video is shorter than
    one span: that clip is padded). ``uniforms[0]`` draws the phase uniformly among the grid
    offsets that keep all N clips inside the video; ``uniforms[1:]`` pick K of the N clips without
    replacement, starting over once all N are used (K > N).

    Args:
      uniforms: ``[K + 1]`` in [0, 1).
      num_video_frames: F.
      num_frames: T, frames per clip.
      stride: source frames between clip frames.

    >>> consecutive_starts(np.array([0.0, 0.0, 0.0, 0.0]), num_video_frames=16, num_frames=4,
    ...                    stride=2).tolist()  # N = 2 clips (8 frames each): both, then again
    [0, 8, 0]
    >>> consecutive_starts(np.array([0.99, 0.99]), num_video_frames=20, num_frames=4,
    ...                    stride=2).tolist()  # phase in {0, ..., 20 - 7 - 8}; last clip
    [13]
    """
    span = (num_frames - 1) * stride + 1
    period = num_frames * stride
    room = max(num_video_frames - span, 0)
    num_chunks = room // period + 1
    slack = room - (num_chunks - 1) * period
    phase = min(int(uniforms[0] * (slack + 1)), slack)
    chosen, pool = [], []
    for u in uniforms[1:]:
        if not pool:
            pool = list(range(num_chunks))
        chosen.append(pool.pop(min(int(u * len(pool)), len(pool) - 1)))
    return phase + period * np.asarray(chosen, np.int64)


def eval_starts(*, num_video_frames: int, span: int, num_views: int) -> np.ndarray:
    """``[K]`` fixed start frames: the centre for K = 1, else K evenly spread interior windows."""
    room = max(num_video_frames - span, 0)
    if num_views == 1:
        return np.array([room // 2])
    return np.round(np.linspace(0, room, num_views + 2)[1:-1]).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class ViewPlan:
    """The random (training) or fixed (evaluation) choices for one video's views.

    Attributes:
      uniforms: ``[K]`` (``"uniform"``) or ``[K + 1]`` (``"consecutive"``) in [0, 1) for training
        start frames; None for evaluation views.
      positions: ``[V]`` crop positions (0.5 = centre).
      flips: ``[V]`` horizontal flips.
      sampling: the :class:`ClipSpec` sampling the uniforms are for.
    """

    uniforms: np.ndarray | None
    positions: np.ndarray
    flips: np.ndarray
    sampling: str = "uniform"

    def starts(self, *, num_video_frames: int, clip: ClipSpec, num_clips: int) -> np.ndarray:
        """``[V]`` start frames (evaluation: each temporal window repeated for every crop),
        rounded down to multiples of ``clip.frame_step``."""
        if self.uniforms is not None and self.sampling == "consecutive":
            starts = consecutive_starts(self.uniforms, num_video_frames=num_video_frames,
                                        num_frames=clip.num_frames, stride=clip.stride)
        elif self.uniforms is not None:
            starts = train_starts(self.uniforms, num_video_frames=num_video_frames,
                                  span=clip.span)
        else:
            starts = np.repeat(eval_starts(num_video_frames=num_video_frames, span=clip.span,
                                           num_views=num_clips),
                               len(self.positions) // num_clips)
        return starts // clip.frame_step * clip.frame_step


def plan_views(
    rng: np.random.Generator | None, *, num_clips: int, eval_crops: int = 1, augment: bool = False,
    sampling: str = "uniform",
) -> ViewPlan:
    """Views of one video: training (``rng`` given) K clips placed by ``sampling``, centre crop
    unless ``augment``; evaluation (``rng=None``) K temporal x ``eval_crops`` spatial views,
    temporal-major (``sampling`` does not apply)."""
    if rng is None:
        pos = np.tile(spatial_positions(eval_crops), num_clips)
        return ViewPlan(None, pos, np.zeros(len(pos), bool))
    uniforms = rng.random(num_uniforms(sampling, num_clips))
    if augment:
        return ViewPlan(uniforms, rng.uniform(0.0, 1.0, num_clips), rng.random(num_clips) < 0.5,
                        sampling)
    return ViewPlan(uniforms, np.full(num_clips, 0.5), np.zeros(num_clips, bool), sampling)


def resized_shape(height: int, width: int, *, short_side: int) -> tuple[int, int]:
    """``(h, w)`` with the short side equal to ``short_side`` and the aspect ratio kept."""
    if height <= width:
        return short_side, max(short_side, round(width * short_side / height))
    return max(short_side, round(height * short_side / width)), short_side


def crop_box(height: int, width: int, *, crop_size: int, position: float) -> tuple[int, int]:
    """Top-left ``(y, x)`` of a square crop; ``position`` in [0, 1] slides it along the long side
    (0.5 = centre); the short side is centred."""
    y_room, x_room = height - crop_size, width - crop_size
    if height > width:
        return round(position * y_room), x_room // 2
    return y_room // 2, round(position * x_room)


def spatial_positions(num_crops: int) -> tuple[float, ...]:
    """Crop positions of the evaluation views: ``(0.5,)`` for 1, ``(0, 0.5, 1)`` for 3."""
    if num_crops == 1:
        return (0.5,)
    if num_crops == 3:
        return (0.0, 0.5, 1.0)
    raise ValueError(f"eval spatial crops must be 1 or 3; got {num_crops}.")


# Margin (source pixels) added to the scaler's footprint for chroma-subsampled video (4:2:0): the
# decoder resamples the half-resolution chroma planes, whose samples each cover 2 source pixels.
CHROMA_MARGIN = 2


def _footprint(src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """Per output index ``[dst]``: first and last source index that may enter its value."""
    scale = src / dst
    centre = (np.arange(dst) + 0.5) * scale - 0.5
    radius = max(scale, 1.0) + CHROMA_MARGIN
    lo = np.clip(np.floor(centre - radius), 0, src - 1).astype(np.int64)
    hi = np.clip(np.ceil(centre + radius), 0, src - 1).astype(np.int64)
    return lo, hi


def resize_mask(masks: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize ``[n, H, W]`` {0, 1} masks to ``[n, h, w]`` for frames resized by the decoder.

    The rule: **an output pixel is public (1) only if every source pixel in its resampling
    footprint is public**, so a pixel marked public in the resized clip is a function of public
    source pixels only (a bilinear or area filter blends every source pixel of its footprint;
    nearest-neighbour sampling of the mask would mark public an output pixel that blends private
    pixels across the boundary). The footprint of output pixel ``y`` (per axis, ``s = H / h``) is
    every source index within ``max(s, 1) + CHROMA_MARGIN`` of its centre ``(y + 0.5) s - 0.5``:
    FFmpeg's bilinear scaler (decord and PyAV) reads source pixels within ``s`` of the centre
    when downscaling and within 1 when upscaling; ``CHROMA_MARGIN = 2`` covers 4:2:0 video, whose
    chroma planes are resampled at half resolution (checked bit-exactly for decord 0.6.0 and
    PyAV 18 by ``tests/test_data_video.py``; a decoder built with a bicubic scaler would reach
    ``2 s`` and fail that test). The public region shrinks by about
    ``max(s, 1) + 2`` source pixels on every side. Without resizing (``(h, w) == (H, W)``) the mask
    is returned as is.

    Not covered (the mask supplier's business): what the file itself mixes before any decoding:
    4:2:0 chroma samples shared by 2 x 2 pixels, and a lossy codec's coding blocks and motion
    compensation; store the videos losslessly (4:4:4 or RGB), or
    make the public region smaller than what was rendered synthetically by a block (16 px) margin.

    >>> m = np.zeros((1, 1, 16), np.uint8); m[..., 8:] = 1
    >>> resize_mask(m, (1, 8))[0, 0].tolist()  # s = 2: 4 source px eroded + the boundary
    [0, 0, 0, 0, 0, 0, 1, 1]
    """
    height, width = masks.shape[-2:]
    h, w = size
    if (h, w) == (height, width):
        return masks
    # "Any private pixel in the footprint" is separable: rows, then columns (transposed so that
    # both passes slice contiguous rows). Its cost: benchmarks/results/data_throughput.md.
    private = masks == 0
    for src, dst in ((height, h), (width, w)):
        lo, hi = _footprint(src, dst)
        private = np.stack([private[..., a:b + 1, :].any(-2) for a, b in zip(lo, hi, strict=True)],
                           -2)
        private = np.ascontiguousarray(np.swapaxes(private, -1, -2))
    return (~private).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class PixelNorm:
    """How uint8 pixels become the model's input: ``(x / 255 - mean) / std`` per channel, float32.

    A lookup table of the 256 values per channel, each computed in float64 and rounded once to
    float32, so a pixel's value is the correctly rounded one and the *same bits* wherever it is
    computed: on the host (NumPy frames) or on a device (jax frames, inside a jitted step). With
    arithmetic instead, XLA rewrites the division into a multiplication by the reciprocal or
    fuses a multiply-add, and the device's values differ from NumPy's in the last bit; a lookup
    has no rounding to reorder, and costs about the same on the device as the arithmetic.

    The training loader keeps clips uint8 up to the step (``get_batch(..., normalize=False)``),
    which normalises them on the device: a quarter of the bytes to copy and transfer, and no
    host pass over every pixel, which was half of a clip's cost when reading a clip store
    (``docs/benchmarks.md``, "Clip store").

    Privacy: a fixed per-pixel function, the same for every example; it mixes nothing.

    Attributes:
      mean / std: per-channel values in [0, 1] pixel units, 1 (every channel) or 3 of each (the
        pre-trained model's, e.g. Kinetics' 0.45 / 0.225).

    >>> PixelNorm((0.5,), (0.25,))(np.array([[0, 0, 0], [255, 255, 255]], np.uint8)).tolist()
    [[-2.0, -2.0, -2.0], [2.0, 2.0, 2.0]]
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __post_init__(self):
        mean, std = np.asarray(self.mean, np.float64), np.asarray(self.std, np.float64)
        if mean.ndim != 1 or std.ndim != 1 or not {len(mean), len(std)} <= {1, 3}:
            raise ValueError(f"pixel mean and std need 1 or 3 values each; got mean={self.mean}, "
                             f"std={self.std}.")
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std > 0)):
            raise ValueError(f"pixel std must be finite and > 0 (and the mean finite); got "
                             f"mean={self.mean}, std={self.std}: a zero std would turn every "
                             "pixel into inf.")

    @functools.cached_property
    def table(self) -> np.ndarray:
        """float32 ``[256, 3]``: the model's input value of every pixel value, per channel
        (computed once per instance)."""
        mean, std = np.asarray(self.mean, np.float64), np.asarray(self.std, np.float64)
        values = (np.arange(256, dtype=np.float64)[:, None] / 255.0 - mean) / std
        # Column-major, so that each channel's column is contiguous for ``np.take``.
        return np.asfortranarray(np.broadcast_to(values, (256, 3)), dtype=np.float32)

    def __call__(self, frames):
        """uint8 ``[..., 3]`` (a NumPy or a jax array) -> float32 ``[..., 3]`` of the same kind."""
        if frames.dtype != np.uint8:
            raise TypeError(f"PixelNorm normalises uint8 pixels; got {frames.dtype} (already "
                            "normalised?).")
        if frames.shape[-1] != 3:
            raise ValueError(f"pixels must be [..., 3] (RGB); got shape {frames.shape}.")
        if isinstance(frames, np.ndarray):  # a take per channel: faster than fancy indexing
            out = np.empty(frames.shape, np.float32)
            for c in range(3):  # the table's columns are contiguous (see ``table``)
                np.take(self.table[:, c], frames[..., c], out=out[..., c])
            return out
        xp = frames.__array_namespace__()  # jax.numpy, without importing jax into ``data``
        return xp.asarray(self.table)[frames, xp.arange(3)]
