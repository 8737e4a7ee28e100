"""serve/file_store.py: translated files kept under keys the server makes, bounded and expiring."""

import os
import time

from tnmt.serve.file_store import FileStore


def test_a_file_is_kept_under_a_key_of_its_own_and_served_until_it_expires():
    store = FileStore(ttl_s=60)
    key = store.put("../../My Report (final).de.docx", b"data")
    path = store.get(key)
    assert path is not None and path.read_bytes() == b"data" and path.parent == store.directory
    assert key.endswith(".My_Report__final_.de.docx") and "/" not in key
    old = time.time() - 120
    os.utime(path, (old, old))
    assert store.get(key) is None and not path.exists()  # expired: removed on the next request
    store.close()
    assert not path.parent.exists()


def test_a_store_that_never_kept_a_file_made_no_directory():
    store = FileStore()
    assert store.get("0" * 32 + ".a.txt") is None
    store.close()
    assert store._directory is None


def test_keys_the_server_did_not_make_are_refused():
    store = FileStore()
    store.put("a.txt", b"x")
    for key in ("../a.txt", "a.txt", "0" * 32 + "/../a.txt", "0" * 31 + ".a.txt", "", ".", "0" * 32 + "."):
        assert store.get(key) is None
    store.close()


def test_past_its_bounds_the_oldest_files_go_first():
    store = FileStore(max_files=2)
    keys = []
    for n in range(3):
        keys.append(store.put(f"{n}.txt", b"x"))
        path = store.directory / keys[-1]
        os.utime(path, (time.time() - 10 + n, time.time() - 10 + n))
    store.put("last.txt", b"x")
    assert store.get(keys[0]) is None and len(list(store.directory.iterdir())) == 2
    big = FileStore(max_bytes=5)
    first = big.put("a.txt", b"xxxx")
    os.utime(big.directory / first, (time.time() - 5, time.time() - 5))
    second = big.put("b.txt", b"yyyy")
    assert big.get(first) is None and big.get(second) is not None  # the newest is kept even alone over the limit
    store.close()
    big.close()
