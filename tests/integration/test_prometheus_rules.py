"""The deployment files in deploy/: the Prometheus rules pass their unit
tests under Debian's real promtool, the example config loads them, the
Grafana dashboard only queries series trainbpf serve exports or the rules
record, and the DaemonSet and systemd unit grant what the daemon needs and
no more. Needs no BPF and no build of trainbpf."""
import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY = os.path.join(ROOT, "deploy")
RULES = os.path.join(DEPLOY, "prometheus", "trainbpf.rules.yml")
RULES_TEST = os.path.join(DEPLOY, "prometheus", "trainbpf.rules.test.yml")
CONFIG = os.path.join(DEPLOY, "prometheus", "prometheus.yml")
DASHBOARD = os.path.join(DEPLOY, "grafana", "trainbpf-job.json")
DAEMONSET = os.path.join(DEPLOY, "kubernetes", "trainbpf-daemonset.yaml")
UNIT = os.path.join(DEPLOY, "systemd", "trainbpf.service")

# What `trainbpf serve` exports, read from the exporter's own source (every
# family it writes), and what Prometheus adds itself.
EXPOSE = os.path.join(ROOT, "user", "report", "metrics_expose.c")
EXPOSE_GPU = os.path.join(ROOT, "user", "report", "metrics_gpu.c")
EXPOSE_RAS = os.path.join(ROOT, "user", "report", "metrics_ras.c")


def families():
    """{name: type} of every family the exporter writes (metrics_expose.c,
    and metrics_gpu.c's counters and literal TYPE lines)."""
    out = {}
    for path in (EXPOSE, EXPOSE_GPU):
        src = open(path).read()
        out.update(re.findall(r'(?:family|PER)\((?:m, )?f, "([a-z_]+)", "(counter|gauge)"', src))
        out.update((n, "counter") for n in re.findall(r'\bcounter\(m, f, "([a-z_]+)"', src))
        out.update(re.findall(r"# TYPE ([a-z_]+) (counter|gauge)", src))
    # metrics_ras.c: gauges all (a view as of the last query).
    src = open(EXPOSE_RAS).read()
    out.update((n, "gauge") for n in
               re.findall(r'(?:\bfamily|\bper_job)\((?:r, n, )?f, "([a-z_]+)"', src))
    return out


EXPORTED = set(families())
BUILTIN = {"up", "ALERTS"}

ALERTS = {"TrainbpfDataStarvation", "TrainbpfCommunicationBound", "TrainbpfHostBoundGPU",
          "TrainbpfGPUIdle", "TrainbpfStraggler", "TrainbpfEventsLost", "TrainbpfDown",
          "TrainbpfJobStalled", "TrainbpfRankBehindInCollectives", "TrainbpfNCCLProcessDead"}
# One alert per job, its stalled ranks (or the nodes that read it) listed from a query.
PER_JOB_ALERTS = {"TrainbpfJobStalled", "TrainbpfNCCLProcessDead"}
PER_RANK_ALERTS = ALERTS - {"TrainbpfEventsLost", "TrainbpfDown"} - PER_JOB_ALERTS
CAPABILITIES = {"BPF", "PERFMON", "SYS_RESOURCE", "SYS_PTRACE", "DAC_READ_SEARCH"}


def test_families_do_not_collide():
    """In OpenMetrics a counter's family is its name less `_total`: a gauge
    of that name (trainbpf_step_seconds beside trainbpf_step_seconds_total)
    is a second family of the same name, which parsers refuse."""
    fam = families()
    assert {"trainbpf_step_seconds_total", "trainbpf_last_step_seconds",
            "trainbpf_gpu_energy_joules_total", "trainbpf_gpu_utilization_ratio"} <= set(fam)
    for name, kind in fam.items():
        assert name.endswith("_total") == (kind == "counter"), name
    counters = {n[:-len("_total")] for n, k in fam.items() if k == "counter"}
    assert counters & set(fam) == set(), "a family named like a counter's"


