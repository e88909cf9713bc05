"""Dataset layouts on disk and their official train/test splits -> lists of :class:`VideoRecord`.

Only file names and split files are read here (no decoding). Every record keeps the split-file
line it came from, so a missing video is reported as "``trainlist01.txt`` line 12 names
``.../x.avi``, which does not exist". Labels, class names and split membership are *public*
metadata under MaskDP and DP (not protected).

Layouts:

* ``ucf101`` — Soomro et al., "UCF101: A Dataset of 101 Human Actions Classes From Videos in The
  Wild", CRCV-TR-12-01, 2012, and the official ``UCF101TrainTestSplits-RecognitionTask.zip``
  (``ucfTrainTestlist/``): ``classInd.txt`` lines ``"<1-based index> <ClassName>"``;
  ``trainlist0k.txt`` lines ``"<Class>/v_<Class>_gXX_cYY.avi <1-based index>"``;
  ``testlist0k.txt`` lines ``"<Class>/v_<Class>_gXX_cYY.avi"``; three splits k = 1, 2, 3 (by group,
  groups 1-7 / 8-14 / 15-21 tested). The label is taken from the class directory and checked
  against the index in the train list.
* ``hmdb51`` — Kuehne et al., "HMDB: A Large Video Database for Human Motion Recognition", ICCV
  2011, and the official ``test_train_splits.rar`` (``testTrainMulti_7030_splits/``): per class and
  split ``<class>_test_split<k>.txt`` with lines ``"<video>.avi <code>"``, code 1 = training,
  2 = testing, 0 = unused (70/30 per class, k = 1, 2, 3). Classes are the sorted split-file class
  names; videos are ``<root>/<class>/<video>.avi``.
* ``ntu60`` — Shahroudy et al., "NTU RGB+D: A Large Scale Dataset for 3D Human Activity
  Analysis", CVPR 2016, Sec. 3.2: files ``SsssCcccPpppRrrrAaaa_rgb.avi`` (setup, camera, performer,
  replication, action 1-60). Cross-subject: performers 1, 2, 4, 5, 8, 9, 13, 14, 15, 16, 17, 18,
  19, 25, 27, 28, 31, 34, 35, 38 train, the other 20 test. Cross-view: cameras 2 and 3 train,
  camera 1 tests. Actions above 60 (NTU RGB+D 120) are refused.
* ``toyota_smarthome`` — Das et al., "Toyota Smarthome: Real-World Activities of Daily Living",
  ICCV 2019, Sec. 4: files ``<Activity>_pXX_rYY_vZZ_cWW.mp4`` (subject pXX, camera cWW).
  Cross-subject (CS): subjects 3, 4, 6, 7, 9, 12, 13, 15, 17, 19, 25 train, the other 7 test, all 31
  activities. Cross-view: CV1 trains on camera 1, CV2 on cameras 1, 3, 4, 6, 7; both validate on
  camera 5 and test on camera 2. **Not verified against the paper here** (the PDF was not
  reachable): these subject and camera lists are as reproduced in public third-party code; the
  paper's CV protocols use 19 activities, which we approximate by the activities present in both
  the training and the test cameras. Check them against the official release before reporting.
* ``folder`` — generic: ``<root>/<class>/<video>`` with the class index = sorted class folder
  names, and split files ``<split_dir>/train.txt`` / ``test.txt`` (``val.txt``) listing one
  ``<class>/<video>`` path per line. A missing file means "the other videos": with ``test.txt``
  only, ``train`` is every video of the class folders that it does not list (and the other way
  round). With neither, a seeded, stratified held-out split (:func:`seeded_split`): in every
  class the ``round(test_fraction * n)`` videos (at least 1 and at most n - 1 when n >= 2) with
  the smallest ``sha256(f"{seed}/{class}/{file stem}")`` are ``test`` (the stem: a source
  ``.mp4`` and its anonymised ``.mkv`` fall on the same side). Ranking by a per-video hash
  (not a shuffle) makes a video's side independent of the listing order, and adding or removing
  one video moves at most one other. The split depends only on file names and the public seed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re

VIDEO_EXTENSIONS = (".avi", ".mp4", ".mkv", ".mov", ".webm", ".mpg", ".mpeg")

NTU60_XSUB_TRAIN_SUBJECTS = frozenset(
    (1, 2, 4, 5, 8, 9, 13, 14, 15, 16, 17, 18, 19, 25, 27, 28, 31, 34, 35, 38)
)
NTU60_XVIEW_TRAIN_CAMERAS = frozenset((2, 3))
NTU60_ACTIONS = (
    "drink water", "eat meal/snack", "brushing teeth", "brushing hair", "drop", "pickup", "throw",
    "sitting down", "standing up (from sitting position)", "clapping", "reading", "writing",
    "tear up paper", "wear jacket", "take off jacket", "wear a shoe", "take off a shoe",
    "wear on glasses", "take off glasses", "put on a hat/cap", "take off a hat/cap", "cheer up",
    "hand waving", "kicking something", "reach into pocket", "hopping (one foot jumping)",
    "jump up", "make a phone call/answer phone", "playing with phone/tablet",
    "typing on a keyboard", "pointing to something with finger", "taking a selfie",
    "check time (from watch)", "rub two hands together", "nod head/bow", "shake head", "wipe face",
    "salute", "put the palms together", "cross hands in front (say stop)", "sneeze/cough",
    "staggering", "falling", "touch head (headache)", "touch chest (stomachache/heart pain)",
    "touch back (backache)", "touch neck (neckache)", "nausea or vomiting condition",
    "use a fan (with hand or paper)/feeling warm", "punching/slapping other person",
    "kicking other person", "pushing other person", "pat on back of other person",
    "point finger at the other person", "hugging other person", "giving something to other person",
    "touch other person's pocket", "handshaking", "walking towards each other",
    "walking apart from each other",
)
TSH_CS_TRAIN_SUBJECTS = frozenset((3, 4, 6, 7, 9, 12, 13, 15, 17, 19, 25))
TSH_CV_CAMERAS = {
    "cv1": {"train": frozenset((1,)), "val": frozenset((5,)), "test": frozenset((2,))},
    "cv2": {"train": frozenset((1, 3, 4, 6, 7)), "val": frozenset((5,)), "test": frozenset((2,))},
}

# The official extension, or the anonymiser's (its outputs are named for their container).
_NTU_NAME = re.compile(r"^S(\d{3})C(\d{3})P(\d{3})R(\d{3})A(\d{3})_rgb\.(?:avi|mkv|mp4)$")
_TSH_NAME = re.compile(r"^(.+)_p(\d+)_r(\d+)_v(\d+)_c(\d+)\.(?:mp4|mkv)$")


class LayoutError(ValueError):
    """A split file, class index or folder that does not follow the layout; names the file."""


@dataclasses.dataclass(frozen=True)
class VideoRecord:
    """One video of a split.

    Attributes:
      path: absolute video path.
      key: path relative to the video root; masks mirror it (``<mask_dir>/<key stem>.npz``).
      label: class index.
      source: where the record came from (``"trainlist01.txt line 3"``), for error messages.
    """

    path: str
    key: str
    label: int
    source: str


@dataclasses.dataclass(frozen=True)
class Layout:
    """The records of one subset plus the class index."""

    records: tuple[VideoRecord, ...]
    class_names: tuple[str, ...]


def _lines(path: str):
    if not os.path.isfile(path):
        raise LayoutError(f"{path}: split/index file not found.")
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, line.split()


def _check_subset(subset: str, allowed=("train", "test")) -> None:
    if subset not in allowed:
        raise ValueError(f"subset must be one of {allowed}; got {subset!r}.")


def _check_nonempty(layout: Layout, *, what: str, subset: str) -> Layout:
    """Every class of the index must have at least one *training* video (an empty class could
    never be learnt; a class absent from a test subset only drops out of the per-class table)."""
    if subset != "train":
        return layout
    counts = [0] * len(layout.class_names)
    for r in layout.records:
        counts[r.label] += 1
    empty = [layout.class_names[c] for c, n in enumerate(counts) if n == 0]
    if empty:
        raise LayoutError(
            f"{what}: {len(empty)} class(es) have no video: {empty[:10]}. Remove them from the "
            "class index or add videos."
        )
    return layout


def ucf101(*, video_dir: str, split_dir: str, split: int, subset: str) -> Layout:
    """UCF-101 official split ``split`` (1-3), ``subset`` 'train' or 'test'."""
    _check_subset(subset)
    if split not in (1, 2, 3):
        raise ValueError(f"UCF-101 split must be 1, 2 or 3; got {split}.")
    index_file = os.path.join(split_dir, "classInd.txt")
    class_names, seen = [], {}
    for number, fields in _lines(index_file):
        if len(fields) != 2 or not fields[0].isdigit() or int(fields[0]) != len(class_names) + 1:
            raise LayoutError(
                f"{index_file} line {number}: expected '<{len(class_names) + 1}> <ClassName>', "
                f"got {' '.join(fields)!r}."
            )
        class_names.append(fields[1])
        seen[fields[1].lower()] = len(class_names) - 1
    list_file = os.path.join(split_dir, f"{subset}list0{split}.txt")
    records = []
    for number, fields in _lines(list_file):
        where = f"{list_file} line {number}"
        key = fields[0]
        class_dir = key.split("/")[0]
        # The official lists spell a few class directories with other capitalisation than
        # classInd.txt (e.g. HandStandPushups); match case-insensitively.
        if "/" not in key or class_dir.lower() not in seen:
            raise LayoutError(f"{where}: class {class_dir!r} of {key!r} is not in {index_file}.")
        label = seen[class_dir.lower()]
        if len(fields) > 1 and not fields[1].isdigit():
            raise LayoutError(
                f"{where}: label {fields[1]!r} of {key!r} is not a class number (1 to "
                f"{len(class_names)} in {index_file}); expected '<Class>/<video> <number>'."
            )
        if len(fields) > 1 and int(fields[1]) - 1 != label:
            raise LayoutError(
                f"{where}: label {fields[1]} contradicts the class directory {class_dir!r} "
                f"(index {label + 1} in {index_file})."
            )
        records.append(VideoRecord(listed_path(video_dir, key), key, label, where))
    return _check_nonempty(
        Layout(tuple(records), tuple(class_names)), what=list_file, subset=subset
    )


def hmdb51(*, video_dir: str, split_dir: str, split: int, subset: str) -> Layout:
    """HMDB-51 official split ``split`` (1-3): code 1 = train, 2 = test, 0 = unused."""
    _check_subset(subset)
    if split not in (1, 2, 3):
        raise ValueError(f"HMDB-51 split must be 1, 2 or 3; got {split}.")
    suffix = f"_test_split{split}.txt"
    if not os.path.isdir(split_dir):
        raise LayoutError(f"{split_dir}: HMDB-51 split directory not found.")
    files = sorted(f for f in os.listdir(split_dir) if f.endswith(suffix))
    if not files:
        raise LayoutError(f"{split_dir}: no '*{suffix}' split files.")
    class_names = tuple(f[: -len(suffix)] for f in files)
    want = {"train": "1", "test": "2"}[subset]
    records = []
    for label, (name, file) in enumerate(zip(class_names, files, strict=True)):
        path = os.path.join(split_dir, file)
        for number, fields in _lines(path):
            if len(fields) != 2 or fields[1] not in ("0", "1", "2"):
                raise LayoutError(
                    f"{path} line {number}: expected '<video> <0|1|2>', got {' '.join(fields)!r}."
                )
            if fields[1] == want:
                key = f"{name}/{fields[0]}"
                records.append(VideoRecord(
                    listed_path(video_dir, key), key, label, f"{path} line {number}"
                ))
    return _check_nonempty(
        Layout(tuple(records), class_names), what=f"{split_dir} ({subset})", subset=subset
    )


#: The extension the anonymiser gives its videos, by its ``store``
#: (:func:`maskdp_jax.anonymize.pipeline.output_name`). A listed video that is missing is read
#: from its anonymised output of the same stem.
ANONYMISED_EXTENSIONS = {"lossless": ".mkv", "h264": ".mp4"}


def listed_path(video_dir: str, key: str) -> str:
    """The file a split file's ``key`` names under ``video_dir``: the file itself, or, where it
    is missing, the anonymiser's output of the same stem (``.mkv``, or ``.mp4`` for its h264
    store), whose name follows its container, not the source's (an official list names
    ``v_X.avi``; ``python -m maskdp_jax.anonymize`` writes ``v_X.mkv``)."""
    path = os.path.join(video_dir, key)
    if os.path.isfile(path):
        return path
    stem = os.path.splitext(path)[0]
    return next((stem + ext for ext in ANONYMISED_EXTENSIONS.values()
                 if os.path.isfile(stem + ext)),
                path)


def _video_files(video_dir: str) -> list[str]:
    if not os.path.isdir(video_dir):
        raise LayoutError(f"{video_dir}: video directory not found.")
    return sorted(f for f in os.listdir(video_dir) if f.lower().endswith(VIDEO_EXTENSIONS))


def ntu60(*, video_dir: str, protocol: str, subset: str) -> Layout:
    """NTU RGB+D 60, ``protocol`` 'xsub' or 'xview', from the file names in ``video_dir``."""
    _check_subset(subset)
    if protocol not in ("xsub", "xview"):
        raise ValueError(f"NTU protocol must be 'xsub' or 'xview'; got {protocol!r}.")
    records = []
    for name in _video_files(video_dir):
        m = _NTU_NAME.match(name)
        if m is None:
            raise LayoutError(
                f"{os.path.join(video_dir, name)}: not an NTU RGB+D file name "
                "SsssCcccPpppRrrrAaaa_rgb.avi (or the anonymiser's .mkv / .mp4)."
            )
        camera, performer, action = int(m[2]), int(m[3]), int(m[5])
        if not 1 <= action <= 60:
            raise LayoutError(
                f"{os.path.join(video_dir, name)}: action A{action:03d} is not one of NTU RGB+D "
                "60's actions A001-A060 (NTU RGB+D 120 file?)."
            )
        is_train = (performer in NTU60_XSUB_TRAIN_SUBJECTS if protocol == "xsub"
                    else camera in NTU60_XVIEW_TRAIN_CAMERAS)
        if is_train == (subset == "train"):
            records.append(VideoRecord(
                os.path.join(video_dir, name), name, action - 1, f"file name in {video_dir}"
            ))
    class_names = tuple(f"A{i + 1:03d} {a}" for i, a in enumerate(NTU60_ACTIONS))
    return _check_nonempty(
        Layout(tuple(records), class_names), what=f"{video_dir} ({protocol})", subset=subset
    )


def toyota_smarthome(*, video_dir: str, protocol: str, subset: str) -> Layout:
    """Toyota Smarthome, ``protocol`` 'cs', 'cv1' or 'cv2' (see the module docstring's caveat)."""
    if protocol not in ("cs", "cv1", "cv2"):
        raise ValueError(f"Smarthome protocol must be 'cs', 'cv1' or 'cv2'; got {protocol!r}.")
    _check_subset(subset, ("train", "test") if protocol == "cs" else ("train", "val", "test"))
    parsed = []
    for name in _video_files(video_dir):
        m = _TSH_NAME.match(name)
        if m is None:
            raise LayoutError(
                f"{os.path.join(video_dir, name)}: not a Smarthome name "
                "<Activity>_pXX_rYY_vZZ_cWW.mp4 (or the anonymiser's .mkv)."
            )
        parsed.append((name, m[1], int(m[2]), int(m[5])))
    if protocol == "cs":
        class_names = tuple(sorted({p[1] for p in parsed}))

        def member(subject, camera):
            return (subject in TSH_CS_TRAIN_SUBJECTS) == (subset == "train")
    else:
        cams = TSH_CV_CAMERAS[protocol]
        train_acts = {p[1] for p in parsed if p[3] in cams["train"]}
        test_acts = {p[1] for p in parsed if p[3] in cams["test"]}
        class_names = tuple(sorted(train_acts & test_acts))

        def member(subject, camera):
            return camera in cams[subset]
    index = {c: i for i, c in enumerate(class_names)}
    records = tuple(
        VideoRecord(os.path.join(video_dir, name), name, index[act], f"file name in {video_dir}")
        for name, act, subject, camera in parsed
        if act in index and member(subject, camera)
    )
    return _check_nonempty(
        Layout(records, class_names), what=f"{video_dir} ({protocol})", subset=subset
    )


def seeded_split(keys_by_class: dict[str, list[str]], *, test_fraction: float,
                 seed: int) -> set[str]:
    """The ``<class>/<file>`` keys that the seeded, stratified split holds out (module docstring).

    >>> sorted(seeded_split({"a": ["a/1", "a/2", "a/3", "a/4"], "b": ["b/1"]},
    ...                     test_fraction=0.25, seed=0))
    ['a/2']
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1); got {test_fraction!r}.")
    held_out = set()
    for keys in keys_by_class.values():
        n = len(keys)
        if n < 2:
            continue  # a lone video trains (a class needs a training video)
        k = min(max(round(test_fraction * n), 1), n - 1)
        # The stem, not the file name: a video keeps its side when it is re-encoded (the
        # anonymiser's .mkv of a source .mp4 falls where the source does).
        rank = sorted(keys, key=lambda key: hashlib.sha256(
            f"{seed}/{os.path.splitext(key)[0]}".encode()).hexdigest())
        held_out.update(rank[:k])
    return held_out


def folder(*, video_dir: str, split_dir: str, subset: str, test_fraction: float = 0.2,
           split_seed: int = 0) -> Layout:
    """``<video_dir>/<class>/<video>``; split files ``<split_dir>/<subset>.txt``, the other
    videos where one of train/test is missing, or a seeded stratified split (module docstring)."""
    _check_subset(subset, ("train", "val", "test"))
    if not os.path.isdir(video_dir):
        raise LayoutError(f"{video_dir}: video directory not found.")
    class_names = tuple(sorted(
        d for d in os.listdir(video_dir) if os.path.isdir(os.path.join(video_dir, d))
    ))
    if not class_names:
        raise LayoutError(f"{video_dir}: no class folders.")
    for c in class_names:
        if not _video_files(os.path.join(video_dir, c)):
            raise LayoutError(f"{os.path.join(video_dir, c)}: class folder has no video.")
    index = {c: i for i, c in enumerate(class_names)}
    root = split_dir or video_dir

    def listed(name: str) -> list[VideoRecord] | None:
        path = os.path.join(root, f"{name}.txt")
        if not os.path.isfile(path):
            return None
        out = []
        for number, fields in _lines(path):
            key = fields[0]
            where = f"{path} line {number}"
            if "/" not in key or key.split("/")[0] not in index:
                raise LayoutError(f"{where}: class of {key!r} is not a folder of {video_dir}.")
            out.append(VideoRecord(listed_path(video_dir, key), key, index[key.split("/")[0]],
                                   where))
        return out

    def scanned(exclude: set[str], source: str) -> list[VideoRecord]:
        return [VideoRecord(os.path.join(video_dir, c, name), f"{c}/{name}", index[c], source)
                for c in class_names for name in _video_files(os.path.join(video_dir, c))
                if f"{c}/{name}" not in exclude]

    split_file = os.path.join(root, f"{subset}.txt")
    records = listed(subset)
    if records is None and subset == "val":
        raise LayoutError(f"{split_file}: split file for subset 'val' not found.")
    if records is None:
        other_name = "test" if subset == "train" else "train"
        other = listed(other_name)
        if other is not None:
            records = scanned({r.key for r in other},
                              f"folder scan (videos that {other_name}.txt does not list)")
        else:
            keys = {c: [f"{c}/{n}" for n in _video_files(os.path.join(video_dir, c))]
                    for c in class_names}
            test = seeded_split(keys, test_fraction=test_fraction, seed=split_seed)
            source = f"seeded split (seed {split_seed}, test fraction {test_fraction:g})"
            if subset == "test":
                records = [r for r in scanned(set(), source) if r.key in test]
            else:
                records = scanned(test, source)
    return _check_nonempty(
        Layout(tuple(records), class_names), what=split_file, subset=subset
    )
