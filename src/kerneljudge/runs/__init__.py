"""Many judgments: batches into a results store, confirmations, evidence bundles, KernelBench's files (docs/batch.md).

- `batch.py`: many candidates, one after another, into a results store; a rerun resumes;
- `progress.py`: a batch's progress as it is shown: live counts with an ETA, and its stage log;
- `confirm.py`: `kerneljudge confirm`: a candidate re-measured in fresh process pairs, its claim labelled;
- `bundle.py`: evidence bundles: a store's records with the exact sources they judged, checkable by anyone;
- `kernelbench_runs.py`: KernelBench's run folders, `eval_results.json` and parquet problems, read and written;
- `backends/`: where judgments run: lanes in this process, or an actor per GPU of a Ray cluster.
"""
