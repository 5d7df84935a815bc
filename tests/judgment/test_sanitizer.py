"""compute-sanitizer on the CPU: its reports read from recorded text, the decision when it runs, the tool
found, the smallest shape chosen, and the run's steps with stand-in workers (tests/gpu/test_gpu_sanitizer.py
runs the real tool)."""

import os
import sys
from types import SimpleNamespace

import pytest

from helpers import CANDIDATES, EXAMPLES, FIXTURES, TASKS, hello_frame, run_judge
from kerneljudge import protocol
from kerneljudge.checks import sanitizer
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import ConfigError
from kerneljudge.judgment import sanitizer as sanitize
from kerneljudge.tasks.shapes import read_family
from kerneljudge.worker.correctness import perturb

WS = "/tmp/kerneljudge-candidate-k2x9"
EXT = f"{WS}/cache/torch_extensions/py312_cu130/kj_warp_race_rms_norm/cuda.cu"
SIGNATURE = "rms_norm_kernel(const float *, float *, int, float)"
LOGS = FIXTURES / "sanitizer"


def recorded(name: str) -> str:
    """A log in compute-sanitizer's format (tests/fixtures/sanitizer), in a workspace at WS."""
    return (LOGS / name).read_text().replace("{WS}", WS)


# Written after compute-sanitizer's documented output (analysis mode for racecheck; the current location form
# `kernel(args)+0xPC in file:line` and the older `0xPC in file:line:kernel(args)`); the racecheck log has the
# candidate's own lines ("PROBE ...") among the tool's.
RACECHECK = recorded("racecheck.log")

MEMCHECK = recorded("memcheck.log")

# The older form (location first, then file:line:kernel) and a torch kernel without line information.
OLD_MEMCHECK = recorded("memcheck_old_form.log")

INITCHECK = recorded("initcheck.log")

SYNCCHECK = recorded("synccheck.log")

HAZARD_MODE = recorded("racecheck_hazard_mode.log")


def run_of(tool, text, roots=(WS,)):
    parsed = sanitizer.parse(tool, text)
    return sanitizer.ToolRun(**{**parsed.__dict__, "roots": roots})


@pytest.mark.parametrize(
    "printed, bare",
    [
        (SIGNATURE, "rms_norm_kernel"),
        ("void ns::inner::k<256, float>(const float *, int)", "k"),
        ("void at::native::(anonymous namespace)::reduce_kernel<512, 1>(R)", "reduce_kernel"),
        ("_bias_relu_kernel", "_bias_relu_kernel"),
    ],
)
def test_bare_kernel_names(printed, bare):
    assert sanitizer.bare_name(printed) == bare


def test_both_location_forms_are_read():
    new = sanitizer.location(f"{SIGNATURE}+0x2f0 in {EXT}:38")
    assert (new.name, new.file, new.line) == ("rms_norm_kernel", EXT, 38)
    old = sanitizer.location("0x278 in /home/u/task1.cu:113:MatMulKernel(Matrix, Matrix, Matrix)")
    assert (old.name, old.file, old.line) == ("MatMulKernel", "/home/u/task1.cu", 113)
    bare = sanitizer.location("p10_shared_memory_race+0x140")
    assert (bare.name, bare.file, bare.line) == ("p10_shared_memory_race", None, None)


def test_a_race_report_names_both_accesses_the_lines_and_the_hazards():
    run = run_of("racecheck", RACECHECK)
    assert run.complete and (run.errors, run.warnings) == (1, 1)
    first, second = run.reports
    assert (first.kind, first.level, first.hazards) == ("race", "error", 992 + 64)
    assert [(w.name, w.line) for w in first.where] == [("rms_norm_kernel", 38), ("rms_norm_kernel", 39)] + [
        ("rms_norm_kernel", 39)
    ]
    assert (second.level, second.hazards) == ("warning", 31)
    found = sanitizer.findings_for([run], {"rms_norm_kernel"}, "practical")
    assert [(f.code, f.severity) for f in found] == [("KJ-R060", "error")]
    evidence = found[0].evidence
    assert evidence["count"] == 2 and evidence["hazards"] == 992 + 64 + 31 and evidence["summary_errors"] == 1
    assert evidence["reports"][0]["where"][0]["file"] == EXT and "H10" in evidence["attacks"]
    assert "rms_norm_kernel at cuda.cu:38" in found[0].summary
    failure = sanitizer.failure_for(found)
    assert failure.kind == "race" and failure.phase == "sanitizer" and failure.summary.startswith("KJ-R060")


