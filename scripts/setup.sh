#!/usr/bin/env bash
# Installs the packages trainbpf needs to build, test and run its demo
# (Debian 12). Idempotent: skips apt-get when everything is present.
set -euo pipefail

PKGS=(clang llvm make gcc pkg-config libbpf-dev bpftool libelf-dev zlib1g-dev
      libzstd-dev libsqlite3-dev libclang-rt-14-dev check python3 python3-pytest python3-torch util-linux
      linux-perf bpftrace libbpf-tools libfuse3-dev fuse3 iproute2
      libmicrohttpd-dev   # trainbpf serve's /metrics
      libgnutls28-dev libyaml-dev libcrypt-dev openssl   # its TLS, web config, bcrypt; test certificates
      prometheus python3-yaml   # tests: a real Prometheus scrapes serve; promtool checks deploy/
      chromium-headless-shell   # tests: the HTML report loaded in a browser (test_html.py)
      tmux   # tests: the live view in place, read with capture-pane (test_live_screen.py)
      mmdebstrap)   # scripts/torch-root.sh: the Debian 13 root with torch 2.6

# The machine's Node.js and npm fetch the viewers the tests load outputs in;
# Debian's where the machine has none.
command -v npm >/dev/null || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# The tests start their own Prometheus; the package's service would
	# scrape and load the machine the timing tests run on: not started.
	policy=/usr/sbin/policy-rc.d ours=
	if [[ ! -e $policy && ! -L $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 755 "$policy"
		ours=1
		trap 'rm -f "$policy"' EXIT
	fi
	apt-get install -y -q --no-install-recommends "${missing[@]}"
	if [[ $ours ]]; then
		rm -f "$policy"
		trap - EXIT
	fi
fi

# speedscope, pinned by tests/viewers/package-lock.json: test_speedscope.py
# loads the trace in it (its own importer, not a replay of it).
viewers="$(dirname "$0")/../tests/viewers"
if [[ ! -f $viewers/node_modules/speedscope/package.json ]]; then
	npm ci --prefix "$viewers" --ignore-scripts --no-audit --no-fund
fi

# Debian 13's torch 2.6 in a root of its own: the phase tests run the jobs
# users run, not only Debian 12's torch 1.13 (about a minute, once).
"$(dirname "$0")/torch-root.sh"
