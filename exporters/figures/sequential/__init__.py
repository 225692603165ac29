"""Anytime-valid intervals: confidence sequences that may be looked at after every sample.

A fixed-sample 95 % CI checked after each new request and acted on the first time it
excludes "no difference" is wrong far more than 5 % of the time. A confidence sequence
(CS) bounds the error over *all* looks at once: with probability >= 1 - alpha the true
value lies inside the interval at every n simultaneously, so a sequential gate may stop
the first time an interval clears a threshold.

One interface, one family: a path is (estimate, low, high) arrays after each observation,
the last look a `SequenceBound`; `intersected` watches a path. The methods, by what the
observations are:

- `betting`: bounded observations (a share: exact match, termination accuracy; a paired
  difference of shares): exact at every n.
- `t_mixture`: near-Gaussian observations with unknown variance (log latency ratios, per
  request or per live window): exact under Gaussianity from the second observation.
- `binomial`: a Bernoulli rate from counts (errors per request in live windows): exact.
- `normal_mixture`: any mean, or smooth function of means by the delta method (RER, chrF):
  asymptotic, so acted on only after a minimum count.
"""

from layergate.exporters.figures.sequential.betting import bounded_mean_path, bounded_mean_sequence
from layergate.exporters.figures.sequential.binomial import (
    binomial_sequence,
    rate_difference_sequence,
)
from layergate.exporters.figures.sequential.bound import SequenceBound, intersected
from layergate.exporters.figures.sequential.normal_mixture import (
    linearised_path,
    mean_path,
    mean_sequence,
    mixture_rho,
    radius_factor,
    ratio_path,
)
from layergate.exporters.figures.sequential.t_mixture import (
    t_factor,
    t_mean_path,
    t_mean_sequence,
    t_mixture_tau2,
    windows_needed,
)

__all__ = ["SequenceBound", "binomial_sequence", "bounded_mean_path", "bounded_mean_sequence",
           "intersected", "linearised_path", "mean_path", "mean_sequence", "mixture_rho",
           "radius_factor", "rate_difference_sequence", "ratio_path", "t_factor",
           "t_mean_path", "t_mean_sequence", "t_mixture_tau2", "windows_needed"]