def test_an_out_of_bounds_read_is_a_memory_error_and_api_errors_are_not_the_kernels():
    run = run_of("memcheck", MEMCHECK)
    access, api = run.reports
    assert (access.kind, api.kind) == ("access", "api") and run.errors == 2
    assert access.where[0].line == 12 and "0 bytes after the nearest allocation" in " ".join(access.detail)
    found = sanitizer.findings_for([run], set(), "strict")  # its source file lies in the workspace
    assert [(f.code, f.severity, f.evidence["count"]) for f in found] == [("KJ-R061", "error", 1)]
    assert sanitizer.failure_for(found).kind == "memory_error"


def test_reports_in_torchs_kernels_and_elsewhere_are_recorded_not_held_against_the_candidate():
    run = run_of("memcheck", OLD_MEMCHECK)
    torch_kernel, other = run.reports
    assert torch_kernel.where[0].name == "vectorized_elementwise_kernel" and torch_kernel.where[0].file is None
    assert (other.where[0].name, other.where[0].file, other.where[0].line) == ("MatMulKernel", "/home/u/task1.cu", 120)
    assert sanitizer.findings_for([run], {"my_kernel"}, "strict") == []
    assert sanitizer.summary([run], {"my_kernel"})["memcheck"]["status"] == "clean"
    assert sanitizer.summary([run], {"my_kernel"})["memcheck"]["other_reports"] == 2
    # A declared name claims the report even without a file: the candidate's kernel, built without line info.
    assert sanitizer.summary([run], {"MatMulKernel"})["memcheck"]["status"] == "reported"


@pytest.mark.parametrize(("policy", "severity"), [("strict", "warning"), ("practical", "info")])
def test_an_uninitialised_read_never_fails_a_candidate(policy, severity):
    run = run_of("initcheck", INITCHECK)
    found = sanitizer.findings_for([run], {"_row_sum_kernel"}, policy)
    assert [(f.code, f.severity) for f in found] == [("KJ-R062", severity)]
    assert sanitizer.failure_for(found) is None and run.errors == 33


def test_a_barrier_error_and_the_hazard_form_of_racecheck():
    sync = run_of("synccheck", SYNCCHECK, roots=())
    found = sanitizer.findings_for([sync], {"tail_kernel"}, "practical")
    assert [f.code for f in found] == ["KJ-R063"] and sanitizer.failure_for(found).kind == "race"
    hazard = run_of("racecheck", HAZARD_MODE, roots=())
    (report,) = hazard.reports
    assert report.kind == "hazard" and [w.name for w in report.where] == ["race_kernel", "race_kernel"]
    assert sanitizer.findings_for([hazard], {"race_kernel"}, "strict")[0].code == "KJ-R060"


def test_a_race_wins_over_a_memory_error_as_the_failure():
    runs = [run_of("memcheck", MEMCHECK), run_of("racecheck", RACECHECK)]
    found = sanitizer.findings_for(runs, {"rms_norm_kernel"}, "practical")
    assert [f.code for f in found] == ["KJ-R061", "KJ-R060"] and sanitizer.failure_for(found).kind == "race"


