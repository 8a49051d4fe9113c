// Wire compatibility of the Rate Limit Quota Service: Node's @grpc/grpc-js opens a real
// bidirectional StreamRateLimitQuotas stream to ratelimitd with the messages of Envoy's own
// rlqs.proto (the copy shipped inside npm @grpc/grpc-js-xds, loaded by @grpc/proto-loader).
// Usage: node rlqs_wire.js NODE_MODULES GRPC_PORT.  Exits 1 on the first wrong answer.
'use strict';
const path = require('path');
const mods = process.argv[2];
const port = process.argv[3];
const grpc = require(path.join(mods, '@grpc/grpc-js'));
const loader = require(path.join(mods, '@grpc/proto-loader'));
const deps = path.join(mods, '@grpc/grpc-js-xds/deps');
const def = loader.loadSync('envoy/service/rate_limit_quota/v3/rlqs.proto', {
  keepCase: true, longs: Number, enums: String, defaults: false, oneofs: true,
  includeDirs: ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(deps, d)),
});
const pkg = grpc.loadPackageDefinition(def);
const Svc = pkg.envoy.service.rate_limit_quota.v3.RateLimitQuotaService;
const client = new Svc('127.0.0.1:' + port, grpc.credentials.createInsecure());

function check(cond, what, obj) {
  if (!cond) {
    console.error('FAIL ' + what + ': ' + JSON.stringify(obj));
    process.exit(1);
  }
  console.log('ok   ' + what);
}
const usage = (bucket, allowed) => ({
  bucket_id: { bucket }, time_elapsed: { seconds: 0, nanos: 150000000 },
  num_requests_allowed: allowed, num_requests_denied: 0,
});
const key = (b) => JSON.stringify(Object.keys(b).sort().map((k) => [k, b[k]]));

const call = client.StreamRateLimitQuotas({ deadline: Date.now() + 10000 });
const got = {};
let answers = 0;
call.on('data', (resp) => {
  answers++;
  for (const a of resp.bucket_action) got[key(a.bucket_id.bucket)] = a;
  if (answers === 1) {
    const tb = got[key({ name: 'web', env: 'prod' })];
    check(tb && tb.bucket_action === 'quota_assignment_action', 'a QuotaAssignmentAction per bucket', resp);
    const q = tb.quota_assignment_action;
    check(Number(q.assignment_time_to_live.seconds) >= 2, 'assignment_time_to_live', q);
    const s = q.rate_limit_strategy;
    check(s.strategy === 'token_bucket' && s.token_bucket.max_tokens >= 1 &&
          s.token_bucket.tokens_per_fill.value >= 1 && s.token_bucket.tokens_per_fill.value <= 100 &&
          Number(s.token_bucket.fill_interval.seconds) === 1, 'a TokenBucket within the budget', s);
    const d = got[key({ name: 'blocked' })].quota_assignment_action.rate_limit_strategy;
    check(d.strategy === 'blanket_rule' && d.blanket_rule === 'DENY_ALL', 'a DENY_ALL blanket rule', d);
    const o = got[key({ name: 'other' })].quota_assignment_action.rate_limit_strategy;
    check(o.strategy === 'blanket_rule' && o.blanket_rule === 'ALLOW_ALL', 'ALLOW_ALL (written though 0)', o);
    call.end();
  }
});
call.on('error', (e) => { console.error('FAIL ' + e); process.exit(1); });
call.on('end', () => {
  check(answers === 1, 'the stream ends after the client ends its side', { answers });
  client.close();
});
call.write({ domain: 'wire', bucket_quota_usages: [usage({ name: 'web', env: 'prod' }, 12),
  usage({ name: 'blocked' }, 1), usage({ name: 'other' }, 1)] });
