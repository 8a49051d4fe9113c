'use strict';
// ratelimit for Node.js: the exact core of libratelimit in-process (and the drop-ins for
// express-rate-limit, rate-limiter-flexible, express and fastify).  docs/node.md.
const core = require('./lib/limiter');

module.exports = {
  ...core,
  get DaemonStore() { return require('./lib/daemon').DaemonStore; },
  get RateLimiterRatelimit() { return require('./lib/rlf').RateLimiterRatelimit; },
  get RateLimiterRes() { return require('./lib/rlf').RateLimiterRes; },
  get RatelimitStore() { return require('./lib/erl').RatelimitStore; },
  get rateLimit() { return require('./lib/middleware').rateLimit; },
  get fastifyRateLimit() { return require('./lib/middleware').fastifyRateLimit; },
  get ipKeyGenerator() { return require('./lib/ipkey').ipKeyGenerator; },
};
