"""Check the built book in a real headless browser (Debian's chromium, driven by selenium).

The HTML in book/_build/html is served on http://127.0.0.1 from a thread; every page of
_toc.yml is loaded and must

* answer 200 and render a non-empty article;
* show all its images (every <img> has loaded, with naturalWidth > 0); chapter pages
  (build/chapters/*) must show at least one figure in their cell outputs;
* contain no error output (no cell output of type error, no "Traceback" in the text);
* keep everything inside the page column at a 1280-px window: no table, output, display
  equation, figure or box wider than its column, even in a scroll box, and no code
  block shown whose lines are cut at the right edge (a folded cell is not shown);
* on chapter pages: show at most CODE_SHARE of the page's text as code (folded cells,
  ``hide-input``, not counted);
* on chapter pages: show every figure as a numbered figure with a caption and alt
  text, whose smallest text is at least dpbook.figures.MIN_TEXT_PX pixels high as
  rendered (the saver records each figure's smallest text in its PNG), and end with
  the provenance box, whose two downloads (.ipynb and .py) answer 200.

A full-page screenshot of each page is saved under artifacts/screenshots/ with a JSON
report.  Exit status 1 if any page fails.  Environment overrides: CHROMIUM (browser
binary, default /usr/bin/chromium), CHROMEDRIVER (default /usr/bin/chromedriver).
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from dpbook.figures import MIN_TEXT_KEY, MIN_TEXT_PX

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "book" / "_build" / "html"
SHOTS = ROOT / "artifacts" / "screenshots"
CHAPTER_PREFIX = "build/chapters/"
# Visible code (the text of the code cells shown, folded cells not counted) as a share of
# a chapter page's text: a book, not a lab notebook (QuantEcon's lectures show 24-32%).
# Chapters 2 and 7 teach the API, and their cells that call dpbook stay open.
CODE_SHARE = {"*": 0.35, "02": 0.45, "07": 0.45}

PAGE_STATE_JS = r"""
const imgs = Array.from(document.images).map(i => ({
    src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth,
    in_output: i.closest('.cell_output') !== null}));
const errors = Array.from(document.querySelectorAll(
    '.cell_output .traceback, .cell_output .output.error, .cell_output [class*="traceback"]'));
const main = document.querySelector('article') || document.querySelector('main');
const column = main.getBoundingClientRect();
const wide = [];
main.querySelectorAll('table, .cell_output .output, mjx-container[display="true"], ' +
                      'img, figure, .admonition, div.math').forEach(e => {
  if (e.closest('.cell_input')) return;
  const r = e.getBoundingClientRect();
  const over = Math.max(e.scrollWidth - e.clientWidth, r.right - column.right);
  if (r.width > 0 && over > 2)
    wide.push(`${e.tagName.toLowerCase()} ${Math.round(over)} px too wide: ` +
              Array.from((e.innerText || e.getAttribute('alt') || '').trim()).slice(0, 50)
                .join('').replace(/\s+/g, ' '));  // whole characters: maths is astral
});
const figures = Array.from(main.querySelectorAll('.cell_output img')).map(i => {
  const f = i.closest('figure');
  const number = f && f.querySelector('.caption-number');
  const caption = f && f.querySelector('figcaption');
  return {src: i.src, natural: i.naturalWidth, shown: i.clientWidth, alt: i.alt || '',
          number: number ? number.innerText.trim() : '',
          caption: caption ? caption.innerText.trim() : ''};
});
// visible code: the text of the code cells' sources that are shown (a folded cell, in a
// closed <details>, shows none), against all text of the article
const codeChars = Array.from(main.querySelectorAll('.cell_input'))
  .filter(e => e.offsetParent !== null)
  .reduce((n, e) => n + e.innerText.trim().length, 0);
