"""Security: no code runs from data, the server listens on loopback, static files stay in their directory,
and request bodies are capped before anyone reads them. Checked on the source (an AST scan) and on the
real app served by uvicorn, through httpx and raw sockets (so no client normalises the path for us)."""

import ast
import contextlib
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "joblib", "shelve", "marshal", "cloudpickle"}


def unsafe_calls(tree: ast.AST) -> list[str]:
    """What in `tree` could run code from data: unpickling imports, eval/exec, unsafe torch/yaml/numpy loads."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"line {node.lineno}: import {n}" for n in names if n.split(".")[0] in UNSAFE_MODULES]
        if not isinstance(node, ast.Call):
            continue
        func, keywords = node.func, {k.arg: k.value for k in node.keywords}
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        if isinstance(func, ast.Name) and name in ("eval", "exec", "__import__"):
            found.append(f"line {node.lineno}: {name}()")
        elif (owner, name) == ("torch", "load"):
            weights_only = keywords.get("weights_only")
            if not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
                found.append(f"line {node.lineno}: torch.load without weights_only=True")
        elif (owner, name) == ("yaml", "load"):
            loader = keywords.get("Loader")
            if not (isinstance(loader, ast.Attribute | ast.Name) and ast.unparse(loader).endswith("SafeLoader")):
                found.append(f"line {node.lineno}: yaml.load without a SafeLoader")
        elif (owner, name) in (("yaml", "unsafe_load"), ("yaml", "full_load")):
            found.append(f"line {node.lineno}: yaml.{name}")
        elif (owner, name) in (("np", "load"), ("numpy", "load")) and "allow_pickle" in keywords:
            found.append(f"line {node.lineno}: numpy.load with allow_pickle")
    return found


def test_the_scan_finds_what_it_looks_for():
    bad = """
import pickle
from dill import loads
eval(text)
exec(code)
torch.load(path)
torch.load(path, weights_only=False)
yaml.load(stream)
yaml.load(stream, Loader=yaml.Loader)
np.load(path, allow_pickle=True)
"""
    good = "torch.load(p, weights_only=True)\nyaml.load(s, Loader=yaml.SafeLoader)\nmodel.eval()\nnp.load(p)\n"
    assert len(unsafe_calls(ast.parse(bad))) == 9
    assert unsafe_calls(ast.parse(good)) == []


def test_no_source_file_can_run_code_from_data():
    files = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])
    assert len(files) > 20
    found = {str(f.relative_to(ROOT)): calls for f in files if (calls := unsafe_calls(ast.parse(f.read_text())))}
    assert found == {}


# --- the server ---


def test_the_server_binds_loopback_by_default(tiny_checkpoint, monkeypatch):
    """`tnmt serve` with no --host hands uvicorn a socket bound to 127.0.0.1, not 0.0.0.0."""
    import uvicorn

    from tnmt import cli

    bound = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets: bound.extend(s.getsockname() for s in sockets))
    assert cli.main(["serve", "--checkpoint", str(tiny_checkpoint), "--port", "0"]) == 0
    assert [host for host, _ in bound] == ["127.0.0.1"]


@pytest.fixture(scope="module")
def server(tiny_checkpoint):
    """The real app (max_body_bytes 2000) served by uvicorn in a thread on a free loopback port."""
    import uvicorn

    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig(max_body_bytes=2000)
    app = create_app(load_models([tiny_checkpoint], config), config)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert uv.started, "uvicorn did not start"
    yield port
    uv.should_exit = True
    thread.join(timeout=30)


def raw_request(port: int, head: bytes, body: bytes = b"", *, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send bytes as they are; the status and body of the answer (the connection is closed after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536) or b"\r\n\r\n"
        header, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in header.split(b"\r\n") if line.lower().startswith(b"content-length")),
            0,
        )
        while len(rest) < length and (chunk := sock.recv(65536)):
            rest += chunk
    return int(header.split(b" ")[1]), rest


TRAVERSALS = [
    "/static/../../../../etc/passwd",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/static/..%5c..%5c..%5c..%5cetc%5cpasswd",
    "/static/%252e%252e/%252e%252e/etc/passwd",
    "/static//etc/passwd",
    "/static/....//....//....//etc/passwd",
    "/static/..;/..;/etc/passwd",
    "/static/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
    "/static/../serve/app.py",
    "/static/%2e%2e/app.py",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_static_files_refuse_path_traversal(server, path):
    request = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
    status, body = raw_request(server, request)
    assert status in (400, 404), (status, body[:200])
    assert b"root:" not in body and b"import" not in body
    # and through httpx, asking it to send the target untouched
    request = httpx.Request("GET", f"http://127.0.0.1:{server}/", extensions={"target": path.encode()})
    with httpx.Client(timeout=10) as client:
        response = client.send(request)
    assert response.status_code in (400, 404) and b"root:" not in response.content


def test_static_files_are_served_and_the_raw_target_reaches_the_server(server):
    request = httpx.Request("GET", f"http://127.0.0.1:{server}/", extensions={"target": b"/static/%61pp.js"})
    with httpx.Client(timeout=10) as client:
        response = client.send(request)
    assert response.status_code == 200 and b"function" in response.content  # app.js, not the page at /


def test_the_page_s_modules_are_served_as_javascript(server):
    """A browser runs a `<script type="module">`, and each module it imports, only under a JavaScript MIME type."""
    names = sorted(path.name for path in (ROOT / "src" / "tnmt" / "serve" / "static").glob("*.js"))
    with httpx.Client(timeout=10) as client:
        types = {name: client.get(f"http://127.0.0.1:{server}/static/{name}").headers["content-type"] for name in names}
    assert "app.js" in types and len(types) > 1
    assert all(kind.split(";")[0] in ("text/javascript", "application/javascript") for kind in types.values()), types


def test_a_body_longer_than_the_limit_is_refused_before_it_is_read(server):
    """Content-Length says 1 GB and 10 bytes follow: 413 at once; reading the body would wait forever."""
    head = b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    status, body = raw_request(server, head + b"Content-Length: 1000000000\r\n\r\n", b'{"text": "', timeout=5)
    assert (status, body) == (413, b'{"error":"request body over max_body_bytes=2000"}')


def test_a_chunked_body_without_length_is_refused_before_it_is_read(server):
    """No Content-Length, a chunked body that never ends: 411 at once, after the first chunk."""
    head = b"POST /translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    head += b"Transfer-Encoding: chunked\r\n\r\n"
    status, body = raw_request(server, head, b"400\r\n" + b"x" * 0x400 + b"\r\n", timeout=5)
    assert (status, body) == (411, b'{"error":"send the body with a Content-Length header"}')


def test_a_length_that_understates_the_body_only_lets_that_many_bytes_in(server):
    """Content-Length 12 followed by 10 MB: the app sees at most 12 bytes (invalid JSON), never the rest."""
    head = b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    head += b"Content-Length: 12\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server), timeout=10) as sock:
        sock.sendall(head + b'{"text": "on')
        with contextlib.suppress(OSError):  # the server answered and closed: it did not read them
            sock.sendall(b"e" * 10_000_000)
        answer = sock.recv(65536)
    # 422: the app parsed the 12 bytes; 400: uvicorn refused the excess as a malformed next request first
    assert answer.split(b" ")[1] in (b"422", b"400") and b'"text": "one' not in answer
