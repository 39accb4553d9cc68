"""The formats of gpuplan diff: a GitHub-flavoured Markdown comment within GitHub's size limit, annotations
on the changed lines, terminal text, and no raw control characters from a spec in any of them."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from conftest import run_cli
from test_diff import BASE_SERVE, CLEAN, HEAD_SERVE, repo  # noqa: F401  (repo is a fixture)

from gpuplan.diff import renderer
from gpuplan.diff.build import diff_files, diff_git
from gpuplan.diff.markdown import GITHUB_COMMENT_LIMIT
from gpuplan.diff.model import DiffResult


class Tables(HTMLParser):
    """The tables of rendered HTML: a list of rows of cell texts each."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def cells_of(line: str) -> int:
    """Cells of a Markdown table row: its unescaped pipes, less one."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def gfm_tables(markdown: str) -> list[list[list[str]]]:
    """Tables as GitHub's own Markdown parser (cmark-gfm) reads them, checked against the source: every
    block of table lines is one table, and every row has as many cells as its header (cmark-gfm would
    silently drop a surplus cell)."""
    parser = Tables()
    parser.feed(cmarkgfm.github_flavored_markdown_to_html(markdown))
    blocks: list[list[str]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                blocks.append([])
            blocks[-1].append(line)
        previous = line
    assert len(parser.tables) == len(blocks)
    for block, table in zip(blocks, parser.tables, strict=True):
        assert len(table) == len(block) - 1  # the delimiter row is no row
        assert {cells_of(line) for line in block} == {len(table[0])}
        assert {len(row) for row in table} == {len(table[0])}
    return parser.tables


def test_markdown_is_a_github_comment_with_tables(repo: Path):  # noqa: F811
    result = diff_git("main", cwd=repo)
    markdown = renderer("markdown")(result, [], 0)
    first = markdown.splitlines()[0]
    assert first == (
        "**Monthly GPU cost will increase by 2,190 USD (+30%), from 7,300 to 9,490 USD; 4 specs changed "
        "(1 added, 1 removed), verdicts: 1 APPROVE → APPROVE WITH CHANGES, 1 APPROVE → CANNOT APPROVE, 1 new "
        "APPROVE; 1 spec without a known cost left out of the totals**"
    )
    tables = gfm_tables(markdown)
    overview = tables[0]
    assert overview[0] == ["spec", "status", "verdict", "monthly before", "monthly after", "change"]
    # 4 x H100 at 8,760 a month is sound but dearer than the 2 x H200 it replaces: GP507 warns
    assert overview[1] == [
        "specs/serve.yaml",
        "modified",
        "APPROVE → APPROVE WITH CHANGES",
        "5,840 USD",
        "8,760 USD",
        "+2,920 USD",
    ]
    serve = tables[1]
    assert ["Cost per month", "5,840 USD", "8,760 USD", "+2,920 USD"] in serve
    assert ["Cost over the term (12 months)", "70,080 USD", "105,120 USD", "+35,040 USD"] in serve  # x 12 months
    assert markdown.count("<details>") == markdown.count("</details>") == 2  # serve.yaml and broken.yaml


def test_markdown_of_200_changed_specs_stays_under_githubs_limit(tmp_path: Path):
    base, head = tmp_path / "a.yaml", tmp_path / "b.yaml"
    base.write_text(BASE_SERVE)
    head.write_text(HEAD_SERVE)
    (change,) = diff_files(str(base), str(head)).changes
    many = tuple(dataclasses.replace(change, path=f"teams/team-{i:03}/serving.yaml") for i in range(200))
    result = DiffResult(diff_files(str(base), str(head)).base, diff_files(str(base), str(head)).head, many)
    markdown = renderer("markdown")(result, [], 0)
    assert len(markdown) < GITHUB_COMMENT_LIMIT
    # the summary still counts every spec: 200 x 2,920 = 584,000 a month more
    assert markdown.startswith("**Monthly GPU cost will increase by 584,000 USD (+50%), from 1,168,000 to 1,752,000")
    shown_in_detail = markdown.count("### teams/")
    assert 0 < shown_in_detail < 200
    assert f"_{200 - shown_in_detail} more changed specs are not shown in detail" in markdown
    tables = gfm_tables(markdown)
    assert len(tables) == 1 + shown_in_detail + shown_in_detail  # overview, a figures and a fields table each


def test_spec_strings_are_neutralised_in_every_format(tmp_path: Path):
    base, head = tmp_path / "a.yaml", tmp_path / "b.yaml"
    base.write_text(CLEAN)
    # a name with a table pipe, a terminal escape (ESC [2J clears the screen), a newline and a bidi override
    head.write_text(CLEAN.replace("name: chat", 'name: "evil | name \\e[2J\\nsecond line \\u202e"'))
    result = diff_files(str(base), str(head))
    for name in ("text", "markdown", "github", "json"):
        output = renderer(name)(result, [], 0)
        assert "\x1b" not in output and "\u202e" not in output, name
        assert "\nsecond line" not in output, name  # the spec's newline never starts a line of output
    markdown = renderer("markdown")(result, [], 0)
    (fields,) = [t for t in gfm_tables(markdown) if t[0] == ["field", "before", "after"]]
    assert fields[1][0] == "/name"
    assert fields[1][2] == '"evil | name \\u001b[2J\\nsecond line \\u202e"'  # one cell, the pipe kept as text


def test_github_annotations_sit_on_the_changed_lines(repo: Path):  # noqa: F811
    output = renderer("github")(diff_git("main", cwd=repo), ["specs/broken.yaml: new error GP001"], 1)
    lines = output.splitlines()
    # HEAD_SERVE: line 9 is serve.hardware, line 11 budget.prices
    assert (
        '::notice file=specs/serve.yaml,line=9,title=spec field changed::/serve/hardware/gpu: "h200-sxm" → "h100-sxm"'
        in lines
    )
    assert (
        "::notice file=specs/serve.yaml,line=11,title=spec field changed::/budget/prices/h100-sxm: (absent) → 3.0"
        in lines
    )
    assert (
        "::warning file=specs/serve.yaml,line=9,title=gpuplan diff::verdict APPROVE → APPROVE WITH CHANGES; "
        "monthly cost +2,920 USD" in lines
    )
    assert any(
        line.startswith("::warning file=specs/serve.yaml,line=9,title=new finding GP507 cheaper-layout-available::")
        for line in lines
    )
    assert (
        "::warning file=specs/broken.yaml,line=1,title=gpuplan diff::verdict APPROVE → CANNOT APPROVE; "
        "monthly cost n/a" in lines
    )
    assert any(
        line.startswith("::error file=specs/broken.yaml,line=5,title=new finding GP001 yaml-syntax::") for line in lines
    )
    assert (
        "::notice title=gpuplan diff%3A specs/old.yaml removed::verdict removed (was APPROVE); monthly cost -1,460 USD"
        in lines
    )
    assert "::error title=gpuplan diff guardrail::specs/broken.yaml: new error GP001" in lines


def test_text_shows_figures_findings_and_fields(repo: Path):  # noqa: F811
    text = renderer("text")(diff_git("main", cwd=repo), [], 0)
    lines = text.splitlines()
    assert lines[0].startswith("gpuplan diff: main (") and lines[0].endswith(") → working tree")
    assert "specs/serve.yaml (modified)" in lines
    row = next(line for line in lines if line.strip().startswith("Cost per month"))
    assert row.split()[3:] == ["5,840", "USD", "8,760", "USD", "+2,920", "USD"]
    assert "    /serve/hardware/count: 2 → 4" in lines
    assert any(line.startswith("    + GP001 yaml-syntax at the file (line 5): YAML syntax error") for line in lines)
    assert "1 more spec file differs only in comments, layout or name." in lines


def test_the_max_context_row_says_one_sequence_only_for_a_burst(tmp_path: Path):
    # A burst's engine need hold one of its sequences (the rest wait their turn): its row says so; a closed
    # loop's does not.
    labels = {}
    for name, spec in (("closed", CLEAN), ("burst", CLEAN.replace("serve:\n", "serve:\n  arrival: burst\n"))):
        before, after = tmp_path / f"{name}-4.yaml", tmp_path / f"{name}-8.yaml"
        before.write_text(spec.replace("concurrency: 8", "concurrency: 4"))
        after.write_text(spec)
        text = renderer("text")(diff_files(str(before), str(after)), [], 0)
        labels[name] = next(line for line in text.splitlines() if "Max context at the concurrency" in line)
    assert "(a burst: one sequence)" in labels["burst"]
    assert "(a burst" not in labels["closed"]


def test_a_spec_diffed_with_itself_is_identical_not_changed_in_comments(tmp_path: Path):
    # Two identical files changed nothing at all: "1 more spec file(s) differ only in comments" said otherwise.
    spec = tmp_path / "a.yaml"
    spec.write_text(CLEAN, encoding="utf-8")
    code, out, _ = run_cli("diff", str(spec), str(spec))
    assert code == 0 and "1 spec file identical on both sides." in out and "differ" not in out.split("\n", 2)[2]


@pytest.mark.parametrize("name", ["text", "markdown", "github", "json"])
def test_every_format_renders_an_empty_diff(name: str, tmp_path: Path):
    spec = tmp_path / "a.yaml"
    spec.write_text(CLEAN)
    output = renderer(name)(diff_files(str(spec), str(spec)), [], 0)
    assert output.endswith("\n")
    if name != "json":
        assert "No spec changed in a way that affects memory, cost, findings or verdicts." in output


def test_markdown_diff_imports_no_template_or_pdf_machinery(tmp_path: Path):
    """A CI comment is rendered without Jinja, WeasyPrint or the report package (the decision is its own module)."""
    import subprocess
    import sys

    base, head = tmp_path / "a.yaml", tmp_path / "b.yaml"
    base.write_text(BASE_SERVE)
    head.write_text(HEAD_SERVE)
    probe = (
        "import sys\n"
        "from gpuplan.cli import cli\n"
        f"try:\n    cli(['diff', {str(base)!r}, {str(head)!r}, '--format', 'markdown'])\n"
        "except SystemExit as exit:\n    print('EXIT', exit.code)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jinja2', 'weasyprint')"
        " or m.startswith('gpuplan.report'))\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    # verdicts come from gpuplan.decision, which needs none of the report's rendering
    assert "verdicts: 1 APPROVE → APPROVE WITH CHANGES" in out
    assert "**Monthly GPU cost will increase by 2,920 USD (+50%), from 5,840 to 8,760 USD" in out
    assert "EXIT 0" in out and "HEAVY []" in out


def test_long_values_keep_the_text_columns_apart_and_a_fine_tune_alone_shows_its_run_cost(tmp_path: Path):
    # A sharded fine-tune's layout ("8 x h100-sxm, TP 1, PP 1, sharding fsdp", 40 characters) is longer than
    # the 30-character column: the column widens, so before and after never run together. In the Markdown
    # overview, a spec that serves on neither side has no monthly cost ("-", not 0.00) and its change is the
    # run's cost (8 -> 16 GPUs: the same tokens cost about the same, so only the sign is not pinned).
    spec = (
        "version: 1\nname: f\nmodel: {id: llama-3.1-8b}\nfinetune:\n  method: full\n  seq_len: 4096\n"
        "  micro_batch: 1\n  sharding: fsdp\n  tokens: 100000000\n  hardware: {gpu: h100-sxm, count: 8}\n"
    )
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(spec)
    b.write_text(spec.replace("count: 8", "count: 16"))
    _, out, _ = run_cli("diff", str(a), str(b))
    (layout,) = [line for line in out.splitlines() if line.strip().startswith("Layout")]
    assert "sharding fsdp  16 x h100-sxm" in layout or "sharding fsdp   16 x" in layout, layout
    _, out, _ = run_cli("diff", "--format", "markdown", str(a), str(b))
    (row,) = [line for line in out.splitlines() if line.startswith("| ") and "| modified |" in line]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3:5] == ["-", "-"] and cells[5].startswith("run "), cells


def _currency_pair(folder: Path, base: tuple[int, str, str], head: tuple[int, str, str]) -> tuple[Path, Path]:
    """Two serving specs of llama-3.1-8b on h100-sxm, each (GPUs, currency, price per GPU-hour)."""
    spec = (
        "version: 1\nname: c\nmodel: {id: llama-3.1-8b}\n"
        "serve: {context: 8192, concurrency: 16, hardware: {gpu: h100-sxm, count: %d}}\n"
        "budget: {currency: %s, prices: {h100-sxm: %s}, prices_date: 2026-11-20}\n"
    )
    paths = folder / "base.yaml", folder / "head.yaml"
    for path, side in zip(paths, (base, head), strict=True):
        path.write_text(spec % side)
    return paths


def test_a_change_of_currency_states_each_side_in_its_own_and_adds_nothing_up(tmp_path: Path):
    # Only budget.currency moves (USD to EUR) with the same 3.20 per GPU-hour: the base costs 3.20 x 730 =
    # 2,336 USD a month, the head 2,336 EUR. No exchange rate is known, so the two are not comparable: each
    # is stated in its own currency, no difference is computed, and the totals leave the spec out.
    base, head = _currency_pair(tmp_path, (1, "USD", "3.20"), (1, "EUR", "3.20"))
    result = diff_files(str(base), str(head))
    (change,) = result.changes
    assert change.currencies == ("USD", "EUR") and change.cost_delta("monthly_cost") is None
    assert result.totals[0].monthly.uncosted == (str(head),)
    text = renderer("text")(result, [], 0)
    assert re.search(r"Cost per month +2,336 USD +2,336 EUR +not comparable", text), text
    assert "whose currency changed left out of the totals (not comparable)" in text
    markdown = renderer("markdown")(result, [], 0)
    assert "| 2,336 USD | 2,336 EUR | not comparable |" in markdown


def test_a_change_of_currency_breaks_the_cost_guardrails_and_has_no_money_deltas(tmp_path: Path):
    # A review's case: 1 x h100-sxm at 3.20 USD (2,336 a month) -> 8 x h100-sxm at 30.00 EUR (175,200 a month).
    # Left out of the totals as not comparable, it passed --max-monthly-increase 100 unseen and the JSON
    # subtracted the two currencies per job (172,864). The cost guardrails now fail on it, saying why; the
    # comment shows on --comment-on increase; no money figure has a delta.
    base, head = _currency_pair(tmp_path, (1, "USD", "3.20"), (8, "EUR", "30.00"))
    code, out, err = run_cli("diff", str(base), str(head), "--max-monthly-increase", "100", "--comment-on", "increase")
    assert code == 1 and "monthly cost not comparable (USD -> EUR)" in out + err, (out, err)
    assert "2,336 USD" in out and "175,200 EUR" in out
    code, out, _ = run_cli("diff", str(base), str(head), "--format", "json")
    (changed,) = json.loads(out)["specs"]
    money = {"monthly_cost", "term_cost", "cost_per_million_tokens", "price_per_gpu_hour"}
    assert all(changed["delta"]["jobs"]["serve"].get(key) is None for key in money), changed["delta"]
    assert changed["delta"]["monthly_cost"] is None
