"""Run reports: one JSON file for machines and one Markdown file for people."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

from maskdp_jax.core.plan import Mode

COUNTS_HIDDEN = "not shown: labels are private in dp mode"


@dataclasses.dataclass
class RunReport:
    """Everything a reader needs to judge a run: privacy, accuracy, configuration, timing."""

    config: dict[str, Any]
    privacy: dict[str, Any]
    privacy_markdown: str
    metrics: dict[str, Any]
    class_names: list[str]
    history: list[dict[str, Any]]
    timing: dict[str, Any]
    parameters: dict[str, int]
    # Training videos per class; None (and left out of report.json) in ``dp`` mode, where labels
    # are private: exact counts are not differentially private.
    train_class_counts: list[int] | None
    # maskdp only: accuracy on the test videos' public view / both views (diagnostic, see
    # evaluation.predict); the headline ``metrics`` are always on full videos.
    view_metrics: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # How the held-out split was made, when it was not given by split files for both subsets
    # (folder datasets: run.datasets.describe_split); None otherwise.
    split: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.train_class_counts is None:
            del out["train_class_counts"]
        return _json_safe(out)

    def to_markdown(self) -> str:
        m, c = self.metrics, self.config
        # With 5 classes or fewer every label is in the top 5: top-5 would always read 1.
        top5 = len(self.class_names) > 5
        lines = [
            f"# Run report: {c['mode']} on {c['input']['dataset']}",
            "",
            "## Accuracy (held-out split)",
            "",
            f"- top-1: **{m['top1']:.4f}** on {m['num_examples']} videos",
            *([f"- top-5: {m['top5']:.4f}"] if top5 else []),
            f"- mean per-class accuracy: {m['mean_class_accuracy']:.4f}",
            *([f"- held-out split: {self.split}"] if self.split else []),
            "",
        ]
        tested = [sum(row) for row in m["confusion"]]  # [true][predicted] counts
        if self.train_class_counts is None:
            lines += [f"Training videos per class: {COUNTS_HIDDEN}.", "",
                      "| class | test videos | test accuracy |", "|---|---|---|"]
            counts = [None] * len(self.class_names)
        else:
            lines += ["| class | train videos | test videos | test accuracy |",
                      "|---|---|---|---|"]
            counts = self.train_class_counts
        for name, count, n, acc in zip(self.class_names, counts, tested,
                                       m["per_class_accuracy"], strict=True):
            cells = [name] + ([] if count is None else [str(count)]) + [str(n)]
            cells.append("n/a" if acc is None else f"{acc:.4f}")
            lines.append(f"| {' | '.join(cells)} |")
        if self.view_metrics:
            lines += [
                "",
                "Diagnostic (the model was trained on views; the headline numbers above are on "
                "full videos):",
                "",
                "| test input | top-1 |" + (" top-5 |" if top5 else ""),
                "|---|---|" + ("---|" if top5 else ""),
            ]
            for view, vm in self.view_metrics.items():
                lines.append(f"| {view} view{'s' if view == 'two_view' else ''} | "
                             f"{vm['top1']:.4f} |" + (f" {vm['top5']:.4f} |" if top5 else ""))
        lines += [
            "",
            "## Privacy",
            "",
            self.privacy_markdown,
            "",
            "## Training",
            "",
            f"- model: {c['model']['name']}, fine-tuning `{c['model']['finetune']}`, "
            f"{self.parameters['trainable']:,} trainable of "
            f"{self.parameters['total']:,} parameters",
            f"- steps: {self.timing['steps']}, expected batch {c['batch_size']}, "
            f"physical batch {c['physical_batch_size']}, seed {c['seed']} "
            f"({seed_note(c)})",
            f"- time: {self.timing['train_seconds']:.1f} s training, "
            f"{self.timing['total_seconds']:.1f} s in all{data_wait_note(self.timing)}",
            f"- logged training metrics: {logged_metrics_note(c)}",
            "- checkpoints: `private/checkpoints/` beside this report. They are **private**: "
            f"{checkpoint_note(c)} Share this report, the metrics and the trained model "
            "(`model/`), never the `private/` directory.",
            "",
            "## The trained model",
            "",
            "`model/` beside this report: `params.safetensors` (every parameter, keyed by its "
            "path) and `model.json` (the model settings, classes and pixel normalisation). It "
            "is the released model, covered by the ε above. Load it with "
            "`maskdp_jax.run.model.load_trained(\"<workdir>/model\")`, or start another run "
            "from it with `--config.model.init_from=<workdir>/model`.",
            "",
            "![training curve](training_curve.png)",
            "",
            "## Configuration",
            "",
            "```json",
            json.dumps(_json_safe(c), indent=2, sort_keys=True),
            "```",
            "",
        ]
        return "\n".join(lines)


def checkpoint_note(config: dict[str, Any]) -> str:
    """Why the checkpoints must not be shared (see run.checkpoint)."""
    if config.get("privacy", {}).get("randomness") == "secret":
        return ("they hold the secret the DP noise and the private batches derive from, and "
                "the guarantee does not hold against whoever has it.")
    return ("they hold the full training state (in seeded randomness the noise is already "
            "recomputable from the published seed).")


def seed_note(config: dict[str, Any]) -> str:
    """What the published seed determines (see maskdp_jax.core.randomness)."""
    randomness = config.get("privacy", {}).get("randomness")
    if randomness == "secret":
        return ("model initialisation and clip offsets only; noise and batches came from a "
                "secret kept in the checkpoints")
    if randomness == "seeded":
        return "also the noise and the batches: see the warning under Privacy"
    return "randomness not recorded"


def logged_metrics_note(config: dict[str, Any]) -> str:
    """What the logged training metrics (metrics.jsonl, TensorBoard, curve) are computed from."""
    mode = Mode(config["mode"])
    if mode is Mode.PUBLIC_ONLY:
        return "the public-view loss (the run reads no private pixel)"
    if not mode.is_private:
        return "training loss on full videos (the run is not private)"
    public = "the public-view loss and " if mode.uses_views else ""
    if config.get("log_private_metrics", False):
        return (f"{public}ε, plus metrics computed from private data, named `(non-DP)`: they "
                "are **NOT differentially private** and not covered by the guarantee above "
                "(`log_private_metrics=True`)")
    return (f"{public}ε only; nothing computed from private data is logged "
            "(`log_private_metrics=False`)")


def _json_safe(value: Any) -> Any:
    """Replace non-finite floats by strings ("inf", "nan") so the JSON is standard."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


