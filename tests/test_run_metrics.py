"""metrics.jsonl across a resume: rows of re-executed steps are not duplicated, none is lost."""

from __future__ import annotations

import json
import math
import os

import pytest

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


def _events(directory) -> list:
    """Every event of the TensorBoard files under ``directory`` (TFRecord framing: length,
    its CRC, the record, its CRC)."""
    from tensorboardX.proto import event_pb2

    found = []
    for root, _, files in os.walk(directory):
        for name in sorted(files):
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            offset = 0
            while offset < len(data):
                length = int.from_bytes(data[offset:offset + 8], "little")
                event = event_pb2.Event()
                event.ParseFromString(data[offset + 12:offset + 12 + length])
                found.append(event)
                offset += 12 + length + 4
    return found


def test_the_summary_carries_test_accuracy_views_and_hparams(tmp_path):
    """TensorBoard gets the outcome, not only loss curves: the test and view accuracies at the
    last step, and the configuration as hparams with those metrics."""
    hparams = metrics.flat_hparams({"mode": "maskdp", "privacy": {"delta": 1e-5, "sizes": (1, 2)},
                                    "seed": 0, "note": None})
    assert hparams == {"mode": "maskdp", "privacy.delta": 1e-5, "privacy.sizes": "(1, 2)",
                       "seed": 0, "note": "None"}
    metrics.write_summary(str(tmp_path), step=7, hparams=hparams,
                          scalars={"test/top1": 0.5, "test_public_view/top1": 0.75,
                                   "test/top5": float("nan")})
    events = _events(tmp_path / "tb")
    scalars = {(v.tag, e.step): v.simple_value for e in events for v in e.summary.value
               if v.HasField("simple_value")}
    assert scalars[("test/top1", 7)] == 0.5 and scalars[("test_public_view/top1", 7)] == 0.75
    assert not any(tag == "test/top5" for tag, _ in scalars)
    plugins = {v.metadata.plugin_data.plugin_name for e in events for v in e.summary.value}
    assert "hparams" in plugins
    blob = b"".join(v.metadata.plugin_data.content for e in events for v in e.summary.value)
    assert b"privacy.delta" in blob and b"hparam/test/top1" in blob


def test_a_non_private_runs_infinite_epsilon_reaches_tensorboard_without_a_warning(tmp_path,
                                                                                   caplog):
    """ε = ∞ in the config's hparams is written as the text "inf": tensorboardX warned
    "NaN or Inf found in input tensor" on the console of every non-private run."""
    hparams = metrics.flat_hparams({"privacy": {"target_epsilon": float("inf"),
                                                "delta": float("nan")}})
    assert hparams == {"privacy.target_epsilon": "inf", "privacy.delta": "nan"}
    with caplog.at_level("WARNING"):
        metrics.write_summary(str(tmp_path), step=1, hparams=hparams, scalars={"test/top1": 0.5})
    assert not [r for r in caplog.records if "NaN or Inf" in r.getMessage()]
    blob = b"".join(v.metadata.plugin_data.content for e in _events(tmp_path / "tb")
                    for v in e.summary.value)
    assert b"privacy.target_epsilon" in blob


def test_a_reexecuted_step_must_reproduce_its_first_execution(tmp_path):
    """The ledger counts a re-executed step once because it is bit-identical; a resumed run
    whose re-executed row differs stops before writing it, and the first execution's rows stay
    on record across resumes."""
    with metrics.MetricWriter(str(tmp_path), tensorboard=False) as w:
        for step in range(1, 5):
            w.write(step, {"public/loss": 1.0 / step, "epsilon": 0.1 * step,
                           "steps_per_second": 3.0})
    with metrics.MetricWriter(str(tmp_path), tensorboard=False, resume_step=2) as w:
        assert sorted(w.first_execution) == [3, 4]
        w.write(3, {"public/loss": 1.0 / 3, "epsilon": 0.1 * 3, "steps_per_second": 9.0})
        with pytest.raises(metrics.ResumeDivergence, match=r"step 4.*public/loss: 0.25 then"):
            w.write(4, {"public/loss": 0.25000003, "epsilon": 0.4, "steps_per_second": 3.0})
    assert _steps(tmp_path / "metrics.jsonl") == [1, 2, 3]  # the diverging row never left
    assert _steps(tmp_path / metrics.FIRST_EXECUTION) == [3, 4]
    # A later resume still compares with the first execution, not with the second.
    with metrics.MetricWriter(str(tmp_path), tensorboard=False, resume_step=3) as w:
        with pytest.raises(metrics.ResumeDivergence, match="step 4"):
            w.write(4, {"public/loss": 0.5, "epsilon": 0.4})
