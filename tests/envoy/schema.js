// Envoy's own schema for the Envoy YAML we ship: a file is read as Envoy reads it (yaml-cpp's
// scalars through Envoy's YAML-to-JSON conversion, then protobuf's JSON parser into
// envoy.config.bootstrap.v3.Bootstrap, every google.protobuf.Any by its @type), and checked
// against the protoc-gen-validate rules its upstream .proto files declare.
// The protos are the ones npm @grpc/grpc-js-xds vendors (deps/: envoy-api, xds, googleapis,
// protoc-gen-validate), loaded by protobufjs; the YAML parser is npm yaml (its syntax only: the
// scalars are typed here, as Envoy types them).  Used by envoy_schema.js (the ctest test) and
// by hand: node schema.js NODE_MODULES FILE[=MESSAGE_TYPE]...
'use strict';
const fs = require('fs');
const net = require('net');
const path = require('path');
const { readYaml } = require('./envoy_yaml.js');

const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';

// ---- the protos -------------------------------------------------------------------------

function openProtos(mods) {
  const pb = require(path.join(mods, 'protobufjs'));
  const deps = path.join(mods, '@grpc/grpc-js-xds/deps');
  // google/protobuf/descriptor.proto (imported by validate.proto) is protobufjs's own copy;
  // the other well-known types are bundled in protobufjs.
  const inc = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate']
    .map((d) => path.join(deps, d))
    .concat([path.join(mods, 'protobufjs')]);
  const root = new pb.Root();
  root.resolvePath = (origin, target) => {
    if (path.isAbsolute(target)) return target;
    for (const d of inc) {
      const p = path.join(d, target);
      if (fs.existsSync(p)) return p;
    }
    return target;
  };
  const loadedDirs = new Set();
  const opts = { keepCase: true };
  root.loadSync('envoy/config/bootstrap/v3/bootstrap.proto', opts);
  root.resolveAll();

  // A message named by an @type or by hand: its package's folder is loaded on first use
  // (envoy.extensions.filters.http.ratelimit.v3.RateLimit: envoy/extensions/filters/http/ratelimit/v3/*.proto).
  function lookup(name) {
    let t = root.lookup(name);
    if (t instanceof pb.Type || t instanceof pb.Enum) return t;
    const parts = name.split('.');
    const pkg = [];
    for (const p of parts) {
      if (/^[A-Z]/.test(p)) break;
      pkg.push(p);
    }
    const rel = pkg.join('/');
    if (loadedDirs.has(rel)) return null;
    loadedDirs.add(rel);
    const files = [];
    for (const d of inc) {
      const dir = path.join(d, rel);
      if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) continue;
      for (const f of fs.readdirSync(dir).sort()) if (f.endsWith('.proto')) files.push(path.join(rel, f));
    }
    if (files.length === 0) return null;
    root.loadSync(files, opts);
    root.resolveAll();
    t = root.lookup(name);
    return t instanceof pb.Type || t instanceof pb.Enum ? t : null;
  }
  return { pb, root, lookup, deps };
}

// ---- protobuf's JSON mapping and protoc-gen-validate's rules -------------------------------

const WRAPPERS = {
  'google.protobuf.DoubleValue': 'double', 'google.protobuf.FloatValue': 'float',
  'google.protobuf.Int64Value': 'int64', 'google.protobuf.UInt64Value': 'uint64',
  'google.protobuf.Int32Value': 'int32', 'google.protobuf.UInt32Value': 'uint32',
  'google.protobuf.BoolValue': 'bool', 'google.protobuf.StringValue': 'string',
  'google.protobuf.BytesValue': 'bytes',
};
const INT_RANGE = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n], sint32: [-(2n ** 31n), 2n ** 31n - 1n], sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n], fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n], sint64: [-(2n ** 63n), 2n ** 63n - 1n], sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n], fixed64: [0n, 2n ** 64n - 1n],
};
const TYPED_STRUCTS = ['xds.type.v3.TypedStruct', 'udpa.type.v1.TypedStruct'];

const wipCache = new Map();
function wipFile(file) {
  if (!wipCache.has(file)) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    wipCache.set(file, /^option\s+\(xds\.annotations\.v3\.file_status\)\.work_in_progress\s*=\s*true/m.test(text));
  }
  return wipCache.get(file);
}
const bare = (t) => (t.fullName || '').replace(/^\./, '');
const jsonName = (n) => n.replace(/_([a-z0-9])/g, (m, c) => c.toUpperCase());