REPORT_JSON = "report.json"


def finished(workdir: str) -> bool:
    """Whether the run in ``workdir`` is finished: its ``report.json``, the last thing a run
    writes (once the journal covers its last step), exists."""
    return os.path.isfile(os.path.join(workdir, REPORT_JSON))


def read(workdir: str) -> dict[str, Any] | None:
    """The finished run's ``report.json`` in ``workdir``, or None (:func:`finished`)."""
    if not finished(workdir):
        return None
    with open(os.path.join(workdir, REPORT_JSON)) as f:
        return json.load(f)


def write(run: RunReport, workdir: str) -> tuple[str, str]:
    """Write ``report.json`` and ``report.md`` into ``workdir``; return their paths."""
    os.makedirs(workdir, exist_ok=True)
    json_path = os.path.join(workdir, REPORT_JSON)
    md_path = os.path.join(workdir, "report.md")
    with open(json_path, "w") as f:  # compact: report.md is the page a person reads
        json.dump(run.to_dict(), f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    with open(md_path, "w") as f:
        f.write(run.to_markdown())
    return json_path, md_path


def data_wait_note(timing: dict[str, Any]) -> str:
    """What the training loop waited for its batches after the first step (which compiles), as
    a clause of the report's time line, or "" for a run without the figure (a single step, or a
    report written before it was measured).

    >>> data_wait_note({"data_wait_seconds": 1.2, "timed_seconds": 30.0, "timed_steps": 9})
    '; waiting for data 1.2 s of the 30.0 s of the 9 steps after the first (4.0 %)'
    """
    if not timing.get("timed_steps"):
        return ""
    wait, total = timing["data_wait_seconds"], timing["timed_seconds"]
    steps = timing["timed_steps"]
    return (f"; waiting for data {wait:.1f} s of the {total:.1f} s of the {steps} "
            f"step{'s' if steps != 1 else ''} after the first "
            f"({100 * wait / max(total, 1e-9):.1f} %)")
