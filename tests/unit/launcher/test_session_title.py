"""A session's default title (memfs run without --title): its command line, cut at a word
boundary with an ellipsis when it is long (issue 38: it was cut mid-word)."""

from __future__ import annotations

from memfs.launcher.setup import TITLE_MAX, session_title


def test_a_short_command_line_is_the_title_as_it_is():
    assert session_title(["claude", "-p", "tidy the notes"]) == "claude -p tidy the notes"


def test_a_long_command_line_is_cut_at_a_word_boundary_with_an_ellipsis():
    cmd = ["agent", "--prompt", "word " * 60]
    title = session_title(cmd)
    assert len(title) <= TITLE_MAX and title.endswith(" …")
    assert (title[:-2] + " ").replace(" word ", " ").startswith("agent --prompt ")
    assert " ".join(cmd).startswith(title[:-2] + " ")  # whole words only


def test_one_word_longer_than_the_title_is_cut_with_an_ellipsis():
    title = session_title(["x" * 500])
    assert title == "x" * (TITLE_MAX - 1) + "…"
