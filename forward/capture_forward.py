#!/usr/bin/env python3
"""capture-forward: deliver webhook requests captured by capture to a local handler.

Pulls the requests an endpoint captures from capture's read API and delivers
each one, once, to a handler on this machine: same method, the captured path
and query appended to --to, the same headers (minus hop-by-hop ones, Host set
to the target) and the same body bytes. It never listens on a port or opens a
tunnel, and it does not retry a failed delivery.

Python 3.10 or newer, standard library only. This is the single-file twin of
`capture forward`; both behave the same.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import ipaddress
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone


def launched():
    """When this process was created, as the kernel counts it: now, less the
    time the process has been on or waiting for a CPU (/proc/self/schedstat),
    kept within the 10 ms tick in which it was created (/proc/self/stat).
    Python takes tens of milliseconds to start, and a script that starts the
    client and sends a webhook at once has it captured by then; it still
    counts as new. Elsewhere, or if /proc says nothing, the moment of this
    call."""
    now = time.time()
    try:
        with open("/proc/self/schedstat") as f:
            running, waiting = (int(v) for v in f.read().split()[:2])
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(")") + 1:].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / 100  # USER_HZ is 100
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    if age < 0:
        return now
    created_tick = now - age
    return min(max(now - (running + waiting) / 1e9, created_tick), created_tick + 0.01 - 1e-6, now)


LAUNCHED = launched()

if sys.version_info < (3, 10):
    sys.exit("capture-forward.py: needs Python 3.10 or newer")

API_PREFIX = "/api/v1"
DEFAULT_API = "http://127.0.0.1:7780" + API_PREFIX
DEFAULT_INTERVAL = 2
MAX_LIMIT = 100
# The longest the API holds a list call open (wait=).
MAX_WAIT = 30
DELIVERY_TIMEOUT = 30.0
CALL_TIMEOUT = 30.0
RECORD_TIMEOUT = 10.0
# Answers that ask to call again after Retry-After (rate limited, busy).
COME_BACK_LATER = (429, 503)
MAX_RESPONSE_DRAIN = 1 << 20
# Caps of a recorded delivery's fields, in bytes.
MAX_TARGET_URL = 2 << 10
MAX_ERROR = 4 << 10

PROG = "capture-forward.py"
EXIT_START = 2
EXIT_USAGE = 2

# Headers that describe one connection rather than the request; Host and
# Content-Length follow the new target and body.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
    "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    "host", "content-length",
}

DESCRIPTION = """\
Deliver webhook requests captured by capture to a local handler.

Each request captured after the start is sent once, oldest first, as soon as it
is captured (every pull is a long-poll that the API holds): same method,
the captured path and query appended to --to, the same headers (minus hop-by-hop
ones; Host set to the target) and the same body bytes. Results are printed and
recorded in the request's delivery history. No retries, no listening port, no
tunnel.
"""

EPILOG = """\
The API key comes from $CAPTURE_API_KEY, else $CAPTURE_KEY, else
credentials.json in capture's data dir (--data-dir, else $CAPTURE_DATA_DIR,
else $XDG_DATA_HOME/capture or ~/.local/share/capture; on macOS
~/Library/Application Support/capture). --api defaults from the same file,
else http://127.0.0.1:7780/api/v1.

--output json prints NDJSON on stdout: one {"type":"ready"} object, one
{"type":"delivery"} object per delivery (time, request_id, method, path, url,
status, error, error_class, duration_ms, bytes) and a {"type":"summary"} on
stop. Warnings go to stderr.

Exit codes: 0 after Ctrl-C, 2 for a bad flag or a failed start (bad key,
unknown endpoint, API unreachable), 1 when the API stops accepting the key or
the endpoint mid-run.

examples:
  python3 capture-forward.py --endpoint whe_... --to localhost:3000
  CAPTURE_API_KEY=cap_... python3 capture-forward.py --api http://127.0.0.1:7780/api/v1 \\
      --endpoint whe_... --to http://127.0.0.1:8080/hooks --replay-last 5
"""


class StartError(Exception):
    """A failure before forwarding began; its text is the one line shown."""


class Stop(BaseException):
    """Raised by the signal handlers to end the run cleanly."""


class APIError(Exception):
    def __init__(self, status, code, message, fields=None, retry_after=0.0):
        super().__init__(f"{status} {code}: {message}" if code else f"{status}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}
        self.retry_after = retry_after


class NoWaitSlot(Exception):
    """A held list call found all of the project's wait slots taken."""


class Unreachable(Exception):
    def __init__(self, url, err):
        super().__init__(f"cannot reach the API at {url}: {err}")


# ---------------------------------------------------------------- settings


def resolve_data_dir(flag):
    if flag:
        return flag
    env = os.environ.get("CAPTURE_DATA_DIR")
    if env:
        return env
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Application Support", "capture")
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg:
        return os.path.join(xdg, "capture")
    return os.path.join(home, ".local", "share", "capture")


