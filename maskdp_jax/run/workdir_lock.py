"""One run per workdir: an advisory lock on ``<workdir>/workdir.lock``.

Two runs writing one workdir would interleave their journals and checkpoints, and the privacy
ledger of one would not count the steps of the other. The first run holds an exclusive
``fcntl.flock`` on the lock file for its whole life; a second one is refused with the holder's
pid, host and start time. The kernel drops a flock when its process exits, however it exits
(``kill -9`` included), so a crashed run never leaves a lock that blocks the next one: no
stale-lock heuristics are needed (a crashed run leaves the file, unlocked; a run that ends
removes it). Why not a library: ``filelock`` would do the same flock with
timeouts we do not want (a second run must fail at once, not wait).

flock is per host: on a filesystem shared by several hosts (NFS, Lustre) it may not exclude a
run on another host. Multi-host runs take it on process 0 only (their other processes share the
workdir by design).
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import socket

LOCK_FILE = "workdir.lock"  # one name for every command that holds a workdir (train, release)


class WorkdirBusyError(RuntimeError):
    """Another live run holds the workdir."""


class WorkdirLock:
    """Exclusive lock on ``<workdir>/workdir.lock`` until :meth:`maskdp_jax.release` (or process
    exit).

    Raises:
      WorkdirBusyError: another process holds it; the message names it.
    """

    _fd: int | None = None

    def __init__(self, workdir: str):
        os.makedirs(workdir, exist_ok=True)
        self.path = os.path.join(os.path.abspath(workdir), LOCK_FILE)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._read_holder()
                os.close(fd)
                raise WorkdirBusyError(
                    f"--workdir {os.path.dirname(self.path)} is in use by another run ({holder}). "
                    "Two runs in one workdir would mix their checkpoints and privacy journals: "
                    "wait for it to finish (or stop it), or use another --workdir."
                ) from None
            # The holder we raced with may have removed the file on release: then our lock is on
            # an unlinked inode that the next run would not see; take the lock again on the file.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._fd = fd
        os.ftruncate(self._fd, 0)
        os.write(self._fd, json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }).encode())

    def _read_holder(self) -> str:
        try:
            with open(self.path) as f:
                info = json.load(f)
            return f"pid {info['pid']} on {info['host']}, started {info['started']}"
        except (OSError, ValueError, KeyError):
            return "holder unknown"

    def release(self) -> None:
        """Remove the lock file (a released workdir holds no trace of the lock), then unlock."""
        if self._fd is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __del__(self):  # a guard dropped without close() must not keep the workdir locked
        self.release()