function describe(n) {
  if (n.kind === 'map') return 'an object';
  if (n.kind === 'seq') return 'a list';
  if (n.v === null) return 'null';
  if (typeof n.v === 'boolean') {
    return `the boolean ${n.v}` + (n.text && n.text !== String(n.v) ? ` (unquoted \`${n.text}\` is a YAML 1.1 boolean to Envoy: quote it)` : '');
  }
  if (typeof n.v === 'number') return `the number ${n.v}`;
  return `the string ${JSON.stringify(n.v)}`;
}

// Merge the (validate.rules) entries of a field's parsedOptions into one object.
function deepMerge(a, b) {
  for (const [k, v] of Object.entries(b)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && a[k] && typeof a[k] === 'object') deepMerge(a[k], v);
    else a[k] = v;
  }
  return a;
}
function optionsOf(obj, name) {
  const out = {};
  let any = false;
  for (const o of obj.parsedOptions || []) {
    if (o && Object.prototype.hasOwnProperty.call(o, name)) {
      any = true;
      if (o[name] && typeof o[name] === 'object') deepMerge(out, o[name]);
      else return o[name];
    }
  }
  return any ? out : undefined;
}

function durationNs(d) {
  // a rule's constant: {seconds, nanos} (either may be absent: {} is 0 s)
  return BigInt(d && d.seconds ? String(d.seconds) : '0') * 1000000000n + BigInt(d && d.nanos ? d.nanos : 0);
}
function fmtNs(ns) {
  const neg = ns < 0n;
  const a = neg ? -ns : ns;
  const s = a / 1000000000n;
  const f = a % 1000000000n;
  return (neg ? '-' : '') + s + (f ? '.' + String(f).padStart(9, '0').replace(/0+$/, '') : '') + 's';
}

class Checker {
  constructor(protos) {
    this.p = protos;
    this.errors = [];
    this.warnings = [];
    this.unenforced = new Map(); // rule -> count
    this.stats = { fields: 0, rules: 0, anys: 0, types: new Set(), wip: new Set() };
  }
  // The types read, and those upstream marks work in progress (its file or the message).
  noteType(type) {
    const name = bare(type);
    this.stats.types.add(name);
    let t = type;
    while (t && !t.filename) t = t.parent;
    if (t && t.filename && wipFile(t.filename)) this.stats.wip.add(`${name} (${path.basename(t.filename)})`);
    if (type.options && type.options['(xds.annotations.v3.message_status).work_in_progress']) this.stats.wip.add(name);
  }
  err(node, at, msg) { this.errors.push({ line: node ? node.line : 0, path: at, msg }); }
  skip(rule) { this.unenforced.set(rule, (this.unenforced.get(rule) || 0) + 1); }

  // The value of a message field (or of a whole message) against its type.
  message(node, type, at) {
    const name = bare(type);
    this.noteType(type);
    if (name === 'google.protobuf.Any') return this.any(node, at);
    // protobuf's JSON parser, in the legacy syntax Envoy's JsonStringToMessage runs with, reads
    // an object given for a Duration, Timestamp, FieldMask, wrapper or ListValue as the message
    // itself ({seconds: 1}, {value: 5}).
    const legacyObject = node.kind === 'map' && ['google.protobuf.Duration', 'google.protobuf.Timestamp', 'google.protobuf.FieldMask',
      'google.protobuf.ListValue'].concat(Object.keys(WRAPPERS)).includes(name);
    if (legacyObject) return this.fields(node, type, at, node.entries);
    if (name === 'google.protobuf.Duration') return this.durationValue(node, at);
    if (name === 'google.protobuf.Timestamp') {
      if (node.kind !== 'scalar' || typeof node.v !== 'string' || isNaN(Date.parse(node.v))) this.err(node, at, `a Timestamp is an RFC 3339 string, not ${describe(node)}`);
      return null;
    }
    if (name === 'google.protobuf.FieldMask') {
      if (node.kind !== 'scalar' || typeof node.v !== 'string') this.err(node, at, `a FieldMask is a string, not ${describe(node)}`);
      return null;
    }
    if (name === 'google.protobuf.Value' || name === 'google.protobuf.Struct' || name === 'google.protobuf.ListValue') {
      if (name === 'google.protobuf.Struct' && node.kind !== 'map') this.err(node, at, `a Struct is an object, not ${describe(node)}`);
      if (name === 'google.protobuf.ListValue' && node.kind !== 'seq') this.err(node, at, `a ListValue is a list, not ${describe(node)}`);
      return null;
    }
    if (WRAPPERS[name]) return this.scalar(node, WRAPPERS[name], null, at);
    if (node.kind !== 'map') {
      this.err(node, at, `${name} is an object, not ${describe(node)}`);
      return null;
    }
    return this.fields(node, type, at, node.entries);
  }

