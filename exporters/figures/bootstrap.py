"""Paired bootstrap, stratified by scenario, computed as resampled *sums*.

Every bootstrapped figure here is a function of per-request sums (ratios of sums, means,
BLEU / chrF sufficient statistics), so a resample never materialises results: each
resample is a vector of multinomial counts per stratum, and its sums are one matrix
product `counts @ columns`. All columns share the same resamples, which is what makes the
comparisons paired (B vs A and A' vs A see the same requests in every resample).
Rows must be grouped by stratum (see `layergate.exporters.figures.aligned`).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

_CELLS_PER_CHUNK = 2_000_000  # resamples x rows drawn at once: bounds memory to ~16 MB
_CELLS_PER_BATCH = 16_000_000  # resamples x rows whose counts are multiplied at once (64 MB)


@dataclass(frozen=True)
class SumTable:
    """Column sums per stratum: on the sample (`point`, S x k) and on each resample
    (`boot`, S x B x k)."""

    names: tuple[str, ...]
    point: np.ndarray
    boot: np.ndarray

    def sums(self, name: str, strata: slice | int | None = None) -> tuple[float, np.ndarray]:
        """(sample sum, resampled sums) of a column over one stratum or all (None)."""
        j = self.names.index(name)
        if strata is None:
            return float(self.point[:, j].sum()), self.boot[:, :, j].sum(axis=0)
        return float(self.point[strata, j]), self.boot[strata, :, j]

    def evaluate(self, fn: Callable[..., np.ndarray | float], names: tuple[str, ...],
                 stratum: int | None = None) -> tuple[float, np.ndarray]:
        """`fn(*sums)` on the sample and, vectorised, on every resample; NaN where undefined."""
        pairs = [self.sums(n, stratum) for n in names]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            point = float(fn(*[np.float64(p) for p, _ in pairs]))
            boot = np.asarray(fn(*[b for _, b in pairs]), dtype=float)
        return point, boot


@dataclass(frozen=True)
class Sparse:
    """A column that is zero but on under a quarter of its rows (text statistics on a
    sample, say): those rows, ascending, and their values. The bootstrap reads such a column
    on those rows only either way, so a million rows need not be kept for it."""

    rows: np.ndarray
    values: np.ndarray
    n: int

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The values at `rows` (ascending), 0 where none is kept."""
        out = np.zeros(len(rows), dtype=self.values.dtype)
        if len(self.rows):
            pos = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
            hit = self.rows[pos] == rows
            out[hit] = self.values[pos[hit]]
        return out


Column = np.ndarray | Sparse  # a calculator column: every row, or the few not zero


def dense(column: Column) -> np.ndarray:
    """The column with every row, zeros included."""
    if not isinstance(column, Sparse):
        return column
    out = np.zeros(column.n, dtype=column.values.dtype)
    out[column.rows] = column.values
    return out


def _mostly_zero(nonzero: int, n: int) -> bool:
    return nonzero * 4 < n


def compact(column: Column) -> Column:
    """The column in the narrowest form that holds its values exactly: `Sparse` when mostly
    zero, bool for 0 / 1, float32, else as it is. A hundred-odd columns of a million rows
    each, mostly counts and flags, would otherwise take a GB. The sums of the bootstrap are
    the same."""
    if isinstance(column, Sparse):
        return column
    rows = np.flatnonzero(column)
    if _mostly_zero(rows.size, column.size):
        return Sparse(rows, _narrow(column[rows]), column.size)
    return _narrow(column)


def _narrow(column: np.ndarray) -> np.ndarray:
    if column.dtype != np.float64:
        return np.ascontiguousarray(column)
    if _flags(column[:64]) and _flags(column):  # the head first: most columns fail there
        return column.astype(bool)
    narrow = column.astype(np.float32)
    # exact when every value comes back bit for bit (a NaN too)
    back = narrow.astype(np.float64)
    same = np.array_equal(back.view(np.int64), np.ascontiguousarray(column).view(np.int64))
    return narrow if same else np.ascontiguousarray(column)  # not a view keeping more alive


def _flags(column: np.ndarray) -> bool:
    return bool(((column == 0) | (column == 1)).all())


