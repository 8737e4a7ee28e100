"""benchmarks/speed/stall.py's pieces that need no trained model: its multipart body is a document the server
reads, and a light client beside a heavy request reports what it saw (against the tiny checkpoint's server)."""

import argparse

from benchmarks.speed import stall
from benchmarks.speed.serve import start_server


def test_the_light_client_and_the_load_report_beside_a_document_upload(tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(stall, "read_sentences", lambda language="en": ["two hundred", "seven"])
    server, port = start_server(tiny_checkpoint, [], threads=1, log=tmp_path / "log", timeout=120)
    try:
        heavy = ("/v1/translate_file", *stall.multipart("a.txt", b"two hundred. seven\n" * 50))
        seen = stall.beside(port, heavy, every=0.1, timeout=60)
        assert seen["heavy_status"] == 200 and seen["light_answers"] >= 5 and seen["light_errors"] == []
        args = argparse.Namespace(concurrency=2, load_seconds=1.0, upload_every=0.5, heavy_timeout=60)
        loaded = stall.under_load(port, args, uploads=True)
        assert loaded["answers"] > 0 and loaded["errors"] == [] and loaded["p99_s"] >= loaded["p50_s"]
        assert loaded["uploads"] and all(upload["status"] == 200 for upload in loaded["uploads"])
        stopped = stall.stop_during(server, port, ("/v1/translate", b'{"text": "seven"}', "application/json"), 60)
        assert stopped["exit_code"] == 0
    finally:
        if server.poll() is None:
            server.kill()
