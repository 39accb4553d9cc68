"""Reports: contents in order, safety against hostile specs, reproducibility, atomic writes, PDF text."""

from __future__ import annotations

import datetime
import io
import re
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, run_cli, run_process
from pypdf import PdfReader

from gpuplan.linter import lint_path
from gpuplan.report import pdf as pdf_module
from gpuplan.report.build import report_model
from gpuplan.report.pdf_process import pdf_renderer
from gpuplan.report.render import GITHUB_COMMENT_LIMIT, escape_markdown, render_html

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


def test_markdown_is_the_default_and_works_as_a_pull_request_comment():
    code, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    assert code == 0
    lines = out.splitlines()
    # The first lines are the memo: the verdict in one sentence, then the amount to sign as a ceiling over
    # its term, what is bought, the price and the budget; everything else is folded away in appendices.
    # The declared layout fits and meets the SLO, but the planner's 2 x h200-sxm does too for 45% less (GP507).
    assert lines[0] == "## APPROVE WITH CHANGES: support-assistant-70b"
    # 4 x 4.12 x 730 = 12,030 a month declared; 2 x 4.545 x 730 = 6,635.7, shown 6,636; 12,030 - 6,636 = 5,394.
    assert lines[2] == (
        "**Approve with a change: serving on 2 x h200-sxm instead of 4 x h100-sxm (it saves 5,394 USD a month).**"
    )
    # 6,636 x 12 = 79,632 to sign, from the report's date (2026-12-02) to the day before 2027-12-02.
    assert (
        "| **Amount to sign** | 79,632 USD, not to exceed, 2026-12-02 to 2027-12-01 (12 months, from the report's "
        "date): serving up to 6,636 USD a month x 12 |" in out
    )
    assert "| **As declared it would cost** | 144,360 USD, 2026-12-02 to 2027-12-01" in out  # 12,030 x 12
    assert "| **What is bought** | serving: 1 replica x 2 GPUs of h200-sxm (H200 SXM)" in out
    assert (
        "| **Budget** | serving: within: 6,636 USD of 13,000 USD a month (51% of the budget) |" in out
    )  # 6,636/13,000
    page_one = out.split("<details>")[0]
    assert "tensor\\_parallel" not in page_one and "TTFT" not in page_one and "GP507" not in page_one
    summaries = re.findall(r"<details><summary>([^<]*)</summary>", out)
    assert [s.split(":")[0].split(" (")[0] for s in summaries] == [
        "Terms used above",
        "A. Why, and the changes required",
        "B. Serving",
        "C. Serving",
        "D. Risks of the funded layout",
        "E. Serving",
        "F. Findings",
        "H. Assumptions",
        "I. Decision record",
    ]
    assert out.count("<details>") == out.count("</details>")
    assert "| Spec SHA-256 (file) |" in out and "generated 2026-12-02" in out
    # The planner's tables: the declared layout marked, the recommendation (GP507's) beside it.
    assert "| Declared | Recommended | Next best |" in out
    assert "| Cost per month | 12,030 USD | 6,636 USD |" in out
    assert "| Cost over 12 months | 144,360 USD | 79,632 USD |" in out  # 6,636 x 12
    assert "| declared | 4 x h100-sxm, tensor\\_parallel 4 |" in out
    assert "| recommended | 2 x h200-sxm, tensor\\_parallel 2 |" in out and "6,636 USD/month" in out
    assert "fits?" not in out


def test_markdown_stays_under_the_github_comment_limit(write_spec):
    # Lint keeps 100 findings a file; keys of 900 characters make each one long enough to pass the limit.
    keys = "\n".join(f"  key_{index:04}_{'x' * 900}: 1" for index in range(150))
    spec = write_spec(f"version: 1\nname: many\nmodel: {{id: llama-3.1-8b}}\nserve:\n{keys}\n")
    code, out, _ = run_cli("report", str(spec))
    assert code == 1
    assert len(out) < GITHUB_COMMENT_LIMIT
    assert out.startswith("## CANNOT APPROVE: many")
    assert re.search(r"\.\.\. and [0-9,]+ more \(the HTML and PDF reports list every finding\)\.", out)
    assert out.count("<details>") == out.count("</details>")


