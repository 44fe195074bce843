"""`trainbpf serve`'s HTTP side against clients that misbehave
(docs/metrics.md, "HTTP side"), on loopback: slow and idle connections,
a flood of wrong passwords, a web config another user could change, a
SIGHUP while another user tries to take the port, --listen checked.

What another user would do runs as `nobody`. Every bound comes from the
daemon's own limits (user/app/http_guard.h, user/app/exporter.c) or from
a bcrypt timed here, not from this machine's speed. Clients of a second
address use 127.0.0.2 (loopback: the whole of 127/8 is this machine).

TRAINBPF_UNDER_TEST=path runs these tests against another binary (to see
them fail on the code before a change).
"""
import base64
import http.client
import json
import os
import pathlib
import pwd
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import pytest

import conftest
import test_serve
from test_serve import Serve, free_port, wait_for
from test_serve_tls import bcrypt, certs  # noqa: F401  (certs: a fixture)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt

if os.environ.get("TRAINBPF_UNDER_TEST"):
    test_serve.TRAINBPF = os.environ["TRAINBPF_UNDER_TEST"]
TRAINBPF = test_serve.TRAINBPF

HEADER_S = 5        # GUARD_HEADER_MS: a request's headers must come within it
PER_ADDR = 32       # PER_ADDR_CONNS: connections one address may hold
AUTH_BURST = 10     # GUARD_AUTH_BURST, GUARD_AUTH_PER_S: failed logins per address
AUTH_PER_S = 1.0
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
NO_JOB = ("--match", "^no-such-job$")


def scrape(port, src="127.0.0.1", auth=None, timeout=HEADER_S + 2):
    """(status, seconds) of one GET /metrics on a new connection."""
    t = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(src, 0))
    try:
        headers = {}
        if auth:
            headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        r.read()
        return r.status, time.monotonic() - t
    finally:
        c.close()


