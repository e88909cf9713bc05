r"""Data throughput: training clips per second of the real-video loader for 1, 2, N decode threads.

    python -m benchmarks.data_throughput                  # prints a table (writes nothing)
    python -m benchmarks.data_throughput --workers=1,2,4,8 --batches=6 --mask_format=npy
    python -m benchmarks.data_throughput --sources=decord,pyav,store --mask_format=npy

Generates UCF-101-like H.264 mp4 files (320x240, 25 fps, keyframe every 25 frames) with ``.npz``
(compressed) or ``.npy`` (``--mask_format``) masks in a temporary folder, then times
``VideoDataset.get_batch`` for training clips of the papers' geometry: 16 frames at stride 4, short
side 256, centre crop 224, normalised float32 ``[16, 224, 224, 3]`` plus its mask, K = 1 clip per
video, one physical batch of ``--batch`` videos per call with a fresh seed (fresh offsets) each
time. Every timed call decodes from the files (no cache). ``--sources`` instead compares, on one
thread and the same clips, decoding with decord, decoding with PyAV, and reading a clip store
(:mod:`maskdp_jax.data.store`, written first; its writing time is printed), each as training reads
it (uint8 clips, ``get_batch(normalize=False)``, normalised later inside the step) and normalised
on the host (float32, as before); it also times that normalisation jitted, which on a GPU
host is the device's work and on this CPU is a cost of the step; and, to choose the store's
on-disk format by measurement, the time to read a clip's rows from the store's memory maps
against the same rows written as ArrayRecord records (one record per frame). Results:
docs/benchmarks.md ("Data throughput", "Clip store").
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time

import numpy as np

from maskdp_jax.data import clips, layouts, preprocess, testing
from maskdp_jax.data.video_dataset import VideoDataset, VideoOptions


def make_videos(
    root: str, *, num_videos: int, num_frames: int, mask_format: str, seed: int = 0
) -> layouts.Layout:
    """``num_videos`` textured 320x240 mp4 videos with moving squares and matching npz masks."""
    import av

    rng = np.random.default_rng(seed)
    records = []
    for i in range(num_videos):
        frames, mask = testing.square_video(num_frames=num_frames, height=240, width=320, box=60,
                                            top=40 + i, left=10)
        # Texture so that the encoder produces realistic bitrates (a flat image encodes to ~0).
        noise = rng.integers(0, 60, (1, 240, 320, 3), dtype=np.uint8)
        frames = (frames // 2 + noise).astype(np.uint8)
        key = f"c{i % 4}/v{i:03d}.mp4"
        path = os.path.join(root, "videos", key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with av.open(path, "w") as container:
            stream = container.add_stream("libx264", rate=25)
            stream.height, stream.width, stream.pix_fmt = 240, 320, "yuv420p"
            stream.codec_context.gop_size = 25
            stream.options = {"crf": "23", "preset": "veryfast"}
            for f in frames:
                container.mux(stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
            container.mux(stream.encode())
        stem = os.path.join(root, "masks", key[:-4])
        os.makedirs(os.path.dirname(stem), exist_ok=True)
        if mask_format == "npz":
            np.savez_compressed(stem + ".npz", mask=mask)
        else:
            np.save(stem + ".npy", mask)
        records.append(layouts.VideoRecord(path, key, i % 4, "benchmark"))
    return layouts.Layout(tuple(records), ("c0", "c1", "c2", "c3"))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _options(root, *, workers, masks, decoder, starts_on_stride=False) -> VideoOptions:
    spec = clips.ClipSpec(num_frames=16, stride=4, resize_size=256, crop_size=224,
                          starts_on_stride=starts_on_stride)
    return VideoOptions(
        clip=spec, mean=preprocess.K400_MEAN, std=preprocess.K400_STD, num_workers=workers,
        decoder=decoder,
        mask_dir=os.path.join(root, "masks") if masks else "",
    )


def clips_per_second(layout, *, root, workers, batch, batches, masks, decoder, store_dir="",
                     starts_on_stride=False, normalize=True):
    """``(clips per wall second, CPU seconds per clip)`` of training ``get_batch`` calls
    (``normalize=False``: uint8 clips, as the trainer reads them)."""
    options = _options(root, workers=workers, masks=masks, decoder=decoder,
                       starts_on_stride=starts_on_stride)
    ds = VideoDataset(layout, options, name="bench", store_dir=store_dir)
    rng = np.random.default_rng(0)
    ds.get_batch(rng.choice(len(ds), batch), seed=[0])  # warm-up (thread start, libraries)
    start, cpu = time.perf_counter(), _cpu_seconds()
    for b in range(batches):
        out = ds.get_batch(rng.choice(len(ds), batch), seed=[1, b], normalize=normalize)
        assert out["video"].shape == (batch, 1, 16, 224, 224, 3)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    ds.close()
    return batch * batches / seconds, cpu / (batch * batches)


def device_normalisation_ms(batch: int) -> float:
    """Median ms per clip of the step's normalisation (:class:`maskdp_jax.data.clips.PixelNorm`,
    jitted) of ``batch`` uint8 16x224² clips on jax's default device."""
    import jax

    from maskdp_jax.data import clips

    norm = jax.jit(clips.PixelNorm(preprocess.K400_MEAN, preprocess.K400_STD))
    pixels = jax.device_put(np.random.default_rng(0).integers(
        0, 256, (batch, 16, 224, 224, 3), dtype=np.uint8))
    jax.block_until_ready(norm(pixels))
    times = []
    for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(norm(pixels))
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times)) / batch


