// Asserts what the walc chart renders for one store, beyond the schema (test/deploy/check.sh):
//   - the ConfigMap names one repository, the store's (WALG_S3_PREFIX, WALG_GS_PREFIX or
//     WALG_AZ_PREFIX), and no other store's settings;
//   - every container that runs walc (the CronJob's and restore Job's steps, the sidecars, and
//     the PostgreSQL container when it runs the copied binary) reads the ConfigMap, mounts each
//     file the ConfigMap points to (key files and the GCS service-account key from Secrets, the
//     CA bundle from a ConfigMap) at that path, and gets the same secretKeyRef variables;
//   - workload identities: with a ServiceAccount annotated for GKE, AKS or EKS, every pod
//     running walc uses that ServiceAccount, and with AKS's, is labelled
//     azure.workload.identity/use: "true" (the webhook injects nothing otherwise);
//   - remote deltas: WALG_DELTA_MAX_STEPS > 0 reaches backup-push, and the PostgreSQL container
//     gets summarize_wal=on;
//   - wal-receive: its connection (PGHOST, PGPORT, PGUSER, and PGDATABASE for the session that
//     reads its slot) and WALG_SLOTNAME;
//   - the restore Job: backup-fetch into the PostgreSQL container's PGDATA on a claim mounted
//     where the StatefulSet mounts its data volume, as the PostgreSQL user; with --target-time,
//     the restore_command it writes is the one the PostgreSQL container is given, and no
//     second container; without, backup-fetch is the initContainer and recovery.signal is
//     written after it.
// With --print-args OUTDIR it writes the restore Job's backup-fetch argv (restore.args) and the
// wal-receive container's plain env (wal-receive.env), for check.sh to run with the real binary.
//
// Usage: node assert-chart.mjs STORE FILE... [--print-args OUTDIR]   (STORE: s3, gcs or azure)
import fs from "node:fs";
import path from "node:path";
import yaml from "js-yaml";

const argv = process.argv.slice(2);
const store = argv.shift();
let outDir = null;
const files = [];
for (let i = 0; i < argv.length; i++) {
	if (argv[i] === "--print-args") outDir = argv[++i];
	else files.push(argv[i]);
}
const prefixes = { s3: "WALG_S3_PREFIX", gcs: "WALG_GS_PREFIX", azure: "WALG_AZ_PREFIX" };
// Settings only one store reads: a ConfigMap for another store must not carry them.
const storeOnly = {
	s3: /^(AWS_|S3_)/,
	gcs: /^(GCS_|GOOGLE_|STORAGE_EMULATOR_HOST$|GCE_METADATA_HOST$)/,
	azure: /^AZURE_/,
};
if (!prefixes[store] || files.length === 0) {
	console.log("usage: node assert-chart.mjs s3|gcs|azure FILE... [--print-args OUTDIR]");
	process.exit(2);
}

const docs = files.flatMap((f) => yaml.loadAll(fs.readFileSync(f, "utf8")).filter(Boolean));
const errors = [];
const fail = (m) => errors.push(m);
const BIN = "/usr/local/bin/walc";

const cms = docs.filter((d) => d.kind === "ConfigMap" && /-env$/.test(d.metadata.name));
if (cms.length !== 1) {
	console.log(`FAIL ${files.join(" ")}: expected one walc ConfigMap, found ${cms.length}`);
	process.exit(1);
}
const cm = cms[0];
const data = cm.data ?? {};

// --- the store -------------------------------------------------------------------------------
const named = Object.values(prefixes).filter((p) => p in data);
if (named.length !== 1 || named[0] !== prefixes[store])
	fail(`ConfigMap names ${JSON.stringify(named)}, expected ${prefixes[store]} only`);
for (const [other, re] of Object.entries(storeOnly))
	if (other !== store)
		for (const k of Object.keys(data)) if (re.test(k)) fail(`ConfigMap has ${k}, a ${other} setting`);
if (store === "azure" && !data.AZURE_STORAGE_ACCOUNT) fail("ConfigMap has no AZURE_STORAGE_ACCOUNT");

