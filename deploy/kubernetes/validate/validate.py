#!/usr/bin/env python3
"""Checks every Kubernetes manifest in the given folders or files against the Kubernetes API's
OpenAPI schemas, as kubernetes-validate bundles them (offline; the version scripts/setup pins, the
schemas of Kubernetes SCHEMA_VERSION below): types, required fields, enumerations, and, strictly,
fields the API does not have (a typo such as hostIpc), which the API server would drop silently.
Exit 0 all valid, 1 a manifest is invalid, 2 bad usage or kubernetes-validate missing.
  validate.py DIR_OR_FILE...
kubernetes-validate and its dependencies come from .deps/kubernetes-validate (scripts/setup);
PYTHONPATH names it."""
import os
import sys

SCHEMA_VERSION = "1.37.0"


def files(args):
    out = []
    for a in args:
        if os.path.isdir(a):
            out += [os.path.join(a, n) for n in sorted(os.listdir(a)) if n.endswith((".yaml", ".yml"))]
        else:
            out.append(a)
    return out


def main(args):
    if not args:
        print("usage: validate.py DIR_OR_FILE...", file=sys.stderr)
        return 2
    try:
        import kubernetes_validate
        import yaml
    except ImportError as e:
        print(f"validate.py: {e} (scripts/setup installs kubernetes-validate into .deps/)", file=sys.stderr)
        return 2
    bad = checked = 0
    for path in files(args):
        try:
            with open(path) as f:
                docs = list(yaml.safe_load_all(f))
        except (OSError, yaml.YAMLError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            bad += 1
            continue
        for obj in docs:
            if obj is None:
                continue
            where = f"{path}: {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
            try:
                kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
            except kubernetes_validate.ValidationError as e:
                at = ".".join(str(p) for p in e.path)
                print(f"FAIL {where}: {at}: {e.message}", file=sys.stderr)
                bad += 1
                continue
            except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as e:
                print(f"{where}: {obj.get('apiVersion')} {obj.get('kind')} is not a kind this check knows ({e})",
                      file=sys.stderr)
                bad += 1
                continue
            checked += 1
            print(f"ok   {where}")
    print(f"{checked} object(s) valid, {bad} invalid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
