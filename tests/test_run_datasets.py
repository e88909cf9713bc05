"""The splits a config names (run.datasets): evaluation never runs on training videos."""

import os

import pytest

from maskdp_jax.configs import video_paper
from maskdp_jax.data import testing
from maskdp_jax.run import config as run_config
from maskdp_jax.run import datasets as run_datasets


def _folder(root, *, train_keys, test_keys, write=("train", "test")):
    frames, _ = testing.square_video(num_frames=8, height=32, width=32)
    for key in {*train_keys, *test_keys}:
        os.makedirs(root / "videos" / os.path.dirname(key), exist_ok=True)
        testing.write_video(str(root / "videos" / key), frames)
    for name, keys in (("train", train_keys), ("test", test_keys)):
        if name in write:
            (root / f"{name}.txt").write_text("\n".join(keys) + "\n")
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


@pytest.mark.parametrize("given", ["train", "test"])
def test_one_split_file_means_the_other_videos_are_the_other_split(tmp_path, given):
    """Issue 19, item 10: with only test.txt (or train.txt) the other split is every other
    video of the class folders (it used to be all of them, refused as overlapping)."""
    c = _folder(tmp_path, train_keys=["a/0.avi", "b/0.avi", "b/2.avi"],
                test_keys=["a/1.avi", "b/1.avi"], write=(given,))
    train, test = run_datasets.get_datasets(c, mode="dp")
    assert [r.key for r in train.records] == ["a/0.avi", "b/0.avi", "b/2.avi"]
    assert [r.key for r in test.records] == ["a/1.avi", "b/1.avi"]
    other = "test" if given == "train" else "train"
    derived = test if given == "train" else train
    assert derived.records[0].source == f"folder scan (videos that {given}.txt does not list)"
    note = run_datasets.describe_split(train, test, str(tmp_path / "run"))
    assert note.startswith("train: ") and "private/split/" in note
    written = (tmp_path / "run" / "private" / "split" / f"{other}.txt").read_text().split()
    assert written == [r.key for r in derived.records]


def test_without_split_files_a_seeded_stratified_split_holds_out_each_class(tmp_path):
    keys = [f"{c}/{i}.avi" for c in "ab" for i in range(5)] + ["c/0.avi"]
    c = _folder(tmp_path, train_keys=keys, test_keys=[], write=())
    train, test = run_datasets.get_datasets(c, mode="dp")
    held = [r.key for r in test.records]
    assert {k.split("/")[0] for k in held} == {"a", "b"}  # 1 of 5 per class; c's only video trains
    assert sum(k.startswith("a/") for k in held) == sum(k.startswith("b/") for k in held) == 1
    assert sorted([r.key for r in train.records] + held) == sorted(keys)
    assert test.records[0].source == "seeded split (seed 0, test fraction 0.2)"
    again = run_datasets.get_datasets(c, mode="dp")[1]
    assert [r.key for r in again.records] == held  # deterministic
    c.split_seed = 3
    assert {r.key for r in run_datasets.get_datasets(c, mode="dp")[1].records} != set(held)
    note = run_datasets.describe_split(train, test, str(tmp_path / "run"))
    assert "seeded split (seed 0, test fraction 0.2)" in note and "(9 / 2 videos)" in note


def test_seeded_split_moves_at_most_one_video_when_one_is_added():
    from maskdp_jax.data import layouts

    keys = {"a": [f"a/{i}.avi" for i in range(40)]}
    before = layouts.seeded_split(keys, test_fraction=0.25, seed=1)
    keys["a"].append("a/new.avi")
    after = layouts.seeded_split(keys, test_fraction=0.25, seed=1)
    assert len(before) == 10 and len(after) == 10
    assert len(before - after) <= 1
    with pytest.raises(ValueError, match=r"test_fraction must be in \(0, 1\); got 1\.0"):
        layouts.seeded_split(keys, test_fraction=1.0, seed=0)


@pytest.mark.slow
@pytest.mark.heavy  # a folder run end to end (25 s): in .ci/run only
def test_folder_config_needs_only_the_data_and_mask_dirs(tmp_path):
    """configs/folder_maskdp.py with --config.input.data_dir and mask_dir (and, for a test this
    small, a batch below N and one step) trains, and its report names the split."""
    from maskdp_jax import train
    from maskdp_jax.configs import folder_maskdp

    paths = testing.make_ucf101_folder(str(tmp_path / "data"), train_per_class=4)
    config = folder_maskdp.get_config()
    config.input.data_dir, config.input.mask_dir = paths["video_dir"], paths["mask_dir"]
    run_config.check_config(config)  # valid with just the two directories
    config.model.name = "mvit_test"
    config.model.init_from = ""
    config.batch_size = config.physical_batch_size = 4
    config.num_epochs, config.privacy.delta = 0.5, 1e-3
    config.tensorboard, config.input.num_workers = False, 1
    out = train.train_and_evaluate(config, str(tmp_path / "run"))
    assert out["split"].startswith("train: seeded split (seed 0, test fraction 0.2)")
    assert (tmp_path / "run" / "private" / "split" / "test.txt").exists()