def test_waivers_are_shown_with_reason_and_approver():
    code, out, _ = run_cli("report", str(EXAMPLES / "findings" / "waivers.yaml"))
    assert code == 0
    assert "**waived: matches the old cluster layout until the migration (approved by platform-lead" in out
    assert "**Waiver in force: GP302.**" in out
    code, out, _ = run_cli("report", "--no-waivers", str(EXAMPLES / "findings" / "waivers.yaml"))
    assert code == 0 and "**waived" not in out
    assert "| Waivers | not applied (--no-waivers) |" in out


def test_hostile_strings_are_inert_in_markdown_and_html(write_spec, tmp_path: Path):
    spec = write_spec(HOSTILE)
    code, markdown, _ = run_cli("report", str(spec))
    assert code == 0  # findings: GP504 (info) and GP702 (warning); the fail level is error
    own_tags = re.sub(r"</?(details|summary)>", "", markdown)  # the report's own folding, nothing else
    assert not re.search(r"(?<!\\)<", own_tags), "every < from the spec is escaped"
    for line in markdown.splitlines():
        if line.startswith("| Model |") or "evil" in line:
            assert line.count("|") - line.count("\\|") in (0, 3, 4, 5), line
    html_path = tmp_path / "r.html"
    run_cli("report", "--html", "-o", str(html_path), str(spec))
    html = html_path.read_text()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<img src" not in html and "<link rel=stylesheet href=http" not in html


def test_pdf_fetches_only_packaged_assets(write_spec, tmp_path: Path):
    spec = write_spec(HOSTILE)
    html = render_html(report_model(lint_path(str(spec)), datetime.date(2026, 12, 2)), bundled_fonts=True)
    fetcher = pdf_module.new_fetcher()
    pdf_module.render_pdf(html, fetcher)
    assert fetcher.requested, "the fonts are fetched through the guarded fetcher"
    assert all(url.startswith("file://") and "/templates/" in url for url in fetcher.requested)
    assert not fetcher.refused
    assert pdf_module.allowed_url("data:text/plain,x", Path("/nowhere"))
    assert not pdf_module.allowed_url("http://127.0.0.1:9/x.css", Path("/"))
    assert not pdf_module.allowed_url("file:///etc/passwd", Path(pdf_module.resource_dir("templates")).resolve())
    out = tmp_path / "hostile.pdf"
    code, _, err = run_cli("report", "--pdf", "-o", str(out), str(spec))
    assert out.exists() and code == 0, err
    text = pdf_text(out.read_bytes())
    assert "<script>alert(1)</script>" in text.replace("\n", "")  # shown as text, not run


def test_the_pdf_child_process_writes_the_same_bytes_and_reports_its_errors(monkeypatch: pytest.MonkeyPatch):
    html = render_html(
        report_model(lint_path(str(EXAMPLES / "serve-llama-70b.yaml")), datetime.date(2026, 12, 2)),
        bundled_fonts=True,
    )
    with pdf_renderer(early=True) as renderer:
        assert renderer.process is not None or not sys.platform.startswith("linux")
        forked = renderer.render(html)
    assert forked == pdf_module.render_pdf(html)

    def broken(html: str, fetcher: object = None) -> bytes:
        raise ValueError("no pages")

    monkeypatch.setattr(pdf_module, "render_pdf", broken)
    with pdf_renderer(early=True) as renderer, pytest.raises((RuntimeError, ValueError), match="no pages"):
        renderer.render(html)
    # A run that stops before its PDF (a configuration error, say) leaves no child behind.
    with pdf_renderer(early=True) as renderer:
        child = renderer.process
    assert child is None or not child.is_alive()


