"""kerneljudge tasks lint: a task set's flaws that let a wrong kernel pass, found by running each reference."""

import json

import pytest

from helpers import FIXTURES, TASKS, malformed_family_task
from kerneljudge.cli import main

LINT = FIXTURES / "lint"


@pytest.fixture(scope="module")
def linted(tmp_path_factory):
    """One lint run over the fixture folder and a clean task, through the command line (CPU)."""
    folder = tmp_path_factory.mktemp("lint")
    out = folder / "lint.json"
    tasks = [str(TASKS / "tiny_bias_relu.py"), str(TASKS / "family_bias_relu.py"), str(malformed_family_task(folder))]
    code = main(["tasks", "lint", str(LINT), *tasks, "--device", "cpu", "--json", str(out)])
    report = json.loads(out.read_text())
    return code, {t["task"]: t for t in report["tasks"]}, report


def flags(task, severity="warning"):
    return sorted(f["id"] for f in task["flags"] if f["severity"] == severity)


def test_each_flaw_is_flagged_by_what_a_wrong_kernel_could_do(linted):
    code, tasks, _ = linted
    assert code == 2  # something is flagged
    assert flags(tasks["constant_output"]) == ["input_independent", "near_constant"]
    assert flags(tasks["near_zero_output"]) == ["near_zero"]
    assert flags(tasks["shape_only"]) == ["input_independent"]
    # differs from one input to the next in float32 rounding only: within KernelBench's check, not identical
    [cancels] = [f for f in tasks["cancels_out"]["flags"] if f["severity"] == "warning"]
    assert cancels["id"] == "input_independent" and 0 < cancels["evidence"]["max_diff"] <= 1e-3
    assert flags(tasks["unused_weight"]) == ["integer_inputs", "weights_unused"]
    [stochastic] = [f for f in tasks["dropout"]["flags"] if f["severity"] == "warning"]
    assert stochastic["id"] == "stochastic" and stochastic["evidence"]["mode"] == "training"  # eval mode is fine
    # the mask is a bool input (integer_inputs), and it never reaches the output
    assert flags(tasks["unused_input"]) == ["input_unused", "integer_inputs"]
    [unused] = [f for f in tasks["unused_input"]["flags"] if f["id"] == "input_unused"]
    assert unused["evidence"] == {"input": 1}


def test_outputs_that_differ_in_rounding_only_are_a_note_not_a_random_op(linted):
    """On an H200, lint called 19 ConvTranspose tasks of KernelBench stochastic: CUDA's kernels for them
    add in another order each run. A sum in a random order (the fixture) is told from dropout by how far the
    outputs move."""
    _, tasks, _ = linted
    task = tasks["reduction_order"]
    assert flags(task) == [] and task["clean"]
    [note] = [f for f in task["flags"] if f["id"] == "nondeterministic"]
    assert note["severity"] == "info" and note["evidence"]["mode"] == "eval"
    [gap] = note["evidence"]["differences"]
    assert 0 < gap["max_diff"] <= 1e-4 * gap["peak"]


def test_a_clean_task_passes_with_its_facts(linted):
    _, tasks, report = linted
    clean = tasks["bias_relu"]
    assert flags(clean) == [] and clean["clean"] and clean["error"] is None
    assert flags(clean, "info") == ["fixed_shape"]  # a note: only its public shape can be checked
    assert clean["facts"]["inputs"] == ["[16, 33] float32"] and clean["facts"]["parameters"] == 33
    assert clean["facts"]["device"] == "cpu" and clean["facts"]["device_us"] is None  # timed on CUDA only
    assert report["flagged"] == 9 and len(report["tasks"]) == 12


def test_a_shape_family_is_checked_at_its_shapes(linted):
    _, tasks, _ = linted
    family = tasks["family_bias_relu"]
    assert family["clean"] and family["flags"] == []  # no fixed_shape note: it declares its shapes
    facts = family["facts"]["shape_family"]
    assert facts["size"] == 16 and len(facts["checked"]) == 8 and facts["public"] == {"batch_size": 16, "width": 33}
    [broken] = [f for f in tasks["family_broken"]["flags"] if f["severity"] == "warning"]
    assert broken["id"] == "shape_family_broken" and "head_dim=63" in broken["summary"]
    assert "must be even" in broken["summary"] and len(broken["evidence"]["broken"]) == 1
    [malformed] = [f for f in tasks["family_malformed"]["flags"] if f["severity"] == "warning"]
    assert malformed["id"] == "shape_family_malformed" and "'widht'" in malformed["summary"]


