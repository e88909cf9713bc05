"""The run's privacy randomness: the DP noise key and the Poisson sampler's seeds.

Privacy meaning. The guarantee assumes the adversary knows neither the Gaussian noise added to
the clipped sum nor which videos the private Poisson draw picked. Both are pseudo-random; if
they derive from a value the adversary knows, it can recompute every noise vector (and subtract
it from the released parameters) and every private batch (voiding amplification by subsampling).
``config.seed`` is published in report.json, so it must not be that value.

``config.privacy.randomness`` chooses where they come from:

* ``"secret"`` (default): a fresh run draws a 128-bit secret from the operating system
  (:mod:`secrets`); on several hosts process 0 draws it and broadcasts it, so every host adds the
  same noise and cuts the same batches. The noise key and the two sampler seeds are derived from
  it by SHA-256 under separate labels, so a public batch (which the noise-free public gradient
  may reveal) tells nothing about the private stream or the noise. The secret is stored in the
  checkpoints' meta only (restored on resume, so re-executed steps are identical) and never in
  the journal, metrics, logs or report: **checkpoints must be kept private** (a shared checkpoint
  makes the noise recoverable). The journal carries :meth:`Randomness.public_id`, a SHA-256
  commitment that identifies the secret without revealing it.
* ``"seeded"``: everything derives from ``config.seed`` (tests, reproducibility sweeps). The run
  report says that the noise and the batches can then be recomputed from the report.

Not privacy randomness (seeded from ``config.seed`` in both modes): the model initialisation
(initial values are independent of the data) and the temporal clip offsets. An offset is drawn
for a row of a physical batch independently of the data, so an adversary who knows every offset
learns nothing about membership: the row -> video assignment is the (secret) private draw, and
conditioned on any fixed offsets each step is still a Poisson-subsampled Gaussian mechanism on
per-example clipped gradients of sensitivity C, which is what the accountant composes.

>>> r = Randomness(mode="seeded", seed=3)
>>> r.public_id()
'seeded:3'
>>> s = Randomness(mode="secret", seed=3, secret=2**100)
>>> str(2**100) in repr(s) or format(2**100, "x") in repr(s)
False
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import secrets
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from maskdp_jax.core import sampling


class RandomnessMode(enum.StrEnum):
    """Where the noise key and the private batches come from: a fresh 128-bit ``secret`` per run
    (kept only in the checkpoints), or the public ``seeded`` config seed (tests and
    reproducibility only: anyone can then recompute the noise)."""

    SECRET = "secret"
    SEEDED = "seeded"


MODES = tuple(m.value for m in RandomnessMode)
SECRET_BYTES = 16

# The seeded mode's noise key (kept from earlier versions, so seeded runs reproduce them).
_SEEDED_NOISE_OFFSET = 1_000_003


def _derive(secret: int, label: bytes, num_bytes: int) -> bytes:
    digest = hashlib.sha256(secret.to_bytes(SECRET_BYTES, "little") + label).digest()
    if num_bytes > len(digest):
        raise ValueError(f"cannot derive {num_bytes} bytes from one SHA-256 digest.")
    return digest[:num_bytes]


@dataclasses.dataclass(frozen=True)
class Randomness:
    """Source of the noise key and of the sampler seeds of one run.

    Attributes:
      mode: :class:`RandomnessMode` (or its value, ``"secret"`` or ``"seeded"``).
      seed: ``config.seed`` (public). In ``seeded`` mode the only source.
      secret: 128-bit integer (``secret`` mode only). Never printed or logged; it belongs in
        checkpoints only (:meth:`to_meta`).
    """

    mode: RandomnessMode
    seed: int
    secret: int | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"randomness mode must be one of {MODES}; got {self.mode!r}.")
        object.__setattr__(self, "mode", RandomnessMode(self.mode))
        if (self.mode == "secret") != (self.secret is not None):
            raise ValueError("a secret is needed in 'secret' mode and only there.")
        if self.secret is not None and not 0 <= self.secret < 2 ** (8 * SECRET_BYTES):
            raise ValueError(f"the secret must be a {8 * SECRET_BYTES}-bit non-negative integer.")

    def noise_key(self) -> jax.Array:
        """The base noise key (step ``t`` uses ``fold_in(key, t)``)."""
        if self.mode == "seeded":
            return jax.random.key(self.seed + _SEEDED_NOISE_OFFSET)
        # jax.random.key(int) keeps only 32 bits without x64: wrap the full key data instead.
        shape = jax.random.key_data(jax.random.key(0)).shape
        words = np.frombuffer(_derive(self.secret, b"noise", 4 * int(np.prod(shape))), "<u4")
        return jax.random.wrap_key_data(words.reshape(shape).astype(np.uint32))

    def sampler(self, *, num_examples: int, expected_batch_size: int,
                cycle_length: int = 1) -> sampling.PoissonSampler:
        """The Poisson sampler of the run (public and private streams; ``cycle_length > 1``:
        the private stream samples cyclically, for banded noise)."""
        if self.mode == "seeded":
            return sampling.PoissonSampler(num_examples=num_examples,
                                           expected_batch_size=expected_batch_size,
                                           seed=self.seed, cycle_length=cycle_length)
        return sampling.PoissonSampler(
            num_examples=num_examples, expected_batch_size=expected_batch_size,
            seed=int.from_bytes(_derive(self.secret, b"public-batches", 16), "little"),
            private_seed=int.from_bytes(_derive(self.secret, b"private-batches", 16), "little"),
            cycle_length=cycle_length,
        )

    def public_id(self) -> str:
        """Identifies the randomness without revealing it (for the journal)."""
        if self.mode == "seeded":
            return f"seeded:{self.seed}"
        return "secret:sha256:" + _derive(self.secret, b"public-id", 16).hex()

    def to_meta(self) -> dict[str, Any]:
        """What a checkpoint stores to restore this randomness. Holds the secret: checkpoint
        meta only, never a report, log, metric or journal."""
        return {"mode": self.mode,
                "secret": None if self.secret is None else format(self.secret, "x")}


def draw_secret() -> int:
    """A fresh 128-bit secret, the same on every host (process 0 draws and broadcasts it)."""
    words = np.frombuffer(secrets.token_bytes(SECRET_BYTES), "<u4").astype(np.uint32)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        words = np.asarray(multihost_utils.broadcast_one_to_all(words), np.uint32)
    return int.from_bytes(words.astype("<u4").tobytes(), "little")


def for_run(*, mode: str, seed: int, restored: Mapping[str, Any] | None) -> Randomness:
    """The randomness of a run: seeded from ``seed``, restored from a checkpoint, or (secret
    mode, fresh run) freshly drawn.

    Args:
      mode: ``"secret"`` or ``"seeded"`` (``config.privacy.randomness``).
      seed: the public seed (``config.seed``).
      restored: the ``randomness`` entry (:meth:`Randomness.to_meta`) of the checkpoint being
        resumed, or None. A checkpoint without a secret (written in seeded mode) gives a fresh
        secret here; resuming it is then refused by :func:`maskdp_jax.run.guard.validate_meta` (the
        config differs).
    """
    if mode == "seeded":
        return Randomness(mode="seeded", seed=seed)
    saved = restored or {}
    if saved.get("mode") == "secret" and saved.get("secret"):
        return Randomness(mode="secret", seed=seed, secret=int(saved["secret"], 16))
    return Randomness(mode=mode, seed=seed, secret=draw_secret())