def resolve_credentials(api_flag, data_dir_flag):
    """Returns (api, key) as `capture forward` finds them."""
    key = os.environ.get("CAPTURE_API_KEY", "").strip() or os.environ.get("CAPTURE_KEY", "").strip()
    api = (api_flag or "").strip()
    if not key or not api:
        path = os.path.join(resolve_data_dir(data_dir_flag), "credentials.json")
        saved = {}
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            if not isinstance(saved, dict):
                raise ValueError("not a JSON object")
        except FileNotFoundError:
            if not key:
                raise StartError(
                    f"no API key: set CAPTURE_API_KEY (or CAPTURE_KEY), or save one in {path} with "
                    "`capture key create --save` (a first `capture serve` writes it too)")
        except (OSError, ValueError) as e:
            raise StartError(f"read {path}: {e}")
        if not key:
            key = str(saved.get("key") or "").strip()
            if not key:
                raise StartError(f"no API key: set CAPTURE_API_KEY (or CAPTURE_KEY); {path} holds none")
        if not api:
            api = str(saved.get("api") or "").strip()
    api = api_base_of(api or DEFAULT_API)
    u = urllib.parse.urlsplit(api)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise StartError(f"API URL {api!r}: want an absolute http:// or https:// URL ending in /api/v1")
    return api, key


def api_base_of(raw):
    """The API base URL raw names, without a trailing slash. A URL of the
    server's root ("http://127.0.0.1:7780", with or without "/"), as other
    tools' documentation has one set it, names the API mounted under it at
    /api/v1, rather than routes that do not exist."""
    base = raw.strip().rstrip("/")
    try:
        u = urllib.parse.urlsplit(base)
    except ValueError:
        return base
    if u.netloc and not u.path and not u.query and not u.fragment and "?" not in base and "#" not in base:
        base += API_PREFIX
    return base


def parse_target(s):
    """--to as a base URL; no scheme means http://."""
    s = (s or "").strip()
    if not s:
        raise ValueError("the local handler URL is empty")
    if "://" not in s:
        s = "http://" + s
    try:
        u = urllib.parse.urlsplit(s)
        host = u.hostname
        if u.port == 0:  # parsed, but nothing listens on port 0
            raise ValueError("port 0")
    except ValueError:
        raise ValueError(f"{go_quote(s)} is not an http:// or https:// URL of a local handler (e.g. localhost:3000)")
    if u.scheme not in ("http", "https") or not host:
        raise ValueError(f"{go_quote(s)} is not an http:// or https:// URL of a local handler (e.g. localhost:3000)")
    if u.query or u.fragment or "?" in s or "@" in u.netloc:
        raise ValueError(f"{go_quote(s)}: give the handler's base URL without query, fragment or user info")
    path = escaped_path(u.path)
    if path is None:
        raise ValueError(f"{go_quote(s)} is not an http:// or https:// URL of a local handler (e.g. localhost:3000)")
    # The path is kept as given, a trailing slash included, and escaped as
    # the Go client escapes it: a capture of the bare capture URL is
    # delivered to that very path (join_target). A path of slashes alone is
    # the root, written without one.
    s = f"{u.scheme}://{u.netloc}{path}"
    if not u.path.strip("/"):
        s = s.rstrip("/")
    return s


# What Go's URL.EscapedPath keeps of a path as typed (validEncoded), and
# what it leaves unescaped when it escapes one (shouldEscape, encodePath).
_PATH_TYPED_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "-_.~!$&'()*+,;=:@[]/%")
_PATH_SAFE = "/$&+,:;=@"


def escaped_path(path):
    """path as Go's URL.EscapedPath writes it: as typed when every
    character may stand in a path and every % starts an escape; otherwise
    unescaped and escaped anew. None when a % starts no escape, which Go
    refuses."""
    for i, c in enumerate(path):
        if c == "%" and not all(h in "0123456789abcdefABCDEF" for h in path[i + 1:i + 3].ljust(2, "g")):
            return None
    if all(c in _PATH_TYPED_OK for c in path):
        return path
    raw = urllib.parse.unquote_to_bytes(path.encode("utf-8", "surrogateescape"))
    return urllib.parse.quote(raw, safe=_PATH_SAFE)


class Usage(Exception):
    """A mistake in how the client was called; its text is the one line
    shown, worded as `capture forward` words it."""


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(s):
    """s in double quotes, as the Go client quotes a value it names (Go's
    %q: printable characters as they are, the usual escapes, \\xNN for
    other control bytes, \\uNNNN or \\UNNNNNNNN for other unprintable
    characters)."""
    out = ['"']
    for c in s:
        n = ord(c)
        if c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif n < 0x20 or n == 0x7F:
            out.append("\\x%02x" % n)
        elif 0xDC80 <= n <= 0xDCFF:
            # A byte of the command line that was not UTF-8, which Python
            # keeps as a lone surrogate: Go shows the byte.
            out.append("\\x%02x" % (n - 0xDC00))
        elif c.isprintable() or c == " ":
            out.append(c)
        elif n < 0x10000:
            out.append("\\u%04x" % n)
        else:
            out.append("\\U%08x" % n)
    out.append('"')
    return "".join(out)


