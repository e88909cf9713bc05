"""Video and mask decoding (host side): decord for videos, PyAV for mask videos and as an
alternative video decoder.

Every failure raises :class:`BadVideoError` naming the file and what is wrong with it, so a broken
file in a 10,000-video dataset is found by name, never silently dropped.

Decoders (``decoder=`` in the config):

* ``"decord"`` (default; the project's named dependency): random access by frame index and resizing
  inside the decoder, the fastest path. decord 0.6.0 (its last release, 2021) has a known defect:
  for a few frame widths (e.g. 24 and 48 pixels) it returns 4-channel frames of the wrong size. The
  reader checks every decoded shape and names the file; switch to ``"pyav"`` if you hit it.
* ``"pyav"``: decodes sequentially with FFmpeg through PyAV (maintained) and resizes with FFmpeg's
  bilinear scaler; slower for sparse clips of long videos.

Masks (1 = public, 0 = private; public = *not protected*): an ``.npz`` holding one ``[F, H, W]``
uint8/bool array (key ``mask`` or the only array), an ``.npy`` of the same (memory-mapped, so a
clip reads only its frames: the fastest), or a grayscale mask video decoded with PyAV.
Values must be exactly {0, 1} or {0, 255}; mask videos must therefore be stored losslessly (e.g.
FFV1 in ``.mkv``, ``gray`` pixel format): a lossy codec blurs the edges into other values, and
guessing a threshold could turn private pixels public.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import warnings
import zipfile
from collections.abc import Iterator

import numpy as np

MASK_VIDEO_EXTENSIONS = (".mkv", ".avi", ".mp4", ".mov", ".webm")
DECODERS = ("decord", "pyav")


class BadVideoError(ValueError):
    """A video or mask file that cannot be used; ``path`` names it."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class VideoInfo:
    """Frame count and frame size of a video (or mask) file."""

    num_frames: int
    height: int
    width: int


def _decord():
    try:
        import decord
    except ImportError as e:  # pragma: no cover - exercised only without the dependency
        raise ImportError(
            "decord is needed to read videos: pip install -r requirements.txt "
            "(or set --config.input.decoder=pyav)."
        ) from e
    return decord


def _av():
    try:
        import av
    except ImportError as e:  # pragma: no cover
        raise ImportError(
            "PyAV is needed to read mask videos: pip install -r requirements.txt"
        ) from e
    return av


