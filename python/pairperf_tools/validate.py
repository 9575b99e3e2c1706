"""Checks pairperf documents against their JSON Schemas (results/*.schema.json): results files
(.json, or .jsonl line by line), doctor, mesh, compare and info reports, and compare-peers' curves
and ratios. Each file is checked against the schema its "schema" field names.

The export formats, which are other tools' and cannot name themselves, are checked when named:
--as export.bmf (pairperf export --bmf), --as export.gab (--gab-bigger, --gab-smaller).

Usage: scripts/validate-results [--as FORMAT] FILE [FILE...]; exit 0 when all are valid, 1 when one
is not, 2 on bad usage."""
import argparse
import sys

from . import documents


def main(argv):
    ap = argparse.ArgumentParser(prog="validate-results", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--as", dest="as_kind", choices=sorted(documents.FOREIGN_FILES),
                    help="check the files as this export format")
    ap.add_argument("paths", nargs="+", metavar="FILE")
    a = ap.parse_args(argv)
    try:
        problems = [e for p in a.paths for e in documents.errors(p, as_kind=a.as_kind)]
    except documents.DocumentError as e:  # jsonschema missing, a schema file missing
        print(f"validate-results: {e}", file=sys.stderr)
        return 1
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        against = a.as_kind or "their schemas"
        print(f"{len(a.paths)} file(s) valid against {against}")
    return 1 if problems else 0