def visible(s):
    """s as it is safe to show on a terminal, as the Go client shows it: a C0
    control as ^X (ESC as ^[) but tab and line feed, a lone carriage return
    as ^M; DEL, the C1 controls and the bidi embeddings, overrides and
    isolates (U+202A-U+202E, U+2066-U+2069) as U+FFFD."""
    out = []
    for i, c in enumerate(s):
        n = ord(c)
        if c in "\t\n" or (c == "\r" and s[i + 1:i + 2] == "\n"):
            out.append(c)
        elif n < 0x20:
            out.append("^" + chr(n + 0x40))
        elif n == 0x7F or 0x80 <= n < 0xA0 or 0x202A <= n <= 0x202E or 0x2066 <= n <= 0x2069 \
                or 0xD800 <= n <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(c)
    return "".join(out)


def visible_json(js):
    """JSON text js with what a terminal acts on (DEL, the C1 controls, the
    bidi embeddings, overrides and isolates; json.dumps escapes the C0
    controls itself) as \\u escapes, as the Go client writes it: the same
    JSON to a program, harmless to a terminal it is shown on."""
    return "".join("\\u%04x" % ord(c) if ord(c) == 0x7F or 0x80 <= ord(c) < 0xA0 or 0x202A <= ord(c) <= 0x202E
                   or 0x2066 <= ord(c) <= 0x2069 else c for c in js)


def underscores_ok(s):
    """Whether the underscores in s stand only between digits, or between a
    base prefix and a digit, as Go's number syntax wants them."""
    t = s[1:] if s[:1] in ("+", "-") else s
    i, saw, hexa = 0, "^", False
    if len(t) >= 2 and t[0] == "0" and t[1].lower() in "box":
        i, saw, hexa = 2, "0", t[1].lower() == "x"
    for c in t[i:]:
        if "0" <= c <= "9" or hexa and "a" <= c.lower() <= "f":
            saw = "0"
        elif c == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
    return saw != "_"


def whole_number(s):
    """s read as the Go client reads a number flag (Go's
    strconv.ParseInt(s, 0, 64)): an optional sign, then decimal, 0x hex, 0o
    or 0 octal, or 0b binary, with _ between digits; None if it is none."""
    sign, t = 1, s
    if t[:1] in ("+", "-"):
        sign, t = -1 if t[0] == "-" else 1, t[1:]
    base = 10
    if len(t) > 1 and t[0] == "0":
        if len(t) >= 3 and t[1].lower() in "box":
            base, t = {"b": 2, "o": 8, "x": 16}[t[1].lower()], t[2:]
        else:
            base, t = 8, t[1:]
    digits = t.replace("_", "").lower()
    if not digits or any(c not in "0123456789abcdef"[:base] for c in digits) or not underscores_ok(s):
        return None
    n = sign * int(digits, base)
    return n if -(1 << 63) <= n < (1 << 63) else None


def interval_arg(v):
    n = whole_number(v)
    if n is None:
        raise Usage(f"--interval {v}: want a whole number of seconds from 1 to 60")
    return n


def replay_arg(v):
    n = whole_number(v)
    if n is None:
        raise Usage(f"--replay-last {v}: want a whole number, 0 or more")
    return n


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one line, in the Go client's words,
    rather than a usage block."""

    def error(self, message):
        words = message.split()
        if message.endswith("expected one argument") and len(words) > 1:
            raise Usage("flag needs an argument: " + words[1].split("/")[-1].rstrip(":"))
        raise Usage(message)


def unknown_flag(arg):
    if arg.startswith("--"):
        return "unknown flag: " + arg.split("=", 1)[0]
    return f"unknown shorthand flag: '{arg[1]}' in {arg}"


def parse_args(argv=None):
    """The flags, checked in the Go client's order; raises Usage."""
    args, extra = parser().parse_known_args(argv)
    flags = [a for a in extra if a.startswith("-") and a != "-"]
    if flags:
        raise Usage(unknown_flag(flags[0]))
    if extra:
        raise Usage(f"no arguments expected, got {go_quote(extra[0])}")
    if args.endpoint == "":
        raise Usage("--endpoint is required (an endpoint id, whe_…; `capture endpoint list` shows them)")
    if not args.endpoint.startswith("whe_"):
        raise Usage(f"--endpoint {go_quote(args.endpoint)}: want an endpoint id (whe_…)")
    if args.to == "":
        raise Usage("--to is required (the local handler's base URL, e.g. localhost:3000)")
    if not 1 <= args.interval <= 60:
        raise Usage(f"--interval {args.interval}: want 1 to 60 seconds")
    if args.replay_last < 0:
        raise Usage(f"--replay-last {args.replay_last}: want 0 or more")
    if args.output not in ("text", "json"):
        raise Usage(f"--output {go_quote(args.output)}: want text or json")
    try:
        args.to = parse_target(args.to)
    except ValueError as e:
        raise Usage(f"--to: {e}")
    return args


# --------------------------------------------------------------- API client


def parse_time(s):
    """The API's times: RFC 3339 UTC with milliseconds and Z."""
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


EPOCH = datetime.fromtimestamp(0, timezone.utc)


