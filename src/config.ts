import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { DEFAULT_EMBEDDER, loadEmbedderSpec, type EmbedderSpec } from './modules/kyc/vision/embedder.ts';
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
  WARDEN_BODY_LIMIT_BYTES: positiveInt.default(16 * 1024 * 1024),
  WARDEN_DB_POOL_MAX: positiveInt.max(200).default(10),
  WARDEN_LIGHT_WORKERS: positiveInt.max(64).default(Math.max(1, Math.min(os.availableParallelism(), 4))),
  WARDEN_VISION_WORKERS: positiveInt.max(16).default(1),
  WARDEN_ONNX_THREADS: positiveInt.max(64).optional(),
  WARDEN_FACE_MODEL: z.string().min(1).default(DEFAULT_EMBEDDER),
  WARDEN_FACE_THRESHOLD: z.string().trim().min(1, 'must be a number').pipe(z.coerce.number<string>().min(-1).max(1)).optional(),
  WARDEN_JOB_TIMEOUT_SECONDS: positiveInt.max(3600).default(120),
  WARDEN_JOB_MAINTENANCE_SECONDS: positiveInt.max(3600).default(30),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL').optional(),
  WARDEN_REVIEW_THRESHOLD: z.coerce.number().min(0).max(100).default(50),
  WARDEN_REJECT_THRESHOLD: z.coerce.number().min(0).max(100).default(80),
  GEOIP_DB: z.string().min(1).optional(),
  WARDEN_IP_DATACENTER_LIST: z.string().min(1).optional(),
  WARDEN_IP_TOR_LIST: z.string().min(1).optional(),
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
  bodyLimitBytes: number;
  dbPoolMax: number;
  lightWorkers: number;
  visionWorkers: number;
  /** ONNX intra-op threads per vision worker; workers x threads never exceeds the cores. */
  onnxThreads: number;
  /** The face embedding model (its description file) and the similarity threshold in force. */
  face: Readonly<{ model: EmbedderSpec; threshold: number }>;
  jobTimeoutSeconds: number;
  jobMaintenanceSeconds: number;
  redisUrl: string | undefined;
  thresholds: Readonly<{ review: number; reject: number }>;
  geoipDb: string | undefined;
  ipDatacenterList: string | undefined;
  ipTorList: string | undefined;
  logLevel: string;
}>;

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
  return Object.freeze({
    port: values.PORT,
    host: values.HOST,
    databaseUrl: values.DATABASE_URL,
    dataDir: path.resolve(values.WARDEN_DATA_DIR),
    embeddedPgPort: values.WARDEN_EMBEDDED_PG_PORT,
    tokenTtlSeconds: values.WARDEN_TOKEN_TTL_SECONDS,
    jwtSecret: values.WARDEN_JWT_SECRET,
    trustedProxies: Object.freeze([...values.WARDEN_TRUSTED_PROXIES]),
    bodyLimitBytes: values.WARDEN_BODY_LIMIT_BYTES,
    dbPoolMax: values.WARDEN_DB_POOL_MAX,
    lightWorkers: values.WARDEN_LIGHT_WORKERS,
    visionWorkers: values.WARDEN_VISION_WORKERS,
    onnxThreads,
    face: Object.freeze({ model: faceModel, threshold: values.WARDEN_FACE_THRESHOLD ?? faceModel.threshold }),
    jobTimeoutSeconds: values.WARDEN_JOB_TIMEOUT_SECONDS,
    jobMaintenanceSeconds: values.WARDEN_JOB_MAINTENANCE_SECONDS,
    redisUrl: values.REDIS_URL,
    thresholds: Object.freeze({ review: values.WARDEN_REVIEW_THRESHOLD, reject: values.WARDEN_REJECT_THRESHOLD }),
    geoipDb: values.GEOIP_DB,
    ipDatacenterList: values.WARDEN_IP_DATACENTER_LIST,
    ipTorList: values.WARDEN_IP_TOR_LIST,
    logLevel: values.LOG_LEVEL,
  });
}