def test_a_run_without_a_summary_is_inconclusive_and_a_clean_one_clean():
    cut = run_of("racecheck", "========= COMPUTE-SANITIZER\n")
    assert not cut.complete and sanitizer.status(cut, set()) == "inconclusive"
    clean = run_of("racecheck", "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    assert clean.complete and sanitizer.status(clean, set()) == "clean"
    forged = run_of("memcheck", "Invalid __global__ read of size 4 bytes\n========= ERROR SUMMARY: 0 errors\n")
    assert forged.reports == ()  # a line without the tool's prefix is the candidate's


# ------------------------------------------------------------------ when it runs


def decide(path="/usr/local/cuda/bin/compute-sanitizer", device="cuda", kinds=("cuda",), source="", **config):
    declared = [{"name": f"k{i}", "kind": kind} for i, kind in enumerate(kinds)]
    return sanitize.decide(JudgeConfig(**config), device, declared, source, path)


def test_where_the_machine_cannot_it_is_unavailable_and_nothing_runs():
    cpu = decide(device="cpu")
    assert not cpu.run and cpu.capability.status == "unavailable" and cpu.capability.detail == "needs CUDA"
    missing = decide(path=None)
    assert not missing.run and missing.capability.status == "unavailable" and "not found" in missing.reason


@pytest.mark.parametrize(
    ("kinds", "source", "config", "runs"),
    [
        (("cuda", "cuda_source"), "", {"mode": "enforce"}, True),
        (("cuda",), "", {"mode": "audit", "policy": "practical"}, True),
        (("cuda_source",), "", {"mode": "off"}, False),
        (("cuda",), "", {"mode": "enforce", "sanitizer": "off"}, False),
        (("triton",), "", {"mode": "enforce"}, True),  # strict, the default policy
        (("triton",), "", {"mode": "enforce", "policy": "practical"}, False),
        (("triton",), "", {"mode": "enforce", "policy": "strict", "sanitizer_triton": False}, False),
        (("triton",), "", {"mode": "audit", "policy": "practical", "sanitizer_triton": True}, True),
        (("triton",), "", {"mode": "off"}, False),
        (("triton",), "tl.inline_asm_elementwise(...)", {"mode": "audit"}, True),
        ((), "", {"mode": "audit", "sanitizer": "always"}, True),
        ((), "", {"mode": "off", "sanitizer": "always"}, False),
    ],
)
def test_when_it_runs(kinds, source, config, runs):
    decision = decide(kinds=kinds, source=source, **config)
    assert decision.run is runs and decision.capability.status == "available", decision
    assert decision.capability.detail.startswith("/usr/local/cuda/bin/compute-sanitizer; ")


def test_a_triton_only_candidate_under_strict_runs_memcheck_and_synccheck_and_says_why():
    strict = decide(kinds=("triton",), mode="enforce", policy="strict")
    assert strict.run and strict.tools == sanitize.TRITON_TOOLS == ("memcheck", "synccheck")
    assert strict.reason.startswith("Triton kernels under strict") and "racecheck" in strict.reason
    assert strict.reason in strict.capability.detail
    asked = decide(kinds=("triton",), mode="audit", policy="practical", sanitizer_triton=True)
    assert asked.run and asked.tools == sanitize.TRITON_TOOLS and asked.reason.startswith("Triton kernels (sanitizer")
    practical = decide(kinds=("triton",), mode="enforce", policy="practical")
    assert not practical.run and "under strict or with sanitizer_triton" in practical.reason
    # Custom CUDA beside Triton, or a candidate with no kernel of its own under "always": every tool.
    assert decide(kinds=("triton", "cuda"), mode="enforce").tools == sanitizer.TOOLS
    assert decide(kinds=(), mode="enforce", sanitizer="always").tools == sanitizer.TOOLS
    assert decide(kinds=("triton",), mode="enforce", sanitizer="always").tools == sanitize.TRITON_TOOLS


def test_the_configuration_checks_its_sanitizer_settings():
    with pytest.raises(ConfigError, match="sanitizer must be one of"):
        JudgeConfig(sanitizer="sometimes")
    with pytest.raises(ConfigError, match="sanitizer_timeout_s must be positive"):
        JudgeConfig(sanitizer_timeout_s=0)
    assert JudgeConfig().to_dict()["sanitizer"] == "auto"


def test_the_tool_is_found_on_path_under_cuda_home_or_next_to_nvcc(tmp_path):
    def tool(folder, name="compute-sanitizer"):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path

    on_path = tool(tmp_path / "a" / "bin")
    assert sanitize.find_sanitizer({"PATH": str(on_path.parent)}, (), False) == os.path.realpath(on_path)
    home = tmp_path / "cuda-12.8"
    in_home = tool(home / "compute-sanitizer")
    assert sanitize.find_sanitizer({"CUDA_HOME": str(home)}, (), False) == os.path.realpath(in_home)
    nvcc = tool(home / "bin", "nvcc")
    assert sanitize.find_sanitizer({"PATH": str(nvcc.parent)}, (), False) == os.path.realpath(in_home)
    assert sanitize.find_sanitizer({"PATH": ""}, (str(home),), False) == os.path.realpath(in_home)
    assert sanitize.find_sanitizer({"PATH": ""}, (), False) is None


def test_the_smallest_shape_the_candidate_was_right_at_is_chosen():
    family = read_family(
        {"shapes": [{"batch_size": 3, "dim": 100}], "public": {"batch_size": 64, "dim": 4096}, "derived": ["dim"]}
    )
    small, large = {"batch_size": 3, "dim": 100}, {"batch_size": 65, "dim": 4100}
    assert sanitize.smallest_shape(family, [large, small]) == small
    assert sanitize.smallest_shape(family, [large]) is None  # the public shape
    assert sanitize.smallest_shape(None, [small]) is None
    tuples = read_family({"shapes": [{"SHAPE": {"tuple": [2, 3]}}], "public": {"SHAPE": {"tuple": [16, 33]}}})
    assert sanitize.smallest_shape(tuples, [{"SHAPE": {"tuple": [2, 3]}}]) == {"SHAPE": {"tuple": [2, 3]}}


def test_the_tool_wraps_the_worker_with_a_short_report():
    prefix = sanitize.argv_prefix("/opt/cuda/bin/compute-sanitizer", "racecheck")
    assert prefix[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    assert "--print-limit" in prefix and "--show-backtrace" in prefix
    assert sanitize.SANITIZED_ENV["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"


WRITES_AT_IMPORT = """import os, torch
try:
    with open(f"written-{os.getpid()}", "w") as f:
        f.write("x")
    print("WROTE")
except OSError as exc:
    print("REFUSED", exc.strerror)
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
"""


def test_a_sanitized_worker_shares_the_checked_workers_workspace_and_uid_and_leaves_both_to_it():
    """Where the checked worker built a torch extension, the sanitized ones find it up to date: the same
    folder, the same build flags, the same uid (the launcher hands the workspace to the worker's uid, so a
    uid of its own would take the checked worker's own files from it); closing one removes and gives back
    nothing the checked worker still uses."""
    from kerneljudge.sandbox import plan
    from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
    from kerneljudge.sandbox.talk import WorkerChannels

    def load(worker):
        return worker.request(protocol.Load(seed=0), [], timeout_s=120)[0].kind

    limits = WorkerLimits()
    checked = WorkerProcess("candidate", "cpu", WRITES_AT_IMPORT, limits, channels=WorkerChannels("candidate", 2**20))
    try:
        assert checked.receive(timeout_s=120)["type"] == "hello"
        start = sanitize.starter(
            "/bin/true", WRITES_AT_IMPORT, limits, checked.policy, None, checked.channels, 60.0, sharing=checked
        )
        started = start("racecheck")  # the tool here is /bin/true: the worker ends at once
        assert started.workspace is checked.workspace and started.uid == checked.uid
        assert "racecheck" in started.proc.args
        started.close()
        shared = WorkerProcess(
            "candidate",
            "cpu",
            WRITES_AT_IMPORT,
            limits,
            channels=checked.channels.duplicate(),
            extra_env=sanitize.SANITIZED_ENV,
            sharing=checked,
        )
        env, own = shared._env("cuda", None), checked._env("cuda", None)
        assert env["TORCH_EXTENSIONS_DIR"] == own["TORCH_EXTENSIONS_DIR"]
        assert env["NVCC_APPEND_FLAGS"] == own["NVCC_APPEND_FLAGS"] == "-lineinfo"
        assert env["KJ_WORKER_TEARDOWN"] == "1" and "KJ_WORKER_TEARDOWN" not in own
        assert shared.receive(timeout_s=120)["type"] == "hello" and load(shared) == "loaded"
        shared.close()
        assert checked.workspace.root.is_dir()
        if checked.uid is not None:
            assert checked.uid in plan._uids_in_use
        assert load(checked) == "loaded"  # and its import could still write where it works
    finally:
        checked.close()
    assert shared.stdout.text().split() == ["WROTE"] and checked.stdout.text().split() == ["WROTE"]
    assert not checked.workspace.root.exists()


# ------------------------------------------------------------------ the run, with stand-in workers


class FakeWorker:
    """Answers like a sanitized worker; prints `report` as the tool would once asked to exit."""

    def __init__(self, tool, log, report, fail_at=None):
        self.tool, self.log, self.report, self.fail_at = tool, log, report, fail_at
        self.printed = ""
        self.workspace = SimpleNamespace(root=WS)
        self.proc = SimpleNamespace(wait=lambda timeout: 0)
        self.stdout = SimpleNamespace(text=lambda: self.printed)

    def receive(self, timeout_s=None):
        self.log.append((self.tool, "hello"))
        return hello_frame().header()

    def request(self, request, placed=None, fetch=(), timeout_s=None):
        self.log.append((self.tool, request.op, placed))
        if request.op == self.fail_at:
            message = "CUDA error: unspecified launch failure"
            return protocol.Error(phase=request.op, exc_type="RuntimeError", message=message), {}
        if request.op == "load":
            return protocol.Loaded(evidence={}), {}
        return protocol.Output(container="Tensor", items=[], evidence={}), {}

    def ask_exit(self):
        self.printed = self.report

    def close(self):
        self.log.append((self.tool, "closed"))


def test_every_tool_builds_before_the_inputs_are_made_and_calls_after():
    log = []
    reports = {"racecheck": RACECHECK, "memcheck": MEMCHECK}

    def start(tool):
        clean = "========= ERROR SUMMARY: 0 errors\n"
        return FakeWorker(tool, log, reports.get(tool, clean), fail_at="call" if tool == "memcheck" else None)

    def make_inputs():
        log.append(("reference", "trial"))
        return protocol.Call(call_seed=7), ("tree", {"x": {}})

    runs, workers = sanitize.run_tools(start, protocol.Load(seed=42), ("init", {}), make_inputs, 60.0)
    order = [entry[1] for entry in log]
    assert order.index("trial") > max(i for i, op in enumerate(order) if op == "load")
    assert order.index("trial") < min(i for i, op in enumerate(order) if op == "call")
    assert all(entry[2] == ("tree", {"x": {}}) for entry in log if entry[1] == "call")
    assert set(workers) == set(sanitizer.TOOLS) and order.count("closed") == 4
    found, kept, failure, capability = sanitize.conclude(runs, {"rms_norm_kernel"}, "practical", "/cs", "here")
    assert {f.code for f in found} == {"KJ-R060", "KJ-R061"} and failure.kind == "race"
    assert kept["tools"]["memcheck"]["problem"].startswith("call: RuntimeError")
    assert kept["tools"]["initcheck"]["status"] == "clean" and capability.status == "available"


def test_a_tool_that_could_not_start_leaves_the_others_running_and_the_capability_degraded():
    log = []

    def start(tool):
        if tool == "racecheck":
            raise OSError("exec format error")
        return FakeWorker(tool, log, "========= ERROR SUMMARY: 0 errors\n")

    runs, workers = sanitize.run_tools(start, protocol.Load(seed=0), None, lambda: (protocol.Call(), ([], {})), 60.0)
    assert "racecheck" not in workers and len(workers) == 3
    capability = sanitize.outcome(runs, set(), "/cs", "the public shape")
    assert capability.status == "degraded" and "racecheck: start: exec format error" in capability.detail


def test_a_sanitized_log_keeps_its_end_for_the_record():
    worker = SimpleNamespace(
        logs=lambda: {
            "stdout_tail": "x" * 100 + "ERROR SUMMARY: 0 errors",
            "stdout_bytes": 123,
            "stderr_tail": "",
            "stderr_bytes": 0,
            "truncated": False,
            "sandbox_layers": {},
            "workspace_changes": None,
        }
    )
    log = sanitize.kept_log(worker, 30)
    assert log.truncated and log.stdout_tail.endswith("ERROR SUMMARY: 0 errors") and "dropped" in log.stdout_tail


def test_perturbations_do_nothing_on_the_cpu():
    worker = SimpleNamespace(device=SimpleNamespace(type="cpu"))
    with perturb.perturbed(worker, {"kind": "gpu_load", "side": 64}, 0.01) as done:
        assert done == {}


def test_a_candidate_judged_on_the_cpu_says_why_the_tool_did_not_run():
    record = run_judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "honest_torch.py", mode="enforce")
    capability = record.capabilities["compute_sanitizer"]
    assert (capability.status, capability.detail) == ("unavailable", "needs CUDA")
    assert record.correctness.sanitizer is None and record.status == "PASS"
    assert not any("perturbation" in entry for entry in record.correctness.replay["trials"])


# ------------------------------------------------------------------ the whole path, with a stand-in tool

STAND_IN_TOOL = """#!{python}
# A stand-in for compute-sanitizer: runs the worker it wraps, then prints what the tool named in RACE_IN
# would have found in that kernel (racecheck only), and the summary.
import subprocess, sys
args = sys.argv[1:]
tool = args[args.index("--tool") + 1]
code = subprocess.call(args[args.index("--show-backtrace") + 2 :], close_fds=False)
print("========= COMPUTE-SANITIZER", flush=True)
kernel = {race!r}
if tool == "racecheck" and kernel:
    print(f"========= Error: Race reported between Write access at {{kernel}}()+0x10 in /k.py:12")
    print(f"=========     and Read access at {{kernel}}()+0x20 in /k.py:13 [64 hazards]")
    print("========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)")
else:
    print("========= ERROR SUMMARY: 0 errors")
sys.exit(code)
"""


@pytest.fixture
def stand_in_tool(tmp_path, monkeypatch):
    """Judgments on the CPU that run the sanitizer stage with a stand-in tool, on a folder the sandbox binds
    back (PYTHONPATH's folders are needed paths); returns a function that makes the tool report a race."""
    from kerneljudge.judgment import pipeline
    from kerneljudge.results.verdict import Capability

    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))

    def make(race=""):
        tool = folder / "compute-sanitizer"
        tool.write_text(STAND_IN_TOOL.format(python=sys.executable, race=race))
        tool.chmod(0o755)
        decision = sanitize.Decision(
            True, "test", Capability(status="available", required=False, detail="test"), str(tool)
        )
        monkeypatch.setattr(pipeline.Judgment, "_sanitizer_decision", lambda self: decision)

    return make