class API:
    def __init__(self, base, key):
        self.base = base.rstrip("/")
        self.key = key
        host = urllib.parse.urlsplit(self.base).hostname or ""
        handlers = []
        if is_loopback(host):
            # A proxy from the environment must not stand between this
            # machine and its own capture.
            handlers.append(urllib.request.ProxyHandler({}))
        self.opener = urllib.request.build_opener(*handlers)

    def call(self, method, path, query=None, body=None, timeout=CALL_TIMEOUT):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v not in (None, "")})
        data = None
        headers = {"Authorization": "Bearer " + self.key, "Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self.opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
                if resp.status == 204:
                    return None
                if not raw:
                    # Only a server going away mid-answer sends nothing.
                    raise Unreachable(self.base, "the API sent an empty answer")
                try:
                    return json.loads(raw)
                except ValueError:
                    raise APIError(resp.status, "", f"{method} {path}: answer is not the expected JSON") from None
        except urllib.error.HTTPError as e:
            try:
                raw = e.read(1 << 20)
            except OSError:
                raw = b""
            raise api_error(e.code, e.headers, raw) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (socket.timeout, TimeoutError)):
                reason = f"no answer within {int(timeout)}s"
            raise Unreachable(self.base, reason) from None

    def me(self):
        return self.call("GET", "/me")

    def endpoint(self, endpoint_id):
        # No route serves one endpoint: page through the list.
        query = {"limit": MAX_LIMIT}
        while True:
            page = self.call("GET", "/endpoints", query)
            for e in page["items"]:
                if e["id"] == endpoint_id:
                    return e
            if not page.get("next"):
                raise APIError(404, "not_found", f"no endpoint {endpoint_id!r} in this key's project")
            query["before"] = page["next"]

    def requests(self, endpoint_id, **query):
        # A held call may take its wait on top of the usual answer time.
        timeout = CALL_TIMEOUT + int(query.get("wait") or 0)
        if not query.get("wait"):
            query.pop("wait", None)  # as the Go client: no wait, no parameter
        return self.call("GET", "/endpoints/" + urllib.parse.quote(endpoint_id, safe="") + "/requests", query,
                         timeout=timeout)

    def request(self, request_id):
        return self.call("GET", "/requests/" + urllib.parse.quote(request_id, safe=""))

    def record_delivery(self, request_id, report):
        return self.call("POST", "/requests/" + urllib.parse.quote(request_id, safe="") + "/deliveries",
                         body=report, timeout=RECORD_TIMEOUT)


def api_error(status, headers, raw):
    retry_after = 0.0
    ra = (headers.get("Retry-After") or "").strip() if headers else ""
    if ra.isdigit():
        retry_after = float(ra)
    try:
        env = json.loads(raw)["error"]
        return APIError(status, env["code"], env.get("message", ""), env.get("fields"), retry_after)
    except (ValueError, KeyError, TypeError):
        text = raw.decode("utf-8", "replace").strip()
        msg = http.client.responses.get(status, "error")
        if text and len(text) <= 200:
            msg += ": " + text
        return APIError(status, "", msg, None, retry_after)


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ----------------------------------------------------------------- output


def now_json():
    return fmt_json_time(datetime.now(timezone.utc))


def fmt_json_time(t):
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def fmt_bytes(n):
    if n < 1024:
        return f"{n} B"
    v = n / 1024
    for unit in ("KiB", "MiB"):
        if v < 1024:
            return f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} GiB"


class Printer:
    def __init__(self, output, out=sys.stdout, err=sys.stderr):
        self.json = output == "json"
        self.out = out
        self.err = err

    def _line(self, stream, s):
        stream.write(s + "\n")
        stream.flush()

    def _emit(self, obj):
        self._line(self.out, visible_json(json.dumps(obj, ensure_ascii=False, separators=(",", ":"))))

    def ready(self, info):
        if self.json:
            self._emit({"type": "ready", "time": now_json(), "api": info["api"], "project": info["project"],
                        "endpoint": info["endpoint"], "capture_url": info["capture_url"], "to": info["to"],
                        "baseline": info["baseline"], "replay_last": info["replay_last"],
                        "interval_s": info["interval"]})
            return
        rows = [("API", f"{info['api']} (project {info['project']})")]
        if info["capture_url"]:
            rows.append(("Capture", info["capture_url"] + "/…"))
        if info["baseline"]:
            rows.append(("Baseline", info["baseline"] + " (requests captured after it are forwarded)"))
        else:
            rows.append(("Baseline", "none yet (the endpoint is empty; every new request is forwarded)"))
        if info["replay_last"]:
            rows.append(("Replay", f"the {info['replay_last']} newest existing first"))
        rows.append(("Interval", f"every {info['interval']}s"))
        lines = [f"Forwarding {info['endpoint']} → {info['to']}"]
        lines += [f"  {k:<9} {v}" for k, v in rows]
        lines.append("Press Ctrl-C to stop.")
        self._line(self.out, "\n".join(lines))

    def delivery(self, r):
        if self.json:
            self._emit({"type": "delivery", "time": fmt_json_time(r["at"]), "request_id": r["id"],
                        "method": r["method"], "path": r["target"], "url": r["url"],
                        "status": r["status"], "error": r["error"], "error_class": r["class"],
                        "duration_ms": r["duration_ms"], "bytes": r["bytes"]})
            return
        at = r["at"].astimezone().strftime("%H:%M:%S")
        if r["error"] is not None:
            outcome = f"{r['class']} {r['duration_ms']} ms: {r['error']}"
        else:
            outcome = f"{r['reason']} {r['duration_ms']} ms {fmt_bytes(r['bytes'])}"
        # The method and path are the sender's, the reason the handler's:
        # shown, never acted on by the terminal.
        self._line(self.out, f"{at} {r['id']} {visible(r['method'])} {visible(r['target'])} → {visible(outcome)}")

    def warn(self, msg):
        self._line(self.err, "warning: " + msg)

    def info(self, msg):
        self._line(self.err, msg)

    def summary(self, stats, ran):
        if self.json:
            self._emit({"type": "summary", "time": now_json(), "deliveries": stats["deliveries"],
                        "ok": stats["ok"], "non_2xx": stats["non_2xx"], "errors": stats["errors"],
                        "duration_ms": int(ran * 1000)})
            return
        self._line(self.out, f"Stopped after {round(ran)}s: {stats['deliveries']} forwarded "
                             f"({stats['ok']} answered 2xx, {stats['non_2xx']} answered another status, "
                             f"{stats['errors']} got no answer).")


