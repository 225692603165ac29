"""Rigs the benchmarks and the tests share: a run written from synthetic records, a proxy
that delays an arm, the real-engine watch rig, and the small replay traffic; and, for the
benchmarks only, a probe of what Locust's processes spend (`locust_probe`)."""