def as_nobody(code, *args):
    """A Python program run as nobody (another user of the machine)."""
    return subprocess.Popen([*NOBODY, sys.executable, "-c", code, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answering(port):
    try:
        scrape(port, timeout=2)
        return True
    except OSError:
        return False


class AuthServe(Serve):
    """Serve, up once /metrics answers at all (a 401 included)."""

    def __init__(self, tmp_path, name, *args):
        ok = test_serve.serving
        test_serve.serving = answering
        try:
            super().__init__(tmp_path, name, *args)
        finally:
            test_serve.serving = ok


def serve_log(srv):
    return open(srv.log.name).read()


def test_start_says_where_it_serves(tmp_path):
    srv = Serve(tmp_path, "serve", *NO_JOB)
    try:
        assert srv.stop() == 0
    finally:
        srv.stop()
    assert f"trainbpf: serving /metrics on http://127.0.0.1:{srv.port}\n" in serve_log(srv)


@pytest.mark.parametrize("listen", ["127.0.0.1:99999", "", ":0", "127.0.0.1:0", "127.0.0.1:",
                                    "0", "65536"])
def test_listen_port_checked(listen):
    """A port outside 1-65535, or none: one line, exit 1 (getaddrinfo took
    99999 modulo 65536, and 0 or nothing as a port of the kernel's choice)."""
    try:
        r = subprocess.run([TRAINBPF, "serve", "--listen", listen, *NO_JOB],
                           capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"--listen '{listen}' was taken: serve ran")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--listen" in r.stderr, r.stderr


def test_every_interface_warned():
    """0.0.0.0: a warning line. The port is taken here (bound, never
    listening: nothing is served on any interface), so serve exits 1."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
        r = subprocess.run([TRAINBPF, "serve", "--listen", f"0.0.0.0:{port}", *NO_JOB],
                           capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert "warning: --listen 0.0.0.0:%d serves /metrics on every interface" % port in r.stderr
    assert "cannot listen" in r.stderr


def trickle(port, out, i, until):
    """A slowloris: one header byte a second; out[i] = seconds until the
    daemon closed it (None: still open at until)."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    msg = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 64
    try:
        for b in msg:
            if time.monotonic() > until:
                return
            r, _, _ = select.select([s], [], [], 1.0)
            if r and not s.recv(100):
                out[i] = time.monotonic() - t0
                return
            s.send(bytes([b]))
    except OSError:
        out[i] = time.monotonic() - t0
    finally:
        s.close()


def test_slow_clients_cut_and_scrapes_answered(tmp_path):
    """16 clients sending a header byte a second: each is cut within the
    header deadline (+2 s), and a scrape meanwhile answers within it."""
    srv = Serve(tmp_path, "serve", *NO_JOB)
    out = [None] * 16
    until = time.monotonic() + HEADER_S + 6
    threads = [threading.Thread(target=trickle, args=(srv.port, out, i, until))
               for i in range(16)]
    try:
        for t in threads:
            t.start()
        time.sleep(1)
        for _ in range(3):
            try:
                status, took = scrape(srv.port)
            except OSError as e:
                pytest.fail(f"a scrape beside 16 slow clients failed: {e!r}")
            assert status == 200 and took < HEADER_S + 2, (status, took)
    finally:
        for t in threads:
            t.join(timeout=HEADER_S + 10)
        assert srv.stop() == 0
    assert all(o is not None and o < HEADER_S + 2 for o in out), out


HOLD = r"""
import socket, sys, time
src, port, n, secs, reopen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1"
end = time.monotonic() + secs
socks, opened, refused = [], 0, 0
def one():
    global opened
    s = socket.socket(); s.settimeout(1); s.bind((src, 0)); s.connect(("127.0.0.1", port))
    s.setblocking(False); opened += 1
    return s
while time.monotonic() < end:
    while len(socks) < n:
        try: socks.append(one())
        except OSError: break
    time.sleep(0.05)
    for s in list(socks):
        try:
            if s.recv(1) == b"":
                raise OSError
        except BlockingIOError:
            continue
        except OSError:
            pass
        socks.remove(s); s.close(); refused += 1
        if not reopen:
            n -= 1
print(opened, refused)
"""


def test_idle_connections_reopened_by_another_user(tmp_path):
    """nobody keeps 16 idle connections from 127.0.0.1, reopening each the
    moment it is cut: every scrape of root's is answered, within the
    header deadline (+2 s)."""
    srv = Serve(tmp_path, "serve", *NO_JOB)
    secs = 2 * HEADER_S + 2
    hog = as_nobody(HOLD, "127.0.0.1", srv.port, 16, secs, "1")
    try:
        time.sleep(1)
        answered = 0
        for _ in range(8):
            try:
                status, took = scrape(srv.port)
                answered += status == 200 and took < HEADER_S + 2
            except OSError:
                pass
            time.sleep(0.5)
        out, err = hog.communicate(timeout=secs + 10)
    finally:
        if hog.poll() is None:
            hog.kill()
        assert srv.stop() == 0
    assert hog.returncode == 0, err
    opened, cut = map(int, out.split())
    assert answered == 8, (answered, out)
    assert cut >= 16, out       # the idle ones were cut (and reopened)


def test_second_address_served_beside_a_full_one(tmp_path):
    """nobody holds all the connections 127.0.0.2 may have (and tries for
    more): a client of another address is answered at once."""
    srv = Serve(tmp_path, "serve", *NO_JOB)
    secs = HEADER_S
    hog = as_nobody(HOLD, "127.0.0.2", srv.port, PER_ADDR + 8, secs, "0")
    try:
        time.sleep(1.5)
        for _ in range(3):
            try:
                status, took = scrape(srv.port, timeout=HEADER_S - 2)
            except OSError as e:
                pytest.fail(f"127.0.0.1 refused while 127.0.0.2 held its all: {e!r}")
            assert status == 200, status
        out, err = hog.communicate(timeout=secs + 10)
    finally:
        if hog.poll() is None:
            hog.kill()
        assert srv.stop() == 0
    opened, refused = map(int, out.split())
    assert refused >= 8, out    # past PER_ADDR: closed at once


def auth_config(tmp_path, password="s3cret", user="prom"):
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  {user}: {bcrypt(password)}\n")
    config.chmod(0o600)
    return config


def bcrypt_s(config):
    """How long one bcrypt of the config's hash takes here (the median of 3)."""
    h = config.read_text().split()[-1]
    times = []
    for _ in range(3):
        t = time.monotonic()
        crypt.crypt("wrong", h)
        times.append(time.monotonic() - t)
    return statistics.median(times)


FLOOD = r"""
import base64, http.client, sys, threading, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + secs
codes = {}
tok = "Basic " + base64.b64encode(b"prom:guess").decode()
def flood():
    while time.monotonic() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.0.2", 0))
            c.request("GET", "/metrics", headers={"Authorization": tok})
            r = c.getresponse(); r.read(); c.close()
            codes[r.status] = codes.get(r.status, 0) + 1
        except OSError:
            codes[0] = codes.get(0, 0) + 1
ts = [threading.Thread(target=flood) for _ in range(16)]
[t.start() for t in ts]; [t.join() for t in ts]
print(codes)
"""


def test_wrong_password_flood(tmp_path):
    """nobody floods wrong passwords on 16 connections from 127.0.0.2:
    root's scrape (its credentials passed once) stays under one bcrypt's
    time, and the flood gets bcrypt only as often as the limit allows."""
    config = auth_config(tmp_path)
    t_bcrypt = bcrypt_s(config)
    srv = AuthServe(tmp_path, "serve", *NO_JOB, "--web.config.file", str(config))
    secs = 6.0
    try:
        assert scrape(srv.port, auth="prom:s3cret")[0] == 200
        flood = as_nobody(FLOOD, srv.port, secs)
        time.sleep(1)
        took = []
        for _ in range(9):
            status, t = scrape(srv.port, auth="prom:s3cret")
            assert status == 200, status
            took.append(t)
            time.sleep(0.3)
        out, err = flood.communicate(timeout=secs + 30)
    finally:
        if flood.poll() is None:
            flood.kill()
        assert srv.stop() == 0
    codes = eval(out)           # {status: count}, printed by FLOOD
    assert statistics.median(took) < t_bcrypt, (took, t_bcrypt)
    # each 401 cost a bcrypt: a burst, then AUTH_PER_S, and 16 in flight
    assert codes.get(401, 0) <= AUTH_BURST + AUTH_PER_S * (secs + 1) + 16, codes
    assert codes.get(429, 0) > 0, codes


def test_unknown_user_costs_a_bcrypt(tmp_path):
    """A wrong password and an unknown user take the same time (a bcrypt
    each): the answer's time does not tell which users exist."""
    config = auth_config(tmp_path)
    t_bcrypt = bcrypt_s(config)
    srv = AuthServe(tmp_path, "serve", *NO_JOB, "--web.config.file", str(config))
    known, unknown = [], []
    try:
        for _ in range(AUTH_BURST // 2):    # within the limit of failures
            status, t = scrape(srv.port, src="127.0.0.3", auth="prom:wrong")
            assert status == 401
            known.append(t)
            status, t = scrape(srv.port, src="127.0.0.3", auth="nosuchuser:wrong")
            assert status == 401
            unknown.append(t)
    finally:
        assert srv.stop() == 0
    k, u = statistics.median(known), statistics.median(unknown)
    assert k > t_bcrypt / 2, (k, t_bcrypt)
    assert u > k / 2, (known, unknown)


def start_fails(config, tmp_path):
    r = subprocess.run([TRAINBPF, "serve", "--listen", f"127.0.0.1:{free_port()}", *NO_JOB,
                        "--web.config.file", str(config)], capture_output=True, text=True,
                       timeout=20)
    return r.returncode, r.stderr


@pytest.fixture
def shared():
    """A world-writable sticky directory, as /tmp is, that nobody can reach."""
    d = tempfile.mkdtemp(prefix="tb-shared-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield pathlib.Path(d)
    shutil.rmtree(d)


def nobody_ids():
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


def untrusted(kind, tmp_path, certs, shared):
    """A web config (or a file it names) that another user can change."""
    good = auth_config(tmp_path)
    if kind == "world-writable":
        good.chmod(0o666)
        return good, "writable by group or others"
    if kind == "owned-by-nobody":
        os.chown(good, *nobody_ids())
        return good, "owned by uid"
    if kind == "link-planted-by-nobody":
        d = shared
        theirs = d / "theirs.yml"
        subprocess.run([*NOBODY, "sh", "-c", f"echo '{{}}' > {theirs} && "
                        f"ln -s {theirs} {d / 'web.yml'}"], check=True)
        return d / "web.yml", "symbolic link"
    if kind == "key-writable":
        for f in ("server.crt", "server.key"):
            (tmp_path / f).write_bytes((certs / f).read_bytes())
        (tmp_path / "server.key").chmod(0o666)
        config = tmp_path / "tls.yml"
        config.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
        return config, "server.key: writable by group or others"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["world-writable", "owned-by-nobody", "link-planted-by-nobody",
                                  "key-writable"])
def test_untrusted_web_config_refused(kind, tmp_path, certs, shared):
    config, said = untrusted(kind, tmp_path, certs, shared)
    try:
        rc, err = start_fails(config, tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("serve started with it")
    assert rc == 1 and err.count("\n") == 1 and said in err, err


def test_sighup_with_a_swapped_config_keeps_auth(tmp_path, shared):
    """The config made writable and emptied by nobody, then SIGHUP: refused,
    said on stderr, and basic auth still asked for."""
    config = auth_config(shared)
    srv = AuthServe(tmp_path, "serve", *NO_JOB, "--web.config.file", str(config))
    try:
        assert scrape(srv.port)[0] == 401
        config.chmod(0o666)
        subprocess.run([*NOBODY, "sh", "-c", f"echo '{{}}' > {config}"], check=True)
        srv.p.send_signal(signal.SIGHUP)
        wait_for("the refusal", lambda: "writable by group or others" in serve_log(srv), 10)
        assert scrape(srv.port)[0] == 401
        assert scrape(srv.port, auth="prom:s3cret")[0] == 200
    finally:
        assert srv.stop() == 0
    assert "SIGHUP: keeping the web config loaded before" in serve_log(srv)


BIND_LOOP = r"""
import socket, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + secs
won = 0
while time.monotonic() < end:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port)); s.listen(); won = 1; break
    except OSError:
        s.close()
print(won)
"""


def test_sighup_never_leaves_serve_without_a_listener(tmp_path, certs):
    """nobody tries to bind the port all through 5 SIGHUPs (a new password
    each) and one with a key that is not the certificate's: it never gets
    the port, every scrape meanwhile is answered, and the last good config
    serves."""
    config = auth_config(tmp_path)
    srv = AuthServe(tmp_path, "serve", *NO_JOB, "--web.config.file", str(config))
    loop = as_nobody(BIND_LOOP, srv.port, 8)
    answered, asked = 0, 0
    try:
        time.sleep(0.5)
        for i in range(5):
            auth_config(tmp_path, password=f"pw{i}")
            srv.p.send_signal(signal.SIGHUP)
            for _ in range(4):
                asked += 1
                try:
                    answered += scrape(srv.port, timeout=2)[0] in (200, 401)
                except OSError:
                    pass
                time.sleep(0.1)
        for f in ("server.crt", "client.key"):
            (tmp_path / f).write_bytes((certs / f).read_bytes())
        config.write_text("tls_server_config:\n  cert_file: server.crt\n  key_file: client.key\n")
        srv.p.send_signal(signal.SIGHUP)
        wait_for("the refusal", lambda: "SIGHUP: no daemon starts" in serve_log(srv), 10)
        assert scrape(srv.port, auth="prom:pw4")[0] == 200
        out, err = loop.communicate(timeout=30)
    finally:
        if loop.poll() is None:
            loop.kill()
        assert srv.stop() == 0
    assert out.strip() == "0", ("nobody got the port", serve_log(srv))
    assert answered == asked, (answered, asked, serve_log(srv))
    assert serve_log(srv).count("SIGHUP: the new web config serves") == 5


def accepted(port, client_port):
    """Whether serve has accepted the connection from client_port: one still
    in the listening socket's queue has no file yet (inode 0 in /proc/net/tcp)."""
    for line in open("/proc/net/tcp").readlines()[1:]:
        f = line.split()
        if (int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16)) == (port, client_port):
            return int(f[9]) != 0
    return False


def test_sighup_answers_what_the_old_config_accepted(tmp_path):
    """A scrape the old daemon accepted before a SIGHUP is answered after it
    (with the old config, which let it in): the old daemon stops accepting
    but is not stopped under its connections. (Stopped at once, it closed
    them unanswered: a scrape in flight at a reload failed, 1 in 20 on CI.)"""
    config = auth_config(tmp_path)
    srv = AuthServe(tmp_path, "serve", *NO_JOB, "--web.config.file", str(config))
    auth = base64.b64encode(b"prom:s3cret").decode()
    c = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    try:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        wait_for("the old daemon to accept it",
                 lambda: accepted(srv.port, c.getsockname()[1]), 5)
        auth_config(tmp_path, password="new")
        srv.p.send_signal(signal.SIGHUP)
        wait_for("the new config", lambda: "the new web config serves" in serve_log(srv), 10)
        c.sendall(f"Authorization: Basic {auth}\r\n\r\n".encode())
        head = c.recv(64)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert scrape(srv.port, auth="prom:new")[0] == 200
        assert scrape(srv.port, auth="prom:s3cret")[0] == 401
    finally:
        c.close()
        assert srv.stop() == 0


def test_old_daemons_are_kept_four_at_most(tmp_path):
    """Five SIGHUPs, each with a connection the daemon before it accepted
    and that has not sent its request yet: the fifth reload stops the oldest
    old daemon (its connection ends unanswered), the four others answer.
    Each connection has 5 s for its headers (http_guard.h); the five reloads
    take about 0.3 s each here."""
    config = auth_config(tmp_path)
    srv = AuthServe(tmp_path, "serve", *NO_JOB, "--web.config.file", str(config))
    auth = base64.b64encode(b"prom:s3cret").decode()
    conns = []
    try:
        for i in range(5):
            c = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            conns.append(c)
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            wait_for("its daemon to accept it", lambda: accepted(srv.port, c.getsockname()[1]), 5)
            srv.p.send_signal(signal.SIGHUP)
            wait_for(f"reload {i + 1}",
                     lambda: serve_log(srv).count("the new web config serves") == i + 1, 10)
        heads = []
        for c in conns:
            try:
                c.sendall(f"Authorization: Basic {auth}\r\n\r\n".encode())
                heads.append(c.recv(12))
            except OSError:
                heads.append(b"")
        assert heads == [b""] + [b"HTTP/1.1 200"] * 4, heads
    finally:
        for c in conns:
            c.close()
        assert srv.stop() == 0


def test_gzip_when_the_scraper_takes_it(tmp_path):
    """Prometheus sends Accept-Encoding: gzip: the exposition goes gzip'ed
    (a tenth of its size or less), the same text once unzipped; a client
    that does not ask, or refuses it (q=0), gets it plain."""
    import gzip
    srv = Serve(tmp_path, "serve")
    try:
        def get(enc):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            c.request("GET", "/metrics", headers={"Accept-Encoding": enc} if enc else {})
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.getheader("Content-Encoding"), r.getheader("Vary"), body
        enc, vary, gz = get("gzip")
        assert enc == "gzip" and vary == "Accept-Encoding", (enc, vary)
        text = gzip.decompress(gz).decode()
        assert "# TYPE trainbpf_build_info gauge" in text
        for refusal in (None, "identity", "gzip;q=0", "br, *;q=0"):
            enc, _, plain = get(refusal)
            assert enc is None, refusal
            assert plain.decode().startswith("# HELP"), refusal
        enc, _, gz2 = get("deflate, gzip;q=0.5")
        assert enc == "gzip" and gzip.decompress(gz2).decode().startswith("# HELP")
    finally:
        assert srv.stop() == 0
