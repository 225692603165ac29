"""`--junit`: one test case per metric × scenario, so CI shows each check as a test.

A failed gating check is a <failure>, an inconclusive one an <error> (the evidence, not
the candidate, is lacking); skipped, report-only and non-gating rows are <skipped>, so
the test results agree with the verdict. Written with the
standard library; tests read it back with junitparser.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from layergate.exporters.catalogue import FAIL, INCONCLUSIVE
from layergate.harness.gate import INFO, SKIPPED, GateResult
from layergate.harness.report import wording


def render_junit(result: GateResult) -> ET.ElementTree:
    suites = ET.Element("testsuites", name="layergate gate")
    add_suite(suites, result, f"layergate gate {result.run_id}")
    return ET.ElementTree(suites)


def add_suite(suites: ET.Element, result: GateResult, name: str,
              classname: str = "layergate.gate") -> ET.Element:
    """One <testsuite> of `result`'s checks (a run with several candidates has one each)."""
    checks = result.overall + [c for cs in result.scenarios.values() for c in cs]
    suite = ET.SubElement(suites, "testsuite", name=name, tests=str(len(checks)))
    props = ET.SubElement(suite, "properties")
    for key, value in (("verdict", result.verdict), ("policy", result.policy.name),
                       ("rollout", result.rollout.stage), ("run", result.run_id)):
        ET.SubElement(props, "property", name=key, value=value)
    tally = {"failures": 0, "errors": 0, "skipped": 0}
    for c in checks:
        case = ET.SubElement(suite, "testcase", classname=f"{classname}.{c.scenario}",
                             name=wording.label(c))
        message = wording.summary_line(c)
        if not c.gating and c.status in (FAIL, INCONCLUSIVE):
            # shown, but it cannot fail the build: the verdict does not depend on it
            tally["skipped"] += 1
            ET.SubElement(case, "skipped", message=f"not gating: {message}")
        elif c.status == FAIL:
            tally["failures"] += 1
            ET.SubElement(case, "failure", message=message, type="GateFailure").text = message
        elif c.status == INCONCLUSIVE:
            tally["errors"] += 1
            ET.SubElement(case, "error", message=message,
                          type="GateInconclusive").text = message
        elif c.status in (SKIPPED, INFO):
            tally["skipped"] += 1
            ET.SubElement(case, "skipped", message=message)
        else:
            ET.SubElement(case, "system-out").text = message
    for key, value in tally.items():
        suite.set(key, str(value))
    return suite


def write_tree(tree: ET.ElementTree, path: str | Path) -> Path:
    path = Path(path)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path


def write_junit(result: GateResult, path: str | Path) -> Path:
    return write_tree(render_junit(result), path)
