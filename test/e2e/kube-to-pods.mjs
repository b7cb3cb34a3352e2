// Turns rendered Kubernetes objects into what `podman kube play` (podman 4.3) runs: one Pod file
// per workload, the ConfigMaps in one file for --configmap, and the volume claims to create.
// What changes, and why (docs/DEPLOY.md, "The pods, run by podman"):
//   - StatefulSet -> Pod <name>-0, its volumeClaimTemplates -> claims <template>-<name>-0, as
//     the StatefulSet controller names them; CronJob -> Pod <name>-manual (what
//     `kubectl create job --from=cronjob/<name>` starts); Job -> Pod <name>. podman has no
//     controllers: the test starts each pod when the scenario needs it.
//   - hostNetwork: true. podman has no Services or cluster DNS, so every pod and the test's
//     servers (S3, Prometheus, Pushgateway) meet on 127.0.0.1; the values give each its port.
//     Container ports go (podman refuses port mappings on the host's network; they are
//     informational in Kubernetes).
//   - Probes are dropped: podman runs them as commands inside the container (httpGet through
//     curl, which the walc image has not) on systemd timers, which these machines lack. The
//     test checks /healthz and pg_isready itself.
//   - Secret volumes get `optional: false`: podman 4.3 dereferences the field unset and panics.
//     With --secret-dir DIR, a Secret volume for which the test wrote DIR/<secret name>/ (its
//     files named as the volume's items name them) is that directory instead (hostPath): a
//     Secret object's data must be base64 for podman 4.3, which then writes it undecoded, so a
//     Secret volume can only hold base64 text (an armored OpenPGP key cannot go that way).
//   - podman 4.3 makes every emptyDir a named volume called like the pod's volume, which pods
//     would share and which outlives them: each is renamed <pod>-<volume>, one per pod as in
//     Kubernetes. ConfigMap and Secret volumes become volumes named like their object.
//   - A pod with init containers and restartPolicy Always gets OnFailure: podman 4.3 restarts
//     an init container that exited 0 like any other, then fails to remove it (it runs again).
//   - Init containers of run-once pods (restartPolicy Never) are kept after they exit (podman's
//     init container type "always"), so that the test can read their logs and exit codes.
//   - ServiceAccounts and Services are not created (no API server, no cluster network);
//     each ConfigMap goes to configmap-<name>.yaml, for --configmap.
//   - Workload identities, as the clouds hand them to a pod by its ServiceAccount, pointed at
//     the test's fake endpoints. With --gke-metadata HOST:PORT, a pod whose ServiceAccount has
//     iam.gke.io/gcp-service-account gets GCE_METADATA_HOST (GKE's metadata server answers
//     such pods). With --aks-webhook TENANT,AUTHORITY,TOKENDIR, a pod labelled
//     azure.workload.identity/use: "true" whose ServiceAccount has
//     azure.workload.identity/client-id gets what AKS's webhook injects: AZURE_CLIENT_ID (the
//     annotation), AZURE_TENANT_ID, AZURE_AUTHORITY_HOST, AZURE_FEDERATED_TOKEN_FILE, and the
//     token file (TOKENDIR/azure-identity-token, written by the test) mounted at
//     /var/run/secrets/azure/tokens. A pod missing its label or ServiceAccount gets nothing,
//     as in the clouds.
// Secrets are made by the test: podman 4.3 reads secretKeyRef from a JSON map it keeps, and
// secret volumes from a Secret object whose `data` values it writes without base64-decoding
// them (ignoring stringData).
//
// Usage: node kube-to-pods.mjs [--gke-metadata HOST:PORT] [--aks-webhook TENANT,AUTHORITY,TOKENDIR]
//        [--secret-dir DIR] OUTDIR FILE...   writes OUTDIR/<pod>.yaml, OUTDIR/configmap-*.yaml,
// OUTDIR/claims.txt (the volume claims to create, one a line), OUTDIR/volumes.txt (every volume
// podman will make, to remove afterwards) and prints the pod names.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const yaml = require(path.join(path.dirname(new URL(import.meta.url).pathname),
	"../deploy/node_modules/js-yaml"));

const argv = process.argv.slice(2);
const opts = {};
while (argv[0]?.startsWith("--")) opts[argv.shift()] = argv.shift();
const [outDir, ...files] = argv;
if (!outDir || files.length === 0) {
	console.error("usage: node kube-to-pods.mjs [--gke-metadata HOST:PORT] " +
		"[--aks-webhook TENANT,AUTHORITY,TOKENDIR] [--secret-dir DIR] OUTDIR FILE...");
	process.exit(2);
}
const docs = files.flatMap((file) => yaml.loadAll(fs.readFileSync(file, "utf8")).filter(Boolean)
	.map((obj) => ({ file, obj })));
const accounts = new Map(docs.filter((d) => d.obj.kind === "ServiceAccount")
	.map((d) => [d.obj.metadata.name, d.obj.metadata.annotations ?? {}]));
fs.mkdirSync(outDir, { recursive: true });

const pods = [];
const configMaps = [];
const claims = new Set();
const volumes = new Set();