def yaml_module():
    try:
        import yaml
    except ImportError:
        pytest.fail("python3-yaml missing: run scripts/setup.sh (Debian package python3-yaml)")
    return yaml


def load_yaml(path):
    with open(path) as f:
        return yaml_module().safe_load(f)


@pytest.fixture(scope="module")
def promtool():
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool not found: run scripts/setup.sh, which installs "
                    "Debian's prometheus package (promtool 2.42)")
    return path


def run_promtool(promtool, *args, cwd):
    r = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120,
                       cwd=cwd)
    assert r.returncode == 0, f"promtool {' '.join(args)}:\n{r.stdout}{r.stderr}"
    return r.stdout + r.stderr


def recorded_names():
    return {r["record"] for g in load_yaml(RULES)["groups"] for r in g["rules"] if "record" in r}


def alerting_rules():
    return {r["alert"]: r for g in load_yaml(RULES)["groups"] for r in g["rules"] if "alert" in r}


# Things in PromQL that look like metric names but are not.
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL expression selects, without a PromQL
    parser: strings, label matchers, ranges, grouping lists and Grafana
    variables removed, what remains that is not a keyword or a function
    call is a metric name."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+-?\w+", " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.:])[A-Za-z_:][\w:]*", e):
        if m.group() in PROMQL_WORDS or e[m.end():].lstrip().startswith("("):
            continue
        names.add(m.group())
    return names


def test_metric_names_parser():
    assert metric_names('sum without (category) (rate(a_total{training_job="$training_job", x=~"a|b"}'
                        '[$__rate_interval])) / on (training_job) group_left () b:c:d{training_job="x"}'
                        ' > 0.15 and count by (training_job) (e) >= 2'
                        ' or absent(up{job="trainbpf"}) * 1e3') == {"a_total", "b:c:d", "e", "up"}


def test_rules_check(promtool):
    out = run_promtool(promtool, "check", "rules", RULES, cwd=ROOT)
    assert "SUCCESS" in out


def test_rules_unit_tests(promtool, tmp_path):
    # From elsewhere: the test file names the rules relative to itself.
    out = run_promtool(promtool, "test", "rules", RULES_TEST, cwd=tmp_path)
    assert "SUCCESS" in out


def test_config_check(promtool, tmp_path):
    # From elsewhere: rule_files are relative to the config file, so a fresh
    # clone's config loads its rules wherever Prometheus runs.
    out = run_promtool(promtool, "check", "config", CONFIG, cwd=tmp_path)
    assert "1 rule files found" in out and "16 rules found" in out, out


def test_config_keeps_prometheus_job():
    config = load_yaml(CONFIG)
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    # The training job is `training_job`: the exporter sets no `job`, so the
    # scrape job needs no honor_labels (which would let a target override
    # `instance` too); TrainbpfDown looks for up{job="trainbpf"}.
    assert "trainbpf" in jobs and "honor_labels" not in jobs["trainbpf"]
    for path in config["rule_files"]:
        assert not os.path.isabs(path)
        assert os.path.exists(os.path.join(os.path.dirname(CONFIG), path))


