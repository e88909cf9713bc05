"""The ledger of steps a training run has actually taken.

A run whose sampling rate or noise changes (a schedule, a resume with other
settings) is a sequence of segments ``(q, σ, steps)``. The ledger records every
logical step as it is taken, merges consecutive identical steps, and accounts the
exact composition of all segments. It is stored in checkpoints (``to_dict`` /
``from_dict``), so a resumed run continues the same history and never reports a
smaller ε than the steps it has executed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from maskdp_jax.accounting import accountant, events

_FORMAT_VERSION = 1


class Ledger:
    """Segments of (q, noise_multiplier, steps) taken so far, oldest first.

    Example:
      >>> ledger = Ledger()
      >>> for _ in range(3):
      ...     ledger.record(q=0.01, noise_multiplier=1.0)
      >>> ledger.record(q=0.01, noise_multiplier=2.0, steps=5)
      >>> ledger.steps, len(ledger.segments)
      (8, 2)
      >>> Ledger.from_dict(ledger.to_dict()) == ledger
      True
    """

    def __init__(self, segments: Iterable[events.Segment] = ()) -> None:
        """Creates a ledger.

        Args:
          segments: initial history (validated; adjacent equal segments merged).
        """
        self._segments: list[events.Segment] = []
        for seg in segments:
            self.record(q=seg.q, noise_multiplier=seg.noise_multiplier, steps=seg.steps)

    def record(self, *, q: float, noise_multiplier: float, steps: int = 1) -> None:
        """Appends ``steps`` executed logical steps.

        Call it once per logical batch *after* the noisy update has been computed
        (a step whose update was released counts even if the run crashes later).

        Args:
          q: Poisson sampling rate B/N of the step(s).
          noise_multiplier: σ used (0: no noise; the ledger's ε becomes ∞).
          steps: number of identical steps, >= 1.
        """
        seg = events.make_segment(q=q, noise_multiplier=noise_multiplier, steps=steps)
        if self._segments:
            last = self._segments[-1]
            if last.q == seg.q and last.noise_multiplier == seg.noise_multiplier:
                self._segments[-1] = last._replace(steps=last.steps + seg.steps)
                return
        self._segments.append(seg)

    @property
    def steps(self) -> int:
        """Total number of logical steps recorded."""
        return sum(seg.steps for seg in self._segments)

    @property
    def segments(self) -> list[events.Segment]:
        """A copy of the segments, oldest first."""
        return list(self._segments)

    def epsilon(
        self,
        *,
        delta: float,
        method: str = "pld",
        adjacency: str = "special",
        sampling: str = "decoupled",
    ) -> float:
        """ε of the recorded history (exact composition of all segments).

        Args:
          delta: 0 < δ < 1.
          method: ``"pld"`` or ``"rdp"``.
          adjacency: ``"special"`` or ``"replace"``.
          sampling: ``"decoupled"`` or ``"coupled"``.

        Returns:
          ε (0 when empty, ``inf`` if a recorded step had no noise). Cached, so
          calling it every few steps for a progress bar is cheap when nothing
          changed.
        """
        return accountant.history_epsilon(
            self._segments, delta=delta, method=method, adjacency=adjacency, sampling=sampling
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (plain floats and ints) for checkpoints."""
        return {
            "version": _FORMAT_VERSION,
            "segments": [
                {
                    "q": float(s.q),
                    "noise_multiplier": float(s.noise_multiplier),
                    "steps": int(s.steps),
                }
                for s in self._segments
            ],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Ledger:
        """Restores a ledger written by :meth:`to_dict`.

        Raises:
          ValueError: unknown version, missing keys or invalid segments (a corrupt
            ledger must never silently under-count).
        """
        if not isinstance(d, Mapping) or d.get("version") != _FORMAT_VERSION:
            raise ValueError(f"Not a ledger dict of version {_FORMAT_VERSION}: {d!r}.")
        raw = d.get("segments")
        if not isinstance(raw, list):
            raise ValueError("Ledger dict needs a 'segments' list.")
        segments = []
        for item in raw:
            if not isinstance(item, Mapping) or set(item) != {"q", "noise_multiplier", "steps"}:
                raise ValueError(f"Bad ledger segment: {item!r}.")
            segments.append(
                events.make_segment(
                    q=item["q"], noise_multiplier=item["noise_multiplier"], steps=item["steps"]
                )
            )
        return cls(segments)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ledger):
            return NotImplemented
        return self._segments == other._segments

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        parts = ", ".join(
            f"(q={s.q:.6g}, sigma={s.noise_multiplier:.6g}, steps={s.steps})"
            for s in self._segments
        )
        return f"Ledger([{parts}])"

    def is_private(self) -> bool:
        """Whether every recorded step was noised (otherwise ε = ∞)."""
        return all(
            s.noise_multiplier > 0.0 and math.isfinite(s.noise_multiplier) for s in self._segments
        )
