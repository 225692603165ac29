"""`layergate watch`: live canary analysis of a staged rollout from Prometheus.

`config.WatchConfig` holds the configuration and `loop.prepare` checks it; `loop.run_watch`
reads a window at a time (`source`), decides (`stages`), runs the hooks (`hooks`) and
publishes (`board`, `exposition`, `server`). The figures and their statistics are
`layergate.exporters.figures.canary`.
"""
