"""The shared vocabulary: every figure, arm, verdict, exit code, rollout stage and run
status, the one test of whether two answers are the same output, and the glossary of the
names the code is built from (`GLOSSARY`: one word, one thing). Everything else imports
these words.

Adding a figure is one `_figure(...)` entry: the policy loader, the reports and the
exporters read its unit, direction, noise-floor excess and whether a policy may gate it
from here (docs/METRICS.md defines each).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal, Protocol

# --- figures ---------------------------------------------------------------------------

Better = Literal["higher", "lower"]
# how a live figure's interval is built from the windows (exporters/figures/canary.py)
LiveScale = Literal["log_ratio", "saving", "rate_delta", "difference", "share",
                    "accept_length"]
# metric roles: what a mapping file names for each engine (histograms give _sum and _count)
HISTOGRAM_ROLES = ("e2e", "ttft", "tpot")
COUNTER_ROLES = ("requests", "errors", "successes", "cache_queries", "cache_hits",
                 "layers_executed", "layers_skipped", "spec_drafts", "spec_draft_tokens",
                 "spec_accepted")
ROLES = HISTOGRAM_ROLES + COUNTER_ROLES


@dataclass(frozen=True)
class FigureSpec:
    """What a figure name means. `excess`: the candidate's figure carries
    detail["excess"] (B against A minus A' against A) for a rule with subtract_noise_floor.
    `not_gated`: why a gate policy may not name it (empty: it may). `live`: computed while
    traffic flows (from Prometheus), not by `compute_figures` over a finished run.
    `timing`: a paired performance figure whose interval includes the between-process
    term (exporters/figures/process_spread.py): "ratio" when the value is the arm's time over the
    baseline's, "saving" when it is 1 minus that ratio; saturation makes it inconclusive.
    `sweep`: computed from the steps of a capacity sweep (`layergate capacity`), not by
    `compute_figures` over one replay. `expanded`: its percentile interval is the expanded
    one (calibrated at small n; exporters/figures/bootstrap.py `expanded`), as every timing
    figure's is, where a simulation showed the plain one short at small n. A live figure's
    `scale` is the one its interval is built on and `roles` the metric roles it needs
    ("a|b": either will do; exporters/figures/canary.py computes it)."""

    name: str
    unit: str  # fraction (a share in [0, 1]), ratio, s, bytes, tokens, score (0-100), nats
    better: Better
    meaning: str
    excess: bool = False
    not_gated: str = ""
    live: bool = False
    timing: str = ""
    sweep: bool = False
    scale: LiveScale | None = None
    roles: tuple[str, ...] = ()
    expanded: bool = False

    @property
    def expands(self) -> bool:
        """Whether its percentile interval is the expanded one."""
        return bool(self.timing) or self.expanded

    @property
    def gateable(self) -> bool:
        return not self.not_gated

    @property
    def direction(self) -> str:
        """The policy direction that keeps the good side: ">=" when higher is better."""
        return ">=" if self.better == "higher" else "<="


FIGURES: dict[str, FigureSpec] = {}


def _figure(name: str, unit: str, better: Better, meaning: str, *, excess: bool = False,
            not_gated: str = "", live: bool = False, timing: str = "",
            sweep: bool = False, scale: LiveScale | None = None,
            roles: tuple[str, ...] = (), expanded: bool = False) -> str:
    if name in FIGURES:
        raise ValueError(f"figure {name!r} catalogued twice")
    if live != bool(scale and roles) or any(
            alt not in ROLES for need in roles for alt in need.split("|")):
        raise ValueError(f"live figure {name!r}: needs a scale and known metric roles")
    FIGURES[name] = FigureSpec(name, unit, better, meaning, excess, not_gated, live, timing,
                               sweep, scale, roles, expanded)
    return name


RER = _figure("rer", "fraction", "higher", "share of time per output token the arm "
              "eliminated against the baseline, prefill included", timing="saving")
RER_DECODE = _figure("rer_decode", "fraction", "higher", "RER of decode time only "
                     "((E2E - TTFT) / (tokens - 1))", timing="saving")
RER_THEORETICAL = _figure("rer_theoretical", "fraction", "higher", "share of layer compute "
                          "the arm skipped, as its engine reports it",
                          not_gated="it is the engine's own claim: gate rer or rer_realisation")
RER_REALISATION = _figure("rer_realisation", "ratio", "higher", "rer / rer_theoretical: how "
                          "much of the skipped compute became saved time")
RRR = _figure("rrr", "ratio", "higher", "(RER - target) / target; detail['stage'] is the "
              "rollout stage the saving supports",
              not_gated="gate rer (its threshold defaults to target_rer); the rollout stage "
                        "follows from it")
TERMINATION_ACCURACY = _figure("termination_accuracy", "fraction", "higher", "share of "
                               "requests ending where the baseline ended them")
TERMINATION_TRUNCATED = _figure("termination_truncated", "fraction", "lower", "share cut at "
                                "the length limit where the baseline stopped")
TERMINATION_PREMATURE = _figure("termination_premature", "fraction", "lower", "share "
                                "stopping earlier than the baseline, beyond the tolerance")
TERMINATION_OVERRUN = _figure("termination_overrun", "fraction", "lower", "share stopping "
                              "later than the baseline, beyond the tolerance")
TERMINATION_ACCURACY_RECORDED = _figure(
    "termination_accuracy_recorded", "fraction", "higher",
    "termination accuracy against the response recorded in the traffic")
CACHE_HIT_DELTA = _figure("cache_hit_delta", "ratio", "lower", "|h_X - h_A| / h_A, h = "
                          "prefix-cache hit rate over the run", excess=True)
OUTPUT_DETERMINISM = _figure("output_determinism", "fraction", "higher", "share of repeated "
                             "prompts whose repeats are the same output")
RESOURCE_DETERMINISM = _figure("resource_determinism", "bytes", "lower", "mean over prompts "
                               "of the std of peak memory across repeats")
LATENCY_DETERMINISM = _figure("latency_determinism", "ratio", "lower", "P99 / P50 of E2E "
                              "over the repeat suite")
EXACT_MATCH = _figure("exact_match", "fraction", "higher", "share of paired requests with "
                      "the same output as the baseline", excess=True)
FIRST_DIVERGENCE = _figure("first_divergence", "tokens", "higher", "mean common-prefix "
                           "length with the baseline's output", excess=True)
BLEU = _figure("bleu", "score", "higher", "sacreBLEU BLEU of the arm's text against the "
               "baseline's", excess=True)
CHRF = _figure("chrf", "score", "higher", "sacreBLEU chrF of the arm's text against the "
               "baseline's", excess=True)
TOKEN_KL = _figure("token_kl", "nats", "lower", "mean per-token KL(A || X) over the top "
                   "logprobs, up to the first divergence", excess=True)
# accuracy against the traffic's references (exporters/figures/accuracy.py): only when the
# traffic carries them
ACCURACY = _figure("accuracy", "fraction", "higher", "share of the requests with a reference "
                   "that the arm answered right")
ACCURACY_DELTA = _figure("accuracy_delta", "fraction", "higher", "accuracy of the arm minus "
                         "the baseline's, paired over the requests both answered",
                         excess=True)
ACCURACY_MCNEMAR_P = _figure("accuracy_mcnemar_p", "fraction", "higher", "McNemar exact "
                             "test p-value of the paired accuracy difference (discordant "
                             "pairs)", not_gated="a p-value is no effect size: gate "
                                                 "accuracy_delta")
RIGHT_TO_WRONG = _figure("right_to_wrong", "fraction", "lower", "share of paired requests "
                         "right on the baseline and wrong on the arm", excess=True)
WRONG_TO_RIGHT = _figure("wrong_to_right", "fraction", "higher", "share of paired requests "
                         "wrong on the baseline and right on the arm", excess=True)
JUDGE_DISAGREEMENT = _figure("judge_disagreement", "fraction", "lower", "share of the "
                             "requests the two baselines answered with the same text whose "
                             "judge verdicts differ: the judge's own noise")
ACCURACY_FIGURES = (ACCURACY, ACCURACY_DELTA, ACCURACY_MCNEMAR_P, RIGHT_TO_WRONG,
                    WRONG_TO_RIGHT, JUDGE_DISAGREEMENT)
# what an answer is made of besides its text (exporters/figures/answer_parts.py): only
# when the run's answers hold tool calls, structured output or reasoning
TOOL_CALL_AGREEMENT = _figure("tool_call_agreement", "fraction", "higher", "share of paired "
                              "requests where either arm called a tool whose calls equal the "
                              "baseline's: the same functions in the same order, arguments "
                              "equal as JSON", excess=True)
TOOL_CALL_VALIDITY = _figure("tool_call_validity", "fraction", "higher", "share of the arm's "
                             "tool-calling answers whose every call names a declared function "
                             "and whose arguments satisfy its parameters' JSON Schema",
                             excess=True)
STRUCTURED_VALIDITY = _figure("structured_validity", "fraction", "higher", "share of the "
                              "arm's answers to requests with a JSON response_format whose "
                              "content satisfies it", excess=True)
STRUCTURED_AGREEMENT = _figure("structured_agreement", "fraction", "higher", "share of paired "
                               "requests with a JSON response_format whose content parses to "
                               "the same JSON value as the baseline's", excess=True)
ANSWER_MATCH = _figure("answer_match", "fraction", "higher", "share of paired requests whose "
                       "answer (text, refusal and tool calls; reasoning apart) equals the "
                       "baseline's", excess=True)
REASONING_KEPT = _figure("reasoning_kept", "fraction", "higher", "share of the paired requests "
                         "the baseline reasoned on where the arm reasoned too", excess=True)
REASONING_LENGTH_RATIO = _figure("reasoning_length_ratio", "ratio", "lower", "the arm's "
                                 "reasoning tokens over the baseline's, summed over paired "
                                 "requests where either reasoned (characters where a count "
                                 "is missing)", excess=True)
ANSWER_PART_FIGURES = (TOOL_CALL_AGREEMENT, TOOL_CALL_VALIDITY, STRUCTURED_VALIDITY,
                       STRUCTURED_AGREEMENT, ANSWER_MATCH, REASONING_KEPT,
                       REASONING_LENGTH_RATIO)
# a conversation turn by turn (exporters/figures/turns.py): the per-turn ones are figures
# of one name per turn, `NAME[k]` (k = 1, 2, ...: `per_turn(NAME, k)`), the catalogue's entry
# being NAME's
AGREEMENT_AT_TURN = _figure("agreement_at_turn", "fraction", "higher", "share of the "
                            "conversations that reached turn k whose answers were the "
                            "baseline's at every turn up to k (a survival curve; a "
                            "conversation an arm's error cut is left out from the cut on)",
                            excess=True)
CONVERSATION_DIVERGENCE_TURN = _figure(
    "conversation_divergence_turn", "turns", "higher", "mean turn at which the arm's "
    "conversation first differed from the baseline's (one identical throughout counts its "
    "turns + 1; one cut before it differed is left out)", excess=True)
TTFT_AT_TURN = _figure("ttft_at_turn", "s", "lower", "mean time to first token of the arm's "
                       "answers at turn k of a conversation")
PROMPT_TOKENS_AT_TURN = _figure("prompt_tokens_at_turn", "tokens", "lower", "mean prompt "
                                "tokens the arm reported at turn k of a conversation (its "
                                "history grows with its own answers in own mode)")
ACCURACY_AT_TURN = _figure("accuracy_at_turn", "fraction", "higher", "share right among the "
                           "arm's answers at turn k of a conversation with a reference")
PER_TURN = (AGREEMENT_AT_TURN, TTFT_AT_TURN, PROMPT_TOKENS_AT_TURN, ACCURACY_AT_TURN)
TURN_FIGURES = (*PER_TURN, CONVERSATION_DIVERGENCE_TURN)


def per_turn(name: str, turn: int) -> str:
    """The name of a per-turn figure at `turn` (1-based): `agreement_at_turn[5]`."""
    return f"{name}[{turn}]"


def split_turn(name: str) -> tuple[str, int | None]:
    """(catalogued name, turn) of a figure name; turn None when it is not a per-turn one.
    A ValueError for `NAME[k]` whose NAME is no per-turn figure or k no turn."""
    base, bracket, rest = name.partition("[")
    if not bracket:
        return name, None
    if base not in PER_TURN or not rest.endswith("]") or not rest[:-1].isdigit() \
            or int(rest[:-1]) < 1:
        raise ValueError(f"{name!r}: only {', '.join(PER_TURN)} take a turn, as "
                         f"NAME[k] with k = 1, 2, ...")
    return base, int(rest[:-1])


LATENCY_RATIO = _figure("latency_ratio", "ratio", "lower", "geometric mean of paired "
                        "(E2E/tokens) ratios against the baseline", excess=True,
                        timing="ratio")
TTFT_LATENCY_RATIO = _figure("ttft_latency_ratio", "ratio", "lower", "geometric mean of "
                             "paired TTFT ratios against the baseline", excess=True,
                             timing="ratio")
TPOT_LATENCY_RATIO = _figure("tpot_latency_ratio", "ratio", "lower", "geometric mean of "
                             "paired TPOT ratios against the baseline", excess=True,
                             timing="ratio")
TIMING_FIGURES = (RER, RER_DECODE, LATENCY_RATIO, TTFT_LATENCY_RATIO, TPOT_LATENCY_RATIO)
# the determinism suite's figures: from its own sub-run (`layergate determinism`), not the replay
DETERMINISM_FIGURES = (OUTPUT_DETERMINISM, RESOURCE_DETERMINISM, LATENCY_DETERMINISM)
TTFT_GROWTH = _figure("ttft_growth", "ratio", "lower", "median TTFT of the last third of the "
                      "run (send order) / the first third's; detail['saturated'] says whether "
                      "the arm queued (exporters/figures/saturation.py)",
                      not_gated="it is the saturation check: a saturated run's latency "
                                "verdicts are inconclusive whatever the policy")
E2E_JITTER = _figure("e2e_jitter", "s", "lower", "P99 - P50 of E2E")
GOODPUT = _figure("goodput", "fraction", "higher", "share of requests that succeeded within "
                  "the TTFT and TPOT SLOs")
TOKEN_EFFICIENCY = _figure("token_efficiency", "fraction", "higher", "useful token positions "
                           "/ positions computed (padding, rejected drafts)")
ERROR_RATE = _figure("error_rate", "fraction", "lower", "share of the arm's requests that "
                     "failed", not_gated="the policy's max_error_rate gates it, per arm and "
                                         "fail-closed")
LATENCY_KINDS = {"ttft": "time to first token (of any kind: reasoning, content or a tool "
                 "call)", "ttfat": "time to first answer token (content, a refusal or a "
                 "tool call, after any reasoning)", "tpot": "time per output token after the "
                 "first", "itl": "gap between streamed chunks", "e2e": "end-to-end latency"}
QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
for _kind, _words in LATENCY_KINDS.items():
    for _q in QUANTILES:
        _figure(f"{_kind}_{_q}", "s", "lower", f"{_q.upper()} of the {_words}")

# live figures: `layergate watch` computes them from each arm's Prometheus metrics over the
# same windows (exporters/figures/canary.py); a gate policy judges the replay's paired figures
_LIVE = "a live canary figure (layergate watch, from Prometheus windows); on a shadow replay " \
        "the gate judges the paired figures instead"


def _live(name: str, unit: str, better: Better, meaning: str, scale: LiveScale,
          *roles: str) -> str:
    return _figure(name, unit, better, meaning, not_gated=_LIVE, live=True, scale=scale,
                   roles=roles)


E2E_RATIO = _live("e2e_ratio", "ratio", "lower", "mean end-to-end latency, candidate / "
                  "baseline, over the same windows", "log_ratio", "e2e")
TTFT_RATIO = _live("ttft_ratio", "ratio", "lower", "mean time to first token, candidate / "
                   "baseline, over the same windows", "log_ratio", "ttft")
TPOT_RATIO = _live("tpot_ratio", "ratio", "lower", "mean time per output token, candidate / "
                   "baseline, over the same windows", "log_ratio", "tpot")
TPOT_RER = _live("tpot_rer", "fraction", "higher", "1 - tpot_ratio: the share of time per "
                 "output token the candidate saves", "saving", "tpot")
ERROR_RATE_DELTA = _live("error_rate_delta", "fraction", "lower", "error rate, candidate - "
                         "baseline, over the same windows", "rate_delta", "requests",
                         "errors|successes")
CACHE_HIT_RATE_DELTA = _live("cache_hit_rate_delta", "fraction", "higher", "prefix-cache hit "
                             "rate, candidate - baseline", "difference", "cache_queries",
                             "cache_hits")
LAYERS_EXECUTED_SHARE = _live("layers_executed_share", "fraction", "lower", "layers the "
                              "candidate executed / layers it could have executed", "share",
                              "layers_executed", "layers_skipped")
# speculative decoding's health (exporters/figures/speculative.py), per arm that drafts;
# spec_accept_length is also live: `layergate watch` reads it from the candidate's counters.
# Expanded intervals: requests differ in how much of their drafts is accepted, and the plain
# percentile covered 87 % at 8 requests (benchmarks/spec_simulation.py; VALIDITY.md)
SPEC_ACCEPTANCE_RATE = _figure("spec_acceptance_rate", "fraction", "higher", "draft tokens "
                               "accepted / draft tokens proposed (speculative decoding)",
                               expanded=True)
SPEC_ACCEPT_LENGTH = _figure("spec_accept_length", "tokens", "higher", "1 + accepted / "
                             "drafts: tokens emitted per verified draft, the bonus token "
                             "included (1 = every draft rejected)", live=True,
                             scale="accept_length", roles=("spec_drafts", "spec_accepted"),
                             expanded=True)
SPEC_DRAFT_PER_TOKEN = _figure("spec_draft_per_token", "ratio", "lower", "draft tokens "
                               "proposed per output token emitted", expanded=True)
SPEC_FIGURES = (SPEC_ACCEPTANCE_RATE, SPEC_ACCEPT_LENGTH, SPEC_DRAFT_PER_TOKEN)
LIVE_FIGURES = {name: spec for name, spec in FIGURES.items() if spec.live}

# a capacity sweep's figures (exporters/figures/capacity.py): from the steps of `layergate
# capacity`, not from one replay
CAPACITY = _figure("capacity", "load", "higher", "highest offered load (requests/s open "
                   "loop, users closed loop) at which the arm met the SLO, interpolated "
                   "between its last passing and first failing step", sweep=True)
CAPACITY_GOODPUT = _figure("capacity_goodput", "req/s", "higher", "requests/s that met "
                           "the SLO at the arm's capacity", sweep=True)
CAPACITY_RATIO = _figure("capacity_ratio", "ratio", "higher", "capacity of the arm / the "
                         "baseline's, paired step by step", excess=True, sweep=True)
CAPACITY_REALISATION = _figure("capacity_realisation", "ratio", "higher", "(capacity_ratio "
                               "- 1) / (1 / (1 - rer_theoretical) - 1): the capacity gained "
                               "against the speed-up the skipped compute promises", sweep=True)


def judged_on_latency(name: str) -> bool:
    """A figure of time, so not comparable between arms that queued: the timing figures,
    every latency percentile and jitter, goodput."""
    spec = figure_spec(name)
    return bool(spec.timing) or (spec.unit == "s" and not spec.live) or name == GOODPUT


def figure_spec(name: str) -> FigureSpec:
    """The catalogue entry of `name`; a ValueError suggests a close name."""
    spec = FIGURES.get(name)
    if spec is None and "[" in str(name):
        return FIGURES[split_turn(name)[0]]
    if spec is None:
        raise ValueError(f"unknown figure {name!r}{did_you_mean(name, FIGURES)}")
    return spec


def gateable_figures() -> tuple[str, ...]:
    return tuple(name for name, spec in FIGURES.items() if spec.gateable)


def did_you_mean(name: object, choices) -> str:
    close = difflib.get_close_matches(str(name), sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- arms ------------------------------------------------------------------------------

BASELINE, BASELINE2, CANDIDATE = "baseline", "baseline2", "candidate"
RECORDED = "recorded"  # the response recorded in the traffic: an oracle, not a server
ARMS = (BASELINE, BASELINE2, CANDIDATE)  # the servers of a run, in this order everywhere
ARM_ROLES = {
    BASELINE: "Full-depth reference arm (A).",
    BASELINE2: "Second full-depth replica (A'): the noise floor. Recommended.",
    CANDIDATE: "The change under test (B).",
}
REQUIRED_ARMS = (BASELINE, CANDIDATE)
# the two arms a live canary compares side by side (`layergate watch`): no noise floor
LIVE_ARMS = (BASELINE, CANDIDATE)
# the arm of a run-wide check (run complete, schedule lag): every arm at once, never a server
EVERY_ARM = "all"
# the scenario of a figure over every request (figures per scenario carry its name)
OVERALL = "all"
# A run may carry several candidates, each an arm of its own name (`replay --candidate
# NAME=URL`); the arm list is then baseline, baseline2, then the candidates in the order given.
# An unnamed candidate is the arm `candidate`. Each is judged as B against the same A and A'.
REFERENCE_ARMS = (BASELINE, BASELINE2)
_RESERVED_ARMS = (*REFERENCE_ARMS, RECORDED)
_ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def check_candidate_name(name: str) -> str:
    """`name` when it may name a candidate arm (a Prometheus label value and a file name);
    a ValueError saying why not."""
    if name in _RESERVED_ARMS:
        raise ValueError(f"candidate name {name!r} is taken: it names another arm")
    if not _ARM_NAME.fullmatch(name):
        raise ValueError(f"candidate name {name!r}: use letters, digits, '_', '.' or '-' "
                         "(at most 63, starting with a letter or digit)")
    return name


def candidate_arms(arms) -> tuple[str, ...]:
    """The candidates among a run's arms, in their order: every arm but the references."""
    return tuple(a for a in arms if a not in _RESERVED_ARMS)


def run_arms(candidates) -> tuple[str, ...]:
    """A run's arms in order: baseline, baseline2, then the candidates."""
    return (*REFERENCE_ARMS, *candidates)


# How the gate controls, across a run's candidates, the chance of passing any harmful one
# (policy key `multiplicity`; docs/METRICS.md, "Several candidates").
HOLM, BONFERRONI, NO_ADJUSTMENT = "holm", "bonferroni", "none"
MULTIPLICITY = {
    HOLM: "Holm's step-down: judged at confidence 1 - alpha/m, then the rest at "
          "1 - alpha/(m - passed) while more pass",
    BONFERRONI: "every candidate judged at confidence 1 - alpha/m",
    NO_ADJUSTMENT: "every candidate judged at the policy's confidence, as if alone",
}
# `gate --require`: which candidates must pass for the run to pass (or a candidate's name)
REQUIRE_ALL, REQUIRE_ANY = "all", "any"

# --- skip policies ---------------------------------------------------------------------

# the skip policy that runs every layer: the baselines' (the engine registers its class
# under this name; the stack starts the baselines with it)
FULL_DEPTH = "full"

# --- what an arm returned ---------------------------------------------------------------

# Where an answer's output token count came from, best first. Only the last is not a count
# of tokens: figures per token (RER, TPOT, termination) leave such rows out and say why.
USAGE, TOKEN_IDS, LOGPROBS, TOKENIZER, CHARACTERS = (
    "usage", "token_ids", "logprobs", "tokenizer", "characters")
TOKEN_SOURCES = {
    USAGE: "the server's usage.completion_tokens",
    TOKEN_IDS: "the token ids of the `layergate` extension",
    LOGPROBS: "one logprobs entry per token",
    TOKENIZER: "the named tokenizer on the streamed text",
    CHARACTERS: "characters of the streamed text: no usage, no logprobs, no tokenizer",
}

# How a server departed from the protocol on one request (ArmResult.quirks). The first
# four fail the result (its error says how); the others are handled and only recorded.
QUIRKS: dict[str, str] = {}


def _quirk(name: str, meaning: str) -> str:
    QUIRKS[name] = meaning
    return name


ERROR_IN_STREAM = _quirk("error_in_stream", "sent an error object mid-stream")
SEVERAL_CHOICES = _quirk("several_choices", "returned more than one choice (n > 1 is not "
                         "supported)")
CLOSED_EARLY = _quirk("closed_early", "closed the stream before a finish_reason")
NOT_A_STREAM = _quirk("not_a_stream", "answered `stream: true` without an SSE data line")
ADDED_FIELDS_REJECTED = _quirk("added_fields_rejected", "rejected the stream_options / "
                               "logprobs layergate adds to a request: sent without them")
NO_USAGE = _quirk("no_usage", "sent no usage although stream_options.include_usage asked")
NO_DONE = _quirk("no_done", "ended the stream without `data: [DONE]` (harmless after a "
                 "finish_reason)")
NO_LOGPROBS = _quirk("no_logprobs", "returned no logprobs although asked")
SEVERAL_TOKENS_PER_CHUNK = _quirk("several_tokens_per_chunk", "streamed several tokens in "
                                  "one chunk (speculative decoding): ITL is per chunk")
TOOL_CALL_MALFORMED = _quirk("tool_call_malformed", "streamed a tool-call delta of an "
                             "unexpected shape (no index, not an object): skipped")
TOOL_CALL_ORDER = _quirk("tool_call_order", "streamed a tool call's index out of order (a "
                         "later call began before an earlier one): merged by index")
TOOL_ARGUMENTS_UNPARSED = _quirk("tool_arguments_unparsed", "ended a tool call whose "
                                 "arguments do not parse as JSON: kept as sent")
SEED_IGNORED = _quirk("seed_ignored", "answered a seeded, sampled prompt differently on a "
                      "repeat")

LACKS = {
    "extension": "returned no `layergate` extension (a server layergate did not write: "
                 "only its engine reports layers skipped, computed tokens and peak memory)",
    "tokens": "sent no token counts (no usage, no logprobs) and no tokenizer was named "
              "(--tokenizer): its output was counted in characters",
    "top_logprobs": "returned no top_logprobs (ask every arm for them with --logprobs K)",
    "metrics_endpoint": "has no /metrics endpoint (HTTP 404): no counters to read",
    "cache_counters": "exposes no prefix-cache counters in /metrics",
}


def arm_lacks(arm: str, what: str) -> str:
    """The reason a figure of `arm` is not computable, for a server layergate did not write:
    what it did not return (one of `LACKS`), in words."""
    return f"arm {arm!r} {LACKS[what]}"

# --- verdicts and exit codes -----------------------------------------------------------

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
VERDICTS = (PASS, FAIL, INCONCLUSIVE)
Verdict = Literal["pass", "fail", "inconclusive"]
# The states short of a verdict, each of one command:
UNDECIDED = "undecided"  # gate --sequential (and replay --until-decided): a rule not decided yet
PENDING = "pending"  # watch: no verdict yet, the rollout goes on
NO_DATA = "no_data"  # watch: ended without data to judge (exit code 4)
WATCHING = "watching"  # watch's exposed state while pending and its last window had data
WatchVerdict = Literal["pending", "pass", "fail", "inconclusive", "no_data"]
VERDICT_STATES = {
    PASS: "gate, gate --sequential, watch, capacity: the policy holds",
    FAIL: "gate, gate --sequential, watch (a rollback), capacity: the policy does not hold",
    INCONCLUSIVE: "gate, gate --sequential, watch: too little evidence either way",
    UNDECIDED: "gate --sequential: a rule whose confidence sequence still straddles its "
               "threshold; a run that ends so is inconclusive",
    PENDING: "watch: no verdict yet, the rollout goes on",
    NO_DATA: "watch: ended because its windows had no data (Prometheus, selectors, traffic)",
    WATCHING: "watch's exposed state while pending with data",
}
# the gate's run-wide check of the replay's schedule fidelity (exporters/figures/schedule_lag.py):
# not a figure of an arm but of the load tool, bounded by the policy's max_send_lag_p99_s
SCHEDULE_LAG = "schedule_lag"
# the gate's checks of a run of imported load-tool results (harness/gate/fixed/imported.py): a
# setting the arms differ in (imported with --allow), and how the arms were paired: by
# prompt, or not at all (each arm's figures resampled on its own)
IMPORT_COMPARABLE, IMPORT_PAIRING = "import_comparable", "import_pairing"
PAIRED, UNPAIRED = "paired", "unpaired"
# what two imported arms must have been run alike in (harness/results_import/comparable.py)
IMPORT_SETTINGS = ("endpoint", "dataset", "prompts", "max_tokens", "ignore_eos", "rate",
                   "concurrency", "warmup", "token_counter")
# a figure judged against the noise floor whose excess interval lies within the rule's
# threshold on both sides: no better and no worse than a second baseline
TIED = "tied"


class ExitCode(IntEnum):
    """The exit codes of every layergate command; a verdict's is its own."""

    PASS = 0
    FAIL = 1
    USAGE = 2
    INCONCLUSIVE = 3
    INFRASTRUCTURE = 4


EXIT_MEANINGS = {
    ExitCode.PASS: "pass",
    ExitCode.FAIL: "fail",
    ExitCode.USAGE: "usage error (bad option, policy or input)",
    ExitCode.INCONCLUSIVE: "inconclusive (too little evidence, or a required figure could "
                           "not be computed)",
    ExitCode.INFRASTRUCTURE: "infrastructure error (a run directory or arm that could not be "
                             "read, a process that did not start)",
}


def exit_code(verdict: str) -> ExitCode:
    """The exit code of a verdict: 0 pass, 1 fail, 3 inconclusive."""
    if verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}: one of {', '.join(VERDICTS)}")
    return ExitCode[verdict.upper()]


