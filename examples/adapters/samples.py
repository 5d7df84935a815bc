"""The rows the adapter examples score: the elementwise example's task, and three model responses to it.

The task travels as its source text (the judge is sent `task_source`); a built-in task would travel as its
id, e.g. "builtin:softmax_fp32". The responses: an honest Triton kernel, a wrong one, an empty answer.
"""

from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "elementwise"
TASK = (EXAMPLE / "reference.py").read_text()
PROMPT = "Write a faster ModelNew for this architecture with a custom Triton kernel:\n\n" + TASK


def response(candidate: str) -> str:
    return f"Here is my kernel:\n\n```python\n{(EXAMPLE / candidate).read_text()}```\n"


RESPONSES = [response("candidate_triton.py"), response("candidate_wrong.py"), ""]
OPTIONS = {"timing": False}  # correctness only: quick on a CPU; leave it out on a GPU to reward speed
