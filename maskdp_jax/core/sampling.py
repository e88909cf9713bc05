"""Host-side Poisson sampling of logical batches and their split into physical batches.

Privacy meaning. The accountant assumes *Poisson subsampling*: at every logical step each example
is included independently with probability ``q = B / N``. The resulting logical batch has a random
size and is **never truncated or resampled** (either would change the mechanism being accounted).
To keep static shapes for XLA, a logical batch is cut into fixed-size *physical* batches; the last
one is padded with weight-0 rows, which contribute exactly zero.

MaskDP draws (see docs/design.md, "One training step"):

* ``decoupled`` (default): the public batch and the private batch are two *independent* Poisson
  draws. The noise-free public gradient then reveals only the public draw, which carries no
  information about the private one, so the private mechanism keeps its amplification by
  subsampling (Theorem 4.1).
* ``coupled``: one draw used for both views, as in the paper's Algorithm 1. The public gradient
  reveals who was sampled; the accountant must use the revealed-sample bound.

Draws are a pure function of ``(seed, step, stream)``: a resumed run or another host reproduces
exactly the same batches without any sampler state beyond the seed. Whoever knows the seed knows
every batch, so the private stream's seed must be secret (:mod:`maskdp_jax.core.randomness`; the
default ``secret`` randomness gives each stream its own seed derived from a secret).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import numpy as np

from maskdp_jax.core.plan import Mode

PUBLIC_STREAM = 0
PRIVATE_STREAM = 1
_PARTITION_WORD = 2**32  # seeds the cyclic groups; above any step, so no step's draw shares it


@dataclasses.dataclass(frozen=True)
class LogicalBatch:
    """Example indices of one logical step.

    Attributes:
      public: indices whose *public view* is used (unclipped, noise-free gradient), or None when
        the mode has no public pass (``dp``). In ``nonprivate`` mode the public pass sees the full
        video.
      private: indices whose *private view* is used (clipped, noised gradient), or None when the
        mode has no private pass (``nonprivate``). In ``dp`` mode the private pass sees the full
        video.
    """

    public: np.ndarray | None
    private: np.ndarray | None


@dataclasses.dataclass(frozen=True)
class PoissonSampler:
    """Poisson sampler with rate ``q = expected_batch_size / num_examples``.

    Args:
      num_examples: N, the number of training videos.
      expected_batch_size: B; the update divides by this (not by the sampled size).
      seed: the only state of the sampler (of both streams unless ``private_seed`` is given).
      private_seed: seed of the private stream; None: ``seed``. Privacy: must be secret.
      cycle_length: b, 1 for plain Poisson sampling; above 1 the private stream samples
        cyclically (:meth:`draw`).
    """

    num_examples: int
    expected_batch_size: int
    seed: int
    private_seed: int | None = dataclasses.field(default=None, repr=False)
    cycle_length: int = 1

    def __post_init__(self):
        if isinstance(self.cycle_length, bool) or not isinstance(self.cycle_length, int) \
                or self.cycle_length < 1:
            raise ValueError(f"cycle_length must be an integer >= 1; got {self.cycle_length!r}.")
        if self.num_examples <= 0:
            raise ValueError(f"num_examples must be > 0; got {self.num_examples}.")
        if not 0 < self.expected_batch_size <= self.num_examples:
            raise ValueError(
                f"expected_batch_size must be in (0, N={self.num_examples}]; "
                f"got {self.expected_batch_size}."
            )

    @property
    def sampling_rate(self) -> float:
        return self.expected_batch_size / self.num_examples

    def draw(self, step: int, *, stream: int) -> np.ndarray:
        """Indices included at ``step`` in ``stream``, in random order. ``[n]`` int64, n random.

        With ``cycle_length = b > 1`` the private stream is cyclic Poisson sampling (what banded
        correlated noise needs, :mod:`maskdp_jax.core.bandmf`): every example belongs to one of
        ``b`` groups, drawn once per run independently of the data from the stream's (secret) seed,
        and step t includes each member of group ``t mod b`` with probability
        ``min(1, b B / N)``, no one else. The expected batch stays B; an example takes part at
        most once in any ``b`` consecutive steps. The public stream is never cyclic.
        """
        private = stream == PRIVATE_STREAM and self.private_seed is not None
        seed = self.private_seed if private else self.seed
        rng = np.random.default_rng([seed, step, stream])
        if stream == PRIVATE_STREAM and self.cycle_length > 1:
            rate = min(1.0, self.cycle_length * self.sampling_rate)
            eligible = self._groups == step % self.cycle_length
            included = np.flatnonzero(eligible & (rng.random(self.num_examples) < rate))
        else:
            included = np.flatnonzero(rng.random(self.num_examples) < self.sampling_rate)
        return rng.permutation(included)

    def groups(self) -> np.ndarray:
        """``[N]`` the cyclic group of every example (private stream, ``cycle_length > 1``):
        independent uniform draws from the private seed, fixed for the run (a video's group
        depends on nothing about it, so adding or removing one moves no other: the
        add/remove adjacency the accountant assumes). Drawn once per sampler, not per step."""
        return self._groups.copy()

    @functools.cached_property
    def _groups(self) -> np.ndarray:
        seed = self.private_seed if self.private_seed is not None else self.seed
        rng = np.random.default_rng([seed, _PARTITION_WORD, PRIVATE_STREAM])
        return rng.integers(self.cycle_length, size=self.num_examples)

    def logical_batch(self, step: int, *, mode: str, sampling: str = "decoupled") -> LogicalBatch:
        """The public and private indices of one logical step for a training mode.

        ``dp`` uses the private stream and ``nonprivate`` the public stream, so that ``dp`` equals
        ``maskdp`` with all-private masks under the same seed.

        Args:
          step: the logical step (the draws are a pure function of it and the seeds).
          mode: a :class:`~maskdp_jax.core.plan.Mode` (or its string).
          sampling: the requested scheme; it applies to ``maskdp`` only
            (:meth:`~maskdp_jax.core.plan.Mode.sampling_scheme`).

        Low level: the caller owns keeping ``sampling`` equal to the plan's (a coupled draw
        under a decoupled plan under-reports ε) and ``step`` equal to the step being charged.
        :meth:`maskdp_jax.core.mechanism.Mechanism.batch` draws with the plan's scheme at the
        state's step, and is what a training loop should call.
        """
        mode = Mode(mode)
        coupled = mode.sampling_scheme(sampling) == "coupled"
        if coupled and self.cycle_length > 1:
            raise ValueError("coupled sampling reuses the public draw as the private one, which "
                             "is not cyclic: it would break banded noise's min-separation. "
                             "Banded noise needs sampling='decoupled'.")
        public = self.draw(step, stream=PUBLIC_STREAM) if mode.has_public_pass else None
        if not mode.has_private_pass:
            return LogicalBatch(public=public, private=None)
        private = public if coupled else self.draw(step, stream=PRIVATE_STREAM)
        return LogicalBatch(public=public, private=private)


def physical_batches(
    indices: np.ndarray, *, physical_batch_size: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Cut a logical batch into fixed-size physical batches.

    Every index appears exactly once; the last batch is padded with index 0 at weight 0. An empty
    logical batch yields nothing (the step then adds only noise, as the mechanism requires).

    Args:
      indices: ``[n]`` example indices of the logical batch.
      physical_batch_size: P, the static batch size compiled for.

    Yields:
      ``(indices [P] int64, weights [P] float32)``.
    """
    if physical_batch_size <= 0:
        raise ValueError(f"physical_batch_size must be > 0; got {physical_batch_size}.")
    indices = np.asarray(indices, dtype=np.int64)
    for start in range(0, len(indices), physical_batch_size):
        chunk = indices[start : start + physical_batch_size]
        pad = physical_batch_size - len(chunk)
        weights = np.concatenate([np.ones(len(chunk), np.float32), np.zeros(pad, np.float32)])
        yield np.concatenate([chunk, np.zeros(pad, np.int64)]), weights


