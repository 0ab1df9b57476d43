"""A faulty network between neardup and an object store, for fault tests.

Forwards every HTTP request to UPSTREAM unchanged (headers, signature and
body included) and injects faults: --fail-every N answers every Nth request
with 503 Slow Down instead of forwarding it, --delay-ms D holds every
request D ms first, --fail-all answers every request with 503. Prints one
JSON line {"endpoint", "requests_file"} and serves until standard input
closes; the number of requests seen and failed is kept in requests_file.
"""
import argparse
import http.client
import json
import socket
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

parser = argparse.ArgumentParser()
parser.add_argument("upstream")
parser.add_argument("--fail-every", type=int, default=0)
parser.add_argument("--delay-ms", type=int, default=0)
parser.add_argument("--fail-all", action="store_true")
args = parser.parse_args()
upstream = urlsplit(args.upstream)
lock = threading.Lock()
counts = {"requests": 0, "failed": 0}
counts_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False).name


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        with lock:
            counts["requests"] += 1
            n = counts["requests"]
            fail = args.fail_all or (args.fail_every and n % args.fail_every == 0)
            if fail:
                counts["failed"] += 1
            with open(counts_file, "w") as f:
                json.dump(counts, f)
        if args.delay_ms:
            time.sleep(args.delay_ms / 1000)
        if fail:
            payload = b'<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>injected</Message></Error>'
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(payload)
            return
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
        headers = {k: v for k, v in self.headers.items()}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        # A HEAD answer carries the object's length, not its own body's.
        length = resp.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length if length is not None else str(len(data)))
        # One request per connection: the client never reuses one this proxy
        # may have dropped (only the injected faults should fail requests).
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
class Server(ThreadingHTTPServer):
    # The client opens many connections at once: a short listen queue would
    # refuse some, a fault of this proxy rather than an injected one.
    request_queue_size = 256
    daemon_threads = True


server = Server(("127.0.0.1", port), Proxy)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(json.dumps({"endpoint": f"http://127.0.0.1:{port}", "requests_file": counts_file}), flush=True)
sys.stdin.read()
server.shutdown()