# --------------------------------------------------------------- delivery


def classify(e):
    if isinstance(e, socket.gaierror):
        return "dns"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timeout"
    return "other"


def forward_headers(headers):
    """The captured headers minus hop-by-hop ones and those Connection names."""
    named = set()
    for name, values in headers.items():
        if name.lower() == "connection":
            for v in values:
                named.update(n.strip().lower() for n in v.split(",") if n.strip())
    out = []
    for name, values in headers.items():
        low = name.lower()
        if low in HOP_BY_HOP or low in named:
            continue
        out.extend((name, v) for v in values)
    return out


def has_header(headers, name):
    return any(n.lower() == name for n in headers)


def dot_segment(seg):
    """1 for ".", 2 for "..", 0 otherwise, reading %2e as "."."""
    s = seg.lower().replace("%2e", ".")
    return {".": 1, "..": 2}.get(s, 0)


def resolve_dots(path):
    """The captured path as sent: its dot segments ("." and "..", also %2e)
    resolved within it as RFC 3986 does, so that it never climbs above the
    handler's base path. A path without dot segments comes back as it is."""
    if not path:
        return "/"
    if not path.startswith("/"):
        path = "/" + path
    segs = path[1:].split("/")
    if not any(dot_segment(s) for s in segs):
        return path
    out = []
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        kind = dot_segment(seg)
        if kind == 2 and out:
            out.pop()
        if kind == 0:
            out.append(seg)
        elif last:
            out.append("")
    return "/" + "/".join(out)


def join_target(to, path, query):
    """Where a capture is delivered, as the Go client joins it: the request
    target (path and query) and the whole URL. The captured path is
    appended to the handler's base path, its dot segments resolved
    (resolve_dots); but a capture of the bare capture URL (path "/") goes to
    the base path as given ("/webhook", not "/webhook/"), as `stripe listen
    --forward-to` delivers."""
    u = urllib.parse.urlsplit(to)
    if path in ("", "/"):
        joined = u.path
    else:
        joined = u.path.removesuffix("/") + resolve_dots(path)
    joined = joined or "/"
    if query:
        joined += "?" + query
    return joined, f"{u.scheme}://{u.netloc}{joined}"