def padded_indices(indices: np.ndarray, *, multiple_of: int) -> tuple[np.ndarray, np.ndarray]:
    """A whole logical batch as one array padded to a multiple of ``multiple_of`` rows: the
    concatenation of :func:`physical_batches` (an empty draw gives one batch of padding).

    For a loop that jits one call per logical step
    (:func:`maskdp_jax.core.gradient.masked_gradient`): the shapes take a few values (multiples
    of ``multiple_of`` around B), each compiled once, and the batch is never truncated. Padding
    rows have weight 0 and contribute exactly zero.

    Returns:
      ``(indices [n'], weights [n'])``, ``n'`` the smallest positive multiple of
      ``multiple_of`` >= ``len(indices)``.

    >>> idx, w = padded_indices(np.array([5, 2, 9]), multiple_of=2)
    >>> idx.tolist(), w.tolist()
    ([5, 2, 9, 0], [1.0, 1.0, 1.0, 0.0])
    >>> padded_indices(np.array([], np.int64), multiple_of=2)[1].tolist()
    [0.0, 0.0]
    """
    if indices is None:
        raise ValueError(
            "padded_indices got None: the logical batch has no such pass in this mode "
            "(LogicalBatch.public is None in 'dp', .private in 'nonprivate'); give that pass "
            "as None to masked_gradient instead of building its examples.")
    batches = list(physical_batches(indices, physical_batch_size=multiple_of))
    if not batches:
        return np.zeros(multiple_of, np.int64), np.zeros(multiple_of, np.float32)
    return (np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches]))
