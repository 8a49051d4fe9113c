// Compiled (not run) by tests/node/dropins.sh with tsc --strict: the declarations of
// node/index.d.ts describe the API as docs/node.md uses it.
import { Limiter, MemoryStore, DaemonStore, Decision, RateLimiterRatelimit, RatelimitStore, rateLimit } from '../../../node/index';

const lim = new Limiter('gcra:100/1m,burst=20', { store: new MemoryStore({ maxKeys: 1000 }) });
const d: Decision = lim.hit('user:42', 1, 5n);
const wait: bigint = d.retryAfterNs;
// @ts-expect-error: a key is a string or bytes, never a number
lim.hit(42);
const ms: number = d.retryAfterMs;
const h: Record<string, string> = d.headers();
const remote = new Limiter({ windowMs: 60000, limit: 100 }, { store: new DaemonStore({ port: 6380 }), failMode: 'fallback' });
const p: Promise<Decision> = remote.hitAsync('k');
const rlf = new RateLimiterRatelimit({ points: 5, duration: 1 });
rlf.consume('k', 2).then((r) => r.msBeforeNext + r.remainingPoints);
const store = new RatelimitStore();
store.init({ windowMs: 1000 });
const mw = rateLimit({ windowMs: 1000, limit: 5, standardHeaders: 'draft-8', ipv6Subnet: 56 });
mw.resetKey('k');
export { wait, ms, h, p };