  fields(node, type, at, entries) {
    const byName = new Map();
    for (const f of type.fieldsArray) {
      byName.set(f.name, f);
      byName.set(jsonName(f.name), f);
      if (f.options && f.options.json_name) byName.set(f.options.json_name, f);
    }
    const set = new Map(); // field name -> value node (not null)
    for (const e of entries) {
      const p = at ? `${at}.${e.key}` : e.key;
      const f = byName.get(e.key);
      if (!f) {
        const near = type.fieldsArray.map((x) => x.name).filter((n) => n.includes(e.key) || e.key.includes(n) || lev(n, e.key) <= 2);
        this.err(e, p, `unknown field "${e.key}" in ${bare(type)}` + (near.length ? ` (its fields include: ${near.join(', ')})` : ''));
        continue;
      }
      if (set.has(f.name) && !(e.value.kind === 'scalar' && e.value.v === null)) {
        if (f.partOf && !(f.partOf.fieldsArray.length === 1 && f.partOf.name === '_' + f.name)) {
          this.err(e, p, `${f.name} given twice`);
          continue;
        }
        this.warnings.push({ line: e.line, path: p, msg: `${f.name} given twice (by its name and its JSON name): Envoy takes ${f.repeated || f.map ? 'both' : 'the last'}` });
      }
      this.stats.fields++;
      if (e.value.kind === 'scalar' && e.value.v === null) continue; // JSON null: the field is unset
      set.set(f.name, { node: e.value, at: p, line: e.line });
      if (f.options && f.options.deprecated) this.warnings.push({ line: e.line, path: p, msg: `${f.name} is deprecated in ${bare(type)}` });
      if (f.options && f.options['(xds.annotations.v3.field_status).work_in_progress']) this.stats.wip.add(`${bare(type)}.${f.name}`);
      this.field(e.value, f, p);
    }
    const disabled = type.options && (type.options['(validate.disabled)'] || type.options['(validate.ignored)']);
    // oneofs: protobuf refuses two members; (validate.required) wants one
    for (const o of type.oneofsArray) {
      const members = o.fieldsArray.filter((f) => set.has(f.name));
      // (a member given under both names was refused above)
      const synthetic = o.fieldsArray.length === 1 && o.name === '_' + o.fieldsArray[0].name;
      if (members.length > 1) this.err(node, at, `${members.map((f) => f.name).join(' and ')} are one oneof (${o.name}) of ${bare(type)}: give one`);
      if (!synthetic && !disabled && o.options && o.options['(validate.required)']) {
        this.stats.rules++;
        if (members.length === 0) {
          this.err(node, at, `${bare(type)} requires one of ${o.fieldsArray.map((f) => f.name).join(', ')} (oneof ${o.name} is (validate.required))`);
        }
      }
    }
    if (disabled) return set;
    for (const f of type.fieldsArray) {
      const rules = optionsOf(f, '(validate.rules)');
      if (!rules) continue;
      const given = set.get(f.name);
      const p = at ? `${at}.${f.name}` : f.name;
      const inOneof = f.partOf && !(f.partOf.fieldsArray.length === 1 && f.partOf.name === '_' + f.name);
      const optional = f.options && f.options.proto3_optional;
      if (!given && (inOneof || optional)) continue; // PGV checks an unset oneof member or optional field not at all
      this.rules(given ? given.node : null, f, rules, given ? given.at : p, node);
    }
    return set;
  }

  field(node, f, at) {
    if (f.map) {
      if (node.kind !== 'map') return this.err(node, at, `${f.name} is a map, not ${describe(node)}`);
      for (const e of node.entries) {
        this.mapKey(e, f.keyType, `${at}[${JSON.stringify(e.key)}]`);
        this.single(e.value, f, `${at}[${JSON.stringify(e.key)}]`);
      }
      return;
    }
    if (f.repeated) {
      // protobuf's legacy JSON syntax (Envoy's): a single value stands for a list of one, a null
      // item for a default one, and a list inside the list is flattened into it.
      if (node.kind !== 'seq') {
        this.warnings.push({ line: node.line, path: at, msg: `${f.name} is a list: Envoy takes this single value as a list of one` });
        return this.single(node, f, `${at}[0]`);
      }
      const items = flatten(node.items);
      if (node.items.some((x) => x.kind === 'seq')) this.warnings.push({ line: node.line, path: at, msg: `${f.name}: a list inside the list, which Envoy flattens` });
      items.forEach((x, i) => {
        if (x.kind === 'scalar' && x.v === null) this.warnings.push({ line: x.line, path: `${at}[${i}]`, msg: 'null in a list: Envoy adds a default item' });
        else this.single(x, f, `${at}[${i}]`);
      });
      return;
    }
    this.single(node, f, at);
  }

