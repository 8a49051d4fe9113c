// The ctest test envoy_schema: every Envoy YAML we ship (examples/ and the docs' Envoy
// snippets, shipped.js) read as Envoy reads it into envoy.config.bootstrap.v3.Bootstrap
// (or the message a doc snippet names) and checked against the protoc-gen-validate rules of
// Envoy's upstream protos; then faults put into copies of the examples, each of which must be
// refused at its path and line: the two the examples had (an unquoted OFF, read as the boolean
// false by Envoy's YAML, in an enum; a RegexMatcher without its required engine) and planted ones.
// The protos: npm @grpc/grpc-js-xds 1.14.1, whose deps/envoy-api is envoyproxy/data-plane-api
// f8b75d1efa92bbf534596a013d9ca5873f79dd30 (2024-07-19, mirrored from envoyproxy/envoy
// 799e3e2cb6b4058912538e920b22a76edd55e283: main the day Envoy v1.31.0 was released).
// Usage: node envoy_schema.js NODE_MODULES SOURCE_DIR.  Exits 1 on any failure.
'use strict';
const fs = require('fs');
const path = require('path');
const schema = require('./schema.js');
const { shipped, docSnippets } = require('./shipped.js');

const [mods, src] = process.argv.slice(2);
let failed = 0;
const fail = (msg) => { console.log('FAIL ' + msg); failed++; };

const ctx = schema.open(mods);

// The protos are the recorded ones: Cluster.lrs_report_endpoint_metrics is the field that
// data-plane-api f8b75d1e renamed (from lrs_report_endpoint_metric).
const cluster = ctx.protos.lookup('envoy.config.cluster.v3.Cluster');
if (!cluster || !cluster.fields.lrs_report_endpoint_metrics || cluster.fields.lrs_report_endpoint_metric) {
  fail('the vendored envoy-api is not data-plane-api f8b75d1e (Cluster.lrs_report_endpoint_metrics): update the release named in docs/envoy.md and here');
}

// 1. What we ship passes.
const { items, notes } = shipped(mods, src);
for (const n of notes) console.log('note ' + n);
const files = new Set(items.map((i) => i.file));
for (const need of ['examples/envoy/envoy.yaml', 'examples/envoy/envoy_rlqs.yaml']) {
  if (!files.has(need)) fail(`${need} was not found as an Envoy bootstrap`);
}
for (const item of items) {
  const c = schema.checkItem(ctx, item);
  const where = item.lineBase ? `${item.file}:${item.lineBase}` : item.file;
  if (c.errors.length) {
    for (const l of schema.report(item, c)) fail(l);
    continue;
  }
  if (c.warnings.length) {
    // Envoy takes a deprecated field with a warning; we ship none (docs/envoy.md says so).
    for (const w of c.warnings) fail(`${item.file}:${w.line}: ${w.path}: ${w.msg}`);
    continue;
  }
  console.log(`ok   ${where} is a valid ${item.type}: ${c.stats.fields} fields, ${c.stats.anys} Any by @type, ` +
    `${c.stats.rules} validate rules, ${c.stats.types.size} message types` +
    (c.unenforced.size ? `; rules not enforced here: ${[...c.unenforced.keys()].join(', ')}` : ''));
  for (const w of c.stats.wip) console.log(`     work in progress upstream: ${w}`);
}

