"""`layergate judge`: an LLM judge of whether each arm's answer is right, for the traffic
records whose reference is of kind `judge` (docs/FORMATS.md, "References"). Any
OpenAI-compatible chat endpoint judges; the prompt is a template the user can replace.
Every verdict is appended to the run's `judgements.jsonl` as it comes back
(exporters/judgements.py), so a crash loses nothing and a rerun asks only what is missing.

The judge's own noise: the baseline and the second baseline (A′) are judged alike, so where
their outputs are the same text a different verdict is the judge disagreeing with itself;
`JudgeSummary` counts both that and the A / A′ agreement over every pair.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from layergate.exporters.catalogue import BASELINE, BASELINE2
from layergate.exporters.errors import InfrastructureError, UsageError
from layergate.exporters.judgements import FILE, Judgement, append, digest, read_judgements
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord

KIND = "judge"
DEFAULT_PROMPT = """You are grading an answer to a question against the reference answer.

Question:
{question}

Reference answer:
{reference}

Answer to grade:
{output}

Is the answer to grade correct? Reply with one word: CORRECT or WRONG."""
FIELDS = ("question", "reference", "output")
_VERDICT = re.compile(r"\b(CORRECT|WRONG|INCORRECT)\b", re.IGNORECASE)


class JudgeError(InfrastructureError, RuntimeError):
    """The judge endpoint could not be reached or did not answer as OpenAI's API does."""


def check_template(template: str, where: str) -> str:
    """`template` if it names only the fields {question}, {reference} and {output}."""
    names = set(re.findall(r"(?<!\{)\{(\w*)\}(?!\})", template))
    unknown = sorted(names - set(FIELDS))
    if unknown or "output" not in names:
        raise UsageError(f"{where}: a judge prompt may use {{question}}, {{reference}} and "
                         f"must use {{output}}; it names {sorted(names)}")
    return template


def question_of(record: TrafficRecord) -> str:
    """What was asked: the last user message of a chat, or a completion's prompt."""
    body = record.body
    if "messages" in body:
        users = [m.get("content") for m in body["messages"] if m.get("role") == "user"]
        text = users[-1] if users else ""
        return text if isinstance(text, str) else " ".join(
            part.get("text", "") for part in text if isinstance(part, Mapping))
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else str(prompt)


def reference_text(reference: Mapping[str, Any]) -> str:
    answers = reference.get("answers") or []
    lines = [" / ".join(map(str, answers))] if answers else []
    if reference.get("criteria"):
        lines.append(str(reference["criteria"]))
    return "\n".join(lines) or "(none given: judge by the question alone)"


def parse_verdict(answer: str) -> bool | None:
    """The judge's first CORRECT / WRONG (INCORRECT counts as wrong); None when neither."""
    match = _VERDICT.search(answer)
    return None if match is None else match.group(1).upper() == "CORRECT"


@dataclass(frozen=True)
class Ask:
    """One output to judge."""

    record: TrafficRecord
    result: ArmResult

    def prompt(self, template: str) -> str:
        return template.format(question=question_of(self.record),
                               reference=reference_text(self.record.reference or {}),
                               output=self.result.answer)


