"""The texts judged: a task and a candidate as loaded and content-hashed, never run in the parent.

- `task.py`: the trusted side: the task, a KernelBench-format reference, whatever format it came in;
- `candidate.py`: the untrusted side: the candidate's source, possibly inside a model's response;
- `pyast.py`: `ast.parse` (and `symtable`) behind one lock.
"""