// 2. Faults in copies: each must be refused with an error at `path` whose text matches `msg`,
// on the line of the change (`line`: the line of the replaced text, unless given).
const read = (f) => fs.readFileSync(path.join(src, f), 'utf8');
const LIS = 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config';
const RL = `${LIS}.http_filters[0].typed_config`;
const RLQ = `${LIS}.http_filters[0].typed_config`;
const faults = [
  {
    name: 'known (a): a RegexMatcher without google_re2 (xds.type.matcher.v3.RegexMatcher requires its engine_type oneof)',
    file: 'examples/envoy/envoy_rlqs.yaml', from: '{safe_regex: {google_re2: {}, regex: ".+"}}', to: '{safe_regex: {regex: ".+"}}',
    path: `${RLQ}.bucket_matchers.matcher_list.matchers[0].predicate.single_predicate.value_match.safe_regex`, msg: /requires one of google_re2/,
  },
  {
    name: 'known (b): enable_x_ratelimit_headers: OFF unquoted (the boolean false to Envoy) in an enum',
    file: 'examples/envoy/envoy.yaml', from: 'enable_x_ratelimit_headers: "OFF"', to: 'enable_x_ratelimit_headers: OFF',
    path: `${RL}.enable_x_ratelimit_headers`, msg: /not the boolean false \(unquoted `OFF`/,
  },
  {
    name: 'planted: an unknown field (stat_prefx), and so the required stat_prefix missing',
    file: 'examples/envoy/envoy.yaml', from: 'stat_prefix: ingress', to: 'stat_prefx: ingress',
    path: `${LIS}.stat_prefx`, msg: /unknown field "stat_prefx" in envoy\.extensions\.filters\.network\.http_connection_manager\.v3\.HttpConnectionManager \(its fields include: stat_prefix/,
    also: [{ path: `${LIS}.stat_prefix`, msg: /needs at least 1 character/ }],
  },
  {
    name: 'planted: a wrong nesting (envoy_grpc straight under rate_limit_service, without grpc_service)',
    file: 'examples/envoy/envoy.yaml',
    from: 'rate_limit_service:\n                        transport_api_version: V3\n                        grpc_service:\n                          envoy_grpc: {cluster_name: ratelimitd}',
    to: 'rate_limit_service:\n                        transport_api_version: V3\n                        envoy_grpc: {cluster_name: ratelimitd}',
    path: `${RL}.rate_limit_service.envoy_grpc`, msg: /unknown field "envoy_grpc" in envoy\.config\.ratelimit\.v3\.RateLimitServiceConfig/, lineOffset: 2,
    also: [{ path: `${RL}.rate_limit_service.grpc_service`, msg: /grpc_service is required/ }],
  },
  {
    name: 'planted: a Duration in milliseconds (protobuf JSON takes seconds only)',
    file: 'examples/envoy/envoy.yaml', from: 'timeout: 0.05s', to: 'timeout: 50ms',
    path: `${RL}.timeout`, msg: /"50ms" is not a Duration/,
  },
  {
    name: 'planted: a Duration breaking its rule (Cluster.connect_timeout must be > 0s)',
    file: 'examples/envoy/envoy.yaml', from: '- name: backend\n      type: STATIC\n      connect_timeout: 1s', to: '- name: backend\n      type: STATIC\n      connect_timeout: 0s',
    path: 'static_resources.clusters[0].connect_timeout', msg: /connect_timeout must be > 0s, is 0s/, lineOffset: 2,
  },
  {
    name: 'planted: a required message missing (RateLimitQuotaFilterConfig.rlqs_server)',
    file: 'examples/envoy/envoy_rlqs.yaml', from: '                      rlqs_server:\n                        envoy_grpc: {cluster_name: ratelimitd}\n', to: '',
    path: `${RLQ}.rlqs_server`, msg: /rlqs_server is required \(envoy\.config\.core\.v3\.GrpcService\)/, line: 31,
  },
  {
    name: 'planted: unquoted `on` (a YAML 1.1 boolean to Envoy) in a string field',
    file: 'examples/envoy/envoy.yaml', from: 'stat_prefix: ingress', to: 'stat_prefix: on',
    path: `${LIS}.stat_prefix`, msg: /string field: a string, not the boolean true \(unquoted `on`/,
  },
  {
    name: 'planted: an unknown enum name (Cluster.type STATICK)',
    file: 'examples/envoy/envoy.yaml', from: '- name: backend\n      type: STATIC\n', to: '- name: backend\n      type: STATICK\n',
    path: 'static_resources.clusters[0].type', msg: /"STATICK" is not a value of envoy\.config\.cluster\.v3\.Cluster\.DiscoveryType/, lineOffset: 1,
  },
  {
    name: 'planted: an @type naming no message',
    file: 'examples/envoy/envoy.yaml', from: 'filters.http.ratelimit.v3.RateLimit\n', to: 'filters.http.ratelimit.v3.RateLimits\n',
    path: `${RL}.@type`, msg: /unknown @type type\.googleapis\.com\/envoy\.extensions\.filters\.http\.ratelimit\.v3\.RateLimits/,
  },
  {
    name: 'planted: a number past its bound (RateLimit.stage <= 10)',
    file: 'examples/envoy/envoy.yaml', from: '                              - actions:\n                                  - remote_address: {}',
    to: '                              - stage: 11\n                                actions:\n                                  - remote_address: {}',
    path: 'static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[1].route.rate_limits[0].stage',
    msg: /stage must be <= 10, is 11/,
  },
  {
    name: 'planted: a deprecated field (the cluster-level http2_protocol_options, for which envoy.yaml uses typed_extension_protocol_options)',
    file: 'examples/envoy/envoy.yaml',
    from: '      typed_extension_protocol_options:\n        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n          explicit_http_config:\n            http2_protocol_options: {}\n',
    to: '      http2_protocol_options: {}\n',
    path: 'static_resources.clusters[1].http2_protocol_options', msg: /http2_protocol_options is deprecated in envoy\.config\.cluster\.v3\.Cluster/, warning: true,
  },
];
// Controls: changes Envoy accepts must pass (the check refuses faults, not everything).
const controls = [
  { name: 'unquoted `no` (the boolean false) in a bool field', file: 'examples/envoy/envoy.yaml', from: 'failure_mode_deny: false', to: 'failure_mode_deny: no' },
  { name: 'another value of the enum, unquoted', file: 'examples/envoy/envoy.yaml', from: 'enable_x_ratelimit_headers: "OFF"', to: 'enable_x_ratelimit_headers: DRAFT_VERSION_03' },
  { name: 'an enum by number, a field by its JSON name', file: 'examples/envoy/envoy.yaml', from: 'stat_prefix: ingress', to: 'statPrefix: ingress\n                codec_type: 1' },
  // protobuf's legacy JSON syntax, which Envoy's JsonStringToMessage runs with, and Envoy's
  // case-insensitive enums
  { name: 'a Duration as an object', file: 'examples/envoy/envoy.yaml', from: 'timeout: 0.05s', to: 'timeout: {seconds: 0, nanos: 50000000}' },
  { name: 'an enum name in lower case', file: 'examples/envoy/envoy.yaml', from: 'transport_api_version: V3', to: 'transport_api_version: v3' },
  { name: 'a single value for a list (a list of one, with a warning)', file: 'examples/envoy/envoy.yaml', from: 'domains: ["*"]', to: 'domains: "*"', warns: /domains is a list: Envoy takes this single value as a list of one/ },
];

function mutate(t) {
  const text = read(t.file);
  const at = text.indexOf(t.from);
  if (at < 0 || text.indexOf(t.from, at + 1) >= 0) return { error: `the text to change is not in ${t.file} exactly once: ${JSON.stringify(t.from)}` };
  return { text: text.slice(0, at) + t.to + text.slice(at + t.from.length), line: text.slice(0, at).split('\n').length };
}

for (const t of faults) {
  const m = mutate(t);
  if (m.error) { fail(`${t.name}: ${m.error}`); continue; }
  const item = { file: t.file + ' (changed)', type: schema.BOOTSTRAP, text: m.text, lineBase: 0 };
  const c = schema.checkItem(ctx, item);
  const line = t.line || m.line + (t.lineOffset || 0);
  const lines = schema.report(item, c).concat(c.warnings.map((w) => `${item.file}:${w.line}: ${w.path}: warning: ${w.msg}`));
  let ok = true;
  for (const want of [{ path: t.path, msg: t.msg, line }].concat(t.also || [])) {
    const hit = (t.warning ? c.warnings : c.errors).find((e) => e.path === want.path && want.msg.test(e.msg) && (!want.line || e.line === want.line));
    if (!hit) {
      ok = false;
      fail(`${t.name}: no error at ${want.path}${want.line ? ' line ' + want.line : ''} matching ${want.msg}; got:\n  ${lines.join('\n  ') || '(no error)'}`);
    }
  }
  if (ok) console.log(`ok   refused: ${t.name}\n       ${lines.join('\n       ')}`);
}
for (const t of controls) {
  const m = mutate(t);
  if (m.error) { fail(`control ${t.name}: ${m.error}`); continue; }
  const item = { file: t.file + ' (changed)', type: schema.BOOTSTRAP, text: m.text, lineBase: 0 };
  const c = schema.checkItem(ctx, item);
  if (c.errors.length) fail(`control ${t.name}: refused:\n  ${schema.report(item, c).join('\n  ')}`);
  else if (t.warns && !c.warnings.some((w) => t.warns.test(w.msg))) fail(`control ${t.name}: no warning matching ${t.warns}`);
  else if (!t.warns && c.warnings.length) fail(`control ${t.name}: warned: ${JSON.stringify(c.warnings)}`);
  else console.log(`ok   accepted: ${t.name}` + (t.warns ? ` (warning: ${c.warnings[0].msg})` : ''));
}

// 3. The docs' snippets: a marked fragment is checked as its message (a fault found at its
// line in the document), an unmarked Envoy block is an error, a skipped one a note.
const md = [
  '# doc', '', '<!-- envoy-schema: envoy.config.route.v3.RouteAction -->', '```yaml', 'cluster: backend',
  'rate_limits:', '  - actions: [{remote_address: {}}]', '    stage: 11', '```', '',
  '```yaml', 'http_filters:', '  - name: envoy.filters.http.router', '```', '',
  '<!-- envoy-schema: skip a sketch -->', '```yaml', 'foo: {"@type": type.googleapis.com/envoy.x}', '```', '',
  '<!-- envoy-schema: envoy.config.route.v3.RouteAction -->', '```yaml', 'cluster: backend', 'timeout: 2s', '```', '',
].join('\n');
// the snippet of docs/envoy.md (the filter with initial_metadata), a field misspelt there
{
  const text = read('docs/envoy.md');
  const from = '    initial_metadata: [{key: authorization';
  const at = text.indexOf(from);
  const line = text.slice(0, at).split('\n').length;
  const r = at < 0 ? { items: [] } : docSnippets('docs/envoy.md', text.slice(0, at) + '    initial_metadta: [{key: authorization' + text.slice(at + from.length));
  const it = r.items.find((i) => i.type === 'envoy.extensions.filters.http.ratelimit.v3.RateLimit');
  const c = it && schema.checkItem(ctx, it);
  if (c && c.errors.some((e) => e.path === 'rate_limit_service.grpc_service.initial_metadta' && e.line === line && /unknown field/.test(e.msg))) {
    console.log(`ok   docs: refused: a misspelt field in docs/envoy.md's RateLimit snippet\n       ${schema.report(it, c).join('\n       ')}`);
  } else {
    fail(`docs: docs/envoy.md's RateLimit snippet with initial_metadta not refused at line ${line}: ${c ? JSON.stringify(c.errors) : 'snippet not found'}`);
  }
}
const d = docSnippets('doc.md', md);
const got = d.items.map((it) => ({ it, c: schema.checkItem(ctx, it) }));
const expectDoc = [
  [0, (c) => c.errors.some((e) => e.path === 'rate_limits[0].stage' && e.line === 8 && /must be <= 10/.test(e.msg)), 'a marked fragment: rate_limits[0].stage at doc.md:8'],
  [1, (c) => c.errors.some((e) => e.line === 11 && /envoy-schema: MESSAGE.TYPE/.test(e.msg)), 'an unmarked Envoy block at doc.md:11 is an error'],
  [2, (c) => c.errors.length === 0, 'a valid marked fragment passes'],
];
if (got.length !== 3) fail(`docSnippets found ${got.length} Envoy blocks in the test document, not 3`);
for (const [i, ok, what] of expectDoc) {
  if (got[i] && ok(got[i].c)) console.log(`ok   docs: ${what}` + (got[i].c.errors.length ? `\n       ${schema.report(got[i].it, got[i].c).join('\n       ')}` : ''));
  else fail(`docs: ${what}: got ${got[i] ? JSON.stringify(got[i].c.errors) : 'nothing'}`);
}
if (d.notes.some((n) => /doc\.md:17: an Envoy snippet left unchecked: a sketch/.test(n))) console.log('ok   docs: a skipped block is a note');
else fail(`docs: the skipped block is not noted: ${JSON.stringify(d.notes)}`);

console.log(failed ? `${failed} failed` : 'all passed');
process.exit(failed ? 1 : 0);