def test_the_pdf_child_starts_before_the_lint_and_report_modules_import(tmp_path: Path):
    """WeasyPrint's import (in the child) overlaps the linter's, the estimator's, the rules' and the report
    model's (in the parent) only when the child forks before them: a module-level import of any of them in
    gpuplan/cli/report.py or gpuplan/report/command.py, or in a module they import, puts that cost back in
    front of the PDF's."""
    probe = (
        "import sys\n"
        "from gpuplan.cli import cli\n"
        "from gpuplan.report import pdf_process\n"
        "start = pdf_process.PdfRenderer.__init__\n"
        "def recording(self, early):\n"
        "    print('AT FORK', sorted(m for m in sys.modules if m.startswith(('gpuplan.report.model', "
        "'gpuplan.report.build', 'gpuplan.linter', 'gpuplan.loader', 'gpuplan.analysis', 'gpuplan.estimate', "
        "'gpuplan.rules', 'gpuplan.plan', 'jinja2', 'weasyprint'))))\n"
        "    start(self, early)\n"
        "pdf_process.PdfRenderer.__init__ = recording\n"
        f"try:\n    cli(['report', '--pdf', '-o', {str(tmp_path / 'r.pdf')!r}, "
        f"{str(EXAMPLES / 'serve-llama-70b.yaml')!r}])\n"
        "except SystemExit as exit:\n    print('EXIT', exit.code)\n"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "AT FORK []" in out and "EXIT 0" in out, out
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF-")


def test_same_spec_same_epoch_same_bytes(tmp_path: Path):
    spec = EXAMPLES / "finetune-then-serve.yaml"
    outputs = []
    for attempt in range(2):
        base = tmp_path / f"run{attempt}" / "report.pdf"
        code, _, err = run_cli("report", "--md", "--html", "--pdf", "--mkdir", "-o", str(base), str(spec))
        assert code == 0, err
        outputs.append({suffix: base.with_suffix(suffix).read_bytes() for suffix in (".md", ".html", ".pdf")})
    assert outputs[0] == outputs[1]
    # Another process (fresh imports, fresh font subsetting) writes the same bytes too.
    base = tmp_path / "process" / "report.pdf"
    done = run_process("report", "--md", "--html", "--pdf", "--mkdir", "-o", str(base), str(spec))
    assert done.returncode == 0, done.stderr
    assert {suffix: base.with_suffix(suffix).read_bytes() for suffix in (".md", ".html", ".pdf")} == outputs[0]


def test_pdf_reads_as_a_reviewer_would(tmp_path: Path):
    out = tmp_path / "plan.pdf"
    code, _, _ = run_cli("report", "--pdf", "-o", str(out), str(EXAMPLES / "finetune-then-serve.yaml"))
    reader = PdfReader(str(out))
    first = reader.pages[0].extract_text().replace("\n", " ")
    text = pdf_text(out.read_bytes())
    # Two jobs, each with the planner's options side by side and every layout it weighed, the risks (the
    # fine-tune's headroom at 90% confidence among them) and both memory band edges: twelve pages at most
    # (a short table and its caption move to the next page together rather than leave the caption behind).
    assert code == 0 and 2 <= len(reader.pages) <= 12
    # The first page is the memo: the verdict, the amount to sign with its one-off run and its serving term,
    # and what is bought, in words (no ZeRO-3 or tensor_parallel on the page a finance reader signs).
    assert "APPROVE" in first and "Amount to sign" in first and "one run on 4 GPUs of b200-hgx" in first
    assert re.search(r"[0-9,.]+ USD, not to exceed, 2026-12-02 to 2027-12-01 \(12 months", first)
    assert re.search(r"fine-tuning run up to [0-9,.]+ USD \(one-off; estimated at [0-9,.]+ USD", first)
    assert "ZeRO" not in first and "tensor_parallel" not in first
    _, markdown, _ = run_cli("report", str(EXAMPLES / "finetune-then-serve.yaml"))
    digest = re.search(r"\| Content hash \| ([0-9a-f]{64}) \|", markdown).group(1)  # type: ignore[union-attr]
    assert digest in text.replace("\n", "")
    for expected in (
        # Appendix E describes the funded layout, with the declared one's verdict beside it (60.64 GiB estimated,
        # NCCL's 1.82 GiB included, x 1.2287 = 74.5 at 90%: it fits, inside the headroom margin); 124.9 GiB is
        # the funded layout's peak (the plan's pinned option table has it).
        "Fine-tuning — 4 x b200-hgx, sharding zero3: fits",
        "Serving — 1 x l4: fits",
        "74.5 GiB",
        "124.9 GiB",
        "GP202",
        "GP204",
        "stress test of the funded layout",
        "every layout the planner weighed",
        "Sign-off",
        "llama-3.2-3b",
    ):
        assert expected in text, expected
    catalog = reader.trailer["/Root"]
    assert "/StructTreeRoot" in catalog and catalog["/MarkInfo"]["/Marked"], "a tagged PDF (PDF/UA-1)"
    assert catalog["/Lang"] == "en"


def test_pdf_defaults_next_to_the_spec_and_never_overwrites_it(tmp_path: Path):
    spec = tmp_path / "plan.yaml"
    spec.write_bytes((EXAMPLES / "serve-llama-70b.yaml").read_bytes())
    code, _, _ = run_cli("report", "--pdf", str(spec))
    assert code == 0 and (tmp_path / "plan.pdf").read_bytes().startswith(b"%PDF")
    before = spec.read_bytes()
    code, _, err = run_cli("report", "--md", "-o", str(spec), str(spec))
    assert code == 2 and "refusing to overwrite the spec" in err and spec.read_bytes() == before


def test_a_report_never_replaces_what_it_reads(tmp_path: Path):
    # The model's config.json, a --run log and the --config file were replaced with Markdown without
    # --force; like the spec, each is refused (exit 2), with what it is, and left as it was.
    (tmp_path / "m").mkdir()
    config_json = tmp_path / "m" / "config.json"
    config_json.write_text("{}")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "version: 1\nname: s\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 4096\n  concurrency: 4\n"
        "  hardware: {gpu: l40s}\n"
    )
    local = tmp_path / "local.yaml"
    local.write_text(spec.read_text().replace("model: {id: llama-3.1-8b}", "model: {config: m/config.json}"))
    # Through a symlink in another folder the spec still reads m/config.json beside its real file
    # (linter.base_dir): that file is the one protected, not link/m/config.json.
    (tmp_path / "link").mkdir()
    linked = tmp_path / "link" / "local.yaml"
    linked.symlink_to(local)
    settings = tmp_path / "settings.yaml"
    settings.write_text("fail-on: error\n")
    log = tmp_path / "run.log"
    log.write_text("not a log\n")
    cases = (
        ((str(local),), config_json, "the model's config file"),
        ((str(linked),), config_json, "the model's config file"),
        ((str(spec), "--run", str(log)), log, "the run's evidence"),
        ((str(spec), "--config", str(settings)), settings, "the configuration"),
    )
    for arguments, target, role in cases:
        before = target.read_bytes()
        code, _, err = run_cli("report", "--md", "-o", str(target), *arguments)
        assert code == 2 and f"refusing to overwrite {role} {target}" in err, err
        assert target.read_bytes() == before


