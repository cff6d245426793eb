"""Measure what ``OMP_WAIT_POLICY=PASSIVE`` (set by the ``ablate`` command line) buys on this machine.

    python scripts/omp_wait_policy.py [--steps 30] [--rounds 3] [--threads 2]

OpenMP reads the policy once, when torch loads, so one process cannot switch it; this one process
starts its children alternately with each policy (so both see the same load), each timing the same
training steps of a small Transformer layer, and prints the medians and their ratio, ACTIVE over PASSIVE.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = """
import json, time, torch
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(128, 4, 512, batch_first=True)
opt = torch.optim.AdamW(layer.parameters())
x = torch.randn(32, 40, 128)
wall, cpu = time.perf_counter(), time.process_time()
for _ in range({steps}):
    opt.zero_grad()
    layer(x).square().mean().backward()
    opt.step()
print(json.dumps({{"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"PASSIVE": [], "ACTIVE": []}
    for _ in range(args.rounds):
        for policy in runs:
            env = {**os.environ, "OMP_WAIT_POLICY": policy, "OMP_NUM_THREADS": str(args.threads)}
            out = subprocess.run(
                [sys.executable, "-c", CHILD.format(steps=args.steps)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            runs[policy].append(json.loads(out.stdout))
    median = {
        p: {k: statistics.median(r[k] for r in rs) / args.steps for k in ("wall", "cpu")} for p, rs in runs.items()
    }
    for policy, m in median.items():
        print(f"{policy:8} {m['wall']:.3f} s/step wall, {m['cpu']:.3f} CPU s/step (median of {args.rounds})")
    print(
        f"ACTIVE / PASSIVE: {median['ACTIVE']['wall'] / median['PASSIVE']['wall']:.2f}x wall, "
        f"{median['ACTIVE']['cpu'] / median['PASSIVE']['cpu']:.2f}x CPU; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