def _split(columns: Mapping[str, Column], n: int) -> tuple[list[str], list[str]]:
    """Columns that are mostly zero (e.g. text statistics on a sample) take a cheaper path."""
    dense, sparse = [], []
    for name, col in columns.items():
        mostly_zero = isinstance(col, Sparse) or _mostly_zero(np.count_nonzero(col), n)
        (sparse if mostly_zero else dense).append(name)
    return dense, sparse


def _nonzero(col: Column) -> np.ndarray:
    return col.rows if isinstance(col, Sparse) else np.flatnonzero(col)


def _values_at(col: Column, rows: np.ndarray) -> np.ndarray:
    return col.at(rows) if isinstance(col, Sparse) else col[rows]


def _digest(col: Column) -> bytes:
    """A column's identity by its values as stored: columns made alike (`compact`) compare
    alike."""
    parts = [col.rows, col.values] if isinstance(col, Sparse) else [col]
    digest = hashlib.blake2b(type(col).__name__.encode(), digest_size=16)
    for part in parts:
        digest.update(part.dtype.str.encode())
        digest.update(memoryview(np.ascontiguousarray(part)).cast("B"))
    return digest.digest()


def resample_sums(columns: Mapping[str, Column], strata: np.ndarray, n_strata: int,
                  n_resamples: int, seed: int, clusters: np.ndarray | None = None
                  ) -> SumTable:
    """Sums of `columns` per stratum on the sample and on `n_resamples` stratified resamples.

    `clusters` (an integer label per row; rows sharing one are one conversation): the
    resampling unit within a stratum is the cluster, drawn with replacement, each draw
    bringing all its rows; a stratum of singletons is drawn row by row as without it.
    Deterministic for a given seed and row order. Sample sums are float64; resampled sums
    float32 (counts are exact, the relative error ~1e-6 is far below any CI width).
    """
    if clusters is not None and np.shape(clusters) != np.shape(strata):
        raise ValueError(f"clusters has shape {np.shape(clusters)}, expected "
                         f"{np.shape(strata)} (one label per row)")
    # OpenBLAS threads spinning on a busy machine make these thin products 100x slower
    with threadpool_limits(limits=1, user_api="blas"):
        return _resample_sums(columns, strata, n_strata, n_resamples, seed, clusters)


def _resample_sums(columns: Mapping[str, Column], strata: np.ndarray, n_strata: int,
                   n_resamples: int, seed: int, clusters: np.ndarray | None = None
                   ) -> SumTable:
    names = tuple(columns)
    n = len(strata)
    keys = {}
    for name, col in columns.items():
        if col.shape != (n,):
            raise ValueError(f"column {name!r} has shape {col.shape}, expected ({n},)")
        keys[name] = _digest(col)
    unique: dict[bytes, str] = {}  # many calculators share a column (e.g. "both arms ok")
    for name, key in keys.items():
        unique.setdefault(key, name)
    kept = {name: columns[name] for name in unique.values()}
    table = _resample_unique(kept, strata, n_strata, n_resamples, seed, clusters)
    pick = [table.names.index(unique[keys[name]]) for name in names]
    return SumTable(names, table.point[:, pick], table.boot[:, :, pick])


def _resample_unique(columns: Mapping[str, Column], strata: np.ndarray, n_strata: int,
                     n_resamples: int, seed: int, clusters: np.ndarray | None = None
                     ) -> SumTable:
    names = tuple(columns)
    n = len(strata)
    dense, sparse = _split(columns, n)
    # the sparse columns only on the rows where one of them is not zero; the dense ones as
    # float32 one stratum at a time: a million rows never become a float64 matrix
    sparse_rows = np.unique(np.concatenate([_nonzero(columns[c]) for c in sparse])) \
        if sparse else np.zeros(0, dtype=np.int64)
    xs = np.column_stack([_values_at(columns[c], sparse_rows).astype(float) for c in sparse]) \
        if sparse else np.zeros((0, 0))
    xs32 = xs.astype(np.float32)
    bounds = np.searchsorted(strata, np.arange(n_strata + 1))
    point = np.zeros((n_strata, len(names)))
    boot = np.zeros((n_strata, n_resamples, len(names)))
    order = [names.index(c) for c in dense] + [names.index(c) for c in sparse]
    rng = np.random.default_rng(seed)
    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        for s in range(n_strata):
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            mine = (sparse_rows >= lo) & (sparse_rows < hi)
            # sample sums in float64, each column summed on its own
            point[s, order] = np.concatenate([
                [columns[c][lo:hi].sum(dtype=float) for c in dense], xs[mine].sum(axis=0)])
            if hi == lo:
                continue
            xd32 = np.empty((hi - lo, len(dense)), dtype=np.float32)
            for j, c in enumerate(dense):
                xd32[:, j] = columns[c][lo:hi]
            units = _units(clusters[lo:hi]) if clusters is not None else None
            boot[s][:, order] = _stratum(pool, rng, xd32, sparse_rows[mine] - lo, xs32[mine],
                                         n_resamples, units)
    return SumTable(names, point, boot)


