"""memfs.console.diff: unified and side-by-side diffs, escaped, with changed characters
marked."""

from __future__ import annotations

from memfs.console.diff import changed, diff_html


def test_unified_marks_lines_and_characters_and_escapes() -> None:
    html = str(diff_html("a\nb\n<script>x</script>\n", "a\nB\n<b>\n", mode="unified"))
    assert ('<tr class="del"><td class="num">2</td><td class="num"></td>'
            '<td class="">-<del>b</del>') in html
    assert "<ins>B</ins>" in html
    assert "<script" not in html and "&lt;<del>script</del>&gt;" in html
    assert "@@ -1,3 +1,3 @@" in html


def test_split_puts_old_left_and_new_right() -> None:
    html = str(diff_html("x\n", "x\ny\n", mode="split"))
    assert '<td class="num">2</td><td class="add">y</td>' in html
    assert 'class="diff split"' in html


def test_long_unchanged_stretches_fold_into_hunks() -> None:
    old = "\n".join(f"line {i}" for i in range(100))
    new = old.replace("line 10\n", "line ten\n").replace("line 90\n", "line ninety\n")
    html = str(diff_html(old, new))
    assert html.count('class="hunk"') == 2 and "line 50" not in html


def test_no_change_and_line_ending_changes_are_said() -> None:
    assert "No change" in diff_html("a", "a")
    assert "line endings" in diff_html("a\n", "a")
    assert changed("a\nb", "a\nc\nd") == (2, 1)
