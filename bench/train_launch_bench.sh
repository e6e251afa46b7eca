#!/usr/bin/env bash
# Launch cost of a 4-rank PyTorch DDP job (examples/train/ddp_train.py): `tessera train` on a TPU
# v6e 4x4 slice of a local cluster vs `torchrun --standalone --nproc-per-node 4`, interleaved.
#
#   bench/train_launch_bench.sh [--runs 5] [--restart-runs 3] [--steps 40] [--tessera PATH]
#                               [--cluster examples/clusters/demo.yaml]
#
# Brings up its own cluster (fresh TESSERA_STATE_DIR, down at exit) and prints the machine, a
# table of medians (launch-to-exit and its ratio, command to all ranks running / launch_ms, the
# group restart after a SIGKILLed rank / last_restart_ms) and the exact commands. Details:
# bench/train_launch_bench.py. Not a test: nothing is asserted on time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Debian's python3-torch is installed for /usr/bin/python3; another python3 first on PATH
# (pyenv, a venv) usually lacks it. PYTHON=... overrides.
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  for candidate in /usr/bin/python3 python3; do
    if "$candidate" -c 'import torch.distributed' >/dev/null 2>&1; then python="$candidate"; break; fi
  done
fi
[[ -n "$python" ]] || { echo "train_launch_bench: no python3 can import torch (install python3-torch: scripts/setup)" >&2; exit 2; }
exec "$python" "$here/train_launch_bench.py" "$@"
