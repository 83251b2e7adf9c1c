from memfs import Actor


def test_create_and_read_back(store):
    s = store.create_store("Notes")
    m = store.create_memory(s.id, "/a.md", "hello", actor=Actor.user("user_x"))
    assert store.get_memory(s.id, m.id).content == "hello"
