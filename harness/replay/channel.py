"""The master/worker channel of a replay: Locust's own messages (`runner.send_message`,
`register_message`), carrying work one way and results the other, in batches.

    worker -> master  layergate_hello    {name, host, pid, wall_time[, proof]}  (auth.py)
    master -> worker  layergate_welcome  {plan, master_time, worker_time}  (or _refuse {reason})
    worker -> master  layergate_want     {n}           up to n records, please
    master -> worker  layergate_work     {items}       WorkItem.to_json(), due_at on the
                                                       master's clock
    worker -> master  layergate_results  {done}        [{seq, request_id, intended_at,
                                                       results}], intended_at on the
                                                       master's clock
    master -> worker  layergate_ack      {kept, dropped}  seqs written / dropped as late
    worker -> master  layergate_turn     {seq, turn, result}  own mode: one arm's turn of a
                                                       conversation, written at once
                                                       (TurnDone.to_json(), result or null)

Only plain JSON-able values travel (Locust packs them with msgpack). The worker corrects
its clock by the offset it measures at the welcome: every time on the wire is the
master's. Nothing here imports Locust or gevent.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from layergate.exporters import tool_calls
from layergate.exporters.records import ArmResult

HELLO = "layergate_hello"
WELCOME = "layergate_welcome"
REFUSE = "layergate_refuse"
WANT = "layergate_want"
WORK = "layergate_work"
RESULTS = "layergate_results"
ACK = "layergate_ack"
TURN = "layergate_turn"

DEFAULT_MASTER_PORT = 5557  # Locust's own
_TUPLES = ("itl_s", "token_ids", "logprobs", "top_logprobs", "quirks")


_FIELDS = tuple(f.name for f in dataclasses.fields(ArmResult))


def result_to_json(result: ArmResult) -> dict[str, Any]:
    # shallow: the message is packed at once, and asdict's deep copy cost the worker more
    # than parsing the stream did (profiled)
    out = {name: getattr(result, name) for name in _FIELDS}
    if result.tool_calls:  # msgpack packs no dataclass
        out["tool_calls"] = tool_calls.to_json(result.tool_calls)
    return out


def result_from_json(obj: dict[str, Any]) -> ArmResult:
    values = dict(obj)
    for name in _TUPLES:  # msgpack turns tuples into lists
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    values["tool_calls"] = tool_calls.from_json(values.get("tool_calls") or ())
    return ArmResult(**values)


def parse_address(text: str, what: str) -> tuple[str, int]:
    """`HOST[:PORT]` (port: Locust's 5557 when left out); ValueError naming `what`."""
    host, sep, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not sep:
        host, port = text, str(DEFAULT_MASTER_PORT)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} must be HOST[:PORT] with a port in 1..65535: {text!r}")
    return host, int(port)


def clock_offset(worker_sent: float, master_time: float, worker_received: float) -> float:
    """master clock - worker clock, from one exchange (NTP's midpoint estimate: the error
    is at most half the round trip)."""
    return master_time - (worker_sent + worker_received) / 2
