"""The delivered files: a standalone HTML page checked in a real browser, the PDF's page layout, speed."""

from __future__ import annotations

import datetime
import io
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser import Chromium, file_url, find_chromium
from conftest import EXAMPLES, run_cli

from gpuplan.linter import lint_path
from gpuplan.report import pdf as pdf_module
from gpuplan.report.build import report_model
from gpuplan.report.render import render_html
from gpuplan.report.weasy import load_weasyprint

MAIN_EXAMPLES = sorted(EXAMPLES.glob("*.yaml"))
BADGE_COLOURS = {  # templates/report.css: .verdict.<slug> background
    "approve": (43, 138, 62),
    "approve-with-changes": (166, 94, 0),
    "cannot-approve": (92, 74, 158),
    "reject": (201, 42, 42),
}


class _Structure(HTMLParser):
    """Collects what the accessibility and self-containment checks need from an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, Any]] = []
        self.urls: list[str] = []
        self.meta: dict[str, str] = {}
        self.charts: list[str] = []
        self.links = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("href", "src", "srcset", "data", "poster", "action", "xlink:href"):
            if values.get(name):
                self.urls.append(str(values[name]))
        if tag == "link":
            self.links += 1
        if tag == "meta" and values.get("name"):
            self.meta[str(values["name"])] = str(values.get("content"))
        if values.get("role") == "img":
            self.charts.append(str(values.get("aria-label") or ""))
        if tag == "table":
            self.tables.append({"caption": False, "thead": False, "th": 0, "scoped": 0})
        elif self.tables and tag in ("caption", "thead"):
            self.tables[-1][tag] = True
        elif self.tables and tag == "th":
            self.tables[-1]["th"] += 1
            self.tables[-1]["scoped"] += values.get("scope") in ("col", "row")


def html_of(spec: Path) -> str:
    result = lint_path(str(spec))
    return render_html(report_model(result, datetime.date(2026, 12, 2)))


@pytest.mark.parametrize("spec", MAIN_EXAMPLES, ids=lambda path: path.stem)
def test_html_is_one_accessible_file(spec: Path):
    html = html_of(spec)
    page = _Structure()
    page.feed(html)
    assert page.urls == [] and page.links == 0, "nothing to fetch: no href, src or stylesheet link"
    assert "url(" not in html and "@import" not in html
    assert page.meta["viewport"] == "width=device-width, initial-scale=1"
    assert page.tables and all(t["caption"] and t["thead"] and t["th"] == t["scoped"] > 0 for t in page.tables)
    assert len(page.charts) >= 2, "a memory chart per job and a sensitivity chart"
    for label in page.charts:  # the charts' labels carry their numbers
        assert "GiB" in label or "%" in label, label


@pytest.mark.skipif(
    find_chromium() is None,
    reason="Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)",
)
def test_html_renders_styled_in_chromium_with_no_request(tmp_path: Path):
    browser = Chromium(find_chromium() or "")
    try:
        for spec, slug in (
            (EXAMPLES / "serve-llama-70b.yaml", "approve-with-changes"),  # GP507: 2 x h200-sxm is cheaper
            (EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml", "reject"),
        ):
            page = tmp_path / f"{spec.stem}.html"
            code, _, _ = run_cli("report", "--html", "-o", str(page), str(spec))
            assert code in (0, 1) and page.is_file()
            badge = "document.querySelector('.verdict')"
            colour_of, centre_of = (
                f"getComputedStyle({badge}).backgroundColor",
                f"(r => [r.left + r.width / 2, r.top + r.height / 2])({badge}.getBoundingClientRect())",
            )
            visit = browser.visit(file_url(page), (colour_of, centre_of))
            (tmp_path / f"{spec.stem}.png").write_bytes(visit.screenshot)
            # Only the page itself was requested: no stylesheet, font, image or script left it.
            assert visit.requests == [file_url(page)]
            colour = BADGE_COLOURS[slug]
            assert visit.values[colour_of] == "rgb({}, {}, {})".format(*colour)
            # The screenshot shows the badge painted in that colour: left of the text, inside the padding.
            from PIL import Image

            shot = Image.open(io.BytesIO(visit.screenshot)).convert("RGB")
            x, y = visit.values[centre_of]
            for dx in (-40, 40):
                pixel = shot.getpixel((int(x) + dx, int(y) - 9))
                assert all(abs(a - b) <= 3 for a, b in zip(pixel, colour, strict=True)), (slug, dx, pixel)
        # The harness sees requests when a page makes them: a linked stylesheet and a remote image.
        leaky = tmp_path / "leaky.html"
        leaky.write_text('<!DOCTYPE html><link rel="stylesheet" href="report.css"><img src="http://192.0.2.1/x.png">')
        requests = browser.visit(file_url(leaky), ()).requests
        assert file_url(tmp_path / "report.css") in requests and "http://192.0.2.1/x.png" in requests
    finally:
        browser.close()


def _pages(html: str) -> list[Any]:
    weasyprint = load_weasyprint()
    assets = pdf_module.resource_dir("templates").resolve()
    document = weasyprint.HTML(string=html, base_url=assets.as_uri() + "/", url_fetcher=pdf_module.new_fetcher())
    return list(document.render().pages)


def _flow_boxes(page: Any) -> list[Any]:
    """The page's boxes in document order, without the margin boxes (running footer)."""
    root = page._page_box.children[0]
    return [box for box in root.descendants() if getattr(box, "element_tag", None)]


