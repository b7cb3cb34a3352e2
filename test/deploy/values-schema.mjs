// Validates merged chart values (JSON, from `render -values-json`) against the chart's
// values.schema.json, as helm does before rendering (JSON Schema draft-07, all errors).
//
// Usage: node values-schema.mjs SCHEMA.json VALUES.json
import fs from "node:fs";
import Ajv from "ajv";

const [schemaFile, valuesFile] = process.argv.slice(2);
const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
const validate = ajv.compile(JSON.parse(fs.readFileSync(schemaFile, "utf8")));
if (validate(JSON.parse(fs.readFileSync(valuesFile, "utf8")))) {
	console.log(`ok   ${valuesFile}`);
} else {
	console.log(`FAIL ${valuesFile}`);
	for (const e of validate.errors)
		console.log(`       ${e.instancePath || "/"} ${e.message}${e.params?.additionalProperty ? `: ${e.params.additionalProperty}` : ""}`);
	process.exit(1);
}
