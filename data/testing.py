"""Write small real video files (PyAV) for tests and benchmarks: mp4 videos, npz and FFV1 masks,
and a UCF-101-layout folder.

Each generated video shows a bright square (the "avatar", mask 1 = public) moving one pixel per
frame to the right over a dark background (mask 0 = private), so a test can check on decoded
pixels that a mask is aligned with its video in time (the square moves) and in space (resize,
crop, flip).
"""

from __future__ import annotations

import os

import numpy as np


def write_video(
    path: str, frames: np.ndarray, *, codec: str = "libx264", fps: int = 25,
    pix_fmt: str | None = None,
) -> None:
    """Encode ``frames`` to ``path``.

    ``frames``: ``[T, H, W, 3]`` uint8 RGB (stored as ``pix_fmt``, default yuv420p), or
    ``[T, H, W]`` gray with ``codec="ffv1"``, or with ``pix_fmt="yuv420p"`` and ``codec="ffv1"``
    the planar layout ``[T, 3H/2, W]`` (Y, then U and V at half resolution) stored as is: lossless,
    so the decoded planes are exactly these samples.
    """
    import av

    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    gray = frames.ndim == 3 and pix_fmt is None
    planar = frames.ndim == 3 and pix_fmt == "yuv420p"
    in_fmt = "gray" if gray else "yuv420p" if planar else "rgb24"
    with av.open(path, "w") as container:
        stream = container.add_stream(codec, rate=fps)
        stream.height = frames.shape[1] * 2 // 3 if planar else frames.shape[1]
        stream.width = frames.shape[2]
        stream.pix_fmt = "gray" if gray else pix_fmt or "yuv420p"
        if codec == "libx264":
            stream.options = {"crf": "18", "preset": "ultrafast"}
        for frame in frames:
            packet = stream.encode(av.VideoFrame.from_ndarray(frame, format=in_fmt))
            container.mux(packet)
        container.mux(stream.encode())


def square_video(
    *, num_frames: int, height: int, width: int, box: int = 10, top: int = 4, left: int = 2,
    brightness: int = 230,
) -> tuple[np.ndarray, np.ndarray]:
    """``(frames [T, H, W, 3] uint8, mask [T, H, W] uint8)``: a bright box moving right."""
    t = np.arange(num_frames)[:, None, None]
    y = np.arange(height)[None, :, None]
    x = np.arange(width)[None, None, :]
    x0 = left + t
    mask = ((y >= top) & (y < top + box) & (x >= x0) & (x < x0 + box)).astype(np.uint8)
    frames = np.where(mask[..., None], np.uint8(brightness), np.uint8(20))
    frames = np.broadcast_to(frames, (*mask.shape, 3)).copy()
    return frames, mask


def make_ucf101_folder(
    root: str, *, classes=("ApplyEyeMakeup", "Biking"), train_per_class: int = 3,
    test_per_class: int = 1, num_frames: int = 12, height: int = 32, width: int = 40,
    mask_videos: bool = False,
) -> dict[str, str]:
    """A UCF-101-layout folder: ``videos/<Class>/v_<Class>_gXX_c01.avi`` (H.264 in mp4 container
    named .avi like the original), ``ucfTrainTestlist/`` (classInd, trainlist01, testlist01) and
    ``masks/`` mirroring the videos (npz, or FFV1 .mkv when ``mask_videos``).

    Returns ``{"video_dir", "split_dir", "mask_dir"}``.
    """
    video_dir = os.path.join(root, "videos")
    split_dir = os.path.join(root, "ucfTrainTestlist")
    mask_dir = os.path.join(root, "masks")
    os.makedirs(split_dir, exist_ok=True)
    train, test = [], []
    for c, name in enumerate(classes):
        for g in range(train_per_class + test_per_class):
            key = f"{name}/v_{name}_g{g + 1:02d}_c01.avi"
            frames, mask = square_video(
                num_frames=num_frames, height=height, width=width, top=2 + 3 * c + g % 3
            )
            write_video(os.path.join(video_dir, key), frames)
            stem = os.path.splitext(os.path.join(mask_dir, key))[0]
            if mask_videos:
                write_video(stem + ".mkv", mask * 255, codec="ffv1")
            else:
                os.makedirs(os.path.dirname(stem), exist_ok=True)
                np.savez_compressed(stem + ".npz", mask=mask)
            (train if g < train_per_class else test).append((key, c + 1))
    with open(os.path.join(split_dir, "classInd.txt"), "w") as f:
        f.writelines(f"{c + 1} {name}\n" for c, name in enumerate(classes))
    with open(os.path.join(split_dir, "trainlist01.txt"), "w") as f:
        f.writelines(f"{key} {label}\n" for key, label in train)
    with open(os.path.join(split_dir, "testlist01.txt"), "w") as f:
        f.writelines(f"{key}\n" for key, _ in test)
    return {"video_dir": video_dir, "split_dir": split_dir, "mask_dir": mask_dir}