def test_report_never_replaces_the_configuration_it_found_upward(tmp_path: Path):
    # Without --config a report reads the configuration found upward from its spec, as lint does (its fail-on set
    # the exit code): `report -o .gpuplan.yaml spec.yaml` wrote the report over it, and every later lint of the
    # folder then failed on GP012 (an invalid configuration). A pyproject.toml with [tool.gpuplan] alike.
    text = (EXAMPLES / "serve-llama-70b.yaml").read_text(encoding="utf-8")
    for folder, name, content in (
        ("a", ".gpuplan.yaml", "fail-on: warning\nignore: [GP504]\n"),
        ("b", "pyproject.toml", "[tool.gpuplan]\nfail-on = 'warning'\n"),
    ):
        (tmp_path / folder / "deeper").mkdir(parents=True)
        configuration = tmp_path / folder / name
        configuration.write_text(content)
        spec = tmp_path / folder / "deeper" / "spec.yaml"
        spec.write_text(text, encoding="utf-8")
        code, _, err = run_cli("report", "-o", str(configuration), str(spec))
        assert code == 2 and f"refusing to overwrite the configuration {configuration}" in err, err
        assert configuration.read_text() == content
        assert sorted(p.name for p in spec.parent.iterdir()) == ["spec.yaml"]


def test_failed_render_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def broken(html: str, fetcher: object = None) -> bytes:
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
    assert out.startswith("## CANNOT APPROVE: x") and "| **Amount to sign** | none: the spec has no estimate |" in out
    assert "unknown key 'contxt' in serve" in out and "| GP104 | 4:1 |" in out
    broken = write_spec("a: [\n", name="broken.yaml")
    target = tmp_path / "broken.pdf"
    code, _, _ = run_cli("report", "--pdf", "-o", str(target), str(broken))
    assert code == 1 and "GP001" in pdf_text(target.read_bytes())


