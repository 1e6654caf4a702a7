"""``bash scripts/bench.sh --rows N`` regenerates rows N of docs/benchmarks.md and keeps the rest."""

from __future__ import annotations

from bench.report import Report, Result
from bench.report_merge import merge_rows


def _page(results: list[Result], notes: dict[int, str], meta: dict[str, str]) -> str:
    report = Report(meta=dict(meta))
    for result in results:
        report.results.append(result)
    for row, text in notes.items():
        report.note(row, text)
    return report.markdown()


def test_only_the_selected_rows_are_replaced() -> None:
    old = _page(
        [Result(1, "old one", "s", 1.0, "x", "", "info", "a"), Result(24, "old retrieval", "s", 0.5, "", "", "info", "b"),
         Result(5, "old five", "s", 2.0, "x", "", "info", "c")],
        {1: "notes of one", 24: "old notes of 24", 5: "notes of five"},
        {"date": "2026-01-01", "command": "bash scripts/bench.sh"},
    ) + "\n## Hand-written section\n\nkept as it is\n"
    fresh = _page([Result(24, "new retrieval", "s", 0.9, "", "", "info", "d")], {24: "new notes of 24"},
                  {"date": "2026-02-02", "command": "bash scripts/bench.sh --rows 24"})
    stamp = "- Row(s) 24 regenerated: 2026-02-02, `bash scripts/bench.sh --rows 24`"
    merged = merge_rows(old, fresh, {24}, stamp)
    assert "old retrieval" not in merged and "new retrieval" in merged
    assert "old one" in merged and "old five" in merged
    table = [line for line in merged.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    assert [line.split("|")[1].strip() for line in table] == ["1", "5", "24"]
    assert "old notes of 24" not in merged and "new notes of 24" in merged and "notes of five" in merged
    lines = merged.splitlines()
    assert "- Date: 2026-01-01" in merged and lines[lines.index(stamp) - 1].startswith("- Corpus:")  # ends the list
    assert merged.endswith("## Hand-written section\n\nkept as it is\n")
    again = merge_rows(merged, fresh, {24}, stamp.replace("02-02", "03-03"))
    assert stamp not in again and stamp.replace("02-02", "03-03") in again  # one stamp per row set


def test_a_full_run_keeps_the_rows_it_did_not_run() -> None:
    from bench.report_merge import rows_in

    old = _page([Result(1, "old one", "s", 1.0, "x", "", "info", "a"), Result(24, "retrieval", "s", 0.5, "", "", "info", "b")],
                {24: "notes of 24"}, {"date": "2026-01-01", "command": "bash scripts/bench.sh --rows 24"})
    full = _page([Result(1, "new one", "s", 2.0, "x", "", "info", "c")], {}, {"date": "2026-03-03", "command": "bash scripts/bench.sh"})
    kept = rows_in(old) - {1}
    assert kept == {24}
    merged = merge_rows(full, old, kept, "- Row(s) 24 kept from the previous page (not run)")
    assert "new one" in merged and "old one" not in merged and "retrieval" in merged and "notes of 24" in merged
    assert "- Date: 2026-03-03" in merged
