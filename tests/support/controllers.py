"""Stand-ins for the two rollout controllers, following their source's logic (not their
code) closely enough to drive `layergate watch` as they would:

- `FakeFlagger`: one analysis tick of fluxcd/flagger `pkg/controller/scheduler.go`
  (`advanceCanary` and `runCanary` for the canary strategy, no mirroring), with webhooks
  called as `scheduler_hooks.go` and `webhook.go` do (any status above 202 is "no"; a
  webhook's `retries` retry no answer and 5xx, with go-retryablehttp's backoff);
- `AnalysisRun`: one metric of an Argo Rollouts AnalysisRun with a `web` provider, as
  argoproj/argo-rollouts `metricproviders/webmetric/webmetric.go` measures (a non-2xx
  answer is an Error; jsonPath on the JSON body), `utils/evaluate/evaluate.go` judges
  (failureCondition first, then successCondition, neither: Inconclusive) and
  `analysis/analysis.go` counts (`assessMetricStatus`: Failed past failureLimit,
  Inconclusive past inconclusiveLimit, Error past consecutiveErrorLimit, Successful at
  consecutiveSuccessLimit).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Call = Callable[[str, dict], int]  # (hook, payload) -> HTTP status; raise for no answer


@dataclass
class FakeFlagger:
    call: Call
    step_weights: tuple[int, ...]
    threshold: int = 3
    name: str = "llm"
    namespace: str = "llm"
    checksum: str = "rev-1"
    weight: int = 0
    phase: str = "Progressing"
    failed_checks: int = 0
    iterations: int = 0
    steps: list[tuple[int, int]] = field(default_factory=list)  # (from, to) weights set
    calls: list[tuple[str, int | None]] = field(default_factory=list)
    rolled_back_by: str | None = None
    retries: int = 0  # the webhook's `retries`: no answer (or a 5xx) is tried again
    sleep: Callable[[float], None] = time.sleep

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def new_revision(self, checksum: str) -> None:
        """`hasCanaryRevisionChanged`: all traffic back to the primary, status reset."""
        self.checksum, self.weight, self.phase = checksum, 0, "Progressing"
        self.failed_checks = self.iterations = 0
        self.rolled_back_by = None

    def _hook(self, hook: str, phase: str = "Progressing") -> bool:
        payload = {"name": self.name, "namespace": self.namespace, "phase": phase,
                   "checksum": self.checksum, "metadata": {}}
        code: int | None = None
        for attempt in range(self.retries + 1):  # go-retryablehttp: waits 1 s, 2 s, 4 s...
            if attempt:
                self.sleep(min(2.0 ** (attempt - 1), 30.0))
            try:
                code = self.call(hook, payload)
            except OSError:  # no answer (a watch restarting): an error, retried
                code = None
            if code is not None and code < 500:
                break
        self.calls.append((hook, code))
        return code is not None and code <= 202

    def _next_step_weight(self) -> int:
        total, w = 100, self.weight
        if total - w == 0:
            return 1
        if w == 0:
            return min(total - w, self.step_weights[0])
        for i in range(len(self.step_weights) - 1):
            if self.step_weights[i] == w:
                return min(total - w, self.step_weights[i + 1] - w)
        return total - w

    def tick(self) -> None:
        """One `advanceCanary` call after the canary and primary are ready."""
        if self.done:
            return
        if self.phase in ("Progressing", "Waiting", "WaitingPromotion") \
                and self._hook("rollback", self.phase):
            return self._rollback("rollback webhook")
        if self.phase == "Promoting":  # runPromotionTrafficShift, no stepWeightPromotion
            self.weight, self.phase = 0, "Finalising"
            return
        if self.phase == "Finalising":
            self.phase = "Succeeded"
            return
        if self.phase in ("Progressing", "WaitingPromotion") \
                and self.failed_checks >= self.threshold:
            return self._rollback("failed checks threshold")
        if self.weight == 0 and self.iterations == 0:
            pass  # pre-rollout hooks instead of the analysis (none here)
        elif not self._hook("rollout"):
            self.failed_checks += 1
            return
        if self._next_step_weight() > 0:
            if self.phase not in ("Promoting", "WaitingPromotion", "Finalising") \
                    and not self._hook("confirm-traffic-increase"):
                return
            self._run_canary()

    def _run_canary(self) -> None:
        max_weight = min(100, self.step_weights[-1])
        if self.weight < max_weight:
            nxt = min(100, self.weight + self._next_step_weight())
            self.steps.append((self.weight, nxt))
            self.weight = nxt
            return
        if not self._hook("confirm-promotion"):
            self.phase = "WaitingPromotion"
            return
        self.phase = "Promoting"

    def _rollback(self, why: str) -> None:
        self.weight, self.phase, self.rolled_back_by = 0, "Failed", why


_EQ = re.compile(r'^\s*result\s*==\s*"([^"]*)"\s*$')
_IN = re.compile(r"^\s*result\s+in\s+\[(.*)\]\s*$")
_PATH = re.compile(r"^\{\$\.([A-Za-z_][A-Za-z0-9_]*)\}$")


def condition(expr: str) -> Callable[[object], bool]:
    """The two condition forms our AnalysisTemplate uses, as expr-lang reads them."""
    if m := _EQ.match(expr):
        return lambda result: result == m.group(1)
    if m := _IN.match(expr):
        words = [w.strip().strip('"') for w in m.group(1).split(",")]
        return lambda result: result in words
    raise ValueError(f"condition {expr!r}: only `result == \"x\"` and `result in [...]`")


@dataclass
class AnalysisRun:
    """One `web` metric of an AnalysisRun, from the AnalysisTemplate's metric dict."""

    metric: dict
    fetch: Callable[[], tuple[int, bytes]]  # one GET of the metric's URL
    successful: int = 0
    failed: int = 0
    inconclusive: int = 0
    errors: int = 0
    consecutive_errors: int = 0
    consecutive_success: int = 0
    phases: list[str] = field(default_factory=list)

    def _measure(self) -> str:
        try:
            code, body = self.fetch()
        except OSError:
            return "Error"
        if not 200 <= code < 300:
            return "Error"  # "received non 2xx response code"
        path = _PATH.match(self.metric["provider"]["web"]["jsonPath"])
        if path is None:
            raise ValueError("jsonPath: only {$.field} here")
        try:
            result = json.loads(body)[path.group(1)]
        except (ValueError, KeyError):
            return "Error"  # "Could not find JSONPath in body"
        success = condition(self.metric["successCondition"])(result)
        fail = condition(self.metric["failureCondition"])(result)
        if fail:
            return "Failed"
        return "Successful" if success else "Inconclusive"

    def measure(self) -> str:
        """Take one measurement and return the metric's phase after it."""
        phase = self._measure()
        self.phases.append(phase)
        self.consecutive_success = self.consecutive_success + 1 if phase == "Successful" else 0
        self.consecutive_errors = self.consecutive_errors + 1 if phase == "Error" else 0
        self.successful += phase == "Successful"
        self.failed += phase == "Failed"
        self.inconclusive += phase == "Inconclusive"
        self.errors += phase == "Error"
        return self.assess()

    def assess(self) -> str:
        m = self.metric
        out = ""
        failure_limit = m.get("failureLimit", 0)
        if failure_limit >= 0 and self.failed > failure_limit:
            out = "Failed"
        if self.inconclusive > m.get("inconclusiveLimit", 0):
            out = "Inconclusive"
        if self.consecutive_errors > m.get("consecutiveErrorLimit", 4):
            out = "Error"
        if out:
            return out
        limit = m.get("consecutiveSuccessLimit", 0)
        if limit > 0 and self.consecutive_success >= limit:
            return "Successful"
        return "Running"
