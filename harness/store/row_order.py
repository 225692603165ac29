"""A store's replay rows put, as they are read, in the order the figures align them
(`layergate.exporters.figures.aligned.align`): by arm, then by the request's scenario, then
by request id. Each arm's aligned columns are then slices of the columns read (views), not
copies: at a million requests, a GB less at once.

Only where align's order cannot differ: every request has one baseline row (align takes a
request's scenario from it, else from the request's first row in write order) and no
(request, arm) has two rows (align names the first written). The gaps stay where they were
read; the rows say where theirs start (`ResultColumns.itl_start`)."""

from __future__ import annotations

import numpy as np

from layergate.exporters.catalogue import BASELINE
from layergate.exporters.figures.columns import Factorised


def aligned_order(request: Factorised, arm: Factorised, scenario: Factorised
                  ) -> np.ndarray | None:
    """The rows' permutation into align's order; None where it cannot be known here or the
    rows are in it already."""
    n_requests, n_arms = len(request.values), len(arm.values)
    if BASELINE not in arm.values or not len(arm.codes):
        return None
    key = request.codes.astype(np.int64) * n_arms + arm.codes
    slots = np.full(n_requests * n_arms, -1, dtype=np.int64)
    slots[key] = np.arange(len(key))
    if (slots >= 0).sum() != len(key):  # a (request, arm) of two rows
        return None
    baseline = int(np.searchsorted(arm.values, BASELINE))
    held = slots.reshape(n_requests, n_arms)[:, baseline]
    if (held < 0).any():  # a request without a baseline row
        return None
    # requests by their baseline row's scenario, then by id (the codes sort as the names)
    position = np.empty(n_requests, dtype=np.int64)
    position[np.argsort(scenario.codes[held], kind="stable")] = np.arange(n_requests)
    ordered = np.full(n_arms * n_requests, -1, dtype=np.int64)
    ordered[arm.codes.astype(np.int64) * n_requests + position[request.codes]] = \
        np.arange(len(key))
    order = ordered[ordered >= 0]
    return None if (order == np.arange(len(order))).all() else order


def reordered(arrays: dict[str, np.ndarray], order: np.ndarray) -> None:
    """Each array's rows put in `order`, in place, a column at a time (no second copy of
    a whole table)."""
    for values in arrays.values():
        if values.ndim == 1:
            values[:] = values[order]
        else:
            for j in range(values.shape[1]):
                values[:, j] = values[order, j]
