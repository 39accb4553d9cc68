from __future__ import annotations

import time

from gpuplan.loader import MAX_BYTES, load_bytes


def codes(raw: bytes) -> list[tuple[str, int, int]]:
    return [(f.code, f.line, f.col) for f in load_bytes("s.yaml", raw).findings]


def test_positions_of_keys_and_values():
    doc = load_bytes("s.yaml", b"version: 1\nserve:\n  context:   8192\n  tags: [a, b]\n")
    assert doc.data == {"version": 1, "serve": {"context": 8192, "tags": ["a", "b"]}}
    pos = doc.positions[("serve", "context")]
    assert (pos.line, pos.col, pos.value_line, pos.value_col) == (3, 3, 3, 14)
    assert (doc.positions[("serve", "tags", 1)].line, doc.positions[("serve", "tags", 1)].col) == (4, 13)


def test_duplicate_key_names_both_lines_and_keeps_loading():
    doc = load_bytes("s.yaml", b"serve:\n  concurrency: 8\n  concurrency: 64\n")
    (finding,) = doc.findings
    assert finding.code == "GP002"
    assert (finding.line, finding.col) == (3, 3)
    assert "first defined on line 2, again on line 3" in finding.message
    assert finding.pointer == "/serve/concurrency"
    assert doc.data == {"serve": {"concurrency": 64}}


def test_billion_laughs_is_refused_quickly():
    lines = [b"a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 10):
        refs = ", ".join(f"*a{level - 1}" for _ in range(10)).encode()
        lines.append(b"a%d: &a%d [%s]" % (level, level, refs))
    start = time.perf_counter()
    found = codes(b"\n".join(lines))
    assert time.perf_counter() - start < 1.0
    assert found[0][0] == "GP003"


def test_small_aliases_and_merge_keys_are_fine():
    doc = load_bytes("s.yaml", b"base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n")
    assert doc.findings == ()
    assert doc.data["other"] == {"x": 1, "y": 3}


def test_deep_nesting_is_refused_without_recursion():
    raw = b"a: " + b"[" * 100_000
    start = time.perf_counter()
    assert codes(raw)[0][0] == "GP003"
    assert time.perf_counter() - start < 1.0


def test_file_over_one_mebibyte_is_refused():
    raw = b"name: " + b"x" * MAX_BYTES
    assert codes(raw) == [("GP003", 1, 1)]


def test_input_problems_are_findings_with_positions():
    assert codes(b"") == [("GP006", 1, 1)]
    assert codes(b"# only a comment\n") == [("GP006", 1, 1)]
    assert codes(b"---\n") == codes(b"# a placeholder\n---\n...\n") == codes(b"null\n") == [("GP006", 1, 1)]
    assert codes(b"- a\n- b\n") == [("GP008", 1, 1)]
    assert codes(b"a: 1\n---\nb: 2\n") == [("GP007", 2, 1)]
    assert codes(b"a: 1\nb: \xff\n") == [("GP005", 2, 4)]
    assert codes(b"a: !!python/object/apply:os.system [ls]\n") == [("GP004", 1, 4)]
    assert codes(b"a: !custom 1\n") == [("GP004", 1, 4)]
    assert codes(b"a: [1\nb: 2\n")[0][0] == "GP001"
    assert codes(b"a: .inf\n") == [("GP001", 1, 4)]


def test_timestamps_stay_strings_and_bom_is_accepted():
    doc = load_bytes("s.yaml", "\ufeffexpires: 2027-01-31\n".encode())
    assert doc.data == {"expires": "2027-01-31"}


def test_remembered_scalars_keep_their_type_and_errors_their_positions():
    # Each document is loaded twice, so the second load reads the remembered values: a plain 1 is an int,
    # a quoted "1" a string, `yes` a bool (YAML 1.1) and "yes" a string; a non-finite number is refused
    # each time, at its own line.
    text = b'a: 1\nb: "1"\nc: yes\nd: "yes"\ne: 0x1F\n'
    for _ in range(2):
        data = load_bytes("s.yaml", text).data
        assert data == {"a": 1, "b": "1", "c": True, "d": "yes", "e": 31}
        assert [type(data[k]) for k in "abcde"] == [int, str, bool, str, int]
    for line in (1, 3):
        bad = load_bytes("s.yaml", "".join(f"x{i}: 2\n" for i in range(line - 1)).encode() + b"y: .inf\n").findings
        assert [(f.code, f.line) for f in bad] == [("GP001", line)]


def test_the_remembered_scalars_stay_bounded():
    from gpuplan import loader

    load_bytes("s.yaml", "\n".join(f"k{i}: {i}" for i in range(3000)).encode())  # 6,000 distinct scalars
    memo = loader._scalar_value.cache_info()
    assert memo.maxsize is not None and 0 < memo.currsize <= memo.maxsize


def test_a_character_yaml_refuses_is_reported_where_it_stands():
    # The reader's own error gives libyaml's byte offset (or PyYAML's character offset) and its internal
    # text; the finding names the character at its line and column instead, counted in characters: line 3
    # is `owner: "café <ESC>x"`, whose ESC is the 14th character (é is one character, two bytes).
    raw = 'version: 1\nname: t\nowner: "café \x1bx"\n'.encode()
    (finding,) = load_bytes("s.yaml", raw).findings
    assert (finding.code, finding.line, finding.col) == ("GP001", 3, 14)
    assert "U+001B" in finding.message and "\x1b" not in finding.message and "position" not in finding.message
    assert '"\\x1b"' in finding.hint
    # in a comment too, and a character above U+00FF is escaped as \u
    (finding,) = load_bytes("s.yaml", "version: 1\n# \ufffe\n".encode()).findings
    assert (finding.line, finding.col) == (2, 3) and '"\\ufffe"' in finding.hint


def test_a_refused_character_is_placed_on_lines_as_editors_end_them():
    # Lines end at LF, CRLF or a lone CR (old Mac files), as everywhere else in the loader: the ESC on the
    # third line, 19th character, is at 3:19 in all three (counting only LF put the CR-only file at 1:38).
    for newline in ("\n", "\r\n", "\r"):
        raw = newline.join(["version: 1", "name: t", 'model: {id: "llama\x1b-3.1-8b"}', ""]).encode()
        (finding,) = load_bytes("s.yaml", raw).findings
        assert (finding.line, finding.col) == (3, 19), repr(newline)


def test_a_number_in_yaml_1_2_exponent_form_is_a_number():
    # YAML 1.1 (PyYAML) reads 1.3e4 and 2e9 as strings: its float needs a dot and a signed exponent
    # (1.3e+4). YAML 1.2, which editors and check-jsonschema read specs with, reads them as numbers, and
    # so does the loader; text that is no number in either version stays a string.
    doc = load_bytes("s.yaml", b"a: 1.3e4\nb: 2e9\nc: 1.0e+3\nd: -3E2\ne: 1e\nf: v1e4\ng: 12\n")
    assert doc.data == {"a": 13000.0, "b": 2e9, "c": 1000.0, "d": -300.0, "e": "1e", "f": "v1e4", "g": 12}
    assert isinstance(doc.data["a"], float) and isinstance(doc.data["g"], int) and not doc.findings
