import { pino, type Logger } from 'pino';

/** Paths pino blanks in every log line: credentials, tokens and document images never reach logs. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'api_secret',
  'secret',
  'password',
  'token',
  'access_token',
  'endpoint_token',
  'videocall_token',
  '*.api_secret',
  '*.secret',
  '*.password',
  '*.token',
  '*.access_token',
  '*.endpoint_token',
  '*.videocall_token',
  '*.image',
  '*.snapshot',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}

export type { Logger };
