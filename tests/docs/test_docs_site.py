"""The documentation site (mkdocs.yml): it builds strictly from the tree as it is, its generated reference pages
name every command, option and findings code, every page of docs/ is in the nav, and a browser draws it."""

from __future__ import annotations

import argparse
import html as html_module
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")

DOCS = ROOT / "docs"
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = load(ROOT / "scripts" / "docs_reference.py", "docs_reference")


def build(site: Path, strict: bool) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site), *(["--strict"] if strict else [])]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The site, built strictly; where the strict build failed, built again without --strict so that the other
    tests still read its pages (the strict test reports the warnings)."""
    site = tmp_path_factory.mktemp("site")
    strict = build(site, strict=True)
    if strict.returncode != 0:
        assert build(site, strict=False).returncode == 0
    return site, strict


def page_text(site: Path, page: str) -> str:
    html = (site / page / "index.html").read_text(encoding="utf-8")
    return html_module.unescape(re.sub(r"<[^>]+>", "", html)).replace("¶", "")


def test_the_site_builds_with_strict(built):
    site, strict = built
    warnings = [line for line in strict.stderr.splitlines() if "WARNING" in line]
    assert strict.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(warnings or [strict.stderr])
    assert (site / "index.html").is_file() and (site / "reference" / "cli" / "index.html").is_file()


def commands(parser: argparse.ArgumentParser, path: str = "kerneljudge"):
    """Every (sub-)command of `parser`, read from argparse itself rather than the page's generator."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub
                yield from commands(sub, f"{path} {name}")


def test_the_cli_page_has_every_command_with_its_options_and_exit_codes(built):
    from kerneljudge.cli import build_parser

    site, _ = built
    html = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    text = page_text(site, "reference/cli")
    found = list(commands(build_parser()))
    assert {"kerneljudge judge", "kerneljudge batch", "kerneljudge tasks lint", "kerneljudge serve"} <= {
        path for path, _ in found
    }
    for path, parser in found:
        assert f'id="{path.replace(" ", "-")}"' in html, f"no section for {path}"
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text, f"{path}: {option} is not on the page"
    # judge's exit codes, from cli/usage.py's table, and an option's default as --help gives it
    section = text[text.index("kerneljudge judge [-h]") :]
    assert "UNSUPPORTED: a required capability is missing" in section
    assert "(default: 180.0)" in section


def test_the_findings_page_has_every_code_with_its_severity_and_remedy(built):
    from kerneljudge.checks.catalog import CATALOG

    site, _ = built
    text = page_text(site, "reference/findings")
    for code, entry in CATALOG.items():
        assert code in text, f"{code} is not on the findings page"
        # as written: `__import__` is not a bold "import", a name in backticks is code
        assert " ".join(entry.title.split()).replace("`", "") in text, f"{code}'s summary is not on the page"
        assert " ".join(entry.remediation.split()).replace("`", "") in text, (
            f"{code}'s remedy is not on the findings page"
        )
    row = text[text.index("KJ-S070") :].split("KJ-S071")[0]
    assert "strict: error, practical: info" in row  # the policy decides it (checks.catalog.severity)
    row = text[text.index("KJ-S001") :].split("KJ-S002")[0]
    assert "audit: warning, enforce: error" in row  # a high-risk construct: the mode decides it


def test_the_configuration_and_schema_pages_have_every_field(built):
    from dataclasses import fields

    from kerneljudge.config import JudgeConfig
    from kerneljudge.results.verdict import record_json_schema

    site, _ = built
    configuration = page_text(site, "reference/configuration")
    assert all(f.name in configuration for f in fields(JudgeConfig))
    schema = page_text(site, "reference/schema")
    assert all(name in schema for name in record_json_schema()["properties"])


def test_every_docs_page_is_in_the_nav():
    from mkdocs.config import load_config

    config = reference.on_config(load_config(str(ROOT / "mkdocs.yml")))

    def pages(nav) -> set[str]:
        out: set[str] = set()
        for item in nav:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            out |= pages(value) if isinstance(value, list) else {value}
        return out

    in_nav = pages(config["nav"])
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert sorted(on_disk - in_nav) == [], "docs pages missing from mkdocs.yml's nav"
    assert sorted(in_nav - on_disk - set(reference.PAGES)) == [], "nav entries with no page"


def test_the_generated_pages_are_never_written_into_docs(tmp_path):
    assert not any((DOCS / path).exists() for path in reference.PAGES)  # built, so they cannot go stale
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_reference.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "## `kerneljudge tasks`" in (tmp_path / "reference" / "cli.md").read_text()


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (apt-get install -y chromium)")
def test_chromium_draws_the_front_page_and_the_cli_reference(built, tmp_path):
    from PIL import Image

    shots = load(ROOT / "benchmarks" / "report_screenshot.py", "report_screenshot")
    site, _ = built
    for page in ("index.html", "reference/cli/index.html"):
        png = tmp_path / (page.replace("/", "_") + ".png")
        shots.photograph(BROWSER, site / page, png, 1280, 4000, 120.0)
        kept, _ = shots.crop_blank_bottom(png)
        with Image.open(png) as image:
            width, height = image.size
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert width == 1280 and 300 < height <= 4000, page
        assert colours is not None and len(colours) > 20, f"{page} drew blank"  # the theme's colours and text
