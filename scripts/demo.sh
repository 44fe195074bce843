#!/usr/bin/env bash
# The demo: trace the bundled PyTorch training job (2 gloo DDP ranks, 2
# DataLoader workers each, a file-backed dataset) from its first
# instruction, with a live table every 2 s and the final report.
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./build/trainbpf -i 2 -- /usr/bin/python3 tests/workloads/ddp_train.py --epochs 2 "$@"