def wire(s):
    """Text of the API (a captured header value or request target) as the
    bytes the Go client sends: UTF-8, which gives back the captured bytes
    (the API carries bytes that were not UTF-8 as U+FFFD, and so does
    either client), with a lone surrogate, which JSON can carry and Go
    reads as U+FFFD, as U+FFFD too."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


class _ExactRequestLine:
    """http.client writes the request line as ASCII only, and would refuse
    a captured target with UTF-8 in it (which a raw request line can
    carry); this writes the target's bytes as they are. putrequest is given
    them as Latin-1 text, one character a byte, which it still checks for
    spaces and control bytes."""

    def _encode_request(self, request):
        return request.encode("latin-1")


class _HTTPConnection(_ExactRequestLine, http.client.HTTPConnection):
    pass


class _HTTPSConnection(_ExactRequestLine, http.client.HTTPSConnection):
    pass


def clip(s, n):
    """s cut to at most n UTF-8 bytes at a character boundary, marked "..."."""
    b = s.encode("utf-8")
    if len(b) <= n:
        return s
    return b[:max(n - 3, 0)].decode("utf-8", "ignore") + "..."


def deliver_http(to, method, target, headers, body, had_length):
    """Sends one request to target (path and query, from join_target);
    returns (status, reason). Raises on no answer.

    An empty body is sent with "Content-Length: 0" exactly when the capture
    had one (had_length), whatever the method, but never on a GET or HEAD:
    the Go client cannot send one there, and both send the same."""
    u = urllib.parse.urlsplit(to)
    port = u.port
    if u.scheme == "https":
        conn = _HTTPSConnection(u.hostname, port, timeout=DELIVERY_TIMEOUT, context=ssl.create_default_context())
    else:
        conn = _HTTPConnection(u.hostname, port, timeout=DELIVERY_TIMEOUT)
    try:
        # Host and Accept-Encoding are set here, exactly, rather than by
        # http.client. The target and the header values go as the bytes
        # captured, not as http.client would encode text (ASCII, Latin-1).
        conn.putrequest(method, wire(target).decode("latin-1"), skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", u.netloc)
        for name, value in headers:
            conn.putheader(name, wire(value))
        if body or (had_length and method not in ("GET", "HEAD")):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body if body else None)
        resp = conn.getresponse()
        resp.read(MAX_RESPONSE_DRAIN)
        return resp.status, f"{resp.status} {resp.reason}".strip()
    finally:
        conn.close()


def lost_cursor(gone, baseline, fresh):
    """What follows the loss of cursor gone: the new baseline, and the fresh
    captures delivered. Without a baseline, every capture left is fresh."""
    if baseline and fresh:
        nxt = (f"new baseline: {baseline} (the newest request left that was already seen); "
               f"forwarding the {request_count(fresh)} captured after it")
    elif baseline:
        nxt = (f"new baseline: {baseline} (the newest request left that was already seen); "
               "forwarding what is captured next")
    elif not fresh:
        nxt = "new baseline: none (the endpoint is empty); forwarding what is captured next"
    else:
        nxt = f"new baseline: none (no request left was already seen); forwarding the {request_count(fresh)} left"
    return f"cursor {gone} no longer exists (deleted or pruned); {nxt}"


def request_count(n):
    return "1 request" if n == 1 else f"{n} requests"


class Forwarder:
    def __init__(self, args, api, printer):
        self.endpoint = args.endpoint
        self.to = args.to
        self.interval = args.interval
        self.replay_last = args.replay_last
        self.api = api
        self.out = printer
        self.last = ""
        # Latest received_at of every capture seen: when the cursor is gone,
        # captures received after it are certainly new.
        self.seen_until = EPOCH
        self.handler_down = False
        self.api_down = False
        self.last_problem = ""
        self.rate_limited = False
        # Set while the project has no wait slot free for a pull.
        self.no_wait_slot = False
        self.stats = {"deliveries": 0, "ok": 0, "non_2xx": 0, "errors": 0}
        self.started = time.monotonic()

    # The API's retry policy: 429 and 503 ask to come back after
    # Retry-After; such a call was refused before anything was done, so
    # repeating it is safe.
    def call(self, fn, *args, **kwargs):
        while True:
            try:
                v = fn(*args, **kwargs)
                self.rate_limited = False
                return v
            except APIError as e:
                if e.code == "too_many_waits" and kwargs.get("wait"):
                    raise NoWaitSlot() from None
                if e.status not in COME_BACK_LATER:
                    self.rate_limited = False
                    raise
                wait = e.retry_after or 1.0
                if not self.rate_limited:
                    self.rate_limited = True
                    if e.status == 503:
                        self.out.info(f"API unavailable for now; waiting {wait:g}s as Retry-After asks")
                    else:
                        self.out.info(f"API rate limit reached; waiting {wait:g}s as Retry-After asks")
                time.sleep(wait)

    def start(self):
        api = self.api.base
        try:
            me = self.call(self.api.me)
        except Unreachable as e:
            raise StartError(f"{e} (is `capture serve` running? --api sets the URL)")
        except APIError as e:
            if e.code == "unauthorized":
                raise StartError(f"the API at {api} refused the key (unknown or revoked): "
                                 "set CAPTURE_API_KEY to an active key, or run `capture key create --save`")
            raise StartError(f"API at {api}: {e}")
        try:
            ep = self.call(self.api.endpoint, self.endpoint)
        except Unreachable as e:
            raise StartError(str(e))
        except APIError as e:
            if e.code == "not_found":
                raise StartError(f"endpoint {self.endpoint} not found in project {me['project']['name']!r} "
                                 "(`capture endpoint list` shows the ids)")
            raise StartError(f"API at {api}: {e}")
        try:
            newest = self.existing(max(self.replay_last, 1), LAUNCHED)
        except Unreachable as e:
            raise StartError(str(e))
        except APIError as e:
            raise StartError(f"list the requests of {self.endpoint}: {e}")
        if newest:
            self.last = newest[0]["id"]
        for r in newest:
            self.see(r)
        self.out.ready({"api": api, "project": me["project"]["name"], "endpoint": ep["id"],
                        "capture_url": ep.get("capture_url", ""), "to": self.to, "baseline": self.last or None,
                        "replay_last": self.replay_last, "interval": self.interval})
        replay = newest[:self.replay_last]
        for r in reversed(replay):
            try:
                self.deliver(r)
            except (APIError, Unreachable) as e:
                self.out.warn(f"could not replay {r['id']}: {e}")
        if newest:
            self.last = newest[0]["id"]

    def existing(self, n, launch):
        """At least the n newest captures received by launch (fewer if the
        endpoint holds fewer), newest first; the ones received after it are
        left for the pull loop to deliver as new."""
        # Capture times are kept in milliseconds: one received in the
        # launch's own millisecond may have come after it, and counts as new.
        launch = datetime.fromtimestamp(int(launch * 1000) / 1000, timezone.utc)
        out = []
        query = {"limit": MAX_LIMIT}
        while True:
            page = self.call(self.api.requests, self.endpoint, **query)
            for r in page["items"]:
                if out or parse_time(r["received_at"]) < launch:
                    out.append(r)
            if len(out) >= n or not page.get("next"):
                return out
            query["before"] = page["next"]

    def see(self, r):
        t = parse_time(r["received_at"])
        if t > self.seen_until:
            self.seen_until = t

    def loop(self):
        """Pulls until stopped. Each pull is a long-poll: the API holds it until
        a request is captured, which is then delivered at once, or until the
        interval has passed, so an idle client calls once per interval."""
        while True:
            began = time.monotonic()
            delivered = 0
            failed = True
            try:
                delivered = self.pull()
                failed = False
            except Unreachable as e:
                if not self.api_down:
                    self.api_down = True
                    self.out.warn(f"{e}; retrying every {self.interval}s")
            except APIError as e:
                if e.code == "unauthorized":
                    raise RuntimeError(f"the API refused the key (revoked?): {e}")
                if e.code == "not_found":
                    raise RuntimeError(f"endpoint {self.endpoint} is gone: {e}")
                if str(e) != self.last_problem:
                    self.last_problem = str(e)
                    self.out.warn(f"pull failed: {e}; retrying every {self.interval}s")
            # After deliveries, look again at once. After an empty pull, keep
            # to one call per interval, whether the API held it or could not
            # (no wait slot free); after an error, wait the interval.
            if failed:
                time.sleep(self.interval)
            elif not delivered:
                pause = began + self.interval - time.monotonic()
                if pause > 0:
                    time.sleep(pause)

    def answers(self, cursor):
        """Told that a pull got its list from the API: after a problem, says
        so, naming the cursor deliveries resume after ("" for none), before
        any of them is made."""
        if self.api_down or self.last_problem:
            where = f"after {cursor}" if cursor else "from the start"
            self.out.info(f"API answers again; resuming {where}")
        self.api_down = False
        self.last_problem = ""

    def hold(self):
        return min(self.interval, MAX_WAIT)

    def pull(self):
        """Delivers everything captured after the cursor, oldest first; returns
        how many. Its first call holds until a request is captured or the
        interval passes."""
        delivered = 0
        hold = self.hold()
        rebased = False
        while True:
            if not self.last:
                return delivered + self.pull_fresh("", hold)
            after = self.last
            try:
                page = self.list(after=after, limit=MAX_LIMIT, wait=hold)
            except APIError as e:
                if e.code != "invalid_cursor" or rebased:
                    raise
                n = self.pull_fresh(after, 0)
                delivered += n
                if n:
                    return delivered
                # Nothing new: the pull goes on, holding from the new
                # baseline (or, on an empty endpoint, for its next capture),
                # so that a request captured now is still delivered at once.
                # Once only: a baseline gone as well is for the next pull.
                rebased = True
                continue
            self.answers(after)
            for r in reversed(page["items"]):
                self.deliver(r)
                delivered += 1
            if not page.get("next") or not page["items"]:
                return delivered
            hold = 0  # more are known to be there: no holding for them

    def list(self, **query):
        """Lists the endpoint's requests. A held call takes one of the
        project's few wait slots; when all are taken (too_many_waits), it
        lists without holding, and the loop keeps to one call per interval
        until a slot frees."""
        if query.get("wait"):
            try:
                page = self.call(self.api.requests, self.endpoint, **query)
            except NoWaitSlot:
                if not self.no_wait_slot:
                    self.no_wait_slot = True
                    self.out.info("all of the project's wait slots are taken (too_many_waits); "
                                  f"pulling every {self.interval}s until one frees")
                query["wait"] = 0
            else:
                if self.no_wait_slot:
                    self.no_wait_slot = False
                    self.out.info("a wait slot is free again; requests are delivered as they are captured")
                return page
        return self.call(self.api.requests, self.endpoint, **query)

    def pull_fresh(self, gone, hold):
        """Lists without a cursor: while there is none (the endpoint was
        empty), holding up to hold for a capture received after everything
        seen so far, or when the cursor named by gone no longer exists. The
        newest capture already seen becomes the cursor (none when no such
        capture is left), and the captures received after everything seen
        are delivered, so that nothing is delivered twice and nothing new is
        missed."""
        fresh = []
        baseline = ""
        query = {"limit": MAX_LIMIT, "wait": hold}
        if not gone and self.seen_until > EPOCH:
            # Only what is new may end the hold; a re-list after a lost
            # cursor needs the older ones too, for its baseline.
            query["since"] = fmt_json_time(self.seen_until)
        while True:
            page = self.list(**query)
            query["wait"] = 0
            for r in page["items"]:
                if parse_time(r["received_at"]) > self.seen_until:
                    fresh.append(r)
                elif not baseline:
                    baseline = r["id"]
            if baseline or not page.get("next"):
                break
            query["before"] = page["next"]
        self.answers(baseline)
        if gone:
            self.out.warn(lost_cursor(gone, baseline, len(fresh)))
        self.last = baseline
        for r in reversed(fresh):
            self.deliver(r)
        return len(fresh)

    def deliver(self, summary):
        try:
            req = self.call(self.api.request, summary["id"])
        except APIError as e:
            if e.code == "not_found":
                self.see(summary)  # deleted since it was listed
                return
            raise
        res = self.send(req)
        self.last = summary["id"]
        self.see(summary)
        self.count(res)
        self.out.delivery(res)
        self.note_handler(res)
        self.record(res)

    def send(self, req):
        query = "?" + req["query"] if req["query"] else ""
        target = req["path"] + query
        sent, url = join_target(self.to, req["path"], req["query"])
        res = {"at": datetime.now(timezone.utc), "id": req["id"], "method": req["method"], "target": target,
               "url": url, "status": None, "reason": "", "error": None, "class": None,
               "duration_ms": 0, "bytes": 0}
        try:
            if req.get("body") is not None:
                body = req["body"].encode("utf-8")
            elif req.get("body_base64") is not None:
                body = base64.b64decode(req["body_base64"])
            else:
                body = b""
        except (ValueError, UnicodeError) as e:
            res["error"], res["class"] = f"body: {e}", "other"
            return res
        res["bytes"] = len(body)
        headers = forward_headers(req.get("headers") or {})
        start = time.monotonic()
        try:
            res["status"], res["reason"] = deliver_http(self.to, req["method"], sent, headers, body,
                                                        has_header(req.get("headers") or {}, "content-length"))
        except Exception as e:  # every failure to get an answer is reported, never retried
            res["class"] = classify(e)
            res["error"] = f"no answer within {int(DELIVERY_TIMEOUT)}s" if res["class"] == "timeout" else (
                str(e) or type(e).__name__)
        res["duration_ms"] = int((time.monotonic() - start) * 1000)
        return res

    def count(self, r):
        self.stats["deliveries"] += 1
        if r["error"] is not None:
            self.stats["errors"] += 1
        elif 200 <= r["status"] < 300:
            self.stats["ok"] += 1
        else:
            self.stats["non_2xx"] += 1

    def note_handler(self, r):
        down = r["error"] is not None and r["class"] != "other"
        if down and not self.handler_down:
            self.out.warn(f"local handler {self.to} is unreachable ({r['class']}); deliveries fail until it answers")
        elif r["error"] is None and self.handler_down:
            self.out.info(f"local handler {self.to} answers again")
        if r["error"] is None or down:
            self.handler_down = down

    def record(self, r):
        # The server keeps what fits its caps, and refuses more.
        report = {"target_url": clip(r["url"], MAX_TARGET_URL), "duration_ms": r["duration_ms"],
                  "response_status": r["status"], "error": None}
        if r["error"] is not None:
            report["error"] = clip(f"{r['class']}: {r['error']}", MAX_ERROR)
            report["response_status"] = None
        deadline = time.monotonic() + RECORD_TIMEOUT
        while True:
            try:
                self.api.record_delivery(r["id"], report)
                return
            except APIError as e:
                if e.status in COME_BACK_LATER and time.monotonic() + (e.retry_after or 1.0) < deadline:
                    time.sleep(e.retry_after or 1.0)
                    continue
                self.out.warn(f"could not record the delivery of {r['id']} on the server: {e}")
                return
            except Unreachable as e:
                self.out.warn(f"could not record the delivery of {r['id']} on the server: {e}")
                return


def parser():
    p = Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # Like the Go client, no abbreviated flags: --end is no --endpoint.
        allow_abbrev=False,
    )
    # Required flags and the values' ranges are checked after parsing, in
    # the Go client's order and words (parse_args).
    p.add_argument("--endpoint", default="", metavar="whe_ID",
                   help="webhook endpoint id to forward (required)")
    p.add_argument("--to", default="", metavar="URL",
                   help="base URL of the local handler; the captured path is appended, so do not repeat "
                        "the handler path (required; no scheme means http://)")
    p.add_argument("--api", default="", metavar="URL",
                   help=f"read API base URL (default from credentials.json, else {DEFAULT_API}; "
                        "the server's root means /api/v1 under it)")
    p.add_argument("--interval", type=interval_arg, default=DEFAULT_INTERVAL, metavar="SECONDS",
                   help="seconds between pulls while idle, 1 to 60 (default 2); each pull waits up to that "
                        "long (30 at most) for a new request, which is delivered at once")
    p.add_argument("--replay-last", type=replay_arg, default=0, metavar="N",
                   help="also deliver the N newest existing requests first, oldest first")
    p.add_argument("--output", default="text", metavar="{text,json}",
                   help="text lines, or NDJSON on stdout for scripts and agents (default text)")
    p.add_argument("--data-dir", default="", metavar="DIR",
                   help="capture's data dir, where credentials.json is looked for")
    return p


def main(argv=None):
    try:
        args = parse_args(argv)
    except Usage as e:
        # One line naming what was wrong and where the usage is, as
        # `capture forward` prints it.
        print(f"{PROG}: {e} (see '{PROG} --help')", file=sys.stderr)
        return EXIT_USAGE
    printer = Printer(args.output)

    def stop(signum, frame):
        raise Stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)

    try:
        api, key = resolve_credentials(args.api, args.data_dir)
        fwd = Forwarder(args, API(api, key), printer)
        fwd.start()
    except StartError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_START
    except Stop:
        return 0
    code = 0
    try:
        fwd.loop()
    except Stop:
        pass
    except RuntimeError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        code = 1
    try:
        printer.summary(fwd.stats, time.monotonic() - fwd.started)
    except (OSError, ValueError):
        pass
    return code


if __name__ == "__main__":
    sys.exit(main())
