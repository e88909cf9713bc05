"""The splits a config names (run.datasets): evaluation never runs on training videos."""

import os

import pytest

from configs import video_paper
from data import testing
from run import datasets as run_datasets


def _folder(root, *, train_keys, test_keys):
    frames, _ = testing.square_video(num_frames=8, height=32, width=32)
    for key in {*train_keys, *test_keys}:
        os.makedirs(root / "videos" / os.path.dirname(key), exist_ok=True)
        testing.write_video(str(root / "videos" / key), frames)
    if train_keys:
        (root / "train.txt").write_text("\n".join(train_keys) + "\n")
    (root / "test.txt").write_text("\n".join(test_keys) + "\n")
    c = video_paper.paper_config(dataset="folder", num_epochs=1.0, delta=1e-3).input
    c.data_dir, c.split_dir = str(root / "videos"), str(root)
    c.clip_frames, c.stride, c.resize_size, c.crop_size, c.num_workers = 8, 1, 32, 32, 1
    return c


def test_held_out_splits_are_accepted(tmp_path):
    c = _folder(tmp_path, train_keys=["a/0.avi", "b/0.avi"], test_keys=["a/1.avi", "b/1.avi"])
    train, test = run_datasets.get_datasets(c, mode="dp")
    assert (len(train), len(test)) == (2, 2)


def test_evaluating_on_the_training_subset_is_refused(tmp_path):
    c = _folder(tmp_path, train_keys=["a/0.avi", "b/0.avi"], test_keys=["a/1.avi", "b/1.avi"])
    c.test_subset = "train"
    with pytest.raises(ValueError, match=r"test_subset='train' evaluates on the training videos"
                                         r".*Use a held-out subset"):
        run_datasets.get_datasets(c, mode="dp")


def test_overlapping_split_files_are_refused(tmp_path):
    c = _folder(tmp_path, train_keys=["a/0.avi", "b/0.avi", "b/1.avi"],
                test_keys=["a/1.avi", "b/1.avi"])
    with pytest.raises(ValueError, match=r"folder: 1 test video\(s\) are also training videos "
                                         r"\(e\.g\. b/1\.avi: .*train\.txt line 3 and .*test\.txt "
                                         r"line 2\).*Fix the split files\.$"):
        run_datasets.get_datasets(c, mode="dp")


def test_a_folder_scan_that_swallows_the_test_videos_says_so(tmp_path):
    c = _folder(tmp_path, train_keys=[], test_keys=["a/1.avi", "b/1.avi"])
    with pytest.raises(ValueError, match=r"2 test video\(s\) are also training videos.*without a "
                                         r"train\.txt every video .* is scanned as training"):
        run_datasets.get_datasets(c, mode="dp")
