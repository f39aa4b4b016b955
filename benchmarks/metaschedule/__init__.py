"""The MetaSchedule benchmarks: the simulator as MetaSchedule's cost model.

    python -m benchmarks.metaschedule.features ...   candidates scored per second (featurizing and
                                                     scoring speed, two-stage filter), beside TVM's own
    python -m benchmarks.metaschedule.tuning ...     held-out operators tuned with each cost model:
                                                     best latency against trials, rank quality
    python -m benchmarks.metaschedule.replay ...     the gnn's online phase replayed offline on the
                                                     networks dataset (no kernel timed)
    python -m benchmarks.metaschedule.networks ...   whole networks tuned with each cost model, timed
                                                     end to end

`tuning`, `replay` and `networks` are also stages of `python -m benchmarks.all` (`ms-tuning`,
`ms-replay`, `ms-networks`) and write their sections of docs/RESULTS.md (`benchmarks.report`).
"""
