"""The HTML report's view of one conversation the candidate diverged on, turn by turn, side
by side with the baseline (issue 54): of the run's multi-turn conversations, the one that
stayed identical longest before it differed (ties: the first by its first request id), so
the reader sees where it parted and what each side did after. In `own` mode the sides'
later turns are answers to different histories; a side with no answer at a turn had its
conversation ended there (a call unlike the recorded one) or cut (an error).

The turn order comes from the run's traffic (exporters/figures/conversations.py), the
answers from the results the report shows; "" when the run has no multi-turn conversation
or the candidate never differed.
"""

from __future__ import annotations

import json
from html import escape

from layergate.exporters.catalogue import BASELINE, CANDIDATE, RECORDED, same_output
from layergate.exporters.figures.conversations import turn_positions
from layergate.exporters.records import ArmResult
from layergate.harness.gate import GateResult
from layergate.harness.report.pairs import word_diff
from layergate.harness.rundir import TRAFFIC


def _turns(result: GateResult) -> dict[str, list[str]]:
    """Conversation -> its request ids in turn order."""
    traffic = result.run_dir / TRAFFIC if result.run_dir is not None else None
    if traffic is None or not traffic.is_file():
        return {}
    by_key: dict[str, dict[int, str]] = {}
    for rid, (key, turn) in turn_positions(traffic).items():
        by_key.setdefault(key, {})[turn] = rid
    return {key: [turns[t] for t in sorted(turns)] for key, turns in by_key.items()}


def _first_difference(ids: list[str], rows: dict[tuple[str, str], ArmResult],
                      arm: str) -> int | None:
    """The 0-based turn the arm first differed from the baseline (one side unanswered
    counts as differing), None when never, or when an error cut the conversation first."""
    for k, rid in enumerate(ids):
        a, b = rows.get((rid, BASELINE)), rows.get((rid, arm))
        if (a is not None and not a.ok) or (b is not None and not b.ok):
            return None
        if (a is None) != (b is None) or (a is not None and not same_output(a, b)):
            return k
    return None


def _user_said(traffic_messages: list[dict]) -> str:
    last = traffic_messages[-1] if traffic_messages else {}
    content = last.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _side(result: ArmResult | None) -> str:
    if result is None:
        return "<span class=small>(no answer: the conversation had ended)</span>"
    if not result.ok:
        return f"<span class=small>(error: {escape(str(result.error))})</span>"
    return escape(result.answer)


def _row(k: int, said: str, a: ArmResult | None, b: ArmResult | None, parted: bool) -> str:
    if a is not None and b is not None and a.ok and b.ok and not same_output(a, b):
        left, right = [], []
        for op, x, y in word_diff(a.answer, b.answer):
            left.append(escape(x) if op == "equal" else f"<del>{escape(x)}</del>" if x else "")
            right.append(escape(y) if op == "equal" else f"<ins>{escape(y)}</ins>" if y else "")
        base, cand = "".join(left), "".join(right)
    else:
        base, cand = _side(a), _side(b)
    mark = " · <b>differs</b>" if parted else ""
    return (f"<div class=small>turn {k + 1}{mark} · user: {escape(said[:300])}</div>"
            f"<div class=diff><div><pre>{base}</pre></div><div><pre>{cand}</pre></div></div>")


def diverged_conversation(result: GateResult, arm: str = CANDIDATE) -> str:
    """The section: one diverged conversation of `arm` side by side with the baseline."""
    conversations = _turns(result)
    if not conversations:
        return ""
    rows = {(r.request_id, r.arm): r for r in result.results}
    found = [(d, ids[0], ids) for ids in conversations.values()
             if (d := _first_difference(ids, rows, arm)) is not None]
    if not found:
        return ""
    d, _, ids = min(found, key=lambda x: (-x[0], x[1]))
    messages = _messages(result, ids)
    mode = (result.manifest.get("config") or {}).get("conversation_mode") or RECORDED
    body = "".join(_row(k, _user_said(messages.get(rid, [])), rows.get((rid, BASELINE)),
                        rows.get((rid, arm)), k == d) for k, rid in enumerate(ids))
    return (f"<h2>A diverged conversation</h2><div class=card id=diverged-conversation>"
            f"<p class=meta>Conversation <b>{escape(ids[0])}</b> ({len(ids)} turns, "
            f"{escape(mode)} mode): identical through turn {d}, first differed at turn "
            f"{d + 1}. Of {len(found)} conversation(s) that differed, the one identical "
            f"longest.</p><div class=diff><div class=small>baseline</div>"
            f"<div class=small>{escape(arm)}</div></div>{body}</div>")


def _messages(result: GateResult, ids: list[str]) -> dict[str, list[dict]]:
    """The traffic's messages of the requests `ids` (the recorded user turns)."""
    wanted, out = set(ids), {}
    with (result.run_dir / TRAFFIC).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                if str(obj.get("id")) in wanted:
                    out[str(obj["id"])] = obj.get("body", {}).get("messages") or []
    return out
