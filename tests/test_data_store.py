"""Clip store (data/store.py, python -m maskdp_jax.prepare): batches read from it equal the
batches decoded from the videos bit for bit; stores of other videos or another preprocessing are
refused; an interrupted prepare resumes; training from it equals training from the videos."""

import json
import os

import numpy as np
import pytest

from maskdp_jax import prepare
from maskdp_jax.configs import ucf101_maskdp
from maskdp_jax.data import store, testing
from maskdp_jax.run import datasets as run_datasets


@pytest.fixture(scope="module")
def ucf(tmp_path_factory):
    # 40x32 frames resized to short side 24 (a real resize), 14 frames, npz masks
    return testing.make_ucf101_folder(str(tmp_path_factory.mktemp("ucf")), num_frames=14)


def _config(paths, store_dir="", **overrides):
    config = ucf101_maskdp.get_config()
    c = config.input
    c.data_dir, c.split_dir, c.mask_dir = paths["video_dir"], paths["split_dir"], paths["mask_dir"]
    c.clip_frames, c.stride, c.resize_size, c.crop_size, c.num_workers = 4, 3, 24, 24, 2
    c.eval_clips, c.store_dir = 2, store_dir
    for k, v in overrides.items():
        c[k] = v
    return config


@pytest.fixture(scope="module")
def stored(ucf, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("store"))
    metas = prepare.prepare_stores(_config(ucf, root), workers=1)
    return root, metas


@pytest.fixture(scope="module")
def stored_on_stride(ucf, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("store_stride"))
    metas = prepare.prepare_stores(_config(ucf, root, starts_on_stride=True), workers=1)
    return root, metas


@pytest.mark.parametrize("on_stride,eval_crops", [(False, 1), (True, 1), (False, 3)])
def test_batches_from_the_store_equal_the_decoded_batches(ucf, stored, stored_on_stride,
                                                          tmp_path, on_stride, eval_crops):
    """Every frame stored, or (starts on the stride) every 3rd frame and the last; the centre
    crop only (every view is the centre), or the whole resized frame (3 evaluation crops): the
    batches read from the store are the decoded batches, training views and evaluation views."""
    overrides = dict(starts_on_stride=on_stride, eval_crops=eval_crops)
    if eval_crops == 1:
        root, metas = stored_on_stride if on_stride else stored
    else:
        root = str(tmp_path / "full")
        metas = prepare.prepare_stores(_config(ucf, root, **overrides), workers=1)
        # 30x24 frames instead of the 24x24 centre crop
        assert metas["train"]["bytes"] * 24 == stored[1]["train"]["bytes"] * 30
    assert set(metas) == {"train", "test"} and all(m["complete"] for m in metas.values())
    if on_stride:  # 14 frames: rows 0, 3, 6, 9, 12 and the last, 13 (a third of the bytes + 1)
        assert metas["train"]["bytes"] * 14 == stored[1]["train"]["bytes"] * 6
    decoded = run_datasets.get_datasets(_config(ucf, **overrides).input, mode="maskdp")
    from_store = run_datasets.get_datasets(_config(ucf, root, **overrides).input, mode="maskdp")
    assert from_store[0]._store is not None and decoded[0]._store is None
    for a, b in zip(decoded, from_store, strict=True):
        idx = np.arange(len(a))[::-1]
        for kwargs in (dict(num_clips=2, seed=[3, 1]), dict(num_clips=1, seed=[4, 0]),
                       dict(num_clips=2)):  # training views, and the evaluation views
            x, y = a.get_batch(idx, **kwargs), b.get_batch(idx, **kwargs)
            for k in x:
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"{a.name} {k} {kwargs}")
        assert b.get_batch(idx, num_clips=1, seed=[4, 0])["mask"].any()  # real masks, not zeros
        np.testing.assert_array_equal(a.get_masks(idx), b.get_masks(idx))


def test_the_store_is_what_the_reader_returns_not_the_video_files(ucf, stored, tmp_path):
    """A store is read, not bypassed: its bytes are what a batch holds (a planted change shows)."""
    import shutil

    root = str(tmp_path / "copy")
    shutil.copytree(stored[0], root)
    frames = np.memmap(os.path.join(root, "train", store.FRAMES), np.uint8, "r+")
    frames[:] = 7
    frames.flush()
    train, _ = run_datasets.get_datasets(_config(ucf, root).input, mode="maskdp")
    batch = train.get_batch(np.array([0]), seed=[0, 0])
    mean, std = np.array(train.options.mean), np.array(train.options.std)
    expected = np.broadcast_to((7 / 255 - mean) / std, batch["video"].shape)
    np.testing.assert_allclose(batch["video"], expected, rtol=1e-5)