BUY_OR_RENT = """\
version: 1
name: buy-or-rent
model: {id: llama-3.1-70b, dtype: bf16}
serve:
  context: 8192
  concurrency: 32
  kv_cache_dtype: fp8
  hardware: {gpu: h100-sxm, count: 4, tensor_parallel: 4}
budget:
  serve_monthly: 13000
  term_months: 24
  reserved: {prices: {h100-sxm: 2.90}, commitment_months: 36, prices_date: 2026-11-20}
  purchase:
    h100-sxm: {price_per_gpu: 30000, amortisation_months: 36, hosting_per_gpu_month: 350, date: 2026-11-15}
"""


def test_rent_reserve_or_buy_over_the_term(write_spec):
    code, out, _ = run_cli("report", str(write_spec(BUY_OR_RENT)))
    assert code == 0
    # Each month in whole units, times 24 months, as the amount requested counts it.
    # On demand: 4 x 4.12 x 730 = 12,030 a month -> 288,720. Reserved: 4 x 2.90 x 730 = 8,468 -> 203,232 over
    # the term, but the 36-month commitment is 4 x 2.90 x 730 x 36 = 304,848. Bought: 30,000 / 36 + 350 =
    # 1,183.33 per GPU-month x 4 = 4,733 a month -> 113,592 amortised; paid out 4 x (30,000 + 350 x 24) = 153,600.
    assert "| on demand | 4 x h100-sxm | 4.12 USD per GPU-hour | 288,720 USD | 288,720 USD |" in out
    assert "| reserved | 4 x h100-sxm | 2.90 USD per GPU-hour, 36-month commitment | 203,232 USD | 304,848 USD |" in out
    assert "| bought (cheapest) | 4 x h100-sxm | 30,000 USD per GPU over 36 months" in out
    assert "| 113,592 USD | 153,600 USD |" in out
    # The amount as declared is the declared, rented layout: 4 x 4.12 x 730 = 12,030 x 24 = 288,720.
    assert "| **As declared it would cost** | 288,720 USD, 2026-12-02 to 2028-12-01 (24 months" in out


def test_on_demand_under_an_instance_quote_pays_for_the_whole_instances(write_spec):
    # The same 4 GPUs rented under a quote of 32.96 per 8-GPU instance-hour (4.12 a GPU-hour): the estimate,
    # GP502 and the amount pay for the whole instance, 8 x 4.12 x 730 = 24,061 a month (24,060.8), x 24 =
    # 577,464; the on-demand row counted the 4 used (288,720), below the amount it sits beside. Reserved
    # and bought GPUs are counted one by one, as their prices are.
    quoted = BUY_OR_RENT.replace(
        "  term_months: 24\n",
        "  term_months: 24\n  quotes:\n    h100-sxm: {provider: Acme, price: 32.96, instance_gpus: 8, date: "
        "2026-11-20}\n",
    )
    _, out, _ = run_cli("report", str(write_spec(quoted)))
    row = (
        "| on demand | 8 x h100-sxm | 4.12 USD per GPU-hour, billed by whole instances: 8 GPUs paid for | 577,464 USD |"
    )
    assert row in out
    assert "| reserved | 4 x h100-sxm | 2.90 USD per GPU-hour, 36-month commitment | 203,232 USD | 304,848 USD |" in out


