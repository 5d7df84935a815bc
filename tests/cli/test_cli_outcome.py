"""What `judge` prints last, each command's exit codes in its help, and `env`'s table: the verdict line is on
stdout whatever the status and stands alone under --quiet; a command's help lists the codes that command
returns; `env` prints grouped rows (its --json the same report as JSON)."""

import json
import subprocess
import sys

import pytest

from helpers import CANDIDATES, TASKS, make_record
from kerneljudge.cli import COMMANDS, EXIT_CODES, main
from kerneljudge.cli.info import env_table
from kerneljudge.cli.usage import EXIT_CODES_OF, exit_codes_help
from kerneljudge.results.verdict import Capability, Failure, Finding

TASK, CANDIDATE = str(TASKS / "tiny_bias_relu.py"), str(CANDIDATES / "honest_torch.py")

# One record of each status, as judge() returns it, and what its standalone line must say.
RECORDS = {
    "PASS": (make_record(speedup=2.0), ("PASS: verified", "speedup 2x [1.5, 2.5]")),
    "FAIL": (
        make_record(
            status="FAIL",
            failure=Failure(
                kind="tolerance",
                phase="correctness (hidden trial 3)",
                summary="12 of 528 elements outside tolerance\n(max abs error 0.5)",
            ),
        ),
        ("FAIL: tolerance in correctness (hidden trial 3): 12 of 528 elements outside tolerance (max abs error 0.5)",),
    ),
    "SUSPICIOUS": (
        make_record(
            status="SUSPICIOUS",
            findings=[
                Finding(code="KJ-S002", detector="preflight", severity="warning", summary="changes global flags")
            ],
        ),
        ("SUSPICIOUS: correct, not verified: finding KJ-S002: changes global flags",),
    ),
    "UNSUPPORTED": (
        make_record(
            status="UNSUPPORTED",
            capabilities={
                "cuda_runtime": Capability(status="unavailable", required=True, detail="no CUDA device visible")
            },
        ),
        ("UNSUPPORTED: missing cuda_runtime (no CUDA device visible)",),
    ),
    "ERROR": (
        make_record(
            status="ERROR",
            failure=Failure(kind="judge_error", phase="build", summary="the reference worker died: signal 9"),
        ),
        ("ERROR: judge_error in build: the reference worker died: signal 9",),
    ),
}


@pytest.fixture
def judged(monkeypatch):
    """`judge` answering with the record of the status asked, without judging anything."""

    def choose(status):
        monkeypatch.setattr("kerneljudge.judgment.pipeline.judge", lambda *args, **kwargs: RECORDS[status][0])

    return choose


@pytest.mark.parametrize("status", list(RECORDS))
def test_the_quiet_line_is_on_stdout_and_stands_alone_whatever_the_status(status, judged, capsys):
    judged(status)
    assert main(["judge", TASK, CANDIDATE, "--quiet"]) == EXIT_CODES[status]
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith(f"{status}: "), out  # `out=$(kerneljudge judge ... --quiet)`
    for said in RECORDS[status][1]:
        assert said in out
    assert "above" not in out and err == ""


@pytest.mark.parametrize("status", ["FAIL", "UNSUPPORTED"])
def test_the_full_output_ends_with_the_verdict_line_on_stdout_and_the_hint_on_stderr(status, judged, capsys):
    judged(status)
    assert main(["judge", TASK, CANDIDATE]) == EXIT_CODES[status]
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == RECORDS[status][1][0]
    assert err.startswith("next: ") and status not in err


def test_a_cpu_speedup_says_it_is_not_a_gpu_speedup(judged, capsys):
    judged("PASS")
    main(["judge", TASK, CANDIDATE, "--quiet"])
    assert "(CPU timings, not a GPU speedup)" in capsys.readouterr().out


