"""benchmarks/report_screenshot.py: a store's page in headless Chromium, or one line saying how to get one."""

import os
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT
from kerneljudge.results.store import Store
from report_stores import mixed_store

SCRIPT = ROOT / "benchmarks" / "report_screenshot.py"
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def store_of(folder, size: int):
    path = folder / "mixed.db"
    with Store(path) as store:
        for record in mixed_store(size, timed=True):
            store.put(record)
    return path


def screenshot(*args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=180)


def test_without_a_browser_the_script_says_how_to_get_one_in_one_line(tmp_path):
    db = store_of(tmp_path, 3)
    done = screenshot("--store", str(db), "--png", str(tmp_path / "page.png"), path=str(tmp_path))
    assert done.returncode == 1 and not (tmp_path / "page.png").exists()
    assert done.stderr.strip() == "no headless Chromium found: apt-get install -y chromium, or pass --browser PATH"
    done = screenshot("--store", str(tmp_path / "none.db"), "--png", str(tmp_path / "page.png"))
    assert done.returncode == 1 and done.stderr.strip().startswith("no store at")


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on PATH (apt-get install -y chromium)")
def test_chromium_photographs_the_whole_page(tmp_path):
    from PIL import Image

    db, png = store_of(tmp_path, 12), tmp_path / "page.png"
    done = screenshot("--store", str(db), "--png", str(png), "--width", "1000")
    assert done.returncode == 0, done.stderr
    with Image.open(png) as image:
        width, height = image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert width == 1000 and 1500 < height < 8000  # the page's tables and plots, its blank bottom cut off
    assert colours is not None and len(colours) > 20  # drawn, not blank
    assert "page.png: 1000x" in done.stdout
