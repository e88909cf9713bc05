"""The private datasets a DP-CDA release is made from, as ``[N, d]`` features with fixed scaling.

Benchmarks (public data, :data:`BENCHMARKS`: the utility study may run on them by default):

* ``digits``: scikit-learn's bundled ``load_digits`` (1,797 real 8×8 handwritten digits, shipped
  with the package, no download), split 80/20 stratified by a fixed public seed.
* ``digits_jittered``: the seed's scale from the bundled digits (``_digits_jittered``): the
  ``digits`` split, then each side grown to ``data.num_train`` / ``data.num_test`` images
  (default 60,000 / 10,000, 6,000 / 1,000 per class as MNIST's training set has about) by
  one-pixel shifts and a little pixel noise of its own originals only, so no test image derives
  from a training original. A generator, not MNIST: it has digits' 64 features and 1,437
  training originals behind its 60,000 records.
* ``synthetic_video``: the project's embedded video dataset (:mod:`maskdp_jax.data.synthetic`), the
  centre clip of each video, average-pooled in space by a fixed factor and flattened.

The user's own data (``configs/dpcda_npz.py``):

* ``npz``: one ``.npz`` archive at ``data.path`` with ``[N, ...]`` numeric features (flattened to
  ``[N, d]``) under ``data.features_key`` and ``[N]`` integer labels in ``[0, K)`` under
  ``data.labels_key``; classes are named ``"0"`` … ``"K-1"``.
* ``folder``: ``data.path/<class name>/*.npy``, one file per record holding its features (any
  shape, flattened); the K subfolders, sorted by name, are the classes.

Either may come with held-out data in the same format at ``data.test_path`` (only to report a
test accuracy; the release never reads it). Everything public about the data comes from the
config, never from the files: K (``data.num_classes``), the scaling constants, and the class-size
bound ``min_class_size`` (:func:`maskdp_jax.accounting.dpcda.check_class_sizes` says what happens if
the data contradicts it). A file that cannot be read as described is refused with the reason, before
anything is written.

**Normalisation uses fixed statistics only.** The seed standardises with the private data's
per-feature mean and std and does not account for that release; here every transform is a
constant known before seeing the data (digits: pixel / 16, the format's range; videos: the
dataset's fixed ``(x/255 − 0.5)/0.25`` and a fixed pooling factor; own data: ``(x − data.shift)
/ data.scale`` with both from the config), so nothing of it needs a privacy budget. The clip norm
c is a config constant for the same reason.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import zipfile
import zlib

import numpy as np

BENCHMARKS = ("digits", "digits_jittered", "synthetic_video")
"""Public data: the utility study (which spends no budget of its own) may run on it by default."""
SOURCES = (*BENCHMARKS, "npz", "folder")
"""Every ``data.source``, the benchmarks, a user's ``.npz`` file or a folder of ``.npy`` records."""


@dataclasses.dataclass(frozen=True)
class Split:
    """Features and labels of a train (private) / test (held-out real) split."""

    features: np.ndarray  # [N, d] float32, fixed scaling, not yet clipped
    labels: np.ndarray  # [N] int32 in [0, K)
    class_names: tuple[str, ...]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def class_sizes(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=self.num_classes)


def _digits(test_fraction: float, split_seed: int) -> tuple[Split, Split]:
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as err:  # a requirement: say how to get it
        raise ImportError("the digits source needs scikit-learn: pip install -r "
                          "requirements.txt") from err
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction, stratify=y,
                                              random_state=split_seed)
    names = tuple(str(k) for k in range(10))
    return Split(x_tr, y_tr, names), Split(x_te, y_te, names)


def _jitter(split: Split, per_class: int, rng: np.random.Generator,
            noise: float = 0.05) -> Split:
    """``per_class`` images of each class of ``split`` (8×8 digits, features in [0, 1]): an
    original of that class drawn uniformly, shifted by (dy, dx) ∈ {-1, 0, 1}² with zeros shifted
    in, plus N(0, ``noise``²) per pixel, clipped to [0, 1]."""
    xs, ys = [], []
    for k in range(split.num_classes):
        originals = split.features[split.labels == k].reshape(-1, 8, 8)
        picked = originals[rng.integers(0, len(originals), per_class)]
        padded = np.pad(picked, ((0, 0), (1, 1), (1, 1)))
        dy, dx = rng.integers(0, 3, per_class), rng.integers(0, 3, per_class)
        rows = (dy[:, None] + np.arange(8))[:, :, None]
        cols = (dx[:, None] + np.arange(8))[:, None, :]
        shifted = padded[np.arange(per_class)[:, None, None], rows, cols]
        shifted = shifted + noise * rng.standard_normal(shifted.shape)
        xs.append(np.clip(shifted, 0.0, 1.0).reshape(per_class, 64).astype(np.float32))
        ys.append(np.full(per_class, k, np.int32))
    return Split(np.concatenate(xs), np.concatenate(ys), split.class_names)


