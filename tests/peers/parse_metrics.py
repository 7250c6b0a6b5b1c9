#!/usr/bin/env python3
"""Parse Prometheus text (stdin) with prometheus-client's own parser and print ONE JSON object:

    {"families": {"<name>": "<type>", ...},
     "samples": [{"name": "...", "labels": {...}, "value": <float>}, ...]}

Exit 1 (the parser's error on stderr) when the text is not valid exposition format.
"""

import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = sys.stdin.read()
    families = {}
    samples = []
    try:
        for family in text_string_to_metric_families(text):
            families[family.name] = family.type
            for sample in family.samples:
                value = sample.value
                samples.append({
                    "name": sample.name,
                    "labels": dict(sample.labels),
                    "value": None if math.isnan(value) else (value if math.isfinite(value) else str(value)),
                })
    except Exception as error:  # the parser raises ValueError (and others) on bad text
        print(f"parse_metrics.py: {error!r}", file=sys.stderr)
        return 1
    print(json.dumps({"families": families, "samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