def test_rules_content():
    alerts = alerting_rules()
    assert set(alerts) == ALERTS
    assert {"trainbpf:rank_category:ratio30s", "trainbpf:rank_phase:ratio30s",
            "trainbpf:rank_comm_wait:ratio30s", "trainbpf:job_comm_wait:median30s",
            "trainbpf:rank_step_seconds:avg30s"} <= recorded_names()
    for name, rule in alerts.items():
        ann = rule.get("annotations", {})
        assert ann.get("summary") and ann.get("description"), name
        text = ann["summary"] + ann["description"]
        if name in PER_JOB_ALERTS:
            assert "$labels.training_job" in text and ".Labels.instance" in text, name
        else:
            assert "$labels.instance" in text, name
        if name in PER_RANK_ALERTS:
            assert "$labels.training_job" in text and "$labels.rank" in text, name
    assert alerts["TrainbpfStraggler"]["for"] == "10s"
    # The GPU's own busy time, the GPUs the rank is on now, its steps.
    assert metric_names(alerts["TrainbpfGPUIdle"]["expr"]) == {
        "trainbpf_gpu_busy_seconds_total", "trainbpf_gpu_memory_used_bytes",
        "trainbpf_steps_total"}
    # Every series the rules read is exported or recorded.
    allowed = EXPORTED | BUILTIN | recorded_names()
    for g in load_yaml(RULES)["groups"]:
        for r in g["rules"]:
            assert metric_names(r["expr"]) <= allowed, (r.get("record") or r.get("alert"),
                                                        metric_names(r["expr"]) - allowed)


def job_label_uses(expr):
    """Where PromQL (or an alert's template) uses the label `job`: the
    values its matchers select, and the grouping lists and template
    lookups that name it."""
    values = re.findall(r'(?<![\w.])job\s*(?:=|!=|=~|!~)\s*("[^"]*"|%q)', expr)
    names = re.findall(r"\b(?:by|without|on|ignoring)\s*\([^)]*\bjob\b[^)]*\)", expr)
    names += re.findall(r'[Ll]abels\.job\b|sortByLabel "job"', expr)
    return values, names


def test_job_label_is_the_scrape_job():
    """`job` is Prometheus' scrape job everywhere: only job="trainbpf"
    selects it; the training job is always `training_job`."""
    exprs = [(r.get("record") or r.get("alert"), r["expr"] + json.dumps(r.get("annotations", {})))
             for g in load_yaml(RULES)["groups"] for r in g["rules"]]
    with open(DASHBOARD) as f:
        exprs += dashboard_exprs(json.load(f))
    for where, expr in exprs:
        values, names = job_label_uses(expr.replace('\\"', '"'))
        assert set(values) <= {'"trainbpf"'} and not names, (where, values, names)
    assert job_label_uses('a{job="x"} / on (rank, job) b{job=%q} $labels.job') == (
        ['"x"', "%q"], ["on (rank, job)", "labels.job"])
    assert job_label_uses('a{training_job="x"} and on (training_job) b{job="trainbpf"}'
                          ' $labels.training_job') == (['"trainbpf"'], [])


