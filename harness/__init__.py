"""layergate harness: traffic, capture, shadow replay, results store, gate, reports and the CLI.

Never imports torch: the replayer runs on load-generation machines with no model.
"""