  mapKey(e, keyType, at) {
    if (keyType === 'string') return;
    if (keyType === 'bool') {
      if (e.key !== 'true' && e.key !== 'false') this.err(e, at, `a bool map key is "true" or "false", not ${JSON.stringify(e.key)}`);
      return;
    }
    this.scalar({ kind: 'scalar', v: e.key, line: e.line }, keyType, null, at);
  }

  single(node, f, at) {
    const t = f.resolvedType;
    if (t && t instanceof this.p.pb.Type) return this.message(node, t, at);
    if (t && t instanceof this.p.pb.Enum) return this.enumValue(node, t, at);
    return this.scalar(node, f.type, null, at);
  }

  enumValue(node, e, at) {
    if (bare(e) === 'google.protobuf.NullValue' && node.kind === 'scalar' && node.v === null) return 0;
    if (node.kind !== 'scalar' || node.v === null || typeof node.v === 'boolean') {
      this.err(node, at, `an enum (${bare(e)}: ${Object.keys(e.values).join(', ')}) is a name or a number, not ${describe(node)}`);
      return undefined;
    }
    if (typeof node.v === 'number') return node.v;
    // Envoy's loadFromJson sets case_insensitive_enum_parsing
    const name = Object.keys(e.values).find((k) => k.toLowerCase() === node.v.toLowerCase());
    if (name !== undefined) return e.values[name];
    if (/^[-+]?\d+$/.test(node.v)) return Number(node.v);
    this.err(node, at, `${JSON.stringify(node.v)} is not a value of ${bare(e)} (${Object.keys(e.values).join(', ')})`);
    return undefined;
  }

  // A JSON scalar of a proto scalar type: returns the value (BigInt for integers) or undefined.
  scalar(node, type, _unused, at) {
    const bad = (what) => { this.err(node, at, `${type} field: ${what}, not ${describe(node)}`); return undefined; };
    if (node.kind !== 'scalar' || node.v === null) return node.kind === 'scalar' ? null : bad('a scalar');
    const v = node.v;
    if (type === 'string') return typeof v === 'string' ? v : bad('a string');
    if (type === 'bool') {
      if (typeof v === 'boolean') return v;
      // legacy syntax: a string through absl::SimpleAtob
      const l = typeof v === 'string' ? v.toLowerCase() : '';
      if (['true', 't', 'yes', 'y', '1'].includes(l)) return true;
      if (['false', 'f', 'no', 'n', '0'].includes(l)) return false;
      return bad('true or false');
    }
    if (type === 'bytes') return typeof v === 'string' && /^[A-Za-z0-9+/_-]*={0,2}$/.test(v) ? v : bad('base64 text');
    if (type === 'double' || type === 'float') {
      if (typeof v === 'number') return v;
      if (typeof v === 'string' && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(v)) return Number(v);
      if (typeof v === 'string' && /^[-+]?(inf|infinity|nan)$/i.test(v)) return /nan/i.test(v) ? NaN : v[0] === '-' ? -Infinity : Infinity;
      return bad('a number');
    }
    if (INT_RANGE[type]) {
      let b;
      if (typeof v === 'number' && Number.isInteger(v)) b = BigInt(v);
      else if (typeof v === 'string' && /^[-+]?\d+$/.test(v)) b = BigInt(v.replace(/^\+/, ''));
      else return bad('an integer');
      const [lo, hi] = INT_RANGE[type];
      if (b < lo || b > hi) return bad(`an integer in [${lo}, ${hi}]`);
      return b;
    }
    return bad('a known scalar type');
  }

  durationValue(node, at) {
    if (node.kind !== 'scalar' || typeof node.v !== 'string') {
      this.err(node, at, `a Duration is a string of seconds with an "s" (1s, 0.05s), not ${describe(node)}`);
      return undefined;
    }
    const m = /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(node.v);
    if (!m) {
      this.err(node, at, `${JSON.stringify(node.v)} is not a Duration: seconds with an "s" (1s, 0.05s; protobuf's JSON has no ms or m)`);
      return undefined;
    }
    const s = BigInt(m[2]);
    if (s > 315576000000n) {
      this.err(node, at, `${node.v}: a Duration is at most 315576000000s`);
      return undefined;
    }
    const ns = s * 1000000000n + BigInt((m[3] || '').padEnd(9, '0'));
    return m[1] ? -ns : ns;
  }