def file_sha256(path: str) -> str:
    """Hex SHA-256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def probe_video(path: str, *, decoder: str = "decord") -> VideoInfo:
    """Frame count and size of ``path``; raises :class:`BadVideoError` if it cannot be opened."""
    if not os.path.isfile(path):
        raise BadVideoError(path, "file not found.")
    if decoder == "decord":
        try:
            reader = _decord().VideoReader(path, num_threads=1)
            num_frames = len(reader)
            height, width = reader[0].shape[:2] if num_frames else (0, 0)
        except Exception as e:  # decord raises DECORDError/RuntimeError for broken files
            raise BadVideoError(
                path, f"unreadable video ({type(e).__name__}: {_first_line(e)})"
            ) from e
        info = VideoInfo(num_frames, height, width)
    elif decoder == "pyav":
        info = _probe_av(path)
    else:
        raise ValueError(f"decoder must be one of {DECODERS}; got {decoder!r}.")
    if info.num_frames < 1:
        raise BadVideoError(path, "video has no frames.")
    return info


def read_video(
    path: str, indices: np.ndarray, *, size: tuple[int, int], decoder: str = "decord"
) -> np.ndarray:
    """Frames ``indices`` of ``path`` resized to ``size = (h, w)``: uint8 ``[n, h, w, 3]``.

    decord 0.6 cannot return frames of some widths (48, 72, 16, 24 px among those we tried, from
    valid H.264 files that PyAV and ffmpeg decode): it copies FFmpeg's row-padded frame buffer as
    if it were packed, and either fails ("The size must exactly match", 4 bytes per pixel) or
    returns the wrong shape. When decord fails, the frames are decoded with PyAV instead (same
    FFmpeg scaler, so the conservative mask resize holds for both, see :mod:`maskdp_jax.data.clips`)
    and a warning names the size once; only a file that PyAV cannot decode either is called corrupt.
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}; got {decoder!r}.")
    indices = np.asarray(indices, np.int64)
    h, w = size
    expected = (len(indices), h, w, 3)
    decord_error = None
    if decoder == "decord":
        try:
            reader = _decord().VideoReader(path, width=w, height=h, num_threads=1)
            if int(indices.max()) >= len(reader):
                raise BadVideoError(
                    path, f"frame {int(indices.max())} requested but the video has {len(reader)}."
                )
            frames = reader.get_batch(indices.tolist()).asnumpy()
            if frames.shape == expected:
                return frames
            decord_error = f"frames of shape {frames.shape}, expected {expected}"
        except (BadVideoError, ImportError):
            raise
        except Exception as e:  # noqa: BLE001 - decided below, by whether PyAV can read it
            decord_error = f"{type(e).__name__}: {_first_line(e)}"
    try:
        frames = _read_av(path, indices, size=size, fmt="rgb24")
    except Exception as e:
        tried = "" if decord_error is None else f"decord: {decord_error}; "
        raise BadVideoError(
            path, f"decoding failed, file truncated or corrupt ({tried}PyAV: "
            f"{type(e).__name__}: {_first_line(e)})"
        ) from e
    if frames.shape != expected:
        raise BadVideoError(path, f"PyAV returned frames of shape {frames.shape}, expected "
                                  f"{expected}.")
    if decord_error is not None and (h, w) not in _DECORD_FALLBACK_WARNED:
        _DECORD_FALLBACK_WARNED.add((h, w))
        warnings.warn(
            f"decord could not decode {path} at {w}x{h} ({decord_error}); decoded with PyAV "
            f"instead, here and for every other {w}x{h} read that decord fails (decord 0.6 "
            "mis-copies frames of some widths). Set --config.input.decoder=pyav to skip decord.",
            stacklevel=2,
        )
    return frames


# Output sizes for which the decord -> PyAV fallback has been announced (once per process).
_DECORD_FALLBACK_WARNED: set[tuple[int, int]] = set()


def load_mask(path: str, indices: np.ndarray | None = None) -> tuple[np.ndarray, VideoInfo]:
    """Frames ``indices`` (default: all) of a mask file as uint8 ``[n, H, W]`` in {0, 1}
    (1 = public), and the file's full ``VideoInfo`` (to compare with its video).

    Only the returned frames are value-checked: they are the ones a clip uses.
    """
    if not os.path.isfile(path):
        raise BadVideoError(path, "mask file not found.")
    if path.endswith((".npz", ".npy")):
        mask = _load_npz(path) if path.endswith(".npz") else _load_npy(path)
        if mask.ndim != 3:
            raise BadVideoError(path, f"mask must be [T, H, W]; got shape {mask.shape}.")
        info = VideoInfo(*mask.shape)
        if indices is not None:
            if int(np.max(indices)) >= len(mask):
                raise BadVideoError(path, f"mask has {len(mask)} frames; frame "
                                          f"{int(np.max(indices))} requested.")
            mask = mask[indices]
    else:
        info = _probe_av(path)
        wanted = np.arange(info.num_frames) if indices is None else np.asarray(indices)
        mask = _read_av(path, wanted, size=None, fmt="gray")
    return binarize_mask(mask, path=path), info


