import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { startServer } from './server.ts';

let config;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(error.message);
  process.exit(78);
}

const logger = createLogger(config.logLevel);
try {
  const running = await startServer(config, logger);
  console.log(`Warden listening on ${running.url} (PORT=${config.port})`);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      logger.info({ signal }, 'shutting down');
      running.close().then(
        () => process.exit(0),
        (error) => {
          logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }
} catch (error) {
  logger.fatal({ err: error }, 'start-up failed');
  console.error(`Warden could not start: ${(error as Error).message}`);
  process.exit(1);
}