TRITON_SOFTMAX = EXAMPLES / "softmax"


def test_the_stage_runs_four_sandboxed_workers_beside_the_checked_one_and_reads_their_summaries(stand_in_tool):
    stand_in_tool()
    record = run_judge(TRITON_SOFTMAX / "reference.py", TRITON_SOFTMAX / "candidate_triton.py", mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, record.findings)
    ran = record.correctness.sanitizer
    assert {tool: t["status"] for tool, t in ran["tools"].items()} == dict.fromkeys(sanitizer.TOOLS, "clean"), ran
    assert ran["shape"] is not None and ran["seconds"] > 0  # the smallest shape it was right at: a derived one
    assert {f"candidate_{tool}" for tool in sanitizer.TOOLS} <= set(record.logs)
    assert record.capabilities["compute_sanitizer"].status == "available"


def test_a_race_in_the_candidates_own_kernel_fails_it_with_its_lines(stand_in_tool):
    stand_in_tool(race="_softmax_row_kernel")
    record = run_judge(TRITON_SOFTMAX / "reference.py", TRITON_SOFTMAX / "candidate_triton.py", mode="enforce")
    assert record.status == "FAIL" and record.failure.kind == "race", record.failure
    found = [f for f in record.findings if f.code == "KJ-R060"]
    assert found and found[0].severity == "error", record.findings
    assert record.correctness.sanitizer["tools"]["racecheck"]["status"] == "reported"


def test_a_race_in_a_kernel_not_its_own_is_recorded_and_not_held_against_it(stand_in_tool):
    stand_in_tool(race="at::native::vectorized_elementwise_kernel")
    record = run_judge(TRITON_SOFTMAX / "reference.py", TRITON_SOFTMAX / "candidate_triton.py", mode="enforce")
    assert record.status == "PASS" and record.verified, (record.failure, record.findings)
    assert not [f for f in record.findings if f.code == "KJ-R060"]
