// validate.mjs — validates AsyncAPI documents with the AsyncAPI project's own
// parser (@asyncapi/parser), then checks what cstream must have put in them.
// Usage: node validate.mjs FILE [EXPECT_JSON]. EXPECT_JSON (optional) is
// {"receive": {"<topic>": ["<payload property>", ...]}, "send": ["<topic>", ...],
//  "groups": {"<topic>": "<group id>"}}.
// Exit 0: valid and as expected; 1: not; errors and warnings are printed.
import { readFileSync } from 'node:fs';
import { Parser } from '@asyncapi/parser';

const [file, expectArg] = process.argv.slice(2);
const text = readFileSync(file, 'utf8');
const parser = new Parser();
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
