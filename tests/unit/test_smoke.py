from memfs import Actor


def test_create_and_read_back(store):
    s = store.stores.create("Notes")
    m = store.memories.create(s.id, "/a.md", "hello", actor=Actor.user("user_x"))
    assert store.memories.get(s.id, m.id).content == "hello"
