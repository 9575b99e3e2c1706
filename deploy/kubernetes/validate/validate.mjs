// Checks every Kubernetes manifest in the given folders or files against the Kubernetes API's
// OpenAPI schemas (kubernetes-models: one generated JSON-schema validator per kind): types,
// required fields, enumerations, formats. Like the API server's schemas, they let unknown fields
// through (a typo such as hostIpc); scripts/kube-local refuses fields it does not model.
// Exit 0 all valid, 1 a manifest is invalid, 2 bad usage.
//   node validate.mjs DIR_OR_FILE...
import fs from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as batch from "kubernetes-models/batch/v1";

const groups = { v1: core, "apps/v1": apps, "batch/v1": batch };

function files(args) {
  const out = [];
  for (const a of args) {
    if (fs.statSync(a).isDirectory()) {
      for (const n of fs.readdirSync(a).sort())
        if (n.endsWith(".yaml") || n.endsWith(".yml")) out.push(path.join(a, n));
    } else out.push(a);
  }
  return out;
}

const args = process.argv.slice(2);
if (args.length === 0) {
  console.error("usage: node validate.mjs DIR_OR_FILE...");
  process.exit(2);
}
let bad = 0, checked = 0;
for (const file of files(args)) {
  const docs = parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      console.error(`${file}: YAML: ${doc.errors[0].message}`);
      bad++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const where = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    const Model = groups[obj.apiVersion]?.[obj.kind];
    if (!Model) {
      console.error(`${where}: ${obj.apiVersion} ${obj.kind} is not a kind this check knows`);
      bad++;
      continue;
    }
    try {
      new Model(obj).validate();
      checked++;
      console.log(`ok   ${where}`);
    } catch (e) {
      console.error(`FAIL ${where}: ${e.message}`);
      bad++;
    }
  }
}
console.log(`${checked} object(s) valid, ${bad} invalid`);
process.exit(bad ? 1 : checked ? 0 : 2);