const TOKEN_DIR = "/var/run/secrets/azure/tokens";
function identity(spec, labels) {
	const ann = accounts.get(spec.serviceAccountName) ?? {};
	const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
	const inject = (env) => { for (const c of containers) c.env = [...(c.env ?? []), ...env]; };
	if (opts["--gke-metadata"] && ann["iam.gke.io/gcp-service-account"])
		inject([{ name: "GCE_METADATA_HOST", value: opts["--gke-metadata"] }]);
	const client = ann["azure.workload.identity/client-id"];
	if (opts["--aks-webhook"] && client && labels["azure.workload.identity/use"] === "true") {
		const [tenant, authority, tokenDir] = opts["--aks-webhook"].split(",");
		inject([
			{ name: "AZURE_CLIENT_ID", value: client },
			{ name: "AZURE_TENANT_ID", value: tenant },
			{ name: "AZURE_AUTHORITY_HOST", value: authority },
			{ name: "AZURE_FEDERATED_TOKEN_FILE", value: `${TOKEN_DIR}/azure-identity-token` },
		]);
		spec.volumes = [...(spec.volumes ?? []), { name: "azure-identity-token",
			hostPath: { path: tokenDir, type: "Directory" } }];
		for (const c of containers)
			c.volumeMounts = [...(c.volumeMounts ?? []), { name: "azure-identity-token", mountPath: TOKEN_DIR, readOnly: true }];
	}
}

function podFrom(name, template, extraLabels) {
	const spec = structuredClone(template.spec);
	identity(spec, template.metadata?.labels ?? {});
	spec.hostNetwork = true;
	if ((spec.restartPolicy ?? "Always") === "Always" && spec.initContainers?.length)
		spec.restartPolicy = "OnFailure";
	delete spec.serviceAccountName;
	delete spec.automountServiceAccountToken;
	for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
		delete c.livenessProbe;
		delete c.readinessProbe;
		delete c.startupProbe;
		delete c.ports;
	}
	const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
	for (const v of spec.volumes ?? []) {
		const dir = v.secret && opts["--secret-dir"] && path.join(opts["--secret-dir"], v.secret.secretName);
		if (dir && fs.existsSync(dir)) {
			delete v.secret;
			v.hostPath = { path: dir, type: "Directory" };
		}
		if (v.secret) {
			if (v.secret.optional === undefined) v.secret.optional = false;
			volumes.add(v.secret.secretName);
		}
		if (v.configMap) volumes.add(v.configMap.name);
		if (v.persistentVolumeClaim) claims.add(v.persistentVolumeClaim.claimName);
		if (v.emptyDir) {
			const own = `${name}-${v.name}`;
			for (const c of containers)
				for (const m of c.volumeMounts ?? []) if (m.name === v.name) m.name = own;
			v.name = own;
			volumes.add(own);
		}
	}
	const metadata = {
		name,
		labels: { ...(template.metadata?.labels ?? {}), ...extraLabels },
		annotations: { ...(template.metadata?.annotations ?? {}) },
	};
	if (spec.initContainers?.length && spec.restartPolicy === "Never")
		metadata.annotations["io.podman.annotations.init.container.type"] = "always";
	return { apiVersion: "v1", kind: "Pod", metadata, spec };
}

for (const { file, obj } of docs) {
	const name = obj.metadata?.name;
	switch (obj.kind) {
		case "StatefulSet": {
			const pod = podFrom(`${name}-0`, obj.spec.template, {});
			for (const t of obj.spec.volumeClaimTemplates ?? []) {
				const claimName = `${t.metadata.name}-${name}-0`;
				pod.spec.volumes = (pod.spec.volumes ?? []).filter((v) => v.name !== t.metadata.name);
				pod.spec.volumes.push({ name: t.metadata.name, persistentVolumeClaim: { claimName } });
				claims.add(claimName);
			}
			pods.push(pod);
			break;
		}
		case "CronJob":
			pods.push(podFrom(`${name}-manual`, obj.spec.jobTemplate.spec.template,
				{ "job-name": `${name}-manual` }));
			break;
		case "Job":
			pods.push(podFrom(name, obj.spec.template, { "job-name": name }));
			break;
		case "Pod":
			pods.push(podFrom(name, obj, {}));
			break;
		case "ConfigMap":
			configMaps.push(obj);
			break;
		case "ServiceAccount":
		case "Service":
			break;
		default:
			console.error(`${file}: ${obj.kind} ${name}: not something podman kube play runs`);
			process.exit(1);
	}
}

const dump = (objs) => objs.map((d) => yaml.dump(d, { lineWidth: -1, noRefs: true })).join("---\n");
for (const pod of pods) fs.writeFileSync(path.join(outDir, `${pod.metadata.name}.yaml`), dump([pod]));
// podman 4.3 reads one ConfigMap per --configmap file.
for (const cm of configMaps)
	fs.writeFileSync(path.join(outDir, `configmap-${cm.metadata.name}.yaml`), dump([cm]));
const lines = (set) => [...set].map((c) => `${c}\n`).join("");
fs.writeFileSync(path.join(outDir, "claims.txt"), lines(claims));
fs.writeFileSync(path.join(outDir, "volumes.txt"), lines(new Set([...claims, ...volumes])));
for (const pod of pods) console.log(pod.metadata.name);
