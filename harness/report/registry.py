"""A report registry, after guidellm's output registry: a format's name (`json`, `junit`,
...) -> the writer of that format, each taking one result and a path. A command hands its
result and the paths it was given to its registry (harness/report/formats.py) and never
picks a writer itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from layergate.exporters.catalogue import did_you_mean
from layergate.exporters.errors import UsageError
from layergate.harness.gate import Busy, quietly

R = TypeVar("R")
Writer = Callable[[R, Path], Any]


class ReportWriteError(UsageError):
    """A report path that cannot be written: the user gave it, so a usage error."""


class Reports(Generic[R]):
    """The report formats of one kind of result (`what`: "gate", "comparison", ...)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._writers: dict[str, Writer[R]] = {}

    def register(self, name: str) -> Callable[[Writer[R]], Writer[R]]:
        def add(writer: Writer[R]) -> Writer[R]:
            if name in self._writers:
                raise ValueError(f"the {self.what} report {name!r} is registered twice")
            self._writers[name] = writer
            return writer
        return add

    def names(self) -> tuple[str, ...]:
        return tuple(self._writers)

    def writer(self, name: str) -> Writer[R]:
        if name not in self._writers:
            raise ValueError(f"no {self.what} report {name!r}: one of "
                             f"{', '.join(self._writers)}{did_you_mean(name, self._writers)}")
        return self._writers[name]

    def write(self, result: R, paths: Mapping[str, Path | None], *,
              busy: Busy = quietly, wrote: Callable[[Path], None] | None = None
              ) -> dict[str, Path]:
        """Write `result` in each format given a path (None: not asked for), in the order
        given; `busy` wraps each write (a spinner), `wrote` hears of each written file. A
        path that cannot be written, or whose directory does not exist (the JSON writer would
        create it), is a ReportWriteError naming its option."""
        written = {}
        for name, path in paths.items():
            if path is None:
                continue
            write = self.writer(name)
            if not Path(path).parent.is_dir():  # a mistyped directory is not created
                raise ReportWriteError(f"--{name}: cannot write {path}: no directory "
                                       f"{Path(path).parent}")
            try:
                with busy(f"writing {path}"):
                    write(result, path)
            except OSError as exc:
                raise ReportWriteError(f"--{name}: cannot write {path}: "
                                       f"{exc.strerror or exc}") from exc
            written[name] = path
            if wrote is not None:
                wrote(path)
        return written
