import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase, type Database } from '../db/database.ts';
import { CliError, type CommandHandler } from './options.ts';
import { approvalPolicyCommand, decisionWebhookCommand } from './approvals.ts';
import { credentialCommand } from './credential.ts';
import { gatewayCommand } from './gateway.ts';
import { cscaCommand } from './csca.ts';
import { demoCommand } from './demo.ts';
import { eventCommand } from './events.ts';
import { agentTokenCommand, flowCommand } from './kyc.ts';
import { loginTicketCommand, reviewTicketCommand } from './mobile.ts';
import { rulesCommand } from './rules.ts';
import { sanctionsCommand } from './sanctions.ts';
import { groupCommand, staffCommand } from './staff.ts';
import { verifyCommand } from './verify.ts';

/** Commands that work on files alone and never open the database. */
const OFFLINE_COMMANDS: Record<string, (args: string[]) => Promise<unknown>> = { verify: verifyCommand, gateway: gatewayCommand };

const USAGE = `Usage: warden <command> [options]   (every command prints JSON)

  credential create --name NAME [--allow-ip IP|CIDR|*]...
  credential list
  credential deactivate --api-key KEY
  credential activate --api-key KEY
  credential rotate --api-key KEY          (new secret shown once; old secret and tokens refused)
  credential allow-ip --api-key KEY [--ip IP|CIDR|*]... [--remove IP]... [--replace]
  event define --slug SLUG --type 0|1|2 [--name NAME] [--inactive]   (0 Onboarding, 1 Financial, 2 Non-financial)
  event list
  rules load FILE.json [--replace]      (--replace deactivates active rules missing from the file)
  rules list
  sanctions import --format ofac|un|opensanctions FILE...
                                        (ofac: sdn.csv [alt.csv] [add.csv], recognised by name)
  sanctions status
  flow define --code C --artifacts doc_mrz,selfie [--name N] [--video-call] [--default] [--inactive] [--notify URL]
  flow list
  agent-token --session ID [--agent NAME]
  staff create --username U --password P [--email E] [--full-name N] [--superuser] [--video-call-agent] [--group G]...
  staff grant --username U [--perm APP_LABEL.CODENAME]... [--group G]...
  staff deactivate --username U
  staff list
  group create --name G [--perm APP_LABEL.CODENAME]...
  login-ticket --username U [--qr FILE.png]        (single-use mobile pairing ticket, 5 minutes)
  issue_review_ticket --user U [--days N] [--note TEXT] [--qr FILE.png] [--force]
                                        (multi-use mobile ticket; the code is shown once)
  issue_review_ticket --list | --revoke --user U
  csca import FILE... | csca list       (CSCA certificates for chip passive authentication: master list, LDIF, PEM, DER)
  verify mrz IMAGE                      (reads the MRZ of a photograph; no database needed)
  verify doc-front IMAGE                (OCR fields, document outline, portrait; no database needed)
  verify face IMAGE_A IMAGE_B           (faces, similarity, threshold, match; no database needed)
  approval-policy set --model APP.MODEL --operations add,change,delete,decision [--stages N] [--signatures N]
                      [--signer-group G] [--signer-permission APP_LABEL.CODENAME] [--inactive]
  approval-policy list
  decision-webhook set --api-key KEY --url URL   (merchant webhook for compliance decisions; prints the signing secret once)
  gateway --port P [--host H]   (the AI gateway: WARDEN_LLM_URL, WARDEN_LLM_MODEL, WARDEN_LLM_API_KEY, WARDEN_GATEWAY_TOKEN)
  demo [--customers N] [--days D] [--seed S] [--force]
                                        (fills an empty installation with a seeded demo data set;
                                         prints a credential and staff passwords once)
  db migrate

Environment: DATABASE_URL (external PostgreSQL) or WARDEN_DATA_DIR (embedded, default ./data).`;

const COMMANDS: Record<string, CommandHandler> = {
  credential: credentialCommand,
  csca: cscaCommand,
  demo: demoCommand,
  'approval-policy': approvalPolicyCommand,
  'decision-webhook': decisionWebhookCommand,
  event: eventCommand,
  flow: flowCommand,
  'agent-token': agentTokenCommand,
  'login-ticket': loginTicketCommand,
  issue_review_ticket: reviewTicketCommand,
  rules: rulesCommand,
  sanctions: sanctionsCommand,
  staff: staffCommand,
  group: groupCommand,
  db: async (args) => {
    if (args[0] !== 'migrate') throw new CliError(`Unknown db command: ${args[0] ?? '(none)'}\n${USAGE}`, 2);
    return { migrated: true };
  },
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  // Own keys only: `warden constructor` names no command.
  const offline = Object.hasOwn(OFFLINE_COMMANDS, command) ? OFFLINE_COMMANDS[command] : undefined;
  if (offline) {
    try {
      console.log(JSON.stringify(await offline(rest), null, 2));
      return 0;
    } catch (error) {
      console.error(JSON.stringify({ error: (error as Error).message }));
      return error instanceof CliError ? error.exitCode : 1;
    }
  }
  const handler = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!handler) {
    console.error(JSON.stringify({ error: `Unknown command: ${command}` }));
    console.error(USAGE);
    return 2;
  }
  let database: Database | undefined;
  try {
    const config = loadConfig();
    database = await openDatabase(config, () => {});
    const result = await handler(rest, database);
    console.log(JSON.stringify(result, null, 2));
    return 0;
  } catch (error) {
    const known = error instanceof CliError || error instanceof ConfigError;
    console.error(JSON.stringify({ error: (error as Error).message }));
    return known ? (error as CliError).exitCode ?? 1 : 1;
  } finally {
    await database?.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