def test_a_real_failure_is_captured_by_command_substitution():
    done = subprocess.run(
        [sys.executable, "-m", "kerneljudge", "judge", TASK, str(CANDIDATES / "wrong_values.py")]
        + ["--device", "cpu", "--no-timing", "--policy", "practical", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.startswith("FAIL: tolerance in correctness") and done.stdout.count("\n") == 1, done.stdout
    assert "elements outside tolerance" in done.stdout


def helps() -> list[list[str]]:
    """Every command and sub-command as typed, the program itself first."""
    return [[]] + [[name] for name in COMMANDS if name != "tasks"] + [["tasks", w] for w in ("list", "show", "lint")]


def help_of(words: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([*words, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("words", helps(), ids=lambda words: " ".join(words) or "kerneljudge")
def test_each_help_ends_with_the_exit_codes_of_its_own_command(words, capsys):
    text = help_of(words, capsys)
    assert text.rstrip().endswith(exit_codes_help(EXIT_CODES_OF[" ".join(words)]))
    codes = {code for code, _ in EXIT_CODES_OF[" ".join(words)]}
    assert 1 in codes
    if words not in ([], ["judge"]):
        assert 3 not in codes and "UNSUPPORTED" not in text.split("exit codes:")[-1]  # judge's alone


@pytest.mark.parametrize(
    "words, codes",
    [
        (["judge"], {0, 1, 2, 3}),
        (["export"], {0, 1}),
        (["verify"], {0, 1, 2}),
        (["confirm"], {0, 1, 2}),
        (["redteam"], {0, 1, 2}),
        (["generate"], {0, 1}),
        (["improve"], {0, 1, 2}),
        (["tasks", "lint"], {0, 1, 2}),
        (["env"], {0, 1}),
    ],
)
def test_a_help_lists_the_codes_its_command_returns(words, codes, capsys):
    table = help_of(words, capsys).split("exit codes:")[-1]
    assert {int(line.split()[0]) for line in table.splitlines() if line.startswith("  ") and line[2].isdigit()} == codes


REPORT = {
    "kerneljudge": "0.3.18",
    "python": "3.11.7",
    "torch": "2.5.0",
    "cuda_available": True,
    "gpu_name": "NVIDIA H100",
    "gpu_capability": [9, 0],
    "gpu_memory_bytes": 80 * 2**30,
    "l2_cache_bytes": 50 * 2**20,
    "driver": None,
    "flags": {"cudnn_benchmark": False},
    "namespaces": {"user": True, "pid": False},
    "sandbox": {"seccomp": "in_force: 32 syscalls answer EPERM", "allowlist_root": "in_force: " + "/usr (ro), " * 30},
    "sandbox_cuda_workers": "the same layers",
    "compute_sanitizer": "/usr/local/cuda/bin/compute-sanitizer",
    "clock_monitor": "nvml (1980 MHz now)",
    "something_new": 7,
}


def test_env_prints_a_grouped_table_and_json_prints_the_report(monkeypatch, capsys):
    monkeypatch.setattr("kerneljudge.judgment.env.report", lambda: REPORT)
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "True" not in out and "None" not in out  # no Python dict, no Python literals
    lines = out.splitlines()
    titles = [line for line in lines if line and not line.startswith(" ")]
    assert titles == ["software", "GPU", "numerics flags (as a worker sees them)", "sandbox", "tools", "other"]
    rows = {line.split()[0]: line.split(None, 1)[1] for line in lines if line.startswith("  ")}
    assert rows["gpu_memory_bytes"] == f"80.0 GiB ({80 * 2**30} bytes)" and rows["gpu_capability"] == "9.0"
    assert rows["namespaces.pid"] == "no" and rows["driver"] == "-" and rows["something_new"] == "7"
    assert rows["sandbox.seccomp"] == REPORT["sandbox"]["seccomp"]  # a pipe gets every value whole, on one line
    at = {line.split()[0]: i for i, line in enumerate(lines) if line}
    assert at["software"] < at["torch"] < at["GPU"] < at["gpu_name"] < at["numerics"] < at["flags.cudnn_benchmark"]
    assert at["sandbox"] < at["namespaces.user"] < at["sandbox.seccomp"] < at["tools"] < at["compute_sanitizer"]
    assert main(["env", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == REPORT


def test_env_wraps_a_long_value_under_its_column_on_a_terminal():
    lines = env_table(REPORT, width=80).splitlines()
    assert max(map(len, lines)) <= 80
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("sandbox.allowlist_root"))
    column = lines[start].index("in_force")
    assert lines[start + 1][:column].strip() == "" and lines[start + 1][column:].startswith("/usr (ro)")
    assert " ".join(line[column:].strip() for line in lines[start : start + 5]).startswith("in_force: /usr (ro),")


def test_the_docs_table_of_exit_codes_is_each_commands_help():
    from helpers import ROOT

    section = (ROOT / "docs" / "cli.md").read_text().split("## Exit codes")[1].split("\n## ")[0]
    header, documented = None, {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| command"):
            header = [int(cell) for cell in cells[1:]]
        elif line.startswith("| `"):
            for command in cells[0].replace("`", "").split(", "):
                documented[command] = {code for code, cell in zip(header, cells[1:], strict=True) if cell != "-"}
    listed = {" ".join(words) for words in helps()[1:]}
    assert set(documented) == listed
    for command, codes in documented.items():
        assert codes == {code for code, _ in EXIT_CODES_OF[command]}, command
