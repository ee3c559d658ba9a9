// validate.mjs — validates AsyncAPI documents with the AsyncAPI project's own
// parser (@asyncapi/parser) and its Avro and Protobuf schema parsers, which
// read the payload schemas of those formats (a Multi Format Schema Object's
// schema) and turn them into AsyncAPI schemas; then checks what cstream must
// have put in them.
// Usage: node validate.mjs FILE [EXPECT_JSON]. EXPECT_JSON (optional) is
// {"receive": {"<topic>": ["<payload property>", ...]}, "send": ["<topic>", ...],
//  "groups": {"<topic>": "<group id>"}, "formats": {"<topic>": "<schemaFormat>"}}.
// A payload property of an Avro or Protobuf payload is only there if its
// schema parser parsed the schema.
// Exit 0: valid and as expected; 1: not; errors and warnings are printed.
import { readFileSync } from 'node:fs';
import { Parser } from '@asyncapi/parser';
import { AvroSchemaParser } from '@asyncapi/avro-schema-parser';
import { ProtoBuffSchemaParser } from '@asyncapi/protobuf-schema-parser';

const [file, expectArg] = process.argv.slice(2);
const text = readFileSync(file, 'utf8');
const parser = new Parser();
parser.registerSchemaParser(AvroSchemaParser());
parser.registerSchemaParser(ProtoBuffSchemaParser());
const { document, diagnostics } = await parser.parse(text);
let failed = false;
for (const d of diagnostics) {
  const where = (d.path || []).join('/');
  // severity 0 is an error; 1 warning; 2 info; 3 hint
  console.log(`${['error', 'warning', 'info', 'hint'][d.severity]} ${d.code} at /${where}: ${d.message}`);
  if (d.severity === 0) failed = true;
}
if (!document) {
  console.log('FAIL: the parser returned no document');
  process.exit(1);
}
// @asyncapi/parser 3 converts an AsyncAPI 3 document's Avro and Protobuf
// schemas with the schema parsers' parse() but runs their validate() (avsc's
// check of an Avro schema: unknown types, bad names) for AsyncAPI 2 documents
// only; so every schema a schema parser converted (it keeps the original in
// x-parser-original-payload) is validated here by that parser.
const schemaParsers = [AvroSchemaParser(), ProtoBuffSchemaParser()];
const seen = new Set();
const converted = [];
async function validateConverted(v, path) {
  if (!v || typeof v !== 'object' || seen.has(v)) return;
  seen.add(v);
  const original = v['x-parser-original-payload'];
  if (typeof v.schemaFormat === 'string' && original !== undefined) {
    const sp = schemaParsers.find((p) => p.getMimeTypes().includes(v.schemaFormat));
    if (sp) {
      converted.push(`/${path.join('/')} (${v.schemaFormat})`);
      const input = { asyncapi: {}, data: original, meta: {}, path, schemaFormat: v.schemaFormat, defaultSchemaFormat: '' };
      for (const e of await sp.validate(input)) {
        console.log(`error schema-parser at /${path.join('/')}: ${e.message}`);
        failed = true;
      }
    }
  }
  for (const [k, c] of Object.entries(v)) await validateConverted(c, [...path, k]);
}
await validateConverted(document.json(), []);
for (const c of converted) console.log(`converted and validated ${c}`);
if (expectArg) {
  const expect = JSON.parse(expectArg);
  const ops = document.operations().all();
  const check = (ok, what) => {
    if (!ok) {
      console.log(`FAIL: ${what}`);
      failed = true;
    }
  };
  for (const [topic, props] of Object.entries(expect.receive || {})) {
    const op = ops.find((o) => o.isReceive() && o.channels().all().some((c) => c.address() === topic));
    check(op, `no receive operation for ${topic}`);
    if (!op) continue;
    const msg = op.messages().all()[0];
    check(msg, `receive ${topic}: no message`);
    if (!msg || !props.length) continue;
    const schema = msg.payload();
    check(schema, `receive ${topic}: no payload schema`);
    if (!schema) continue;
    const format = (expect.formats || {})[topic];
    if (format) check(schema.schemaFormat() === format, `receive ${topic}: schemaFormat is ${schema.schemaFormat()}, not ${format}`);
    const have = Object.keys(schema.properties() || {});
    for (const p of props) check(have.includes(p), `receive ${topic}: payload lacks property ${p} (has ${have})`);
    const group = (expect.groups || {})[topic];
    if (group) {
      const kafka = op.bindings().get('kafka');
      const gid = kafka && kafka.value().groupId;
      check(gid && gid.enum && gid.enum[0] === group, `receive ${topic}: groupId binding is not ${group}`);
    }
  }
  for (const topic of expect.send || []) {
    const op = ops.find((o) => o.isSend() && o.channels().all().some((c) => c.address() === topic));
    check(op, `no send operation for ${topic}`);
  }
}
console.log(failed ? 'INVALID' : 'VALID');
process.exit(failed ? 1 : 0);
