"""layergate exporters: pure metric calculators, statistics, and Prometheus / OTel export.

Calculators take plain frozen results (`ArmResult`); this package never imports torch or harness.
"""