  any(node, at) {
    this.stats.anys++;
    if (node.kind !== 'map') return this.err(node, at, `an Any is an object with "@type", not ${describe(node)}`);
    const te = node.entries.find((e) => e.key === '@type');
    if (!te) {
      if (node.entries.length) this.err(node, at, 'an Any without "@type"');
      return null;
    }
    if (te.value.kind !== 'scalar' || typeof te.value.v !== 'string') return this.err(te, `${at}.@type`, `@type is a string, not ${describe(te.value)}`);
    const url = te.value.v;
    const name = url.slice(url.lastIndexOf('/') + 1);
    const t = url.includes('/') ? this.p.lookup(name) : null;
    if (!t || !(t instanceof this.p.pb.Type)) return this.err(te, `${at}.@type`, `unknown @type ${url} (no such message in the protos)`);
    const rest = node.entries.filter((e) => e !== te);
    const special = ['google.protobuf.Duration', 'google.protobuf.Timestamp', 'google.protobuf.FieldMask', 'google.protobuf.Struct',
      'google.protobuf.Value', 'google.protobuf.ListValue', 'google.protobuf.Any'].concat(Object.keys(WRAPPERS));
    if (special.includes(name)) {
      const ve = rest.find((e) => e.key === 'value');
      if (!ve || rest.length !== 1) return this.err(node, at, `an Any of ${name} has "@type" and "value" only`);
      return this.message(ve.value, t, `${at}.value`);
    }
    this.noteType(t);
    const set = this.fields(node, t, at, rest);
    if (TYPED_STRUCTS.includes(name) && set) {
      const tu = set.get('type_url');
      const val = set.get('value');
      if (tu && typeof tu.node.v === 'string') {
        const inner = this.p.lookup(tu.node.v.slice(tu.node.v.lastIndexOf('/') + 1));
        if (!inner || !(inner instanceof this.p.pb.Type)) this.err(tu.node, tu.at, `unknown type_url ${tu.node.v}`);
        else this.message(val ? val.node : { kind: 'map', entries: [], line: node.line }, inner, val ? val.at : `${at}.value`);
      }
    }
    return set;
  }

  // protoc-gen-validate's rules of one field; node is null when the field is unset.
  rules(node, f, rules, at, parent) {
    const where = node || parent;
    const fail = (msg) => this.err(where, at, msg);
    const t = f.resolvedType;
    const tname = t ? bare(t) : f.type;
    for (const [kind, r] of Object.entries(rules)) {
      this.stats.rules++;
      if (kind === 'message') {
        if (r.required && !node) fail(`${f.name} is required (${tname})`);
        continue; // skip: the nested message is still read (protobuf), its rules checked by its own type
      }
      if (kind === 'repeated' || kind === 'map') {
        // a list as Envoy reads it (a single value is a list of one, inner lists flattened)
        const items = !node || kind === 'map' ? [] : node.kind === 'seq' ? flatten(node.items) : [node];
        const n = node ? (kind === 'map' ? node.entries.length : items.length) : 0;
        if (r.ignore_empty && n === 0) continue;
        const min = kind === 'map' ? r.min_pairs : r.min_items;
        const max = kind === 'map' ? r.max_pairs : r.max_items;
        if (min !== undefined && n < Number(min)) fail(`${f.name} needs at least ${min} ${kind === 'map' ? 'pairs' : 'items'}, has ${n}`);
        if (max !== undefined && n > Number(max)) fail(`${f.name} takes at most ${max} ${kind === 'map' ? 'pairs' : 'items'}, has ${n}`);
        if (kind === 'repeated' && r.unique) {
          const seen = new Set();
          for (const x of items) {
            const k = JSON.stringify(plain(x));
            if (seen.has(k)) fail(`${f.name}: items must be unique, ${k} repeats`);
            seen.add(k);
          }
        }
        if (kind === 'repeated' && r.items) {
          items.forEach((x, i) => this.rules(x, fieldView(f, { repeated: false }), r.items, `${at}[${i}]`, parent));
        }
        if (kind === 'map' && node && node.entries) {
          for (const e of node.entries) {
            if (r.keys) this.rules({ kind: 'scalar', v: e.key, line: e.line }, { name: f.name + ' key', type: f.keyType }, r.keys, `${at}[${JSON.stringify(e.key)}]`, parent);
            if (r.values) this.rules(e.value, fieldView(f, { map: false }), r.values, `${at}[${JSON.stringify(e.key)}]`, parent);
          }
        }
        for (const k of Object.keys(r)) if (!['min_items', 'max_items', 'min_pairs', 'max_pairs', 'unique', 'items', 'keys', 'values', 'ignore_empty', 'no_sparse'].includes(k)) this.skip(`${kind}.${k}`);
        continue;
      }
      if (f.repeated || f.map) {
        this.skip(`${kind} on a list`);
        continue;
      }
      if (kind === 'duration') {
        if (r.required && !node) fail(`${f.name} is required (a Duration)`);
        if (!node) continue;
        const v = this.durationQuiet(node);
        if (v === undefined) continue; // already reported as a bad Duration
        cmpRules(r, v, (x) => durationNs(x), fmtNs, fail, f.name, (k) => this.skip(`duration.${k}`), ['required']);
        continue;
      }
      if (kind === 'any') {
        if (r.required && !node) fail(`${f.name} is required (an Any)`);
        const te = node && node.kind === 'map' && node.entries.find((e) => e.key === '@type');
        const url = te && te.value.v;
        if (url && r.in && r.in.length && !r.in.includes(url)) fail(`${f.name}: @type ${url} is not one of ${r.in.join(', ')}`);
        if (url && r.not_in && r.not_in.includes(url)) fail(`${f.name}: @type ${url} is refused here`);
        continue;
      }
      if (kind === 'timestamp') {
        if (r.required && !node) fail(`${f.name} is required (a Timestamp)`);
        for (const k of Object.keys(r)) if (k !== 'required') this.skip(`timestamp.${k}`);
        continue;
      }
      // scalar rules, on the field itself or on a wrapper's value (set wrappers only)
      const wrapped = t && WRAPPERS[bare(t)];
      if (wrapped && !node) continue;
      const stype = wrapped || (t instanceof this.p.pb.Enum ? 'enum' : f.type);
      let v;
      if (stype === 'enum') v = node ? this.enumQuiet(node, t) : 0;
      else v = node ? this.scalarQuiet(node, stype) : defaultOf(stype);
      if (v === undefined || v === null) continue; // wrong type: reported by the parse
      this.scalarRules(kind, r, v, stype, t, fail, f.name);
    }
  }