def test_a_store_of_every_third_frame_refuses_clips_that_start_anywhere(ucf, stored_on_stride):
    train, _ = run_datasets.get_datasets(_config(ucf, stored_on_stride[0],
                                                 starts_on_stride=True).input, mode="maskdp")
    with pytest.raises(ValueError, match="frame 1 of video 0 is not in the clip store.*every "
                                         r"3-th frame.*starts_on_stride=True"):
        train._store.frames(0, np.array([0, 1]))
    with pytest.raises(ValueError, match="made from other videos or with another preprocessing"):
        run_datasets.get_datasets(_config(ucf, stored_on_stride[0]).input, mode="maskdp")


@pytest.mark.parametrize("change", ["resize_size", "decoder", "videos", "eval_crops"])
def test_a_store_of_other_videos_or_preprocessing_is_refused(ucf, stored, tmp_path, change):
    root = stored[0]
    if change == "videos":  # a video re-encoded (its size changes): the store no longer matches
        import shutil

        paths = {k: os.path.join(str(tmp_path), os.path.basename(v)) for k, v in ucf.items()}
        shutil.copytree(os.path.dirname(ucf["video_dir"]), str(tmp_path), dirs_exist_ok=True)
        key = sorted(os.listdir(os.path.join(paths["video_dir"], "Biking")))[0]
        with open(os.path.join(paths["video_dir"], "Biking", key), "ab") as f:
            f.write(b"\0" * 16)
        config = _config(paths, root)
    else:
        config = _config(ucf, root, **{change: {"resize_size": 28, "decoder": "pyav",
                                                "eval_crops": 3}[change]})
    with pytest.raises(ValueError, match="made from other videos or with another preprocessing"):
        run_datasets.get_datasets(config.input, mode="maskdp")
    with pytest.raises(ValueError, match="holds a clip store made from other videos"):
        prepare.prepare_stores(config, workers=1)