def compare_formats(store_dir: str, *, clips: int = 128, seed: int = 0) -> str:
    """Milliseconds to read the 16 stored rows (frames and masks) of a clip: from the store's
    memory maps, and from the same rows as an ArrayRecord file (one record per frame, frame and
    mask bytes; uncompressed, group size 1, for random access), on one thread. A Markdown table.
    """
    from array_record.python import array_record_module as ar

    from maskdp_jax.data import store

    index = np.load(os.path.join(store_dir, store.INDEX))
    shapes, starts = index["shape"], index["frame_offset"] // 3
    frames = np.memmap(os.path.join(store_dir, store.FRAMES), np.uint8, "r")
    masks = np.memmap(os.path.join(store_dir, store.MASKS), np.uint8, "r")
    path = os.path.join(store_dir, "frames.array_record")
    writer = ar.ArrayRecordWriter(path, "group_size:1,uncompressed")
    first_record = np.concatenate([[0], np.cumsum(shapes[:, 0])])
    for (r, h, w), start in zip(shapes, starts, strict=True):
        for j in range(r):
            a = start + j * h * w
            writer.write(frames[3 * a:3 * (a + h * w)].tobytes() + masks[a:a + h * w].tobytes())
    writer.close()
    reader = ar.ArrayRecordReader(path, "readahead_buffer_size:0")
    rng = np.random.default_rng(seed)
    picks = [(v, int(rng.integers(0, shapes[v, 0] - 15)))
             for v in rng.integers(0, len(shapes), clips)]

    def from_memmap(v, first):
        r, h, w = (int(x) for x in shapes[v])
        a = int(starts[v])
        f = frames[3 * a:3 * (a + r * h * w)].reshape(r, h, w, 3)[first:first + 16].copy()
        m = masks[a:a + r * h * w].reshape(r, h, w)[first:first + 16].copy()
        return f, m

    def from_records(v, first):
        _, h, w = (int(x) for x in shapes[v])
        rows = reader.read(list(range(first_record[v] + first, first_record[v] + first + 16)))
        raw = np.frombuffer(b"".join(rows), np.uint8).reshape(16, h * w * 4)
        return raw[:, :h * w * 3].reshape(16, h, w, 3), raw[:, h * w * 3:].reshape(16, h, w)

    for v, first in picks[:4]:  # same bytes (and warm pages) before timing
        for want, got in zip(from_memmap(v, first), from_records(v, first), strict=True):
            np.testing.assert_array_equal(want, got)
    lines = ["| on-disk format | ms per clip (16 frames + masks, 1 thread) |", "|---|---:|"]
    for name, read in (("memory-mapped NumPy (the store)", from_memmap),
                       ("ArrayRecord, a record per frame", from_records)):
        t = time.perf_counter()
        for v, first in picks:
            read(v, first)
        lines.append(f"| {name} | {1e3 * (time.perf_counter() - t) / len(picks):.2f} |")
    reader.close()
    return "\n".join(lines)


