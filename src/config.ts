import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_EMBEDDER, loadEmbedderSpec, type EmbedderSpec } from './vision/embedder.ts';
import { findFfmpeg } from './vision/video.ts';
import { isIpOrCidr } from './net/ip-ranges.ts';

/** Thrown when the environment holds a value the service cannot start with. */
export class ConfigError extends Error {}

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const commaList = z
  .string()
  .transform((value) => value.split(',').map((item) => item.trim()).filter(Boolean));

/**
 * Every setting the service reads from the environment, with its default. The variable name is
 * the key, so a validation error names the variable to fix.
 */
const environmentSchema = z.object({
  PORT: port.default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  WARDEN_DATA_DIR: z.string().min(1).default('data'),
  WARDEN_EMBEDDED_PG_PORT: port.default(54329),
  WARDEN_TOKEN_TTL_SECONDS: positiveInt.max(7 * 24 * 3600).default(3600),
  WARDEN_JWT_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  WARDEN_TRUSTED_PROXIES: commaList.default([]),
  // Addresses and ranges outgoing staff-set URLs (notify_url, decision webhooks) may reach despite src/net/outbound.ts.
  WARDEN_OUTBOUND_ALLOW: commaList.default([]),
  WARDEN_BODY_LIMIT_BYTES: positiveInt.default(16 * 1024 * 1024),
  // At least 2: start-up holds one connection for a lock while another creates the job queues.
  WARDEN_DB_POOL_MAX: positiveInt.min(2).max(200).default(10),
  WARDEN_LIGHT_WORKERS: positiveInt.max(64).default(Math.max(1, Math.min(os.availableParallelism(), 4))),
  WARDEN_VISION_WORKERS: positiveInt.max(16).default(1),
  WARDEN_ONNX_THREADS: positiveInt.max(64).optional(),
  WARDEN_FACE_MODEL: z.string().min(1).default(DEFAULT_EMBEDDER),
  WARDEN_FACE_THRESHOLD: z.string().trim().min(1, 'must be a number').pipe(z.coerce.number<string>().min(-1).max(1)).optional(),
  WARDEN_LIVENESS: z.enum(['on', 'off']).default('off'),
  WARDEN_FFMPEG: z.string().min(1).optional(),
  WARDEN_JOB_TIMEOUT_SECONDS: positiveInt.max(3600).default(120),
  WARDEN_REPLAY_DAYS: positiveInt.max(366).default(30),
  WARDEN_JOB_MAINTENANCE_SECONDS: positiveInt.max(3600).default(30),
  WARDEN_ADMIN_SESSION_IDLE_SECONDS: positiveInt.max(30 * 24 * 3600).default(2 * 3600),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
  WARDEN_REVIEW_THRESHOLD: z.coerce.number().min(0).max(100).default(50),
  WARDEN_REJECT_THRESHOLD: z.coerce.number().min(0).max(100).default(80),
  GEOIP_DB: z.string().min(1).optional(),
  WARDEN_IP_DATACENTER_LIST: z.string().min(1).optional(),
  WARDEN_IP_TOR_LIST: z.string().min(1).optional(),
  WARDEN_PUBLIC_URL: z
    .string()
    .regex(/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/, 'must be the http:// or https:// address of the service')
    .optional(),
  WARDEN_FCM_SERVICE_ACCOUNT: z.string().min(1).optional(),
  WARDEN_FCM_URL: z.string().regex(/^https?:\/\/[^/?#\s]+$/, 'must be an http(s):// origin without a path').default('https://fcm.googleapis.com'),
  WARDEN_APNS_URL: z.string().regex(/^https:\/\/[^/?#\s]+$/, 'must be an https:// origin without a path').default('https://api.push.apple.com'),
  WARDEN_APNS_KEY_FILE: z.string().min(1).optional(),
  WARDEN_APNS_KEY_ID: z.string().min(1).optional(),
  WARDEN_APNS_TEAM_ID: z.string().min(1).optional(),
  WARDEN_APNS_TOPIC: z.string().min(1).optional(),
  WARDEN_GATEWAY_URL: z.string().regex(/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/, 'must be the http(s):// address of the AI gateway').optional(),
  WARDEN_GATEWAY_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  WARDEN_GATEWAY_TIMEOUT_SECONDS: positiveInt.max(3600).default(120),
  WARDEN_MCP_URL: z.string().regex(/^https?:\/\/[^?#\s]+$/, 'must be the http(s):// address the gateway reaches the MCP server at').optional(),
  WARDEN_AI_DELEGATION_SECONDS: positiveInt.max(24 * 3600).default(900),
  WARDEN_ASSISTANT_RETENTION_DAYS: positiveInt.max(3650).default(30),
  // The video call's ICE servers (issue 38): a JSON array as RTCPeerConnection takes it, and/or
  // coturn's TURN addresses with its use-auth-secret secret (time-limited credentials per call).
  WARDEN_ICE_SERVERS: z.string().min(1).optional(),
  WARDEN_TURN_URLS: commaList.optional(),
  WARDEN_TURN_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  WARDEN_CALL_OFFER_SECONDS: positiveInt.max(3600).default(30),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = Readonly<{
  port: number;
  host: string;
  databaseUrl: string | undefined;
  dataDir: string;
  embeddedPgPort: number;
  tokenTtlSeconds: number;
  jwtSecret: string | undefined;
  trustedProxies: readonly string[];
  /** IPs and CIDR ranges that flow notifications and decision webhooks may reach although they are not public (src/net/outbound.ts). */
  outboundAllow: readonly string[];
  bodyLimitBytes: number;
  dbPoolMax: number;
  lightWorkers: number;
  visionWorkers: number;
  /** ONNX intra-op threads per vision worker; workers x threads never exceeds the cores. */
  onnxThreads: number;
  /** The face embedding model (its description file) and the similarity threshold in force. */
  face: Readonly<{ model: EmbedderSpec; threshold: number }>;
  /** Passive liveness on liveness videos (WARDEN_LIVENESS=on; off by default) and the ffmpeg that decodes them. */
  liveness: Readonly<{ enabled: boolean; ffmpeg: string | null }>;
  jobTimeoutSeconds: number;
  /** How many days of stored financial events a rule change under approval is replayed over. */
  replayDays: number;
  jobMaintenanceSeconds: number;
  /** A web admin session unused for this long is ended. */
  adminSessionIdleSeconds: number;
  redisUrl: string | undefined;
  thresholds: Readonly<{ review: number; reject: number }>;
  geoipDb: string | undefined;
  ipDatacenterList: string | undefined;
  ipTorList: string | undefined;
  logLevel: string;
  /** The address staff devices reach the service at (no trailing slash); unset: no live socket address is given out. */
  publicUrl: string | undefined;
  /** Push providers; each is null when not configured (then devices registered with it get no push). */
  push: Readonly<{ fcm: FcmSettings | null; apns: ApnsSettings | null }>;
  /**
   * The AI gateway (issue 14); url null: AI review and the assistant answer 503. mcpUrl is where the
   * gateway reaches this service's MCP server (null: WARDEN_PUBLIC_URL + /api/mcp/, else the address the service listens on; never a request's Host).
   */
  ai: Readonly<{ gatewayUrl: string | null; gatewayToken: string; timeoutMs: number; mcpUrl: string | null; delegationSeconds: number; retentionDays: number }>;
  /** The video call: fixed ICE servers, TURN with coturn's shared secret (null: none), how long an offer waits for its agent. */
  videoCall: Readonly<{ iceServers: readonly IceServer[]; turn: Readonly<{ urls: readonly string[]; secret: string }> | null; offerSeconds: number }>;
}>;

/** One entry of RTCPeerConnection's iceServers. */
export interface IceServer {
  urls: string | string[];
  username?: string;
  credential?: string;
}

const iceServerSchema = z.array(
  z.object({
    urls: z.union([z.string().regex(/^(stuns?|turns?):/, 'must be a stun:, stuns:, turn: or turns: URL'), z.array(z.string().regex(/^(stuns?|turns?):/, 'must be a stun:, stuns:, turn: or turns: URL')).min(1)]),
    username: z.string().optional(),
    credential: z.string().optional(),
  }),
);

function videoCallSettings(values: { WARDEN_ICE_SERVERS?: string; WARDEN_TURN_URLS?: string[]; WARDEN_TURN_SECRET?: string; WARDEN_CALL_OFFER_SECONDS: number }) {
  let iceServers: IceServer[] = [];
  if (values.WARDEN_ICE_SERVERS) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(values.WARDEN_ICE_SERVERS);
    } catch {
      throw new ConfigError('Invalid configuration:\n  WARDEN_ICE_SERVERS: must be a JSON array of {urls, username?, credential?}');
    }
    const checked = iceServerSchema.safeParse(parsed);
    if (!checked.success) throw new ConfigError(`Invalid configuration:\n  WARDEN_ICE_SERVERS: ${checked.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
    iceServers = checked.data;
  }
  const urls = values.WARDEN_TURN_URLS ?? [];
  if (urls.length > 0 !== Boolean(values.WARDEN_TURN_SECRET)) {
    throw new ConfigError('Invalid configuration:\n  WARDEN_TURN_URLS and WARDEN_TURN_SECRET go together (coturn use-auth-secret)');
  }
  for (const url of urls) if (!/^turns?:/.test(url)) throw new ConfigError(`Invalid configuration:\n  WARDEN_TURN_URLS: ${url} is not a turn: or turns: URL`);
  return Object.freeze({
    iceServers: Object.freeze(iceServers),
    turn: urls.length && values.WARDEN_TURN_SECRET ? Object.freeze({ urls: Object.freeze(urls), secret: values.WARDEN_TURN_SECRET }) : null,
    offerSeconds: values.WARDEN_CALL_OFFER_SECONDS,
  });
}

/** Firebase Cloud Messaging (HTTP v1): the service account's own fields and the API origin. */
export interface FcmSettings {
  url: string;
  projectId: string;
  clientEmail: string;
  privateKey: string;
  privateKeyId: string | undefined;
  tokenUri: string;
}

/** Apple Push Notification service: token-based (a .p8 signing key), HTTP/2. */
export interface ApnsSettings {
  url: string;
  keyPem: string;
  keyId: string;
  teamId: string;
  topic: string;
}

function fcmSettings(file: string | undefined, url: string): FcmSettings | null {
  if (!file) return null;
  let account: Record<string, unknown>;
  try {
    account = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new ConfigError(`Invalid configuration:\n  WARDEN_FCM_SERVICE_ACCOUNT: ${(error as Error).message}`);
  }
  for (const field of ['project_id', 'client_email', 'private_key', 'token_uri']) {
    if (typeof account[field] !== 'string' || !account[field]) {
      throw new ConfigError(`Invalid configuration:\n  WARDEN_FCM_SERVICE_ACCOUNT: the service account file has no ${field}`);
    }
  }
  return {
    url,
    projectId: account.project_id as string,
    clientEmail: account.client_email as string,
    privateKey: account.private_key as string,
    privateKeyId: typeof account.private_key_id === 'string' ? account.private_key_id : undefined,
    tokenUri: account.token_uri as string,
  };
}

function apnsSettings(values: { WARDEN_APNS_URL: string; WARDEN_APNS_KEY_FILE?: string; WARDEN_APNS_KEY_ID?: string; WARDEN_APNS_TEAM_ID?: string; WARDEN_APNS_TOPIC?: string }): ApnsSettings | null {
  const names = ['WARDEN_APNS_KEY_FILE', 'WARDEN_APNS_KEY_ID', 'WARDEN_APNS_TEAM_ID', 'WARDEN_APNS_TOPIC'] as const;
  const missing = names.filter((name) => !values[name]);
  if (missing.length === names.length) return null;
  if (missing.length) throw new ConfigError(`Invalid configuration:\n  ${missing[0]}: required when any WARDEN_APNS_ setting is given`);
  let keyPem: string;
  try {
    keyPem = fs.readFileSync(values.WARDEN_APNS_KEY_FILE!, 'utf8');
  } catch (error) {
    throw new ConfigError(`Invalid configuration:\n  WARDEN_APNS_KEY_FILE: ${(error as Error).message}`);
  }
  return { url: values.WARDEN_APNS_URL, keyPem, keyId: values.WARDEN_APNS_KEY_ID!, teamId: values.WARDEN_APNS_TEAM_ID!, topic: values.WARDEN_APNS_TOPIC! };
}

/** Builds the one frozen config object; throws ConfigError naming each bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const relevant = Object.fromEntries(
    Object.keys(environmentSchema.shape).map((key) => [key, env[key] === '' ? undefined : env[key]]),
  );
  const parsed = environmentSchema.safeParse(relevant);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
  const values = parsed.data;
  if (values.WARDEN_REVIEW_THRESHOLD > values.WARDEN_REJECT_THRESHOLD) {
    throw new ConfigError('Invalid configuration:\n  WARDEN_REVIEW_THRESHOLD: must not be above WARDEN_REJECT_THRESHOLD');
  }
  for (const proxy of values.WARDEN_TRUSTED_PROXIES) {
    if (!isIpOrCidr(proxy)) {
      throw new ConfigError(`Invalid configuration:\n  WARDEN_TRUSTED_PROXIES: "${proxy}" is not an IP address or CIDR range`);
    }
  }
  for (const entry of values.WARDEN_OUTBOUND_ALLOW) {
    if (!isIpOrCidr(entry)) {
      throw new ConfigError(`Invalid configuration:\n  WARDEN_OUTBOUND_ALLOW: "${entry}" is not an IP address or CIDR range`);
    }
  }
  const cores = os.availableParallelism();
  const onnxThreads = values.WARDEN_ONNX_THREADS ?? Math.max(1, Math.floor(cores / values.WARDEN_VISION_WORKERS));
  if (values.WARDEN_VISION_WORKERS * onnxThreads > Math.max(cores, values.WARDEN_VISION_WORKERS)) {
    throw new ConfigError(
      `Invalid configuration:\n  WARDEN_ONNX_THREADS: ${values.WARDEN_VISION_WORKERS} vision workers x ${onnxThreads} threads exceeds the ${cores} cores`,
    );
  }
  let faceModel: EmbedderSpec;
  try {
    faceModel = loadEmbedderSpec(path.resolve(values.WARDEN_FACE_MODEL));
  } catch (error) {
    throw new ConfigError(`Invalid configuration:\n  WARDEN_FACE_MODEL: ${(error as Error).message}`);
  }
  let ffmpeg: string | null = null;
  if (values.WARDEN_LIVENESS === 'on') {
    ffmpeg = findFfmpeg(values.WARDEN_FFMPEG);
    if (!ffmpeg) {
      const where = values.WARDEN_FFMPEG ? `WARDEN_FFMPEG (${values.WARDEN_FFMPEG}) is not an executable` : 'there is no ffmpeg on the PATH (install it or set WARDEN_FFMPEG)';
      throw new ConfigError(`Invalid configuration:\n  WARDEN_LIVENESS: on needs ffmpeg to decode liveness videos, and ${where}`);
    }
  }
  return Object.freeze({
    port: values.PORT,
    host: values.HOST,
    databaseUrl: values.DATABASE_URL,
    dataDir: path.resolve(values.WARDEN_DATA_DIR),
    embeddedPgPort: values.WARDEN_EMBEDDED_PG_PORT,
    tokenTtlSeconds: values.WARDEN_TOKEN_TTL_SECONDS,
    jwtSecret: values.WARDEN_JWT_SECRET,
    trustedProxies: Object.freeze([...values.WARDEN_TRUSTED_PROXIES]),
    outboundAllow: Object.freeze([...values.WARDEN_OUTBOUND_ALLOW]),
    bodyLimitBytes: values.WARDEN_BODY_LIMIT_BYTES,
    dbPoolMax: values.WARDEN_DB_POOL_MAX,
    lightWorkers: values.WARDEN_LIGHT_WORKERS,
    visionWorkers: values.WARDEN_VISION_WORKERS,
    onnxThreads,
    face: Object.freeze({ model: faceModel, threshold: values.WARDEN_FACE_THRESHOLD ?? faceModel.threshold }),
    liveness: Object.freeze({ enabled: values.WARDEN_LIVENESS === 'on', ffmpeg }),
    jobTimeoutSeconds: values.WARDEN_JOB_TIMEOUT_SECONDS,
    replayDays: values.WARDEN_REPLAY_DAYS,
    jobMaintenanceSeconds: values.WARDEN_JOB_MAINTENANCE_SECONDS,
    adminSessionIdleSeconds: values.WARDEN_ADMIN_SESSION_IDLE_SECONDS,
    redisUrl: values.REDIS_URL,
    thresholds: Object.freeze({ review: values.WARDEN_REVIEW_THRESHOLD, reject: values.WARDEN_REJECT_THRESHOLD }),
    geoipDb: values.GEOIP_DB,
    ipDatacenterList: values.WARDEN_IP_DATACENTER_LIST,
    ipTorList: values.WARDEN_IP_TOR_LIST,
    logLevel: values.LOG_LEVEL,
    publicUrl: values.WARDEN_PUBLIC_URL?.replace(/\/$/, ''),
    ai: Object.freeze({
      gatewayUrl: values.WARDEN_GATEWAY_URL?.replace(/\/$/, '') ?? null,
      gatewayToken: values.WARDEN_GATEWAY_TOKEN ?? '',
      timeoutMs: values.WARDEN_GATEWAY_TIMEOUT_SECONDS * 1000,
      mcpUrl: values.WARDEN_MCP_URL ?? null,
      delegationSeconds: values.WARDEN_AI_DELEGATION_SECONDS,
      retentionDays: values.WARDEN_ASSISTANT_RETENTION_DAYS,
    }),
    push: Object.freeze({ fcm: fcmSettings(values.WARDEN_FCM_SERVICE_ACCOUNT, values.WARDEN_FCM_URL), apns: apnsSettings(values) }),
    videoCall: videoCallSettings(values),
  });
}
