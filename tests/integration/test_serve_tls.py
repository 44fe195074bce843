"""`trainbpf serve --web.config.file`: TLS, basic auth and client
certificates in the web-config format of Prometheus' exporters, checked
with real clients: Python's TLS stack and Debian's Prometheus scraping
over HTTPS with basic auth. Certificates come from openssl, the bcrypt
hash from the system's crypt (libxcrypt), as `htpasswd -B` makes them.
"""
import base64
import json
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings

import pytest

from conftest import TRAINBPF
from test_serve import free_port, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt


def bcrypt(password):
    h = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    assert h.startswith("$2b$10$"), h
    return h


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and a client certificate."""
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"),
                      ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                "-out", f"{name}.crt", cwd=d)
    return d


class Daemon:
    def __init__(self, config, *extra):
        self.port = free_port()
        self.p = subprocess.Popen([TRAINBPF, "serve", "--listen", f"127.0.0.1:{self.port}",
                                   "--web.config.file", str(config), "--match", "^no-such-job$",
                                   *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)

    def get(self, ctx, user=None, password=None, scheme="https"):
        req = urllib.request.Request(f"{scheme}://127.0.0.1:{self.port}/metrics")
        if user:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=30)
        return rc, self.p.stderr.read()


def client_context(certs, with_cert=False):
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    if with_cert:
        ctx.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    return ctx


def status_or_none(d, ctx, user, password):
    """The status, or None while the daemon restarts its listener (SIGHUP)."""
    try:
        return d.get(ctx, user, password)[0]
    except OSError:
        return None


def up(d, ctx, **auth):
    try:
        return d.get(ctx, **auth)[0] in (200, 401, 403)
    except (OSError, ssl.SSLError):
        return d.p.poll() is not None


def test_tls_and_basic_auth(certs, tmp_path):
    config = tmp_path / "web.yml"
    hash1 = bcrypt("s3cret")
    config.write_text(f"""
tls_server_config:
  cert_file: {certs / 'server.crt'}
  key_file: {certs / 'server.key'}
  min_version: TLS12
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
basic_auth_users:
  prom: {hash1}
""")
    d = Daemon(config)
    ctx = client_context(certs)
    try:
        wait_for("the daemon over TLS", lambda: up(d, ctx), 60)
        assert d.p.poll() is None, d.stop()
        status, headers, _ = d.get(ctx)
        assert status == 401 and 'Basic realm="trainbpf"' in headers.get("WWW-Authenticate", "")
        assert d.get(ctx, "prom", "wrong")[0] == 401
        assert d.get(ctx, "nobody", "s3cret")[0] == 401
        status, headers, body = d.get(ctx, "prom", "s3cret")
        assert status == 200 and "trainbpf_build_info" in body
        assert headers.get("X-Frame-Options") == "deny"
        # the same password again: the cache, no bcrypt (same answer)
        assert d.get(ctx, "prom", "s3cret")[0] == 200
        # plain HTTP gets no metrics
        with pytest.raises(Exception):
            d.get(None, "prom", "s3cret", scheme="http")
        scrape_with_prometheus(certs, tmp_path, d.port)
        # SIGHUP reads the file again: a new password, the old one refused
        config.write_text(config.read_text().replace(hash1, bcrypt("n3w")))
        d.p.send_signal(signal.SIGHUP)
        wait_for("the new password", lambda: status_or_none(d, ctx, "prom", "n3w") == 200, 10)
        assert d.get(ctx, "prom", "s3cret")[0] == 401
        # a bad file at SIGHUP: said, and the last good one goes on
        config.write_text("tls_server_config: [\n")
        d.p.send_signal(signal.SIGHUP)
        time.sleep(1.5)
        assert d.p.poll() is None and d.get(ctx, "prom", "n3w")[0] == 200
    finally:
        rc, err = d.stop()
    assert rc == 0, err
    assert "SIGHUP: keeping the web config loaded before" in err, err


def scrape_with_prometheus(certs, tmp_path, port):
    """Debian's Prometheus scrapes it over HTTPS with basic auth: up is 1."""
    prom_port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(json.dumps({
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{
            "job_name": "trainbpf", "scheme": "https",
            "tls_config": {"ca_file": str(certs / "ca.crt")},
            "basic_auth": {"username": "prom", "password": "s3cret"},
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]}))
    p = subprocess.Popen(["prometheus", f"--config.file={cfg}",
                          f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                          f"--web.listen-address=127.0.0.1:{prom_port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode(
        {"query": 'up{job="trainbpf"}'})

    def scraped():
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                res = json.loads(r.read())["data"]["result"]
            return res and res[0]["value"][1] == "1"
        except OSError:
            return False
    try:
        wait_for("Prometheus to scrape over HTTPS with basic auth", scraped, 60)
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_client_certificates(certs, tmp_path):
    config = tmp_path / "web.yml"
    config.write_text(f"""
tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
""")
    # file names are relative to the config's directory
    for f in ("server.crt", "server.key", "ca.crt"):
        (tmp_path / f).write_bytes((certs / f).read_bytes())
    d = Daemon(config)
    try:
        good = client_context(certs, with_cert=True)
        wait_for("the daemon over TLS", lambda: up(d, good), 60)
        assert d.get(good)[0] == 200
        try:
            status = d.get(client_context(certs))[0]
        except (ssl.SSLError, OSError):
            status = "refused"
        assert status in (403, "refused"), status
    finally:
        rc, err = d.stop()
    assert rc == 0, err


@pytest.mark.parametrize("text,said", [
    ("basic_auth_users:\n  prom: plaintext\n", "not a bcrypt hash"),
    ("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: x.key\n",
     "/nonexistent.crt"),
    ("tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "not supported"),
    ("web_listen_addresses: [':9100']\n", "unknown setting"),
    ("tls_server_config:\n  client_auth_type: RequestClientCert\n  cert_file: a\n",
     "not supported"),
    ("basic_auth_users: [\n", "line"),
])
def test_bad_web_config_is_one_line(tmp_path, text, said):
    config = tmp_path / "web.yml"
    config.write_text(text)
    r = subprocess.run([TRAINBPF, "serve", "--listen", f"127.0.0.1:{free_port()}",
                        "--web.config.file", str(config)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and said in r.stderr, r.stderr
