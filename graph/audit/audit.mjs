// The GraphQL-over-HTTP audit of graphql-http against a running endpoint:
//
//   node graph/audit/audit.mjs [--prod] <url>
//
// It prints every audit's result and exits 1 on any MUST failure or SHOULD
// warning (MAY notices are printed, not counted). With --prod (introspection
// off, as SECKILL_ENV=prod serves it) the audits whose request asks for
// __type fail by design; those are allowed, and only when the answer says
// introspection is disabled. internal/app's TestGraphQLOverHTTPAudit runs
// it against a dev and a prod server; make test installs the packages
// (make graph-audit).
import { serverAudits } from 'graphql-http';

// The audits whose request is a `__type` query (graphql-http 1.23.1).
const introspecting = new Set(['BF61', '78D5', '2EA1', '28B9', 'D6D5', '6A70']);

const args = process.argv.slice(2);
const prod = args.includes('--prod');
const url = args.find((a) => !a.startsWith('--'));
if (!url) {
  console.error('usage: node audit.mjs [--prod] <url>');
  process.exit(2);
}

let bad = 0;
let allowed = 0;
const counts = { ok: 0, notice: 0, warn: 0, error: 0 };
for (const { id, name, fn } of serverAudits({ url, fetchFn: fetch })) {
  const r = await fn();
  counts[r.status]++;
  if (r.status === 'ok') {
    console.log(`ok     ${id} ${name}`);
    continue;
  }
  let body = '';
  try {
    body = await r.response.clone().text();
  } catch {
    // the audit read it already
  }
  const detail = `${r.reason} (status ${r.response.status}: ${body.slice(0, 300)})`;
  if (r.status === 'notice') {
    console.log(`notice ${id} ${name}: ${detail}`);
    continue;
  }
  if (prod && introspecting.has(id) && /introspection is disabled/.test(body)) {
    allowed++;
    console.log(`prod   ${id} ${name}: introspection is off: ${detail}`);
    continue;
  }
  bad++;
  console.log(`${r.status.toUpperCase().padEnd(6)} ${id} ${name}: ${detail}`);
}
console.log(
  `graphql-http audit of ${url}${prod ? ' (prod)' : ''}: ${counts.ok} ok, ${counts.notice} MAY notices, ` +
    `${counts.warn} SHOULD warnings, ${counts.error} MUST failures` +
    (prod ? `, ${allowed} of them caused by introspection being off` : ''),
);
process.exit(bad === 0 ? 0 : 1);