def probe_mask(path: str) -> VideoInfo:
    """Frame count and size of a mask file without decoding all of it (npz: the array header)."""
    if not os.path.isfile(path):
        raise BadVideoError(path, "mask file not found.")
    if path.endswith(".npy"):
        shape = _load_npy(path).shape
        if len(shape) != 3:
            raise BadVideoError(path, f"mask array must be [T, H, W]; got shape {shape}.")
        return VideoInfo(*shape)
    if not path.endswith(".npz"):
        return _probe_av(path)
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith(".npy")]
            name = "mask.npy" if "mask.npy" in names else (names[0] if len(names) == 1 else None)
            if name is None:
                raise BadVideoError(
                    path, f"npz must hold one array or one named 'mask'; found {names}."
                )
            with z.open(name) as f:
                major, _ = np.lib.format.read_magic(f)
                read_header = (np.lib.format.read_array_header_1_0 if major == 1
                               else np.lib.format.read_array_header_2_0)
                shape, _, _ = read_header(f)
    except (zipfile.BadZipFile, ValueError, OSError) as e:
        if isinstance(e, BadVideoError):
            raise
        raise BadVideoError(
            path, f"unreadable mask npz ({type(e).__name__}: {_first_line(e)})"
        ) from e
    if len(shape) != 3:
        raise BadVideoError(path, f"mask array must be [T, H, W]; got shape {shape}.")
    return VideoInfo(*shape)


def binarize_mask(
    mask: np.ndarray, *, path: str, video_shape: tuple[int, ...] | None = None
) -> np.ndarray:
    """The one check of a mask read on the host: map it to uint8 ``[T, H, W]`` in {0, 1}.

    Accepts bool, or uint8 with values in {0, 1} or in {0, 255} (1 / 255 = public). Anything else
    (e.g. 128, a lossy-codec edge, a mix such as {0, 1, 255}, NaN, or a float array) is refused:
    guessing a threshold could turn private pixels public.

    Args:
      mask: ``[T, H, W]`` as read from a file.
      path: the file (or other name of the mask) for the messages.
      video_shape: ``(T, H, W[, C])`` of the video it belongs to; None skips that comparison.

    Returns:
      ``[T, H, W]`` uint8, 1 = public (*not protected*), 0 = private.

    Raises:
      BadVideoError: (a ``ValueError``) wrong rank, shape other than the video's, values outside
        {0, 1} / {0, 255}, or a dtype other than uint8 / bool.

    >>> binarize_mask(np.array([[[0, 255]]], np.uint8), path="m.npy").tolist()
    [[[0, 1]]]
    """
    mask = np.asarray(mask)
    if mask.ndim != 3:
        raise BadVideoError(path, f"mask must be [T, H, W]; got shape {mask.shape}.")
    if video_shape is not None and mask.shape != tuple(video_shape[:3]):
        raise BadVideoError(
            path, f"mask shape {mask.shape} does not match the video's [T, H, W] "
            f"{tuple(video_shape[:3])}."
        )
    if mask.dtype == np.bool_:
        return mask.astype(np.uint8)
    if mask.dtype == np.uint8:
        top = int(mask.max()) if mask.size else 0
        if top <= 1:
            return mask.astype(np.uint8, copy=False)
        public = mask == 255
        if top == 255 and np.all(public | (mask == 0)):
            return public.astype(np.uint8)
    values = np.unique(mask)
    found = set(values.tolist())
    if not (found <= {0, 1} or found <= {0, 255}):
        stray = values[~np.isin(values, (0, 1, 255))]
        wrong = f"{stray[:5].tolist()}" if stray.size else "both 1 and 255"
        raise BadVideoError(
            path, "mask values must be binary, {0, 1} or {0, 255} (1/255 = public); found "
            f"{values[:10].tolist()}{' ...' if values.size > 10 else ''}. Which are wrong: mask "
            f"values must be {{0, 1}} or {{0, 255}}; found {wrong}. Store mask videos losslessly "
            "(e.g. FFV1, gray)."
        )
    raise BadVideoError(path, f"mask dtype must be uint8 or bool; got {mask.dtype}.")


def _load_npz(path: str) -> np.ndarray:
    try:
        with np.load(path) as z:
            keys = list(z.keys())
            if "mask" in keys:
                return z["mask"]
            if len(keys) == 1:
                return z[keys[0]]
    except Exception as e:
        raise BadVideoError(
            path, f"unreadable mask npz ({type(e).__name__}: {_first_line(e)})"
        ) from e
    raise BadVideoError(path, f"npz must hold one array or one named 'mask'; found {keys}.")


