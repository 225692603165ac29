"""Stand-ins for the two rollout controllers, written from their source's logic (not its
code) and with its timing, to drive `layergate watch` as they would. Every wait (ticks,
retry backoff, per-attempt timeouts, measurement intervals) is multiplied by one
`scale` (production seconds -> test seconds), so a test runs a 1-minute interval in one
second and keeps every ratio between waits as upstream has it.

Flagger (fluxcd/flagger):
- `FakeFlagger.tick`: `advanceCanary` in `pkg/controller/scheduler.go` for the canary
  strategy (no mirroring, no A/B): `spec.suspend` skips the tick; the rollback hook
  first (Progressing / Waiting / WaitingPromotion); Promoting -> Finalising -> Succeeded;
  failed checks >= threshold rolls back; the rollout hook (`runAnalysis`) unless the
  canary is still at weight 0 with no iterations; `confirm-traffic-increase` whenever
  `nextStepWeight` > 0 outside Promoting / WaitingPromotion / Finalising; `runCanary` steps
  the weight, or at the max weight asks `confirm-promotion` (a "no" sets
  WaitingPromotion, `runConfirmPromotionHooks` in `scheduler_hooks.go`);
- `FakeFlagger._hook`: `CallWebhook` / `callWebhook` in `pkg/controller/webhook.go`: a POST
  of {name, namespace, phase, checksum} with `metadata` only when the webhook sets it
  (`omitempty`), any status above 202 is "no", through go-retryablehttp with
  `RetryMax = retries` and the webhook's `timeout` (default 10 s) per attempt;
- `should_retry` / `backoff`: hashicorp/go-retryablehttp `client.go`, `baseRetryPolicy`
  (transport errors, 429, 0 and 5xx except 501 are retried) and `DefaultBackoff`
  (1 s * 2^attempt capped at 30 s: 1, 2, 4, 8, 16, 30; Retry-After honoured on 429 / 503);
  a retryable answer left after the last retry is an error ("giving up");
- `Ticker`: `CanaryJob.Start` in `pkg/controller/job.go` (the function once at once, then on
  each tick of `time.NewTicker(interval)`), with Go's ticker semantics: ticks stay on the
  start + k * interval grid, the channel holds one, and ticks that come while a call
  blocks and one is already waiting are dropped.

Argo Rollouts (argoproj/argo-rollouts):
- `canary_replicas`: `approximateWeightedCanaryStableReplicaCounts` in
  `utils/replicaset/canary.go` (weights without trafficRouting are whole pods; 1 % and 5 % of
  10 replicas are 1 canary pod of 11);
- `AnalysisRun`: one `web` metric, measured as `metricproviders/webmetric/webmetric.go` does
  (non-2xx or a missing field: Error; jsonPath on the body), judged as
  `utils/evaluate/evaluate.go` does (failureCondition first, then successCondition, neither:
  Inconclusive) and counted as `analysis/analysis.go` `assessMetricStatus` does; the next
  measurement after `interval`, or `DefaultErrorRetryInterval` (10 s) after an Error;
- `ArgoRollout`: the canary steps of `rollout/canary.go`: setWeight scales the ReplicaSets,
  an analysis step runs an AnalysisRun of the template with the step's args (a
  `valueFrom.podTemplateHashValue: Latest` argument is the new ReplicaSet's hash);
  Successful steps on, Failed / Error aborts (all back to stable), Inconclusive pauses.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Gauge, start_http_server

# one attempt: (hook, payload, timeout in test seconds) -> (status, Retry-After seconds or
# None); raises TimeoutError past the timeout, another OSError for no answer (refused, reset)
Attempt = Callable[[str, dict, float], tuple[int, float | None]]

WAIT_MIN, WAIT_MAX = 1.0, 30.0  # go-retryablehttp defaultRetryWaitMin / Max
WEBHOOK_TIMEOUT = 10.0  # webhook.go: a webhook without `timeout`
ERROR_RETRY = 10.0  # analysis.go DefaultErrorRetryInterval


def should_retry(code: int | None) -> bool:
    """baseRetryPolicy: None is a transport error."""
    return code is None or code == 429 or code == 0 or (code >= 500 and code != 501)


def backoff(attempt: int, code: int | None = None, retry_after: float | None = None) -> float:
    """DefaultBackoff, in production seconds, before retry number `attempt` + 1."""
    if code in (429, 503) and retry_after is not None:
        return retry_after
    return min(WAIT_MIN * 2.0 ** attempt, WAIT_MAX)


@dataclass
class FakeFlagger:
    attempt: Attempt
    step_weights: tuple[int, ...]
    threshold: int = 3
    name: str = "llm"
    namespace: str = "llm"
    checksum: str = "rev-1"
    weight: int = 0
    phase: str = "Progressing"
    suspend: bool = False  # spec.suspend
    failed_checks: int = 0
    iterations: int = 0
    retries: int = 0  # the webhook's `retries` (RetryMax)
    timeout: float = WEBHOOK_TIMEOUT  # the webhook's `timeout`, production seconds
    metadata: dict[str, str] | None = None  # the webhook's `metadata`; None: unset
    scale: float = 1.0  # test seconds per production second
    on_weight: Callable[[int], None] = lambda _w: None  # SetRoutes + recorder.SetWeight
    sleep: Callable[[float], None] = time.sleep
    steps: list[tuple[int, int]] = field(default_factory=list)  # (from, to) runCanary set
    calls: list[tuple[str, int | None]] = field(default_factory=list)  # after retries
    attempts: int = 0  # HTTP attempts, retries included
    refused: int = 0  # attempts with no answer: the connection refused or reset
    timeouts: int = 0  # attempts past the per-attempt timeout
    rolled_back_by: str | None = None
    ticks: int = 0
    skipped: int = 0  # ticks while suspended
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def new_revision(self, checksum: str) -> None:
        """`hasCanaryRevisionChanged` -> the analysis restarts: traffic back to the
        primary, failed checks and iterations reset."""
        with self.lock:
            self.checksum, self.phase = checksum, "Progressing"
            self.failed_checks = self.iterations = 0
            self.rolled_back_by = None
            self._set_weight(0)

    def _set_weight(self, weight: int, step: bool = False) -> None:
        if step:
            self.steps.append((self.weight, weight))
        self.weight = weight
        self.on_weight(weight)

    def _hook(self, hook: str, phase: str = "Progressing") -> bool:
        payload: dict = {"name": self.name, "namespace": self.namespace, "phase": phase,
                         "checksum": self.checksum}
        if self.metadata is not None:  # `json:"metadata,omitempty"`
            payload["metadata"] = dict(self.metadata)
        code: int | None = None
        for i in range(self.retries + 1):
            self.attempts += 1
            retry_after = None
            try:
                code, retry_after = self.attempt(hook, payload, self.timeout * self.scale)
            except TimeoutError:
                code = None
                self.timeouts += 1
            except OSError:
                code = None
                self.refused += 1
            if not should_retry(code):
                break
            if i < self.retries:
                self.sleep(backoff(i, code, retry_after) * self.scale)
        if should_retry(code):  # "giving up after N attempt(s)": an error
            code = None
        self.calls.append((hook, code))
        return code is not None and code <= 202

    def _next_step_weight(self) -> int:
        """nextStepWeight with stepWeights and a total weight of 100."""
        left = 100 - self.weight
        if left == 0:
            return 1
        if self.weight == 0:
            return min(left, self.step_weights[0])
        for a, b in zip(self.step_weights, self.step_weights[1:], strict=False):
            if a == self.weight:
                return min(left, b - self.weight)
        return left

    def tick(self) -> None:
        """One `advanceCanary`, the canary and primary ready."""
        with self.lock:
            self.ticks += 1
            if self.suspend:
                self.skipped += 1
                return
            self._advance()

    def _advance(self) -> None:
        if self.done:
            return
        if self.phase in ("Progressing", "Waiting", "WaitingPromotion") \
                and self._hook("rollback", self.phase):
            return self._rollback("rollback webhook")
        if self.phase == "Promoting":  # runPromotionTrafficShift, no stepWeightPromotion
            self._set_weight(0)
            self.phase = "Finalising"
            return
        if self.phase == "Finalising":
            self.phase = "Succeeded"
            return
        if self.phase in ("Progressing", "WaitingPromotion") \
                and self.failed_checks >= self.threshold:
            return self._rollback("failed checks threshold")
        if not (self.weight == 0 and self.iterations == 0) and not self._hook("rollout"):
            self.failed_checks += 1  # (at weight 0 the pre-rollout hooks run: none here)
            return
        if self._next_step_weight() > 0:
            if self.phase not in ("Promoting", "WaitingPromotion", "Finalising") \
                    and not self._hook("confirm-traffic-increase"):
                return
            self._run_canary()

    def _run_canary(self) -> None:
        if self.weight < min(100, self.step_weights[-1]):
            self._set_weight(min(100, self.weight + self._next_step_weight()), step=True)
            return
        if not self._hook("confirm-promotion"):
            self.phase = "WaitingPromotion"
            return
        self.phase = "Promoting"

    def _rollback(self, why: str) -> None:
        self._set_weight(0)
        self.phase, self.rolled_back_by = "Failed", why


class FlaggerWeight:
    """Flagger's own `flagger_canary_weight{workload, namespace}` (pkg/metrics/recorder.go
    `SetWeight`: the canary's weight under the target's name, the primary's under
    `<name>-primary`), served for Prometheus to scrape."""

    def __init__(self, workload: str = "llm", namespace: str = "llm") -> None:
        self.workload, self.namespace = workload, namespace
        self.registry = CollectorRegistry()
        self.gauge = Gauge("flagger_canary_weight", "The virtual service destination weight "
                           "current value", ("workload", "namespace"), registry=self.registry)
        # port 0: bound by the kernel at once, where a free_port() could be taken meanwhile
        self.server, _ = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.port = self.server.server_port
        self.set(0)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, canary: int) -> None:
        self.gauge.labels(self.workload, self.namespace).set(canary)
        self.gauge.labels(f"{self.workload}-primary", self.namespace).set(100 - canary)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Ticker(threading.Thread):
    """`CanaryJob.Start` on Go's `time.Ticker` (see the module docstring), `interval` in
    test seconds; `dropped` counts the ticks Go would have dropped. `clock` and `wait`
    (seconds -> True to stop) can be replaced to run it on a simulated clock."""

    def __init__(self, fn: Callable[[], None], interval: float,
                 until: Callable[[], bool] = lambda: False,
                 clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], bool] | None = None) -> None:
        super().__init__(daemon=True)
        self.fn, self.interval, self.until, self.clock = fn, interval, until, clock
        self.stop = threading.Event()
        self.wait = wait or self.stop.wait
        self.dropped = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            start = self.clock()
            self.fn()  # "run the infra bootstrap on job creation"
            taken = 0  # ticks taken from the channel
            while not self.stop.is_set() and not self.until():
                fired = math.floor((self.clock() - start) / self.interval)
                if fired > taken + 1:  # the channel holds one; the others were dropped
                    self.dropped += fired - taken - 1
                    taken = fired - 1
                due = start + (taken + 1) * self.interval
                if self.wait(max(0.0, due - self.clock())):
                    return
                taken += 1
                self.fn()
        except BaseException as exc:  # handed to the test
            self.error = exc


def canary_replicas(replicas: int, weight: int, max_surge: int, max_weight: int = 100
                    ) -> tuple[int, int]:
    """approximateWeightedCanaryStableReplicaCounts: (canary, stable) pods for a
    setWeight without trafficRouting; the closest whole-pod ratio, surging one pod if that
    is closer, never 0 canary pods for a weight between 1 and 99."""
    if replicas == 0:
        return 0, 0
    exact = replicas * weight / max_weight
    ceil, floor = math.ceil(exact), math.floor(exact)
    zero_ok = weight in (0, max_weight) or (replicas == 1 and max_surge == 0)

    def tied(total: int) -> bool:
        return math.modf(total * (weight / max_weight))[0] == 0.5

    options = []
    if ceil < replicas or zero_ok:
        options.append((ceil, replicas))
    if not tied(replicas) and (floor != 0 or zero_ok):
        options.append((floor, replicas))
    if max_surge > 0:
        options.append((ceil, replicas + 1))
        if not tied(replicas + 1) and (floor != 0 or zero_ok):
            options.append((floor, replicas + 1))
    if not options:
        return 0, replicas
    best = min(options, key=lambda o: abs(o[0] * max_weight / o[1] - weight))  # first wins
    return best[0], best[1] - best[0]


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


def duration(text: str) -> float:
    """A metric's `interval` ("60s", "1m") in seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text.strip())
    if m is None:
        raise ValueError(f"interval {text!r}: expected a number and ms, s, m or h")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


