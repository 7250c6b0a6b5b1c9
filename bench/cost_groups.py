#!/usr/bin/env python3
"""Where a proxy's instructions per call go, by group of functions (issue 17).

    bench/cost_groups.py LABEL=CALLGRIND_OUT:CALLS [LABEL=CALLGRIND_OUT:CALLS ...]

Reads callgrind profiles (the text `callgrind.out` format, name compression
included) and prints one markdown table: the self cost of every function, per
call, summed into the groups below (each function counted once, in the first
group its name matches), one column per profile. With two profiles or more, a
last column gives the second minus the first: what the second proxy adds.

`bench/floor.sh` runs it on the relay's and eragate's profiles; `bench/run.sh`
puts its table into RESULTS.md. Only the standard library is used.
"""

import collections
import re
import sys

# Order matters: a function falls into the first group whose pattern matches its name.
GROUPS = [
    ("malloc and free", r"malloc|_int_free|^free$|^cfree|unlink_chunk|__rdl_|__rust_alloc|__rust_dealloc|__rust_realloc|_int_realloc|^realloc|tcache"),
    ("`memcpy`, `memmove`", r"memcpy|memmove"),
    ("JSON: checking, walking and writing messages", r"eragate::protocol::(json_check|lazy_json|jsonrpc|scan)|serde_json|itoa|core::str::converts::from_utf8|core::str::validations"),
    ("time: timers, clock reads, hyper's `Date`", r"tokio::runtime::time|tokio::time|Timespec|clock_gettime|Instant|SystemTime|hyper::common::date|TokioSleep|TokioTimer"),
    ("headers (`httparse`, `HeaderMap`, names, values)", r"http::header|httparse|HeaderName|HeaderValue|hyper::headers"),
    ("hyper's two HTTP/1.1 connections", r"hyper::"),
    ("tokio: I/O readiness, scheduler, wakers", r"tokio::"),
    ("the proxy's own functions", r"eragate::|hyper_relay::"),
    ("libc's system call wrappers", r"^(recv|send|write|read|epoll|__GI_|__libc_|syscall)"),
]
COMPILED = [(label, re.compile(pattern)) for label, pattern in GROUPS]
REST = "the rest (futures' glue, `arc_swap`, hashing, …)"


def self_cost(path):
    """Self cost per function name, summed over the profile's lines."""
    names = {}

    def name(spec):
        # "(12) name" defines id 12; "(12)" refers to it.
        found = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not found:
            return spec
        if found.group(2) is not None:
            names[found.group(1)] = found.group(2)
        return names.get(found.group(1), spec)

    costs = collections.Counter()
    current = None
    after_calls = False
    with open(path, errors="replace") as profile:
        for line in profile:
            if line.startswith("fn="):
                current = name(line[3:].strip())
            elif line.startswith(("cfn=", "cfi=", "cob=")):
                if line.startswith("cfn="):
                    name(line[4:].strip())
            elif line.startswith("calls="):
                # The cost line after `calls=` is the callee's inclusive cost, not self cost.
                after_calls = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                fields = line.split()
                if len(fields) >= 2 and current is not None:
                    costs[current] += int(fields[1])
    return costs


def grouped(costs, calls):
    totals = collections.Counter()
    for function, cost in costs.items():
        for label, pattern in COMPILED:
            if pattern.search(function):
                totals[label] += cost
                break
        else:
            totals[REST] += cost
    return {label: value / calls for label, value in totals.items()}


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    columns = []
    for argument in argv[1:]:
        label, _, rest = argument.partition("=")
        path, _, calls = rest.rpartition(":")
        if not label or not path or not calls.isdigit() or int(calls) == 0:
            print(f"cost_groups.py: cannot read {argument!r} as LABEL=FILE:CALLS", file=sys.stderr)
            return 2
        columns.append((label, grouped(self_cost(path), int(calls))))
    rows = [label for label, _ in GROUPS] + [REST]
    difference = len(columns) >= 2
    header = ["group (self cost per call)"] + [label for label, _ in columns]
    if difference:
        header.append(f"{columns[1][0]} − {columns[0][0]}")
    print("| " + " | ".join(header) + " |")
    print("|---" + "|---:" * (len(header) - 1) + "|")
    for row in rows + ["total"]:
        values = [sum(g.values()) if row == "total" else g.get(row, 0.0) for _, g in columns]
        cells = [f"{v:,.0f}" for v in values]
        if difference:
            cells.append(f"{values[1] - values[0]:+,.0f}")
        shown = f"**{row}**" if row == "total" else row
        print("| " + " | ".join([shown] + cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
