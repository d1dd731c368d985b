"""Job analytics on Spark (optional extra `shardq[pipeline]`): event logs -> per-tube metrics.

Only `main` and `metrics` import pyspark; `report` is plain Python over the small
aggregated result, so it can be tested and reused without a JVM.
"""
