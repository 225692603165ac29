"""Run `client.send` over the gevent transport, as the Locust process does, in its own
process (gevent patches the standard library; the test process must stay unpatched).

    python -m tests.support.gevent_send < cases.json > results.json

Each case: {"url": BASE_URL, "record": TRAFFIC_RECORD_JSON, "timeout": S,
"late_s": seconds the send is late}; out: one `ArmResult` (as a dict) per case, in order.
"""

from gevent import monkey

monkey.patch_all()

import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from layergate.exporters.traffic import parse_record  # noqa: E402
from layergate.harness.replay.client import Target, send  # noqa: E402
from layergate.harness.replay.gevent_transport import GeventTransport  # noqa: E402


def main() -> None:
    cases = json.load(sys.stdin)
    transport = GeventTransport(concurrency=4)
    out = []
    for case in cases:
        record = parse_record(case["record"], Path("case"), 1)
        result = send(transport, Target("candidate", case["url"]), record,
                      intended=time.perf_counter() - case.get("late_s", 0.0),
                      timeout=case["timeout"])
        out.append(dataclasses.asdict(result))
    transport.close()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
