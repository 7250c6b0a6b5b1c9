"""Charts of a bench/run.sh run, for RESULTS.md (issue 17).

    python3 bench/charts.py WORK_DIR OUT_DIR
    python3 bench/charts.py --scale SCALE_WORK_DIR OUT_DIR   (bench/scale.sh: OUT_DIR/scale.png)

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


def load_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def curve_points(curve):
    """(count, RSS MiB) from the base through every step of an `mcpload scale` curve."""
    points = [(0, curve["rss_base_kib"] / 1024)]
    points += [(s["count"], s["rss_kib"] / 1024) for s in curve["steps"]]
    return points


def scale_chart(work: Path, out: Path):
    """bench/scale.sh: RSS against idle sessions and against open streams (with the fitted
    line), and the gateway's and the children's CPU per call against the stdio pool size."""
    idle = load_json(work / "idle.json")
    streams = [(name, load_json(work / f"{name}.json")) for name in ("get", "listen")]
    pool = load_json(work / "pool.json")
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 3.8))

    def rss_panel(ax, curves, title, xlabel):
        for label, curve in curves:
            if not curve:
                continue
            xs, ys = zip(*curve_points(curve))
            ax.plot(xs, ys, marker="o", label=label)
            n = len(xs)
            mx, my = sum(xs) / n, sum(ys) / n
            sxx = sum((x - mx) ** 2 for x in xs)
            if sxx > 0:
                slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
                ax.plot(
                    [0, max(xs)],
                    [my - slope * mx, my + slope * (max(xs) - mx)],
                    linestyle="--",
                    alpha=0.5,
                    label=f"{label}: fit {slope * 1024 * 1024:.0f} B per unit",
                )
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("eragate RSS MiB")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)

    rss_panel(axes[0], [("idle legacy sessions", idle)], "RSS against idle legacy sessions", "sessions")
    rss_panel(axes[1], streams, "RSS against open SSE streams", "streams (GET or subscriptions/listen)")
    ax = axes[2]
    if pool:
        sizes, own, children = [], [], []
        for target in pool["targets"]:
            c = pool["concurrency"][-1]
            sizes.append(target["name"].removeprefix("pool-"))
            own.append(median_of(pool, target["name"], c, "cpu_us_per_op") or 0.0)
            children.append(median_of(pool, target["name"], c, "upstream_cpu_us_per_op") or 0.0)
        xs = range(len(sizes))
        ax.bar(xs, own, label="eragate")
        ax.bar(xs, children, bottom=own, label="stdio children", alpha=0.6)
        ax.set_xticks(list(xs), sizes)
        ax.set_xlabel("stdio pool size (children)")
        ax.set_ylabel("CPU µs per call (median)")
        ax.set_title(f"{pool['concurrency'][-1]} concurrent 2026-07-28 calls", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "scale.png", dpi=90)
    plt.close(fig)


def main():
    if sys.argv[1] == "--scale":
        work, out = Path(sys.argv[2]), Path(sys.argv[3])
        out.mkdir(parents=True, exist_ok=True)
        scale_chart(work, out)
        return
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
