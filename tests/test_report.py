"""Reports: contents in order, safety against hostile specs, reproducibility, atomic writes, PDF text."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli
from pypdf import PdfReader

from gpuplan.report import pdf as pdf_module
from gpuplan.report.render import escape_markdown

EPOCH = "1764633600"  # 2025-12-02T00:00:00Z

HOSTILE = """\
version: 1
name: "evil <img src=\\"file:///etc/passwd\\"> | col | <script>alert(1)</script>"
owner: "<link rel=stylesheet href=http://127.0.0.1:9/x.css>"
description: "a | b | c\\n| --- |\\n<img src=\\"http://127.0.0.1:9/p.png\\"> <style>@import url(http://127.0.0.1:9/y.css);</style>"
model: {id: llama-3.1-8b}
serve:
  context: 8192
  concurrency: 8
  hardware: {gpu: l40s}
waivers:
  - {rule: GP702, reason: "<script>x</script> | pipe", approved_by: "<b>me</b>"}
"""


def pdf_text(data: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


def test_markdown_is_the_default_and_in_order():
    code, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 0
    order = [
        "**Verdict: PASS WITH WARNINGS**",
        "## Workload",
        "## Serving",
        "### Memory per GPU",
        "### Layouts the planner weighed",
        "## Findings",
        "## Cost against budget",
        "## Assumptions",
        "## Sign-off",
        "## Provenance",
    ]
    positions = [out.index(heading) for heading in order]
    assert positions == sorted(positions)
    assert "Approve with care: serving on 4 x h100-sxm fits" in out
    # The planner's table: the declared layout marked, the recommendation (GP507's) beside it.
    assert "| declared | 4 x h100-sxm, tensor_parallel 4 |" in out
    assert "| recommended | 2 x h200-sxm, tensor_parallel 2 |" in out and "6,636 USD/month" in out
    assert "fits?" not in out
    assert "| Spec SHA-256 |" in out and "generated 2026-12-02" in out


def test_fail_verdict_and_exit_code(tmp_path: Path):
    target = tmp_path / "r.md"
    code, _, _ = run_cli("report", "--md", "-o", str(target), str(EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"))
    text = target.read_text()
    assert code == 1
    assert "**Verdict: FAIL**" in text and "GP301" in text and "Do not approve as declared" in text


def test_waivers_are_shown_with_reason_and_approver():
    code, out, _ = run_cli("report", str(EXAMPLES / "findings" / "waivers.yaml"))
    assert code == 0
    assert "**waived**: matches the old cluster layout until the migration (approved by platform-lead)" in out
    code, out, _ = run_cli("report", "--no-waivers", str(EXAMPLES / "findings" / "waivers.yaml"))
    assert code == 0 and "**waived**" not in out


def test_hostile_strings_are_inert_in_markdown_and_html(write_spec, tmp_path: Path):
    spec = write_spec(HOSTILE)
    code, markdown, _ = run_cli("report", str(spec))
    assert code == 0  # findings: GP504 (info) and GP702 (warning); the fail level is error
    assert not re.search(r"(?<!\\)<", markdown), "every < from the spec is escaped"
    for line in markdown.splitlines():
        if line.startswith("| Model |") or "evil" in line:
            assert line.count("|") - line.count("\\|") in (0, 3, 4, 5), line
    html_path = tmp_path / "r.html"
    run_cli("report", "--html", "-o", str(html_path), str(spec))
    html = html_path.read_text()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<img src" not in html and "<link rel=stylesheet href=http" not in html


def test_pdf_fetches_only_packaged_assets(write_spec, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    fetchers = []
    original = pdf_module.new_fetcher

    def spying() -> object:
        fetcher = original()
        fetchers.append(fetcher)
        return fetcher

    monkeypatch.setattr(pdf_module, "new_fetcher", spying)
    spec = write_spec(HOSTILE)
    out = tmp_path / "hostile.pdf"
    code, _, err = run_cli("report", "--pdf", "-o", str(out), str(spec))
    assert out.exists() and code == 0, err
    (fetcher,) = fetchers
    assert fetcher.requested, "the stylesheet and fonts are fetched through the guarded fetcher"
    assert all(url.startswith("file://") and "/templates/" in url for url in fetcher.requested)
    assert not fetcher.refused
    assert pdf_module.allowed_url("data:text/plain,x", Path("/nowhere"))
    assert not pdf_module.allowed_url("http://127.0.0.1:9/x.css", Path("/"))
    assert not pdf_module.allowed_url("file:///etc/passwd", Path(pdf_module.resource_dir("templates")).resolve())
    text = pdf_text(out.read_bytes())
    assert "<script>alert(1)</script>" in text.replace("\n", "")  # shown as text, not run


def test_same_spec_same_epoch_same_bytes(tmp_path: Path):
    spec = EXAMPLES / "finetune-then-serve.yaml"
    outputs = []
    for attempt in range(2):
        base = tmp_path / f"run{attempt}" / "report.pdf"
        code, _, err = run_cli("report", "--md", "--html", "--pdf", "--mkdir", "-o", str(base), str(spec))
        assert code == 0, err
        outputs.append({suffix: base.with_suffix(suffix).read_bytes() for suffix in (".md", ".html", ".pdf")})
    assert outputs[0] == outputs[1]


def test_pdf_reads_as_a_reviewer_would(tmp_path: Path):
    out = tmp_path / "plan.pdf"
    code, _, _ = run_cli("report", "--pdf", "-o", str(out), str(EXAMPLES / "finetune-then-serve.yaml"))
    reader = PdfReader(str(out))
    text = pdf_text(out.read_bytes())
    assert code == 0 and 2 <= len(reader.pages) <= 8
    for expected in (
        "PASS",
        "Fine-tuning — fits",
        "Serving — fits",
        "47.2 GiB",
        "GP204",
        "GP205",
        "Layouts the planner weighed",
        "Sign-off",
        "Spec SHA-256",
        "llama-3.2-3b",
    ):
        assert expected in text, expected


def test_pdf_defaults_next_to_the_spec_and_never_overwrites_it(tmp_path: Path):
    spec = tmp_path / "plan.yaml"
    spec.write_bytes((EXAMPLES / "serve-llama-70b.yaml").read_bytes())
    code, _, _ = run_cli("report", "--pdf", str(spec))
    assert code == 0 and (tmp_path / "plan.pdf").read_bytes().startswith(b"%PDF")
    before = spec.read_bytes()
    code, _, err = run_cli("report", "--md", "-o", str(spec), str(spec))
    assert code == 2 and "refusing to overwrite the spec" in err and spec.read_bytes() == before


def test_failed_render_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def broken(html: str, epoch: int, fetcher: object = None) -> bytes:
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(pdf_module, "render_pdf", broken)
    target = tmp_path / "out.pdf"
    code, _, err = run_cli("report", "--md", "--pdf", "-o", str(target), str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 2 and "internal error" in err
    assert list(tmp_path.iterdir()) == [tmp_path / ".git"]


def test_markdown_escaping():
    assert escape_markdown("a | b") == "a \\| b"
    assert escape_markdown("<script>") == "\\<script\\>"
    assert escape_markdown("line\nbreak") == "line break"


def test_report_of_an_invalid_spec_lists_its_input_findings(write_spec, tmp_path: Path):
    spec = write_spec("version: 1\nname: x\nmodel: {id: llama-3.1-8b}\nserve: {contxt: 1}\n")
    code, out, _ = run_cli("report", str(spec))
    assert code == 1
    assert "**Verdict: FAIL**" in out and "No estimate: the spec did not load" in out
    assert "unknown key 'contxt' in serve" in out and "| GP104 | 4:1 |" in out
    broken = write_spec("a: [\n", name="broken.yaml")
    target = tmp_path / "broken.pdf"
    code, _, _ = run_cli("report", "--pdf", "-o", str(target), str(broken))
    assert code == 1 and "GP001" in pdf_text(target.read_bytes())