// code blocks that scroll sideways at this window: their lines are cut at the right edge
const clipped = Array.from(main.querySelectorAll('.cell_input pre'))
  .filter(e => e.offsetParent !== null && e.innerText.trim().length > 0 &&
               e.scrollWidth > e.clientWidth + 2)
  .map(e => (e.innerText.split('\n').find(line => line.length > 0) || '').slice(0, 50));
const box = document.querySelector('.dpbook-provenance');
return {title: document.title, images: imgs, wide: wide, figures: figures,
        provenance: box ? box.innerText : null,
        downloads: box ? Array.from(box.querySelectorAll('a.download')).map(a => a.href) : [],
        n_error_outputs: errors.length,
        n_stderr_outputs: document.querySelectorAll('.cell_output .stderr').length,
        traceback_in_text: document.body.innerText.includes('Traceback'),
        article_chars: main ? main.innerText.trim().length : 0,
        code_chars: codeChars, clipped_code: clipped};
"""


def toc_pages(toc_file: Path = ROOT / "_toc.yml") -> list[str]:
    """Docnames of _toc.yml in order (root first)."""
    toc = yaml.safe_load(toc_file.read_text())
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [str(Path(p).with_suffix("")) for p in pages]


def serve(directory: Path) -> tuple[ThreadingHTTPServer, str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            if not isinstance(sys.exc_info()[1], ConnectionError):  # browser cancelled a load
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = (os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
                   or "/usr/bin/chromedriver")
    for path, package in ((binary, "chromium"), (driver_path, "chromium-driver")):
        if not Path(path).exists():
            raise SystemExit(f"check_pages: {path} not found; apt-get install -y {package}")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--window-size=1280,1000", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    return driver


def wait_for_images(driver, timeout: float = 20.0) -> None:
    """Scroll through the page (so lazy images load) and wait until every image is done."""
    driver.execute_script("document.querySelectorAll('img[loading=lazy]')"
                          ".forEach(i => i.loading = 'eager');"
                          "window.scrollTo(0, document.body.scrollHeight);")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script("return document.readyState === 'complete' && "
                                 "Array.from(document.images).every(i => i.complete);"):
            break
        time.sleep(0.1)
    driver.execute_script("window.scrollTo(0, 0);")


def screenshot(driver, path: Path, width: int = 1280, max_height: int = 30000) -> None:
    """Full-page PNG: grow the window to the height of the document, then capture it."""
    height = driver.execute_script(
        "return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight);")
    driver.set_window_size(width, min(int(height), max_height))
    time.sleep(0.2)  # let the layout settle
    driver.save_screenshot(str(path))
    driver.set_window_size(width, 1000)


def smallest_text(png: bytes) -> float | None:
    """The smallest text of a figure in PNG pixels, as dpbook.figures recorded it."""
    from PIL import Image

    value = Image.open(io.BytesIO(png)).text.get(MIN_TEXT_KEY)
    return None if value is None else float(value)


def figure_problems(figures: list[dict]) -> list[str]:
    problems = []
    for f in figures:
        name = f["src"].rsplit("/", 1)[-1]
        if not f["number"] or len(f["caption"]) - len(f["number"]) < 40:
            problems.append(f"{name}: not a numbered figure with a caption")
        alt = f["alt"].strip()
        if len(alt) < 20 or alt.lower().endswith((".png", ".svg")):
            problems.append(f"{name}: no alt text")
        with urllib.request.urlopen(f["src"], timeout=30) as response:
            text = smallest_text(response.read())
        if text is None:
            problems.append(f"{name}: not saved by dpbook.figures (no text size recorded)")
        elif f["natural"] and text * f["shown"] / f["natural"] < MIN_TEXT_PX:
            problems.append(f"{name}: smallest text {text * f['shown'] / f['natural']:.1f} "
                            f"px in the page (at least {MIN_TEXT_PX:g})")
    return problems


def provenance_problems(box: str | None, downloads: list[str]) -> list[str]:
    if box is None:
        return ["no provenance box"]
    problems = [f"provenance box without {what}" for what in
                ("Mode", "Parameters", "commit", "Executed", "Re-execute") if what not in box]
    for suffix in (".ipynb", ".py"):
        links = [u for u in downloads if u.endswith(suffix)]
        if not links:
            problems.append(f"no {suffix} download")
        for url in links:
            try:  # urlopen raises on an HTTP error status
                with urllib.request.urlopen(url, timeout=30) as response:
                    if not response.read(1):
                        problems.append(f"download {url} is empty")
            except OSError as exc:
                problems.append(f"download {url} fails: {exc}")
    return problems


def check_page(driver, base: str, page: str) -> dict:
    url = f"{base}/{page}.html"
    problems = []
    with urllib.request.urlopen(url, timeout=30) as response:  # raises on 404
        status = response.status
    driver.get(url)
    wait_for_images(driver)
    state = driver.execute_script(PAGE_STATE_JS)
    broken = [i["src"] for i in state["images"] if not i["complete"] or i["width"] <= 0]
    figures = [i for i in state["images"] if i["in_output"]]
    if status != 200:
        problems.append(f"HTTP status {status}")
    if state["article_chars"] == 0:
        problems.append("empty page")
    if broken:
        problems.append(f"images not shown: {broken}")
    if page.startswith(CHAPTER_PREFIX) and not figures:
        problems.append("chapter shows no figure")
    if state["n_error_outputs"]:
        problems.append(f"{state['n_error_outputs']} error output(s)")
    if state["traceback_in_text"]:
        problems.append("'Traceback' in the page text")
    problems += state["wide"]
    if page.startswith(CHAPTER_PREFIX):
        problems += figure_problems(state["figures"])
        problems += provenance_problems(state["provenance"], state["downloads"])
    shot = SHOTS / (page.replace("/", "__") + ".png")
    screenshot(driver, shot)
    code_share = state["code_chars"] / max(state["article_chars"], 1)
    problems += [f"code block cut at the right edge: {line!r}" for line in state["clipped_code"]]
    limit = CODE_SHARE.get(page.removeprefix(CHAPTER_PREFIX)[:2], CODE_SHARE["*"])
    if page.startswith(CHAPTER_PREFIX) and code_share > limit:
        problems.append(f"visible code is {code_share:.0%} of the page's text (at most "
                        f"{limit:.0%}: fold the cells that only set up, draw or format)")
    return {"page": page, "url": url, "title": state["title"], "ok": not problems,
            "code_share": round(code_share, 3), "clipped_code": state["clipped_code"],
            "problems": problems, "images": len(state["images"]), "figures": len(figures),
            "stderr_outputs": state["n_stderr_outputs"],
            "screenshot": str(shot.relative_to(ROOT))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=HTML, help="built HTML folder")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").exists():
        raise SystemExit(f"check_pages: no book in {args.html}; run `make book` first")
    SHOTS.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    server, base = serve(args.html)
    profile = tempfile.mkdtemp(prefix="dpbook-chromium-")
    results = []
    driver = browser(profile)
    try:
        for page in toc_pages():
            try:
                result = check_page(driver, base, page)
            except Exception as exc:  # a page that cannot be loaded at all
                result = {"page": page, "ok": False, "problems": [f"{type(exc).__name__}: {exc}"]}
            results.append(result)
            mark = "ok  " if result["ok"] else "FAIL"
            detail = "; ".join(result["problems"]) or (
                f"{result['figures']} figure(s), code {result['code_share']:.0%} of the "
                f"text, {len(result['clipped_code'])} code block(s) cut at the right, "
                f"screenshot {result['screenshot']}")
            print(f"  {mark} {page:<32} {detail}", flush=True)
    finally:
        driver.quit()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    (SHOTS / "report.json").write_text(json.dumps(results, indent=1))
    failed = [r["page"] for r in results if not r["ok"]]
    print(f"check_pages: {len(results) - len(failed)}/{len(results)} pages ok in "
          f"{time.perf_counter() - start:.1f} s; screenshots in {SHOTS.relative_to(ROOT)}/")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
