'use strict';
// A minimal RESP2 client on one non-blocking socket driven by the event loop: commands are
// pipelined, replies matched in order, each call bounded by a timeout (a late reply puts the
// stream out of step, so the connection is dropped and the next call opens another).
const net = require('node:net');

class RespError extends Error {
  constructor(message) { super(message); this.name = 'RespError'; }
}

// Parses one reply at buf[pos]: [value, next position], or null when incomplete.
function parse(buf, pos) {
  if (pos >= buf.length) return null;
  const eol = buf.indexOf('\r\n', pos);
  if (eol < 0) return null;
  const type = buf[pos], line = buf.toString('latin1', pos + 1, eol);
  const next = eol + 2;
  switch (type) {
    case 0x2b: return [line, next]; // +
    case 0x2d: return [new RespError(line), next]; // -
    case 0x3a: return [BigInt(line), next]; // :
    case 0x24: { // $
      const n = Number(line);
      if (n < 0) return [null, next];
      if (buf.length < next + n + 2) return null;
      return [buf.toString('utf8', next, next + n), next + n + 2];
    }
    case 0x2a: { // *
      const n = Number(line);
      if (n < 0) return [null, next];
      const out = [];
      let p = next;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, p);
        if (!r) return null;
        out.push(r[0]);
        p = r[1];
      }
      return [out, p];
    }
    default: throw new RespError(`protocol: unexpected reply type ${String.fromCharCode(type)}`);
  }
}

function encode(args) {
  const parts = [`*${args.length}\r\n`];
  for (const a of args) {
    const b = typeof a === 'string' ? Buffer.from(a) : Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    parts.push(`$${b.length}\r\n`, b, '\r\n');
  }
  return Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
}

class RespClient {
  constructor({ host = '127.0.0.1', port = 6379, password, timeoutMs = 50 } = {}) {
    this.host = host; this.port = port; this.password = password; this.timeoutMs = timeoutMs;
    this.sock = null; this.pending = []; this.buf = Buffer.alloc(0);
  }
  _open() {
    const sock = net.createConnection({ host: this.host, port: this.port });
    sock.setNoDelay(true);
    sock.unref(); // an idle connection never keeps the process alive
    sock.on('data', (d) => this._data(sock, d));
    const fail = (e) => this._fail(sock, e || new RespError('connection closed'));
    sock.on('error', fail);
    sock.on('close', () => fail());
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    if (this.password) this._send(['AUTH', this.password]).catch(() => {});
  }
  _data(sock, d) {
    if (sock !== this.sock) return;
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    let pos = 0;
    try {
      for (;;) {
        const r = parse(this.buf, pos);
        if (!r) break;
        pos = r[1];
        const p = this.pending.shift();
        if (p) { clearTimeout(p.timer); p.resolve(r[0]); }
      }
    } catch (e) {
      return this._fail(sock, e);
    }
    this.buf = this.buf.subarray(pos);
  }
  _fail(sock, err) {
    if (sock !== this.sock) return;
    this.sock = null;
    sock.destroy();
    const pending = this.pending;
    this.pending = [];
    for (const p of pending) { clearTimeout(p.timer); p.reject(err); }
  }
  _send(args) {
    if (!this.sock) this._open();
    const sock = this.sock;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const e = new RespError(`timed out after ${this.timeoutMs} ms`);
        e.code = 'ETIMEDOUT';
        this._fail(sock, e);
      }, this.timeoutMs);
      this.pending.push({ resolve, reject, timer });
      sock.write(encode(args));
    });
  }
  // call(args) -> the reply (a RespError reply resolves as a value: the caller decides).
  call(args) { return this._send(args); }
  close() { if (this.sock) this._fail(this.sock, new RespError('closed')); }
}

module.exports = { RespClient, RespError, parse, encode };