  scalarRules(kind, r, v, stype, t, fail, name) {
    if (kind === 'enum') {
      if (r.defined_only && !Object.values(t.values).includes(Number(v))) fail(`${name}: ${v} is not a defined value of ${bare(t)}`);
      if (r.const !== undefined && Number(v) !== Number(r.const)) fail(`${name} must be ${r.const}`);
      if (r.in && r.in.length && !r.in.map(Number).includes(Number(v))) fail(`${name}: ${v} is not one of ${r.in.join(', ')}`);
      if (r.not_in && r.not_in.map(Number).includes(Number(v))) fail(`${name}: ${v} is refused`);
      return;
    }
    if (kind === 'bool') {
      if (r.const !== undefined && v !== r.const) fail(`${name} must be ${r.const}`);
      return;
    }
    if (kind === 'string') {
      if (r.ignore_empty && v === '') return;
      const cps = [...v].length;
      const bytes = Buffer.byteLength(v);
      if (r.min_len !== undefined && cps < Number(r.min_len)) fail(`${name} needs at least ${r.min_len} character${Number(r.min_len) === 1 ? '' : 's'}` + (v === '' ? ' (it is empty or missing)' : ''));
      if (r.max_len !== undefined && cps > Number(r.max_len)) fail(`${name} takes at most ${r.max_len} characters, has ${cps}`);
      if (r.len !== undefined && cps !== Number(r.len)) fail(`${name} must have ${r.len} characters`);
      if (r.min_bytes !== undefined && bytes < Number(r.min_bytes)) fail(`${name} needs at least ${r.min_bytes} bytes`);
      if (r.max_bytes !== undefined && bytes > Number(r.max_bytes)) fail(`${name} takes at most ${r.max_bytes} bytes, has ${bytes}`);
      if (r.prefix !== undefined && !v.startsWith(r.prefix)) fail(`${name} must start with ${JSON.stringify(r.prefix)}`);
      if (r.suffix !== undefined && !v.endsWith(r.suffix)) fail(`${name} must end with ${JSON.stringify(r.suffix)}`);
      if (r.contains !== undefined && !v.includes(r.contains)) fail(`${name} must contain ${JSON.stringify(r.contains)}`);
      if (r.not_contains !== undefined && v.includes(r.not_contains)) fail(`${name} must not contain ${JSON.stringify(r.not_contains)}`);
      if (r.const !== undefined && v !== r.const) fail(`${name} must be ${JSON.stringify(r.const)}`);
      if (r.in && r.in.length && !r.in.includes(v)) fail(`${name}: ${JSON.stringify(v)} is not one of ${r.in.join(', ')}`);
      if (r.not_in && r.not_in.includes(v)) fail(`${name}: ${JSON.stringify(v)} is refused`);
      if (r.pattern !== undefined) {
        let re = null;
        try { re = new RegExp(r.pattern, 'u'); } catch (e) { this.skip(`string.pattern ${r.pattern}`); }
        if (re && !re.test(v)) fail(`${name}: ${JSON.stringify(v)} does not match ${r.pattern}`);
      }
      if (r.well_known_regex) {
        const strict = r.strict !== false;
        let re;
        if (!strict) re = /^[^\u0000\u000A\u000D]*$/;
        else if (r.well_known_regex === 'HTTP_HEADER_NAME') re = /^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$/;
        else re = /^[^\u0000-\u0008\u000A-\u001F\u007F]*$/;
        if (!re.test(v)) fail(`${name}: ${JSON.stringify(v)} is not a valid ${r.well_known_regex}`);
      }
      for (const wk of ['ip', 'ipv4', 'ipv6', 'hostname', 'address']) {
        if (!r[wk]) continue;
        const ipv = net.isIP(v);
        const host = /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/.test(v);
        const ok = wk === 'ip' ? ipv !== 0 : wk === 'ipv4' ? ipv === 4 : wk === 'ipv6' ? ipv === 6 : wk === 'hostname' ? host : ipv !== 0 || host;
        if (!ok) fail(`${name}: ${JSON.stringify(v)} is not a valid ${wk}`);
      }
      for (const k of Object.keys(r)) {
        if (!['ignore_empty', 'min_len', 'max_len', 'len', 'min_bytes', 'max_bytes', 'prefix', 'suffix', 'contains', 'not_contains', 'const', 'in', 'not_in',
          'pattern', 'well_known_regex', 'strict', 'ip', 'ipv4', 'ipv6', 'hostname', 'address'].includes(k)) this.skip(`string.${k}`);
      }
      return;
    }
    if (kind === 'bytes') {
      const n = Buffer.from(v, 'base64').length;
      if (r.ignore_empty && n === 0) return;
      if (r.min_len !== undefined && n < Number(r.min_len)) fail(`${name} needs at least ${r.min_len} bytes, has ${n}`);
      if (r.max_len !== undefined && n > Number(r.max_len)) fail(`${name} takes at most ${r.max_len} bytes, has ${n}`);
      if (r.len !== undefined && n !== Number(r.len)) fail(`${name} must have ${r.len} bytes, has ${n}`);
      for (const k of Object.keys(r)) if (!['ignore_empty', 'min_len', 'max_len', 'len'].includes(k)) this.skip(`bytes.${k}`);
      return;
    }
    if (INT_RANGE[kind] || kind === 'double' || kind === 'float') {
      if (r.ignore_empty && Number(v) === 0) return;
      const isInt = !!INT_RANGE[kind];
      cmpRules(r, isInt ? BigInt(v) : Number(v), (x) => (isInt ? BigInt(String(x)) : Number(x)), String, fail, name, (k) => this.skip(`${kind}.${k}`), ['ignore_empty']);
      return;
    }
    this.skip(`${kind}.*`);
  }

