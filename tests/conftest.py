"""Shared fixtures. One real-model engine per session (per worker), shared by every test that
needs a full-depth baseline over HTTP; tests that need other policies start their own.

`make test` runs the suite on two workers (pytest-xdist, one file per worker at a time), then
the files in SOLO and the tests in SOLO_TESTS: they judge real servers against a clock or a
known rate, which a second worker's load would move. The light ones among them (PAIRED) run
two at a time, the others alone."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from layergate.harness.processes import ManagedProcess
from layergate.harness.stack.engines import start_engine
from tests.support.replay_rig import echo  # noqa: F401 (the echo server, a module fixture)
from tests.support.starts import KINDS, Starts

STARTED = pytest.StashKey[set]()

SOLO = {
    "test_capacity_real.py": "an SLO set from the engines' own latency, measured first",
    "test_watch_engines.py": "a rollback within the windows the statistics promise",
    "test_watch_scenarios.py": "controllers on their own clocks, retries within a scaled budget",
}
# single tests of files whose other tests hold no time bound (those run beside the rest: an
# SLO missed or met whatever the load, a refusal, a hook's record)
SOLO_TESTS = {
    ("test_replay_distributed.py",
     "test_clock_skew_is_corrected_or_refused_and_a_taken_name_is_refused"):
        "clock skew between workers held to a bound",
    **{("test_capacity_sweep.py", name): "measures a known capacity ratio within 10 %"
       for name in ("test_four_slots_against_six_measure_the_known_ratio",
                    "test_identical_servers_give_a_ratio_whose_interval_covers_one",
                    "test_a_killed_sweep_resumes_where_it_stopped")},
    ("test_watch_restarts.py",
     "test_a_watch_killed_ten_times_mid_stage_decides_as_an_uninterrupted_one"):
        "restarts within the webhooks' retries and a fixed deadline",
}

SOLO_FILES = set(SOLO) | {name for name, _ in SOLO_TESTS}
# solo files whose solo tests mostly wait on their clocks (about half a core each: two share
# the two cores), run by `-m "solo and paired"` on two workers, the other solo tests alone.
# pytest-xdist (--dist loadfile) gives the first file to one worker, the second to the other
# and the third to the first: the longest (the engines' watch, about 2 min) comes second
PAIRED = ("test_watch_restarts.py", "test_watch_engines.py", "test_capacity_sweep.py")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The solo parts of `make test` (`-m "solo ..."`) read only the files with solo tests:
    the others would be collected (seconds of imports) to be deselected."""
    if config.option.markexpr.startswith("solo") and collection_path.name.startswith("test_") \
            and collection_path.suffix == ".py":
        return collection_path.name not in SOLO_FILES or None
    return None


STARTS = Starts()  # what each fixture and test starts, against its marks (tier marks)


def pytest_configure(config: pytest.Config) -> None:
    STARTS.install()
    # the workers take files in the order below: pytest-xdist would reorder them by their
    # number of tests, which leaves the long files of few tests (the stack, the demo) last
    config.option.loadscopereorder = False


# files with more of these marks start first: the workers take files in order
# (--dist loadfile), and a long file taken last leaves the other worker idle at the end
LONG_FIRST = {"docker", "vllm", "model", "llamacpp", "chromium", "peers", "slow"}
# long files that mostly wait, taken as files of one such mark: after the first files (the
# stack, the demo, vLLM), which fill both cores, and before the short ones, which end the run
WAITING = {
    "test_import_results_tools.py": "the tools wait on a slow server, about 0.6 of a core; "
                                    "beside the first files their A/A runs drew apart by 13 %",
    "test_watch_prometheus.py": "the watches wait on their windows; taken last (no mark), "
                                "the file ran alone for its last minute",
}


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    weight: dict = {}
    for item in items:
        if item.path.name in SOLO or (item.path.name, item.originalname) in SOLO_TESTS:
            item.add_marker(pytest.mark.solo)
            if item.path.name in PAIRED:
                item.add_marker(pytest.mark.paired)
        marks = LONG_FIRST & {m.name for m in item.iter_markers()}
        weight[item.path] = 1 if item.path.name in WAITING else max(
            weight.get(item.path, 0), len(marks))

    def order(item: pytest.Item) -> tuple[int, int]:  # stable: files stay whole
        if item.get_closest_marker("paired"):  # selected only with each other
            return 1, PAIRED.index(item.path.name)
        return 0, -weight[item.path]
    items.sort(key=order)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
    with STARTS.owned() as started:
        result = yield
    key = (fixturedef.baseid, fixturedef.argname)
    STARTS.by_fixture[key] = STARTS.by_fixture.get(key, set()) | started
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with STARTS.owned() as started:
        result = yield
    item.stash[STARTED] = started
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """A test that starts a tier's process without its mark fails (after its fixtures are
    torn down): `make test-fast` would run it (tests/support/starts.py)."""
    result = yield
    defs = getattr(item, "_fixtureinfo", None)
    fixtures = {name: (chain[-1].baseid, name)
                for name, chain in (defs.name2fixturedefs.items() if defs else ()) if chain}
    marks = {m.name for m in item.iter_markers()}
    missing = STARTS.missing(item.stash.get(STARTED, set()), fixtures, marks)
    if missing:
        pytest.fail(f"{item.nodeid} starts {', '.join(sorted(missing))} without the mark(s) "
                    f"({'; '.join(f'{k}: {KINDS[k]}' for k in sorted(missing))}): add "
                    f"@pytest.mark.{' / '.join(sorted(missing))} (tests/support/starts.py)",
                    pytrace=False)
    return result


@pytest.fixture(scope="session")
def real_model():
    """The real SmolLM2, loaded once in-process (fp32, 1 thread) for every engine-level test."""
    from layergate.reference_engine.config import EngineConfig
    from layergate.reference_engine.loading import load_model

    return load_model(EngineConfig(threads=1))


@pytest.fixture(scope="session")
def full_engine() -> Iterator[ManagedProcess]:
    """A real SmolLM2 engine, skip policy full, fp32, 1 thread, on 127.0.0.1."""
    proc = start_engine("--skip-policy", "full")
    yield proc
    proc.stop()


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: run `make install` (it installs the Debian package)")
    return path


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    return _binary("prometheus")


@pytest.fixture(scope="session")
def promtool_bin() -> str:
    return _binary("promtool")


@pytest.fixture(scope="session")
def chromium_bin() -> str:
    return _binary("chromium")
