"""The replay-cost benchmark suite: ``python -m benchmarks`` (``--quick`` for a short run).

Parts: in-process round cost against k answered slots (:mod:`.replay_overhead`), whole
conversations (:mod:`.conversations`), HTTP end to end (:mod:`.http_throughput`), a
soak against ``--workers 2`` (:mod:`.soak`) and tasks (:mod:`.tasks`). Every timing is a
median of interleaved batches reported as a ratio against a baseline measured in the
same run; :mod:`.report` writes the tables of ``docs/performance.md`` and the plots.
"""
