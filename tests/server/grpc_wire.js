// Wire compatibility: Node's @grpc/grpc-js calling ratelimitd with the messages of Envoy's own
// rls.proto (the copy shipped inside npm @grpc/grpc-js-xds, loaded by @grpc/proto-loader).
// Usage: node grpc_wire.js NODE_MODULES GRPC_PORT.  Exits 1 on the first wrong answer.
'use strict';
const path = require('path');
const mods = process.argv[2];
const port = process.argv[3];
const grpc = require(path.join(mods, '@grpc/grpc-js'));
const loader = require(path.join(mods, '@grpc/proto-loader'));
const deps = path.join(mods, '@grpc/grpc-js-xds/deps');
const def = loader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  keepCase: true, longs: Number, enums: String, defaults: true,
  includeDirs: ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(deps, d)),
});
const pkg = grpc.loadPackageDefinition(def);
const Svc = pkg.envoy.service.ratelimit.v3.RateLimitService;
const client = new Svc('127.0.0.1:' + port, grpc.credentials.createInsecure());

function call(req) {
  return new Promise((resolve, reject) => {
    client.ShouldRateLimit(req, { deadline: Date.now() + 5000 }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}
function check(cond, what, obj) {
  if (!cond) {
    console.error('FAIL ' + what + ': ' + JSON.stringify(obj));
    process.exit(1);
  }
  console.log('ok   ' + what);
}
const d = (entries, extra) => Object.assign({ entries: entries.map(([key, value]) => ({ key, value })) }, extra || {});

(async () => {
  const r = { domain: 'wire', descriptors: [d([['k', 'a']]), d([['none', 'x']])] };
  let a = await call(r);
  check(a.overall_code === 'OK' && a.statuses.length === 2, 'overall_code and one status per descriptor', a);
  const s = a.statuses[0];
  check(s.code === 'OK' && s.current_limit.requests_per_unit === 3 && s.current_limit.unit === 'MINUTE' &&
        s.current_limit.name === 'wire_rule', 'current_limit with requests_per_unit, unit and name', s);
  check(s.limit_remaining === 2, 'limit_remaining', s);
  check(Number(s.duration_until_reset.seconds) > 0 && Number(s.duration_until_reset.seconds) <= 60,
        'duration_until_reset', s);
  check(a.statuses[1].code === 'OK' && a.statuses[1].current_limit === null, 'no rule: OK without current_limit', a.statuses[1]);
  const hs = Object.fromEntries(a.response_headers_to_add.map((h) => [h.key, h.value]));
  check(hs['ratelimit-policy'] === '"wire_rule";q=3;w=60', 'response_headers_to_add as HeaderValue', hs);
  a = await call({ domain: 'wire', descriptors: [d([['k', 'a']])], hits_addend: 2 });
  check(a.overall_code === 'OK' && a.statuses[0].limit_remaining === 0, 'hits_addend', a);
  a = await call({ domain: 'wire', descriptors: [d([['k', 'a']])] });
  check(a.overall_code === 'OVER_LIMIT' && a.statuses[0].code === 'OVER_LIMIT', 'OVER_LIMIT', a);
  const hs2 = Object.fromEntries(a.response_headers_to_add.map((h) => [h.key, h.value]));
  check(Number(hs2['retry-after']) >= 1, 'Retry-After on OVER_LIMIT', hs2);
  a = await call({ domain: 'wire', descriptors: [d([['o', 'x']], { limit: { requests_per_unit: 1, unit: 'HOUR' } })] });
  check(a.statuses[0].current_limit.requests_per_unit === 1 && a.statuses[0].current_limit.unit === 'HOUR',
        'the limit override of RateLimitDescriptor', a);
  try {
    await call({ domain: '', descriptors: [d([['k', 'a']])] });
    check(false, 'empty domain is an error', {});
  } catch (e) {
    check(e.code === grpc.status.UNKNOWN && /domain must not be empty/.test(e.details), 'empty domain is an error', e);
  }
  client.close();
})().catch((e) => { console.error('FAIL ' + e); process.exit(1); });