def _workers() -> int:
    """Threads that count and multiply while this one draws: the draws, bincount and the
    products all release the GIL, so a second core halves the bootstrap's time."""
    return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def _units(labels: np.ndarray) -> np.ndarray | None:
    """Each row's cluster as 0..K-1 within the stratum; None when every row is its own."""
    _, inverse = np.unique(labels, return_inverse=True)
    return inverse if inverse.max(initial=-1) + 1 < len(labels) else None


def _stratum(pool: ThreadPoolExecutor, rng: np.random.Generator, xd32: np.ndarray,
             rows: np.ndarray, xs32: np.ndarray, n_resamples: int,
             units: np.ndarray | None = None) -> np.ndarray:
    """One stratum's resampled sums (B x k: the dense columns, then the sparse ones).

    The draws come in calls of `chunk` resamples, in order, from this thread (the seed's
    numbers depend on both); their counts are multiplied `batch` resamples at once (a wider
    product is several times faster per resample than a thin one). Counting and products
    run on `pool` meanwhile, into two alternating buffers: the numbers are the same as one
    thread's, each product being one thread's BLAS call on the same operands."""
    ns = len(xd32)
    drawn_from = ns if units is None else int(units.max()) + 1  # rows, or clusters
    out = np.empty((n_resamples, xd32.shape[1] + xs32.shape[1]))
    chunk = max(1, min(n_resamples, _CELLS_PER_CHUNK // ns))
    batch = chunk * max(1, min(-(-n_resamples // chunk), _CELLS_PER_BATCH // (chunk * ns)))
    buffers = [np.empty((min(batch, n_resamples), ns), dtype=np.float32) for _ in range(2)]
    products: list[Future | None] = [None, None]

    def count(drawn: np.ndarray, counts: np.ndarray, at: int) -> None:
        for i, row in enumerate(drawn, at):
            got = np.bincount(row, minlength=drawn_from)
            counts[i] = got if units is None else got[units]  # a cluster brings its rows

    def product(counts: np.ndarray, first: int, last: int) -> None:
        got = counts[:last - first]
        out[first:last] = np.concatenate([got @ xd32, got[:, rows] @ xs32], axis=1)

    for k, first in enumerate(range(0, n_resamples, batch)):
        last = min(first + batch, n_resamples)
        counts = buffers[k % 2]
        if products[k % 2] is not None:
            products[k % 2].result()  # its buffer's last product is done with it
        counting = []
        for start in range(first, last, chunk):
            drawn = rng.integers(0, drawn_from,
                                 size=(min(chunk, n_resamples - start), drawn_from))
            counting.append(pool.submit(count, drawn, counts, start - first))
            if len(counting) > 2:  # at most two chunks drawn ahead: memory stays bounded
                counting[-3].result()
        for job in counting:
            job.result()
        products[k % 2] = pool.submit(product, counts, first, last)
    for job in products:
        if job is not None:
            job.result()
    return out


def expanded(confidence: float, n: int) -> float:
    """The confidence whose percentile interval is Hesterberg's *expanded* percentile
    interval for n samples: z' = sqrt(n / (n - 1)) * t_{n-1}. The plain percentile
    interval is too narrow at small n (its coverage falls short of nominal); at n = 48
    and 95 % this asks for 95.8 %."""
    # scipy.stats' t.ppf and norm.cdf are these; scipy.special imports in a third the time
    from scipy.special import ndtr, stdtrit

    if n < 3:
        return confidence
    z = math.sqrt(n / (n - 1)) * stdtrit(n - 1, (1 + confidence) / 2)
    return float(2 * ndtr(z) - 1)


def percentile_ci(boot: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    """Percentile interval of resampled values; None when most resamples are undefined."""
    finite = boot[np.isfinite(boot)]
    if finite.size == 0 or finite.size * 2 < boot.size:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    return float(low), float(high)
