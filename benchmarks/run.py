"""`make bench`: runs the benchmark parts in one run; writes results.json, docs/performance.md
(benchmarks/report.py) and a chart per part beside it (docs/performance/<part>.png).

`--parts` selects parts by name or by the group before the first underscore (`--parts input`
runs every input_* part); results of parts not run this time are kept in results.json, and the
page shows them with the machine and date they were measured on. `--render-only` writes the page
from results.json without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from benchmarks import (
    audit_bench,
    health_bench,
    ingest_bench,
    input_ablation,
    input_limit,
    input_overlap,
    input_real_vs_synthetic,
    peer_bench,
    pipeline_bench,
    precision_bench,
    predict_bench,
    regularization_bench,
    serve_bench,
    serving_bench,
    training_bench,
    transfer_bench,
    ui_bench,
    warm_start_bench,
)
from benchmarks.report import DOCS_PATH, RUN_KEY, chart_path, run_context, write

# In the page's order: the whole run first, then the input pipeline, training, data and serving.
PARTS = {
    "peer": peer_bench,
    "pipeline": pipeline_bench,
    "input_limit": input_limit,
    "input_ablation": input_ablation,
    "input_overlap": input_overlap,
    "input_real_vs_synthetic": input_real_vs_synthetic,
    "training": training_bench,
    "precision": precision_bench,
    "regularization": regularization_bench,
    "warm_start": warm_start_bench,
    "transfer": transfer_bench,
    "ingest": ingest_bench,
    "health": health_bench,
    "audit": audit_bench,
    "serving": serving_bench,
    "serve": serve_bench,
    "predict": predict_bench,
    "ui": ui_bench,
}


def select_parts(selectors: list[str] | None) -> list[str]:
    """Part names in PARTS order, for part names or group names; all parts when none given."""
    if not selectors:
        return list(PARTS)
    unknown = [s for s in selectors if s not in PARTS and not any(_in_group(p, s) for p in PARTS)]
    if unknown:
        groups = sorted({name.split("_")[0] for name in PARTS})
        raise SystemExit(f"unknown part(s) {unknown}; parts: {list(PARTS)}, groups: {groups}")
    return [name for name in PARTS if any(s == name or _in_group(name, s) for s in selectors)]


def _in_group(part: str, group: str) -> bool:
    return part.startswith(group + "_")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", default="build/bench")
    parser.add_argument("--parts", nargs="+", metavar="PART", help=f"any of {list(PARTS)}")
    parser.add_argument("--docs", default=DOCS_PATH, help="the page written from results.json")
    parser.add_argument("--render-only", action="store_true", help="write --docs, run nothing")
    args = parser.parse_args()
    results_path = os.path.join(args.output, "results.json")
    if args.render_only:
        with open(results_path) as handle:
            records = json.load(handle)
        print(f"wrote {write(records, PARTS, args.docs, charted(args.docs))}")
        return
    names = select_parts(args.parts)
    os.makedirs(args.output, exist_ok=True)
    kept = []
    if os.path.exists(results_path):
        with open(results_path) as handle:
            # Other parts' records stay; those without a part (an older format) do not.
            kept = [r for r in json.load(handle) if r.get("part") not in (None, *names)]
    records = []
    for name in names:
        part, started, context = PARTS[name], time.perf_counter(), run_context()
        part_records = [
            {**record, "part": name, RUN_KEY: context} for record in part.run(args.output)
        ]
        print(f"{name}: done in {time.perf_counter() - started:.0f} s", flush=True)
        os.makedirs(os.path.dirname(chart_path(args.docs, name)), exist_ok=True)
        part.chart(part_records, chart_path(args.docs, name))
        records.extend(part_records)
        with open(results_path, "w") as handle:  # after every part: a late failure loses less
            json.dump(kept + records, handle, indent=2)
    print(f"{'benchmark':<46} {'value':>10} {'unit':<13} {'ratio':>6}  baseline")
    for record in records:
        ratio = f"{record['ratio']:.2f}" if "ratio" in record else ""
        print(
            f"{record['name']:<46} {record['value']:>10.4g} {record['unit']:<13} {ratio:>6}  "
            f"{record.get('baseline', '')}"
        )
    print(f"wrote {write(kept + records, PARTS, args.docs, charted(args.docs))}")


def charted(docs_path: str) -> set[str]:
    """The parts whose chart is beside the page."""
    return {name for name in PARTS if os.path.exists(chart_path(docs_path, name))}


if __name__ == "__main__":
    main()
