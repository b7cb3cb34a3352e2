// Validates Kubernetes manifests against the API's JSON schema (npm kubernetes-models, the
// OpenAPI schema of Kubernetes 1.27) and, beyond the schema, rejects unknown fields (a typo such
// as `comand:` is valid JSON-schema-wise but silently ignored by kubectl apply) and breaks of
// the deployment's security rules (docs/DEPLOY.md):
//   - every container of the walc image: no privilege escalation, all capabilities dropped, a
//     read-only root file system and a non-root user;
//   - no secret in plain text: an env var or ConfigMap key that names a secret (password,
//     passphrase, secret or storage access key, token, libsodium or OpenPGP key material) must
//     come from a Secret.
// Prints one line per object ("ok" or "FAIL ...") and, last, "objects: N valid, N invalid"
// (check.sh counts this tool as one check). Exit 1 when any object is invalid or none was read.
//
// Usage: node validate.mjs FILE...   (multi-document YAML; Kustomization files are skipped)
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const modelsDir = path.join(here, "node_modules", "kubernetes-models");

// apiVersion + kind -> the compiled schema validator of kubernetes-models.
function validatorFor(apiVersion, kind) {
	const file = path.join(modelsDir, apiVersion, `${kind}.js`);
	if (!/^[A-Za-z0-9./-]+$/.test(apiVersion) || !/^[A-Za-z0-9]+$/.test(kind) || !fs.existsSync(file))
		return null;
	const m = /_schemas\/(\w+)\.js/.exec(fs.readFileSync(file, "utf8"));
	return m ? require(path.join(modelsDir, "_schemas", `${m[1]}.js`)).validate : null;
}

// A deep copy of v whose objects record which keys the validator read: the compiled schema
// reads every property it knows, so a key nobody read is unknown to the schema.
function track(v, where, nodes) {
	if (v === null || typeof v !== "object") return v;
	if (Array.isArray(v)) return v.map((x, i) => track(x, `${where}/${i}`, nodes));
	const read = new Set();
	const copy = {};
	for (const [k, x] of Object.entries(v)) copy[k] = track(x, `${where}/${k}`, nodes);
	nodes.push({ where, keys: Object.keys(v), read });
	return new Proxy(copy, {
		get(target, key, receiver) {
			if (typeof key === "string") read.add(key);
			return Reflect.get(target, key, receiver);
		},
	});
}

function schemaErrors(obj) {
	const validate = validatorFor(obj.apiVersion, obj.kind);
	if (!validate) return [`no schema for ${obj.apiVersion} ${obj.kind}`];
	const nodes = [];
	const errs = validate(track(obj, "", nodes)) ? [] : validate.errors.map(describe);
	const unknown = [];
	for (const n of nodes)
		for (const k of n.keys)
			if (!n.read.has(k)) unknown.push(`${n.where}/${k}`);
	// Report the outermost unknown key only.
	return errs.concat(unknown
		.filter((u) => !unknown.some((o) => o !== u && u.startsWith(`${o}/`)))
		.map((u) => `${u}: unknown field`));
}

// The schemas are compiled without ajv's messages: word the common ones.
function describe(e) {
	const at = e.instancePath || "/";
	const p = e.params ?? {};
	switch (e.keyword) {
		case "required":
			return `${at} must have required property '${p.missingProperty}'`;
		case "type":
			return `${at} must be ${p.type}`;
		case "enum":
			return `${at} must be one of ${JSON.stringify(p.allowedValues)}`;
		case "format":
			return `${at} must match format "${p.format}"`;
		default:
			return e.message ? `${at} ${e.message}` : `${at} fails ${e.keyword} ${JSON.stringify(p)}`;
	}
}

const secretName = /(PASSWORD|PASSPHRASE|SECRET|TOKEN|STORAGE_ACCESS_KEY|^WALG_LIBSODIUM_KEY$|^WALG_(PGP|GPG)_KEY$|^S3_SSE_C$|^GCS_ENCRYPTION_KEY$|PRIVATE_KEY)/i;

function podSpecs(obj) {
	switch (obj.kind) {
		case "Pod":
			return [obj.spec];
		case "Deployment":
		case "StatefulSet":
		case "DaemonSet":
		case "ReplicaSet":
		case "Job":
			return [obj.spec?.template?.spec];
		case "CronJob":
			return [obj.spec?.jobTemplate?.spec?.template?.spec];
		default:
			return [];
	}
}

function policyErrors(obj) {
	const errs = [];
	if (obj.kind === "ConfigMap")
		for (const k of Object.keys(obj.data ?? {}))
			if (secretName.test(k)) errs.push(`ConfigMap key ${k} holds a secret: use a Secret`);
	if (obj.kind === "Secret" && obj.data)
		errs.push("Secret with base64 data in a manifest: example Secrets use stringData placeholders");
	for (const spec of podSpecs(obj)) {
		if (!spec) continue;
		const pod = spec.securityContext ?? {};
		for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])].map((c, i) => ({ name: `#${i}`, ...c }))) {
			for (const e of c.env ?? [])
				if (secretName.test(e.name) && e.value !== undefined)
					errs.push(`container ${c.name}: env ${e.name} is a secret in plain text: use valueFrom.secretKeyRef`);
			if (!/(^|\/)walc(:|@|$)/.test(c.image ?? "")) continue; // the walc image only
			const sc = c.securityContext ?? {};
			if (sc.allowPrivilegeEscalation !== false)
				errs.push(`container ${c.name}: allowPrivilegeEscalation must be false`);
			if (sc.readOnlyRootFilesystem !== true)
				errs.push(`container ${c.name}: readOnlyRootFilesystem must be true`);
			if (!(sc.capabilities?.drop ?? []).includes("ALL"))
				errs.push(`container ${c.name}: capabilities must drop ALL`);
			const nonRoot = sc.runAsNonRoot ?? pod.runAsNonRoot;
			const uid = sc.runAsUser ?? pod.runAsUser;
			if (nonRoot !== true || uid === 0)
				errs.push(`container ${c.name}: must run as a non-root user (runAsNonRoot, runAsUser != 0)`);
		}
	}
	return errs;
}

let passed = 0;
let failed = 0;
for (const file of process.argv.slice(2)) {
	let docs;
	try {
		docs = yaml.loadAll(fs.readFileSync(file, "utf8"));
	} catch (e) {
		console.log(`FAIL ${file}: ${e.message}`);
		failed++;
		continue;
	}
	for (const obj of docs) {
		if (obj === null || obj === undefined) continue;
		if (obj.kind === "Kustomization") continue;
		const id = `${file}: ${obj.kind ?? "?"}/${obj.metadata?.name ?? "?"}`;
		const errs = typeof obj === "object" && obj.apiVersion && obj.kind
			? [...schemaErrors(obj), ...policyErrors(obj)]
			: ["not a Kubernetes object (apiVersion and kind)"];
		if (errs.length === 0) {
			console.log(`ok   ${id}`);
			passed++;
		} else {
			console.log(`FAIL ${id}`);
			for (const e of errs) console.log(`       ${e}`);
			failed++;
		}
	}
}
console.log(`objects: ${passed} valid, ${failed} invalid`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
