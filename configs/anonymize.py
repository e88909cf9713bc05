r"""The anonymisation pipeline (Schneider et al. 2024b, Alg. 1; docs/guides/anonymize.md).

    python -m maskdp_jax.anonymize --src VIDEO_DIR --dst OUT_DIR --mask_dir MASK_DIR \
        [--config=configs/anonymize.py] [--config.segment.method=background] ...

Defaults suit a folder of short clips with people, a moving or unknown camera: a neural face
detector (CenterFace) and OpenCV's HOG people detector (people without a visible face: back
views, distant people) find each person, and BlazePose segments them and gives their pose in a
crop around them (the models ship in anonymize/weights/ and in OpenCV: nothing is
downloaded). ``segment.method="grabcut"`` uses OpenCV's classical HOG people and face-cascade
detectors with GrabCut instead. For static cameras (NTU RGB+D, Toyota
Smarthome) ``segment.method="background"`` and ``inpaint="median"`` match the scene better. With
your own person masks: ``segment.method="files"``, ``segment.files_dir=...``. See
anonymize/__init__.py for what the public mask does and does not guarantee.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict()
    config.segment = ml_collections.ConfigDict(dict(
        method="centerface",  # "centerface" (faces and MoveNet bodies -> BlazePose), "grabcut"
        # (HOG/Haar detectors or box files), "selfie" (MediaPipe's selfie segmentation on the
        # whole frame: close-ups, back views too; marks non-people in wide shots), "background"
        # (MOG2), "files"
        face_threshold=0.5,  # centerface: minimum face score
        # centerface: the longest side (px) the face detector sees each frame at; faces below
        # about 10 px at this scale are missed, so distant people need more (slower)
        face_max_side=640,
        face_max_gap=4,  # centerface: frames a person carries over to frames where none was found
        # centerface: people found by their body too, each checked by the pose model: back
        # views, distant people. "movenet" (MoveNet MultiPose: one instance per person, groups
        # too), "hog" (OpenCV's HOG people detector: upright people), "none": faces only
        bodies="movenet",
        body_min_height=48,  # centerface: px height of the smallest person searched (cost ~ 1/h^2)
        body_max_side=1792,  # centerface: longest side (px) the body detector sees a frame at
        body_threshold=0.0,  # centerface: the HOG detector's SVM score a window needs
        movenet_side=640,  # centerface, bodies="movenet": px of the frame's longer side at MoveNet
        movenet_score=0.2,  # centerface, bodies="movenet": the instance score a person needs
        movenet_tiles=False,  # bodies="movenet": 6 people found (its limit): look again in halves
        edge_people=False,  # bodies="movenet": keep a person the frame cuts (legs only) without
        # the second crop's presence (their alignment leaves the frame); with movenet_score=0.05
        presence=0.5,  # centerface: pose model's presence a face-less or carried person needs
        refine="pose",  # centerface: "pose" (BlazePose segmentation + keypoints) or "grabcut"
        boxes_dir="",  # grabcut: person boxes from files (reads "boxes") instead of detectors
        files_dir="",  # files: person masks mirroring the video paths
        margin=8,  # centerface, grabcut: px of context around each box
        detector="people",  # background: keep blobs near detections ("people") or all ("none")
        max_gap=12,  # frames a detection carries over to frames where nobody was found
    ))
    # no growth and the avatar clipped to the mask (avatar.cell=0): the neural masks follow the
    # outline, and each px of growth or of a coarse avatar grid puts avatar on non-person pixels
    # (docs/results/anonymize_quality); the inpainting's alpha edge (edge_sigma) still removes
    # the person a few px past the mask (those pixels are private)
    config.cleanup = ml_collections.ConfigDict(dict(window=5, grow=0, edge_sigma=2.0))
    config.inpaint = "median"  # "median" (temporal background plate) or "opencv" (per frame)
    # Poses for the avatar: "segmenter" (the ones centerface + refine="pose" finds; other
    # segmenters give none: silhouette avatar), "files" (pose.files_dir), "none" (silhouette)
    config.pose = ml_collections.ConfigDict(dict(method="segmenter", files_dir=""))
    config.avatar = ml_collections.ConfigDict(dict(cell=0, smooth=0.5, seed=0))
    config.blend_sigma = 1.5  # the public mask is the avatar region eroded by ceil(3 sigma) px
    config.tubelet_pad = 8
    config.tubelet_window = 9
    config.store = "lossless"  # FFV1; "h264" is lossy and voids bit-exact public pixels
    config.codec_margin = 16  # px more erosion with store="h264"
    config.max_reads = "video"  # "none" | "boxes" | "video": refuse segmenters that read more
    # A video with no person left after the cleanup is written unchanged with an all-private
    # mask and listed as "no person found"; True stops the run there (exit 2) instead. Not
    # compared on resume: it changes no written output.
    config.refuse_no_person = False
    config.chunk_frames = 16  # frames read and composed at once (memory; pipeline.run_stages)
    return config