# --- run statuses ----------------------------------------------------------------------

# How a run (its manifest.json) or a capacity sweep (its capacity.json) stands: `running`
# until it ends `complete`, or `interrupted` (Ctrl-C, a crash, an arm down, rows missing:
# `--resume` goes on with it)
RUNNING, COMPLETE, INTERRUPTED = "running", "complete", "interrupted"
RUN_STATUSES = (RUNNING, COMPLETE, INTERRUPTED)
RunStatus = Literal["running", "complete", "interrupted"]

# --- rollout stages --------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """A rung of the rollout ladder. `min_rrr`: its default lower bound on RRR, for the
    gate's recommendation (None: not reached by RRR: `none` is a failed gate, `internal` is
    below every bound, and the public steps between the named ones are only walked).
    `percent`: the share of public traffic on the candidate there (0: none of it)."""

    name: str
    label: str
    min_rrr: float | None
    percent: float


# One ladder for both commands: `gate` recommends the widest stage RRR supports, and
# `layergate watch` walks the public stages' percentages (its default `--stages`), so a
# recommendation of `public_5pct` means a watch up to 5 %.
STAGES = (Stage("none", "do not roll out", None, 0.0),
          Stage("internal", "internal", None, 0.0),
          Stage("vip", "VIP", 0.0, 0.0),
          Stage("public_1pct", "1 % public", None, 1.0),
          Stage("public_5pct", "5 % public", 0.25, 5.0),
          Stage("public_25pct", "25 % public", None, 25.0),
          Stage("public_50pct", "50 % public", None, 50.0),
          Stage("full", "full", 0.5, 100.0))
NO_ROLLOUT, INTERNAL = STAGES[0].name, STAGES[1].name
# `layergate watch`'s transitions between stages (its hooks --on-advance / --on-rollback),
# and what a watch policy's `inconclusive:` does with an undecided stage
ADVANCE, ROLLBACK, HOLD = "advance", "rollback", "hold"
Transit = Literal["advance", "rollback"]
STAGE_BOUNDS = {s.name: s.min_rrr for s in STAGES if s.min_rrr is not None}
STAGE_LABELS = {s.name: s.label for s in STAGES}
PUBLIC_PERCENTS = tuple(s.percent for s in STAGES if s.percent > 0)


def stage_for(rrr: float, bounds: dict[str, float] | None = None) -> str:
    """The widest stage whose lower bound `rrr` reaches (`bounds`: a policy's, by stage
    name; default the catalogue's); `internal` below them all."""
    bounds = STAGE_BOUNDS if bounds is None else bounds
    reached = [name for name in STAGE_BOUNDS if rrr >= bounds[name]]
    return reached[-1] if reached else INTERNAL


# --- names of the code ------------------------------------------------------------------


@dataclass(frozen=True)
class Name:
    """One word the code is named by, and the one thing it means. `modules`: the files and
    folders (paths from the repository's top, a folder ending in "/") named after it, and
    the only ones in harness/, exporters/ and reference_engine/ whose name begins with
    `word` (tests/test_imports.py holds it); docs/ARCHITECTURE.md, "Names", shows them."""

    word: str
    means: str
    modules: tuple[str, ...]


GLOSSARY: tuple[Name, ...] = (
    Name("judge", "the LLM judge: `layergate judge` asks a model whether each answer is "
         "right; its verdicts are judgements, read by the accuracy figures. Nothing else is "
         "named so: a policy checks a figure, the fixed gate evaluates, the sequential gate "
         "decides, a reference scores an output",
         ("harness/judge.py", "harness/cli/judge.py", "exporters/judgements.py")),
    Name("gate", "the release gate: a policy applied to a run's (or a sweep's) figures; "
         "every other room imports it from its one door, `layergate.harness.gate`",
         ("harness/gate/", "harness/cli/gate.py")),
    Name("fixed", "the gate's first machine: one look at a finished run, every figure over "
         "all its requests; verb evaluate, answer `GateResult` / `FamilyResult`",
         ("harness/gate/fixed/",)),
    Name("sequential", "the gate's second machine: the requests in send order with "
         "anytime-valid intervals; verb decide, answer `SequentialDecision` / "
         "`SequentialFamily`; its intervals and its terminal lines",
         ("harness/gate/sequential/", "exporters/figures/sequential/",
          "harness/report/sequential.py")),
    Name("dispatch", "which verdict a directory gets: `gate_dir` on a run, a capacity sweep "
         "or replicate sweeps, its `GateOutcome` the family and the notes beside it",
         ("harness/gate/dispatch.py",)),
    Name("check", "one rule of a policy held to one figure (`Check`, `check_figure`): pass, "
         "fail, inconclusive, skipped or info", ("harness/gate/checks.py",)),
    Name("candidate", "an arm under test; a run's candidates, each seen as the arm "
         "`candidate` by both machines, and `--require` over their verdicts",
         ("harness/gate/candidates.py",)),
    Name("family", "a run's candidates judged together, at a confidence adjusted across "
         "them: each machine's, and its report", ("harness/gate/fixed/family.py",
                                                  "harness/gate/sequential/family.py",
                                                  "harness/report/family.py")),
    Name("verdict", "pass, fail or inconclusive of a run under a policy: the fixed gate's "
         "on a run's checks, and on a capacity sweep's figures",
         ("harness/gate/fixed/verdict.py", "harness/capacity/verdict.py")),
    Name("policy", "the gate's YAML policy and the watch's (its rules and stages), read by "
         "one loader; the engine's choice of layers is a skip policy",
         ("harness/gate/policy.py", "harness/watch/policy.py", "harness/policy_file.py")),
    Name("answer", "an arm's reply to one request; each module named after it says which "
         "part it handles: extraction (free text to a value), checks (against the request's "
         "schemas), parts (tool calls and structure beside the baseline's), tally (counted "
         "by arm), and the engine's server, which builds it",
         ("exporters/answer_extraction.py", "exporters/answer_checks.py",
          "exporters/figures/answer_parts.py", "exporters/figures/answer_tally.py",
          "reference_engine/server/answer.py")),
    Name("config", "a room's settings: the frozen `...Config` dataclass of its command, the "
         "command's options built from its fields; one `config.py` per room, the same "
         "name for the same job",
         ("harness/capture/config.py", "harness/traces/config.py",
          "harness/replay/config.py", "harness/capacity/config.py",
          "harness/watch/config.py", "harness/gate/sequential/config.py",
          "exporters/figures/config.py", "reference_engine/config.py",
          "reference_engine/calibration/config.py")),
)


# --- the same output -------------------------------------------------------------------


class Answer(Protocol):
    token_ids: tuple[int, ...] | None
    output_text: str

    @property
    def answer(self) -> str: ...  # the text with its tool calls, reasoning apart


def same_output(a: Answer, b: Answer) -> bool:
    """Token ids when both answers carry them, else the answer (its text, refusal and tool
    calls, the calls' arguments compared as JSON: records.answer_text): the one definition
    of "the same output" (exact match, determinism, the live counters, the report's
    diffs)."""
    if a.token_ids is not None and b.token_ids is not None:
        return tuple(a.token_ids) == tuple(b.token_ids)
    return a.answer == b.answer


def compared_tokens(a: Answer, b: Answer, split: Callable[[str], Sequence[str]] = str.split
                    ) -> tuple[Sequence, Sequence]:
    """What positions in two outputs are counted in: their token ids when both carry them
    (as `same_output` compares), else their answers cut by `split`."""
    if a.token_ids is not None and b.token_ids is not None:
        return a.token_ids, b.token_ids
    return split(a.answer), split(b.answer)