def test_pdf_tables_never_break_a_word_inside(tmp_path: Path):
    # The planner's and the stress-test tables of a REJECT report (its figures are the longest:
    # "fails: does not fit", "recommended", "none declared") are laid out
    # with fixed column widths; each cell's words must come out of the PDF whole. With the old widths
    # the SLO column printed "none declare" / "d" on every row, "recommended" lost its "d", and the
    # memory and latency figures wrapped before their last unit.
    out = tmp_path / "reject.pdf"
    code, _, _ = run_cli("report", "--pdf", "-o", str(out), str(EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"))
    assert code == 1
    text = pdf_text(out.read_bytes())
    tables = text[text.index("Serving: every layout the planner weighed") : text.index("Appendix D")]
    words = tables.split()
    assert "recommended" in words and "declared" in words
    assert not {"recommende", "declare", "d"} & set(words)
    for figure in (
        "fails: does not fit",
        "1 x h100-sxm none n/a 4.12",
    ):
        assert figure in tables, figure


def test_the_planners_table_says_how_much_of_the_slo_each_layout_leaves_at_its_slow_edge():
    # serve-llama-70b: the latencies in the table are estimates, the SLO is judged at their slow edge, so a
    # layout within the SLO on its estimate can break it. The column of the SLO left at 90% says how far:
    # negative on every row that breaks an SLO, never on a row that meets every constraint.
    _, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    table = out[out.index("every layout the planner weighed") : out.index("gpuplan plan lists them all")]
    header = next(line for line in table.splitlines() if line.startswith("|  | Layout"))
    assert "| TTFT p90 / TPOT ms | SLO left at 90% |" in header
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ") and "x " in line]
    verdicts = {row[1]: (row[4], row[-1]) for row in rows}
    # 4 x A100 SXM TP 4: its TTFT edge, 1,376 ms x 3.258 = 4,483 ms, is 28% over the 3,500 ms SLO; its TPOT
    # edge, 61.3 ms x 1.083 = 66.4 ms, is 11% over 60: the column gives the tighter one.
    assert verdicts["4 x a100-sxm-80gb, tensor\\_parallel 4"][0] == "-28%"
    for left, verdict in verdicts.values():
        if "slo" in verdict:
            assert left.startswith("-"), (left, verdict)
        elif verdict.startswith("meets every constraint"):
            assert not left.startswith("-"), (left, verdict)


def test_risks_read_as_sentences():
    # A risk is a bold title and a sentence after it: "**No N+1 redundancy.** One replica on 4 GPUs: ...",
    # never a lowercase start after the title's full stop (identifiers excepted: GPU ids, rule names).
    _, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    risks = re.findall(r"^- \*\*(.+?)\.\*\* (\S+)", out, re.M)
    assert ("No N+1 redundancy", "One") in risks
    for title, first in risks:
        assert first[0].isupper() or first[0].isdigit() or "-" in first or first.endswith(":"), (title, first)


def test_an_slo_met_on_the_estimate_but_not_at_its_slow_edge_reads_at_risk(write_spec):
    # Llama 3.1 8B on one L40S, 16 clients: p90 TTFT 1,176 ms estimated under a 2,000 ms SLO, but up to 3,832 ms
    # at 90% confidence (x 3.26); TPOT 68.9 ms over a 50 ms SLO on the estimate itself. The report judges both
    # as the planner does (neither holds at 90%) and words them as lint does: GP405's "at risk" for the first,
    # "breaks" for the second.
    path = write_spec(
        "version: 1\nname: small-chat\nmodel: {id: llama-3.1-8b}\n"
        "serve: {context: 8192, output_tokens: 256, concurrency: 16, engine: vllm,"
        " slo: {ttft_ms: 2000, tpot_ms: 50}, hardware: {gpu: l40s, count: 1}}\n"
    )
    _, out, _ = run_cli("report", str(path))
    assert "| TTFT SLO met | at risk: met on the estimate, not at 90% confidence | meets |" in out
    assert "| TPOT SLO met | breaks | meets |" in out
    _, lint, _ = run_cli("lint", str(path))
    assert "GP405" in lint and "GP404" in lint


def test_a_constraint_the_planner_could_not_judge_is_not_shown_as_met():
    # 1 x h100-sxm cannot hold Llama-3.1-70B (143.5 GiB of 71.2): there is no headroom to keep, and the
    # spec declares no SLO. The table said "meets" for both, which a signer reads as a pass.
    _, out, _ = run_cli("report", str(EXAMPLES / "findings" / "fit-70b-on-one-h100.yaml"))
    assert "| Fits in memory | breaks | meets | meets |" in out
    assert "| Headroom margin kept | not judged (memory breaks) | meets | meets |" in out
    assert "| TTFT SLO met | no SLO declared | no SLO declared | no SLO declared |" in out
    _, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))  # SLOs declared and met
    # Constraints every option meets are one row (a column of "meets" per constraint said nothing more);
    # the table's caption names them.
    assert "| Every other constraint | meets | meets | meets |" in out
    (caption,) = [line for line in out.splitlines() if line.startswith("**Serving: the planner's options side by side")]
    assert "met by every option: context the model takes" in caption and "ttft slo met" in caption


