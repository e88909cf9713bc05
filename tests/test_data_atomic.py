"""data.atomic: the content arrives whole, no temporary file stays, a failed write changes
nothing."""

import os
import stat

import pytest

from maskdp_jax.data import atomic


@pytest.mark.parametrize("content", [b"\x00\xffbytes", "text: \u00e9\n"])
def test_write_replaces_the_content_and_leaves_no_temporary_file(tmp_path, content):
    path = tmp_path / "f"
    path.write_bytes(b"old content, longer than the new one")
    atomic.write(str(path), content)
    expected = content.encode("utf-8") if isinstance(content, str) else content
    assert path.read_bytes() == expected
    assert os.listdir(tmp_path) == ["f"]


def test_a_new_file_gets_the_permissions_open_would_give(tmp_path):
    umask = os.umask(0o022)
    try:
        atomic.write(str(tmp_path / "f"), "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "f").st_mode) == 0o644


def test_an_exception_mid_write_leaves_the_old_file_intact(tmp_path):
    path = tmp_path / "f"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="writer died"), atomic.replacing(str(path)) as tmp:
        with open(tmp, "w") as f:
            f.write("half of the new")
        raise RuntimeError("writer died")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f"]


def test_a_failed_fsync_in_write_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_text("old")

    def fails(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", fails)  # after the bytes went to the temporary file
    with pytest.raises(OSError, match="disk gone"):
        atomic.write(str(path), "new")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f"]


def test_a_failed_rename_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_text("old")

    def fails(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OSError, match="rename failed"):
        atomic.write(str(path), "new")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f"]


def test_replacing_hands_a_name_in_the_same_directory(tmp_path):
    path = tmp_path / "video.mkv"
    with atomic.replacing(str(path)) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path)
        assert os.path.isfile(tmp) and tmp != str(path)
        with open(tmp, "wb") as f:
            f.write(b"frames")
    assert path.read_bytes() == b"frames"
    assert os.listdir(tmp_path) == ["video.mkv"]
