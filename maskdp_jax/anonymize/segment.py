"""``f_seg``: person masks, four ways (each a :class:`maskdp_jax.anonymize.stages.Segmenter`).

* :class:`FacePeople` (the default, ``reads="video"``): a neural face detector (CenterFace,
  :mod:`maskdp_jax.anonymize.centerface`) finds each face and OpenCV's HOG people detector
  (:mod:`maskdp_jax.anonymize.bodies`) each upright body, face or not (back views, distant
  people); BlazePose (:mod:`maskdp_jax.anonymize.pose`) checks each body, segments each person
  and gives their keypoints in a square crop around them (``refine="grabcut"``: faces only,
  GrabCut in a body box below the face instead, seeded with the face and the chest as person).
  The models' files ship in ``anonymize/weights/`` (:mod:`maskdp_jax.anonymize.model_files`)
  and in OpenCV. People the detectors miss (sitting or lying people without a visible face,
  people under ~48 px, heavily occluded people) stay private.
* :class:`SelfieSegmentation` (``reads="video"``): MediaPipe's selfie segmentation model on the
  whole frame: a person mask without a face detector (back views too), for close-up footage
  (video calls, one or two people near the camera); on wide shots and on non-human scenes it
  marks non-people (measured in docs/results/anonymize_quality), hence not the default.
* :class:`MaskFiles` (``reads="none"``): masks you made with your own segmenter, mirroring the
  video paths (``<dir>/<key stem>.npy|.npz`` or a gray mask video, found and read as
  ``train.py`` finds and reads masks, 1/255 = person).
* :class:`BackgroundSubtraction` (``reads="video"``): OpenCV's MOG2 for static cameras (NTU RGB+D,
  Toyota Smarthome), opened/closed by morphology, small blobs dropped and, optionally, only blobs
  near a person found by OpenCV's people/face detectors kept. It models every pixel's history:
  the background is read, and anything that moves in it can enter the mask.
* :class:`GrabCutPeople` : OpenCV's GrabCut inside person boxes. Boxes from OpenCV's HOG people
  detector and frontal-face cascade (``reads="video"``: the detectors scan every pixel) or from
  box files (``reads="boxes"``: GrabCut is run on the box plus ``margin`` cropped out of the frame,
  so the mask depends on no pixel outside it; this is the mode whose mask depends on the person's
  pixels, and the margin's, only; whoever made the boxes answers for what *they* read, and the
  cleanup's temporal vote mixes in the boxes of neighbouring frames).

OpenCV is the library (its classical detectors and segmenters run offline on a CPU); the choice
between them is the user's (configs/anonymize.py). Detectors are imprecise: the summary reports
the frames where no person was found.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from maskdp_jax.anonymize import annotations, centerface, model_files, skeletons
from maskdp_jax.anonymize import bodies as bodies_lib
from maskdp_jax.anonymize import movenet as movenet_lib
from maskdp_jax.anonymize import pose as pose_lib
from maskdp_jax.anonymize.opencv import cv2 as _cv2
from maskdp_jax.anonymize.stages import InputError
from maskdp_jax.data import decode
from maskdp_jax.data.video_dataset import find_mask


class MaskFiles:
    """Person masks read from files mirroring the video paths (1 or 255 = person).

    A missing file, a non-binary mask, or a mask whose ``[T, H, W]`` differs from the video's
    raises :class:`maskdp_jax.data.decode.BadVideoError` naming the file.
    """

    reads = "none"

    def __init__(self, mask_dir: str):
        if not os.path.isdir(mask_dir):
            raise InputError(f"{mask_dir}: person-mask directory not found.")
        self.mask_dir = mask_dir

    def __call__(self, video: np.ndarray, key: str) -> np.ndarray:
        path = find_mask(self.mask_dir, key)  # train.py's lookup: same names, same order
        mask, _ = decode.load_mask(path)
        return decode.binarize_mask(mask, path=path, video_shape=video.shape).astype(bool)


def detect_people(video: np.ndarray, *, face_scale: float = 1.1) -> list[np.ndarray]:
    """Per frame, int ``[n, 4]`` person boxes ``(x0, y0, x1, y1)`` (exclusive ends): OpenCV's HOG
    people detector, plus frontal faces grown to head and shoulders (the HOG window is 64 x 128
    px: close-ups are found by their face)."""
    cv2 = _cv2()
    hog = cv2.HOGDescriptor()
    hog.setSVMDetector(bodies_lib.coefficients())
    face = cv2.CascadeClassifier(os.path.join(cv2.data.haarcascades,
                                              "haarcascade_frontalface_default.xml"))
    if face.empty():
        raise RuntimeError("OpenCV's haarcascade_frontalface_default.xml did not load; reinstall "
                           "opencv-python-headless (pip install -r requirements.txt).")
    t, h, w, _ = video.shape
    out = []
    for frame in video:
        bgr = frame[..., ::-1]
        boxes = []
        if h >= 128 and w >= 64:
            found, _ = hog.detectMultiScale(np.ascontiguousarray(bgr), winStride=(8, 8))
            boxes += [(x, y, x + bw, y + bh) for x, y, bw, bh in np.reshape(found, (-1, 4))]
        gray = cv2.cvtColor(np.ascontiguousarray(bgr), cv2.COLOR_BGR2GRAY)
        faces = face.detectMultiScale(gray, face_scale, 4)
        for x, y, fw, fh in np.reshape(faces, (-1, 4)):
            boxes.append((x - 0.75 * fw, y - 0.4 * fh, x + 1.75 * fw, y + 3.5 * fh))
        out.append(_clip_boxes(np.reshape(np.asarray(boxes, np.float64), (-1, 4)), h, w))
    return out


def fill_gaps(boxes: list[np.ndarray], max_gap: int) -> list[np.ndarray]:
    """Per frame, the rows found there, then, for each person found within ``max_gap`` frames
    but not here, their row from the nearest frame that has them (the earlier one on a tie):
    detectors miss frames; a person does not vanish for a frame, nor while the others stay found.

    People are followed by :func:`tracks`: a walker found in every frame is one person, never a
    second one carried from a neighbouring frame. The whole video at once; :class:`GapFiller`
    gives the same rows frame by frame (what a stream over windows of frames uses).

    Args:
      boxes: per frame, float ``[n, k]`` rows whose first four columns are the box ``(x0, y0,
        x1, y1)`` that places the person (a detection, or the crop a segmenter reads).
      max_gap: frames a row is carried at most.

    Returns:
      Per frame, ``[m, k]`` rows of the input's dtype: the frame's own rows first, then the
      carried copies.
    """
    # an empty frame may come as a flat array; a 2-D one, empty or not, gives the row width
    width = max((np.shape(b)[-1] for b in boxes if np.ndim(b) == 2), default=4)
    dtype = np.result_type(*[np.asarray(b) for b in boxes if np.size(b)]) if any(
        np.size(b) for b in boxes) else np.float64  # pixel boxes stay integers
    filler = GapFiller(max_gap)
    out = []
    for b in boxes:
        out += filler.push(np.reshape(np.asarray(b, dtype), (-1, width)))
    return out + filler.close()


#: A person moves less than this fraction of their box's height per frame (a walker at 10
#: frames/s about a quarter; the tolerance grows with the frames between two sightings).
SAME_PLACE = 0.4


def tracks(boxes: list[np.ndarray], max_gap: int) -> list[dict[int, int]]:
    """Each person's rows over the frames: ``{frame: row index}`` per person.

    A row joins the person last seen nearest to it, at most ``2 max_gap + 1`` frames earlier
    (a gap :func:`fill_gaps` fills from both sides), if
    their boxes' centres lie within :data:`SAME_PLACE` of the taller box's height per frame
    between them; otherwise it starts a person. Greedy, in the rows' order (a detector's rows
    come best first): what a simple linker does where no appearance is compared. Online
    (:class:`Tracks`): a frame's links depend on the frames before it only.
    """
    linker = Tracks(max_gap)
    for rows in boxes:
        linker.add(rows)
    return [person.frames for person in linker.people]


@dataclasses.dataclass
class _Person:
    frames: dict[int, int]  # frame -> row index, frames in increasing order
    last: int


class Tracks:
    """:func:`tracks` one frame at a time (:meth:`add`). ``people`` lists the people in the order
    they were first seen; :meth:`forget` drops those a stream no longer needs.

    Args:
      max_gap: as in :func:`tracks`.
    """

    def __init__(self, max_gap: int):
        self.max_gap = max_gap
        self.people: list[_Person] = []
        self.rows: dict[int, np.ndarray] = {}  # frame -> its rows, while a link may read them
        self.frames = 0

    def add(self, rows: np.ndarray) -> None:
        """Link the next frame's rows (float ``[n, k]``, box first) to the people before it."""
        t = self.frames
        taken: set[int] = set()
        for r, row in enumerate(rows):
            best, best_distance = None, np.inf
            for k, person in enumerate(self.people):
                gap = t - person.last
                if k in taken or not 1 <= gap <= 2 * self.max_gap + 1:
                    continue
                other = self.rows[person.last][person.frames[person.last]]
                height = max(row[3] - row[1], other[3] - other[1])
                distance = np.hypot((row[0] + row[2] - other[0] - other[2]) / 2,
                                    (row[1] + row[3] - other[1] - other[3]) / 2)
                if distance < SAME_PLACE * height * gap and distance < best_distance:
                    best, best_distance = k, distance
            if best is None:
                self.people.append(_Person({t: r}, t))
                taken.add(len(self.people) - 1)
            else:
                self.people[best].frames[t] = r
                self.people[best].last = t
                taken.add(best)
        self.rows[t] = rows
        self.frames += 1

    def forget(self, before: int) -> None:
        """Drop what no link from the next frame on, and no question about frames from
        ``before`` on, can need: the rows of older frames, and people last seen before both."""
        keep = min(before, self.frames - 2 * self.max_gap - 1)
        self.people = [p for p in self.people if p.last >= keep]
        for frame in [f for f in self.rows if f < keep]:
            del self.rows[frame]


