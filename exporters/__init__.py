"""layergate's bottom layer, which the engine and the harness share and which imports
neither (nor torch). Two kinds of module:

- the shared vocabulary and formats: the catalogue of words (`catalogue.py`), the records
  the calculators take (`records.py`), the traffic format (`traffic.py`), the errors and
  their exit codes, the bundled data, the model's file locations, the option builder, the
  atomic writer;
- the exporters proper, which only publish figures: Prometheus gauges
  (`prometheus_export.py`, `capacity_export.py`, served by `metrics_server.py`), reading
  `/metrics` scrapes (`prom_text.py`), OpenTelemetry (`otel_export.py`, `otlp.py`).

The figures themselves are computed in their own room, `exporters/figures/`.
"""