  durationQuiet(node) {
    const n = this.errors.length;
    const v = this.durationValue(node, '');
    this.errors.length = n;
    return v;
  }
  enumQuiet(node, t) {
    const n = this.errors.length;
    const v = this.enumValue(node, t, '');
    this.errors.length = n;
    return v;
  }
  scalarQuiet(node, type) {
    const n = this.errors.length;
    const v = this.scalar(node, type, null, '');
    this.errors.length = n;
    return v;
  }
}

// A field as the rules see it (an element of a list, a value of a map).
function fieldView(f, over) {
  return Object.assign({ name: f.name, type: f.type, resolvedType: f.resolvedType, repeated: f.repeated, map: f.map, keyType: f.keyType }, over);
}

function defaultOf(t) {
  if (t === 'string' || t === 'bytes') return '';
  if (t === 'bool') return false;
  if (INT_RANGE[t]) return 0n;
  return 0;
}

// const, lt, lte, gt, gte, in, not_in (PGV: gt > lt means "outside [lt, gt]")
function cmpRules(r, v, conv, fmt, fail, name, skip, ignore) {
  const c = {};
  for (const k of ['const', 'lt', 'lte', 'gt', 'gte']) if (r[k] !== undefined) c[k] = conv(r[k]);
  if (c.const !== undefined && v !== c.const) fail(`${name} must be ${fmt(c.const)}, is ${fmt(v)}`);
  const lo = c.gt !== undefined ? { x: c.gt, ok: v > c.gt, s: '>' } : c.gte !== undefined ? { x: c.gte, ok: v >= c.gte, s: '>=' } : null;
  const hi = c.lt !== undefined ? { x: c.lt, ok: v < c.lt, s: '<' } : c.lte !== undefined ? { x: c.lte, ok: v <= c.lte, s: '<=' } : null;
  if (lo && hi && hi.x < lo.x) {
    if (!lo.ok && !hi.ok) fail(`${name} must be ${hi.s} ${fmt(hi.x)} or ${lo.s} ${fmt(lo.x)}, is ${fmt(v)}`);
  } else {
    if (lo && !lo.ok) fail(`${name} must be ${lo.s} ${fmt(lo.x)}, is ${fmt(v)}`);
    if (hi && !hi.ok) fail(`${name} must be ${hi.s} ${fmt(hi.x)}, is ${fmt(v)}`);
  }
  if (r.in && r.in.length && !r.in.map(conv).some((x) => x === v)) fail(`${name}: ${fmt(v)} is not one of ${r.in.map((x) => fmt(conv(x))).join(', ')}`);
  if (r.not_in && r.not_in.map(conv).some((x) => x === v)) fail(`${name}: ${fmt(v)} is refused`);
  for (const k of Object.keys(r)) if (!['const', 'lt', 'lte', 'gt', 'gte', 'in', 'not_in'].concat(ignore).includes(k)) skip(k);
}

