"""The release ledger: ``<workdir>/release_ledger.json``, every DP-CDA release a workdir made.

A DP-CDA release is a one-shot mechanism: each run of ``python -m maskdp_jax.release`` draws a new
secret and mixes the same private records again. Two releases of the same data are two
mechanisms, and whoever holds both files (the first one may have been copied anywhere) holds the
privacy loss of both: ε = 5 + 5 = 10 by composition, not 5. The ledger makes a workdir remember
what it released:

* a second release into a workdir that holds one is refused (:func:`check_workdir`), unless the
  config asks for another explicitly (``release.another=True``);
* each release is journalled **before** its file is written (:func:`write`, then the file): a
  release whose file write failed is still counted, never the reverse (the same rule as the
  training guard, :mod:`maskdp_jax.run.guard`);
* every report gives the composed (ε, δ) of all releases in the ledger
  (:func:`maskdp_jax.accounting.dpcda.compose_releases`: basic composition, the sums).

The n-th release writes ``synthetic.npz`` (n = 1) or ``synthetic_<n>.npz``, so no released file is
overwritten and each ledger entry's SHA-256 can be checked against its file. The ledger holds
nothing secret: the randomness is recorded by its public commitment
(:meth:`maskdp_jax.core.randomness.Randomness.public_id`). It only counts what this workdir
released: releasing the same data from a fresh workdir starts an empty ledger, so a fresh workdir is
for other private data.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Sequence
from typing import Any

from maskdp_jax.accounting import dpcda
from maskdp_jax.data import atomic

LEDGER = "release_ledger.json"
ANOTHER_KEY = "release.another"
"""The config key that allows one more release into a workdir that holds one."""
FIRST_FILE = "synthetic.npz"
REPORT = "report.json"
_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Release:
    """One release, as the ledger records it (nothing secret).

    Attributes:
      index: 1 for the workdir's first release, then 2, 3, ...
      file: the synthetic set's file name in the workdir (:func:`file_name`).
      sha256: hex SHA-256 of that file's bytes.
      time: when it was journalled (UTC, ISO 8601), just before the file was written.
      randomness: the public id of the release's randomness (a SHA-256 commitment to the secret,
        or ``seeded:<seed>``).
      epsilon, delta: the release's own guarantee (replace-one adjacency on whole records).
      num_samples: the synthetic samples released.
      privacy: the release's :class:`maskdp_jax.accounting.dpcda.MixingPrivacy` as a dict.
    """

    index: int
    file: str
    sha256: str
    time: str
    randomness: str
    epsilon: float
    delta: float
    num_samples: int
    privacy: dict[str, Any]


def file_name(index: int) -> str:
    """The file of the ``index``-th release: ``synthetic.npz``, then ``synthetic_<index>.npz``."""
    return FIRST_FILE if index == 1 else f"synthetic_{index}.npz"


def now() -> str:
    """The current UTC time as the ledger writes it."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def composition(releases: Sequence[Release]) -> dict[str, Any]:
    """The composed guarantee of ``releases``: ``{"method", "releases", "epsilon", "delta"}``."""
    epsilon, delta = dpcda.compose_releases(epsilons=[r.epsilon for r in releases],
                                            deltas=[r.delta for r in releases])
    return {"method": "basic composition (sum of ε, sum of δ)", "releases": len(releases),
            "epsilon": epsilon, "delta": delta}


def to_dict(releases: Sequence[Release]) -> dict[str, Any]:
    """The ledger as written: its releases, oldest first, and their composition."""
    return {"format": _FORMAT_VERSION, "releases": [dataclasses.asdict(r) for r in releases],
            "composition": composition(releases)}


def read(workdir: str) -> list[Release]:
    """The releases recorded in ``workdir``, oldest first ([] without a ledger).

    Raises:
      ValueError: a ledger that cannot be read. It is never ignored: it is the record of the
        privacy this workdir's releases spent.
    """
    path = os.path.join(workdir, LEDGER)
    if not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            payload = json.load(f)
        if payload["format"] != _FORMAT_VERSION:
            raise ValueError(f"format {payload['format']!r}, expected {_FORMAT_VERSION}")
        releases = [Release(**r) for r in payload["releases"]]
        if [r.index for r in releases] != list(range(1, len(releases) + 1)):
            raise ValueError("release indices are not 1, 2, ...")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{path}: the release ledger is corrupt ({type(e).__name__}: {e}). It records the "
            "privacy spent by every release from this workdir, so no release can be added to it "
            "without under-counting: restore the file from a backup, or release other private "
            "data into a fresh --workdir.") from e
    return releases


def write(workdir: str, releases: Sequence[Release]) -> dict[str, Any]:
    """Atomically replace the ledger with ``releases`` (call BEFORE the newest one's file is
    written); returns what was written (:func:`to_dict`)."""
    payload = to_dict(releases)
    atomic.write(os.path.join(workdir, LEDGER), json.dumps(payload, indent=1))
    return payload


def _unledgered_release(workdir: str) -> str | None:
    """What shows that ``workdir`` holds a release made without a ledger (an earlier version of
    the command): its ``synthetic.npz``, or a ``report.json`` with a release's ε."""
    if os.path.exists(os.path.join(workdir, FIRST_FILE)):
        return FIRST_FILE
    try:
        with open(os.path.join(workdir, REPORT)) as f:
            released = "epsilon" in json.load(f)["release"]["privacy"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return REPORT if released else None


def check_workdir(workdir: str, *, another: bool) -> list[Release]:
    """The releases ``workdir`` already holds, when one more may be added; refused otherwise.

    Args:
      workdir: the release's output directory (need not exist).
      another: ``release.another``: the user asks for one more release of the same data.

    Returns:
      The recorded releases, oldest first ([] for a fresh workdir).

    Raises:
      FileExistsError: the workdir holds a release and ``another`` is False (the message names
        ``release.another`` and the fresh-workdir alternative), or the next release's file exists
        without a ledger entry.
      ValueError: a corrupt ledger, or a release made without a ledger (its ε cannot be composed).
    """
    releases = read(workdir)
    if not releases:
        found = _unledgered_release(workdir)
        if found:
            raise ValueError(
                f"{workdir} holds a release ({found}) but no {LEDGER}: it was made before "
                "releases were recorded, so its ε cannot be composed with a new one here. "
                f"Release into a fresh --workdir (a new directory) and add that release's ε "
                f"({REPORT}) to the new one's yourself if it is of the same data.")
        return releases
    if not another:
        last = releases[-1]
        total = composition(releases)
        recorded = (f"{len(releases)} releases, composed ε = {total['epsilon']:.4g}"
                    if len(releases) > 1 else f"ε = {last.epsilon:.4g}, δ = {last.delta:g}")
        raise FileExistsError(
            f"{workdir} already holds a DP-CDA release ({last.file}, {last.time}; {recorded}; "
            f"see {LEDGER}). Another release of the same private data adds its ε to that one "
            f"(composition): set --config.{ANOTHER_KEY}=True to release again and report the "
            "composed ε of every release in this workdir, or, for other private data, start a "
            "fresh workdir (--workdir=NEW_DIR, a new directory).")
    following = file_name(len(releases) + 1)
    if os.path.exists(os.path.join(workdir, following)):
        raise FileExistsError(
            f"{os.path.join(workdir, following)} exists but is not in {LEDGER}; the next release "
            "would overwrite it. Move it away, or release into a fresh --workdir.")
    return releases
