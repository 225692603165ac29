"""Records scenarios/traffic/tool-conversations.jsonl: multi-turn tool-calling conversations
whose assistant turns are the bundled model's own answers (the reference engine at full
depth, greedy), so a full-depth arm replaying them in `own` mode makes the recorded calls
and gets the recorded tool results (scenarios/README.md, "tool-conversations.jsonl").

The user's messages and what each tool answers were written by hand (CONVERSATIONS below);
the calls are the model's. Each conversation is sent turn by turn, one request at a time:
turn 1 is the system prompt and the user's first message; turn n + 1 is turn n, the
model's answer (its calls as `tool_calls`, or its text), the tool results (the call's
arguments with the fields the script gives that turn's tool, as JSON) and the user's next
message. The examples of the wanted answer live in the system prompt, not as few-shot turns,
so that each conversation opens with its own first user message (the key that groups a
conversation's turns, exporters/figures/conversations.py).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/conversation_traffic.py \\
        --out scenarios/traffic/tool-conversations.jsonl     # starts its own full engine
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

SHOP = ("You are the support assistant of an online shop. You answer only by calling "
        "functions:\n"
        "- lookup_order(order_id): find an order; order_id is the 5-digit order number.\n"
        "- create_ticket(title, priority): open a support ticket; priority is \"low\", "
        "\"normal\" or \"high\".\n"
        "- refund_order(order_id, amount, reason): refund an order; reason is \"damaged\", "
        "\"late\", \"wrong_item\" or \"other\".\n"
        "Reply with a Python list of calls, like [lookup_order(order_id=\"12345\")], and "
        "nothing else.")
TRAVEL = ("You are a travel assistant. You answer only by calling functions:\n"
          "- get_weather(city, unit): the current weather in a city; unit is \"C\" or \"F\".\n"
          "- convert_currency(amount, source, target): convert money; source and target are "
          "3-letter currency codes.\n"
          "Reply with a Python list of calls and nothing else.")
CALENDAR = ("You manage a calendar. You answer only by calling functions:\n"
            "- create_event(title, day, hour): add an event; day is a weekday in lower case, "
            "hour is 0 to 23.\n"
            "- list_events(day): the events of a weekday.\n"
            "Reply with a Python list of calls and nothing else.")


def _fn(name: str, description: str, properties: dict[str, Any],
        required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required,
                       "additionalProperties": False}}}


STRING = {"type": "string"}
TOOLS = {
    SHOP: [
        _fn("lookup_order", "Find an order by its number.",
            {"order_id": {"type": "string", "pattern": "^[0-9]{5}$"}}, ["order_id"]),
        _fn("create_ticket", "Open a support ticket.",
            {"title": {"type": "string", "minLength": 3},
             "priority": {"type": "string", "enum": ["low", "normal", "high"]}},
            ["title", "priority"]),
        _fn("refund_order", "Refund an order.",
            {"order_id": STRING, "amount": {"type": "number", "minimum": 0},
             "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]}},
            ["order_id", "amount", "reason"])],
    TRAVEL: [
        _fn("get_weather", "The current weather in a city.",
            {"city": STRING, "unit": {"type": "string", "enum": ["C", "F"]}},
            ["city", "unit"]),
        _fn("convert_currency", "Convert an amount between currencies.",
            {"amount": {"type": "number", "minimum": 0},
             "source": {"type": "string", "pattern": "^[A-Z]{3}$"},
             "target": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            ["amount", "source", "target"])],
    CALENDAR: [
        _fn("create_event", "Add an event to the calendar.",
            {"title": {"type": "string", "minLength": 2},
             "day": {"type": "string", "enum": ["monday", "tuesday", "wednesday", "thursday",
                                                "friday", "saturday", "sunday"]},
             "hour": {"type": "integer", "minimum": 0, "maximum": 23}},
            ["title", "day", "hour"]),
        _fn("list_events", "The events of a weekday.",
            {"day": {"type": "string", "enum": ["monday", "tuesday", "wednesday", "thursday",
                                                "friday", "saturday", "sunday"]}},
            ["day"])],
}



def shots(system: str, variant: int) -> list[dict[str, Any]]:
    """The few-shot turns before a conversation of `system`'s kind: the wanted answers as
    plain assistant messages (SmolLM2's template ignores `tools`; with the tool list in the
    system prompt alone it answers in prose). The first shot's order number, city or name
    differs per conversation, so each conversation opens with its own first message."""
    if system == SHOP:
        n = ("48213", "52097", "61348", "29904", "70415")[variant]
        pairs = [(f"Where is my order {n}?", f'[lookup_order(order_id="{n}")]'),
                 ("The website shows an error when I pay. Please look into it soon.",
                  '[create_ticket(title="Error at checkout", priority="high")]'),
                 ("Order 30577 arrived broken, I want my 25 dollars back.",
                  '[refund_order(order_id="30577", amount=25, reason="damaged")]')]
    elif system == TRAVEL:
        city = ("Rome", "Madrid", "Vienna", "Athens", "Dublin")[variant]
        pairs = [(f"What is the weather in {city} in Fahrenheit?",
                  f'[get_weather(city="{city}", unit="F")]'),
                 ("Change 50 pounds into yen.",
                  '[convert_currency(amount=50, source="GBP", target="JPY")]')]
    else:
        name = ("Maria", "Peter", "Chen", "Fatima", "Lukas")[variant]
        pairs = [(f"Add lunch with {name} on Tuesday at 1 pm.",
                  f'[create_event(title="Lunch with {name}", day="tuesday", hour=13)]'),
                 ("What do I have on Friday?", '[list_events(day="friday")]')]
    return [m for q, a in pairs for m in ({"role": "user", "content": q},
                                          {"role": "assistant", "content": a})]


# (system prompt, [(the user's message, what the tool answers to that turn's calls)]): the
# tool's fields are added to each call's own arguments; the last turn's are never used
CONVERSATIONS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    (SHOP, [("Where is my order 51734?", {"status": "delayed", "eta": "next Monday"}),
            ("That is late. Open a ticket about the delay, high priority.",
             {"ticket": "T-8812"}),
            ("Actually just refund the 40 dollars for order 51734, it is too late.",
             {"refunded": True}),
            ("Thanks. Can you also check order 60311?", {})]),
    (SHOP, [("Can you look up order 20458 for me?", {"status": "delivered", "total": 89.0}),
            ("It came with the wrong color. Refund the 89 dollars please.",
             {"refunded": True}),
            ("Please also open a normal ticket so the warehouse checks the colors.", {})]),
    (SHOP, [("My order 33907 has not arrived yet. Where is it?",
             {"status": "lost in transit", "total": 52.5}),
            ("Lost? Refund all 52.5 dollars then.", {"refunded": True}),
            ("Open a low priority ticket: the tracking page never updated.",
             {"ticket": "T-9020"}),
            ("And where is my other order 33915?", {"status": "shipped"}),
            ("Good. Refund 5 dollars of order 33915 for the late delivery.", {})]),
    (SHOP, [("The app crashes when I open my cart. Please fix it fast.",
             {"ticket": "T-7731"}),
            ("While you are at it, where is order 74120?", {"status": "packed"}),
            ("It was supposed to ship last week. Refund 10 dollars of it for being late.",
             {})]),
    (SHOP, [("Order 18266 arrived with a cracked screen. I paid 120 dollars.",
             {"refunded": True}),
            ("Please check where my order 18290 is.", {"status": "in transit"}),
            ("Open a high priority ticket: two broken deliveries in a row.",
             {"ticket": "T-6604"}),
            ("Look up order 18266 again to see the refund.", {})]),
    (TRAVEL, [("What is the weather in Lisbon in Celsius?", {"temperature": 21,
                                                             "sky": "sunny"}),
              ("Nice. How much is 200 euros in dollars?", {"result": 216.4}),
              ("And the weather in Porto, also in Celsius?", {"temperature": 17,
                                                              "sky": "rain"}),
              ("Change 80 euros into pounds.", {})]),
    (TRAVEL, [("Convert 1000 yen to euros please.", {"result": 6.2}),
              ("What is the weather in Tokyo in Fahrenheit?", {"temperature": 64,
                                                                "sky": "cloudy"}),
              ("And in Osaka, Fahrenheit too?", {})]),
    (TRAVEL, [("Is it cold in Oslo right now? Tell me in Celsius.", {"temperature": -3,
                                                                     "sky": "snow"}),
              ("How many Norwegian kroner do I get for 300 dollars?", {"result": 3180.0}),
              ("What about the weather in Bergen in Celsius?", {"temperature": 2,
                                                                 "sky": "rain"}),
              ("Convert 500 kroner back into dollars.", {"result": 47.2}),
              ("Last one: the weather in Stockholm in Celsius.", {})]),
    (TRAVEL, [("How much is 75 Swiss francs in euros?", {"result": 79.9}),
              ("What is the weather in Zurich in Celsius?", {"temperature": 12,
                                                              "sky": "fog"}),
              ("Convert 75 francs into dollars as well.", {})]),
    (TRAVEL, [("Weather in New York in Fahrenheit, please.", {"temperature": 48,
                                                               "sky": "windy"}),
              ("Change 150 dollars into Mexican pesos.", {"result": 2565.0}),
              ("And the weather in Mexico City in Celsius?", {"temperature": 24,
                                                               "sky": "sunny"}),
              ("Convert 1000 pesos back into dollars.", {})]),
    (CALENDAR, [("Put a team meeting on Monday at 10 in the morning.", {"created": True}),
                ("What else do I have on Monday?", {"events": ["Gym at 7"]}),
                ("Add a call with the bank on Wednesday at 3 pm.", {"created": True}),
                ("Show me Wednesday.", {})]),
    (CALENDAR, [("What is on my calendar for Thursday?", {"events": []}),
                ("Good, then book yoga on Thursday at 6 pm.", {"created": True}),
                ("And a haircut on Saturday at 11 am.", {})]),
    (CALENDAR, [("Schedule a dentist visit on Friday at 8 am.", {"created": True}),
                ("List my Friday events.", {"events": ["Dentist at 8"]}),
                ("Add dinner with Tom on Friday at 7 pm.", {"created": True}),
                ("What do I have on Sunday?", {"events": ["Brunch at 11"]}),
                ("Add a run on Sunday at 9 in the morning.", {})]),
    (CALENDAR, [("Add the project review on Tuesday at 2 pm.", {"created": True}),
                ("What is planned for Tuesday?", {"events": ["Project review at 14"]}),
                ("Also put coffee with Ana on Tuesday at 9 am.", {})]),
    (CALENDAR, [("Which events do I have on Saturday?", {"events": ["Market at 10"]}),
                ("Add a football match on Saturday at 4 pm.", {"created": True}),
                ("Then book a piano lesson on Monday at 5 pm.", {"created": True}),
                ("What is on Monday now?", {})]),
]
MAX_TOKENS = 40
TURN_GAP_S = 20.0  # turn n + 1 arrives this long after turn n (a user reading the answer)
START_GAP_S = 4.0  # conversations open this far apart


def tool_result(call: dict[str, Any], fields: dict[str, Any]) -> str:
    """What the tool answers: the call's own arguments with the turn's scripted fields."""
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
    except ValueError:
        arguments = {}
    return json.dumps({**(arguments if isinstance(arguments, dict) else {}), **fields})


def _ask(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(f"{url}/v1/chat/completions", method="POST",
                                     data=json.dumps({**body, "model": "smollm2-135m"}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)["choices"][0]["message"]


def record(url: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for c, (system, turns) in enumerate(CONVERSATIONS):
        variant = sum(other == system for other, _ in CONVERSATIONS[:c])
        messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                          *shots(system, variant)]
        for t, (said, fields) in enumerate(turns):
            messages.append({"role": "user", "content": said})
            body = {"messages": [dict(m) for m in messages], "tools": TOOLS[system],
                    "max_tokens": MAX_TOKENS, "temperature": 0}
            records.append({"offset_s": round(c * START_GAP_S + t * TURN_GAP_S, 3),
                            "scenario": "tools", "endpoint": "/v1/chat/completions",
                            "body": body})
            answer = _ask(url, body)
            reply: dict[str, Any] = {"role": "assistant", "content": answer.get("content")}
            if answer.get("tool_calls"):
                reply["tool_calls"] = [
                    {"id": f"call_{c + 1}_{t + 1}_{i + 1}", "type": "function",
                     "function": call["function"]} for i, call in enumerate(answer["tool_calls"])]
            messages.append(reply)
            print(f"conversation {c + 1} turn {t + 1}: "
                  f"{json.dumps(reply.get('tool_calls') or reply['content'])[:160]}", flush=True)
            for call in reply.get("tool_calls", ()):
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": tool_result(call, fields)})
    ordered = sorted(records, key=lambda r: r["offset_s"])  # ids in arrival order
    return [{"id": f"tconv-{i:04d}", **r} for i, r in enumerate(ordered, start=1)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--url", help="a running full-depth engine (default: start one)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    engine = None
    url = args.url
    if url is None:
        from layergate.harness.stack.engines import start_engine
        engine = start_engine("--skip-policy", "full")
        url = engine.url
    try:
        records = record(url)
    finally:
        if engine is not None:
            engine.stop()
    with args.out.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    print(f"{len(records)} turns of {len(CONVERSATIONS)} conversations -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
