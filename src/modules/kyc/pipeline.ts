import { randomUUID } from 'node:crypto';
import type { AppContext } from '../../context.ts';
import type { ResultMessage } from '../../realtime/documents.ts';
import { RESULT_TYPES, type ArtifactType } from './constants.ts';
import { markArtifactSucceeded, queueUnansweredSelfies, type SessionRow } from './sessions.ts';
import type { ArtifactRow, Outcome, VerifyInput } from './verifiers/common.ts';
import { VERIFIERS } from './verifiers/index.ts';
import { REFERENCE_SOURCES } from './verifiers/selfie.ts';

async function verify(app: AppContext, input: VerifyInput): Promise<Outcome | 'deferred'> {
  const verifier = VERIFIERS.get(input.artifact.artifact_type as ArtifactType);
  if (!verifier) throw new Error(`no verifier for ${input.artifact.artifact_type}`);
  return verifier(app, input);
}

/**
 * The verify-artifact job: runs the verifier, stores exactly one result per artifact together
 * with the session's progress, and publishes it to the session's websocket clients in the same
 * transaction (it goes out at commit). A retried job whose result is already stored does nothing;
 * on the last attempt a failing verifier becomes a fail result instead of a lost job. A selfie
 * without a reference portrait yet stores nothing and is queued again by the result of the
 * document that brings one, by the session's closing, or by its wait running out
 * (verifiers/selfie.ts). `now` decides whether a document has expired and whether a selfie's
 * wait has run out.
 */
export async function verifyArtifact(app: AppContext, artifactId: string, finalAttempt: boolean, now = new Date()): Promise<void> {
  const artifact = (await app.db('verification_artifacts').where({ id: artifactId }).first()) as ArtifactRow | undefined;
  if (!artifact) return;
  if (await app.db('verification_results').where({ artifact_id: artifactId }).first()) return;
  const session = (await app.db('verification_sessions').where({ id: artifact.session_id }).first()) as SessionRow;
  const type = RESULT_TYPES[artifact.artifact_type as ArtifactType];
  if (!type) return;

  let outcome: Outcome;
  try {
    const verified = await verify(app, { artifact, session, now, today: now.toISOString().slice(0, 10), finalAttempt });
    // A selfie waiting for its document: no result yet; the document's result queues it again.
    if (verified === 'deferred') return;
    outcome = verified;
  } catch (error) {
    if (!finalAttempt) throw error;
    app.logger.error({ err: error, artifactId }, 'verification failed on its last attempt');
    outcome = { code: 'fail', message: 'The verification could not be completed; please upload the document again.', data: null, details: { error: (error as Error).message } };
  }

  const correlationId = randomUUID();
  await app.db.transaction(async (trx) => {
    const inserted = await trx('verification_results')
      .insert({
        id: randomUUID(),
        session_id: session.id,
        artifact_id: artifact.id,
        type,
        code: outcome.code,
        message: outcome.message,
        data: outcome.data === null ? null : JSON.stringify(outcome.data),
        details: JSON.stringify(outcome.details),
        correlation_id: correlationId,
      })
      .onConflict('artifact_id')
      .ignore()
      .returning('id');
    if (inserted.length === 0) return;
    if (outcome.derivedArtifact) await trx('verification_artifacts').insert(outcome.derivedArtifact);
    if (outcome.code === 'success') await markArtifactSucceeded(trx, session.id, artifact.artifact_type);
    if (outcome.mrzData) await trx('verification_sessions').where({ id: session.id }).update({ mrz_data: JSON.stringify(outcome.mrzData) });
    // Selfies that were waiting for a reference portrait are verified now.
    if (REFERENCE_SOURCES.includes(artifact.artifact_type)) await queueUnansweredSelfies(app, trx, session.id);
    const message: ResultMessage = {
      event: 'broadcast',
      client_id: session.created_by.replace(/^merchant:/, ''),
      timestamp: Date.now(),
      correlation_id: correlationId,
      data: { to: session.id, delivery: 'websocket', type, result: { code: outcome.code, data: outcome.data, message: outcome.message } },
    };
    await app.documents.sendToSession(session.id, message, trx);
  });
}