def compare_sources(layout, *, root, sources, batch, batches):
    """One decoding thread, the same clips (same seeds, starts on the stride so that the store
    keeps every 4th frame): decord, PyAV, a clip store; uint8 (what training reads) and
    normalised on the host."""
    from maskdp_jax.data import store

    print("| source | clips/s, uint8 (1 thread) | CPU ms/clip, uint8 | uint8 clips/s vs decord "
          "| clips/s, normalised on the host | CPU ms/clip, normalised |")
    print("|---|---:|---:|---:|---:|---:|")
    base = None
    for source in sources:
        store_dir = ""
        if source == "store":
            store_dir = os.path.join(root, "store")
            ds = VideoDataset(layout, _options(root, workers=1, masks=True, decoder="decord",
                                               starts_on_stride=True), name="bench")
            t = time.perf_counter()
            meta = store.prepare(ds.store_entries(), store_dir, **ds.store_settings(),
                                 workers=1)
            ds.close()
            print(f"(store written in {time.perf_counter() - t:.1f} s, one process: "
                  f"{meta['bytes'] / 2**20:.0f} MiB for {meta['num_videos']} videos)")
        (rate, cpu), (rate_f, cpu_f) = [
            clips_per_second(layout, root=root, workers=1, batch=batch, batches=batches,
                             masks=True, decoder="decord" if source == "store" else source,
                             store_dir=store_dir, starts_on_stride=True, normalize=normalize)
            for normalize in (False, True)]
        base = base or rate
        print(f"| {source} | {rate:.1f} | {1e3 * cpu:.1f} | {rate / base:.1f}× | {rate_f:.1f} | "
              f"{1e3 * cpu_f:.1f} |", flush=True)
    if "store" in sources:
        print(compare_formats(os.path.join(root, "store")))
    import jax

    print(f"normalisation inside the step (PixelNorm, jitted, {jax.default_backend()}): "
          f"{device_normalisation_ms(batch):.2f} ms/clip (wall, all cores)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=16)
    parser.add_argument("--frames", type=int, default=150, help="frames per video (6 s at 25 fps)")
    parser.add_argument("--workers", default=f"1,2,{os.cpu_count()}")
    parser.add_argument("--batch", type=int, default=16, help="videos per get_batch call")
    parser.add_argument("--batches", type=int, default=4, help="timed calls per setting")
    parser.add_argument("--decoder", default="decord")
    parser.add_argument("--mask_format", default="npz", choices=("npz", "npy"))
    parser.add_argument("--sources", default="",
                        help="compare these on one thread instead: decord,pyav,store")
    args = parser.parse_args()
    workers = sorted({int(w) for w in args.workers.split(",")})
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
          f"{platform.system()} {platform.release()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as root:
        t = time.perf_counter()
        layout = make_videos(root, num_videos=args.videos, num_frames=args.frames,
                             mask_format=args.mask_format)
        print(f"generated {args.videos} videos of {args.frames} frames 320x240 in "
              f"{time.perf_counter() - t:.1f} s")
        if args.sources:
            compare_sources(layout, root=root, sources=args.sources.split(","),
                            batch=args.batch, batches=args.batches)
            return
        print(f"| decode threads | clips/s, {args.mask_format} masks | CPU ms/clip, masks | "
              "clips/s, no masks | CPU ms/clip, no masks |")
        print("|---:|---:|---:|---:|---:|")
        for w in workers:
            (r1, c1), (r0, c0) = [
                clips_per_second(layout, root=root, workers=w, batch=args.batch,
                                 batches=args.batches, masks=m, decoder=args.decoder)
                for m in (True, False)
            ]
            print(f"| {w} | {r1:.1f} | {1e3 * c1:.0f} | {r0:.1f} | {1e3 * c0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