def _load_npy(path: str) -> np.ndarray:
    """Memory-mapped: only the frames a clip indexes are read from disk."""
    try:
        return np.load(path, mmap_mode="r")
    except Exception as e:
        raise BadVideoError(
            path, f"unreadable mask npy ({type(e).__name__}: {_first_line(e)})"
        ) from e


def _probe_av(path: str) -> VideoInfo:
    av = _av()
    if not os.path.isfile(path):
        raise BadVideoError(path, "file not found.")
    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            num_frames = stream.frames
            if num_frames <= 0:  # containers without a frame count (e.g. mkv): count packets
                num_frames = sum(1 for p in container.demux(stream) if p.size)
            info = VideoInfo(num_frames, stream.codec_context.height, stream.codec_context.width)
    except Exception as e:
        raise BadVideoError(
            path, f"unreadable video ({type(e).__name__}: {_first_line(e)})"
        ) from e
    if info.num_frames < 1:
        raise BadVideoError(path, "video has no frames.")
    return info


def _read_av(path: str, indices: np.ndarray, *, size, fmt: str) -> np.ndarray:
    """Decode sequentially up to the last wanted frame; ``fmt`` 'rgb24' or 'gray'."""
    wanted = np.asarray(indices, np.int64)
    wanted_set = set(wanted.tolist())
    frames = dict(_decode_av(path, fmt, size, wanted_set))
    missing = sorted(wanted_set - set(frames))
    if missing:
        raise BadVideoError(
            path, f"frame {missing[0]} requested but decoding stopped before it "
            "(truncated file?)."
        )
    return np.stack([frames[int(i)] for i in wanted])


def iter_video(path: str, window: int) -> Iterator[np.ndarray]:
    """Every frame of ``path`` at its own size, in order, ``window`` at a time: uint8 ``[n, H, W,
    3]`` RGB arrays (``n = window`` but for the last), decoded sequentially with PyAV, the
    frames :func:`read_video` gives with ``decoder="pyav"`` at the stream's size. Holds one window,
    whatever the video's length: a long video's pipeline (the anonymiser) reads it so.

    Raises:
      BadVideoError: the file cannot be decoded (named, with PyAV's reason).
    """
    if window < 1:
        raise ValueError(f"window must be >= 1; got {window}.")
    frames: list[np.ndarray] = []
    for _, frame in _decode_av(path, "rgb24", None):
        frames.append(frame)
        if len(frames) == window:
            yield np.stack(frames)
            frames = []
    if frames:
        yield np.stack(frames)


def _decode_av(path: str, fmt: str, size: tuple[int, int] | None,
               wanted: set[int] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """``(index, frame)`` of ``path``'s frames in order, decoded sequentially with PyAV as
    ``fmt`` at ``size`` ``(H, W)`` (None: the stream's own size, read off the opened stream, not
    off :func:`probe_video`, whose packet count demuxes a whole Matroska file once more): every
    frame, or those in ``wanted``, stopping after the last of them.

    Raises:
      BadVideoError: the file cannot be decoded (named, with PyAV's reason).
    """
    if wanted is not None and not wanted:
        return
    av = _av()
    last = max(wanted) if wanted else None
    try:
        with av.open(path) as container:
            if size is None:
                codec = container.streams.video[0].codec_context
                size = (codec.height, codec.width)
            for i, frame in enumerate(container.decode(video=0)):
                if wanted is None or i in wanted:
                    yield i, frame.to_ndarray(format=fmt, height=size[0], width=size[1])
                if last is not None and i >= last:
                    break
    except Exception as e:
        raise BadVideoError(
            path, f"decoding failed, file truncated or corrupt ({type(e).__name__}: "
            f"{_first_line(e)})"
        ) from e


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return (text[-1] if text else "")[:200]