class GapFiller:
    """:func:`fill_gaps` over a stream of frames: :meth:`push` one frame's rows, get the frames
    whose rows are final (``max_gap`` frames later: a person seen again within ``max_gap``
    frames is carried back), :meth:`close` for the rest. Holds ``O(max_gap)`` frames of rows and
    the people seen in them, whatever the video's length."""

    def __init__(self, max_gap: int):
        self.max_gap = max_gap
        self.tracks = Tracks(max_gap)
        self.done = 0  # frames returned

    def push(self, rows: np.ndarray) -> list[np.ndarray]:
        """float ``[n, k]`` rows of the next frame -> the frames now final (0 or 1 of them)."""
        self.tracks.add(rows)
        return self._ready(self.tracks.frames - self.max_gap)

    def close(self) -> list[np.ndarray]:
        """The frames not yet returned (the video has ended)."""
        return self._ready(self.tracks.frames)

    def _ready(self, until: int) -> list[np.ndarray]:
        out = []
        g = self.max_gap
        while self.done < until:
            i = self.done
            rows = self.tracks.rows[i]
            carried = []
            for person in self.tracks.people:
                if i in person.frames:
                    continue
                near = next((j for d in range(1, g + 1) for j in (i - d, i + d)
                             if j in person.frames), None)
                if near is not None:
                    carried.append(self.tracks.rows[near][person.frames[near]])
            out.append(np.concatenate([rows, np.reshape(np.asarray(carried, rows.dtype),
                                                        (-1, rows.shape[1]))]))
            self.done += 1
            self.tracks.forget(self.done - g)
        return out