// --- pods and the containers that run walc ---------------------------------------------------
function podsOf(d) {
	switch (d.kind) {
		case "CronJob":
			return [d.spec.jobTemplate.spec.template];
		case "Job":
		case "StatefulSet":
		case "Deployment":
			return [d.spec.template];
		default:
			return [];
	}
}
const pods = docs.flatMap((d) => podsOf(d).map((t) => ({ owner: `${d.kind}/${d.metadata.name}`, t })));
const args = (c) => [...(c.command ?? []), ...(c.args ?? [])];
// The PostgreSQL container runs walc through archive_command or restore_command.
const runsWalc = (c) => args(c)[0] === BIN || args(c).some((a) => /^(archive|restore)_command=\S*walc /.test(a));
const walcContainers = [];
for (const p of pods)
	for (const c of [...(p.t.spec.initContainers ?? []), ...(p.t.spec.containers ?? [])])
		if (runsWalc(c)) walcContainers.push({ pod: p, c, id: `${p.owner} ${c.name}` });
if (walcContainers.length === 0) fail("no container runs walc");

const fileVars = ["WALG_LIBSODIUM_KEY_PATH", "WALG_PGP_KEY_PATH", "GOOGLE_APPLICATION_CREDENTIALS", "SSL_CERT_FILE"];
const secretRefs = (c) => (c.env ?? []).filter((e) => e.valueFrom?.secretKeyRef && e.name !== "PGPASSWORD")
	.map((e) => `${e.name}=${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`).sort();
const reference = walcContainers.length ? JSON.stringify(secretRefs(walcContainers[0].c)) : "";
for (const { pod, c, id } of walcContainers) {
	if (!(c.envFrom ?? []).some((f) => f.configMapRef?.name === cm.metadata.name))
		fail(`${id}: does not read ConfigMap ${cm.metadata.name}`);
	if (JSON.stringify(secretRefs(c)) !== reference)
		fail(`${id}: secret variables ${JSON.stringify(secretRefs(c))}, others have ${reference}`);
	for (const v of fileVars) {
		if (!(v in data)) continue;
		const dir = path.posix.dirname(data[v]);
		const file = path.posix.basename(data[v]);
		const m = (c.volumeMounts ?? []).find((x) => x.mountPath === dir);
		const vol = m && (pod.t.spec.volumes ?? []).find((x) => x.name === m.name);
		// Keys come from Secrets; the CA bundle, public, from a ConfigMap.
		const src = v === "SSL_CERT_FILE" ? vol?.configMap : vol?.secret;
		if (!src) fail(`${id}: ${v}=${data[v]}: no ${v === "SSL_CERT_FILE" ? "ConfigMap" : "Secret"} volume mounted at ${dir}`);
		else if (!(src.items ?? []).some((i) => i.path === file))
			fail(`${id}: ${v}=${data[v]}: volume ${m.name} has no item ${file}`);
	}
}

// --- workload identities ---------------------------------------------------------------------
const sa = docs.find((d) => d.kind === "ServiceAccount");
const ann = sa?.metadata?.annotations ?? {};
const identity = ["iam.gke.io/gcp-service-account", "azure.workload.identity/client-id", "eks.amazonaws.com/role-arn"]
	.filter((a) => a in ann);
const want = { gcs: "iam.gke.io/gcp-service-account", azure: "azure.workload.identity/client-id", s3: "eks.amazonaws.com/role-arn" }[store];
for (const a of identity) if (a !== want) fail(`ServiceAccount has ${a}, an identity of another cloud`);
if (identity.length)
	for (const p of new Set(walcContainers.map((w) => w.pod))) {
		if (p.t.spec.serviceAccountName !== sa.metadata.name)
			fail(`${p.owner}: runs as ServiceAccount ${p.t.spec.serviceAccountName}, not ${sa.metadata.name} (${identity[0]})`);
		if ("azure.workload.identity/client-id" in ann && p.t.metadata?.labels?.["azure.workload.identity/use"] !== "true")
			fail(`${p.owner}: no label azure.workload.identity/use: "true" (AKS injects no identity)`);
	}

// --- remote deltas ---------------------------------------------------------------------------
const postgres = walcContainers.find((w) => w.c.name === "postgresql");
const pgArgs = postgres ? args(postgres.c) : [];
if (Number(data.WALG_DELTA_MAX_STEPS ?? 0) > 0) {
	const push = walcContainers.find((w) => args(w.c)[1] === "backup-push");
	if (!push) fail("WALG_DELTA_MAX_STEPS is set but no backup-push step");
	else if ((push.c.env ?? []).some((e) => e.name === "WALG_DELTA_MAX_STEPS"))
		fail("backup-push overrides the ConfigMap's WALG_DELTA_MAX_STEPS");
	if (postgres && !pgArgs.includes("summarize_wal=on"))
		fail("deltas without summarize_wal=on in the PostgreSQL container (remote mode would take fulls)");
}

