"""The embedded dataset: procedurally generated masked action videos (no download needed).

Each video shows a synthetic *avatar* (the public region, pixel mask 1) moving over a *room*
background (the private region, mask 0). Three **settings** (``setting``) say where the label
lives.

``"person"`` (the default run's): the label is the avatar's action, as in the papers' datasets
(NTU: avatar alone 54.8 %, background alone 9.9 %, both 68.3 %; Schneider et al. 2024a Table 3).
The action is ``motion = label % 4`` (right, left, down, up, one pixel per frame) and
``pose = label // 4`` (standing or crouching), shown by the avatar's shape: taller than wide, or
wider than tall, in a fraction ``POSE_SHOWN`` of the videos; in the others the avatar is square
and its pose cannot be seen. The room is context: its stripes agree with the pose with probability
``CONTEXT_AGREES`` (a kitchen makes cooking likely, not certain). What each part can give at
best: the avatar ``POSE_SHOWN + (1 - POSE_SHOWN) / 2`` = 70 %, the room
``CONTEXT_AGREES / 4`` = 22.5 % (it says nothing of the motion), both
``POSE_SHOWN + (1 - POSE_SHOWN) * CONTEXT_AGREES`` = 94 %: the papers' ordering, both > avatar >>
background. The pose changes the avatar's height and width by a token cell of the CPU presets
(``size // 8`` pixels each way), so the public view's cells show it.

``"pretrain"``: the public pretraining corpus (configs/pretrain.py): avatars of any of the three
shapes moving in eight directions (the four above and the diagonals) over rooms of either stripe
orientation; the label is the direction. Its own random stream, so it shares no video with a
``person`` or ``context`` split of any seed. :func:`public_rooms` renders its rooms without
avatars: the public backgrounds of ``hidden_fill="backgrounds"``.

``"share"`` (the where-it-pays study, configs/sweep_where_it_pays.py): a share ``private_share``
of the label lives in the private part alone, the rest in the public part alone. Four classes.
Each video's label is shown by one part, chosen per video with probability ``private_share`` for
the room: then the room's stripes run in one of four orientations (across, along, and the two
diagonals), the label's, and the avatar stands still; otherwise the avatar moves in the label's
direction (right, left, down, up) over a room of a random orientation. Whether the avatar moves
is public, so a model of the public view knows when the label is in the room but not which:
the public view can give at best ``1 - private_share + private_share / 4``, the full video 100 %.
``private_share`` is the fraction of videos whose label only private pixels show: 0 is a label
in the avatar alone, 1 a label in the room alone (the avatar then only tells where the room is).

``"context"`` (earlier releases' default, kept because it is where MaskDP's limits show): the
label combines one property of each region, so both carry class signal and neither alone suffices:

* ``motion = label % 4`` (public): the avatar, a box with checked clothing, moves right, left, down
  or up at one pixel per frame. The checks are attached to the body, so every visible piece of the
  avatar shows the motion, including the token cells that survive the tokeniser's erosion;
* ``context = label // 4`` (private): the background has horizontal or vertical stripes.

The public view alone (the avatar on the tokeniser's hidden-cell fill) determines the motion but
not the context: at most 50% accuracy. The private view shows the context, and also the motion
through the moving hole (hidden cells) the avatar leaves (its silhouette is in the mask, which
is public information anyway). Non-private training learns both (≈ 75% test top-1 in the default
run's budget); MaskDP learns the motion without noise and the context with noise; DP learns both
with noise.

Nuisances keep the task from being trivial: random avatar colour, check size, box size (3/8 to 1/2
of the frame) and start position; random stripe period, phase, colours and drift; per-pixel
Gaussian noise and per-video brightness. Generation is deterministic given the seed and takes about
a second for the default size.

**Subjects** (optional, ``num_subjects > 0``, any setting; the feature-masking audit): every
video is recorded "in the room of" one of ``num_subjects`` subjects, whose emblem, a 2 x 2-cell
patch of four random colours at a fixed cell-aligned place (a poster on the wall), is painted on
the background wherever the avatar does not cover it. The identity thus leaks through the private
region only and carries no class signal. A subject's emblem is the same in every split (drawn from
``subject_seed``), so an identity model fitted on one split recognises the subjects of another.
Without subjects the pixels are exactly those of earlier releases (committed results rely on it).

**Where the cue is in time** (``cue``). ``"constant"`` (default): the avatar moves and the stripes
show in every frame, so every clip of a video carries the same information (and the pixels are
exactly those of earlier releases, which committed results rely on). ``"segment"``: the label is
shown only during one window of ``cue_frames`` frames at a random place in the video (Luo et al.
2024's premise that clips of one video differ over time): there the avatar moves one pixel per frame
and the stripes have the label's orientation; before it the avatar stands at its start, after it at
its end, and the background shows both orientations at once (a plaid: no context). A clip that
misses the window carries no class signal, one that overlaps it part of it, so K clips of a video
see more of the cue than one. The window lies in frames
``[clip_frames // 2, frames - clip_frames // 2)``, where the evenly spread evaluation views
(``eval_clips``) see it.

**The room without the avatar** (``background=True``): the split's frames are replaced by the
background the avatar hides, rendered with the same draws (stripes, colours, brightness, pixel
noise) as the anonymised frames: the embedded counterpart of the anonymiser's inpainted background
(Schneider et al. 2024b Table 3, "Inpainted Background"; :mod:`maskdp_jax.anonymize` writes it for
real videos). The masks stay the avatar's.

Frames are ``uint8 [N, frames, size, size, 3]``; clips of ``clip_frames`` consecutive frames are cut
from them (random offsets for training, the centre for evaluation) and normalised to
``(x / 255 - 0.5) / 0.25`` so that 0, the centre of the tokeniser's fill, is mid-grey.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np

from maskdp_jax.data import clips

MOTIONS = ("right", "left", "down", "up")
CONTEXTS = ("horizontal stripes", "vertical stripes")
CLASS_NAMES = tuple(f"{m} / {c}" for c in CONTEXTS for m in MOTIONS)
_VELOCITY = {0: (0, 1), 1: (0, -1), 2: (1, 0), 3: (-1, 0)}  # (dy, dx) per frame
PIXEL_MEAN, PIXEL_STD = 0.5, 0.25


PIXEL_NORM = clips.PixelNorm((PIXEL_MEAN,), (PIXEL_STD,))  # 0 at mid-grey


CUES = ("constant", "segment")


SETTINGS = ("context", "person", "pretrain", "share")
POSES = ("standing", "crouching")
PERSON_CLASS_NAMES = tuple(f"{m} / {p}" for p in POSES for m in MOTIONS)
DIRECTIONS = ("right", "left", "down", "up", "down-right", "down-left", "up-right", "up-left")
_DIRECTION_VELOCITY = {**_VELOCITY, 4: (1, 1), 5: (1, -1), 6: (-1, 1), 7: (-1, -1)}
#: share: the room's four stripe orientations, one per class (the direction the stripes run)
ORIENTATIONS = ("horizontal", "vertical", "diagonal", "antidiagonal")
SHARE_CLASS_NAMES = tuple(f"{m} / {o}" for m, o in zip(MOTIONS, ORIENTATIONS, strict=True))
POSE_SHOWN = 0.4  # person: fraction of videos whose avatar shows its pose in its shape
CONTEXT_AGREES = 0.9  # person: probability the room's stripes agree with the pose


def class_names(setting: str) -> tuple[str, ...]:
    """The class names of a setting's labels (module docstring, "Settings")."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}; got {setting!r}.")
    return {"context": CLASS_NAMES, "person": PERSON_CLASS_NAMES, "pretrain": DIRECTIONS,
            "share": SHARE_CLASS_NAMES}[setting]