def test_missing_or_incomplete_store_says_what_to_run(ucf, tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m maskdp_jax.prepare"):
        run_datasets.get_datasets(_config(ucf, str(tmp_path / "none")).input, mode="maskdp")
    with pytest.raises(ValueError, match="set --config.input.store_dir"):
        prepare.prepare_stores(_config(ucf), workers=1)
    config = _config(ucf)
    config.input.dataset = "synthetic"
    config.input.store_dir = str(tmp_path)
    with pytest.raises(ValueError, match="input.store_dir is for the folder datasets"):
        run_datasets.get_datasets(config.input)


def test_dry_run_says_the_size_and_a_store_too_big_for_its_disk_is_refused_before_writing(
        ucf, stored, tmp_path, monkeypatch):
    """--dry_run's bytes are what prepare writes; a store larger than the free space is refused
    before any file exists (a memory map written past a full disk dies with SIGBUS mid-way)."""
    dry = prepare.prepare_stores(_config(ucf, str(tmp_path / "dry")), workers=1, dry_run=True)
    assert {k: m["bytes"] for k, m in dry.items()} == {k: m["bytes"] for k, m in stored[1].items()}
    assert not os.path.exists(tmp_path / "dry")
    free = stored[1]["train"]["bytes"] - 1
    monkeypatch.setattr(store.shutil, "disk_usage",
                        lambda path: type("Usage", (), {"free": free})())
    with pytest.raises(OSError, match=r"needs 0\.0 GiB but .* has 0\.0 GiB free"):
        prepare.prepare_stores(_config(ucf, str(tmp_path / "full")), workers=1)
    assert os.listdir(tmp_path / "full" / "train") == []


def test_an_interrupted_prepare_resumes_with_the_videos_not_yet_written(ucf, stored, tmp_path,
                                                                          monkeypatch):
    root = str(tmp_path / "store")
    config = _config(ucf, root)
    written = []
    real = store._write_video

    def dies_after_three(task):
        if len(written) == 3:
            raise KeyboardInterrupt  # the process killed mid-prepare
        written.append(task[0])
        return real(task)

    monkeypatch.setattr(store, "_write_video", dies_after_three)
    with pytest.raises(KeyboardInterrupt):
        prepare.prepare_stores(config, workers=1)
    meta = json.load(open(os.path.join(root, "train", store.META)))
    assert not meta["complete"]
    with pytest.raises(ValueError, match=r"incomplete \(3 of 6 videos written\).*again"):
        run_datasets.get_datasets(config.input, mode="maskdp")
    written.clear()
    monkeypatch.setattr(store, "_write_video", lambda task: written.append(task[0]) or real(task))
    prepare.prepare_stores(config, workers=1)
    assert written == [3, 4, 5, 0, 1]  # the rest of train, then all of test
    for subset in ("train", "test"):  # byte-identical to the store written in one go
        for name in (store.FRAMES, store.MASKS):
            with open(os.path.join(root, subset, name), "rb") as a, \
                    open(os.path.join(stored[0], subset, name), "rb") as b:
                assert a.read() == b.read(), (subset, name)


def test_worker_processes_write_the_same_store(ucf, stored, tmp_path):
    root = str(tmp_path / "store")
    prepare.prepare_stores(_config(ucf, root), workers=2)
    for subset in ("train", "test"):
        for name in (store.FRAMES, store.MASKS, store.INDEX):
            with open(os.path.join(root, subset, name), "rb") as a, \
                    open(os.path.join(stored[0], subset, name), "rb") as b:
                assert a.read() == b.read(), (subset, name)


@pytest.mark.slow
@pytest.mark.heavy  # two trainings, from the store and from the videos (33 s): in .ci/run only
def test_training_from_the_store_equals_training_from_the_videos(ucf, stored, tmp_path,
                                                                monkeypatch):
    """The same seeded maskdp run (tiny model, three steps) from the videos, and from the store
    preempted mid-run (SIGTERM while step 1 loads) then resumed: identical metrics rows and test
    predictions (a resumed store run equal to the videos' run is equal to an uninterrupted store
    run too: the store and the resume are each exact)."""
    from conftest import train_rows

    outs = []
    for name, root in (("videos", ""), ("resumed", stored[0])):
        config = _config(ucf, root, clip_frames=8, stride=1, resize_size=32, crop_size=32)
        config.model.name = "mvit_test"
        config.model.init_from = ""
        config.batch_size = config.physical_batch_size = 4
        config.num_epochs, config.privacy.delta = 1.5, 1e-3  # 3 steps of 4 of the 6 videos
        config.privacy.randomness, config.tensorboard, config.log_every_steps = "seeded", False, 1
        if root:  # the store was written for resize 24: write one for this geometry
            root = str(tmp_path / "store32")
            config.input.store_dir = root
            prepare.prepare_stores(config, workers=1)
        rows, out = train_rows(config, str(tmp_path / name), monkeypatch,
                               preempted=name == "resumed")
        outs.append((rows, out["metrics"]))
    assert outs[0][0] == outs[1][0] and len(outs[0][0]) == 3
    assert outs[0][1] == outs[1][1]


@pytest.mark.slow
def test_the_command_writes_the_stores_and_says_what_is_missing(ucf, tmp_path):
    """python -m maskdp_jax.prepare: the clip store's first step (docs/guides/own_videos.md), as
    a user runs it."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    flags = [f"--config.input.data_dir={ucf['video_dir']}",
             f"--config.input.split_dir={ucf['split_dir']}",
             f"--config.input.mask_dir={ucf['mask_dir']}", "--config.input.resize_size=24",
             "--config.input.crop_size=24", "--config.input.clip_frames=4", "--workers=1"]
    cmd = [sys.executable, "-m", "maskdp_jax.prepare", "--config=configs/ucf101_maskdp.py",
           *flags]
    bad = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=1800)
    assert bad.returncode != 0 and "set --config.input.store_dir" in bad.stderr
    ok = subprocess.run(cmd + [f"--config.input.store_dir={tmp_path}"], cwd=root,
                        capture_output=True, text=True, timeout=1800)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "train: 6 videos" in ok.stdout and "test: 2 videos" in ok.stdout
    dry = subprocess.run(cmd + [f"--config.input.store_dir={tmp_path / 'dry'}", "--dry_run"],
                         cwd=root, capture_output=True, text=True, timeout=1800)
    assert dry.returncode == 0 and "(would be written: --dry_run)" in dry.stdout, dry.stderr
    assert not os.path.exists(tmp_path / "dry")
    assert json.load(open(tmp_path / "train" / store.META))["complete"]