def test_the_planners_table_shows_why_other_layouts_fail():
    # serve-llama-70b: 12 sound options and 15 rejected layouts (`gpuplan plan`). The table showed the
    # first ten sound ones and no rejected layout; now the cheapest sound ones (8 rows with the declared),
    # the 4 cheapest rejected ones with the constraints they break, and a count of the rest.
    _, out, _ = run_cli("report", str(EXAMPLES / "serve-llama-70b.yaml"))
    table = out[out.index("**Serving: every layout the planner weighed**") :].split("\n\n")[1]
    rows = table.splitlines()[2:]
    assert len(rows) == 8 + 4 + 1
    # Of the 8 sound rows, 4 x b200-hgx (20,411 USD a month) and 8 x b200-hgx (40,822) cost more than the
    # 13,000 budget: they break it, and are not labelled as meeting every constraint. Of the other 6,
    # 1 x gb300, 1 x b300-hgx and 1 x mi355x have no price: the budget cannot be checked, and they say so.
    assert sum("meets every constraint" in row for row in rows) == 3
    assert sum("| meets every other constraint; budget unchecked: no price |" in row for row in rows) == 3
    assert sum(row.endswith("| breaks budget |") for row in rows) == 2
    assert sum("| breaks ttft\\_slo, tpot\\_slo |" in row for row in rows) == 4
    # the cheapest rejected: eight L40s in pipeline stages (cards without NVLink are proposed at TP 1)
    assert "8 x l40, pipeline\\_parallel 8" in rows[8]
    # 12 - 7 sound ones shown (the 8th row is the declared layout) = 5; 15 - 4 rejected ones shown = 11.
    assert rows[-1].startswith("|  | 5 more sound options and 11 more rejected layouts: gpuplan plan lists them all |")


def test_a_stream_the_layout_cannot_keep_up_with_has_no_ttft_figure():
    # examples/findings/benchmark-stream-outruns.yaml: 100 requests/s against the 76.62/s one H100's server
    # process serves. The queue grows without bound, so its TTFT has no figure: the options say so, where they
    # printed "inf ms" and "inf / 2.2".
    _, out, _ = run_cli("report", str(EXAMPLES / "findings" / "benchmark-stream-outruns.yaml"))
    assert "| Latency | p90 TTFT without bound; TPOT 2.2 ms |" in out
    assert "| declared | 1 x h100-sxm | 83% | without bound / 2.2 |" in out
    assert "inf" not in out.replace("info", "")


