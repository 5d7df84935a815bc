"""The command line: exit codes, one-line errors, JSON output; `python -m kerneljudge` is the same program."""

import json
import subprocess
import sys

import pytest

from helpers import CANDIDATES, TASKS, validate_record
from kerneljudge.cli import main
from kerneljudge.results.verdict import Record

FAST = ["--device", "cpu", "--no-timing", "--quiet", "--policy", "practical"]


def test_pass_exits_0_and_writes_a_valid_record(tmp_path, capsys):
    out = tmp_path / "record.json"
    code = main(
        ["judge", str(TASKS / "tiny_bias_relu.py"), str(CANDIDATES / "honest_torch.py"), *FAST, "--json", str(out)]
    )
    assert code == 0
    record = Record.model_validate_json(out.read_text())
    validate_record(record)
    assert record.status == "PASS" and "PASS: verified" in capsys.readouterr().out


def test_fail_exits_2_with_its_failure(capsys):
    code = main(["judge", str(TASKS / "tiny_bias_relu.py"), str(CANDIDATES / "wrong_values.py"), *FAST])
    assert code == 2
    assert capsys.readouterr().out.startswith("FAIL: tolerance in correctness")  # the verdict line, on stdout


def test_missing_gpu_exits_3(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code = main(
        [
            "judge",
            str(TASKS / "tiny_bias_relu.py"),
            str(CANDIDATES / "honest_torch.py"),
            "--device",
            "cuda",
            "--policy",
            "practical",  # under strict a candidate without a kernel already FAILs: a proven failure comes first
            "--no-timing",
            "--quiet",
        ]
    )
    assert code == 3
    assert capsys.readouterr().out.startswith("UNSUPPORTED: missing cuda_runtime")


@pytest.mark.parametrize(
    "args, message",
    [
        (["judge", "no/such/task.py", str(CANDIDATES / "honest_torch.py")], "cannot read task"),
        (["judge", str(TASKS / "tiny_bias_relu.py"), "no/such/candidate.py"], "cannot read candidate"),
        (["judge", str(CANDIDATES / "honest_torch.py"), str(CANDIDATES / "honest_torch.py")], "does not define Model"),
        (
            [
                "judge",
                str(TASKS / "tiny_bias_relu.py"),
                str(CANDIDATES / "honest_torch.py"),
                "--json",
                "/no/dir/r.json",
            ],
            "does not exist",
        ),
    ],
)
def test_bad_input_exits_1_with_one_line(args, message, capsys):
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("kerneljudge: error:")


def test_python_dash_m_is_the_same_program():
    done = subprocess.run([sys.executable, "-m", "kerneljudge", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("kerneljudge ")


def test_schema_command_prints_the_published_schema(capsys):
    from helpers import SCHEMA_PATH

    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(SCHEMA_PATH.read_text())


def test_env_reports_the_machine(capsys):
    assert main(["env", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"torch", "triton", "cuda_available", "namespaces", "triton_interpreter"} <= set(info)
    if not info["cuda_available"]:
        assert info["clock_monitor"] == "not needed: no CUDA device"
        assert info["sandbox_cuda_workers"] == "not applicable: no CUDA device"
        assert info["compute_sanitizer"] == "not needed: no CUDA device"
    from kerneljudge.sandbox.confine import LAYERS

    assert set(info["sandbox"]) == set(LAYERS) or set(info["sandbox"]) == {"launcher"}  # each layer, or why none


def test_the_clock_monitor_finds_the_gpu_by_uuid_and_says_why_it_cannot(monkeypatch):
    import sys

    from kerneljudge.timing.clocks import NvmlClockMonitor

    monitor, error = NvmlClockMonitor.open("GPU-aaaa")  # the real pynvml
    if monitor is None:  # a machine without a GPU driver: said, not raised
        assert error.startswith("NVML unavailable") or error.startswith("no NVML device")

    class FakeNvml:
        NVML_CLOCK_SM, NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 1, 0, 1

        def __init__(self, uuids):
            self.uuids = uuids

        def nvmlInit(self):
            pass

        def nvmlDeviceGetCount(self):
            return len(self.uuids)

        def nvmlDeviceGetHandleByIndex(self, i):
            return i

        def nvmlDeviceGetUUID(self, handle):
            return self.uuids[handle]

        def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
            return 0x4

        def nvmlDeviceGetClockInfo(self, handle, kind):
            return 1980

        def nvmlDeviceGetViolationStatus(self, handle, policy):
            raise RuntimeError("not supported")

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(["GPU-aaaa", "GPU-bbbb"]))
    monitor, error = NvmlClockMonitor.open("bbbb")  # torch's UUID has no "GPU-" prefix
    assert error is None and monitor.handle == 1
    assert monitor.snapshot() == {"reasons": 0x4, "sm_mhz": 1980}  # unsupported queries stay absent
    assert monitor.throttled(monitor.snapshot(), {}) == ["sw_power_cap"]
    monitor, error = NvmlClockMonitor.open(None)
    assert monitor is None and error == "no NVML device matches the worker's GPU (UUID unknown, 2 devices)"