@functools.lru_cache(maxsize=4)
def _generate(num_videos: int, *, frames: int, size: int, seed: int, cue: str = "constant",
              cue_frames: int = 0, clip_frames: int = 0, background: bool = False,
              setting: str = "context", private_share: float = 0.0):
    """``(frames uint8 [N, F, S, S, 3], masks uint8 [N, F, S, S], labels int32 [N])``, read-only;
    ``frames`` is the room without the avatar when ``background`` (module docstring).

    A pure function of its arguments, cached: runs of a sweep in one process share the splits
    (generation takes seconds; the arrays are read-only so no run can alter another's data).
    """
    if setting == "context":
        frames_u8, masks, labels = _draw(num_videos, frames=frames, size=size, seed=seed, cue=cue,
                                         cue_frames=cue_frames, clip_frames=clip_frames,
                                         background=background)
    elif setting == "share":
        frames_u8, masks, labels = _draw_share(num_videos, frames=frames, size=size, seed=seed,
                                               private_share=private_share,
                                               background=background)
    else:
        frames_u8, masks, labels = _draw_scene(num_videos, frames=frames, size=size, seed=seed,
                                               setting=setting, background=background)
    for array in (frames_u8, masks, labels):
        array.flags.writeable = False
    return frames_u8, masks, labels


