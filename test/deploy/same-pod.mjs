// Whether a plain manifest of deploy/kubernetes runs the same pod as the chart renders: the pod
// specs of the workload KIND/NAME in each file, compared after sorting what Kubernetes does not
// order (env, mounts, volumes by name; object keys). Labels and annotations are not compared:
// the chart's carry Helm's. Prints the first differences; exit 1 when there are any.
//
// Usage: node same-pod.mjs KIND PLAIN.yaml NAME RENDERED.yaml NAME
import fs from "node:fs";
import yaml from "js-yaml";

const [kind, plainFile, plainName, renderedFile, renderedName] = process.argv.slice(2);

function podSpec(file, name) {
	const obj = yaml.loadAll(fs.readFileSync(file, "utf8"))
		.find((d) => d && d.kind === kind && d.metadata?.name === name);
	if (!obj) throw new Error(`${file}: no ${kind} ${name}`);
	return kind === "CronJob" ? obj.spec.jobTemplate.spec.template.spec : obj.spec.template.spec;
}

// An image pull policy left out is Kubernetes' default for a tagged image: IfNotPresent.
function defaults(spec) {
	for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])])
		if (c.imagePullPolicy === undefined && !/:latest$/.test(c.image)) c.imagePullPolicy = "IfNotPresent";
	return spec;
}

// Keys sorted, arrays of named things sorted by name.
function normal(v) {
	if (Array.isArray(v)) {
		const a = v.map(normal);
		return a.every((x) => x && typeof x === "object" && "name" in x)
			? a.sort((x, y) => String(x.name).localeCompare(String(y.name)))
			: a;
	}
	if (v && typeof v === "object")
		return Object.fromEntries(Object.keys(v).sort().map((k) => [k, normal(v[k])]));
	return v;
}

const diffs = [];
function compare(a, b, at) {
	if (diffs.length >= 10) return;
	if (a && b && typeof a === "object" && typeof b === "object") {
		for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) compare(a[k], b[k], `${at}/${k}`);
	} else if (JSON.stringify(a) !== JSON.stringify(b)) {
		diffs.push(`${at}: plain ${JSON.stringify(a)}, chart ${JSON.stringify(b)}`);
	}
}
compare(normal(defaults(podSpec(plainFile, plainName))), normal(defaults(podSpec(renderedFile, renderedName))), "");
if (diffs.length) {
	console.log(`FAIL ${plainFile} ${kind}/${plainName} differs from ${renderedFile} ${kind}/${renderedName}:`);
	for (const d of diffs) console.log(`       ${d}`);
	process.exit(1);
}
console.log(`ok   ${plainFile} ${kind}/${plainName}: the chart's pod`);
