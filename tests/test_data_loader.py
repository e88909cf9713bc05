"""The step loader (grain): batches are load_fn(step) in order, whatever the depth; a resumed
or skipping caller gets the step it asks for; a failing step raises at that step."""

import threading

import pytest

from maskdp_jax.data import StepPrefetcher


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_steps_in_order_and_after_a_jump(depth):
    calls = []
    lock = threading.Lock()

    def load(step):
        with lock:
            calls.append(step)
        return {"step": step, "value": step * 10}

    with StepPrefetcher(load, depth=depth, num_steps=8) as p:
        assert [p(s)["value"] for s in range(3)] == [0, 10, 20]
        assert p(6)["step"] == 6  # a resumed run starts at its checkpoint's step
        assert p(7)["step"] == 7
        assert p.state() == {"next_index": 8}
    assert max(calls) <= 7  # never past num_steps
    if depth == 0:
        assert calls == [0, 1, 2, 6, 7]


def test_a_failing_step_raises_when_that_step_is_read():
    def load(step):
        if step == 2:
            raise ValueError("bad video in step 2")
        return step

    with StepPrefetcher(load, depth=2, num_steps=5) as p:
        assert [p(0), p(1)] == [0, 1]
        with pytest.raises(ValueError, match="bad video in step 2"):
            p(2)


def test_negative_depth_is_refused():
    with pytest.raises(ValueError, match="prefetch depth must be >= 0"):
        StepPrefetcher(lambda s: s, depth=-1, num_steps=3)