def read_boxes(boxes_dir: str, key: str, num_frames: int,
               size: tuple[int, int]) -> list[np.ndarray]:
    """Person boxes of video ``key`` from ``boxes_dir``, in pixels, ends exclusive: its box file
    ``<key stem>.json``, ``{"boxes": [[frame, x0, y0, x1, y1], ...]}`` (an annotation tool's, or
    converted from a dataset's poses), or else, for NTU RGB+D, the dataset's own skeleton file
    (:func:`maskdp_jax.anonymize.skeletons.skeleton_path`, boxes from the joints).

    Raises:
      InputError: neither file exists (both named), or the one found is malformed.
    """
    path = os.path.splitext(os.path.join(boxes_dir, key))[0] + ".json"
    skeleton = skeletons.skeleton_path(boxes_dir, key)
    if os.path.exists(path):
        rows = annotations.read_frame_rows(path, field="boxes", what="person box", width=5,
                                           num_frames=num_frames,
                                           layout="[[frame, x0, y0, x1, y1], ...]")
    elif os.path.exists(skeleton):
        rows = skeletons.read_boxes(skeleton, num_frames, size)
    else:
        raise InputError(f"{key}: no person boxes in {boxes_dir} (looked for {path} and the NTU "
                         f"skeleton file {skeleton}).")
    return [_clip_boxes(r, *size) for r in rows]


def _clip_boxes(boxes: np.ndarray, h: int, w: int) -> np.ndarray:
    b = np.round(boxes).astype(np.int64)
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, w)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, h)
    return b[(b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])]


class GrabCutPeople:
    """GrabCut (OpenCV) inside each person box, on the box plus ``margin`` px cut out of the frame.

    Args:
      boxes_dir: ``""``: boxes from :func:`detect_people` (``reads="video"``); else a folder of
        box files (:func:`read_boxes`, ``reads="boxes"``).
      margin: px of context around a box given to GrabCut as sure background.
      iterations: GrabCut iterations.
      max_gap: frames a detection is carried to frames where the detector found nobody.
    """

    def __init__(self, *, boxes_dir: str = "", margin: int = 8, iterations: int = 3,
                 max_gap: int = 12):
        if margin < 1 or iterations < 1 or max_gap < 0:
            raise InputError("GrabCutPeople needs margin >= 1, iterations >= 1, max_gap >= 0.")
        if boxes_dir and not os.path.isdir(boxes_dir):
            raise InputError(f"{boxes_dir}: person-box directory not found.")
        self.boxes_dir, self.margin, self.iterations, self.max_gap = (
            boxes_dir, margin, iterations, max_gap)
        self.reads = "boxes" if boxes_dir else "video"

    def __call__(self, video: np.ndarray, key: str) -> np.ndarray:
        cv2 = _cv2()
        t, h, w, _ = video.shape
        if self.boxes_dir:
            boxes = read_boxes(self.boxes_dir, key, t, (h, w))
        else:
            boxes = fill_gaps(detect_people(video), self.max_gap)
        q = np.zeros((t, h, w), bool)
        for i, frame_boxes in enumerate(boxes):
            for x0, y0, x1, y1 in frame_boxes:
                cx0, cy0 = max(x0 - self.margin, 0), max(y0 - self.margin, 0)
                cx1, cy1 = min(x1 + self.margin, w), min(y1 + self.margin, h)
                crop = np.ascontiguousarray(video[i, cy0:cy1, cx0:cx1, ::-1])
                rect = (int(x0 - cx0), int(y0 - cy0), int(x1 - x0), int(y1 - y0))
                if rect[2] < 2 or rect[3] < 2 or rect[2] >= crop.shape[1] - 1 and \
                        rect[3] >= crop.shape[0] - 1:
                    continue  # no background left to model: a box that fills the frame
                labels = np.zeros(crop.shape[:2], np.uint8)
                cv2.setRNGSeed(0)  # GrabCut's GMM initialisation: deterministic output
                cv2.grabCut(crop, labels, rect, np.zeros((1, 65)), np.zeros((1, 65)),
                            self.iterations, cv2.GC_INIT_WITH_RECT)
                person = (labels == cv2.GC_FGD) | (labels == cv2.GC_PR_FGD)
                q[i, cy0:cy1, cx0:cx1] |= person
        return q


class BackgroundSubtraction:
    """MOG2 background subtraction for static cameras, then morphology and blob filtering.

    The model first learns the whole video, every frame with the same weight (learning rate
    1/T), then labels each frame with the learnt model (so the first frames are labelled as well
    as the last). A pixel's background is made of its most frequent colours up to
    ``background_ratio`` of the frames (MOG2's default 0.9 would call a person who covers a pixel
    in 10 % of the frames background). Shadows (MOG2's 127) count as background.

    Args:
      history: frames of history of the MOG2 model.
      var_threshold: MOG2's squared Mahalanobis threshold.
      background_ratio: MOG2's background ratio (above).
      min_area: blobs smaller than this fraction of the frame are dropped.
      detector: ``"people"``: keep only blobs that overlap a box of :func:`detect_people` (gaps
        filled over ``max_gap`` frames); ``"none"``: keep every blob.
    """

    reads = "video"

    def __init__(self, *, history: int = 200, var_threshold: float = 16.0,
                 background_ratio: float = 0.6, min_area: float = 0.002,
                 detector: str = "people", max_gap: int = 12):
        if detector not in ("people", "none"):
            raise InputError(f"detector must be 'people' or 'none'; got {detector!r}.")
        self.history, self.var_threshold, self.min_area = history, var_threshold, min_area
        self.background_ratio = background_ratio
        self.detector, self.max_gap = detector, max_gap

    def __call__(self, video: np.ndarray, key: str) -> np.ndarray:
        cv2 = _cv2()
        t, h, w, _ = video.shape
        model = cv2.createBackgroundSubtractorMOG2(self.history, self.var_threshold, True)
        model.setBackgroundRatio(self.background_ratio)
        for frame in video:
            model.apply(np.ascontiguousarray(frame[..., ::-1]), learningRate=1.0 / t)
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
        boxes = (fill_gaps(detect_people(video), self.max_gap) if self.detector == "people"
                 else None)
        q = np.zeros((t, h, w), bool)
        for i, frame in enumerate(video):
            fg = (model.apply(np.ascontiguousarray(frame[..., ::-1]), learningRate=0) == 255)
            fg = cv2.morphologyEx(fg.astype(np.uint8), cv2.MORPH_OPEN, kernel)
            fg = cv2.morphologyEx(fg, cv2.MORPH_CLOSE, kernel)
            n, labels, stats, _ = cv2.connectedComponentsWithStats(fg, connectivity=8)
            for c in range(1, n):
                x, y, bw, bh, area = stats[c]
                if area < self.min_area * h * w:
                    continue
                if boxes is not None and not any(
                        x < x1 and x + bw > x0 and y < y1 and y + bh > y0
                        for x0, y0, x1, y1 in boxes[i]):
                    continue
                q[i] |= labels == c
        return q


