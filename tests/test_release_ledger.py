"""The release ledger (release/ledger.py): a second release into a workdir is refused unless the
config asks for another, which is then reported with the composed ε; each release is journalled
before its file is written.

Tiny own data (60 records of 9 features, 3 classes), no held-out data, no study, every release at
the config's ε = 5: the first calibration of σ takes about 8 s, every release after it about a
second (the accountant caches its RDP terms).
"""

import hashlib
import json
import os

import numpy as np
import pytest

from maskdp_jax.configs import dpcda_npz
from maskdp_jax.data import atomic
from maskdp_jax.release import __main__ as release_main
from maskdp_jax.release import ledger, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "dpcda_npz.py")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("data") / "my.npz")
    rng = np.random.default_rng(0)
    np.savez(path, features=rng.integers(0, 256, (60, 3, 3)), labels=np.repeat(np.arange(3), 20))
    return path


def _config(data):
    config = dpcda_npz.get_config()
    config.data.update(dict(path=data, num_classes=3, scale=255.0))
    config.update(dict(clip_norm=3.0, min_class_size=15))
    return config


def _release(capsys, data, workdir, *flags):
    """``python -m maskdp_jax.release`` in-process: ``(status, stdout, stderr lines)``."""
    status = release_main.cli([
        "prog", f"--config={CONFIG}", f"--config.data.path={data}",
        "--config.data.num_classes=3", "--config.data.scale=255", "--config.clip_norm=3",
        "--config.min_class_size=15", f"--workdir={workdir}", *flags])
    out = capsys.readouterr()
    return status, out.out, out.err.strip().splitlines()


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_second_release_is_refused_with_one_line_naming_the_key(tmp_path, data, capsys):
    status, _, _ = _release(capsys, data, tmp_path)
    assert status == 0
    files = sorted(os.listdir(tmp_path))
    first = _sha256(tmp_path / "synthetic.npz")
    status, out, err = _release(capsys, data, tmp_path)
    assert status == 2 and out == ""
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path} already holds a DP-CDA release")
    assert "--config.release.another=True" in err[0] and "--workdir=NEW_DIR" in err[0]
    # nothing was released or written: the same files, the first release intact and alone.
    assert sorted(os.listdir(tmp_path)) == files == [
        "release_ledger.json", "report.json", "report.md", "synthetic.npz"]
    assert _sha256(tmp_path / "synthetic.npz") == first
    assert [r.sha256 for r in ledger.read(str(tmp_path))] == [first]


def test_another_release_records_and_reports_the_composed_epsilon(tmp_path, data, capsys):
    assert _release(capsys, data, tmp_path)[0] == 0
    first = _sha256(tmp_path / "synthetic.npz")
    status, out, err = _release(capsys, data, tmp_path, "--config.release.another=True")
    assert status == 0, err
    releases = ledger.read(str(tmp_path))
    assert [(r.index, r.file) for r in releases] == [(1, "synthetic.npz"), (2, "synthetic_2.npz")]
    assert [r.epsilon for r in releases] == [pytest.approx(5.0, rel=1e-4)] * 2
    assert releases[0].randomness != releases[1].randomness  # a new secret per release
    # each file is the one its entry records; the first one was not overwritten.
    assert releases[0].sha256 == first == _sha256(tmp_path / "synthetic.npz")
    assert releases[1].sha256 == _sha256(tmp_path / "synthetic_2.npz")
    # recorded: the composition of the two, the sums (basic composition): ε = 5 + 5, not 5
    payload = json.loads((tmp_path / ledger.LEDGER).read_text())
    total = payload["composition"]
    assert total["releases"] == 2 and total["method"].startswith("basic composition")
    assert total["epsilon"] == releases[0].epsilon + releases[1].epsilon
    assert total["epsilon"] == pytest.approx(10.0, rel=1e-4)
    assert total["delta"] == pytest.approx(2e-5)
    # reported: the console line, report.json and report.md
    assert (f"release 2 of this workdir: its 2 releases compose to epsilon = "
            f"{total['epsilon']:.4g}, delta = 2e-05 (basic composition: 5 + 5)") in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ledger"] == payload and report["release"]["file"] == "synthetic_2.npz"
    md = (tmp_path / "report.md").read_text()
    assert (f"**All 2 releases from this workdir compose to (ε, δ) = ({total['epsilon']:.4g}, "
            "2e-05)** by basic composition") in md
    for r in releases:
        assert f"| {r.index} | `{r.file}` | `{r.sha256[:16]}…` |" in md


def test_the_release_is_journalled_before_its_file(tmp_path, data, monkeypatch):
    """A file write that fails leaves the release counted: the ledger was written first."""
    seen = []
    write = atomic.write

    def failing_write(path, content):
        if path.endswith(".npz"):
            seen.append(ledger.read(str(tmp_path)))
            raise OSError("disk full")
        write(path, content)

    monkeypatch.setattr(atomic, "write", failing_write)
    with pytest.raises(OSError, match="disk full"):
        run.run(_config(data), str(tmp_path))
    monkeypatch.undo()
    [[journalled]] = seen
    assert journalled.file == "synthetic.npz" and journalled.epsilon == pytest.approx(5.0, rel=1e-4)
    assert sorted(os.listdir(tmp_path)) == [ledger.LEDGER]  # no file; the lock is released
    assert ledger.read(str(tmp_path)) == [journalled]
    with pytest.raises(FileExistsError, match="already holds a DP-CDA release"):
        run.run(_config(data), str(tmp_path))  # the failed release still counts


@pytest.mark.parametrize("found", ["synthetic.npz", "report.json"])
def test_a_release_made_without_a_ledger_is_refused_even_with_another(tmp_path, found):
    if found == "synthetic.npz":
        np.savez(tmp_path / found, features=np.zeros((3, 2)))
    else:
        (tmp_path / found).write_text(json.dumps({"release": {"privacy": {"epsilon": 5.0}}}))
    for another in (False, True):
        with pytest.raises(ValueError, match=f"holds a release \\({found}\\) but no "
                                             "release_ledger.json"):
            ledger.check_workdir(str(tmp_path), another=another)


def test_a_corrupt_ledger_is_refused(tmp_path):
    (tmp_path / ledger.LEDGER).write_text('{"format": 1, "releases": [{"index": 2}]}')
    with pytest.raises(ValueError, match="the release ledger is corrupt"):
        ledger.check_workdir(str(tmp_path), another=True)


def test_a_fresh_workdir_and_a_training_report_hold_no_release(tmp_path):
    assert ledger.check_workdir(str(tmp_path / "new"), another=False) == []
    (tmp_path / "report.json").write_text(json.dumps({"privacy": {"epsilon": 1.0}}))
    assert ledger.check_workdir(str(tmp_path), another=False) == []
