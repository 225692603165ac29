"""Files written whole or not at all: the one owner of the temp-file-and-rename writes.

Every state or report file (a run's manifest, a sweep's state, the watch journal, a traffic
file, an import's report) is written into a temp file beside it, flushed to disk, and
renamed over the old one: a crash or a full disk leaves the old file or the new one,
never half of one, and the temp file is removed when writing fails."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: str | Path, buffering: int = -1) -> Iterator[IO[str]]:
    """A UTF-8 text file that becomes `path` when the block ends without an error (its
    directory created); on an error it is removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8", buffering=buffering) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, obj: Any, indent: int | None = 2,
                      default: Callable[[Any], Any] | None = None) -> Path:
    """`obj` as JSON (UTF-8, non-ASCII kept; `indent` None: compact), atomically."""
    separators = (",", ":") if indent is None else None
    body = json.dumps(obj, indent=indent, ensure_ascii=False, default=default,
                      separators=separators)
    with atomic_file(path) as fh:
        fh.write(body + "\n")
    return Path(path)