def pose_box(face: np.ndarray) -> np.ndarray:
    """The square ``(x0, y0, x1, y1)`` the pose model segments for a face ``(x0, y0, x1, y1)``:
    7.5 face heights on a side, centred 3.4 face heights below the face's top (an upright
    person's head to knees or feet; close-ups reach past the frame and are zero-padded)."""
    x0, y0, x1, y1 = face[:4]
    fh = y1 - y0
    cx, cy, half = (x0 + x1) / 2, y0 + 3.4 * fh, 3.75 * fh
    return np.array([cx - half, cy - half, cx + half, cy + half])


class SegmenterPoses:
    """A pose stage that returns the poses a segmenter found while segmenting (e.g.
    :class:`FacePeople`): it reads what the segmenter reads."""

    def __init__(self, segmenter):
        self.segmenter = segmenter
        self.reads = segmenter.reads

    def __call__(self, video: np.ndarray, key: str) -> list[np.ndarray]:
        return self.segmenter.poses(video, key)


def body_prior(face: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Where a person whose face is ``face`` (``x0, y0, x1, y1``) probably is.

    Returns ``(box, likely, sure)``: the box GrabCut may mark person (2 face widths either side
    of the face's centre, from a third of a face above it to 6 faces below it: head, shoulders,
    arms and torso of an upright person, legs in a wide shot), the boxes seeded as probable
    person (the head with hair and the torso below it) and those seeded as sure person (the
    face's centre and the neck and upper chest). Proportions are a prior for upright people;
    GrabCut then follows the colours inside the box.
    """
    x0, y0, x1, y1 = face[:4]
    fw, fh = x1 - x0, y1 - y0
    cx = (x0 + x1) / 2
    box = np.array([cx - 2.0 * fw, y0 - 0.35 * fh, cx + 2.0 * fw, y1 + 6.0 * fh])
    likely = [np.array([x0 - 0.1 * fw, y0 - 0.3 * fh, x1 + 0.1 * fw, y1 + 0.1 * fh]),
              np.array([cx - 0.9 * fw, y1, cx + 0.9 * fw, y1 + 3.0 * fh])]
    sure = [np.array([cx - 0.3 * fw, y0 + 0.2 * fh, cx + 0.3 * fw, y1 - 0.1 * fh]),
            np.array([cx - 0.25 * fw, y1 + 0.15 * fh, cx + 0.25 * fw, y1 + 1.2 * fh])]
    return box, likely, sure


def attached_to_person(mask: np.ndarray, face: np.ndarray | None,
                       keypoints: np.ndarray | None = None) -> np.ndarray:
    """bool ``[H, W]``: the 8-connected components of ``mask`` (bool ``[H, W]``, one person's
    segmentation) that share a pixel with the face box ``face`` (``x0, y0, x1, y1`` in frame
    pixels; ``None`` for a person found by their body) or hold one of the person's
    ``keypoints`` (float ``[K, 3]``: ``x, y, visibility`` in frame pixels; those with visibility
    above :data:`VISIBLE` count); the rest of ``mask`` is dropped. Parts of the box or keypoints
    outside the frame are ignored.

    A person's pixels are connected to their face, or (where an occluder or a missed neck splits
    them) to a body part the pose model sees; a component touching neither is background the
    model marked beside them (on compressed or blurred frames, specks of a few dozen px; on
    bikes, patches of a car in front of the cyclist), which would become an avatar fragment and a
    tubelet of its own. The rule only removes pixels: what it drops stays private.
    """
    h, w = mask.shape
    if not mask.any():
        return np.zeros_like(mask)
    _, labels = _cv2().connectedComponents(mask.astype(np.uint8), connectivity=8)
    seeds = [np.zeros(0, labels.dtype)]
    if face is not None:
        x0, y0 = max(int(np.floor(face[0])), 0), max(int(np.floor(face[1])), 0)
        x1, y1 = min(int(np.ceil(face[2])), w), min(int(np.ceil(face[3])), h)
        seeds.append(labels[y0:y1, x0:x1].ravel())
    if keypoints is not None and len(keypoints):
        kp = np.asarray(keypoints)
        x, y = np.floor(kp[:, 0]).astype(int), np.floor(kp[:, 1]).astype(int)
        ok = (kp[:, 2] > VISIBLE) & (x >= 0) & (x < w) & (y >= 0) & (y < h)
        seeds.append(labels[y[ok], x[ok]])
    touching = np.unique(np.concatenate(seeds))
    return np.isin(labels, touching[touching > 0])


def _reaches_past(roi: np.ndarray, crop: np.ndarray, fraction: float) -> bool:
    """Whether square ``roi`` leaves square ``crop`` (both ``x0, y0, x1, y1``) by more than
    ``fraction`` of the crop's side on some side."""
    slack = fraction * (crop[2] - crop[0])
    return bool(roi[0] < crop[0] - slack or roi[1] < crop[1] - slack
                or roi[2] > crop[2] + slack or roi[3] > crop[3] + slack)


def _leaves_frame(roi: np.ndarray, h: int, w: int, fraction: float) -> bool:
    """Whether square ``roi`` (``x0, y0, x1, y1``) leaves an ``h`` x ``w`` frame by more than
    ``fraction`` of its own side on some side."""
    slack = fraction * (roi[2] - roi[0])
    return bool(roi[0] < -slack or roi[1] < -slack or roi[2] > w + slack or roi[3] > h + slack)


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """The share of the smaller of masks ``a`` and ``b`` that lies in the other."""
    smaller = min(np.count_nonzero(a), np.count_nonzero(b))
    return np.count_nonzero(a & b) / smaller if smaller else 0.0


#: BlazePose's visibility (a probability) above which a keypoint anchors a mask component.
VISIBLE = 0.5
#: Columns of a row of :meth:`FacePeople.proposals`: the crop (4), the face box (4), whether the
#: crop comes from a body detection (1), and the person's MoveNet keypoints (17 x 3, NaN for a
#: person no MoveNet instance found).
ROW_WIDTH = 9 + 3 * len(movenet_lib.KEYPOINTS)


class FacePeople:
    """Person masks (and poses) from neural face detections and, with ``bodies`` other than
    ``"none"``, from body detections too: CenterFace finds faces, a body detector finds people
    whether their face shows or not (back views, distant people): MoveNet MultiPose, one
    instance per person with its keypoints (``bodies="movenet"``,
    :mod:`maskdp_jax.anonymize.movenet`), or OpenCV's HOG people detector, upright people only
    (``bodies="hog"``, :mod:`maskdp_jax.anonymize.bodies`); for each person BlazePose segments
    them and gives
    their 33 keypoints in a square crop (``refine="pose"``, the default,
    :mod:`maskdp_jax.anonymize.pose`); or :func:`body_prior` turns each face into a body box and
    seeds for GrabCut (``refine="grabcut"``: no pose model, faces only, coarser).

    One person, one crop (:meth:`proposals`): a face that holds one of a MoveNet instance's head
    keypoints, or else whose centre lies in the top 40 % of a body box, is that body's face, and
    the crop is the larger of the body box's (the person's whole
    extent, legs included) and the face's (:func:`pose_box`: in a close-up the body box holds only
    a part of the person); a face with no body gets :func:`pose_box`; a body with no face gets its
    box's crop.
    Where the pose model's alignment points say the person reaches past the crop by more than
    :attr:`REGROW` of its side (a standing person below a face crop), a second pass segments the
    crop they give (``roi`` of :class:`maskdp_jax.anonymize.pose.PoseOutput`), kept if the person is
    still present there. A body without a face is kept only where the pose model's
    person-presence score is at least ``presence`` (HOG also fires on poles, signs and vans), in
    the second pass's crop too where one runs, as is a person carried over a gap (each person is
    carried on their own: :func:`fill_gaps`). A person whose mask lies more than
    :attr:`SAME_PERSON` inside one found before them in the frame (or the other way round) is
    that person again (two boxes on one body, or a person carried from another frame under
    another crop): their mask joins the frame's, their pose is not drawn twice.

    People in groups (``bodies="movenet"``): BlazePose, given one person's crop, segments every
    person in it and may pose a neighbour. So each of a frame's MoveNet instances keeps the
    pixels of their mask nearer to their own skeleton than to any other instance's
    (:func:`maskdp_jax.anonymize.movenet.instance_map`): touching people's masks no longer lie
    inside each other, and neither is dropped as a second box on the other. Their pose is
    BlazePose's where it
    agrees with MoveNet's keypoints (median distance of the shared joints under :attr:`AGREE` of
    the person's height), else MoveNet's (17 keypoints: no hands or feet drawn).

    Of each person's mask only the parts connected to their face box or to a visible keypoint of
    their pose are kept (:func:`attached_to_person`): a detached speck beside them is not theirs
    (it would become an avatar fragment and a tubelet of its own).

    GrabCut runs on the body box plus ``margin`` cut out of the frame and shrunk so that its
    longer side is at most ``grabcut_side`` px (GrabCut's cost grows with the pixels it models;
    the mask is scaled back up). ``reads="video"``: the detectors scan every pixel, so whatever
    looks like a face or a person anywhere (a poster, a cartoon) can make a mask there, and the
    mask (public) depends on that; the crop the pose model segments includes background too.

    Args:
      threshold, max_side: the face detector's
        (:class:`maskdp_jax.anonymize.centerface.CenterFace`).
      refine: ``"pose"`` or ``"grabcut"`` (above).
      bodies: ``"movenet"`` or ``"hog"`` (people found without a face too; need
        ``refine="pose"``) or ``"none"``.
      body_min_height, body_max_side, body_threshold: the HOG detector's ``min_height`` (px),
        ``max_side`` (px) and ``threshold`` (:class:`maskdp_jax.anonymize.bodies.HOGBodies`).
      movenet_side, movenet_score, movenet_tiles: MoveNet's input side (px of the frame's longer
        side), the instance score a person needs and whether a frame with six people (the
        model's limit) is searched again in halves
        (:class:`maskdp_jax.anonymize.movenet.MoveNetPeople`).
      presence: the pose model's person-presence score a body without a face, or a person
        carried over a gap, needs to be kept.
      edge_people: keep a MoveNet person without a face whose pose the model aligns past the
        frame's edge (a person the frame cuts: legs-only, a shoulder) on the first crop's
        presence; the crop made again from that alignment is mostly outside the frame, and the
        presence there is low. Off, such a person is dropped like a person-like pattern whose
        alignment finds nobody. It matters with a ``movenet_score`` low enough to propose such
        people (0.05): that pair found legs-only people on the validation clips, and more false
        people on the fixture clips (the anonymisation record), so both stay off by default.
      margin: px of context around a body box given to GrabCut as sure background.
      grabcut_side: the longest side (px) GrabCut works at.
      iterations: GrabCut iterations.
      max_gap: frames a person is carried to frames where they were not detected (kept only where
        the pose model's presence is at least ``presence`` with ``refine="pose"``: the person may
        have left).
    """

    reads = "video"
    #: A crop is made again from the pose's alignment points where they reach past it by more
    #: than this fraction of its side.
    REGROW = 0.1
    #: The share of the smaller of two masks inside the other above which two detections in a
    #: frame are one person.
    SAME_PERSON = 0.5
    #: A body box's crop is this many times the box's longer side on a side (the HOG window
    #: holds a person in its middle three quarters: the crop leaves room for raised arms).
    BODY_CROP = 1.1
    #: A face belongs to a body box when its centre lies in this top fraction of the box.
    FACE_IN_BODY = 0.4
    #: MoveNet keypoint score from which a keypoint places a face, splits masks and is compared.
    KEYPOINT_SCORE = 0.3
    #: BlazePose's pose is the instance's when the shared joints' median distance to MoveNet's
    #: is under this fraction of the instance's box height.
    AGREE = 0.15

    def __init__(self, *, threshold: float = 0.5, max_side: int = 640, refine: str = "pose",
                 bodies: str = "movenet", body_min_height: int = 48, body_max_side: int = 1792,
                 body_threshold: float = 0.0, movenet_side: int = 640,
                 movenet_score: float = 0.2, movenet_tiles: bool = False,
                 presence: float = 0.5, edge_people: bool = False, margin: int = 8,
                 grabcut_side: int = 160, iterations: int = 3, max_gap: int = 4):
        if margin < 1 or iterations < 1 or max_gap < 0 or grabcut_side < 16:
            raise InputError("FacePeople needs margin >= 1, iterations >= 1, max_gap >= 0, "
                             "grabcut_side >= 16.")
        if refine not in ("pose", "grabcut"):
            raise InputError(f"refine must be 'pose' or 'grabcut'; got {refine!r}.")
        if bodies not in ("movenet", "hog", "none"):
            raise InputError(f"bodies must be 'movenet', 'hog' or 'none'; got {bodies!r}.")
        if bodies != "none" and refine != "pose":
            raise InputError(f"bodies={bodies!r} needs refine='pose': the pose model checks each "
                             "body box for a person and finds its extent. Set bodies='none' to "
                             "use refine='grabcut' (faces only).")
        if not 0 <= presence < 1:
            raise InputError(f"FacePeople needs 0 <= presence < 1; got {presence}.")
        self.detector = centerface.CenterFace(threshold=threshold, max_side=max_side)
        self.body_detector = (
            bodies_lib.HOGBodies(min_height=body_min_height, max_side=body_max_side,
                                 threshold=body_threshold) if bodies == "hog"
            else movenet_lib.MoveNetPeople(side=movenet_side, threshold=movenet_score,
                                           tiles=movenet_tiles)
            if bodies == "movenet" else None)
        self._pose = pose_lib.BlazePose() if refine == "pose" else None
        self.threshold, self.max_side, self.refine, self.margin = (
            threshold, max_side, refine, margin)
        self.bodies, self.body_min_height, self.body_max_side = (
            bodies, body_min_height, body_max_side)
        self.body_threshold, self.presence = body_threshold, presence
        self.movenet_side, self.movenet_score = movenet_side, movenet_score
        self.movenet_tiles, self.edge_people = movenet_tiles, edge_people
        self.grabcut_side, self.iterations, self.max_gap = grabcut_side, iterations, max_gap
        self.model = "; ".join(
            [model_files.describe("centerface.onnx")]
            + ([bodies_lib.DESCRIPTION] if bodies == "hog" else [])
            + ([model_files.describe("movenet_multipose_lightning.tflite")]
               if bodies == "movenet" else [])
            + ([model_files.describe("pose_landmark_full.tflite")] if refine == "pose" else []))
        self._last: tuple[str, int, list[np.ndarray]] | None = None

    def proposals(self, frame: np.ndarray) -> np.ndarray:
        """float64 ``[n, ROW_WIDTH]`` (:data:`ROW_WIDTH`), one row per person detected in uint8
        ``[H, W, 3]`` RGB ``frame``: the square crop ``(x0, y0, x1, y1)`` the pose model
        segments, the person's face box (NaN without a face), 1.0 where the crop comes from a
        body detection, and the person's MoveNet keypoints ``(x, y, score)`` (NaN where no
        MoveNet instance found them; the merge rule is in the class docstring). Faces with a body
        come first, then bodies by score, then faces alone by score."""
        faces = self.detector(frame)
        found = self.body_detector(frame) if self.body_detector is not None else np.zeros((0, 5))
        if isinstance(found, movenet_lib.People):
            bodies, keypoints = found.boxes, found.keypoints
        else:
            bodies, keypoints = np.reshape(found, (-1, 5)), None
        cx, cy = (faces[:, 0] + faces[:, 2]) / 2, (faces[:, 1] + faces[:, 3]) / 2
        free = np.ones(len(faces), bool)
        no_keypoints = [np.nan] * (ROW_WIDTH - 9)
        # holds[f, b]: face f holds one of instance b's confident head keypoints
        holds = np.zeros((len(faces), len(bodies)), bool)
        if keypoints is not None:
            for b, head in enumerate(keypoints[:, :5]):
                head = head[head[:, 2] >= self.KEYPOINT_SCORE]
                holds[:, b] = [bool(np.any((head[:, 0] >= f[0]) & (head[:, 0] < f[2])
                                           & (head[:, 1] >= f[1]) & (head[:, 1] < f[3])))
                               for f in faces]
        with_face, without_face = [], []
        for b in np.argsort(-bodies[:, 4], kind="stable"):
            x0, y0, x1, y1, _ = bodies[b]
            side = self.BODY_CROP * max(y1 - y0, x1 - x0)
            crop = [(x0 + x1 - side) / 2, (y0 + y1 - side) / 2, (x0 + x1 + side) / 2,
                    (y0 + y1 + side) / 2]
            inside = free & (cx >= x0) & (cx < x1) & (cy >= y0) & (
                cy < y0 + self.FACE_IN_BODY * (y1 - y0))
            extra = no_keypoints
            if keypoints is not None:
                extra = keypoints[b].ravel().tolist()
                # the face the instance's own head keypoints lie in; else one in the box's top
                # that holds no other instance's head
                own = free & holds[:, b]
                inside = own if own.any() else inside & ~holds.any(1)
            if inside.any():
                j = int(np.argmax(np.where(inside, faces[:, 4], -np.inf)))
                free[j] = False
                face_crop = pose_box(faces[j])
                if face_crop[2] - face_crop[0] > side:  # a close-up: the body box holds a part
                    crop = list(face_crop)
                with_face.append([*crop, *faces[j, :4], 1.0, *extra])
            else:
                without_face.append([*crop, *[np.nan] * 4, 1.0, *extra])
        alone = [[*pose_box(f), *f[:4], 0.0, *no_keypoints]
                 for f in faces[free][np.argsort(-faces[free, 4], kind="stable")]]
        return np.reshape(np.asarray(with_face + without_face + alone, np.float64),
                          (-1, ROW_WIDTH))

    def __call__(self, video: np.ndarray, key: str) -> np.ndarray:
        stream = self.stream(key)
        parts = [stream.push(video), stream.close()]
        q = np.concatenate([m for m, _ in parts]).reshape(video.shape[:3])
        self._last = (key, id(video), [p for _, found in parts for p in found])
        return q

    def stream(self, key: str) -> FacePeopleStream:
        """The masks and poses of a video given a window of frames at a time
        (:class:`FacePeopleStream`): the same as the whole video's, in memory that does not grow
        with its length."""
        return FacePeopleStream(self, key)

    def _frame(self, frame: np.ndarray, people: np.ndarray, own: int
               ) -> tuple[np.ndarray, np.ndarray]:
        """One frame's person mask (bool ``[H, W]``) and poses (float32 ``[n, 33, 3]``) from its
        rows (:meth:`proposals`, after :func:`fill_gaps`; its own ``own`` first, then the
        carried ones)."""
        h, w = frame.shape[:2]
        q = np.zeros((h, w), bool)
        # this frame's own MoveNet instances: distinct people
        instances = np.flatnonzero(~np.isnan(people[:own, 9]))
        kept = []  # (row, pose model's output, pose, face or None, whether an instance)
        for r, row in enumerate(people):
            crop, face = row[:4], row[4:8]
            has_face, carried = not np.isnan(face).any(), r >= own
            if self._pose is None:
                q |= attached_to_person(self._segment(frame, face), face)
                continue
            out = self._pose(frame, crop)
            if (carried or not has_face) and out.presence < self.presence:
                continue  # no person in the body box, or the carried person has left
            instance = not carried and r in instances
            if _reaches_past(out.roi, crop, self.REGROW):
                second = self._pose(frame, out.roi)
                if second.presence >= self.presence:
                    out = second
                elif not has_face and not (self.edge_people and instance
                                           and _leaves_frame(out.roi, h, w, self.REGROW)):
                    continue  # nobody in the crop the model's own alignment gives: a
                    # person-like pattern (a van's front), not a person
            pose = out.pose
            if instance:
                keypoints = row[9:].reshape(-1, 3).astype(np.float32)
                seen = np.count_nonzero(keypoints[:, 2] >= self.KEYPOINT_SCORE)
                if seen >= movenet_lib.SAME_JOINTS and not self._agrees(pose, keypoints, row):
                    pose = movenet_lib.as_blazepose(keypoints)  # BlazePose posed a neighbour
            kept.append((r, out, pose, face if has_face else None, instance))
        # the kept instances' skeletons split their masks between touching people; an instance
        # dropped above claims no pixel of its neighbours' (what it would take stays theirs)
        mine = [r for r, *_, instance in kept if instance]
        split = (movenet_lib.instance_map(
            people[mine, 9:].reshape(-1, len(movenet_lib.KEYPOINTS), 3), (h, w),
            self.KEYPOINT_SCORE) if len(mine) > 1 else None)
        found, masks = [], []
        for r, out, pose, face, instance in kept:
            person = attached_to_person(out.mask, face, pose)
            if split is not None and instance:
                theirs = split == mine.index(r)
                if theirs.any():  # a skeleton MoveNet does not see splits nothing off
                    person &= theirs
            q |= person
            if any(_overlap(person, m) > self.SAME_PERSON for m in masks):
                continue  # a second box on a person already found: one pose for them
            masks.append(person)
            found.append(pose)
        return q, np.reshape(np.asarray(found, np.float32), (-1, pose_lib.NUM_KEYPOINTS, 3))

    def _agrees(self, pose: np.ndarray, keypoints: np.ndarray, row: np.ndarray) -> bool:
        """Whether BlazePose's ``pose`` (float ``[33, 3]``) is the person of MoveNet's
        ``keypoints`` (float ``[17, 3]``): the joints both see lie within :attr:`AGREE` of the
        person's height (their crop's side over :attr:`BODY_CROP`) of each other, in median."""
        theirs = pose[list(movenet_lib.TO_BLAZEPOSE)]
        both = (theirs[:, 2] > VISIBLE) & (keypoints[:, 2] >= self.KEYPOINT_SCORE)
        height = (row[2] - row[0]) / self.BODY_CROP
        return movenet_lib.joints_coincide(theirs, keypoints, both, self.AGREE * height)

    def poses(self, video: np.ndarray, key: str) -> list[np.ndarray]:
        """The poses found with the last mask of this video (:class:`SegmenterPoses`); empty
        per frame with ``refine="grabcut"``."""
        if self._last is None or self._last[:2] != (key, id(video)):
            self(video, key)
        return self._last[2]

    def _segment(self, frame: np.ndarray, face: np.ndarray) -> np.ndarray:
        """bool ``[H, W]``: GrabCut's person pixels for one face of one frame."""
        cv2 = _cv2()
        h, w = frame.shape[:2]
        box, likely, sure = body_prior(face)
        clipped = _clip_boxes(box[None], h, w)
        out = np.zeros((h, w), bool)
        if not len(clipped) or min(clipped[0, 2:] - clipped[0, :2]) < 4:
            return out
        bx0, by0, bx1, by1 = (int(v) for v in clipped[0])
        cx0, cy0 = max(bx0 - self.margin, 0), max(by0 - self.margin, 0)
        cx1, cy1 = min(bx1 + self.margin, w), min(by1 + self.margin, h)
        s = min(1.0, self.grabcut_side / max(cx1 - cx0, cy1 - cy0))
        size = (max(round((cx1 - cx0) * s), 1), max(round((cy1 - cy0) * s), 1))
        crop = np.ascontiguousarray(frame[cy0:cy1, cx0:cx1, ::-1])
        if s < 1:
            crop = cv2.resize(crop, size, interpolation=cv2.INTER_AREA)
        labels = np.full(crop.shape[:2], cv2.GC_BGD, np.uint8)

        def paint(b, value):
            x0, y0, x1, y1 = np.round((np.asarray(b) - (cx0, cy0, cx0, cy0)) * s).astype(int)
            labels[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = value

        paint((bx0, by0, bx1, by1), cv2.GC_PR_BGD)
        for b in likely:
            paint(np.clip(b, (bx0, by0, bx0, by0), (bx1, by1, bx1, by1)), cv2.GC_PR_FGD)
        for b in sure:
            paint(np.clip(b, (bx0, by0, bx0, by0), (bx1, by1, bx1, by1)), cv2.GC_FGD)
        if not (labels == cv2.GC_BGD).any() or not (labels == cv2.GC_FGD).any():
            return out  # nothing to model one side of the cut with (a box filling the frame)
        cv2.setRNGSeed(0)  # GrabCut's GMM initialisation: deterministic output
        cv2.grabCut(crop, labels, None, np.zeros((1, 65)), np.zeros((1, 65)), self.iterations,
                    cv2.GC_INIT_WITH_MASK)
        person = ((labels == cv2.GC_FGD) | (labels == cv2.GC_PR_FGD)).astype(np.uint8)
        if s < 1:
            person = cv2.resize(person, (cx1 - cx0, cy1 - cy0), interpolation=cv2.INTER_NEAREST)
        out[cy0:cy1, cx0:cx1] = person > 0
        return out


class FacePeopleStream:
    """:class:`FacePeople` over a video given a window of frames at a time: :meth:`push` the next
    frames, get the masks and poses of the frames now final; :meth:`close` at the video's end.
    A frame is final once ``max_gap`` more frames have been seen (a person missed there may be
    found again and carried back: :class:`GapFiller`), so it holds ``max_gap`` frames and
    their detections, whatever the video's length. Its output equals the whole video's
    (calling :class:`FacePeople` on a video runs this stream over the whole of it)."""

    def __init__(self, segmenter: FacePeople, key: str):
        self.segmenter, self.key = segmenter, key
        self.filler = GapFiller(segmenter.max_gap)
        self.waiting: list[tuple[np.ndarray, int]] = []  # (frame, its own rows), not yet final
        self.size = (0, 0)

    def push(self, frames: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """uint8 ``[n, H, W, 3]``, the next frames -> (bool ``[m, H, W]`` masks, ``m`` float32
        ``[k, 33, 3]`` poses) of the frames now final, in order (``m`` may be 0)."""
        ready = []
        self.size = frames.shape[1:3]
        for frame in frames:
            rows = self.segmenter.proposals(frame)
            self.waiting.append((frame, len(rows)))
            ready += self.filler.push(rows)
        return self._masks(ready)

    def close(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """The masks and poses of the frames not yet returned."""
        return self._masks(self.filler.close())

    def _masks(self, ready: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        masks, poses = [], []
        for people in ready:
            frame, own = self.waiting.pop(0)
            mask, found = self.segmenter._frame(frame, people, own)
            masks.append(mask)
            poses.append(found)
        return np.reshape(np.asarray(masks, bool), (len(masks), *self.size)), poses


class SelfieSegmentation:
    """Person masks from MediaPipe's selfie segmentation model run on each whole frame through
    OpenCV's DNN module (``anonymize/weights/selfie_segmentation.tflite``, 256 x 256 input, for
    portrait frames, or ``selfie_segmentation_landscape.tflite``, 256 x 144, for landscape frames;
    Apache-2.0, copied from the ``mediapipe`` 0.10.21 wheel:
    :mod:`maskdp_jax.anonymize.model_files`).

    It needs no face, so it finds people seen from behind; it was trained for one or two people
    near the camera, and on wide street shots or animation it marks vehicles, walls and cartoon
    characters as person. ``reads="video"``: the whole frame is read. No poses.

    Args:
      threshold: the model's person probability above which a pixel is person.
    """

    reads = "video"
    #: The model file and its input size (width, height), by whether the frame is landscape.
    FILES = {False: ("selfie_segmentation.tflite", (256, 256)),
             True: ("selfie_segmentation_landscape.tflite", (256, 144))}

    def __init__(self, *, threshold: float = 0.5):
        if not 0 < threshold < 1:
            raise InputError(f"SelfieSegmentation needs 0 < threshold < 1; got {threshold}.")
        self.threshold = threshold
        self.model = "; ".join(model_files.describe(name) for name, _ in self.FILES.values())
        # Both networks load here, so a missing model file fails before any video is read.
        self._nets = {landscape: (_cv2().dnn.readNetFromTFLite(model_files.path(name)), size)
                      for landscape, (name, size) in self.FILES.items()}

    def __call__(self, video: np.ndarray, key: str) -> np.ndarray:
        cv2 = _cv2()
        t, h, w, _ = video.shape
        net, size = self._nets[w > h]
        q = np.zeros((t, h, w), bool)
        for i, frame in enumerate(video):
            small = cv2.resize(frame, size, interpolation=cv2.INTER_AREA)
            net.setInput(small.astype(np.float32).transpose(2, 0, 1)[None] / 255)
            prob = np.squeeze(net.forward()).astype(np.float32)  # [size[1], size[0]] in [0, 1]
            q[i] = cv2.resize(prob, (w, h), interpolation=cv2.INTER_LINEAR) > self.threshold
        return q
