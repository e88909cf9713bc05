"""DP-CDA release (release/): the mixing draws, the noise, the command and its outputs."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from scipy import stats

from maskdp_jax.configs import dpcda_digits, dpcda_npz
from maskdp_jax.release import datasets, mixing, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _toy(sizes=(7, 12, 9), dim=5, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.concatenate([np.full(n, k) for k, n in enumerate(sizes)]).astype(np.int32)
    perm = rng.permutation(len(labels))
    return rng.normal(size=(len(labels), dim)).astype(np.float32), labels[perm]


def test_each_sample_mixes_l_distinct_records_of_its_class():
    x, y = _toy()
    out = mixing.mix(jax.random.key(0), x, y, num_classes=3, order=4, num_synthetic=300,
                     sigma_x=0.0, sigma_y=0.0)
    assert out.members.shape == (300, 4) and out.features.shape == (300, 5)
    for members, cls, feat in zip(out.members, out.classes, out.features, strict=True):
        assert len(set(members.tolist())) == 4  # without replacement
        assert np.all(y[members] == cls)  # class-centric
        np.testing.assert_allclose(feat, x[members].mean(axis=0), atol=1e-6)  # the mean
    np.testing.assert_array_equal(out.labels, out.classes)  # no label noise: exact label
    # every record of a class is drawn, uniformly: 100 draws × 4 of 7 records of class 0.
    counts = np.bincount(out.members[out.classes == 0].ravel(), minlength=len(y))
    drawn = counts[y == 0]
    assert drawn.sum() == 400 and drawn.min() > 30 and drawn.max() < 90
    assert counts[y != 0].sum() == 0


def test_every_l_subset_of_a_class_is_equally_likely():
    """5 records, l = 2: the 10 subsets over 4,000 draws pass a χ² test of uniformity (fixed key;
    a tie-breaking or padding bias of a few % would fail it)."""
    x = np.zeros((8, 1), np.float32)
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1], np.int32)
    out = mixing.mix(jax.random.key(3), x, y, num_classes=2, order=2, num_synthetic=8000,
                     sigma_x=0.0, sigma_y=0.0)
    pairs = np.sort(out.members[out.classes == 0], axis=1)
    _, counts = np.unique(pairs[:, 0] * 5 + pairs[:, 1], return_counts=True)
    assert len(counts) == 10 and stats.chisquare(counts).pvalue > 1e-3


def test_noise_stds_are_sigma_x_and_sigma_y():
    # identical records: the mean is exact, what remains is the noise.
    x = np.ones((40, 50), np.float32)
    y = np.repeat(np.arange(2), 20).astype(np.int32)
    out = mixing.mix(jax.random.key(1), x, y, num_classes=2, order=3, num_synthetic=2000,
                     sigma_x=0.7, sigma_y=0.2)
    noise_x = out.features - 1.0
    noise_y = out.label_scores - np.eye(2)[out.classes]
    assert np.std(noise_x) == pytest.approx(0.7, rel=0.01)  # 100k draws: ±0.3 % (1σ)
    assert np.std(noise_y) == pytest.approx(0.2, rel=0.03)  # 4k draws: ±1.1 %
    assert abs(np.mean(noise_x)) < 0.01
    np.testing.assert_array_equal(out.labels, np.argmax(out.label_scores, axis=1))


def test_the_key_decides_everything_and_classes_get_independent_streams():
    x, y = _toy()
    a = mixing.mix(jax.random.key(5), x, y, num_classes=3, order=2, num_synthetic=30,
                   sigma_x=1.0, sigma_y=1.0)
    b = mixing.mix(jax.random.key(5), x, y, num_classes=3, order=2, num_synthetic=30,
                   sigma_x=1.0, sigma_y=1.0)
    c = mixing.mix(jax.random.key(6), x, y, num_classes=3, order=2, num_synthetic=30,
                   sigma_x=1.0, sigma_y=1.0)
    np.testing.assert_array_equal(a.features, b.features)
    assert not np.array_equal(a.features, c.features)


def test_clip_rows_bounds_norms_and_keeps_short_rows():
    x = np.array([[3.0, 4.0], [0.3, 0.4]], np.float32)
    np.testing.assert_allclose(mixing.clip_rows(x, 1.0), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)


def _tiny_config(workdir_config=None):
    config = dpcda_digits.get_config()
    config.release.order = 2
    config.sweep.orders = (1, 2)
    config.sweep.epsilons = (5.0, float("inf"))
    config.sweep.seeds = (0,)
    config.sweep.label_noise = (False,)
    return config


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("dpcda"))
    return workdir, run.run(_tiny_config(), workdir)


@pytest.mark.slow
def test_the_release_writes_only_synthetic_data_and_a_report(released):
    workdir, outcome = released
    assert sorted(os.listdir(workdir)) == [
        "release_ledger.json", "report.json", "report.md", "study", "synthetic.npz"]
    assert sorted(os.listdir(os.path.join(workdir, "study"))) == [
        "accuracy_vs_order.png", "report.json", "report.md", "utility.csv"]
    with np.load(os.path.join(workdir, "synthetic.npz")) as npz:
        assert sorted(npz.files) == ["class_names", "features", "labels"]  # no member indices
        assert npz["features"].shape == (1430, 64)
    privacy = outcome.release["privacy"]
    assert privacy["epsilon"] == pytest.approx(5.0, rel=1e-4) and privacy["epsilon"] <= 5.0
    assert outcome.release["randomness"].startswith("secret:sha256:")  # the config's default
    report = json.load(open(os.path.join(workdir, "report.json")))
    assert report["release"]["privacy"] == privacy and "sweep" not in report
    md = open(os.path.join(workdir, "report.md")).read()
    assert "p = l / min_class_size" in md and "not a guarantee" in md
    assert "utility study is in `study/` and is **not covered by this release's ε**" in md
    study = open(os.path.join(workdir, "study", "report.md")).read()
    assert study.startswith("# DP-CDA utility study") and "Not covered by the release's ε" in study
    # the exact class sizes are private (they differ between label-changing neighbours): the
    # rate comes from the public bound, and no size is reported.
    assert privacy["sampling_rate"] == 2 / _tiny_config().min_class_size
    assert "exact sizes are not released" in md and "sizes 1" not in md
    assert not any("size" in key and key != "min_class_size"
                   for key in json.dumps(report["config"]).split('"'))


@pytest.mark.slow
def test_the_study_has_one_row_per_cell_and_seed(released):
    _, outcome = released
    cells = {(r["variant"], r["epsilon"], r["order"]) for r in outcome.sweep}
    assert len(outcome.sweep) == len(cells) == 4
    by = {(r["epsilon"], r["order"]): r for r in outcome.sweep}
    assert by[(float("inf"), 1)]["accuracy"] > 0.9  # l = 1 without noise: the real data
    assert by[(5.0, 2)]["sigma_x"] > 0 and by[(float("inf"), 2)]["sigma_x"] == 0.0
    assert all(r["label_flip_rate"] == 0.0 for r in outcome.sweep)  # exact labels


def test_the_digits_split_is_fixed_and_scaled_by_constants():
    train, test = datasets.load(dpcda_digits.get_config().data)
    assert (len(train.labels), len(test.labels)) == (1437, 360)
    assert train.features.min() >= 0.0 and train.features.max() <= 1.0
    again, _ = datasets.load(dpcda_digits.get_config().data)
    np.testing.assert_array_equal(train.labels, again.labels)


@pytest.mark.slow
def test_no_study_no_study_outputs(tmp_path):
    config = _tiny_config()
    config.sweep.enabled = "no"
    outcome = run.run(config, str(tmp_path))
    assert outcome.sweep == []
    assert sorted(os.listdir(tmp_path)) == [
        "release_ledger.json", "report.json", "report.md", "synthetic.npz"]
    assert "No utility study was run" in (tmp_path / "report.md").read_text()


def _digits_as_npz(tmp_path):
    """The digits split as a user's files: raw pixels 0..16 (uint8) and int64 labels."""
    paths = []
    for name, split in zip(("train", "test"), datasets.load(dpcda_digits.get_config().data),
                           strict=True):
        paths.append(str(tmp_path / f"{name}.npz"))
        np.savez(paths[-1], pixels=np.rint(split.features * 16).astype(np.uint8).reshape(-1, 8, 8),
                 y=split.labels.astype(np.int64))
    return paths


