"""`harness` and `exporters` must import without torch: the replayer runs on load-generation
machines that have no model. Every module is imported in a fresh interpreter, and torch /
transformers must not be among what got loaded."""

from __future__ import annotations

import subprocess
import sys

# run only inside the Locust process (Locust monkey-patches the standard library)
LOCUST_ONLY = {"harness.replay.locustfile", "harness.replay.gevent_transport"}

SCRIPT = """
import importlib, pkgutil, sys
skip = set(sys.argv[1:])
names = []
for package in ("exporters", "harness"):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if info.name not in skip and not info.name.endswith("__main__"):
            importlib.import_module(info.name)
            names.append(info.name)
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(len(names), ",".join(heavy))
"""


def test_harness_and_exporters_never_import_torch() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, *sorted(LOCUST_ONLY)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, heavy = out.stdout.split()[0], out.stdout.strip().partition(" ")[2]
    assert int(count) > 40  # every module was really imported
    assert heavy == "", f"importing harness/exporters loaded {heavy}"


def test_exporters_never_import_harness() -> None:
    script = ("import importlib, pkgutil, sys, exporters\n"
              "[importlib.import_module(i.name) for i in "
              "pkgutil.walk_packages(exporters.__path__, 'exporters.')]\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'harness'))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
