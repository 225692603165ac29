"""layergate exporters: pure metric calculators, statistics, and Prometheus / OTel export.

Calculators take plain frozen records; this package never imports torch or harness.
"""
