// The Cloud Storage emulator of the Firebase CLI (npm firebase-tools), started directly: its
// GCS JSON API (media, multipart and resumable uploads, alt=media and ranged downloads,
// objects.list with prefix, delimiter and pages, deletes) is served by the admin storage
// layer, which needs no security rules. `firebase emulators:start` wants Java 21 and
// downloads a rules engine; neither is needed for that API, so the rules runtime is stubbed.
//
// One thing the emulator gets wrong is completed here, in front of it: it finalizes a
// resumable upload at its first PUT, whatever its Content-Range. Below, a chunk whose range
// ends in "/*" is appended to the session and answered 308 with the stored range, as GCS does;
// the last chunk (with the total) and everything else go to the emulator unchanged. The unit
// tests (test_objstore.c) check walc's side of that exchange byte for byte.
// Usage: node gcs-emulator.js HOST PORT DATADIR   (prints "ready PORT" once listening)
"use strict";
const path = require("path");
const [host, portText, dataDir] = process.argv.slice(2);
// the emulator keeps its blobs under os.tmpdir()/firebase: one per data directory
process.env.TMPDIR = dataDir;
const tools = path.join(__dirname, "node_modules", "firebase-tools", "lib", "emulator");
const { StorageEmulator } = require(path.join(tools, "storage"));
const { EmulatorRegistry } = require(path.join(tools, "registry"));
const server = require(path.join(tools, "storage", "server"));
const express = require(path.join(__dirname, "node_modules", "firebase-tools", "node_modules", "express"));

// Chunks of a resumable session before its last one.
function chunked(emu) {
	return (req, res, next) => {
		const range = req.header("content-range") || "";
		const m = /^bytes (\d+)-(\d+)\/\*$/.exec(range);
		if (req.method !== "PUT" || !req.query.upload_id || !m) return next();
		const parts = [];
		req.on("data", (d) => parts.push(d));
		req.on("end", () => {
			const body = Buffer.concat(parts);
			let upload;
			try {
				upload = emu.uploadService.getResumableUpload(String(req.query.upload_id));
			} catch (e) {
				return res.sendStatus(404);
			}
			if (Number(m[1]) !== upload.size || Number(m[2]) - Number(m[1]) + 1 !== body.length) {
				return res.status(400).send("chunk out of order");
			}
			emu.uploadService.continueResumableUpload(upload.id, body);
			res.header("range", `bytes=0-${upload.size - 1}`).sendStatus(308);
		});
	};
}

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
	const inner = server.createApp;
	server.createApp = async (...args) => {
		const app = express();
		app.use(chunked(emu));
		app.use(await inner(...args));
		return app;
	};
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
