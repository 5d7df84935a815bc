"""A report page from a results store, rendered and photographed by headless Chromium: does a real browser
show every item and legible plots?

Renders `kerneljudge report --store STORE --html` into `--html` (default: beside the PNG), opens it in
headless Chromium (the distribution's `chromium`, or `--browser PATH`) at `--width` CSS pixels, and saves
a PNG of the page (256 colours), its blank bottom cut off. The window is `--max-height` pixels tall: a
longer page (a store of hundreds of items) is cut there, and the script says so.

    python benchmarks/report_screenshot.py --store results.db --png docs/report-screenshot.png

Needs a browser: `apt-get install -y chromium` (Debian's package) or any Chrome/Chromium on PATH. Without
one it stops with one line saying how to get one. Pillow (a matplotlib dependency) crops the image.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
BLANK = 250  # a row whose every channel is at least this is page background (white), not content


def find_browser(given: str | None) -> str:
    """The browser's executable: `given`, else the first of BROWSERS on PATH; SystemExit with one line if none."""
    if given is not None:
        if shutil.which(given) is None:
            raise SystemExit(f"no browser at {given}: give an executable Chromium or Chrome")
        return given
    for name in BROWSERS:
        if shutil.which(name):
            return name
    raise SystemExit("no headless Chromium found: apt-get install -y chromium, or pass --browser PATH")


def render_page(store: Path, page: Path, baseline: Path | None) -> None:
    from kerneljudge.cli import main

    argv = ["report", "--store", str(store), "--html", str(page)]
    if baseline is not None:
        argv += ["--baseline", str(baseline)]
    code = main(argv)
    if code != 0:
        raise SystemExit(f"kerneljudge report exited {code}: see its message above")


def photograph(browser: str, page: Path, png: Path, width: int, height: int, timeout_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="kj-chromium-") as profile:
        command = [
            browser,
            "--headless=new",
            "--no-sandbox",  # as root in a container Chromium refuses to start with its own sandbox
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            page.resolve().as_uri(),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{browser} took over {timeout_s:.0f} s to photograph {page}") from None
    if done.returncode != 0 or not png.is_file():
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{browser} made no screenshot (exit {done.returncode}): {last}")


def crop_blank_bottom(png: Path, margin: int = 24) -> tuple[int, bool]:
    """Cut the page's blank bottom off; (the height kept, whether content reached the window's bottom)."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = image.convert("RGB")
    width, height = rgb.size
    darkest = rgb.point(lambda v: 255 if v < BLANK else 0).convert("L")
    box = darkest.getbbox()  # the bounding box of every non-background pixel
    bottom = box[3] if box else height
    kept = min(height, bottom + margin)
    # 256 colours keep text and plots crisp at a third of the bytes (a page photo mostly white and a few hues)
    rgb.crop((0, 0, width, kept)).quantize(colors=256).save(png, optimize=True)
    return kept, bottom >= height - 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="a kerneljudge results store (SQLite)")
    parser.add_argument("--png", type=Path, required=True, help="where to save the screenshot")
    parser.add_argument("--html", type=Path, help="where to write the page (default: the PNG's name, .html)")
    parser.add_argument("--baseline", type=Path, help="as kerneljudge report --baseline")
    parser.add_argument("--browser", help="the Chromium or Chrome executable (default: found on PATH)")
    parser.add_argument("--width", type=int, default=1280, help="window width in CSS pixels")
    parser.add_argument("--max-height", type=int, default=8000, help="window height in CSS pixels")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS")
    args = parser.parse_args()
    if not args.store.is_file():
        raise SystemExit(f"no store at {args.store}: run `kerneljudge batch MANIFEST --store {args.store}` first")
    if not args.png.parent.is_dir():
        raise SystemExit(f"cannot write {args.png}: directory {args.png.parent} does not exist")
    if not (200 <= args.width <= 8000 and 200 <= args.max_height <= 30000):
        raise SystemExit("--width must be 200-8000 and --max-height 200-30000 pixels")
    browser = find_browser(args.browser)
    page = args.html or args.png.with_suffix(".html")
    render_page(args.store, page, args.baseline)
    photograph(browser, page, args.png, args.width, args.max_height, args.timeout)
    kept, cut = crop_blank_bottom(args.png)
    size_kb = args.png.stat().st_size / 1024
    note = f"; the page is longer than --max-height {args.max_height}, cut there" if cut else ""
    print(f"{args.png}: {args.width}x{kept} px, {size_kb:.0f} KB, from {page} by {browser}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
