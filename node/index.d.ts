// Type declarations of the libratelimit package (docs/node.md).

export type Key = string | Uint8Array;
export type Nanoseconds = bigint | number;
export type PolicyText = string;
export type Policy = PolicyText | PolicyText[] | { windowMs?: number; limit?: number; algorithm?: string }
  | { points?: number; duration?: number; algorithm?: string };

export const HDR_RETRY_AFTER: 1;
export const HDR_IETF: 2;
export const HDR_LEGACY: 4;
export const HDR_X: 8;

export class MemoryStore {
  constructor(options?: { maxKeys?: number; maxBytes?: number; failClosed?: boolean; shards?: number; name?: string });
  stats(): { keys: number; bytes: number; evictions: number };
  nowNs(): bigint;
}

export class DaemonStore {
  constructor(options?: { host?: string; port?: number; password?: string; timeoutMs?: number });
  readonly isRemoteStore: true;
  close(): void;
}

export type Store = MemoryStore | DaemonStore;

export class Decision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly lease: bigint;
  readonly reservation: bigint;
  readonly refused: number;
  readonly policy: number;
  error: Error | null;
  /** true when an in-process fallback decided while the network store was down */
  fallback?: boolean;
  readonly retryAfterNs: bigint;
  readonly resetAfterNs: bigint;
  readonly delayNs: bigint;
  readonly retryAfterMs: number;
  readonly resetAfterMs: number;
  readonly delayMs: number;
  headers(which?: number): Record<string, string>;
}

export interface Health {
  up: boolean; mode: string; downSince?: Date | null; outages?: number; recoveries?: number;
  failedDecisions?: number; fallbackDecisions?: number;
}

export interface LimiterOptions {
  store?: Store | string;
  name?: string;
  maxKeys?: number;
  maxBytes?: number;
  failMode?: 'closed' | 'open' | 'fallback';
  failOpen?: boolean;
  fallback?: Policy;
  fallbackProbeMs?: number;
  logger?: { error(msg: string): void; warn(msg: string): void };
}

export class RateLimitExceeded extends Error {
  readonly decision: Decision;
}

export class Limiter {
  constructor(policy: Policy, options?: LimiterOptions);
  readonly policies: string[];
  readonly store: Store;
  hit(key: Key, cost?: number | bigint, nowNs?: Nanoseconds): Decision;
  hitMany(keys: Key[], cost?: number | bigint, nowNs?: Nanoseconds): Uint8Array;
  peek(key: Key, nowNs?: Nanoseconds): Decision;
  reset(key: Key): void;
  multi(checks: Array<[Key, number?] | [Limiter, Key, number?]>, nowNs?: Nanoseconds): Decision;
  acquire(key: Key, nowNs?: Nanoseconds): { decision: Decision; lease: bigint; release(nowNs?: Nanoseconds): boolean };
  release(key: Key, lease: bigint, nowNs?: Nanoseconds): boolean;
  reserve(key: Key, estimate: number | bigint, nowNs?: Nanoseconds, timeoutNs?: Nanoseconds): Decision;
  settle(key: Key, reservation: bigint, realCost: number | bigint, nowNs?: Nanoseconds): Decision;
  hitAsync(key: Key, cost?: number | bigint, nowNs?: Nanoseconds): Promise<Decision>;
  peekAsync(key: Key, nowNs?: Nanoseconds): Promise<Decision>;
  resetAsync(key: Key): Promise<void>;
  multiAsync(checks: Array<[Key, number?] | [Limiter, Key, number?]>, nowNs?: Nanoseconds): Promise<Decision>;
  releaseAsync(key: Key, lease: bigint): Promise<boolean>;
  reserveAsync(key: Key, estimate: number | bigint, nowNs?: Nanoseconds, timeoutNs?: Nanoseconds): Promise<Decision>;
  settleAsync(key: Key, reservation: bigint, realCost: number | bigint, nowNs?: Nanoseconds): Promise<Decision>;
  health(): Health;
}

export function storeFromUrl(url: string): Store;
export function policyText(policy: Policy): string | string[];
export function ipKeyGenerator(ip: string, ipv6Subnet?: number | false): string;

// rate-limiter-flexible's interface.
export class RateLimiterRes {
  constructor(remainingPoints?: number, msBeforeNext?: number, consumedPoints?: number, isFirstInDuration?: boolean);
  remainingPoints: number;
  msBeforeNext: number;
  consumedPoints: number;
  isFirstInDuration: boolean;
  toJSON(): object;
}

export class RateLimiterRatelimit {
  constructor(opts?: { points?: number; duration?: number; blockDuration?: number; keyPrefix?: string;
    policy?: PolicyText; store?: Store | string; storeClient?: Store; failMode?: 'closed' | 'open' | 'fallback';
    fallback?: Policy; logger?: LimiterOptions['logger'] });
  readonly points: number;
  readonly duration: number;
  readonly keyPrefix: string;
  blockDuration: number;
  execEvenly: boolean;
  getKey(key: string | number): string;
  consume(key: string | number, points?: number): Promise<RateLimiterRes>;
  penalty(key: string | number, points?: number): Promise<RateLimiterRes>;
  reward(key: string | number, points?: number): Promise<RateLimiterRes>;
  get(key: string | number): Promise<RateLimiterRes | null>;
  set(key: string | number, points: number, secDuration?: number): Promise<RateLimiterRes>;
  block(key: string | number, secDuration: number): Promise<RateLimiterRes>;
  delete(key: string | number): Promise<boolean>;
}

// express-rate-limit's Store.
export class RatelimitStore {
  constructor(opts?: { store?: Store | string; prefix?: string });
  prefix: string;
  localKeys: boolean;
  init(options: { windowMs?: number; skipSuccessfulRequests?: boolean; skipFailedRequests?: boolean }): void;
  get(key: string): Promise<{ totalHits: number; resetTime: Date } | undefined>;
  increment(key: string): Promise<{ totalHits: number; resetTime: Date }>;
  decrement(key: string): Promise<void>;
  resetKey(key: string): Promise<void>;
}

export interface RateLimitOptions {
  windowMs?: number;
  limit?: number;
  max?: number;
  policy?: PolicyText | PolicyText[];
  name?: string;
  store?: Store | string;
  limiter?: Limiter;
  keyGenerator?: (req: any, res: any) => string | Promise<string>;
  skip?: (req: any, res: any) => boolean | Promise<boolean>;
  handler?: (req: any, res: any, next: (err?: unknown) => void, options: object) => unknown;
  message?: unknown;
  statusCode?: number;
  standardHeaders?: boolean | 'draft-6' | 'draft-7' | 'draft-8';
  legacyHeaders?: boolean;
  ipv6Subnet?: number | false;
  passOnStoreError?: boolean;
  requestPropertyName?: string;
  failMode?: 'closed' | 'open' | 'fallback';
  fallback?: Policy;
  logger?: LimiterOptions['logger'];
}

export function rateLimit(options?: RateLimitOptions): ((req: any, res: any, next: (err?: unknown) => void) => Promise<void>) & {
  resetKey(key: Key): void; limiter: Limiter;
};
export function fastifyRateLimit(fastify: any, options: RateLimitOptions, done: (err?: Error) => void): void;
