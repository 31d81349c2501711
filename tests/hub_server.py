#!/usr/bin/python3
"""hub_server.py: a local imitation of the Hugging Face hub endpoints batchgen uses, for
tests/e2e_hub.sh (no real network in tests).

    hub_server.py CONFIG.json STATE_DIR

CONFIG maps "OWNER/REPO" to {"files": {"PATH": "LOCAL FILE", ...}, "token": "T" (optional:
the repository is gated: no token is 401, another token 403)}. The server listens on
127.0.0.1 (a free port, written to STATE_DIR/port) and answers
  GET  /api/models/OWNER/REPO/tree/REV?recursive=true  the listing (type, oid = git blob
       id, size, path, and lfs {oid = sha256, size} for .gguf files), as the hub does;
  GET|HEAD /OWNER/REPO/resolve/REV/PATH  a 302 to /_cdn/OWNER/REPO/PATH with the hub's
       X-Repo-Commit, X-Linked-Etag and X-Linked-Size headers;
  GET  /_cdn/OWNER/REPO/PATH  the bytes, with Range: bytes=N- answered 206.
REV is "main" or the repository's commit (the sha1 of its name). Every request is
appended to STATE_DIR/requests.log as "METHOD PATH RANGE AUTH". A file
STATE_DIR/OWNER--REPO.mode changes how /_cdn answers: "cut-once" (send half the bytes,
drop the connection, then behave), "cut" (always so), "corrupt" (one byte flipped),
"slow" (64 KiB every 20 ms).
"""
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

CONFIG = json.load(open(sys.argv[1]))
STATE = sys.argv[2]
LOCK = threading.Lock()
INFO = {}  # (repo, path) -> (sha256, git oid, size)


def commit_of(repo):
    return hashlib.sha1(repo.encode()).hexdigest()


for repo, spec in CONFIG.items():
    for path, local in spec["files"].items():
        data = open(local, "rb").read()
        git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        INFO[(repo, path)] = (hashlib.sha256(data).hexdigest(), git, len(data))


def mode_of(repo):
    try:
        return open(os.path.join(STATE, repo.replace("/", "--") + ".mode")).read().strip()
    except OSError:
        return "ok"


def set_mode(repo, mode):
    with open(os.path.join(STATE, repo.replace("/", "--") + ".mode"), "w") as f:
        f.write(mode)


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self):
        with LOCK, open(os.path.join(STATE, "requests.log"), "a") as f:
            f.write("%s %s %s %s\n" % (self.command, self.path,
                                        self.headers.get("Range", "-").replace(" ", ""),
                                        (self.headers.get("Authorization") or "-").replace(" ", "_")))

    def reply(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error_json(self, code, msg):
        self.reply(code, json.dumps({"error": msg}).encode(), [("Content-Type", "application/json")])

    def authorized(self, repo):
        want = CONFIG[repo].get("token")
        if not want:
            return True
        got = self.headers.get("Authorization")
        if not got:
            self.error_json(401, "Access to model %s is restricted." % repo)
            return False
        if got != "Bearer " + want:
            self.error_json(403, "Access to model %s is restricted and you are not in the authorized list." % repo)
            return False
        return True

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record()
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
            repo = parts[2] + "/" + parts[3]
            rev = "/".join(parts[5:])
            if repo not in CONFIG:
                return self.error_json(401, "Repository not found")
            if not self.authorized(repo):
                return
            if rev not in ("main", commit_of(repo)):
                return self.error_json(404, "Revision Not Found")
            out = []
            for path in sorted(CONFIG[repo]["files"]):
                sha, git, size = INFO[(repo, path)]
                e = {"type": "file", "oid": git, "size": size, "path": path}
                if path.endswith(".gguf"):
                    e["lfs"] = {"oid": sha, "size": size, "pointerSize": 134}
                out.append(e)
            return self.reply(200, json.dumps(out).encode(), [("Content-Type", "application/json")])
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = parts[0] + "/" + parts[1]
            rev, path = parts[3], "/".join(parts[4:])
            if repo not in CONFIG:
                return self.error_json(401, "Repository not found")
            if not self.authorized(repo):
                return
            if rev not in ("main", commit_of(repo)) or (repo, path) not in INFO:
                return self.error_json(404, "Entry not found")
            sha, git, size = INFO[(repo, path)]
            return self.reply(302, b"", [("Location", "/_cdn/%s/%s" % (repo, path)),
                                         ("X-Repo-Commit", commit_of(repo)),
                                         ("X-Linked-Etag", '"%s"' % sha),
                                         ("X-Linked-Size", str(size))])
        if parts[0] == "_cdn" and len(parts) >= 4:
            repo, path = parts[1] + "/" + parts[2], "/".join(parts[3:])
            if (repo, path) not in INFO:
                return self.error_json(404, "no such object")
            data = open(CONFIG[repo]["files"][path], "rb").read()
            mode = mode_of(repo)
            if mode == "corrupt":
                data = data[:1000] + bytes([data[1000] ^ 0x55]) + data[1001:]
            start = 0
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
                if start >= len(data):
                    return self.reply(416, b"", [("Content-Range", "bytes */%d" % len(data))])
            body = data[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if mode in ("cut", "cut-once"):
                if mode == "cut-once":
                    set_mode(repo, "ok")
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            if mode == "slow":  # 64 KiB every 20 ms, so that two clients overlap
                for i in range(0, len(body), 65536):
                    self.wfile.write(body[i:i + 65536])
                    self.wfile.flush()
                    time.sleep(0.02)
                return
            self.wfile.write(body)
            return
        self.error_json(404, "not found")


server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
with open(os.path.join(STATE, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(STATE, "port.tmp"), os.path.join(STATE, "port"))
server.serve_forever()
