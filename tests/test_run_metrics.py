"""metrics.jsonl across a resume: rows of re-executed steps are not duplicated, none is lost."""

from __future__ import annotations

import json
import math

from maskdp_jax.run import metrics


def _steps(path):
    with open(path) as f:
        return [json.loads(line)["step"] for line in f]


def test_resume_keeps_rows_up_to_the_checkpoint_and_drops_the_rest(tmp_path):
    with metrics.MetricWriter(str(tmp_path), tensorboard=False) as w:
        for step in range(1, 6):
            w.write(step, {"loss": 1.0 / step, "epsilon": math.inf})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 6, "lo')  # the process died while writing this row
    # Resumed from the checkpoint at step 3: steps 4-6 will be re-executed and logged again.
    with metrics.MetricWriter(str(tmp_path), tensorboard=False, resume_step=3) as w:
        assert [r["step"] for r in w.history] == [1, 2, 3]
        assert w.history[1] == {"step": 2, "loss": 0.5, "epsilon": math.inf}
        assert _steps(tmp_path / "metrics.jsonl") == [1, 2, 3]
        w.write(4, {"loss": 0.25, "epsilon": math.inf})
    assert _steps(tmp_path / "metrics.jsonl") == [1, 2, 3, 4]
    assert metrics.read_rows(str(tmp_path / "metrics.jsonl"))[3] == {
        "step": 4, "loss": 0.25, "epsilon": math.inf}


def test_a_fresh_run_starts_an_empty_file(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    with metrics.MetricWriter(str(tmp_path), tensorboard=False) as w:
        assert w.history == []
    assert (tmp_path / "metrics.jsonl").read_text() == ""
