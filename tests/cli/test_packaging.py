"""What an installed kerneljudge carries: its license, `py.typed` for type checkers, classifiers and project
links, and extras that name each pin once (`dev` and `all` are built from the others)."""

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib")  # 3.11+; CI tests 3.11
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirement_name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement)[0].lower().replace("_", "-")


def test_the_license_file_is_mit_and_named_by_the_project():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the kerneljudge authors" in text
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]


def test_classifiers_and_links_say_what_the_project_is_and_where_it_lives():
    classifiers = PROJECT["classifiers"]
    assert "Typing :: Typed" in classifiers and any(c.startswith("Topic :: ") for c in classifiers)
    versions = [
        c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions[0] == PROJECT["requires-python"].removeprefix(">=")  # the oldest listed is the oldest allowed
    urls = PROJECT["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(
        url.startswith("https://github.com/kerneljudge/kerneljudge") for k, url in urls.items() if k != "Documentation"
    )
    assert urls["Documentation"] == "https://kerneljudge.github.io/kerneljudge/"


def test_dev_and_all_name_other_extras_instead_of_repeating_their_pins():
    extras = PROJECT["optional-dependencies"]
    own = {
        requirement_name(r)
        for name, requirements in extras.items()
        if name not in ("dev", "all", "contract")
        for r in requirements
    }
    for combined in ("dev", "all"):
        repeated = [r for r in extras[combined] if requirement_name(r) in own]
        assert not repeated, f"{combined} repeats {repeated}: name the extra instead (kerneljudge[...])"
    referenced = {
        extra.strip()
        for r in extras["all"]
        for group in re.findall(r"kerneljudge\[([^\]]+)\]", r)
        for extra in group.split(",")
    }
    # every feature, not the test-only pins nor the documentation site's tools
    assert referenced == set(extras) - {"dev", "all", "contract", "docs"}


def test_the_wheel_ships_py_typed_and_the_license(tmp_path):
    for name in ("pyproject.toml", "LICENSE", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    built = subprocess.run(
        [sys.executable, "-c", "from setuptools import build_meta; print(build_meta.build_wheel('dist'))"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    with zipfile.ZipFile(tmp_path / "dist" / built.stdout.strip().splitlines()[-1]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "kerneljudge/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata
    assert "Provides-Extra: all" in metadata and "Project-URL: Documentation, " in metadata
