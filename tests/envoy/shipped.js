// What we ship that is Envoy's: the Envoy bootstraps among examples/**/*.yaml and the Envoy
// yaml blocks of README.md and docs/**/*.md, each with the message type it is checked as.
'use strict';
const fs = require('fs');
const path = require('path');
const { readYaml } = require('./envoy_yaml.js');

const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';

// The Envoy YAML of a tree: examples/**/*.y*ml whose top level has static_resources or
// dynamic_resources (a Bootstrap), and the fenced yaml blocks of README.md and docs/**/*.md
// that are Envoy's: one with static_resources is a Bootstrap; any other is checked as the
// message a `<!-- envoy-schema: TYPE -->` line just above its fence names (or skipped with
// `<!-- envoy-schema: skip REASON -->`); a block that looks like Envoy's (an @type of
// type.googleapis.com/envoy., an envoy.filters. or envoy.extensions. name) with neither is an
// error.  Returns [{file, type, text, lineBase}] and notes (what was left aside, and why).
function shipped(mods, src) {
  const items = [];
  const notes = [];
  const walk = (dir, pred, out) => {
    if (!fs.existsSync(dir)) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p, pred, out);
      else if (pred(e.name)) out.push(p);
    }
  };
  const yamls = [];
  walk(path.join(src, 'examples'), (n) => /\.ya?ml$/.test(n), yamls);
  for (const f of yamls) {
    const rel = path.relative(src, f);
    const text = fs.readFileSync(f, 'utf8');
    const y = readYaml(mods, text, 0);
    const top = y.tree && y.tree.kind === 'map' ? y.tree.entries.map((e) => e.key) : [];
    if (y.error || top.includes('static_resources') || top.includes('dynamic_resources') || /type\.googleapis\.com\/envoy\./.test(text)) {
      items.push({ file: rel, type: BOOTSTRAP, text, lineBase: 0 });
    } else {
      notes.push(`${rel}: not Envoy's (top level: ${top.join(', ')})`);
    }
  }
  const mds = [];
  if (fs.existsSync(path.join(src, 'README.md'))) mds.push(path.join(src, 'README.md'));
  walk(path.join(src, 'docs'), (n) => n.endsWith('.md'), mds);
  for (const f of mds) {
    const r = docSnippets(path.relative(src, f), fs.readFileSync(f, 'utf8'));
    items.push(...r.items);
    notes.push(...r.notes);
  }
  return { items, notes };
}

function docSnippets(rel, md) {
  const items = [];
  const notes = [];
  const lines = md.split('\n');
  let yamlBlocks = 0;
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(```+|~~~+)\s*([A-Za-z0-9_-]*)/.exec(lines[i]);
    if (!open) continue;
    const fence = open[2];
    let j = i + 1;
    while (j < lines.length && !lines[j].trimStart().startsWith(fence)) j++;
    const lang = open[3].toLowerCase();
    const body = lines.slice(i + 1, j).map((l) => (l.startsWith(open[1]) ? l.slice(open[1].length) : l)).join('\n');
    const start = i;
    i = j;
    if (lang !== 'yaml' && lang !== 'yml') continue;
    yamlBlocks++;
    let k = start - 1;
    while (k >= 0 && lines[k].trim() === '') k--;
    const mark = k >= 0 ? /^\s*<!--\s*envoy-schema:\s*(.*?)\s*-->\s*$/.exec(lines[k]) : null;
    const at = `${rel}:${start + 1}`;
    if (mark && /^skip\b/.test(mark[1])) {
      notes.push(`${at}: an Envoy snippet left unchecked: ${mark[1].replace(/^skip\s*/, '')}`);
    } else if (mark) {
      items.push({ file: rel, type: mark[1], text: body, lineBase: start + 1 });
    } else if (/^static_resources\s*:/m.test(body)) {
      items.push({ file: rel, type: BOOTSTRAP, text: body, lineBase: start + 1 });
    } else if (/type\.googleapis\.com\/envoy\.|\benvoy\.(filters|extensions)\./.test(body)) {
      items.push({ file: rel, type: null, text: body, lineBase: start + 1, unmarked: true });
    }
  }
  if (yamlBlocks) notes.push(`${rel}: ${yamlBlocks} yaml block(s), ${items.length} of them Envoy's`);
  return { items, notes };
}

module.exports = { shipped, docSnippets };
