"""Charts of a bench/run.sh run, for RESULTS.md (issue 17).

    python3 bench/charts.py WORK_DIR OUT_DIR

Reads the comparisons mcpload wrote to WORK_DIR (s1-json.json, ...) and writes
OUT_DIR/throughput.png and OUT_DIR/p99.png (median over the rounds against
concurrency, one panel per scenario, one line per target) and OUT_DIR/cpu.png
(CPU per request of the proxy at each concurrency in scenarios 1 and 2, with
the upstream's own CPU per request stacked on top where it was measured). Needs
matplotlib (run.sh installs it into .cache/bench/charts-venv).
"""

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SCENARIOS = [
    ("s1-json", "1a passthrough, JSON"),
    ("s1-sse", "1b passthrough, SSE"),
    ("s2-json", "2a 2026-07-28 → legacy, JSON"),
    ("s2-sse", "2b 2026-07-28 → legacy, SSE"),
    ("s3-stdio", "3 stdio bridging"),
]


def load(work: Path):
    found = []
    for name, title in SCENARIOS:
        path = work / f"{name}.json"
        if path.exists():
            found.append((title, json.loads(path.read_text())))
    return found


def median_of(cmp, target, c, key):
    values = [r[key] for r in cmp["runs"] if r["target"] == target and r["concurrency"] == c and r.get(key) is not None]
    return statistics.median(values) if values else None


def colours(comparisons):
    """One colour per target name across every panel (nginx is the same line everywhere)."""
    names = []
    for _, cmp in comparisons:
        names += [t["name"] for t in cmp["targets"] if t["name"] not in names]
    palette = plt.get_cmap("tab10").colors
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def line_chart(comparisons, key, ylabel, out, log_y=False):
    colour = colours(comparisons)
    fig, axes = plt.subplots(1, len(comparisons), figsize=(4.2 * len(comparisons), 3.6), squeeze=False)
    for ax, (title, cmp) in zip(axes[0], comparisons):
        for target in cmp["targets"]:
            points = [(c, median_of(cmp, target["name"], c, key)) for c in cmp["concurrency"]]
            points = [(c, v) for c, v in points if v is not None]
            if points:
                ax.plot(
                    [c for c, _ in points],
                    [v for _, v in points],
                    marker="o",
                    label=target["name"],
                    color=colour[target["name"]],
                )
        ax.set_title(title, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xticks(cmp["concurrency"], [str(c) for c in cmp["concurrency"]])
        if log_y:
            ax.set_yscale("log")
        ax.set_xlabel("concurrency")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def cpu_chart(comparisons, out):
    """One bar per (scenario, target, concurrency): the proxy's CPU, the upstream's stacked."""
    labels, own, upstream = [], [], []
    for title, cmp in comparisons:
        if title.startswith("3 "):
            continue  # the stdio bridges spend 100 × more: they would flatten every other bar
        for target in cmp["targets"]:
            for c in cmp["concurrency"]:
                mine = median_of(cmp, target["name"], c, "cpu_us_per_op")
                theirs = median_of(cmp, target["name"], c, "upstream_cpu_us_per_op")
                if mine is None:
                    continue
                direct = target.get("pids") == target.get("upstream_pids")
                labels.append(f"{title.split()[0]} {target['name']} c{c}")
                own.append(0.0 if direct else mine)
                upstream.append(theirs if theirs is not None else (mine if direct else 0.0))
    if not labels:
        return
    fig, ax = plt.subplots(figsize=(max(6, 0.32 * len(labels)), 4.5))
    xs = range(len(labels))
    ax.bar(xs, own, label="proxy / bridge")
    ax.bar(xs, upstream, bottom=own, label="upstream", alpha=0.6)
    ax.set_xticks(list(xs), labels, rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("CPU µs per request")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main():
    work, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    comparisons = load(work)
    if not comparisons:
        sys.exit("charts.py: no comparisons in " + str(work))
    line_chart(comparisons, "throughput", "requests/s (median)", out / "throughput.png")
    line_chart(comparisons, "p99_us", "p99 latency µs (median)", out / "p99.png", log_y=True)
    cpu_chart(comparisons, out / "cpu.png")


if __name__ == "__main__":
    main()