def dashboard_exprs(dash):
    """(where, PromQL) of every query the dashboard runs: panel targets
    (rows' nested panels included), annotations, and the template
    variables' label_values() selectors."""
    out = []

    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash["panels"]):
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
    for a in dash["annotations"]["list"]:
        if "expr" in a:
            out.append((f"annotation {a['name']!r}", a["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", q)
            assert m, f"variable {v['name']}: {q}"
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def test_dashboard_model():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    assert dash["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    job = variables["training_job"]
    q = job["query"]["query"] if isinstance(job["query"], dict) else job["query"]
    assert q == "label_values(trainbpf_time_seconds_total, training_job)"
    for p in dash["panels"]:
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            for t in p["targets"]:
                assert t["datasource"]["uid"] == "${datasource}", p["title"]
    exprs = [e for _, e in dashboard_exprs(dash)]
    assert any('ALERTS{alertname="TrainbpfStraggler"' in e for e in exprs)
    assert any("trainbpf:job_comm_wait:median30s" in e for e in exprs)


def test_dashboard_queries(promtool, tmp_path):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    allowed = EXPORTED | BUILTIN | recorded_names()
    used = set()
    for where, expr in dashboard_exprs(dash):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr}"
        assert names <= allowed, f"{where}: {sorted(names - allowed)} neither exported nor recorded"
        used |= names
        # Only the dashboard's own variables and Grafana's.
        for var in re.findall(r"\$\{?(\w+)", expr):
            assert var in {"training_job", "rank", "__rate_interval", "__range"}, f"{where}: ${var}"
    # Every exported series shows, directly or through the rules it feeds.
    recorded = {r["record"]: metric_names(r["expr"]) for g in load_yaml(RULES)["groups"]
                for r in g["rules"] if "record" in r}
    while any(recorded.get(n, set()) - used for n in list(used)):
        for n in list(used):
            used |= recorded.get(n, set())
    # The daemon's own bookkeeping is for its own alerts and debugging.
    meta = {"trainbpf_build_info", "process_start_time_seconds", "trainbpf_traced_processes",
            "trainbpf_series_dropped_total"}
    assert EXPORTED - meta - used == set(), "exported but not on the dashboard"
    # Syntax: promtool parses each query as a recording rule's, with the
    # variables as Grafana would substitute them.
    subst = {"$__rate_interval": "1m", "$__range": "1h", "$training_job": "run-1", "$rank": ".*"}
    rules = []
    for i, (where, expr) in enumerate(dashboard_exprs(dash)):
        for k, v in subst.items():
            expr = expr.replace(k, v)
        rules.append({"record": f"dashboard:query_{i}:check", "expr": expr})
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    run_promtool(promtool, "check", "rules", str(path), cwd=tmp_path)


def test_daemonset():
    docs = [d for d in yaml_module().safe_load_all(open(DAEMONSET)) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["runAsUser"] == 0
    assert not sc.get("privileged")
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(sc["capabilities"]["add"]) == CAPABILITIES
    assert len(sc["capabilities"]["add"]) == len(CAPABILITIES)
    assert c["args"][:1] == ["serve"] and "0.0.0.0:9464" in c["args"]
    assert {"name": "metrics", "containerPort": 9464, "protocol": "TCP"} in c["ports"]
    assert c["resources"]["limits"]["memory"] == "128Mi"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for path in ("/sys/kernel/btf", "/sys/fs/cgroup"):
        assert mounts[path]["readOnly"] is True
    for v in pod["volumes"]:
        assert "hostPath" in v
        assert mounts[v["hostPath"]["path"]]["readOnly"] is True
    ann = ds["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "9464"
    monitor = next(d for d in docs if d["kind"] == "PodMonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert "honorLabels" not in endpoint and endpoint["port"] == "metrics"


def unit_settings():
    settings = {}
    section = None
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            settings[(section, key)] = value
    return settings


def test_systemd_unit(tmp_path):
    s = unit_settings()
    assert s[("Service", "Type")] == "simple"
    assert s[("Service", "ExecStart")] == "/usr/local/sbin/trainbpf serve --listen 127.0.0.1:9464"
    assert s[("Service", "ExecReload")] == "/bin/kill -HUP $MAINPID"
    assert s[("Service", "Restart")] == "on-failure"
    assert s[("Service", "KillSignal")] == "SIGTERM"
    caps = {"CAP_" + c for c in CAPABILITIES}
    assert set(s[("Service", "CapabilityBoundingSet")].split()) == caps
    assert set(s[("Service", "AmbientCapabilities")].split()) == caps
    for key, value in (("ProtectSystem", "strict"), ("ProtectHome", "read-only"),
                       ("PrivateTmp", "yes"), ("NoNewPrivileges", "yes")):
        assert s[("Service", key)] == value, key
    # trainbpf reads every process's /proc entries.
    assert ("Service", "ProtectProc") not in s and ("Service", "ProcSubset") not in s
    assert s[("Install", "WantedBy")] == "multi-user.target"
    # systemd-analyze comes with systemd, which a container may lack; the
    # checks above do not need it. It refuses a missing ExecStart binary,
    # so verify a copy that runs a stand-in.
    analyze = shutil.which("systemd-analyze")
    if analyze:
        stub = tmp_path / "trainbpf"
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
        unit = tmp_path / "trainbpf.service"
        with open(UNIT) as f:
            unit.write_text(f.read().replace("/usr/local/sbin/trainbpf", str(stub)))
        r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr
