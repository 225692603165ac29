"""What one sweep's capacity interval resamples, and what the sweep does between steps:
misses clustered in busy periods are drawn in blocks (an independent draw understates
their spread), the error and "far above unloaded" flags are judged again on every
resample, each step has its own arrival stream, and a step waits until the arms are idle."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np

from layergate.exporters.catalogue import BASELINE
from layergate.exporters.figures import capacity as cap
from layergate.exporters.figures.capacity_step import StepArm
from layergate.exporters.traffic import read_traffic
from layergate.harness.capacity.config import RATE
from layergate.harness.capacity.idle import IdleCheck
from layergate.harness.capacity.sweep import step_records, step_seed
from tests.support.echo import echo_server
from tests.support.traffic import traffic


def _sticky_misses(rng: np.random.Generator, n: int, stay: float) -> np.ndarray:
    """A two-state chain of misses (busy periods): each request keeps the last one's
    outcome with probability `stay`, else is a fresh draw at a 20 % miss rate."""
    out = np.empty(n, dtype=bool)
    out[0] = rng.random() < 0.2
    for i in range(1, n):
        out[i] = out[i - 1] if rng.random() < stay else rng.random() < 0.2
    return out


def _bootstrap_sd(met: np.ndarray, length: int) -> float:
    n = met.size
    starts = np.random.default_rng(1).integers(0, n, size=(400, -(-n // length)))
    draws = ((starts[:, :, None] + np.arange(length)) % n).reshape(400, -1)[:, :n]
    return float(met[draws].mean(axis=1).std())


def test_clustered_misses_are_resampled_in_blocks_that_measure_their_spread():
    rng = np.random.default_rng(7)
    n = 400
    runs = [~_sticky_misses(rng, n, 0.9) for _ in range(300)]
    true_sd = float(np.std([r.mean() for r in runs]))
    blocks = np.mean([_bootstrap_sd(r, cap.block_length(n)) for r in runs[:100]])
    single = np.mean([_bootstrap_sd(r, 1) for r in runs[:100]])
    assert cap.block_length(n) == 20
    # one by one the draw sees a third of the spread; in blocks it sees most of it
    assert single < 0.5 * true_sd, (single, true_sd)
    assert 0.7 * true_sd < blocks < 1.2 * true_sd, (blocks, true_sd)


def _arm_step(load: float, n: int, errors: int = 0, ttft: float = 0.1) -> StepArm:
    failed = (True,) * errors + (False,) * (n - errors)
    return StepArm(BASELINE, load, tuple(not f for f in failed), errors, n / load,
                   failed=failed, ttft=tuple(None if f else ttft for f in failed))


def test_the_error_rate_is_judged_again_on_every_resample():
    # the 4 req/s step has 3 errors in 60 (5 %, exactly the limit): it passes as run, and
    # fails in the resamples that drew more of them, so the capacity may lie below 4
    steps = [_arm_step(2, 60), _arm_step(4, 60, errors=3), _arm_step(8, 60, errors=30)]
    point = cap.capacity(steps, 0.9, 0.05)
    boot = cap.resampled(steps, 0.9, 0.05, 400, 0)
    assert point.last_pass == 4
    fell = np.mean(boot <= 2 + 1e-9)
    assert 0.2 < fell < 0.8, fell
    # stored without per-request outcomes, the flags are held as they were
    held = [StepArm(s.arm, s.load, s.met, s.errors, s.window_s) for s in steps]
    assert np.all(cap.resampled(held, 0.9, 0.05, 400, 0) > 2)


def test_far_above_unloaded_is_judged_again_on_every_resample():
    # 27 of the 4 req/s step's 60 requests were served at once, 33 waited 20x as long: the
    # median is far above unloaded as run (a flag, so the capacity is 2), not in the
    # resamples that drew 30 or more of the quick ones
    rng = np.random.default_rng(2)
    waited = rng.permutation(np.r_[np.full(27, 0.05), np.full(33, 1.0)])
    steps = [_arm_step(2, 60), _arm_step(8, 60, errors=30),
             StepArm(BASELINE, 4, (True,) * 60, 0, 15.0, ("median TTFT far above",),
                     failed=(False,) * 60,
                     ttft=tuple(waited))]
    assert cap.saturation.far_above_unloaded(waited[None, :])[0]
    assert cap.capacity(steps, 0.9, 0.05).value == 2
    rose = np.mean(cap.resampled(steps, 0.9, 0.05, 400, 0) > 2)
    assert 0.05 < rose < 0.6, rose


def test_the_vectorised_flag_is_the_detectors_rule():
    rng = np.random.default_rng(5)
    rows = rng.lognormal(-2, rng.uniform(0.1, 2.5, size=(300, 1)), size=(300, 40))
    rows[rng.random(rows.shape) < 0.1] = np.nan
    flags = cap.saturation.far_above_unloaded(rows)
    for row, flag in zip(rows, flags, strict=True):
        kept = row[np.isfinite(row)]
        p5, median = np.quantile(kept, [0.05, 0.5])
        assert flag == (median / p5 >= cap.saturation.FAR_ABOVE)
    assert 0 < flags.sum() < len(rows)


def test_each_step_draws_its_own_arrival_stream(tmp_path):
    source = read_traffic(traffic(tmp_path / "t.jsonl", 4, 0.1)).records
    first = [r.offset_s for r in step_records(source, 50, 2.0, RATE, step_seed(0, 0))]
    second = [r.offset_s for r in step_records(source, 50, 4.0, RATE, step_seed(0, 1))]
    # the gaps in units of the mean gap: one stream rescaled would give the same ones
    gaps_1, gaps_2 = np.diff(first) * 2.0, np.diff(second) * 4.0
    assert abs(np.corrcoef(gaps_1, gaps_2)[0, 1]) < 0.3
    again = [r.offset_s for r in step_records(source, 50, 2.0, RATE, step_seed(0, 0))]
    assert again == first  # and a resumed step sends its own stream again


def test_a_step_waits_until_a_busy_server_has_drained(tmp_path):
    record = read_traffic(traffic(tmp_path / "t.jsonl", 1, 0.1)).records[0]
    with echo_server("--token-delay", "0.05", "--slots", "1") as url:
        check = IdleCheck({BASELINE: url}, {}, record, timeout_s=10)
        check.learn((BASELINE,))
        assert check.idle_s[BASELINE] < 0.5
        body = {"model": "m", "messages": [{"role": "user", "content": "a b c"}],
                "max_tokens": 30, "stream": True}
        busy = threading.Thread(target=lambda: httpx.post(
            f"{url}/v1/chat/completions", json=body, timeout=30))
        busy.start()  # holds the one slot for 1.5 s
        time.sleep(0.2)
        waited = check.wait((BASELINE,))
        busy.join()
        assert waited.busy == () and waited.seconds >= 0.8, waited
        # still busy when the timeout passes: the step runs, the arm named
        busy = threading.Thread(target=lambda: httpx.post(
            f"{url}/v1/chat/completions", json=body, timeout=30))
        busy.start()
        time.sleep(0.2)
        short = IdleCheck({BASELINE: url}, {}, record, timeout_s=0.3,
                          idle_s=dict(check.idle_s))
        gave_up = short.wait((BASELINE,))
        busy.join()
        assert gave_up.busy == (BASELINE,) and "still answered a probe slowly" in gave_up.text()


def test_a_resumed_sweep_keeps_the_idle_times_it_learnt(tmp_path):
    """Relearnt on a resume, the idle time would be measured while the arms still work off
    the killed step, and every later check would pass."""
    from layergate.harness.sweepdir import SweepDir, SweepState
    sweep = SweepDir(tmp_path / "sweep")
    state = SweepState({"seed": 0})
    record = read_traffic(traffic(tmp_path / "t.jsonl", 1, 0.1)).records[0]
    check = IdleCheck({BASELINE: "http://127.0.0.1:9"}, {}, record, 1.0,
                      send=lambda url, body: 0.12, idle_s=state.idle_s)
    check.learn((BASELINE,))
    sweep.write(state)
    assert SweepDir(tmp_path / "sweep").read().idle_s == {BASELINE: 0.12}