def test_a_recommendation_that_fails_as_planned_says_why_once(write_spec):
    # A burst of 64 on 2 x l40s meets its SLO on the estimate, not at the slow edge (GP405): the change goes
    # to 3 x h100-sxm (3 x 4.12 x 730 = 9,023 a month), over the 3,000 budget. Over budget as planned, it fails
    # every stress scenario; the warning said "fails the stress test at as planned; twice the requests ...".
    spec = write_spec(
        "version: 1\nname: b\nmodel: {id: llama-3.1-8b}\nserve:\n  context: 8192\n  output_tokens: 300\n"
        "  output_tokens_p90: 900\n  prompt_tokens: {mean: 1500, p90: 4000}\n  concurrency: 64\n  arrival: burst\n"
        "  slo: {ttft_ms: 30000, tpot_ms: 100}\n  hardware: {gpu: l40s, count: 2}\n"
        "budget: {currency: USD, serve_monthly: 3000}\n"
    )
    # The declared layout fails as planned too (its latency at the slow edge), so the warning does not set the
    # two apart ("unlike the declared layout"), nor lists the scenarios where only the declared one holds.
    _, out, _ = run_cli("report", str(spec))
    assert (
        "**⚠ The recommended serving layout fails as planned: it is over budget, so every scenario of the stress "
        "test fails.**" in out
    )
    assert "Unlike the declared layout" not in out
    assert "at as planned" not in out
    # The approval states its condition: the funded layout needs the budget raised, 9,023 - 3,000 = 6,023.
    assert "which needs the serving budget raised by 6,023 USD a month (to 9,023 USD).**" in out


@pytest.mark.parametrize("example", ["right-sizing", "budget-over", "fit-context-beyond-model"])
def test_the_memo_is_the_first_page_alone(tmp_path: Path, example: str):
    # These three memos (two GPUs' quotes, both jobs' stress results) ended a few lines past page one: page 2 held
    # only the memo's last paragraph, then the glossary started page 3. Page 2 now starts with the glossary.
    out = tmp_path / f"{example}.pdf"
    run_cli("report", "--pdf", "-o", str(out), str(EXAMPLES / "findings" / f"{example}.yaml"))
    pages = PdfReader(str(out)).pages
    assert "Appendices: A reason and changes" in pages[0].extract_text().replace("\n", " ")
    assert pages[1].extract_text().startswith("Terms used on the first page")


def test_the_pdf_says_which_characters_of_the_spec_it_leaves_blank(tmp_path: Path, monkeypatch):
    # The bundled DejaVu subset draws Latin, Greek and a few signs; fontconfig finds the rest among the installed
    # fonts, and where none covers a character WeasyPrint leaves a blank (a signer's name in CJK vanished from the
    # PDF with no word). Here the "installed" fonts cover the CJK ideographs U+4E00-9FFF alone: the emoji is left.
    from gpuplan.report import glyphs

    monkeypatch.setattr(glyphs, "installed_ranges", lambda: ((0x4E00, 0x9FFF),))
    spec = tmp_path / "spec.yaml"
    text = (EXAMPLES / "serve-llama-70b.yaml").read_text()
    spec.write_text(text.replace("owner: ml-platform", "owner: 山田太郎 Zoë 👩🏽\u200d💼"), encoding="utf-8")
    code, _, err = run_cli("report", "--pdf", "-o", str(tmp_path / "out.pdf"), str(spec))
    # Zoë is Latin-1 (bundled); the skin-tone modifier U+1F3FD is a symbol of its own; the zero-width joiner draws
    # nothing. So: the woman, the tone, the briefcase.
    assert code == 0 and "the PDF leaves 3 characters of the spec's text blank (👩 🏽 💼): no font installed" in err
    # Without fontconfig's answer every character outside the bundled fonts is named, and the cause says so.
    monkeypatch.setattr(glyphs, "installed_ranges", lambda: None)
    _, _, err = run_cli("report", "--pdf", "-o", str(tmp_path / "out.pdf"), "--force", str(spec))
    assert "leaves 7 characters" in err and "fontconfig (fc-list) could not say" in err
    # Nothing is said of a spec the bundled fonts draw whole, nor of the Markdown.
    _, _, err = run_cli("report", "--pdf", "-o", str(tmp_path / "plain.pdf"), str(EXAMPLES / "serve-llama-70b.yaml"))
    assert "blank" not in err
    _, _, err = run_cli("report", "--md", "-o", str(tmp_path / "out.md"), str(spec))
    assert "blank" not in err
