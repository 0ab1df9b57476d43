"""A read-only HTTP file server on loopback for neardup's HTTP input tests.

Serves the folder given as its argument with GET, HEAD and byte ranges (as
object stores and CDNs do; Python's http.server ignores ranges), prints one
JSON line {"url"} and serves until its standard input closes.
"""
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from email.utils import formatdate

root = os.path.abspath(sys.argv[1])


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _file(self):
        path = os.path.normpath(os.path.join(root, self.path.split("?")[0].lstrip("/")))
        if not path.startswith(root) or not os.path.isfile(path):
            self.send_error(404)
            return None
        return path

    def do_HEAD(self):
        path = self._file()
        if path:
            self._headers(200, os.path.getsize(path), path)

    def do_GET(self):
        path = self._file()
        if not path:
            return
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            data = f.read()
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if m:
            if m.group(1) == "":
                start, end = size - int(m.group(2)), size - 1
            else:
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if start >= size or start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return
            body = data[start : end + 1]
            self._headers(206, len(body), path, f"bytes {start}-{end}/{size}")
        else:
            body = data
            self._headers(200, size, path)
        self.wfile.write(body)

    def _headers(self, status, length, path, content_range=None):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Last-Modified", formatdate(os.path.getmtime(path), usegmt=True))
        self.send_header("ETag", f'"{int(os.path.getmtime(path))}-{os.path.getsize(path)}"')
        if content_range:
            self.send_header("Content-Range", content_range)
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}"}), flush=True)
sys.stdin.read()
server.shutdown()
