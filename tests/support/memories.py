"""A tiny store the search tests share: every memory answers one question asked in other
words, and ``BY_MEANING`` has no word of the memory it means."""

MEMORIES = {
    "/people/oncall.md": "Priya carries the pager on weeknights; escalate to Marc after 20 "
                         "minutes.",
    "/prefs/editor.md": "I write code in vim with tabs, never spaces.",
    "/decisions/db.md": "We chose PostgreSQL over MySQL in March for its JSON support.",
    "/home/breakfast.md": "Le café du matin se prend sans sucre, avec un peu de lait d'avoine.",
}
#: No word of it is in the memory it means (/decisions/db.md): meaning alone finds it.
BY_MEANING = "which database did we pick"