// --- wal-receive -----------------------------------------------------------------------------
const receive = walcContainers.find((w) => args(w.c)[1] === "wal-receive");
if (receive) {
	const env = Object.fromEntries((receive.c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
	for (const v of ["PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "WALG_SLOTNAME"])
		if (!env[v]) fail(`wal-receive: ${v} is not set`);
	if (outDir) {
		const lines = Object.entries({ ...data, ...env }).map(([k, v]) => `${k}=${v}`);
		fs.writeFileSync(path.join(outDir, "wal-receive.env"), lines.join("\n") + "\n");
	}
}

// --- the restore Job -------------------------------------------------------------------------
const job = pods.find((p) => p.owner.startsWith("Job/"));
if (job) {
	const spec = job.t.spec;
	const fetch = [...(spec.initContainers ?? []), ...(spec.containers ?? [])].find((c) => args(c)[1] === "backup-fetch");
	const a = fetch ? args(fetch) : [];
	const targeted = a.includes("--target-time");
	const pgdata = postgres?.c.env?.find((e) => e.name === "PGDATA")?.value;
	if (!fetch) fail("restore Job: no backup-fetch");
	else if (pgdata && a[2] !== pgdata) fail(`restore Job: restores into ${a[2]}, PostgreSQL's PGDATA is ${pgdata}`);
	const dataMount = (c) => (c.volumeMounts ?? []).find((m) => (spec.volumes ?? []).find((v) => v.name === m.name)?.persistentVolumeClaim);
	if (fetch && !dataMount(fetch)) fail("restore Job: backup-fetch mounts no claim");
	const pgMount = postgres?.c.volumeMounts?.find((m) => m.name === "data");
	if (fetch && pgMount && dataMount(fetch)?.mountPath !== pgMount.mountPath)
		fail(`restore Job: the claim is at ${dataMount(fetch)?.mountPath}, PostgreSQL's data volume at ${pgMount.mountPath}`);
	const uid = spec.securityContext?.runAsUser;
	const sts = docs.find((d) => d.kind === "StatefulSet");
	const pgUid = sts?.spec.template.spec.initContainers?.find((c) => c.name === "walc-install")?.securityContext?.runAsUser;
	if (pgUid !== undefined && uid !== pgUid) fail(`restore Job runs as uid ${uid}, PostgreSQL as ${pgUid}`);
	if (targeted) {
		const i = a.indexOf("--restore-command");
		const given = pgArgs.find((x) => x.startsWith("restore_command="))?.slice("restore_command=".length);
		if (given && (i < 0 || a[i + 1] !== given))
			fail(`restore Job writes restore_command ${JSON.stringify(a[i + 1])}, PostgreSQL is given ${JSON.stringify(given)}`);
		if ((spec.initContainers ?? []).length || (spec.containers ?? []).length !== 1)
			fail("restore Job with a target: backup-fetch should be the only container");
	} else {
		const signal = (spec.containers ?? []).find((c) => args(c).includes("touch"));
		if (!(spec.initContainers ?? []).includes(fetch) || !signal)
			fail("restore Job without a target: backup-fetch as initContainer, then recovery.signal");
		else if (pgdata && args(signal).at(-1) !== `${pgdata}/recovery.signal`)
			fail(`restore Job writes ${args(signal).at(-1)}, not ${pgdata}/recovery.signal`);
	}
	if (outDir && fetch) fs.writeFileSync(path.join(outDir, "restore.args"), a.slice(1).join("\n") + "\n");
}

const what = `${store}: ${walcContainers.length} walc containers` + (identity.length ? `, ${identity[0]}` : "") +
	(receive ? ", wal-receive" : "") + (job ? ", restore Job" : "");
if (errors.length) {
	console.log(`FAIL ${files.join(" ")} (${what}):`);
	for (const e of errors) console.log(`       ${e}`);
	process.exit(1);
}
console.log(`ok   ${files.join(" ")} (${what})`);
