// Asserts that a rendered backup CronJob runs what the integration tests proved
// (test/integration/test_backup_remote.sh and the delete tests):
//   - `walc backup-push` with no PGDATA argument (remote mode: BASE_BACKUP over a replication
//     connection), PGHOST, PGPORT and PGUSER set, PGDATA nowhere in its environment;
//   - with retention N > 0: backup-push is the initContainer and the container runs
//     `walc delete retain FULL N --confirm` (WAL-G's syntax: the modifier before the count), so
//     deletion happens only after a successful backup; with N = 0, no delete at all;
//   - restartPolicy Never, so a failed step fails the Job instead of looping in place.
// With --print-args it also writes each step's argv, one per line, for check.sh to run against
// the real binary.
//
// Usage: node assert-cronjob.mjs RENDERED.yaml RETENTION [--print-args OUTDIR]
import fs from "node:fs";
import path from "node:path";
import yaml from "js-yaml";

const [file, retentionArg, flag, outDir] = process.argv.slice(2);
const retention = Number(retentionArg);
const docs = yaml.loadAll(fs.readFileSync(file, "utf8")).filter(Boolean);
const errors = [];
const fail = (m) => errors.push(m);

const crons = docs.filter((d) => d.kind === "CronJob");
if (crons.length !== 1) {
	console.log(`FAIL ${file}: expected one CronJob, found ${crons.length}`);
	process.exit(1);
}
const cron = crons[0];
const pod = cron.spec.jobTemplate.spec.template.spec;
const configMaps = docs.filter((d) => d.kind === "ConfigMap");
const init = pod.initContainers ?? [];
const main = pod.containers ?? [];

if (pod.restartPolicy !== "Never") fail(`restartPolicy is ${pod.restartPolicy}, expected Never`);

let push;
let del;
if (retention > 0) {
	if (init.length !== 1 || main.length !== 1) fail("expected one initContainer and one container");
	push = init[0];
	del = main[0];
} else {
	if (init.length !== 0 || main.length !== 1) fail("expected a single container and no initContainer");
	push = main[0];
}

const argv = (c) => [...(c?.command ?? []), ...(c?.args ?? [])];
const envNames = (c) => new Set((c?.env ?? []).map((e) => e.name));

// backup-push, remote mode.
const pa = argv(push);
if (pa[0] !== "/usr/local/bin/walc" || pa[1] !== "backup-push")
	fail(`backup-push step runs ${JSON.stringify(pa)}`);
// Every argument after the verb is a flag or a flag's value: no positional PGDATA.
const valueFlags = new Set(["--add-user-data", "--delta-from-name", "--delta-from-user-data"]);
for (let i = 2; i < pa.length; i++) {
	if (valueFlags.has(pa[i])) i++;
	else if (!pa[i].startsWith("-")) fail(`backup-push has a positional argument ${JSON.stringify(pa[i])} (PGDATA?)`);
}
for (const v of ["PGHOST", "PGPORT", "PGUSER"]) {
	const e = (push?.env ?? []).find((x) => x.name === v);
	if (!e || !(e.value ?? "").length) fail(`backup-push: ${v} is not set`);
}
if (envNames(push).has("PGDATA")) fail("backup-push: PGDATA is set (remote mode needs none)");
for (const cm of configMaps)
	if (cm.data && "PGDATA" in cm.data) fail(`ConfigMap ${cm.metadata.name} sets PGDATA`);
if (!(push?.envFrom ?? []).some((f) => f.configMapRef))
	fail("backup-push: no envFrom ConfigMap (the WALG_* settings)");

// delete retain FULL N --confirm.
if (retention > 0) {
	const da = argv(del);
	const want = ["/usr/local/bin/walc", "delete", "retain", "FULL", String(retention), "--confirm"];
	if (JSON.stringify(da) !== JSON.stringify(want))
		fail(`delete step runs ${JSON.stringify(da)}, expected ${JSON.stringify(want)}`);
} else if (docs.some((d) => JSON.stringify(d).includes('"delete"'))) {
	fail("retention is 0 but something runs delete");
}

if (flag === "--print-args" && outDir) {
	fs.writeFileSync(path.join(outDir, "backup-push.args"), pa.slice(1).join("\n") + "\n");
	if (del) fs.writeFileSync(path.join(outDir, "delete.args"), argv(del).slice(1).join("\n") + "\n");
}

if (errors.length) {
	console.log(`FAIL ${file} (retention ${retention}):`);
	for (const e of errors) console.log(`       ${e}`);
	process.exit(1);
}
console.log(`ok   ${file}: backup-push ${JSON.stringify(pa.slice(2))}` +
	(retention > 0 ? `, then delete retain FULL ${retention} --confirm` : ", no retention"));
