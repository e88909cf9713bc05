"""What identifies a run: its config (fingerprint, differences) and the topology it runs on.

A resumed run, or a run adopting a workdir's journal, must be the *same* mechanism as the one the
ledger accounts for, re-executing identical steps: the same config (up to :data:`RESUMABLE_KEYS`),
the same randomness and the same topology. These functions compute and compare those
identities; :class:`maskdp_jax.run.guard.PrivacyGuard` decides with them. The config is taken as a
plain mapping (``config.to_dict()``): it is the published configuration of the run (nothing secret).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import jax

#: Config keys that may change between a run and its resume: they affect neither the privacy
#: accounting nor the data, model or update (only logging, caching and checkpoint cadence, and how
#: per-example norms are computed: ``compute.per_example`` gives the same update to float rounding).
#: ``log_private_metrics`` is not one of them: non-DP rows once logged stay in metrics.jsonl, and
#: the report must say so.
RESUMABLE_KEYS = frozenset({
    "log_every_steps", "tensorboard", "compilation_cache_dir",
    "input.prefetch", "checkpoint.every_steps", "checkpoint.keep", "compute.per_example",
})


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Keys (dotted) whose values differ between two config dicts, ignoring RESUMABLE_KEYS."""
    a, b = _flatten(saved), _flatten(current)
    keys = sorted((set(a) | set(b)) - RESUMABLE_KEYS)
    return [k for k in keys if a.get(k, "<absent>") != b.get(k, "<absent>")]


def config_fingerprint(config: Mapping[str, Any]) -> str:
    """SHA-256 of the config without RESUMABLE_KEYS: equal iff :func:`config_differences` is
    empty. Holds nothing secret (the config is published in the report)."""
    flat = {k: v for k, v in _flatten(to_json_config(config)).items() if k not in RESUMABLE_KEYS}
    return hashlib.sha256(json.dumps(flat, sort_keys=True).encode()).hexdigest()


def current_topology() -> dict[str, Any]:
    """What bit-identical re-execution of a step depends on besides its inputs: the number of
    processes and devices (reduction order, clip offsets per host), the backend and device kind
    (kernels) and the JAX version (the compiler)."""
    return {"process_count": jax.process_count(), "device_count": jax.device_count(),
            "platform": jax.default_backend(), "device_kind": jax.devices()[0].device_kind,
            "jax_version": jax.__version__}


def check_same_run(saved: Mapping[str, Any], current: Mapping[str, Any], *, where: str) -> None:
    """Refuse to resume a checkpoint written with a different config.

    Anything that changes the privacy accounting (q, σ, δ, steps, adjacency, sampling), the data,
    the model or the update would make the resumed run a different mechanism than the one the
    ledger accounts for.

    Raises:
      ValueError: listing the differing keys and their saved / current values.
    """
    diff = config_differences(saved, current)
    if diff:
        a, b = _flatten(saved), _flatten(current)
        lines = "\n".join(f"  {k}: checkpoint {a.get(k, '<absent>')!r} != now "
                          f"{b.get(k, '<absent>')!r}" for k in diff)
        raise ValueError(
            f"The checkpoint in {where} was written with a different config; resuming would mix "
            f"two runs under one privacy ledger. Differing keys:\n{lines}\n"
            "Use a fresh --workdir, or restore the original config values."
        )


def to_json_config(config: Mapping[str, Any]) -> dict:
    """The config as it comes back from JSON (tuples become lists)."""
    return json.loads(json.dumps(dict(config)))


def run_identity(config: Mapping[str, Any], *, randomness_id: str,
                 topology: Mapping[str, Any]) -> dict[str, Any]:
    """What the journal records to recognise its run: the config's fingerprint
    (:func:`config_fingerprint`), the randomness' public id
    (:meth:`maskdp_jax.core.randomness.Randomness.public_id`, not the secret) and the topology."""
    return {"config_fingerprint": config_fingerprint(config), "randomness": randomness_id,
            "topology": dict(topology)}