function flatten(items) {
  return items.flatMap((x) => (x.kind === 'seq' ? flatten(x.items) : [x]));
}

function plain(n) {
  if (n.kind === 'map') return Object.fromEntries(n.entries.map((e) => [e.key, plain(e.value)]));
  if (n.kind === 'seq') return n.items.map(plain);
  return n.v;
}

function lev(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  }
  return d[a.length][b.length];
}

// ---- checking ------------------------------------------------------------------------------

// Check one YAML text as a message type.  Returns {errors, warnings, unenforced, stats}; each
// error is {line, path, msg}.
function checkText(ctx, text, typeName, lineBase) {
  const c = new Checker(ctx.protos);
  const y = readYaml(ctx.mods, text, lineBase || 0);
  if (y.error) {
    c.errors.push({ line: y.error.line, path: '', msg: y.error.msg });
    return c;
  }
  const t = ctx.protos.lookup(typeName);
  if (!t || !(t instanceof ctx.protos.pb.Type)) {
    c.errors.push({ line: (lineBase || 0) + 1, path: '', msg: `unknown message type ${typeName}` });
    return c;
  }
  c.warnings.push(...y.warnings);
  c.message(y.tree, t, '');
  return c;
}

function open(mods) {
  return { mods, protos: openProtos(mods) };
}

function report(item, c) {
  const lines = [];
  for (const e of c.errors) lines.push(`${item.file}:${e.line}: ${e.path ? e.path + ': ' : ''}${e.msg}`);
  return lines;
}

function checkItem(ctx, item) {
  if (item.unmarked) {
    const c = new Checker(ctx.protos);
    c.errors.push({ line: item.lineBase, path: '', msg: 'an Envoy yaml block that is not a whole bootstrap: put `<!-- envoy-schema: MESSAGE.TYPE -->` (or `<!-- envoy-schema: skip WHY -->`) on the line above its fence' });
    return c;
  }
  return checkText(ctx, item.text, item.type, item.lineBase);
}

module.exports = { open, checkText, checkItem, report, BOOTSTRAP };

if (require.main === module) {
  const [mods, ...files] = process.argv.slice(2);
  if (!mods || files.length === 0) {
    console.error('usage: node schema.js NODE_MODULES FILE[=MESSAGE_TYPE]...  (default type: ' + BOOTSTRAP + ')');
    process.exit(2);
  }
  const ctx = open(mods);
  let bad = 0;
  for (const a of files) {
    const [file, type] = a.split('=');
    const item = { file, type: type || BOOTSTRAP, text: fs.readFileSync(file, 'utf8'), lineBase: 0 };
    const c = checkItem(ctx, item);
    for (const l of report(item, c)) console.log(l);
    for (const w of c.warnings) console.log(`${file}:${w.line}: ${w.path}: warning: ${w.msg}`);
    if (c.errors.length) bad++;
    else console.log(`ok   ${file} as ${item.type}: ${c.stats.fields} fields, ${c.stats.anys} Any, ${c.stats.rules} rules`);
  }
  process.exit(bad ? 1 : 0);
}
