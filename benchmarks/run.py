"""`make bench`: runs every benchmark part in one run; writes results.json and a chart per part."""

from __future__ import annotations

import argparse
import json
import os

from benchmarks import ingest_bench, serving_bench, training_bench

PARTS = {"ingest": ingest_bench, "training": training_bench, "serving": serving_bench}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", default="build/bench")
    parser.add_argument("--only", choices=sorted(PARTS), action="append")
    args = parser.parse_args()
    os.makedirs(args.output, exist_ok=True)
    records = []
    for name in args.only or sorted(PARTS):
        part = PARTS[name]
        part_records = part.run(args.output)
        part.chart(part_records, os.path.join(args.output, f"{name}.png"))
        records.extend(part_records)
    with open(os.path.join(args.output, "results.json"), "w") as handle:
        json.dump(records, handle, indent=2)
    print(f"{'benchmark':<42} {'value':>12} {'unit':<10} {'ratio':>7}")
    for record in records:
        ratio = f"{record['ratio']:.2f}" if "ratio" in record else ""
        print(f"{record['name']:<42} {record['value']:>12.1f} {record['unit']:<10} {ratio:>7}")


if __name__ == "__main__":
    main()
