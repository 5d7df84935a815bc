"""Timing in the parent: the workers report per-call times (worker/timing/); here they are paired, checked, decided.

- `basic.py`: interleaved block timing of candidate and reference, each in its own worker;
- `plan.py`: what a timing is asked to do: the method, the launch regime, the counts and bounds;
- `sides.py`: what passes between the timer and a side: requests for samples, samples, a side reused;
- `calibration.py`: a side's calibration: calls a sample, and the GPU-busy precursor's length;
- `stopping.py`: when to stop timing: enough precision, or a bound reached;
- `stats.py`: robust statistics of raw timing samples; every figure derives from the kept samples;
- `figures.py`: the record's figures beyond the statistics: busy time, several shapes as one;
- `drain.py`: the device-wide bracket of a timed sample: no timing reports less device time than every stream took;
- `crosscheck.py`: the parent's clock against the candidate worker's claimed times (H30);
- `clocks.py`: the GPU's clocks around timing blocks, read through NVML;
- `ladder.py`: the claim ladder: how far a verified candidate's speedup claim goes.
"""
