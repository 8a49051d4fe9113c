'use strict';
// express middleware and a fastify plugin with express-rate-limit's options, deciding in the
// exact core and writing the IETF RateLimit / RateLimit-Policy fields as the daemon and the
// Python middleware write them (rlt_format_headers).
const { Limiter, HDR_RETRY_AFTER, HDR_IETF, HDR_LEGACY, HDR_X } = require('./limiter');
const { ipKeyGenerator } = require('./ipkey');

const MESSAGE = 'Too many requests, please try again later.';

function fn(v, name) {
  if (v !== undefined && typeof v !== 'function') throw new TypeError(`${name}: must be a function`);
  return v;
}

// The options as express-rate-limit reads them, checked once; the limiter they make.
function configure(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('options: must be an object');
  const o = {
    windowMs: options.windowMs ?? 60000,
    limit: options.limit ?? options.max ?? 5,
    message: options.message ?? MESSAGE,
    statusCode: options.statusCode ?? 429,
    standardHeaders: options.standardHeaders ?? 'draft-8',
    legacyHeaders: options.legacyHeaders ?? false,
    ipv6Subnet: options.ipv6Subnet ?? 56,
    passOnStoreError: Boolean(options.passOnStoreError),
    requestPropertyName: options.requestPropertyName ?? 'rateLimit',
    keyGenerator: fn(options.keyGenerator, 'keyGenerator'),
    skip: fn(options.skip, 'skip'),
    handler: fn(options.handler, 'handler'),
  };
  if (!Number.isSafeInteger(o.windowMs) || o.windowMs < 1) throw new RangeError('windowMs: must be an integer >= 1');
  if (!Number.isSafeInteger(o.limit) || o.limit < 1) throw new RangeError('limit: must be an integer >= 1');
  if (!Number.isInteger(o.statusCode) || o.statusCode < 100 || o.statusCode > 599) throw new RangeError('statusCode: must be an HTTP status');
  if (o.standardHeaders === true) o.standardHeaders = 'draft-8';
  if (![false, 'draft-6', 'draft-7', 'draft-8'].includes(o.standardHeaders)) {
    throw new RangeError("standardHeaders: must be false, true, 'draft-6', 'draft-7' or 'draft-8'");
  }
  if (o.ipv6Subnet !== false && (!Number.isInteger(o.ipv6Subnet) || o.ipv6Subnet < 1 || o.ipv6Subnet > 128)) {
    throw new RangeError('ipv6Subnet: must be false or an integer in 1..128');
  }
  o.limiter = options.limiter instanceof Limiter ? options.limiter
    : new Limiter(options.policy ?? `fixed_window:${o.limit}/${o.windowMs}ms`,
      { store: options.store, name: options.name, failMode: options.failMode,
        fallback: options.fallback, logger: options.logger });
  // The header families: ours for draft-8, the legacy trio for draft-6, X-RateLimit-* for
  // legacyHeaders; draft-7's combined field is written here (the C library does not).
  o.which = HDR_RETRY_AFTER | (o.standardHeaders === 'draft-8' ? HDR_IETF : 0) |
    (o.standardHeaders === 'draft-6' ? HDR_LEGACY : 0) | (o.legacyHeaders ? HDR_X : 0);
  return o;
}

function draft7(d) {
  return {
    'RateLimit-Policy': `${d.limit};w=${Math.ceil(Number(d.resetAfterNs) / 1e9) || 1}`,
    RateLimit: `limit=${d.limit}, remaining=${Math.max(0, d.remaining)}, reset=${Math.ceil(Number(d.resetAfterNs) / 1e9)}`,
  };
}

// One request: the key, the decision, the headers; null when skipped.  Throws what the
// store or the key generator throws.
async function check(o, req, res, ip) {
  if (o.skip && await o.skip(req, res)) return null;
  const key = o.keyGenerator ? await o.keyGenerator(req, res) : ipKeyGenerator(ip || '', o.ipv6Subnet);
  const k = typeof key === 'string' || key instanceof Uint8Array ? key : String(key);
  const d = o.limiter._health ? await o.limiter.hitAsync(k) : o.limiter.hit(k);
  // The store could not answer: passOnStoreError lets the request through; otherwise the
  // limiter's failMode has decided (denied: 503, nobody is over a limit).
  if (d.error && o.passOnStoreError) return null;
  let headers = d.headers(o.which);
  if (o.standardHeaders === 'draft-7') headers = { ...headers, ...draft7(d) };
  const info = { limit: d.limit, used: d.limit - d.remaining, remaining: Math.max(0, d.remaining),
    resetTime: new Date(Date.now() + d.resetAfterMs), key, decision: d };
  if (d.error && !d.fallback && !d.allowed) headers = { 'Retry-After': headers['Retry-After'] ?? '1' };
  return { d, headers, info };
}

// rateLimit(options): express middleware (req, res, next).
function rateLimit(options) {
  const o = configure(options);
  const middleware = async (req, res, next) => {
    let r;
    try {
      r = await check(o, req, res, req.ip);
    } catch (e) {
      if (o.passOnStoreError && !(e instanceof TypeError || e instanceof RangeError)) return next();
      return next(e);
    }
    if (!r) return next();
    req[o.requestPropertyName] = r.info;
    if (!res.headersSent) for (const [k, v] of Object.entries(r.headers)) res.setHeader(k, v);
    if (r.d.allowed) return next();
    if (r.d.error && !r.d.fallback) return res.status(503).send('Service Unavailable: the rate limit store cannot answer');
    if (o.handler) return o.handler(req, res, next, o);
    res.status(o.statusCode);
    const msg = typeof o.message === 'function' ? await o.message(req, res) : o.message;
    if (!res.writableEnded) res.send(msg);
  };
  middleware.resetKey = (key) => o.limiter.reset(key);
  middleware.limiter = o.limiter;
  return middleware;
}

// fastify.register(fastifyRateLimit, options): an onRequest hook on every route (the plugin
// is not encapsulated, as fastify-plugin would mark it).
function fastifyRateLimit(fastify, options, done) {
  let o;
  try { o = configure(options); } catch (e) { return done(e); }
  fastify.decorateRequest(o.requestPropertyName, null);
  fastify.addHook('onRequest', async (req, reply) => {
    let r;
    try {
      r = await check(o, req, reply, req.ip);
    } catch (e) {
      if (o.passOnStoreError && !(e instanceof TypeError || e instanceof RangeError)) return;
      throw e;
    }
    if (!r) return;
    req[o.requestPropertyName] = r.info;
    reply.headers(r.headers);
    if (r.d.allowed) return;
    if (r.d.error && !r.d.fallback) return reply.code(503).send('Service Unavailable: the rate limit store cannot answer');
    if (o.handler) return o.handler(req, reply, () => {}, o);
    const msg = typeof o.message === 'function' ? await o.message(req, reply) : o.message;
    reply.code(o.statusCode).send(msg);
    return reply;
  });
  done();
}
fastifyRateLimit[Symbol.for('skip-override')] = true;
fastifyRateLimit[Symbol.for('fastify.display-name')] = 'libratelimit';

module.exports = { rateLimit, fastifyRateLimit, ipKeyGenerator, configure };
