'use strict';
// Client keys from addresses: IPv4 as it is, IPv6 masked to a subnet (express-rate-limit's
// ipv6Subnet, /56 by default since its 8.0: one customer's allocation is one client), written
// as express-rate-limit writes it ("2001:db8:1234:5600::/56").  An IPv4-mapped IPv6 address
// is its IPv4 address.
const net = require('node:net');

function parse6(ip) {
  let tail = [];
  const v4 = ip.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (v4) {
    const b = v4[1].split('.').map(Number);
    tail = [(b[0] << 8) | b[1], (b[2] << 8) | b[3]];
    ip = ip.slice(0, -v4[1].length) + (ip.endsWith('::' + v4[1]) ? '' : '0');
    if (ip.endsWith(':0') && !v4.input.endsWith('::' + v4[1])) ip = ip.slice(0, -2);
  }
  const [head, rest] = ip.includes('::') ? ip.split('::') : [ip, null];
  const h = head ? head.split(':').filter((x) => x !== '').map((x) => parseInt(x, 16)) : [];
  let r = rest ? rest.split(':').filter((x) => x !== '').map((x) => parseInt(x, 16)) : [];
  r = r.concat(tail);
  const fill = rest === null ? [] : new Array(8 - h.length - r.length).fill(0);
  const all = rest === null ? h.concat(tail) : h.concat(fill, r);
  return all.length === 8 ? all : null;
}

function format6(w) {
  let best = -1, bestLen = 1;
  for (let i = 0; i < 8;) {
    if (w[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) { best = i; bestLen = j - i; }
    i = j;
  }
  const hex = w.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return hex.slice(0, best).join(':') + '::' + hex.slice(best + bestLen).join(':');
}

// ipKeyGenerator(ip, ipv6Subnet = 56): the key of a client address; ipv6Subnet false keeps
// the whole IPv6 address.
function ipKeyGenerator(ip, ipv6Subnet = 56) {
  if (typeof ip !== 'string') throw new TypeError('ip: must be a string');
  if (ipv6Subnet !== false && (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128)) {
    throw new RangeError('ipv6Subnet: must be false or an integer in 1..128');
  }
  if (!net.isIPv6(ip)) return ip;
  const m = ip.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i);
  if (m) return m[1];
  if (ipv6Subnet === false) return ip;
  const w = parse6(ip.replace(/%.*$/, ''));
  if (!w) return ip;
  for (let i = 0; i < 8; i++) {
    const bits = Math.max(0, Math.min(16, ipv6Subnet - i * 16));
    w[i] &= bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
  }
  return `${format6(w)}/${ipv6Subnet}`;
}

module.exports = { ipKeyGenerator };
