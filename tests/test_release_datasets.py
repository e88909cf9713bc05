"""The user's own data for a DP-CDA release (release/datasets.py: ``npz`` and ``folder``): the
files read back as written, and every way a file or its public settings can be wrong is refused
with a reason, before anything is written."""

import os
import zipfile

import numpy as np
import pytest

from maskdp_jax.configs import dpcda_npz
from maskdp_jax.release import datasets, run
from tests.malformed import set_keys

K, PER_CLASS, DIM = 3, 20, 4


def _records(seed=0):
    """``[K·PER_CLASS, 2, 2]`` uint8 "pixels" and shuffled ``[K·PER_CLASS]`` int64 labels."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(K), PER_CLASS))
    return rng.integers(0, 256, size=(len(labels), 2, 2), dtype=np.uint8), labels


def _write_npz(path, **arrays):
    x, y = _records()
    np.savez(path, **({"features": x, "labels": y} | arrays))
    return str(path)


def _config(path, **overrides):
    config = dpcda_npz.get_config()
    return set_keys(config, {"data.path": str(path), "data.num_classes": K, "data.scale": 255.0,
                             "clip_norm": 2.0, "min_class_size": 15, "release.order": 4,
                             "randomness": "seeded"} | overrides)


def _write_folder(root, x, y, names=("cat", "dog", "eel")):
    for i, (row, label) in enumerate(zip(x, y, strict=True)):
        os.makedirs(root / names[label], exist_ok=True)
        np.save(root / names[label] / f"{i:04d}.npy", row)
    return str(root)


def test_npz_and_folder_read_back_as_written_with_fixed_scaling(tmp_path):
    x, y = _records()
    train, test = datasets.load(_config(_write_npz(tmp_path / "my.npz")).data)
    assert test is None
    np.testing.assert_array_equal(train.labels, y)
    np.testing.assert_allclose(train.features, x.reshape(len(x), -1) / 255.0, rtol=1e-6)
    assert train.features.shape == (K * PER_CLASS, DIM) and train.class_names == ("0", "1", "2")
    folder = _write_folder(tmp_path / "feats", x, y)
    config = _config(folder, **{"data.source": "folder", "data.test_path": folder})
    f_train, f_test = datasets.load(config.data)
    assert f_train.class_names == ("cat", "dog", "eel")
    order = np.argsort(y, kind="stable")  # the folder reads class by class, files in name order
    np.testing.assert_array_equal(f_train.labels, y[order])
    np.testing.assert_array_equal(f_train.features, train.features[order])
    np.testing.assert_array_equal(f_test.features, f_train.features)


def _bad_npz(**arrays):
    def make(tmp_path):
        return _write_npz(tmp_path / "my.npz", **arrays)
    return make


def _text_file(tmp_path):
    (tmp_path / "my.npz").write_text("features,labels\n1,2\n")
    return str(tmp_path / "my.npz")


def _npy_named_npz(tmp_path):
    with open(tmp_path / "my.npz", "wb") as f:
        np.save(f, _records()[0])
    return str(tmp_path / "my.npz")


def _only_labels(tmp_path):
    np.savez(tmp_path / "my.npz", labels=_records()[1])
    return str(tmp_path / "my.npz")


def _corrupt_member(tmp_path):
    path = _write_npz(tmp_path / "my.npz")
    data = bytearray(open(path, "rb").read())
    start = data.index(b"\x93NUMPY") + 200  # inside the first array's data, not its header
    data[start:start + 8] = b"\xff" * 8
    open(path, "wb").write(bytes(data))
    assert zipfile.is_zipfile(path)  # the archive is intact: the array read must catch it
    return path


def _with_test(test_arrays):
    def make(tmp_path):
        np.savez(tmp_path / "test.npz", **test_arrays)
        return _write_npz(tmp_path / "my.npz")
    return make


def _folder(mutate):
    def make(tmp_path):
        x, y = _records()
        root = _write_folder(tmp_path / "feats", x, y)
        mutate(tmp_path / "feats")
        return root
    return make


x0, y0 = _records()
FOLDER = {"data.source": "folder"}
BAD = [  # (id, make the file -> path, config overrides, message fragment)
    ("no file", lambda t: str(t / "absent.npz"), {}, "no such file"),
    ("path unset", lambda t: "", {}, "data.path must name"),
    ("not a zip", _text_file, {}, "not an .npz archive"),
    (".npy named .npz", _npy_named_npz, {}, "not an .npz archive"),
    ("corrupt member", _corrupt_member, {}, "unreadable array"),
    ("no features key", _only_labels, {}, r"no array named \['features'\]"),
    ("other labels key", _bad_npz(), {"data.labels_key": "y"}, r"no array named \['y'\]"),
    ("object array", _bad_npz(features=np.array([[1, "a"]] * 60, dtype=object)), {},
     "unreadable array"),
    ("1-D features", _bad_npz(features=np.arange(60.0)), {}, r"must be \[N, d\]"),
    ("string features", _bad_npz(features=np.full((60, 4), "x")), {}, "integer or float"),
    ("NaN feature", _bad_npz(features=np.where(np.arange(240) == 7, np.nan, 1.0)
                             .reshape(60, 4)), {}, "NaN or infinite"),
    ("float labels", _bad_npz(labels=y0.astype(np.float32)), {}, "labels must be integers"),
    ("labels too short", _bad_npz(labels=y0[:-1]), {}, r"labels must be \[N\] = \[60\]"),
    ("label out of range", _bad_npz(labels=np.where(np.arange(60) == 3, 3, y0)), {},
     r"must lie in \[0, 3\)"),
    ("empty class", _bad_npz(labels=np.minimum(y0, 1)), {"min_class_size": 1}, "no records"),
    ("class below the bound", _bad_npz(), {"min_class_size": 21}, "fewer than min_class_size"),
    ("scale unset", _bad_npz(), {"data.scale": 0.0}, "data.scale must be set"),
    ("num_classes unset", _bad_npz(), {"data.num_classes": 0}, "data.num_classes must be set"),
    ("min_class_size unset", _bad_npz(), {"min_class_size": 0}, "min_class_size must be set"),
    ("clip norm unset", _bad_npz(), {"clip_norm": 0.0}, "clip norm"),
    ("held-out dims differ", _with_test({"features": x0[:, :1], "labels": y0}),
     {"data.test_path": "TEST"}, "does not match"),
    ("study without held-out", _bad_npz(), {"sweep.enabled": "yes", "sweep.orders": (2,)},
     "needs held-out data"),
    ("unknown study mode", _bad_npz(), {"sweep.enabled": "maybe"}, "sweep.enabled must be"),
    ("no folder", lambda t: str(t / "absent"), FOLDER, "no such folder"),
    ("extra class folder", _folder(lambda r: os.makedirs(r / "fox")), FOLDER,
     "4 class subfolders"),
    ("ragged records", _folder(lambda r: np.save(r / "cat" / "9999.npy", np.zeros(5))), FOLDER,
     "same shape"),
    ("unreadable .npy", _folder(lambda r: (r / "dog" / "9999.npy").write_text("x")), FOLDER,
     "unreadable .npy"),
]


@pytest.mark.parametrize("make,overrides,match", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_data_is_refused_before_anything_is_written(tmp_path, make, overrides, match):
    path = make(tmp_path)
    if overrides.get("data.test_path") == "TEST":
        overrides = overrides | {"data.test_path": str(tmp_path / "test.npz")}
    workdir = tmp_path / "out"
    with pytest.raises(ValueError, match=match):
        run.run(_config(path, **overrides), str(workdir))
    assert not workdir.exists()



def test_every_missing_setting_is_named_in_one_message(tmp_path):
    """A user's first run of an own-data config learns every setting it must give at once, not
    one per run."""
    config = dpcda_npz.get_config()
    config.data.path = str(tmp_path / "mine.npz")
    with pytest.raises(ValueError) as refused:
        run.run(config, str(tmp_path / "out"))
    message = str(refused.value)
    assert message.startswith("4 settings to fix: (1) ")
    for key in ("min_class_size", "clip_norm", "data.num_classes", "(4) data.scale"):
        assert key in message, message
    assert not (tmp_path / "out").exists()


def test_a_noise_free_release_of_own_data_needs_the_explicit_key(tmp_path):
    path = _bad_npz()(tmp_path)
    with pytest.raises(ValueError, match="without noise.*release.without_privacy=True"):
        run.run(_config(path, **{"release.epsilon": float("inf")}), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    run.check_public(_config(path, **{"release.epsilon": float("inf"),
                                      "release.without_privacy": True}))
    # A benchmark is public data: its noise-free mix is the study's ceiling, no key needed.
    config = _config(path, **{"release.epsilon": float("inf")})
    config.data = dpcda_npz.dpcda_digits.get_config().data
    run.check_public(config)


def test_digits_jittered_grows_each_side_from_its_own_originals():
    """The seed's-scale generator: balanced classes of the asked sizes, pixels in [0, 1], the
    same images for the same public seed; without its pixel noise every image is exactly a
    zero-filled shift by at most one pixel of an original of its own class and split (so no test
    image derives from a training original); bad sizes are refused."""
    from maskdp_jax.configs import dpcda_digits60k

    data = dpcda_digits60k.get_config().data
    data.num_train, data.num_test = 200, 100
    train, test = datasets.load(data)
    assert train.features.shape == (200, 64) and test.features.shape == (100, 64)
    assert list(train.class_sizes()) == [20] * 10 and list(test.class_sizes()) == [10] * 10
    assert train.features.min() >= 0 and train.features.max() <= 1
    again, _ = datasets.load(data)
    np.testing.assert_array_equal(train.features, again.features)
    originals, _ = datasets._digits(data.test_fraction, data.split_seed)
    grown = datasets._jitter(originals, 30, np.random.default_rng(0), noise=0.0)

    def shifts(image):
        padded = np.pad(image.reshape(8, 8), 1)
        return {padded[dy:dy + 8, dx:dx + 8].tobytes() for dy in range(3) for dx in range(3)}

    for k in range(10):
        own = set().union(*(shifts(x) for x in originals.features[originals.labels == k]))
        made = grown.features[grown.labels == k]
        assert len(made) == 30 and all(x.reshape(8, 8).tobytes() in own for x in made), k
    data.num_train = 205
    with pytest.raises(ValueError, match="multiples of 10"):
        datasets.load(data)
