"""Benchmark: the bench against its ground-truth oracle, batch 1 and the concurrency sweep.

`seat bench selftest` prints the same tables and fails when the goal is missed; this script also
prints the host's load (an oracle on a starved CPU misses its own schedule: read its errors beside
the load) and every figure's error. Usage:
    .venv/bin/python tests/benchmarks/oracle_accuracy.py
"""

import os

from seatkit.bench import selftest


def main() -> None:
    load = os.getloadavg()
    result = selftest.selftest(progress=lambda m: print(m, flush=True))
    print(f"\nhost: {os.cpu_count()} CPUs, load average {load[0]:.1f} before the run")
    print("\nbatch 1: true / measured (error)")
    for p in result["points"]:
        t, m, e = p["true"], p["measured"], p["error"]
        print(
            f"  k=7, {p['max_tokens']} tokens: "
            + ", ".join(f"{name} {t[name]:.4g} / {m[name]:.4g} ({e[name]:.3%})" for name in e)
            + f"; identity off by {p['identity_error']:.1e}"
        )
    print("\nsweep: true / measured (error)")
    for p in result["sweep"]:
        t, m, e = p["true"], p["measured"], p["error"]
        print(
            f"  {p['concurrency']:>2} streams: "
            + ", ".join(f"{name} {t[name]:.4g} / {(m[name] or 0):.4g} ({e[name]:.3%})" for name in e)
        )
    top = result["sweep"][-1]
    print(
        f"\nclient cost at {top['concurrency']} streams: {top['client_cpu_us_per_token']:.1f} CPU us "
        f"per token; worst error {result['worst_error']:.3%} (goal {result['goal']:.1%}): "
        + ("met" if result["met"] else "NOT met")
    )


if __name__ == "__main__":
    main()