def test_files_that_are_not_tasks_are_skipped_and_named(linted):
    _, tasks, report = linted
    assert "helpers_only" not in tasks
    [skipped] = report["skipped"]
    assert "helpers_only" in skipped and "does not define Model" in skipped


def test_a_missing_path_is_one_line(tmp_path, capsys):
    assert main(["tasks", "lint", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"kerneljudge: error: no such file or folder: {tmp_path / 'nowhere'}"


def test_a_task_that_cannot_run_is_an_error_not_a_crash(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "def get_inputs():\n    raise RuntimeError('no inputs today')\n\n\ndef get_init_inputs():\n    return []\n"
    )
    out = tmp_path / "lint.json"
    assert main(["tasks", "lint", str(broken), "--device", "cpu", "--json", str(out)]) == 2
    [task] = json.loads(out.read_text())["tasks"]
    assert "no inputs today" in task["error"] and not task["clean"]


def test_the_timing_pool_stays_in_the_reference_worker_that_lint_starts():
    """Lint's worker has no candidate's inbox: staging the timing pool (what the CUDA path does before it
    times the reference) keeps the inputs there. On an H200 every lint ended in "no writable channel
    'candidate_in'" before it did."""
    from kerneljudge.tasks.lint_reference import SEEDS, LintReference
    from kerneljudge.tasks.load import load_task

    reference = LintReference(load_task(TASKS / "tiny_bias_relu.py"), "cpu", 60.0)
    try:
        reference.load(SEEDS[0])
        staged = reference.stage()
    finally:
        reference.close()
    assert staged.sets == 1 and not staged.input_tensors


def test_a_lint_holds_device_memory_by_the_tasks_footprint_until_its_worker_is_closed():
    """Lints side by side on a GPU reserve what each will hold (gate.lint_need), known only once the worker
    has read the task's footprint; on an H200 twelve lints reserved by input size ran 6 GiB problems out of
    memory. The reservation is asked with that footprint and given back after the worker is gone."""
    import contextlib

    from kerneljudge.judgment.gate import GIB, lint_need
    from kerneljudge.tasks.lint import lint_task
    from kerneljudge.tasks.load import load_task

    asked = []

    @contextlib.contextmanager
    def admit(footprint):
        asked.append(dict(footprint, need=lint_need(footprint)))
        yield
        asked.append("released")

    result = lint_task(load_task(TASKS / "tiny_bias_relu.py"), "cpu", admit=admit)
    assert result.error is None and asked[-1] == "released" and len(asked) == 2
    footprint = asked[0]
    assert footprint["input_bytes"] > 0 and footprint["output_bytes"] > 0 and footprint["need"] > 3 * GIB
    # what the two 6 GiB elementwise lints that ran short held at least (GELU, Softsign: the working set twice)
    six = {"input_bytes": 6 * GIB, "output_bytes": 6 * GIB}
    assert lint_need({**six, "activation_bytes": 6 * GIB}) > 36.7 * GIB
    assert lint_need({**six, "activation_bytes": 12 * GIB}) > 48.7 * GIB


def test_sizes_a_derived_family_cannot_vary_are_noted_with_why(tmp_path):
    task = tmp_path / "viewed_rows.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\nbatch_size = 8\ndim = 256\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x.view(x.shape[0], 64, 4).softmax(-1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, dim)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    out = tmp_path / "lint.json"
    main(["tasks", "lint", str(task), "--device", "cpu", "--json", str(out)])
    [linted] = json.loads(out.read_text())["tasks"]
    [note] = [f for f in linted["flags"] if f["id"] == "fixed_sizes"]
    assert note["severity"] == "info" and list(note["evidence"]["fixed"]) == ["dim"]  # the batch varies
    assert "the reference failed" in note["summary"] and "shape '[8, 64, 4]' is invalid" in note["summary"]
    facts = linted["facts"]["shape_family"]
    assert facts["derived"] and facts["names"] == ["batch_size"] and facts["fixed"] == note["evidence"]["fixed"]
