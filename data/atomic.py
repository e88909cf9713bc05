"""Atomic file replacement: a reader sees the old file or the new one, never a part of either.

The content goes to a temporary file in the target's directory (same file system, so the rename
is atomic), is flushed and fsynced, and is renamed over the target with :func:`os.replace`; then
the directory is fsynced so that the rename itself survives a power loss. The last step matters
for the privacy-ledger journal (:mod:`maskdp_jax.run.journal`), which must be on disk before the
release it covers; it costs one fsync per file, so every caller gets it rather than a second helper
without. An exception while writing removes the temporary file and leaves the target as it was.

The file gets the permissions :func:`open` would give a new file (``0o666`` less the umask), not
:func:`tempfile.mkstemp`'s ``0o600``: written datasets are shared between users.

>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> path = os.path.join(directory, "meta.json")
>>> write(path, '{"complete": true}\\n')
>>> open(path).read()
'{"complete": true}\\n'
>>> os.listdir(directory)
['meta.json']
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator

# The temporary name replacing() gives a target ``<name>``; the pattern recovers ``<name>``.
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{12}\.tmp$")


@contextlib.contextmanager
def replacing(path: str) -> Iterator[str]:
    """``with replacing(path) as tmp:`` write the new content to ``tmp`` (by name); on a normal
    exit ``tmp`` is fsynced and replaces ``path``, on an exception it is removed.

    For writers that take a file name (a video muxer); :func:`write` covers bytes and text.
    ``tmp`` exists (empty) on entry, in ``path``'s directory, hidden (``.<name>.<random>.tmp``).
    The directory must exist.
    """
    directory, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        _fsync(tmp, os.O_RDONLY)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    _fsync(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


def temporaries(directory: str) -> dict[str, list[str]]:
    """The temporary files :func:`replacing` made in ``directory`` and left there, by the target
    path each was for (``{target: [temporary, ...]}``; ``{}`` for a missing directory).

    A process killed while writing (``kill -9``, power loss) leaves its temporary file behind; a
    caller that knows which targets are its own removes theirs on its next run. A temporary of a
    writer still running in ``directory`` is listed too: only one writer per target may do that.

    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> open(os.path.join(directory, ".a.npz.0123456789ab.tmp"), "w").close()
    >>> [(os.path.basename(k), [os.path.basename(t) for t in v])
    ...  for k, v in temporaries(directory).items()]
    [('a.npz', ['.a.npz.0123456789ab.tmp'])]
    """
    found: dict[str, list[str]] = {}
    if not os.path.isdir(directory):
        return found
    for entry in sorted(os.listdir(directory)):
        match = _TEMPORARY.match(entry)
        if match:
            target = os.path.join(directory, match["name"])
            found.setdefault(target, []).append(os.path.join(directory, entry))
    return found


def write(path: str, content: bytes | str) -> None:
    """Atomically replace ``path``'s content with ``content`` (``str`` is written as UTF-8)."""
    data = content.encode() if isinstance(content, str) else content
    with replacing(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def _fsync(path: str, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