@dataclass(frozen=True)
class Judge:
    """The judge, as `layergate judge`'s options set it."""

    endpoint: str = field(metadata={
        "help": "Base URL of the judge's OpenAI-compatible chat server (no /v1)."})
    model: str = field(metadata={"help": "The judge's model name, as its server wants it."})
    template: str = field(default=DEFAULT_PROMPT, metadata={
        "help": "internal: the prompt template (`layergate judge --prompt FILE`)",
        "record": False})
    concurrency: int = field(default=4, metadata={
        "help": "Judge requests in flight at once.", "min": 1, "max": 64})
    timeout_s: float = field(default=60.0, metadata={
        "help": "Seconds to wait for each judge answer.", "min": 0, "min_open": True})
    max_tokens: int = field(default=8, metadata={
        "help": "Tokens the judge may answer with (a verdict is one word).", "min": 1})

    def ask(self, client: httpx.Client, prompt: str) -> str:
        url = f"{self.endpoint.rstrip('/')}/v1/chat/completions"
        body = {"model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
                "messages": [{"role": "user", "content": prompt}]}
        try:
            response = client.post(url, json=body, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise JudgeError(f"judge {url}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise JudgeError(f"judge {url}: HTTP {response.status_code}: "
                             f"{response.text[:300]}")
        try:
            return response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            raise JudgeError(f"judge {url}: not a chat completion: "
                             f"{response.text[:300]}") from None


def to_judge(records: Iterable[TrafficRecord], results: Iterable[ArmResult],
             done: set[tuple[str, str, str, str]], prompt_sha: str) -> list[Ask]:
    """The answered outputs of records with a judge reference, not yet judged with this
    template."""
    wanted = {r.id: r for r in records if r.reference and r.reference.get("kind") == KIND}
    return [Ask(wanted[res.request_id], res) for res in results
            if res.ok and res.request_id in wanted
            and (res.request_id, res.arm, prompt_sha, digest(res.answer)) not in done]


@dataclass(frozen=True)
class JudgeSummary:
    judged: int  # asked this time
    kept: int  # judged before, with this template and output
    unparsed: int  # verdicts neither CORRECT nor WRONG, over all judgements of this template
    pairs: int  # requests judged on both baselines
    agree: int  # ... with the same verdict
    same_output: int  # ... of those pairs, the two baselines' outputs the same text
    self_disagree: int  # ... and the judge's verdicts differ: the judge's own noise


def summarise(judgements: Sequence[Judgement], prompt_sha: str, judged: int) -> JudgeSummary:
    mine = [j for j in judgements if j.prompt == prompt_sha]
    latest = {(j.request_id, j.arm): j for j in mine}
    pairs = agree = same = self_disagree = 0
    for (rid, arm), a in latest.items():
        b = latest.get((rid, BASELINE2))
        if arm != BASELINE or b is None:
            continue
        pairs += 1
        agree += a.verdict == b.verdict
        if a.output == b.output:
            same += 1
            self_disagree += a.verdict != b.verdict
    return JudgeSummary(judged, len(latest) - judged,
                        sum(j.verdict is None for j in latest.values()),
                        pairs, agree, same, self_disagree)


def judge_run(run_path: Path, records: Sequence[TrafficRecord], results: Iterable[ArmResult],
              judge: Judge,
              progress: Callable[[int, int], None] | None = None) -> JudgeSummary:
    """Judge every output of the run not yet judged by this template; each verdict is
    appended to the run's judgements file the moment it comes back."""
    path = run_path / FILE
    prompt_sha = digest(judge.template)
    before = read_judgements(path)
    asks = to_judge(records, results, {j.key for j in before}, prompt_sha)
    if not any(r.reference and r.reference.get("kind") == KIND for r in records):
        raise UsageError(f"{run_path}: no traffic record has a reference of kind {KIND!r}; "
                         "nothing to judge")
    done = 0
    with httpx.Client() as client, ThreadPoolExecutor(judge.concurrency) as pool:
        def one(ask: Ask) -> Judgement:
            answer = judge.ask(client, ask.prompt(judge.template))
            return Judgement(ask.result.request_id, ask.result.arm, parse_verdict(answer),
                             answer, judge.model, prompt_sha, digest(ask.result.answer))

        futures = [pool.submit(one, ask) for ask in asks]
        failed: JudgeError | None = None
        for future in as_completed(futures):
            if future.cancelled():
                continue
            try:
                judgement = future.result()
            except JudgeError as exc:  # keep what came back, ask nothing more, then say why
                failed = failed or exc
                for other in futures:
                    other.cancel()
                continue
            append(path, judgement)
            done += 1
            if progress:
                progress(done, len(asks))
    if failed:
        raise failed
    return summarise(read_judgements(path), prompt_sha, done)
