"""Checks pairperf documents against their JSON Schemas (results/*.schema.json): results files
(.json, or .jsonl line by line), doctor, mesh, compare and info reports, and compare-peers' curves
and ratios. Each file is checked against the schema its "schema" field names.

Usage: scripts/validate-results FILE [FILE...]; exit 0 when all are valid, 1 when one is not, 2
without a file."""
import sys

from . import documents


def main(paths):
    if not paths or any(p in ("-h", "--help") for p in paths):
        print(__doc__.strip(), file=sys.stderr if not paths else sys.stdout)
        return 2 if not paths else 0
    try:
        problems = [e for p in paths for e in documents.errors(p)]
    except documents.DocumentError as e:  # jsonschema missing, a schema file missing
        print(f"validate-results: {e}", file=sys.stderr)
        return 1
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"{len(paths)} file(s) valid against their schemas ({', '.join(sorted(documents.SCHEMA_FILES))})")
    return 1 if problems else 0