def _digits_jittered(test_fraction: float, split_seed: int, num_train: int,
                     num_test: int) -> tuple[Split, Split]:
    """``digits``' split (:func:`_digits`), each side grown from its own originals
    (:func:`_jitter`) to ``num_train`` / ``num_test`` balanced images; the shifts and noise are
    drawn from ``split_seed`` (public). Both sizes must be multiples of the 10 classes."""
    if num_train % 10 or num_test % 10 or num_train <= 0 or num_test <= 0:
        raise ValueError(f"digits_jittered makes 10 balanced classes: data.num_train and "
                         f"data.num_test must be positive multiples of 10; got {num_train}, "
                         f"{num_test}.")
    train, test = _digits(test_fraction, split_seed)
    rng = np.random.default_rng([split_seed, 60_000])
    return _jitter(train, num_train // 10, rng), _jitter(test, num_test // 10, rng)


def _pool(videos: np.ndarray, factor: int) -> np.ndarray:
    """``[n, T, S, S, 3]`` -> ``[n, T·(S/f)²·3]`` by f×f spatial average pooling."""
    n, t, s, _, c = videos.shape
    if s % factor:
        raise ValueError(f"pool factor {factor} does not divide the frame size {s}.")
    pooled = videos.reshape(n, t, s // factor, factor, s // factor, factor, c).mean(axis=(3, 5))
    return pooled.reshape(n, -1).astype(np.float32)


def _synthetic_video(num_train: int, num_test: int, pool: int, seed: int):
    from maskdp_jax.data import synthetic

    train, test = synthetic.make_splits(num_train=num_train, num_test=num_test, seed=seed)

    def features(split):
        batch = split.get_batch(np.arange(len(split)))  # centre clip: [n, 1, T, S, S, 3]
        return Split(_pool(batch["video"][:, 0], pool), batch["label"].astype(np.int32),
                     tuple(split.class_names))

    return features(train), features(test)


def public_problems(config) -> list[str]:
    """Every problem with the public settings of ``config`` (the ``data`` section of a release
    config), each one sentence; [] when they are fine or the source is a benchmark."""
    if config.source not in SOURCES:
        return [f"data.source must be one of {SOURCES}; got {config.source!r}."]
    if config.source in BENCHMARKS:
        return []
    problems = []
    k = config.num_classes
    if isinstance(k, bool) or not isinstance(k, int) or k < 2:
        problems.append(f"data.num_classes must be set to the number of classes K >= 2 (public: "
                        f"the label set); got {k!r}.")
    shift, scale = config.shift, config.scale
    if not (isinstance(shift, (int, float)) and math.isfinite(shift)):
        problems.append(f"data.shift must be a finite number; got {shift!r}.")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        problems.append(
            f"data.scale must be set to a fixed constant > 0 (features are (x - data.shift) / "
            f"data.scale: the format's range, never a statistic of the private data); got "
            f"{scale!r}.")
    if not config.path:
        problems.append(f"data.path must name the private {config.source} to release from.")
    return problems


def check_public(config) -> tuple[int, float, float] | None:
    """``(K, shift, scale)`` of an own-data source, checked before any file is opened (None for
    a benchmark source, which has no such settings).

    Args:
      config: the ``data`` section of a release config.

    Raises:
      ValueError: every problem :func:`public_problems` finds, in one message.
    """
    problems = public_problems(config)
    if problems:
        raise ValueError(" ".join(problems))
    if config.source in BENCHMARKS:
        return None
    return config.num_classes, float(config.shift), float(config.scale)


def _scaled(x: np.ndarray, *, shift: float, scale: float, where: str) -> np.ndarray:
    """``[N, ...]`` numeric -> ``[N, d]`` float32 ``(x - shift) / scale``, all finite."""
    if x.dtype == np.bool_ or not (np.issubdtype(x.dtype, np.integer)
                                   or np.issubdtype(x.dtype, np.floating)):
        raise ValueError(f"{where}: features must be integer or float numbers; got dtype "
                         f"{x.dtype}.")
    if x.ndim < 2 or x.shape[0] == 0 or x.size == 0:
        raise ValueError(f"{where}: features must be [N, d] (or [N, ...], flattened) with N, d "
                         f">= 1; got shape {x.shape}.")
    out = ((x.reshape(len(x), -1).astype(np.float64) - shift) / scale).astype(np.float32)
    if not np.all(np.isfinite(out)):  # NaN/inf would pass the clip and poison a whole mean
        raise ValueError(f"{where}: features hold NaN or infinite values (after scaling by "
                         "data.shift, data.scale); fix the file.")
    return out


def _checked_labels(y: np.ndarray, *, num: int, num_classes: int, where: str) -> np.ndarray:
    if y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{where}: labels must be integers in [0, {num_classes}); got dtype "
                         f"{y.dtype}.")
    if y.shape != (num,):
        raise ValueError(f"{where}: labels must be [N] = [{num}] (one per feature row); got shape "
                         f"{y.shape}.")
    if y.min() < 0 or y.max() >= num_classes:
        raise ValueError(f"{where}: labels must lie in [0, {num_classes}) (data.num_classes = "
                         f"{num_classes}); found values from {y.min()} to {y.max()}.")
    return y.astype(np.int32)


def _npz(path: str, config, *, num_classes: int, shift: float, scale: float) -> Split:
    """One ``.npz`` archive (module docstring)."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no such file.")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not an .npz archive (write one with numpy.savez).")
    keys = (config.features_key, config.labels_key)
    unreadable = (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error)
    try:
        # allow_pickle=False: a data file must not be able to run code (nor hold object arrays).
        npz = np.load(path, allow_pickle=False)
    except unreadable as err:
        raise ValueError(f"{path}: unreadable .npz archive ({err}).") from err
    with npz:
        missing = [k for k in keys if k not in npz.files]
        if missing:
            raise ValueError(f"{path}: no array named {missing} (data.features_key, "
                             f"data.labels_key); the archive holds {sorted(npz.files)}.")
        try:
            x, y = (np.asarray(npz[k]) for k in keys)
        except unreadable as err:
            raise ValueError(f"{path}: unreadable array in the archive ({err}).") from err
    features = _scaled(x, shift=shift, scale=scale, where=path)
    labels = _checked_labels(y, num=len(features), num_classes=num_classes, where=path)
    return Split(features, labels, tuple(str(k) for k in range(num_classes)))


def _folder(path: str, *, num_classes: int, shift: float, scale: float) -> Split:
    """``path/<class>/*.npy``, one record per file (module docstring)."""
    if not os.path.isdir(path):
        raise ValueError(f"{path}: no such folder.")
    names = sorted(e.name for e in os.scandir(path) if e.is_dir())
    if len(names) != num_classes:
        raise ValueError(f"{path}: {len(names)} class subfolders {names[:10]}, but "
                         f"data.num_classes = {num_classes}.")
    rows, labels = [], []
    for k, name in enumerate(names):
        for file in sorted(f for f in os.listdir(os.path.join(path, name)) if f.endswith(".npy")):
            where = os.path.join(path, name, file)
            try:
                x = np.load(where, allow_pickle=False)
            except (OSError, EOFError, ValueError) as err:
                raise ValueError(f"{where}: unreadable .npy file ({err}).") from err
            rows.append(_scaled(np.asarray(x)[None], shift=shift, scale=scale, where=where)[0])
            labels.append(k)
            if rows[-1].shape != rows[0].shape:
                raise ValueError(f"{where}: {rows[-1].size} features; the first file had "
                                 f"{rows[0].size}: every record needs the same shape.")
    if not rows:
        raise ValueError(f"{path}: no .npy files in the class subfolders.")
    return Split(np.stack(rows), np.asarray(labels, np.int32), tuple(names))


def load(config) -> tuple[Split, Split | None]:
    """``(train, test)`` for ``config.source`` (:data:`SOURCES`); ``config`` is the ``data``
    section of a release config (``configs/dpcda_digits.py``, ``configs/dpcda_npz.py``).

    ``test`` is None for own data without ``data.test_path``.

    Raises:
      ValueError: an unknown source, a missing or bad public setting, or a file that is not as
        described (module docstring), naming the file and what is wrong.
    """
    if config.source == "digits":
        return _digits(config.test_fraction, config.split_seed)
    if config.source == "digits_jittered":
        return _digits_jittered(config.test_fraction, config.split_seed, config.num_train,
                                config.num_test)
    if config.source == "synthetic_video":
        return _synthetic_video(config.num_train, config.num_test, config.pool, config.split_seed)
    if config.source not in SOURCES:
        raise ValueError(f"data.source must be one of {SOURCES}; got {config.source!r}.")
    num_classes, shift, scale = check_public(config)
    public = dict(num_classes=num_classes, shift=shift, scale=scale)
    if config.source == "npz":
        read = functools.partial(_npz, config=config, **public)
    else:
        read = functools.partial(_folder, **public)
    train = read(config.path)
    test = read(config.test_path) if config.test_path else None
    if test is not None and (test.features.shape[1] != train.features.shape[1]
                             or test.class_names != train.class_names):
        raise ValueError(f"{config.test_path}: held-out data with {test.features.shape[1]} "
                         f"features and classes {list(test.class_names)[:10]} does not match "
                         f"{config.path} ({train.features.shape[1]} features, classes "
                         f"{list(train.class_names)[:10]}).")
    return train, test