@dataclass
class AnalysisRun:
    """One `web` metric of an AnalysisRun, from the AnalysisTemplate's metric dict;
    `fetch(url, timeout)` is one GET (timeout in test seconds), OSError for no answer."""

    metric: dict
    fetch: Callable[[], tuple[int, bytes]]
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

    def wait_s(self) -> float:
        """Production seconds until the next measurement (analysis.go)."""
        if self.phases and self.phases[-1] == "Error":
            return ERROR_RETRY
        return duration(self.metric.get("interval", "10s"))


@dataclass
class ArgoRollout:
    """A Rollout's canary steps against one AnalysisTemplate metric (see the module
    docstring). `get(url, timeout)` is one GET of the web metric (test seconds)."""

    steps: list[dict]
    template: dict  # the AnalysisTemplate's spec
    get: Callable[[str, float], tuple[int, bytes]]
    replicas: int = 10
    max_surge: int = 3  # the default 25 % of 10 replicas, rounded up
    pod_template_hash: str = "rev-1"
    scale: float = 1.0
    on_pods: Callable[[int, int], None] = lambda _c, _s: None  # (canary, stable) pods
    sleep: Callable[[float], None] = time.sleep
    phase: str = "Progressing"  # Paused / Degraded (aborted) / Healthy (promoted)
    pods: tuple[int, int] = (0, 10)
    measurements: list[tuple[float, str]] = field(default_factory=list)  # (stage, result)
    runs: list[tuple[float, str]] = field(default_factory=list)  # (stage, run phase)

    def _scale_to(self, canary: int, stable: int) -> None:
        self.pods = (canary, stable)
        self.on_pods(canary, stable)

    def _args(self, step_args: list[dict]) -> dict[str, str]:
        out = {}
        for arg in step_args:
            if "value" in arg:
                out[arg["name"]] = str(arg["value"])
            elif arg.get("valueFrom", {}).get("podTemplateHashValue") == "Latest":
                out[arg["name"]] = self.pod_template_hash
            else:
                raise ValueError(f"arg {arg}: only value and podTemplateHashValue: Latest")
        return out

    def run(self) -> str:
        """Every step in turn; the rollout's phase at the end."""
        self._scale_to(0, self.replicas)
        for step in self.steps:
            if "setWeight" in step:
                self._scale_to(*canary_replicas(self.replicas, int(step["setWeight"]),
                                                self.max_surge))
                continue
            args = self._args(step["analysis"].get("args", []))
            metric = self.template["metrics"][0]
            url = re.sub(r"\{\{\s*args\.([\w-]+)\s*\}\}",
                         lambda m, args=args: args[m.group(1)],
                         metric["provider"]["web"]["url"])
            timeout = metric["provider"]["web"].get("timeoutSeconds", 10) * self.scale
            run = AnalysisRun(metric, lambda url=url, timeout=timeout: self.get(url, timeout))
            stage = float(args.get("stage", "nan"))
            phase = "Running"
            while phase == "Running":
                phase = run.measure()
                self.measurements.append((stage, run.phases[-1]))
                if phase == "Running":
                    self.sleep(run.wait_s() * self.scale)
            self.runs.append((stage, phase))
            if phase == "Inconclusive":
                self.phase = "Paused"
                return self.phase
            if phase != "Successful":
                self.phase = "Degraded"  # aborted: all traffic back to stable
                self._scale_to(0, self.replicas)
                return self.phase
        self.phase = "Healthy"  # promoted: the new ReplicaSet is the stable one
        self._scale_to(self.replicas, 0)
        return self.phase

    def new_revision(self, pod_template_hash: str) -> None:
        self.pod_template_hash, self.phase = pod_template_hash, "Progressing"
        self.measurements, self.runs = [], []
