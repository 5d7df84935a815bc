"""Correctness inside the workers: what the reference worker makes, runs and measures for the parent to judge.

Mostly trusted code that runs where the task does (the reference worker); the candidate's worker runs `seeded.py`
(with the contracts it applies) and `perturb.py` too. The parent decides (judgment/stages/, checks/correctness.py).

- `trials.py`: a trial's inputs made from a seed, placed for the candidate, the reference and oracle run on them;
- `seeded.py`: a trial's inputs made from its seed, in the reference's worker and again in the candidate's;
- `oracle.py`: the reference and the float64 oracle run on a trial's inputs;
- `memo.py`: a group's reference keeps its trials' outputs for the group's next judgments;
- `outputs.py`: what is measured of outputs on the device: the oracle rounded, finiteness, signatures, statistics;
- `compare.py`: the candidate's outputs against a slot's reference and oracle, by the parent's tolerances;
- `contracts.py`: input contracts: which hidden distributions keep what a task's inputs guarantee (H11);
- `input_properties.py`: the properties of an input that a kernel may rely on, as the contracts read them;
- `family.py`: a task's declared shape family, read and applied where the task's code runs;
- `derived.py`: a shape family derived from a task's size globals, for a task that declares none;
- `perturb.py`: perturbed replays (CUDA only): the same call under other device conditions.
"""