def _content_boxes(boxes: list[Any]) -> list[Any]:
    """The boxes that show something: not the page's containers, and not a table's wrapper, whose fragment
    on a page can reach below its last row (a wrapper holding only its caption ends at the page's foot)."""
    containers = ("html", "body", "main", "section", "div")
    return [
        box
        for box in boxes
        if box.element_tag not in containers and not (box.element_tag == "table" and type(box).__name__ == "BlockBox")
    ]


@pytest.mark.parametrize(
    "spec",
    [*MAIN_EXAMPLES, EXAMPLES / "findings" / "budget-over.yaml", EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"],
    ids=lambda path: path.stem,
)
# Two report dates: the quotes' ages change the text, so each date lays the pages out differently (on the
# second, serve-llama-70b's options caption fell at a page's foot with its table on the next page).
@pytest.mark.parametrize("day", [datetime.date(2026, 12, 2), datetime.date(2026, 12, 5)], ids=str)
def test_pdf_pages_have_no_orphans_and_no_near_empty_last_page(spec: Path, day: datetime.date):
    result = lint_path(str(spec))
    html = render_html(report_model(result, day), bundled_fonts=True)
    pages = _pages(html)
    for number, page in enumerate(pages, start=1):
        boxes = _flow_boxes(page)
        last = max(_content_boxes(boxes), key=lambda box: box.position_y + box.margin_height())
        # A heading or a caption is never the last thing on a page: its content follows it.
        assert last.element_tag not in ("h1", "h2", "h3", "caption"), (spec.name, number, last.element_tag)
        # A table split over pages shows its header again, and never a single row of a longer table alone.
        for table in (box for box in boxes if box.element_tag == "table" and type(box).__name__ == "TableBox"):
            groups = [child for child in table.children if child.element_tag in ("thead", "tbody")]
            shown = sum(len(group.children) for group in groups if group.element_tag == "tbody")
            rows = sum(1 for element in table.element.iter() if str(element.tag).endswith("tr")) - 1  # less thead
            assert any(group.element_tag == "thead" for group in groups), (spec.name, number)
            assert shown >= 2 or rows < 2, (spec.name, number, "a table fragment with a single row")
    last_page = pages[-1]._page_box
    top = last_page.content_box_y()
    bottom = max(box.position_y + box.margin_height() for box in _content_boxes(_flow_boxes(pages[-1])))
    assert (bottom - top) / last_page.height >= 0.2, f"{spec.name}: the last page is nearly empty"


def test_importing_weasyprint_starts_no_process():
    """ctypes' library search (gcc, ld, ldconfig) is skipped: WeasyPrint loads its libraries by soname."""
    probe = (
        "import subprocess\n"
        "started = []\n"
        "original = subprocess.Popen.__init__\n"
        "def counting(self, *args, **kwargs):\n"
        "    started.append(args[0] if args else kwargs.get('args'))\n"
        "    original(self, *args, **kwargs)\n"
        "subprocess.Popen.__init__ = counting\n"
        "from gpuplan.report.weasy import load_weasyprint\n"
        "load_weasyprint().HTML(string='<p>x</p>').write_pdf()\n"
        "print(len(started), started)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.startswith("0 []"), done.stdout


def test_a_pdf_leaves_no_temporary_files(tmp_path: Path, monkeypatch):
    # WeasyPrint writes the report's @font-face fonts to a weasyprint-* folder that only its font configuration's
    # finalizer removes, which never ran in the renderer `report --pdf` forks: each PDF left a folder of fonts in
    # the temporary directory (a helper counted 772 -> 788 over 16 runs). The rendering's scratch folder goes with it.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    gpuplan = str(Path(sys.executable).parent / "gpuplan")
    done = subprocess.run(
        [gpuplan, "report", "--pdf", "-o", str(tmp_path / "report.pdf"), str(EXAMPLES / "qlora-llama-70b.yaml")],
        capture_output=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert done.returncode == 0, done.stderr
    assert os.listdir(scratch) == []
    # In-process (where fork is not the platform's default), the same.
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    model = report_model(lint_path(str(EXAMPLES / "qlora-llama-70b.yaml")), datetime.date(2026, 12, 1))
    assert pdf_module.render_pdf(render_html(model, bundled_fonts=True)).startswith(b"%PDF")
    assert os.listdir(scratch) == [] and tempfile.tempdir == str(scratch)


@pytest.mark.parametrize(("name", "magic"), [("r.pdf", b"%PDF-"), ("r.html", b"<!DOCTYPE html>"), ("r.md", b"## ")])
def test_the_output_name_chooses_the_format_when_no_option_does(tmp_path: Path, name: str, magic: bytes):
    # `-o r.pdf` alone wrote Markdown into r.pdf without a word.
    code, _, _ = run_cli("report", "-o", str(tmp_path / name), str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 0 and (tmp_path / name).read_bytes().startswith(magic)


@pytest.mark.parametrize(("option", "name"), [("--html", "r.pdf"), ("--md", "r.html"), ("--html", "r.md")])
def test_an_output_name_that_contradicts_the_format_option_is_refused(tmp_path: Path, option: str, name: str):
    # `--html -o r.pdf` wrote HTML into r.pdf without a word: a file whose name lies about its content.
    code, _, err = run_cli("report", option, "-o", str(tmp_path / name), str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 2 and f"-o {tmp_path / name} names a" in err and not (tmp_path / name).exists()


def test_an_output_path_ending_in_a_slash_is_refused_and_writes_nothing(tmp_path: Path, monkeypatch):
    # `-o reports/` meant a folder; the slash was dropped and a PDF named `reports` written. `-o notes.txt/` with
    # notes.txt a file replaced it (`cp` refuses both: "Not a directory"). Refused as a usage error, nothing written.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("keep\n")
    spec = str(EXAMPLES / "serve-llama-70b.yaml")
    for args in (("--pdf", "-o", "reports/"), ("-o", "notes.txt/"), ("--mkdir", "-o", "new/sub/")):
        code, _, err = run_cli("report", *args, spec)
        assert code == 2 and "ends with a slash, which names a folder" in err, args
    assert not {"reports", "new", "notes.txt.md"} & {p.name for p in tmp_path.iterdir()}
    assert (tmp_path / "notes.txt").read_text() == "keep\n"


def test_a_full_disk_while_the_pdf_renders_is_one_line_not_an_internal_error(tmp_path: Path):
    # WeasyPrint writes the report's fonts to temporary files before the PDF exists: a full disk (a file size
    # limit here, `ulimit -f 30`) failed there with "internal error: RuntimeError: OSError: [Errno 27] File too
    # large". It is the machine's error, said in one line as a failed write is; exit 2, nothing written.
    gpuplan = str(Path(sys.executable).parent / "gpuplan")
    target = tmp_path / "r.pdf"
    done = subprocess.run(
        ["bash", "-c", f"ulimit -f 30; {gpuplan} report --pdf -o {target} {EXAMPLES / 'serve-llama-70b.yaml'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "internal error" not in done.stderr
    assert (
        done.stderr.startswith("gpuplan: error: cannot render the PDF: File too large") and done.stderr.count("\n") == 1
    )
    assert not target.exists()


def test_an_unwritable_folder_is_refused_before_any_rendering(tmp_path: Path, monkeypatch):
    # A read-only file system (or folder) is found before the report is rendered (seconds for a PDF),
    # not at the last write. os.access is what the check asks; root bypasses mode bits, so it is faked.
    import gpuplan.atomic as atomic

    real = os.access
    monkeypatch.setattr(atomic.os, "access", lambda path, mode: False if Path(path) == tmp_path else real(path, mode))
    rendered = []
    monkeypatch.setattr("gpuplan.report.build.render_report", lambda *a, **k: rendered.append(1) or {})
    code, _, err = run_cli("report", "--pdf", "-o", str(tmp_path / "r.pdf"), str(EXAMPLES / "serve-llama-70b.yaml"))
    assert (code, err) == (
        2,
        f"gpuplan: error: cannot write {tmp_path / 'r.pdf'}: the folder {tmp_path} is not writable\n",
    )
    assert not rendered
