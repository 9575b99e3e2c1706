#!/usr/bin/env python3
"""Validates pairperf results files (.json, or .jsonl line by line) against results/schema.json,
and `pairperf doctor --json` reports against results/doctor.schema.json.

Usage: scripts/validate-results FILE [FILE...]; exit 0 when all are valid, 1 otherwise.
"""
import json
import os
import sys

import jsonschema

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results")
SCHEMAS = {"pairperf.result": os.path.join(RESULTS, "schema.json"),
           "pairperf.doctor": os.path.join(RESULTS, "doctor.schema.json"),
           "pairperf.mesh": os.path.join(RESULTS, "mesh.schema.json")}


def load_schema(name):
    with open(SCHEMAS[name]) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def errors_in(path):
    if path.endswith(".jsonl"):
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        if not lines:
            return [f"{path}: empty"]
        head, rows = lines[0], lines[1:]
        doc = {"schema": head.get("schema"), "schema_version": head.get("schema_version"),
               "context": head.get("context"), "results": rows}
    else:
        with open(path) as f:
            doc = json.load(f)
    name = doc.get("schema") if isinstance(doc, dict) else None
    if name not in SCHEMAS:
        return [f"{path}: not a pairperf file (schema {name!r}; known: {', '.join(SCHEMAS)})"]
    validator = jsonschema.Draft202012Validator(load_schema(name))
    return [f"{path}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(doc)]


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    problems = [e for p in paths for e in errors_in(p)]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"{len(paths)} file(s) valid against {os.path.relpath(RESULTS)}/*schema.json")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
