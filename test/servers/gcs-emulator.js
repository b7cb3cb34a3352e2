// The Cloud Storage emulator of the Firebase CLI (npm firebase-tools), started directly: its
// GCS JSON API (media, multipart and resumable uploads, alt=media and ranged downloads,
// objects.list with prefix, delimiter and pages, deletes) is served by the admin storage
// layer, which needs no security rules. `firebase emulators:start` wants Java 21 and
// downloads a rules engine; neither is needed for that API, so the rules runtime is stubbed.
// Usage: node gcs-emulator.js HOST PORT DATADIR   (prints "ready PORT" once listening)
"use strict";
const path = require("path");
const [host, portText, dataDir] = process.argv.slice(2);
// the emulator keeps its blobs under os.tmpdir()/firebase: one per data directory
process.env.TMPDIR = dataDir;
const tools = path.join(__dirname, "node_modules", "firebase-tools", "lib", "emulator");
const { StorageEmulator } = require(path.join(tools, "storage"));
const { EmulatorRegistry } = require(path.join(tools, "registry"));

async function main() {
	const emu = new StorageEmulator({
		projectId: "walc-test",
		host,
		port: Number(portText),
		rules: { name: path.join(dataDir, "none.rules"), content: "" },
		auto_download: false,
	});
	const none = { start: async () => undefined, stop: async () => undefined, getRuleset: () => undefined };
	emu._rulesRuntime.start = async () => undefined;
	emu._rulesRuntime.stop = async () => undefined;
	emu._rulesManager = none;
	emu.createRulesManager = () => none;
	await EmulatorRegistry.start(emu);
	console.log(`ready ${portText}`);
	const stop = async () => {
		await EmulatorRegistry.stopAll().catch(() => undefined);
		process.exit(0);
	};
	process.on("SIGTERM", stop);
	process.on("SIGINT", stop);
}
main().catch((e) => {
	console.error(e);
	process.exit(1);
});