def test_a_users_npz_releases_what_the_same_data_as_a_benchmark_releases(tmp_path):
    """Round trip: the digits split written as .npz files and read back with the same public
    constants gives the same release, bit for bit (seeded randomness), with no study."""
    train_path, test_path = _digits_as_npz(tmp_path)
    config = dpcda_npz.get_config()
    config.data.update(dict(path=train_path, test_path=test_path, features_key="pixels",
                            labels_key="y", num_classes=10, scale=16.0))
    config.update(dict(clip_norm=4.0, min_class_size=130, randomness="seeded"))
    config.release.order = 2
    own = run.run(config, str(tmp_path / "own"))
    bench = _tiny_config()
    bench.update(dict(randomness="seeded"))
    bench.sweep.enabled = "no"
    reference = run.run(bench, str(tmp_path / "bench"))
    assert own.sweep == [] and sorted(os.listdir(tmp_path / "own")) == [
        "release_ledger.json", "report.json", "report.md", "synthetic.npz"]  # no study: own data
    with np.load(tmp_path / "own" / "synthetic.npz") as a, \
            np.load(tmp_path / "bench" / "synthetic.npz") as b:
        for key in ("features", "labels", "class_names"):
            np.testing.assert_array_equal(a[key], b[key])
    assert own.release["privacy"] == reference.release["privacy"]
    assert own.release["test_accuracy"] == reference.release["test_accuracy"]


def _cli(*flags):
    return subprocess.run([sys.executable, "-m", "maskdp_jax.release", *flags], cwd=ROOT,
                          capture_output=True, text=True,
                          env=os.environ | {"JAX_PLATFORMS": "cpu"})


def test_cli_releases_a_users_npz_and_refuses_a_bad_one(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "my.npz", features=rng.integers(0, 256, (60, 3, 3)),
             labels=np.repeat(np.arange(3), 20))
    common = ["--config=configs/dpcda_npz.py", "--config.data.num_classes=3",
              "--config.data.scale=255", "--config.clip_norm=3", "--config.min_class_size=15"]
    ok = _cli(*common, f"--config.data.path={tmp_path / 'my.npz'}", f"--workdir={tmp_path / 'a'}")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "released 60 samples" in ok.stdout and "no held-out data; no study" in ok.stdout
    with np.load(tmp_path / "a" / "synthetic.npz") as npz:
        assert npz["features"].shape == (60, 9) and set(npz["labels"].tolist()) == {0, 1, 2}
    np.savez(tmp_path / "bad.npz", features=rng.normal(size=(60, 9)), labels=np.arange(60.0))
    bad = _cli(*common, f"--config.data.path={tmp_path / 'bad.npz'}",
               f"--workdir={tmp_path / 'b'}")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith(
        f"error: {tmp_path / 'bad.npz'}: labels must be integers")
    assert not (tmp_path / "b").exists()
