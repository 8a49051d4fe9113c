// YAML as Envoy reads it: npm yaml for the syntax only (positions, anchors), every scalar
// typed as Envoy's parseYamlNode types it (source/common/protobuf/yaml_utility.cc: yaml-cpp's
// conversions, then a JSON value).  The tree keeps each node's line for the messages.
'use strict';
const path = require('path');

// yaml-cpp's YAML::convert<bool>: y/yes/true/on and n/no/false/off in lower case, UPPER case
// or Capitalised (YAML 1.1's booleans): `OFF` unquoted is the boolean false.
function yamlCppBool(s) {
  const flexible = s === s.toLowerCase() || s === s.toUpperCase() ||
    (s[0] === s[0].toUpperCase() && s.slice(1) === s.slice(1).toLowerCase());
  if (!flexible) return undefined;
  const l = s.toLowerCase();
  if (['y', 'yes', 'true', 'on'].includes(l)) return true;
  if (['n', 'no', 'false', 'off'].includes(l)) return false;
  return undefined;
}

// yaml-cpp's YAML::convert<int64_t> (a stream without std::dec: 0x hex, a leading 0 octal).
function yamlCppInt(s) {
  const m = /^([-+]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)$/.exec(s);
  if (!m) return undefined;
  let v;
  if (/^0[xX]/.test(m[2])) v = BigInt(m[2]);
  else if (m[2].length > 1 && m[2][0] === '0') v = BigInt('0o' + m[2].slice(1));
  else v = BigInt(m[2]);
  if (m[1] === '-') v = -v;
  if (v < -(2n ** 63n) || v >= 2n ** 63n) return undefined;
  return v;
}

// Envoy's parseYamlNode (source/common/protobuf/yaml_utility.cc): a quoted or block scalar is
// a string; a plain one is null (~, null, empty), a boolean (above), an integer (a JSON number
// within int32, else its decimal string: proto3 JSON takes both), or else a string (floats
// too: protobuf's JSON parser reads them by the field's type).
function envoyScalar(node) {
  const s = String(node.value);
  if (node.type && node.type !== 'PLAIN') return { v: s, quoted: true };
  if (s === '' || s === '~' || s === 'null' || s === 'Null' || s === 'NULL') return { v: null };
  const b = yamlCppBool(s);
  if (b !== undefined) return { v: b, text: s };
  const i = yamlCppInt(s);
  if (i !== undefined) {
    if (i >= -(2n ** 31n) && i < 2n ** 31n) return { v: Number(i), text: s };
    return { v: i.toString(), text: s };
  }
  return { v: s, text: s };
}

// The YAML text as a tree of {kind: map|seq|scalar, line, ...} with Envoy's scalar types.
// Returns {tree} or {error}.  lineBase shifts the line numbers (a snippet inside a document).
function readYaml(mods, text, lineBase) {
  const YAML = require(path.join(mods, 'yaml'));
  const lc = new YAML.LineCounter();
  const docs = YAML.parseAllDocuments(text, { lineCounter: lc, schema: 'failsafe', merge: false, uniqueKeys: false });
  const warnings = [];
  const lineOf = (n) => (n && n.range ? lc.linePos(n.range[0]).line + lineBase : lineBase + 1);
  if (!Array.isArray(docs)) return { error: { line: lineBase + 1, msg: 'not YAML' } };
  if (docs.length !== 1) return { error: { line: lineBase + 1, msg: `${docs.length} YAML documents, Envoy reads one` } };
  const doc = docs[0];
  // the yaml package's warnings (an unresolved tag such as Envoy's !ignore) are not faults
  const errs = doc.errors;
  if (errs.length) {
    const e = errs[0];
    return { error: { line: e.linePos ? e.linePos[0].line + lineBase : lineBase + 1, msg: 'YAML: ' + e.message.split('\n')[0] } };
  }
  function conv(n, depth) {
    if (depth > 200) throw new Error('YAML nested too deep');
    if (YAML.isAlias(n)) return conv(n.resolve(doc), depth + 1);
    if (YAML.isMap(n)) {
      // Envoy's parseYamlNode: a key tagged !ignore is dropped; a key given twice ends in its
      // Struct once, with the last value.
      const byKey = new Map();
      for (const p of n.items) {
        if (p.key && p.key.tag === '!ignore') continue;
        const k = YAML.isScalar(p.key) ? String(p.key.value) : JSON.stringify(p.key && p.key.toJSON ? p.key.toJSON() : p.key);
        const e = { key: k, line: lineOf(p.key), value: p.value == null ? { kind: 'scalar', v: null, line: lineOf(p.key) } : conv(p.value, depth + 1) };
        if (byKey.has(k)) warnings.push({ line: e.line, path: '', msg: `key "${k}" given twice in one map (also line ${byKey.get(k).line}): Envoy takes the last` });
        byKey.set(k, e);
      }
      return { kind: 'map', entries: [...byKey.values()], line: lineOf(n) };
    }
    if (YAML.isSeq(n)) return { kind: 'seq', items: n.items.map((x) => conv(x, depth + 1)), line: lineOf(n) };
    if (YAML.isScalar(n)) return Object.assign({ kind: 'scalar', line: lineOf(n) }, envoyScalar(n));
    return { kind: 'scalar', v: null, line: lineOf(n) };
  }
  const tree = doc.contents == null ? { kind: 'map', entries: [], line: lineBase + 1 } : conv(doc.contents, 0);
  return { tree, warnings };
}

module.exports = { readYaml };
