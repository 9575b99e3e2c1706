"""pairperf's JSON documents: what each one is, where its schema lies, how to read and check one.

Every document names itself: {"schema": "pairperf.<kind>", "schema_version": "1.x.y", ...}. A
results stream (`run --jsonl`) is a header line and then one result per line; it reads as the
results document it streams."""
import json
import os

HERE = os.path.dirname(os.path.realpath(__file__))
# results/ in the source tree; share/pairperf/schemas beside the installed package
# (share/pairperf/python/pairperf_tools).
SCHEMA_DIRS = [os.path.normpath(os.path.join(HERE, "..", "..", d)) for d in ("results", "schemas")]
SCHEMA_FILES = {
    "pairperf.result": "schema.json",                  # pairperf run --json / --jsonl
    "pairperf.doctor": "doctor.schema.json",           # pairperf doctor --json
    "pairperf.mesh": "mesh.schema.json",               # pairperf mesh --json
    "pairperf.compare": "compare.schema.json",         # pairperf compare --json
    "pairperf.history": "history.schema.json",         # pairperf history --json
    "pairperf.info": "info.schema.json",               # pairperf info --json
    "pairperf.peer": "peer.schema.json",               # scripts/compare-peers --curves
    "pairperf.peer_ratios": "peer_ratios.schema.json", # scripts/compare-peers --json
    "pairperf.kube_local": "kube-local.schema.json",   # scripts/kube-local --json
    "pairperf.explain": "explain.schema.json",         # pairperf explain --json
    "pairperf.explain-catalog": "explain-catalog.schema.json",  # explain's signatures (its --catalog)
    "pairperf.explain-formats": "explain-formats.schema.json",  # explain's generated formats (its --formats)
}
# Formats defined by others, which pairperf export writes and which cannot name themselves: checked
# when asked for by name (validate-results --as NAME).
FOREIGN_FILES = {
    "export.bmf": "export-bmf.schema.json",            # pairperf export --bmf (Bencher Metric Format)
    "export.gab": "export-gab.schema.json",            # pairperf export --gab-bigger/--gab-smaller
}
MAJOR = 1  # the major schema version these tools read
# Kinds at another major: compare 2.x judges runs as the unit (1.x compared repetitions).
MAJORS = {"pairperf.compare": 2}


class DocumentError(Exception):
    """A file that is not the pairperf document it should be; the message names the file."""


def read(path):
    """The document in `path` (.json, or .jsonl as the results document it streams)."""
    try:
        with open(path) as f:
            if path.endswith(".jsonl"):
                lines = [json.loads(line) for line in f if line.strip()]
                if not lines:
                    raise DocumentError(f"{path}: empty")
                head = lines[0]
                if not isinstance(head, dict):
                    raise DocumentError(f"{path}: the first line is not a JSON object")
                return {"schema": head.get("schema"), "schema_version": head.get("schema_version"),
                        "context": head.get("context"), "results": lines[1:]}
            doc = json.load(f)
    except FileNotFoundError:
        raise DocumentError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DocumentError(f"{path}: a folder, not a file") from None
    except UnicodeDecodeError as e:
        raise DocumentError(f"{path}: not text ({e})") from None
    except json.JSONDecodeError as e:
        raise DocumentError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise DocumentError(f"{path}: not a JSON object")
    return doc


def kind(doc):
    """The document's schema name, or None."""
    return doc.get("schema") if isinstance(doc, dict) else None


def check_kind(path, doc, accepted):
    """Raises DocumentError unless doc is one of `accepted` at a major version these tools read."""
    name = kind(doc)
    if name not in accepted:
        raise DocumentError(f"{path}: schema {name!r} is not {' or '.join(accepted)}")
    version = str(doc.get("schema_version", ""))
    major = MAJORS.get(name, MAJOR)
    if version.split(".")[0] != str(major):
        raise DocumentError(f"{path}: {name} schema version {version or '(none)'} is not {major}.x")


def read_all(paths, accepted):
    """[(path, document)] for files and folders of .json files, each one of `accepted`."""
    docs = []
    for p in paths:
        if os.path.isdir(p):
            names = sorted(n for n in os.listdir(p) if n.endswith(".json"))
            if not names:
                raise DocumentError(f"{p}: folder holds no .json file")
            docs += read_all([os.path.join(p, n) for n in names], accepted)
            continue
        doc = read(p)
        check_kind(p, doc, accepted)
        docs.append((p, doc))
    return docs


def schema_path(name):
    file = {**SCHEMA_FILES, **FOREIGN_FILES}[name]
    for d in SCHEMA_DIRS:
        path = os.path.join(d, file)
        if os.path.exists(path):
            return path
    raise DocumentError(f"the {name} schema ({file}) is in none of {', '.join(SCHEMA_DIRS)}")


def validator(name):
    """A Draft 2020-12 validator for schema `name` (python3-jsonschema)."""
    try:
        import jsonschema
    except ImportError:
        raise DocumentError("checking against a schema needs python3-jsonschema (Debian: apt-get install "
                            "python3-jsonschema; scripts/setup installs it)") from None
    with open(schema_path(name)) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(path, doc=None, as_kind=None):
    """What is wrong with the document in `path` against its own schema, or the schema `as_kind`
    names (one of FOREIGN_FILES); [] when it is valid."""
    try:
        if doc is None:
            if as_kind is None:
                doc = read(path)
            else:
                with open(path) as f:
                    doc = json.load(f)
    except DocumentError as e:
        return [str(e)]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return [f"{path}: {e}"]
    name = as_kind or kind(doc)
    if as_kind is not None and as_kind not in FOREIGN_FILES:
        raise DocumentError(f"--as {as_kind}: not a format checked by name ({', '.join(FOREIGN_FILES)})")
    if name not in SCHEMA_FILES and name not in FOREIGN_FILES:
        return [f"{path}: not a pairperf document (schema {name!r}; known: {', '.join(SCHEMA_FILES)})"]
    found = validator(name).iter_errors(doc)
    return [f"{path}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {shorten(e.message)}" for e in found]


def shorten(text, limit=300):
    """jsonschema quotes the whole offending value: keep a message readable."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"
