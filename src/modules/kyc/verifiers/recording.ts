import type { AppContext } from '../../../context.ts';
import type { Outcome, VerifyInput } from './common.ts';

/** recording: the video call's recording is stored; its result says where. */
export async function verifyRecording(_app: AppContext, { artifact }: VerifyInput): Promise<Outcome> {
  return { code: 'success', message: 'Recording stored.', data: null, details: { content_type: artifact.content_type, path: artifact.path } };
}