def _draw(num_videos: int, *, frames: int, size: int, seed: int, cue: str = "constant",
          cue_frames: int = 0, clip_frames: int = 0, background: bool = False):
    rng = np.random.default_rng(seed)
    labels = np.arange(num_videos) % len(CLASS_NAMES)
    rng.shuffle(labels)
    motion, context = labels % len(MOTIONS), labels // len(MOTIONS)
    if cue == "segment":
        # Its own stream, so the constant-cue pixels stay those of earlier releases.
        first = clip_frames // 2
        start = np.random.default_rng([seed, 1]).integers(
            first, frames - first - cue_frames + 1, num_videos)
        # Pixels the avatar has moved by frame f (it moves only inside the window
        # [start, start + cue_frames)), and whether frame f shows the context.
        f = np.arange(frames)[None] - start[:, None]
        moved = np.clip(f, 0, cue_frames - 1)
        shown = (f >= 0) & (f < cue_frames)
    else:
        moved = np.broadcast_to(np.arange(frames)[None], (num_videos, frames))
        shown = np.ones((num_videos, frames), bool)

    t, y, x = _grid(frames, size)
    # Background: stripes across (context 0) or along (context 1) the frame, drifting slowly.
    wave = _stripe_wave(rng, num_videos, t)
    stripes = wave(np.where(context[:, None, None, None] == 0, y, x))
    if cue == "segment":  # outside the window both orientations at once: no context
        plaid = 0.5 * (wave(y) + wave(x))
        stripes = np.where(shown[:, :, None, None], stripes, plaid)
    video = _paint_room(rng, num_videos, stripes)

    # Avatar: a box with checked clothing moving one pixel per frame, kept inside the frame.
    box = rng.integers(3 * size // 8, size // 2 + 1, num_videos)
    travel = int(moved.max())
    dy, dx = np.array([_VELOCITY[int(m)] for m in motion]).T
    lo_y = np.where(dy < 0, travel, 0)
    hi_y = size - box - np.where(dy > 0, travel, 0)
    lo_x = np.where(dx < 0, travel, 0)
    hi_x = size - box - np.where(dx > 0, travel, 0)
    y0 = rng.integers(lo_y, hi_y + 1)
    x0 = rng.integers(lo_x, hi_x + 1)
    top = (y0[:, None] + dy[:, None] * moved)[:, :, None, None]
    left = (x0[:, None] + dx[:, None] * moved)[:, :, None, None]
    video, inside = _add_avatar(rng, video, y=y, x=x, top=top, left=left, height=box,
                                width=box, background=background)
    return _film(rng, video), inside.astype(np.uint8), labels.astype(np.int32)


def _grid(frames: int, size: int):
    """``(t, y, x)``: frame and pixel coordinates broadcastable to ``[N, F, S, S]``."""
    return (np.arange(frames, dtype=np.float32)[None, :, None, None],
            np.arange(size)[None, None, :, None], np.arange(size)[None, None, None, :])


def _uniform(rng: np.random.Generator, lo: float, hi: float, shape) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(np.float32)


def _stripe_wave(rng: np.random.Generator, num_videos: int, t: np.ndarray):
    """Draw each room's stripe period, phase and drift; returns ``wave(coord)``, the stripes'
    intensity in [0, 1] along a coordinate (``y``: horizontal stripes, ``x``: vertical)."""
    period = _uniform(rng, 4.0, 8.0, num_videos)[:, None, None, None]
    phase = _uniform(rng, 0, 2 * np.pi, num_videos)[:, None, None, None]
    drift = _uniform(rng, -0.3, 0.3, num_videos)[:, None, None, None]

    def wave(coord):
        return 0.5 + 0.5 * np.sin(2 * np.pi * (coord.astype(np.float32) + drift * t) / period
                                  + phase)

    return wave


def _paint_room(rng: np.random.Generator, num_videos: int, stripes: np.ndarray) -> np.ndarray:
    """The room ``[N, F, S, S, 3]``: two random colours mixed by the stripes' intensity."""
    color_a = _uniform(rng, 0.1, 0.9, (num_videos, 1, 1, 1, 3))
    color_b = _uniform(rng, 0.1, 0.9, (num_videos, 1, 1, 1, 3))
    return color_a + (color_b - color_a) * stripes[..., None]


def _add_avatar(rng: np.random.Generator, video: np.ndarray, *, y, x, top, left, height, width,
                background: bool):
    """``(video, inside)``: the avatar, a ``height x width`` box of checked clothing whose
    top-left corner is ``(top, left)`` in each frame, painted over the room unless
    ``background``; ``inside`` is its pixel mask. The checks are attached to the body, so every
    visible piece of the avatar shows the motion."""
    n = len(video)
    inside = ((y >= top) & (y < top + height[:, None, None, None])
              & (x >= left) & (x < left + width[:, None, None, None]))
    avatar_color = _uniform(rng, 0.0, 1.0, (n, 1, 1, 1, 3))
    check = rng.integers(2, 4, n)[:, None, None, None]
    checked = ((y - top) // check + (x - left) // check) % 2 == 0
    texture = np.where(checked, np.float32(0.45), np.float32(1.0))[..., None] * avatar_color
    if not background:
        video = np.where(inside[..., None], texture, video)
    return video, inside


def _film(rng: np.random.Generator, video: np.ndarray) -> np.ndarray:
    """The recorded frames: a per-video brightness and per-pixel noise, as uint8."""
    brightness = _uniform(rng, 0.8, 1.2, (len(video), 1, 1, 1, 1))
    video = video * brightness + rng.standard_normal(video.shape, np.float32) * np.float32(0.05)
    return np.clip(np.round(video * 255), 0, 255).astype(np.uint8)


def _draw_scene(num_videos: int, *, frames: int, size: int, seed: int, setting: str,
                background: bool = False):
    """The ``person`` and ``pretrain`` settings (module docstring, "Settings"): the label is the
    avatar's action. Its own random stream, so the ``context`` pixels stay those of earlier
    releases."""
    rng = np.random.default_rng([seed, 2])
    names = class_names(setting)
    labels = np.arange(num_videos) % len(names)
    rng.shuffle(labels)

    if setting == "person":
        motion, pose = labels % len(MOTIONS), labels // len(MOTIONS)
        shown = rng.random(num_videos) < POSE_SHOWN
        agrees = rng.random(num_videos) < CONTEXT_AGREES
        orientation = np.where(agrees, pose, 1 - pose)
        # 0 standing (taller than wide), 1 crouching (wider than tall), square when not shown.
        shape_sign = np.where(shown, np.where(pose == 0, 1, -1), 0)
    else:  # pretrain: eight directions, any shape, any room: no pose, no context
        motion = labels
        shape_sign = rng.integers(-1, 2, num_videos)
        orientation = rng.integers(0, 2, num_videos)
    t, y, x = _grid(frames, size)
    # The room: stripes across (0) or along (1) the frame, drifting slowly.
    wave = _stripe_wave(rng, num_videos, t)
    video = _paint_room(rng, num_videos, wave(np.where(orientation[:, None, None, None] == 0,
                                                       y, x)))

    # The avatar: a box of checked clothing, its pose in its height and width, moving one pixel
    # per frame along each axis of its direction, kept inside the frame.
    base = rng.integers(11 * size // 32, 13 * size // 32 + 1, num_videos)
    stretch = size // 8  # one token cell of the CPU presets at size 32
    height, width = base + shape_sign * stretch, base - shape_sign * stretch
    dy, dx = np.array([_DIRECTION_VELOCITY[int(m)] for m in motion]).T
    video, inside = _moving_avatar(rng, video, y=y, x=x, dy=dy, dx=dx, travel=frames - 1,
                                   height=height, width=width, background=background)
    return _film(rng, video), inside.astype(np.uint8), labels.astype(np.int32)


def _moving_avatar(rng: np.random.Generator, video: np.ndarray, *, y, x, dy, dx, travel,
                   height, width, background: bool):
    """:func:`_add_avatar` moving ``(dy, dx)`` pixels per frame (``[N]`` each) from a random
    start that keeps it inside the frame for ``travel`` frames (a number or ``[N]``)."""
    size, frames = video.shape[2], video.shape[1]
    y0 = rng.integers(np.where(dy < 0, travel, 0), size - height - np.where(dy > 0, travel, 0) + 1)
    x0 = rng.integers(np.where(dx < 0, travel, 0), size - width - np.where(dx > 0, travel, 0) + 1)
    moved = np.arange(frames)[None]
    top = (y0[:, None] + dy[:, None] * moved)[:, :, None, None]
    left = (x0[:, None] + dx[:, None] * moved)[:, :, None, None]
    return _add_avatar(rng, video, y=y, x=x, top=top, left=left, height=height, width=width,
                       background=background)


def _draw_share(num_videos: int, *, frames: int, size: int, seed: int, private_share: float,
                background: bool = False):
    """The ``share`` setting (module docstring, "Settings"): per video, the label is the room's
    stripe orientation (probability ``private_share``; the avatar stands still) or the avatar's
    direction (the room's orientation is random). Its own random stream."""
    rng = np.random.default_rng([seed, 3])
    labels = np.arange(num_videos) % len(SHARE_CLASS_NAMES)
    rng.shuffle(labels)
    in_room = rng.random(num_videos) < private_share
    orientation = np.where(in_room, labels, rng.integers(0, len(ORIENTATIONS), num_videos))
    t, y, x = _grid(frames, size)
    o = orientation[:, None, None, None]
    # The coordinate the stripes vary along; the diagonals' is scaled to keep the same period.
    coord = np.where(o == 0, y, np.where(o == 1, x, np.where(o == 2, (y + x) / np.sqrt(2),
                                                                (y - x) / np.sqrt(2))))
    wave = _stripe_wave(rng, num_videos, t)
    video = _paint_room(rng, num_videos, wave(coord))

    # The avatar: a square box of checked clothing, still or moving one pixel per frame.
    box = rng.integers(11 * size // 32, 13 * size // 32 + 1, num_videos)
    dy, dx = np.array([_VELOCITY[int(m)] for m in labels]).T
    video, inside = _moving_avatar(
        rng, video, y=y, x=x, dy=np.where(in_room, 0, dy), dx=np.where(in_room, 0, dx),
        travel=np.where(in_room, 0, frames - 1), height=box, width=box, background=background)
    return _film(rng, video), inside.astype(np.uint8), labels.astype(np.int32)


@dataclasses.dataclass
class SyntheticMaskedActions:
    """One split of the embedded dataset.

    Attributes:
      frames: ``[N, F, S, S, 3]`` uint8 videos.
      masks: ``[N, F, S, S]`` uint8 pixel masks, 1 = avatar (public), 0 = background (private).
      labels: ``[N]`` int32 class indices.
      clip_frames: T, frames per clip.
      name: split name for messages.
      clip_sampling: where training clips start (:data:`maskdp_jax.data.clips.CLIP_SAMPLINGS`):
        ``uniform`` offsets, or K of the video's consecutive, non-overlapping clips (stride 1).
    """

    frames: np.ndarray
    masks: np.ndarray
    labels: np.ndarray
    clip_frames: int
    name: str = "synthetic"
    clip_sampling: str = "uniform"
    class_names: tuple[str, ...] = CLASS_NAMES
    has_masks: bool = True
    subjects: np.ndarray | None = None  # [N] int32 subject ids (module docstring), or None

    def __post_init__(self):
        if self.clip_frames > self.frames.shape[1]:
            raise ValueError(
                f"clip_frames={self.clip_frames} exceeds the video length {self.frames.shape[1]}."
            )
        clips.check_sampling(self.clip_sampling)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def fingerprint(self) -> str:
        """sha256 of the split's pixels, masks, labels and clip length (what a feature cache
        made from it is checked against)."""
        h = hashlib.sha256(f"{self.name}|{self.clip_frames}|{self.frames.shape}".encode())
        for array in (self.frames, self.masks, self.labels):
            h.update(np.ascontiguousarray(array).tobytes())
        return h.hexdigest()

    @property
    def pixel_norm(self) -> clips.PixelNorm:
        """How the uint8 pixels become the model's input (0 at mid-grey)."""
        return PIXEL_NORM

    def get_batch(
        self, indices: np.ndarray, *, num_clips: int = 1, seed: int | None = None,
        normalize: bool = True,
    ) -> dict[str, np.ndarray]:
        """Clips of the given videos.

        Args:
          indices: ``[n]`` video indices.
          num_clips: K clips per video.
          seed: training draws clip offsets from ``default_rng(seed)`` (placed by
            ``clip_sampling``); ``None`` gives the fixed evaluation views (K offsets evenly spread,
            the centre for K = 1).
          normalize: False leaves ``video`` uint8 (:attr:`pixel_norm` normalises it).

        Returns:
          ``video [n, K, T, S, S, 3]`` float32 (uint8 with ``normalize=False``),
          ``mask [n, K, T, S, S]`` uint8, ``label [n]``; ``subject [n]`` int32 when the split
          has subjects.
        """
        indices = np.asarray(indices)
        offsets = self._frame_offsets(len(indices), num_clips=num_clips, seed=seed)
        rows = indices[:, None, None]
        video = self.frames[rows, offsets]
        out = {
            "video": self.pixel_norm(video) if normalize else video,
            "mask": self.masks[rows, offsets],
            "label": self.labels[indices],
        }
        if self.subjects is not None:
            out["subject"] = self.subjects[indices]
        return out

    def get_masks(self, indices: np.ndarray) -> np.ndarray:
        """Masks of the centre evaluation clip: uint8 ``[n, T, S, S]``, 1 = public."""
        indices = np.asarray(indices)
        offsets = self._frame_offsets(len(indices), num_clips=1, seed=None)[:, 0]
        return self.masks[indices[:, None], offsets]

    def mask_coverage(self, indices: np.ndarray) -> np.ndarray:
        """``[n, 3]``: public fraction of the centre clip's masks before and after resizing (the
        same: no resize) and the resize factor 1 (see
        :meth:`~maskdp_jax.data.video_dataset.VideoDataset.mask_coverage`)."""
        public = self.get_masks(indices).reshape(len(indices), -1).mean(axis=1)
        return np.stack([public, public, np.ones_like(public)], axis=1)

    def _frame_offsets(self, n: int, *, num_clips: int, seed: int | None) -> np.ndarray:
        """``[n, K, T]`` frame indices of the clips (see :meth:`get_batch`)."""
        span = self.frames.shape[1] - self.clip_frames
        if seed is None:
            starts = np.broadcast_to(
                np.round(np.linspace(0, span, num_clips + 2)[1:-1]).astype(int)
                if num_clips > 1 else np.array([span // 2]),
                (n, num_clips),
            )
        elif self.clip_sampling == "consecutive":
            uniforms = np.random.default_rng(seed).random((n, num_clips + 1))
            starts = np.stack([
                clips.consecutive_starts(u, num_video_frames=self.frames.shape[1],
                                         num_frames=self.clip_frames, stride=1)
                for u in uniforms
            ])
        else:
            starts = np.random.default_rng(seed).integers(0, span + 1, (n, num_clips))
        return starts[..., None] + np.arange(self.clip_frames)


EMBLEM_CELLS = 2  # an emblem is EMBLEM_CELLS x EMBLEM_CELLS cells of CELL pixels
CELL = 4  # the spatial cell of the CPU presets' tokeniser (patch stride 4)


def subject_emblems(num_subjects: int, *, size: int, subject_seed: int = 0):
    """``(patches float32 [Z, e, e, 3], corners int [Z, 2])``: each subject's emblem, a 2 x 2
    block of random colours ``e = 2 * CELL`` pixels wide, and its cell-aligned top-left corner."""
    if size % CELL or size < EMBLEM_CELLS * CELL:
        raise ValueError(f"subjects need a frame size divisible by {CELL} and at least "
                         f"{EMBLEM_CELLS * CELL}; got size={size}.")
    rng = np.random.default_rng([subject_seed, num_subjects, size])
    colors = rng.uniform(0.0, 1.0, (num_subjects, EMBLEM_CELLS, EMBLEM_CELLS, 3)).astype(np.float32)
    patches = np.repeat(np.repeat(colors, CELL, axis=1), CELL, axis=2)
    places = size // CELL - EMBLEM_CELLS + 1
    corners = rng.integers(0, places, (num_subjects, 2)) * CELL
    return patches, corners


@functools.lru_cache(maxsize=4)
def _with_subjects(num_videos: int, *, frames: int, size: int, seed: int, num_subjects: int,
                   subject_seed: int, setting: str = "context"):
    """:func:`_generate`'s videos (of ``setting``) with a subject each and its emblem on the
    background: ``(frames, masks, labels, subjects)``, read-only. The base draw is untouched;
    subjects are assigned round-robin in a shuffled order (every subject in every split of >= Z
    videos)."""
    frames_u8, masks, labels = _generate(num_videos, frames=frames, size=size, seed=seed,
                                         setting=setting)
    subjects = np.arange(num_videos) % num_subjects
    np.random.default_rng([seed, num_subjects, 1]).shuffle(subjects)
    patches, corners = subject_emblems(num_subjects, size=size, subject_seed=subject_seed)
    out = frames_u8.copy()
    e = patches.shape[1]
    for i, z in enumerate(subjects):
        y, x = corners[z]
        window = out[i, :, y:y + e, x:x + e]
        painted = np.round(patches[z] * 255).astype(np.uint8)
        background = masks[i, :, y:y + e, x:x + e, None] == 0
        window[...] = np.where(background, painted[None], window)
    subjects = subjects.astype(np.int32)
    for array in (out, subjects):
        array.flags.writeable = False
    return out, masks, labels, subjects


PUBLIC_ROOMS_SEED = 2000  # the public rooms' seed: not a split of any run's private data
NUM_PUBLIC_ROOMS = 512


def public_rooms(*, frames: int = 16, size: int = 32) -> np.ndarray:
    """``uint8 [M, frames, size, size, 3]``: rooms of the public corpus (``setting="pretrain"``,
    seed ``PUBLIC_ROOMS_SEED``) rendered without their avatars, read-only: the public
    backgrounds :class:`maskdp_jax.run.views.PublicFill` writes into hidden cells. Their stripes
    take either orientation at random: no class signal of any setting."""
    return _generate(NUM_PUBLIC_ROOMS, frames=frames, size=size, seed=PUBLIC_ROOMS_SEED,
                     background=True, setting="pretrain")[0]


def make_splits(
    *, num_train: int, num_test: int, frames: int = 16, clip_frames: int = 8, size: int = 32,
    seed: int = 0, clip_sampling: str = "uniform", num_subjects: int = 0, subject_seed: int = 0,
    cue: str = "constant", cue_frames: int = 4, background: bool = False,
    setting: str = "context", private_share: float | None = None,
) -> tuple[SyntheticMaskedActions, SyntheticMaskedActions]:
    """Generate the train and test splits (different seeds, same distribution); ``clip_sampling``
    places the training clips (the test split's evaluation views are fixed). ``num_subjects > 0``
    gives every video a subject whose emblem is painted on its background; ``cue="segment"`` shows
    the label only during ``cue_frames`` frames of each video; ``background=True`` gives the room
    without the avatar; ``private_share`` in [0, 1] is the ``share`` setting's fraction of videos
    whose label only the room shows, and is required there and refused elsewhere (module
    docstring)."""
    if cue not in CUES:
        raise ValueError(f"cue must be one of {CUES}; got {cue!r}.")
    names = class_names(setting)
    if (setting == "share") != (private_share is not None):
        raise ValueError("private_share (the fraction of videos whose label only the room shows) "
                         "is the 'share' setting's, and that setting needs it; got "
                         f"setting={setting!r}, private_share={private_share!r}.")
    if setting == "share":
        if not 0.0 <= private_share <= 1.0:
            raise ValueError(f"private_share is a fraction of videos, in [0, 1]; got "
                             f"{private_share!r}.")
        if num_subjects:
            raise ValueError("subjects are drawn on the person, context and pretrain settings; "
                             "use num_subjects=0 with setting='share'.")
    if setting != "context":
        if cue != "constant":
            raise ValueError(f"setting={setting!r} draws constant-cue videos; the segment cue is "
                             "drawn in setting='context' only.")
        if frames - 1 + 17 * size // 32 > size:
            raise ValueError(f"setting={setting!r}: an avatar of up to 17/32 of the frame moving "
                             f"one pixel per frame for {frames} frames leaves a {size}-pixel "
                             f"frame; use frames <= {size - 17 * size // 32 + 1} or a larger size.")
    if cue == "segment" and not 2 <= cue_frames <= frames - 2 * (clip_frames // 2):
        raise ValueError(
            f"cue='segment' needs 2 <= cue_frames <= frames - 2 * (clip_frames // 2) = "
            f"{frames - 2 * (clip_frames // 2)} (the window lies where the evaluation views see "
            f"it); got cue_frames={cue_frames}, frames={frames}, clip_frames={clip_frames}.")
    if num_subjects and cue != "constant":
        raise ValueError("subjects are drawn on the constant-cue videos only; use cue='constant'.")
    if background and num_subjects:
        raise ValueError("background=True renders the room without the avatar; subjects' "
                         "emblems are not drawn on it: use num_subjects=0.")
    drawn = dict(cue=cue, cue_frames=cue_frames if cue == "segment" else 0,
                 clip_frames=clip_frames if cue == "segment" else 0, background=background,
                 setting=setting)
    if setting == "share":
        drawn["private_share"] = float(private_share)
    if min(num_train, num_test) < len(names):
        raise ValueError(
            f"need at least {len(names)} videos per split (one per class); "
            f"got num_train={num_train}, num_test={num_test}."
        )
    if num_subjects < 0 or num_subjects > min(num_train, num_test):
        raise ValueError(f"num_subjects must be in [0, {min(num_train, num_test)}] (every subject "
                         f"in every split); got {num_subjects}.")

    def split(n, split_seed, **kwargs):
        if not num_subjects:
            return SyntheticMaskedActions(
                *_generate(n, frames=frames, size=size, seed=split_seed, **drawn),
                class_names=names, **kwargs)
        *arrays, subjects = _with_subjects(n, frames=frames, size=size, seed=split_seed,
                                           setting=setting,
                                           num_subjects=num_subjects, subject_seed=subject_seed)
        return SyntheticMaskedActions(*arrays, subjects=subjects, class_names=names, **kwargs)

    train = split(num_train, 2 * seed, clip_frames=clip_frames, name="synthetic/train",
                  clip_sampling=clip_sampling)
    test = split(num_test, 2 * seed + 1, clip_frames=clip_frames, name="synthetic/test")
    return train, test
